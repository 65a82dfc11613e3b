/* timers_test.c — expiry timers with real daemons sharing one store: two missived processes on
 * one SQLite file and three on one PostgreSQL database, the first to call out killed with SIGKILL
 * while expiries are due; every message's expiry action reaches the far side under one
 * Idempotency-Key (a call in flight when its daemon died is retried under the same key, never a
 * new one) and every message ends archived by system:expiry. Timers survive a restart of the
 * daemon; on a running daemon an expiry fires within a second of its due time (PostgreSQL: the
 * scheduling daemon's NOTIFY wakes the loop) and shows in /metrics; a bad expiresAt is a 400. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"

#define MAX_DAEMONS 3
#define MAX_CALLS 1024

/* What the far side saw. On the heap, so a test that stops early (a failed REQUIRE leaves its
 * sink running) cannot leave the sink writing into the next test's frame; cluster_stop frees it. */
typedef struct {
    pthread_mutex_t mu;
    int n, by_daemon[MAX_DAEMONS];
    char key[MAX_CALLS][64], message[MAX_CALLS][32];
    int daemon[MAX_CALLS];
    bool bad_trigger; /* a call without trigger "expiry" or user system:expiry */
    int delay_ms;
} far_side;

static void sink_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    far_side *f = ctx;
    res->status = 200;
    res->body = "{\"declined\": true}";
    res->delay_ms = f->delay_ms;
    int d = -1;
    if (sscanf(req->path, "/d%d/decline", &d) != 1 || d < 0 || d >= MAX_DAEMONS) return;
    json_t *b = json_loads(req->body ? req->body : "", 0, NULL);
    const char *key = http_sink_header(req, "Idempotency-Key");
    const char *msg = json_string_value(json_object_get(json_object_get(b, "message"), "id"));
    const char *trig = json_string_value(json_object_get(b, "trigger"));
    const char *user = json_string_value(json_object_get(json_object_get(b, "user"), "id"));
    pthread_mutex_lock(&f->mu);
    if (!trig || strcmp(trig, "expiry") || !user || strcmp(user, "system:expiry"))
        f->bad_trigger = true;
    if (f->n < MAX_CALLS) {
        mv_strlcpy(f->key[f->n], key ? key : "", sizeof f->key[0]);
        mv_strlcpy(f->message[f->n], msg ? msg : "", sizeof f->message[0]);
        f->daemon[f->n] = d;
        f->n++;
    }
    f->by_daemon[d]++;
    pthread_mutex_unlock(&f->mu);
    json_decref(b);
}

typedef struct {
    const char *url;
    char dir[600];
    int n, ports[MAX_DAEMONS];
    pid_t pids[MAX_DAEMONS];
    http_sink *sink;
    far_side *far;
} cluster;

/* Daemon i's own config and templates: its handler URL names it (/d<i>/decline). */
static bool write_daemon_files(cluster *c, int i, int after_ms) {
    char path[900];
    snprintf(path, sizeof path, "%s/t%d", c->dir, i);
    if (mkdir(path, 0700) && errno != EEXIST) return false;
    snprintf(path, sizeof path, "%s/t%d/offer.json", c->dir, i);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"offer\", \"receiverContent\": {\"title\": \"Offer {{name}}\"},"
            " \"prepare\": {\"toUser\": \"{{toUser}}\"},"
            " \"actions\": [{\"actionCd\": \"decline\", \"name\": \"Decline\","
            " \"variant\": \"danger\", \"receiver\": true,"
            " \"handler\": {\"webhook\": \"%s/d%d/decline\"}}],"
            " \"expiry\": {\"afterMs\": %d, \"actionCd\": \"decline\"}}",
            http_sink_url(c->sink), i, after_ms))
        return false;
    snprintf(path, sizeof path, "%s/t%d/note.json", c->dir, i);
    if (!test_write_file(path,
                         "{\"templateCd\": \"note\", \"receiverContent\": {\"title\": \"Note\"},"
                         " \"prepare\": {\"toUser\": \"{{toUser}}\"}, \"actions\": [],"
                         " \"expiry\": {\"senderNotification\": {\"title\": \"Gone\"}}}"))
        return false;
    snprintf(path, sizeof path, "%s/d%d.json", c->dir, i);
    return test_write_file(path,
                           "{\"templates\": \"%s/t%d\", \"auth\": {\"mode\": \"headers\"},"
                           " \"leases\": {\"actionMs\": 1500},"
                           " \"webhooks\": {\"timeoutMs\": 1000, \"connectTimeoutMs\": 500},"
                           " \"timers\": {\"pollMs\": 100, \"leaseMs\": 2000}}",
                           c->dir, i);
}

static bool start_daemon(cluster *c, int i) {
    char config[900], log[900];
    snprintf(config, sizeof config, "%s/d%d.json", c->dir, i);
    snprintf(log, sizeof log, "%s/d%d.log", c->dir, i);
    c->ports[i] = test_free_port();
    c->pids[i] = test_daemon_start(config, c->ports[i], c->url, log);
    if (c->pids[i] < 0) fprintf(stderr, "daemon %d did not come up; see %s\n", i, log);
    return c->pids[i] > 0;
}

static bool cluster_start(cluster *c, const char *kind, const char *name, int n, int after_ms) {
    memset(c, 0, sizeof *c);
    c->n = n;
    c->url = test_store_url(kind, name);
    c->far = calloc(1, sizeof *c->far);
    if (!c->url || !c->far || !(c->sink = http_sink_start())) return false;
    pthread_mutex_init(&c->far->mu, NULL);
    http_sink_set_handler(c->sink, sink_handler, c->far);
    snprintf(c->dir, sizeof c->dir, "%s", test_tmp_path(name));
    if (mkdir(c->dir, 0700) && errno != EEXIST) return false;
    for (int i = 0; i < n; i++)
        if (!write_daemon_files(c, i, after_ms) || !start_daemon(c, i)) return false;
    return true;
}

static void cluster_stop(cluster *c) {
    for (int i = 0; i < c->n; i++)
        if (c->pids[i] > 0) test_daemon_stop(c->pids[i]);
    http_sink_stop(c->sink); /* joined: nothing writes to the far side any more */
    if (c->far) pthread_mutex_destroy(&c->far->mu);
    free(c->far);
    c->far = NULL;
}

static const char *create(int port, const char *tpl, const char *extra, char id[32]) {
    char body[256], path[64];
    snprintf(body, sizeof body, "{\"toUser\": \"bob\", \"name\": \"Boat\"%s%s}", extra ? ", " : "",
             extra ? extra : "");
    snprintf(path, sizeof path, "/messages/new/%s", tpl);
    test_reply r = test_http(port, "POST", path, "X-User-Id: ana", body);
    const char *v = r.status == 201
                        ? mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id")
                        : NULL;
    mv_strlcpy(id, v ? v : "", 32);
    if (!v) fprintf(stderr, "create: %ld\n", r.status);
    test_reply_free(&r);
    return *id ? id : NULL;
}

/* The message as its sender sees it, through daemon port. */
static json_t *get(int port, const char *id) {
    char path[64];
    snprintf(path, sizeof path, "/messages/%s", id);
    test_reply r = test_http(port, "GET", path, "X-User-Id: ana", NULL);
    json_t *m = r.status == 200 ? json_incref(r.json) : NULL;
    test_reply_free(&r);
    return m;
}

static bool archived_by_expiry(int port, const char *id) {
    json_t *m = get(port, id);
    const char *by = mv_json_str(m, "archivedBy");
    bool ok = by && strcmp(by, "system:expiry") == 0;
    json_decref(m);
    return ok;
}

#define N_MESSAGES 24

STORE_TEST(daemons_sharing_a_store_run_each_expiry_action_once_though_one_is_killed_mid_fire) {
    int n = strcmp(kind, "sqlite") == 0 ? 2 : 3;
    cluster c;
    REQUIRE(cluster_start(&c, kind, "kill", n, 1500));
    c.far->delay_ms = 150;
    char ids[N_MESSAGES][32];
    for (int i = 0; i < N_MESSAGES; i++)
        REQUIRE(create(c.ports[i % n], "offer", NULL, ids[i]));
    /* the first daemon to call out is killed after its third call, its claims and one call in
     * flight left to the leases */
    int victim = -1;
    for (int t = 0; t < 1000 && victim < 0; t++) {
        pthread_mutex_lock(&c.far->mu);
        for (int d = 0; d < n; d++)
            if (c.far->by_daemon[d] >= 3) victim = d;
        pthread_mutex_unlock(&c.far->mu);
        if (victim < 0) mv_sleep_ms(10);
    }
    REQUIRE(victim >= 0);
    kill(c.pids[victim], SIGKILL);
    int st = 0;
    waitpid(c.pids[victim], &st, 0);
    CHECK(WIFSIGNALED(st));
    c.pids[victim] = 0;
    int alive = (victim + 1) % n, done = 0;
    for (int t = 0; t < 300 && done < N_MESSAGES; t++) {
        done = 0;
        for (int i = 0; i < N_MESSAGES; i++)
            done += archived_by_expiry(c.ports[alive], ids[i]);
        if (done < N_MESSAGES) mv_sleep_ms(100);
    }
    CHECK_INT(done, N_MESSAGES);
    mv_sleep_ms(2500); /* past every lease: a late duplicate would show now */
    pthread_mutex_lock(&c.far->mu);
    int distinct = 0, others = 0;
    for (int i = 0; i < N_MESSAGES; i++) {
        int keys = 0; /* distinct keys among this message's calls */
        for (int k = 0; k < c.far->n; k++) {
            if (strcmp(c.far->message[k], ids[i]) != 0) continue;
            bool seen = false;
            for (int j = 0; j < k && !seen; j++)
                seen = strcmp(c.far->message[j], ids[i]) == 0 &&
                       strcmp(c.far->key[j], c.far->key[k]) == 0;
            keys += !seen;
        }
        CHECK_INT(keys, 1); /* one Idempotency-Key per message: its effect happened once */
        distinct += keys == 1;
    }
    for (int k = 0; k < c.far->n; k++)
        others += c.far->daemon[k] != victim;
    CHECK(!c.far->bad_trigger);
    pthread_mutex_unlock(&c.far->mu);
    CHECK_INT(distinct, N_MESSAGES);
    if (getenv("TIMERS_TEST_VERBOSE"))
        fprintf(stderr, "calls %d for %d messages, %d by survivors\n", c.far->n, N_MESSAGES,
                others);
    CHECK(others > 0); /* the survivors took the dead daemon's timers over */
    json_t *m = get(c.ports[alive], ids[0]);
    CHECK_STR(mv_json_str(m, "actionCd"), "decline");
    CHECK_STR(mv_json_str(m, "actionState"), "archived");
    json_decref(m);
    cluster_stop(&c);
}

STORE_TEST(an_expiry_due_while_the_daemon_was_down_fires_after_its_restart) {
    cluster c;
    REQUIRE(cluster_start(&c, kind, "restart", 1, 1000));
    char id[32];
    REQUIRE(create(c.ports[0], "offer", NULL, id));
    CHECK_INT(test_daemon_stop(c.pids[0]), 0);
    c.pids[0] = 0;
    mv_sleep_ms(1500); /* due while nobody runs */
    CHECK_INT(c.far->n, 0);
    REQUIRE(start_daemon(&c, 0));
    bool done = false;
    for (int t = 0; t < 100 && !(done = archived_by_expiry(c.ports[0], id)); t++)
        mv_sleep_ms(100);
    CHECK(done);
    CHECK_INT(c.far->n, 1);
    cluster_stop(&c);
}

STORE_TEST(a_running_daemon_fires_an_expiry_within_a_second_of_due_and_counts_it_in_metrics) {
    cluster c;
    REQUIRE(cluster_start(&c, kind, "lag", 1, 1000));
    mv_sleep_ms(300); /* the loop has looked and sleeps (PostgreSQL: up to 5 s) */
    char extra[64], id[32];
    int64_t due = mv_now_ms() + 1200;
    snprintf(extra, sizeof extra, "\"expiresAt\": %lld", (long long)due);
    REQUIRE(create(c.ports[0], "note", extra, id));
    json_t *m = NULL;
    for (int t = 0; t < 300; t++) {
        json_decref(m);
        m = get(c.ports[0], id);
        if (json_is_integer(json_object_get(m, "archivedAt"))) break;
        mv_sleep_ms(20);
    }
    CHECK_INT(json_integer_value(json_object_get(m, "expiresAt")), due);
    CHECK_STR(mv_json_str(m, "archivedBy"), "system:expiry");
    CHECK(json_is_null(json_object_get(m, "actionCd")));
    int64_t lag = json_integer_value(json_object_get(m, "archivedAt")) - due;
    CHECK(lag >= 0);
    CHECK(lag < 1000);
    if (lag >= 1000 || lag < 0) fprintf(stderr, "lag %lld ms\n", (long long)lag);
    json_decref(m);
    /* a past or too distant expiresAt is a 400 naming the field, and creates nothing */
    const char *bad[] = {"{\"toUser\": \"bob\", \"expiresAt\": 5}",
                         "{\"toUser\": \"bob\", \"expiresAt\": 99999999999999}",
                         "{\"toUser\": \"bob\", \"expiresAt\": \"soon\"}"};
    for (int i = 0; i < 3; i++) {
        test_reply b =
            test_http(c.ports[0], "POST", "/messages/new/note", "X-User-Id: ana", bad[i]);
        CHECK_INT(b.status, 400);
        CHECK_STR(test_reply_code(&b), "invalid_argument");
        const char *msg = mv_json_str(json_object_get(b.json, "error"), "message");
        CHECK(msg && strstr(msg, "expiresAt"));
        test_reply_free(&b);
    }
    test_reply list =
        test_http(c.ports[0], "GET", "/messages?archived=true", "X-User-Id: ana", NULL);
    CHECK_INT(json_array_size(json_object_get(list.json, "messages")), 1); /* only the good one */
    test_reply_free(&list);
    const char *paths[] = {"/metrics"};
    long status = 0;
    char *body = NULL;
    test_http_many(c.ports[0], 1, "GET", paths, NULL, NULL, &status, &body);
    CHECK_INT(status, 200);
    CHECK(body && strstr(body, "missive_timers{kind=\"expiry\",state=\"fired\"} 1"));
    CHECK(body && strstr(body, "missive_timer_lag_seconds_count{kind=\"expiry\"} 1"));
    CHECK(body && strstr(body, "missive_timers{kind=\"snooze\",state=\"pending\"} 0"));
    free(body);
    cluster_stop(&c);
}

int main(void) {
    return RUN_TESTS(
        daemons_sharing_a_store_run_each_expiry_action_once_though_one_is_killed_mid_fire,
        an_expiry_due_while_the_daemon_was_down_fires_after_its_restart,
        a_running_daemon_fires_an_expiry_within_a_second_of_due_and_counts_it_in_metrics);
}
