/* store_test.c — the SQL layer on every store (SQLite files, and PostgreSQL databases when
 * MISSIVE_TEST_PG is set): migrations (also from concurrent processes), transactions, value
 * round trips, placeholders, read snapshots, concurrent writers and compare-and-set under
 * contention (real threads and processes); then PostgreSQL's own failure modes: a lost
 * connection, a statement timeout, a commit after a failed statement. */
#include <pthread.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "store/driver.h"
#include "support/stores.h"
#include "test.h"

/* How many migrations there are (versions may have gaps while branches land). */
static int migration_count(void) {
    int n = 0;
    while (mv_migrations[n])
        n++;
    return n;
}

static mv_store *open_url(const char *url, const mv_store_options *o) {
    mv_store *s = NULL;
    mv_err err = {0};
    if (!url) return NULL;
    if (mv_store_open(url, o, &s, &err) != MV_OK) {
        fprintf(stderr, "open %s: %s\n", url, err.message);
        return NULL;
    }
    return s;
}

STORE_TEST(migrate_creates_schema_and_is_idempotent_after_reopen) {
    const char *url = test_store_url(kind, "m");
    REQUIRE(url);
    mv_store *s;
    mv_err err = {0};
    int applied = -1, v = -1;
    REQUIRE((s = open_url(url, NULL)));
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, 0);
    CHECK_CODE(mv_store_check_schema(s, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, migration_count());
    mv_store_close(s);
    REQUIRE((s = open_url(url, NULL)));
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, 0);
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, mv_store_latest_version());
    CHECK_CODE(mv_store_check_schema(s, &err), MV_OK, &err);
    CHECK_CODE(mv_store_ping(s, &err), MV_OK, &err);
    mv_store_close(s);
}

static const char SQL_COUNT_VERSIONS[] =
    "SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_version";

static mv_code count_versions(mv_db *db, void *ctx, mv_err *err) {
    int64_t *n = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_COUNT_VERSIONS, &st, err);
    if (rc) return rc;
    if (mv_stmt_step(st, err) == 1) {
        n[0] = mv_stmt_int64(st, 0);
        n[1] = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return MV_OK;
}

STORE_TEST(processes_migrating_at_once_apply_each_migration_once) {
    for (int round = 0; round < 3; round++) {
        const char *url = test_store_url(kind, "conc_migrate");
        REQUIRE(url);
        pid_t pids[3];
        for (int p = 0; p < 3; p++) {
            pids[p] = fork();
            if (pids[p] == 0) {
                mv_store *cs;
                mv_err cerr = {0};
                if (mv_store_open(url, NULL, &cs, &cerr) != MV_OK) {
                    fprintf(stderr, "child open: %s\n", cerr.message);
                    _exit(2);
                }
                int rc = mv_store_migrate(cs, NULL, &cerr);
                if (rc != MV_OK) fprintf(stderr, "child migrate: %s\n", cerr.message);
                mv_store_close(cs);
                _exit(rc == MV_OK ? 0 : 1);
            }
        }
        for (int p = 0; p < 3; p++) {
            int status;
            waitpid(pids[p], &status, 0);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        mv_store *s = open_url(url, NULL);
        REQUIRE(s);
        mv_err err = {0};
        int64_t n[2] = {-1, -1};
        CHECK_CODE(mv_store_read(s, count_versions, n, &err), MV_OK, &err);
        CHECK_INT(n[0], migration_count());
        CHECK_INT(n[1], n[0]);
        CHECK_CODE(mv_store_check_schema(s, &err), MV_OK, &err);
        mv_store_close(s);
    }
}

/* Daemons started with --no-migrate check the schema while another one migrates. */
STORE_TEST(processes_checking_and_migrating_a_new_store_at_once_all_succeed) {
    for (int round = 0; round < 3; round++) {
        const char *url = test_store_url(kind, "conc_check");
        REQUIRE(url);
        pid_t pids[4];
        for (int p = 0; p < 4; p++) {
            pids[p] = fork();
            if (pids[p] == 0) {
                mv_store *cs;
                mv_err cerr = {0};
                int v;
                if (mv_store_open(url, NULL, &cs, &cerr) != MV_OK) {
                    fprintf(stderr, "child open: %s\n", cerr.message);
                    _exit(2);
                }
                int rc = p == 0 ? mv_store_migrate(cs, NULL, &cerr)
                                : mv_store_schema_version(cs, &v, &cerr);
                if (rc != MV_OK) fprintf(stderr, "child %d: %s\n", p, cerr.message);
                mv_store_close(cs);
                _exit(rc == MV_OK ? 0 : 1);
            }
        }
        for (int p = 0; p < 4; p++) {
            int status;
            waitpid(pids[p], &status, 0);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        mv_store *s = open_url(url, NULL);
        REQUIRE(s);
        mv_err err = {0};
        CHECK_CODE(mv_store_check_schema(s, &err), MV_OK, &err);
        mv_store_close(s);
    }
}

static const char SQL_FAKE_FUTURE[] =
    "INSERT INTO schema_version (version, name, applied_at) VALUES (9999, 'future', 0)";

static mv_code add_future(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_FAKE_FUTURE, NULL, err, "");
}

STORE_TEST(store_with_newer_schema_is_refused) {
    mv_store *s = test_store_fresh(kind, "future");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, add_future, NULL, &err) == MV_OK);
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_SCHEMA_TOO_NEW, &err);
    CHECK(strstr(err.message, "9999") != NULL);
    CHECK_CODE(mv_store_check_schema(s, &err), MV_SCHEMA_TOO_NEW, &err);
    mv_store_close(s);
}

TEST(unknown_scheme_names_the_accepted_ones) {
    mv_store *s = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_store_open("bogus:", NULL, &s, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "sqlite:") && strstr(err.message, "postgres://"));
    CHECK(s == NULL);
    CHECK_CODE(mv_store_open("sqlite::memory:", NULL, &s, &err), MV_INVALID_ARGUMENT, &err);
    mv_store_options o = {.allow_memory = true};
    CHECK_CODE(mv_store_open("sqlite::memory:", &o, &s, &err), MV_OK, &err);
    CHECK(s && mv_store_is_memory(s));
    mv_store_close(s);
}

TEST(postgres_url_that_cannot_connect_is_unavailable_and_a_malformed_one_invalid) {
    mv_store *s = NULL;
    mv_err err = {0};
    CHECK_CODE(
        mv_store_open("postgresql:///x?host=/nonexistent-missive-dir&port=1", NULL, &s, &err),
        MV_STORE_UNAVAILABLE, &err);
    CHECK(strstr(err.message, "cannot connect") != NULL);
    CHECK(s == NULL);
    CHECK_CODE(mv_store_open("postgres://h/db?nosuchoption=1", NULL, &s, &err), MV_INVALID_ARGUMENT,
               &err);
    CHECK(strstr(err.message, "invalid PostgreSQL URL") && strstr(err.message, "nosuchoption"));
    CHECK_CODE(mv_store_open("postgresql://[::1/db", NULL, &s, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(s == NULL);
}

static const char SQL_CREATE_T[] =
    "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, owner TEXT, version INTEGER NOT NULL)";
static const char SQL_INSERT_T[] = "INSERT INTO t (id, owner, version) VALUES (?, ?, 0)";
static const char SQL_COUNT_T[] = "SELECT COUNT(*), COALESCE(SUM(version), 0) FROM t";
static const char SQL_CAS_T[] =
    "UPDATE t SET owner = ?, version = version + 1 WHERE id = ? AND version = ?";

static mv_code create_t(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE_T, err);
}

static mv_code insert_then_fail(mv_db *db, void *ctx, mv_err *err) {
    mv_code rc = mv_db_execf(db, SQL_INSERT_T, NULL, err, "is", *(int64_t *)ctx, "x");
    if (rc != MV_OK) return rc;
    return mv_err_set(err, MV_INTERNAL, "deliberate failure");
}

static mv_code insert_one(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_INSERT_T, NULL, err, "is", *(int64_t *)ctx, "x");
}

typedef struct {
    int64_t count, sum;
} counts;

static mv_code count_t(mv_db *db, void *ctx, mv_err *err) {
    counts *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_COUNT_T, &st, err);
    if (rc) return rc;
    int r = mv_stmt_step(st, err);
    if (r == 1) {
        c->count = mv_stmt_int64(st, 0);
        c->sum = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

STORE_TEST(failed_transaction_rolls_back_everything) {
    mv_store *s = test_store_fresh(kind, "rb");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    int64_t id = 1;
    CHECK_CODE(mv_store_write(s, insert_then_fail, &id, &err), MV_INTERNAL, &err);
    CHECK_STR(err.message, "deliberate failure");
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 0);
    CHECK_CODE(mv_store_write(s, insert_one, &id, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, insert_one, &id, &err), MV_INTERNAL, &err); /* duplicate key */
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    mv_store_close(s);
}

/* ---- values and placeholders ------------------------------------------------------------ */

static const char SQL_CREATE_V[] =
    "CREATE TABLE v (id INTEGER PRIMARY KEY, big BIGINT, txt TEXT, flag INTEGER)";
static const char SQL_INSERT_V[] = "INSERT INTO v (id, big, txt, flag) VALUES (?, ?, ?, ?)";
static const char SQL_SELECT_V[] = "SELECT id, big, txt, flag FROM v ORDER BY id";
static const char SQL_UPDATE_V[] = "UPDATE v SET flag = 0 WHERE flag = ? OR id = ?";
static const char SQL_DELETE_V[] = "DELETE FROM v WHERE id > ?";
static const char SQL_TRICKY[] =
    "SELECT 'it''s ?' || ?, \"q?\" /* a ? in a comment */, COALESCE(?, 'none'), ? + 1 "
    "FROM (SELECT ? AS \"q?\") AS x -- and ? here\n";

typedef struct {
    int rows;
    int64_t changed_update, changed_delete;
    char first_txt[64];
    int64_t big_max, big_min;
    bool null_txt_is_null, empty_txt_is_empty;
    char tricky[4][64];
    int columns;
} values_seen;

static mv_code values_round_trip(mv_db *db, void *ctx, mv_err *err) {
    values_seen *v = ctx;
    mv_code rc;
    if ((rc = mv_db_exec(db, SQL_CREATE_V, err))) return rc;
    if ((rc = mv_db_execf(db, SQL_INSERT_V, NULL, err, "iisb", (int64_t)1, INT64_MAX,
                          "Grüße, 世界 ' \" \\ ?", 1)))
        return rc;
    if ((rc = mv_db_execf(db, SQL_INSERT_V, NULL, err, "iinb", (int64_t)2, INT64_MIN + 1, 1)))
        return rc;
    if ((rc = mv_db_execf(db, SQL_INSERT_V, NULL, err, "iisb", (int64_t)3, (int64_t)-5, "", 0)))
        return rc;
    mv_stmt *st;
    if ((rc = mv_db_prepare(db, SQL_SELECT_V, &st, err))) return rc;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        int64_t id = mv_stmt_int64(st, 0);
        v->rows++;
        v->columns = mv_stmt_column_count(st);
        if (id == 1) {
            snprintf(v->first_txt, sizeof v->first_txt, "%s", mv_stmt_text(st, 2));
            v->big_max = mv_stmt_int64(st, 1);
        } else if (id == 2) {
            v->big_min = mv_stmt_int64(st, 1);
            v->null_txt_is_null = mv_stmt_is_null(st, 2) && mv_stmt_text(st, 2) == NULL;
        } else if (id == 3) {
            v->empty_txt_is_empty =
                !mv_stmt_is_null(st, 2) && mv_stmt_text(st, 2) && mv_stmt_text(st, 2)[0] == '\0';
        }
    }
    mv_stmt_done(st);
    if (r < 0) return err->code;
    if ((rc = mv_db_execf(db, SQL_UPDATE_V, &v->changed_update, err, "ii", (int64_t)1, (int64_t)3)))
        return rc;
    if ((rc = mv_db_execf(db, SQL_DELETE_V, &v->changed_delete, err, "i", (int64_t)0))) return rc;

    /* Four placeholders (the other ?s are inside a literal, an identifier and comments), the
     * second left unbound: an unbound parameter is NULL. */
    if ((rc = mv_db_prepare(db, SQL_TRICKY, &st, err))) return rc;
    mv_stmt_bind_text(st, 1, "A");
    mv_stmt_bind_int64(st, 3, 41);
    mv_stmt_bind_text(st, 4, "B");
    if ((r = mv_stmt_step(st, err)) == 1) {
        for (int i = 0; i < 4; i++)
            snprintf(v->tricky[i], sizeof v->tricky[i], "%s",
                     mv_stmt_text(st, i) ? mv_stmt_text(st, i) : "(null)");
        r = mv_stmt_step(st, err);
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

STORE_TEST(values_and_placeholders_round_trip_the_same_on_every_store) {
    mv_store *s = test_store_fresh(kind, "values");
    REQUIRE(s);
    mv_err err = {0};
    values_seen v = {0};
    CHECK_CODE(mv_store_write(s, values_round_trip, &v, &err), MV_OK, &err);
    CHECK_INT(v.rows, 3);
    CHECK_INT(v.columns, 4);
    CHECK_STR(v.first_txt, "Grüße, 世界 ' \" \\ ?");
    CHECK(v.big_max == INT64_MAX);
    CHECK(v.big_min == INT64_MIN + 1);
    CHECK(v.null_txt_is_null);
    CHECK(v.empty_txt_is_empty);
    CHECK_INT(v.changed_update, 3); /* rows 1 and 2 by flag, row 3 by id */
    CHECK_INT(v.changed_delete, 3);
    CHECK_STR(v.tricky[0], "it's ?A");
    CHECK_STR(v.tricky[1], "B");
    CHECK_STR(v.tricky[2], "none");
    CHECK_STR(v.tricky[3], "42");
    mv_store_close(s);
}

/* ---- read snapshots --------------------------------------------------------------------- */

typedef struct {
    mv_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: reader has read once, 2: writer committed */
    counts first, second;
    mv_code writer_rc;
} snapshot_ctx;

static void set_stage(snapshot_ctx *c, int stage) {
    pthread_mutex_lock(&c->mu);
    c->stage = stage;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void wait_stage(snapshot_ctx *c, int stage) {
    pthread_mutex_lock(&c->mu);
    while (c->stage < stage)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static mv_code read_twice(mv_db *db, void *ctx, mv_err *err) {
    snapshot_ctx *c = ctx;
    mv_code rc = count_t(db, &c->first, err);
    set_stage(c, 1);
    wait_stage(c, 2);
    return rc != MV_OK ? rc : count_t(db, &c->second, err);
}

static void *write_between(void *arg) {
    snapshot_ctx *c = arg;
    wait_stage(c, 1);
    int64_t id = 77;
    mv_err err = {0};
    c->writer_rc = mv_store_write(c->store, insert_one, &id, &err);
    set_stage(c, 2);
    return NULL;
}

STORE_TEST(read_transaction_sees_one_snapshot_while_another_thread_commits) {
    snapshot_ctx c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    c.store = test_store_fresh(kind, "snapshot");
    REQUIRE(c.store);
    mv_err err = {0};
    REQUIRE(mv_store_write(c.store, create_t, NULL, &err) == MV_OK);
    int64_t id = 1;
    REQUIRE(mv_store_write(c.store, insert_one, &id, &err) == MV_OK);
    pthread_t th;
    pthread_create(&th, NULL, write_between, &c);
    CHECK_CODE(mv_store_read(c.store, read_twice, &c, &err), MV_OK, &err);
    pthread_join(th, NULL);
    CHECK_INT(c.writer_rc, MV_OK);
    CHECK_INT(c.first.count, 1);
    CHECK_INT(c.second.count, 1);
    counts after = {0};
    CHECK_CODE(mv_store_read(c.store, count_t, &after, &err), MV_OK, &err);
    CHECK_INT(after.count, 2);
    mv_store_close(c.store);
}

/* ---- concurrency ------------------------------------------------------------------------ */

typedef struct {
    mv_store *store;
    int base;
    int wins;
    int failures;
} worker;

static void *insert_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 200; i++) {
        int64_t id = w->base + i;
        mv_err err = {0};
        if (mv_store_write(w->store, insert_one, &id, &err) != MV_OK) w->failures++;
    }
    return NULL;
}

STORE_TEST(threads_writing_concurrently_lose_nothing) {
    mv_store *s = test_store_fresh(kind, "conc");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){s, i * 1000, 0, 0};
        pthread_create(&th[i], NULL, insert_worker, &w[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++)
        CHECK_INT(w[i].failures, 0);
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 800);
    mv_store_close(s);
}

typedef struct {
    int64_t version;
    int64_t changed;
} cas_arg;

static mv_code cas_once(mv_db *db, void *ctx, mv_err *err) {
    cas_arg *a = ctx;
    return mv_db_execf(db, SQL_CAS_T, &a->changed, err, "sii", "me", (int64_t)1, a->version);
}

static void *cas_worker(void *arg) {
    worker *w = arg;
    cas_arg a = {0, 0};
    mv_err err = {0};
    if (mv_store_write(w->store, cas_once, &a, &err) == MV_OK && a.changed == 1)
        w->wins++;
    else if (err.code != MV_OK)
        w->failures++;
    return NULL;
}

STORE_TEST(compare_and_set_is_won_exactly_once_under_contention) {
    mv_store *s = test_store_fresh(kind, "cas");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    int64_t id = 1;
    REQUIRE(mv_store_write(s, insert_one, &id, &err) == MV_OK);
    pthread_t th[16];
    worker w[16];
    for (int i = 0; i < 16; i++) {
        w[i] = (worker){s, 0, 0, 0};
        pthread_create(&th[i], NULL, cas_worker, &w[i]);
    }
    int wins = 0, failures = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        wins += w[i].wins;
        failures += w[i].failures;
    }
    CHECK_INT(wins, 1);
    CHECK_INT(failures, 0);
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.sum, 1);
    mv_store_close(s);
}

STORE_TEST(two_processes_writing_the_same_store_lose_nothing) {
    const char *url = test_store_url(kind, "procs");
    REQUIRE(url);
    mv_store *s;
    mv_err err = {0};
    REQUIRE((s = open_url(url, NULL)));
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    mv_store_close(s);
    pid_t pids[2];
    for (int p = 0; p < 2; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            mv_store *cs;
            if (mv_store_open(url, NULL, &cs, NULL) != MV_OK) _exit(1);
            worker w = {cs, 10000 * (p + 1), 0, 0};
            insert_worker(&w);
            mv_store_close(cs);
            _exit(w.failures ? 1 : 0);
        }
    }
    for (int p = 0; p < 2; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    REQUIRE((s = open_url(url, NULL)));
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 400);
    mv_store_close(s);
}

/* ---- PostgreSQL failure modes ----------------------------------------------------------- */

static const char SQL_BACKEND_PID[] = "SELECT pg_backend_pid()";
static const char SQL_TERMINATE[] = "SELECT pg_terminate_backend(?, 5000)";

static mv_code backend_pid(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_BACKEND_PID, &st, err);
    if (rc) return rc;
    int r = mv_stmt_step(st, err);
    if (r == 1) *(int64_t *)ctx = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

static mv_code terminate(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_TERMINATE, &st, err);
    if (rc) return rc;
    mv_stmt_bind_int64(st, 1, *(int64_t *)ctx);
    int r = mv_stmt_step(st, err);
    bool done = r == 1 && mv_stmt_int64(st, 0) == 1;
    mv_stmt_done(st);
    if (r < 0) return err->code;
    return done ? MV_OK : mv_err_set(err, MV_INTERNAL, "backend was not terminated");
}

POSTGRES_TEST(lost_connection_fails_the_request_in_flight_and_the_next_one_reconnects) {
    const char *url = test_store_url(kind, "lost");
    REQUIRE(url);
    mv_store_options one = {.pool_size = 1};
    mv_store *s = open_url(url, &one), *killer = open_url(url, NULL);
    REQUIRE(s && killer);
    mv_err err = {0};
    int64_t pid = 0, pid2 = 0;
    CHECK_CODE(mv_store_read(s, backend_pid, &pid, &err), MV_OK, &err);
    REQUIRE(pid > 0);
    CHECK_CODE(mv_store_write(killer, terminate, &pid, &err), MV_OK, &err);
    CHECK_CODE(mv_store_read(s, backend_pid, &pid2, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK(strstr(err.message, "postgres") != NULL);
    CHECK_CODE(mv_store_read(s, backend_pid, &pid2, &err), MV_OK, &err);
    CHECK(pid2 > 0 && pid2 != pid);
    /* The same inside a write transaction: the statement in flight fails, nothing is half-done. */
    CHECK_CODE(mv_store_write(s, create_t, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(killer, terminate, &pid2, &err), MV_OK, &err);
    int64_t id = 5;
    CHECK_CODE(mv_store_write(s, insert_one, &id, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK_CODE(mv_store_write(s, insert_one, &id, &err), MV_OK, &err);
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    mv_store_close(killer);
    mv_store_close(s);
}

static const char SQL_SLEEP[] = "SELECT pg_sleep(5)";

static mv_code sleep_long(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_SLEEP, NULL, err, "");
}

POSTGRES_TEST(statement_over_the_timeout_is_cancelled_as_unavailable) {
    mv_store_options o = {.statement_timeout_ms = 100, .pool_size = 1};
    mv_store *s = test_store_fresh_with(kind, "timeout", &o);
    REQUIRE(s);
    mv_err err = {0};
    int64_t t0 = mv_now_ms();
    CHECK_CODE(mv_store_read(s, sleep_long, NULL, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK(strstr(err.message, "statement timeout") != NULL);
    CHECK(mv_now_ms() - t0 < 4000);
    CHECK_CODE(mv_store_ping(s, &err), MV_OK, &err);
    mv_store_close(s);
}

/* A callback that treats "already there" as fine and carries on: on PostgreSQL the failed
 * statement has aborted the transaction, so the commit must fail loudly, not roll back silently. */
static mv_code swallow_duplicate(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    (void)err;
    int64_t dup = 1;
    mv_err ignored = {0};
    (void)insert_one(db, &dup, &ignored);
    return MV_OK;
}

POSTGRES_TEST(commit_after_a_swallowed_statement_error_fails_instead_of_losing_writes) {
    mv_store *s = test_store_fresh(kind, "swallow");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    int64_t id = 1;
    REQUIRE(mv_store_write(s, insert_one, &id, &err) == MV_OK);
    CHECK_CODE(mv_store_write(s, swallow_duplicate, NULL, &err), MV_INTERNAL, &err);
    CHECK(strstr(err.message, "rolled back") != NULL);
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    mv_store_close(s);
}

static const char SQL_TAKE_MIGRATION_LOCK[] = "SELECT pg_advisory_xact_lock(7052463)";
static const char SQL_SLEEP_SHORT[] = "SELECT pg_sleep(0.4)";

typedef struct {
    mv_store *store;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool locked;
    mv_code rc;
} lock_holder;

static mv_code hold_migration_lock(mv_db *db, void *ctx, mv_err *err) {
    lock_holder *h = ctx;
    mv_code rc = mv_db_execf(db, SQL_TAKE_MIGRATION_LOCK, NULL, err, "");
    pthread_mutex_lock(&h->mu);
    h->locked = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return rc != MV_OK ? rc : mv_db_execf(db, SQL_SLEEP_SHORT, NULL, err, "");
}

static void *hold_lock_thread(void *arg) {
    lock_holder *h = arg;
    mv_err err = {0};
    h->rc = mv_store_write(h->store, hold_migration_lock, h, &err);
    return NULL;
}

POSTGRES_TEST(migration_waits_for_another_migration_beyond_the_statement_timeout) {
    const char *url = test_store_url(kind, "slow_migrate");
    REQUIRE(url);
    lock_holder h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    mv_store_options quick = {.statement_timeout_ms = 100};
    mv_store *s = open_url(url, &quick);
    h.store = open_url(url, NULL);
    REQUIRE(s && h.store);
    pthread_t th;
    pthread_create(&th, NULL, hold_lock_thread, &h);
    pthread_mutex_lock(&h.mu);
    while (!h.locked)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    mv_err err = {0};
    int applied = -1;
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, migration_count());
    pthread_join(th, NULL);
    CHECK_INT(h.rc, MV_OK);
    mv_store_close(h.store);
    mv_store_close(s);
}

static const char SQL_E_STRING[] = "SELECT E'it\\'s ?' || ?, ? || 'e''?'";

static mv_code e_string(mv_db *db, void *ctx, mv_err *err) {
    char(*out)[32] = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_E_STRING, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "ss", "A", "B");
    int r = mv_stmt_step(st, err);
    if (r == 1) {
        snprintf(out[0], sizeof out[0], "%s", mv_stmt_text(st, 0));
        snprintf(out[1], sizeof out[1], "%s", mv_stmt_text(st, 1));
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

POSTGRES_TEST(placeholder_inside_a_backslash_escaped_string_is_not_a_parameter) {
    mv_store *s = test_store_fresh(kind, "estring");
    REQUIRE(s);
    mv_err err = {0};
    char out[2][32] = {"", ""};
    CHECK_CODE(mv_store_read(s, e_string, out, &err), MV_OK, &err);
    CHECK_STR(out[0], "it's ?A");
    CHECK_STR(out[1], "Be'?");
    mv_store_close(s);
}

static const char SQL_WRITE_IN_READ[] = "INSERT INTO t (id, owner, version) VALUES (9, 'r', 0)";

static mv_code write_in_read(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_WRITE_IN_READ, NULL, err, "");
}

POSTGRES_TEST(read_transaction_refuses_writes) {
    mv_store *s = test_store_fresh(kind, "readonly");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    CHECK_CODE(mv_store_read(s, write_in_read, NULL, &err), MV_INTERNAL, &err);
    CHECK(strstr(err.message, "read-only") != NULL);
    CHECK_CODE(mv_store_write(s, write_in_read, NULL, &err), MV_OK, &err);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(migrate_creates_schema_and_is_idempotent_after_reopen,
                     processes_migrating_at_once_apply_each_migration_once,
                     processes_checking_and_migrating_a_new_store_at_once_all_succeed,
                     store_with_newer_schema_is_refused, unknown_scheme_names_the_accepted_ones,
                     postgres_url_that_cannot_connect_is_unavailable_and_a_malformed_one_invalid,
                     failed_transaction_rolls_back_everything,
                     values_and_placeholders_round_trip_the_same_on_every_store,
                     read_transaction_sees_one_snapshot_while_another_thread_commits,
                     threads_writing_concurrently_lose_nothing,
                     compare_and_set_is_won_exactly_once_under_contention,
                     two_processes_writing_the_same_store_lose_nothing,
                     lost_connection_fails_the_request_in_flight_and_the_next_one_reconnects,
                     statement_over_the_timeout_is_cancelled_as_unavailable,
                     commit_after_a_swallowed_statement_error_fails_instead_of_losing_writes,
                     migration_waits_for_another_migration_beyond_the_statement_timeout,
                     placeholder_inside_a_backslash_escaped_string_is_not_a_parameter,
                     read_transaction_refuses_writes);
}
