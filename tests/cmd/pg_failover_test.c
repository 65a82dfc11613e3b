/* pg_failover_test.c — missived on a multi-host PostgreSQL URL through a failover, with real
 * processes: a private primary whose commits wait for its synchronous streaming standby, the
 * daemon on `postgresql://primary,standby/…?target_session_attrs=read-write`, creates driven from
 * four threads; the primary dies (pg_ctl stop -m immediate), a second later the standby is
 * promoted, the creates go on. Every create answered 201 — before, during or after — is in the
 * promoted database (no acknowledged write lost); every other answer is 503 store_unavailable
 * (never a 500, never no answer); 201s come back within 10 s of the promotion without restarting
 * the daemon. Skips (saying so) only when PostgreSQL's server binaries are not installed. */
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "missive/base.h"
#include "store/listen.h"
#include "support/daemon_proc.h"
#include "support/pg_private.h"
#include "test.h"

#define WORKERS 4
#define MAX_ANSWERS 40000

typedef struct answer {
    int64_t at; /* ms since the start, when the answer came */
    long status;
    char code[40];
    char id[40]; /* the message id of a 201 */
    int worker;
} answer;

typedef struct drive {
    int port;
    int64_t t0;
    atomic_int stop;
    pthread_mutex_t mu;
    answer *answers;
    int n;
} drive;

typedef struct worker {
    drive *d;
    int index;
} worker;

static void *work(void *p) {
    worker *w = p;
    drive *d = w->d;
    for (int i = 0; !atomic_load(&d->stop); i++) {
        char headers[128];
        snprintf(headers, sizeof headers, "X-User-Id: ana\nIdempotency-Key: w%d-%d", w->index, i);
        test_reply t = test_http(d->port, "POST", "/messages/new/note", headers, "{\"n\": 1}");
        answer a = {.at = mv_now_ms() - d->t0, .status = t.status, .worker = w->index};
        const char *code = test_reply_code(&t);
        mv_strlcpy(a.code, code ? code : "", sizeof a.code);
        const char *id = mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id");
        mv_strlcpy(a.id, id ? id : "", sizeof a.id);
        test_reply_free(&t);
        pthread_mutex_lock(&d->mu);
        if (d->n < MAX_ANSWERS) d->answers[d->n++] = a;
        pthread_mutex_unlock(&d->mu);
        if (a.status != 201) mv_sleep_ms(20); /* a client backing off a little */
    }
    return NULL;
}

/* Every worker had a 201 after `since` (ms since the start). */
static bool all_created_since(drive *d, int64_t since) {
    bool seen[WORKERS] = {false};
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->n; i++)
        if (d->answers[i].status == 201 && d->answers[i].at > since)
            seen[d->answers[i].worker] = true;
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < WORKERS; i++)
        if (!seen[i]) return false;
    return true;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The message ids in the database at url (sorted, malloc'd; *n their count), or NULL. */
static char **stored_ids(const char *url, int *n) {
    *n = 0;
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pg_failover: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PGresult *r = PQexec(c, "SELECT id FROM messages");
    char **ids = NULL;
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        *n = PQntuples(r);
        ids = calloc((size_t)*n + 1, sizeof *ids);
        for (int i = 0; ids && i < *n; i++)
            ids[i] = strdup(PQgetvalue(r, i, 0));
        if (ids) qsort(ids, (size_t)*n, sizeof *ids, cmp_str);
    }
    PQclear(r);
    PQfinish(c);
    return ids;
}

/* Runs sql on the server at url; false (and the error on stderr) when it fails. */
static bool run_sql(const char *url, const char *sql) {
    PGconn *c = PQconnectdb(url);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    bool ok = r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
    if (!ok) fprintf(stderr, "pg_failover: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return ok;
}

/* Sends NOTIFY on the server at url until the listener wakes, for up to ms; true when it did. */
static bool notified(mv__listener *l, const char *url, int64_t ms) {
    for (int64_t until = mv_now_ms() + ms; mv_now_ms() < until;) {
        run_sql(url, "NOTIFY pg_failover_test");
        if (mv__listener_wait(l, 300)) return true;
    }
    return false;
}

/* Answers from index `from` on: 201s, 503 store_unavailable, and anything else (printed). */
static void tally(drive *d, int from, int *created, int *unavailable, int *other) {
    *created = *unavailable = *other = 0;
    pthread_mutex_lock(&d->mu);
    for (int i = from; i < d->n; i++) {
        const answer *a = &d->answers[i];
        if (a->status == 201) {
            (*created)++;
        } else if (a->status == 503 && strcmp(a->code, "store_unavailable") == 0) {
            (*unavailable)++;
        } else if ((*other)++ < 5) {
            fprintf(stderr, "unexpected answer at %lld ms: %ld %s\n", (long long)a->at, a->status,
                    a->code);
        }
    }
    pthread_mutex_unlock(&d->mu);
}

static int answers_so_far(drive *d) {
    pthread_mutex_lock(&d->mu);
    int n = d->n;
    pthread_mutex_unlock(&d->mu);
    return n;
}

/* What a failed REQUIRE would leave behind: removed at exit whatever happened. */
static pg_private primary, standby;
static pid_t daemon_pid = -1;

static void clean_up(void) {
    if (daemon_pid > 0) kill(daemon_pid, SIGKILL);
    pg_private_remove(&standby);
    pg_private_remove(&primary);
}

static bool start_daemon(const char *store, int port, pid_t *pid, char *log, size_t log_size) {
    char dir[600], path[800], config[800];
    mv_strlcpy(dir, test_tmp_path("failover"), sizeof dir);
    snprintf(path, sizeof path, "%s/templates", dir);
    if (mkdir(dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/templates/note.json", dir);
    if (!test_write_file(path, "{\"templateCd\": \"note\", \"receiverContent\": {\"title\": \"N\"},"
                               " \"prepare\": {\"toUser\": \"bob\"}, \"actions\": []}"))
        return false;
    snprintf(config, sizeof config, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"auth\": {\"mode\": \"headers\"}}",
                         store, dir))
        return false;
    snprintf(log, log_size, "%s/daemon.log", dir);
    *pid = test_daemon_start(config, port, NULL, log);
    return *pid > 0;
}

TEST(a_switchover_to_the_synchronous_standby_loses_no_acknowledged_create_and_heals_itself) {
    if (!pg_private_available()) {
        printf("SKIP %s: PostgreSQL's server binaries are not installed (scripts/deps installs "
               "them)\n",
               __func__);
        return;
    }
    atexit(clean_up);
    REQUIRE(pg_private_start_sync(&primary));
    REQUIRE(pg_private_start_standby(&primary, &standby));
    char url[600];
    snprintf(url, sizeof url,
             "postgresql://127.0.0.1:%d,127.0.0.1:%d/postgres?user=postgres"
             "&target_session_attrs=read-write&connect_timeout=2",
             primary.port, standby.port);
    int port = test_free_port();
    pid_t pid = -1;
    char log[900];
    REQUIRE(start_daemon(url, port, &pid, log, sizeof log));
    daemon_pid = pid;

    /* a change-notification listener (what live streams wait on) on the same URL */
    mv_store *store = NULL;
    mv__listener *listener = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &store, &err) == MV_OK);
    REQUIRE(mv__listener_new(store, "pg_failover_test", &listener, &err) == MV_OK);
    CHECK(notified(listener, primary.url, 5000));

    drive d = {.port = port, .t0 = mv_now_ms(), .answers = calloc(MAX_ANSWERS, sizeof(answer))};
    REQUIRE(d.answers);
    pthread_mutex_init(&d.mu, NULL);
    pthread_t threads[WORKERS];
    worker workers[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = (worker){&d, i};
        pthread_create(&threads[i], NULL, work, &workers[i]);
    }
    mv_sleep_ms(1500);
    int64_t killed_at = mv_now_ms() - d.t0;
    CHECK(pg_private_kill_server(&primary));
    mv_sleep_ms(1000); /* the switch: no primary at all */
    CHECK(pg_private_promote(&standby));
    int64_t promoted_at = mv_now_ms() - d.t0;
    /* LISTEN is set up again, on the new primary */
    CHECK(notified(listener, standby.url, 10000));
    while (!all_created_since(&d, promoted_at) && mv_now_ms() - d.t0 < promoted_at + 15000)
        mv_sleep_ms(50);
    mv_sleep_ms(1000);

    /* the new primary turns read-only under the open connections (as a switchover tool does
     * before demoting it): 503 store_unavailable, not 500; writable again, 201s come back */
    int mark = answers_so_far(&d), created = 0, unavailable_ro = 0, other_ro = 0;
    (void)created;
    CHECK(run_sql(standby.url, "ALTER SYSTEM SET default_transaction_read_only = on"));
    CHECK(run_sql(standby.url, "SELECT pg_reload_conf()"));
    for (int i = 0; i < 200 && unavailable_ro < 20; i++) {
        mv_sleep_ms(25);
        tally(&d, mark, &created, &unavailable_ro, &other_ro);
    }
    CHECK(unavailable_ro >= 20);
    CHECK_INT(other_ro, 0);
    char writable[700];
    snprintf(writable, sizeof writable, "%s&options=-c%%20default_transaction_read_only%%3Doff",
             standby.url);
    CHECK(run_sql(writable, "ALTER SYSTEM RESET default_transaction_read_only"));
    CHECK(run_sql(standby.url, "SELECT pg_reload_conf()"));
    int64_t writable_at = mv_now_ms() - d.t0;
    while (!all_created_since(&d, writable_at) && mv_now_ms() - d.t0 < writable_at + 15000)
        mv_sleep_ms(50);
    CHECK(all_created_since(&d, writable_at));
    tally(&d, mark, &created, &unavailable_ro, &other_ro);
    CHECK_INT(other_ro, 0);
    printf("read-only: %d answers 503 store_unavailable; every worker's 201 again %lld ms after "
           "the server took writes again\n",
           unavailable_ro, (long long)(mv_now_ms() - d.t0 - writable_at));

    atomic_store(&d.stop, 1);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    CHECK(kill(pid, 0) == 0); /* the same daemon all along */

    int before = 0, after = 0, unavailable = 0, other = 0;
    int64_t first_after = -1;
    for (int i = 0; i < d.n; i++) {
        const answer *a = &d.answers[i];
        if (a->status == 201) {
            if (a->at < killed_at) before++;
            if (a->at > promoted_at) {
                after++;
                if (first_after < 0 || a->at < first_after) first_after = a->at;
            }
        } else if (a->status == 503 && strcmp(a->code, "store_unavailable") == 0) {
            unavailable++;
        } else {
            if (other++ < 5)
                fprintf(stderr, "unexpected answer at %lld ms: %ld %s\n", (long long)a->at,
                        a->status, a->code);
        }
    }
    printf("failover: %d answers; 201 before the kill %d, after the promotion %d; 503 "
           "store_unavailable %d; first 201 %lld ms after the promotion (%lld ms after the "
           "kill)\n",
           d.n, before, after, unavailable, (long long)(first_after - promoted_at),
           (long long)(first_after - killed_at));
    CHECK(before > 0);
    CHECK(after > 0);
    CHECK(unavailable > 0); /* the switch was seen */
    CHECK_INT(other, 0);    /* never a 500, never no answer */
    CHECK(first_after >= 0 && first_after - promoted_at <= 10000);

    /* every acknowledged create is in the promoted database */
    int nstored = 0, lost = 0, acked = 0;
    char **ids = stored_ids(standby.url, &nstored);
    REQUIRE(ids);
    for (int i = 0; i < d.n; i++) {
        if (d.answers[i].status != 201) continue;
        acked++;
        const char *key = d.answers[i].id;
        if (!bsearch(&key, ids, (size_t)nstored, sizeof *ids, cmp_str) && lost++ < 5)
            fprintf(stderr, "lost: message %s (answered 201 at %lld ms)\n", key,
                    (long long)d.answers[i].at);
    }
    printf("failover: %d creates acknowledged, %d messages in the promoted database, %d lost\n",
           acked, nstored, lost);
    CHECK_INT(lost, 0);
    CHECK(nstored >= acked);
    for (int i = 0; i < nstored; i++)
        free(ids[i]);
    free(ids);

    mv__listener_free(listener);
    mv_store_close(store);
    CHECK_INT(test_daemon_stop(pid), 0);
    daemon_pid = -1;
    if (test_current_failed_) fprintf(stderr, "daemon log: %s\n", log);
    pthread_mutex_destroy(&d.mu);
    free(d.answers);
}

int main(void) {
    return RUN_TESTS(
        a_switchover_to_the_synchronous_standby_loses_no_acknowledged_create_and_heals_itself);
}
