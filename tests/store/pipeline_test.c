/* pipeline_test.c — deferred statements (db.h: mv_db_execf_later) on every store: a deferred
 * write that fails fails the whole transaction with its own code and leaves nothing behind,
 * reads in the same transaction see deferred writes, and on PostgreSQL (where they are sent in
 * libpq's pipeline mode) the round trips they save are counted, a statement sent after the
 * commit (a NOTIFY) runs only when it commits and cannot fail it, a connection killed with writes
 * still queued fails as store_unavailable and the pool recovers. */
#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "store/listen.h"
#include "support/stores.h"
#include "test.h"

static const char SQL_CREATE[] =
    "CREATE TABLE p (id INTEGER PRIMARY KEY, v INTEGER NOT NULL CHECK (v >= 0))";
static const char SQL_INSERT[] = "INSERT INTO p (id, v) VALUES (?, ?)";
static const char SQL_INSERT_OTHER[] = "INSERT INTO p (v, id) VALUES (?, ?)";
static const char SQL_SUM[] = "SELECT COUNT(*), COALESCE(SUM(v), 0) FROM p";
static const char SQL_BACKEND_PID[] = "SELECT pg_backend_pid()";
static const char SQL_TERMINATE[] = "SELECT pg_terminate_backend(?, 5000)";
static const char SQL_SLEEP[] = "SELECT pg_sleep(5)";

static mv_code create_t(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE, err);
}

typedef struct {
    int64_t n, sum;
} totals;

static mv_code sum_in(mv_db *db, totals *t, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_SUM, &st, err, "");
    if (st) {
        t->n = mv_stmt_int64(st, 0);
        t->sum = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return rc;
}

static mv_code sum_t(mv_db *db, void *ctx, mv_err *err) { return sum_in(db, ctx, err); }

static totals read_totals(mv_store *s) {
    totals t = {-1, -1};
    mv_err err = {0};
    CHECK_CODE(mv_store_read(s, sum_t, &t, &err), MV_OK, &err);
    return t;
}

static mv_store *fresh(const char *kind, const char *name, const mv_store_options *o) {
    mv_store *s = test_store_fresh_with(kind, name, o);
    mv_err err = {0};
    if (s && mv_store_write(s, create_t, NULL, &err) != MV_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

/* Inserts rows (id, v) from ctx, deferred; a row with v < 0 breaks the CHECK constraint. */
typedef struct {
    int64_t rows[8][2];
    int n;
    mv_code on_unique; /* for the last row */
    totals seen;       /* read after the writes, in the same transaction */
    bool read_after;
} batch;

static mv_code batch_t(mv_db *db, void *ctx, mv_err *err) {
    batch *b = ctx;
    mv_code rc = MV_OK;
    for (int i = 0; i < b->n && rc == MV_OK; i++)
        rc = i == b->n - 1 && b->on_unique != MV_OK
                 ? mv_db_execf_later_unique(db, SQL_INSERT, b->on_unique, err, "ii", b->rows[i][0],
                                            b->rows[i][1])
                 : mv_db_execf_later(db, SQL_INSERT, err, "ii", b->rows[i][0], b->rows[i][1]);
    if (rc == MV_OK && b->read_after) rc = sum_in(db, &b->seen, err);
    return rc;
}

STORE_TEST(reads_after_deferred_writes_in_the_same_transaction_see_them) {
    mv_store *s = fresh(kind, "pl_read", NULL);
    REQUIRE(s);
    mv_err err = {0};
    batch b = {.rows = {{1, 10}, {2, 20}, {3, 30}}, .n = 3, .read_after = true};
    CHECK_CODE(mv_store_write(s, batch_t, &b, &err), MV_OK, &err);
    CHECK_INT(b.seen.n, 3);
    CHECK_INT(b.seen.sum, 60);
    totals t = read_totals(s);
    CHECK_INT(t.n, 3);
    CHECK_INT(t.sum, 60);
    mv_store_close(s);
}

STORE_TEST(a_deferred_unique_violation_fails_the_commit_and_leaves_nothing_behind) {
    mv_store *s = fresh(kind, "pl_unique", NULL);
    REQUIRE(s);
    mv_err err = {0};
    batch first = {.rows = {{1, 1}}, .n = 1};
    REQUIRE(mv_store_write(s, batch_t, &first, &err) == MV_OK);
    /* the duplicate comes after two good rows: they must not commit either */
    batch dup = {.rows = {{5, 5}, {6, 6}, {1, 7}}, .n = 3};
    CHECK_CODE(mv_store_write(s, batch_t, &dup, &err), MV_INTERNAL, &err);
    CHECK(strstr(err.message, "23505") || strstr(err.message, "UNIQUE"));
    /* and one that asks for its own code */
    batch mapped = {.rows = {{7, 7}, {1, 8}}, .n = 2, .on_unique = MV_CLIENT_REQUEST_PENDING};
    CHECK_CODE(mv_store_write(s, batch_t, &mapped, &err), MV_CLIENT_REQUEST_PENDING, &err);
    /* a unique violation by another statement keeps the usual code */
    batch other = {.rows = {{1, 9}, {8, 8}}, .n = 2, .on_unique = MV_CLIENT_REQUEST_PENDING};
    CHECK_CODE(mv_store_write(s, batch_t, &other, &err), MV_INTERNAL, &err);
    totals t = read_totals(s);
    CHECK_INT(t.n, 1);
    CHECK_INT(t.sum, 1);
    /* the connection is fine afterwards */
    batch next = {.rows = {{2, 2}, {3, 3}}, .n = 2, .read_after = true};
    CHECK_CODE(mv_store_write(s, batch_t, &next, &err), MV_OK, &err);
    CHECK_INT(next.seen.n, 3);
    mv_store_close(s);
}

STORE_TEST(a_deferred_check_violation_fails_the_commit_and_leaves_nothing_behind) {
    mv_store *s = fresh(kind, "pl_check", NULL);
    REQUIRE(s);
    mv_err err = {0};
    batch bad = {.rows = {{1, 1}, {2, -1}, {3, 3}}, .n = 3};
    CHECK_CODE(mv_store_write(s, batch_t, &bad, &err), MV_INTERNAL, &err);
    CHECK(strstr(err.message, "check") || strstr(err.message, "CHECK"));
    totals t = read_totals(s);
    CHECK_INT(t.n, 0);
    mv_store_close(s);
}

/* A deferred write fails; the statement after it that needs a result reports that failure. */
static mv_code fail_then_read(mv_db *db, void *ctx, mv_err *err) {
    totals *t = ctx;
    mv_code rc = mv_db_execf_later_unique(db, SQL_INSERT, MV_CLIENT_REQUEST_PENDING, err, "ii",
                                          (int64_t)1, (int64_t)1);
    if (rc != MV_OK) return rc; /* SQLite: at once */
    return sum_in(db, t, err);
}

STORE_TEST(a_deferred_failure_is_reported_by_the_next_statement_that_needs_a_result) {
    mv_store *s = fresh(kind, "pl_next", NULL);
    REQUIRE(s);
    mv_err err = {0};
    batch first = {.rows = {{1, 1}}, .n = 1};
    REQUIRE(mv_store_write(s, batch_t, &first, &err) == MV_OK);
    totals t = {-1, -1};
    CHECK_CODE(mv_store_write(s, fail_then_read, &t, &err), MV_CLIENT_REQUEST_PENDING, &err);
    CHECK_INT(t.n, -1); /* the read did not run */
    mv_store_close(s);
}

/* A callback that swallows the error and returns success: the commit must still fail, with the
 * deferred statement's own code, and commit nothing. */
static mv_code swallow(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_err ignored = {0};
    mv_code rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)9, (int64_t)9);
    if (rc != MV_OK) return rc;
    rc = mv_db_execf_later_unique(db, SQL_INSERT, MV_CLIENT_REQUEST_PENDING, &ignored, "ii",
                                  (int64_t)1, (int64_t)1);
    totals t;
    (void)sum_in(db, &t, &ignored);
    return MV_OK;
}

POSTGRES_TEST(a_swallowed_deferred_failure_still_fails_the_commit_with_its_code) {
    mv_store *s = fresh(kind, "pl_swallow", NULL);
    REQUIRE(s);
    mv_err err = {0};
    batch first = {.rows = {{1, 1}}, .n = 1};
    REQUIRE(mv_store_write(s, batch_t, &first, &err) == MV_OK);
    CHECK_CODE(mv_store_write(s, swallow, NULL, &err), MV_CLIENT_REQUEST_PENDING, &err);
    CHECK(strstr(err.message, "rolled back") != NULL);
    totals t = read_totals(s);
    CHECK_INT(t.n, 1);
    mv_store_close(s);
}

static mv_code sleep_later(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)1, (int64_t)1);
    return rc != MV_OK ? rc : mv_db_execf_later(db, SQL_SLEEP, err, "");
}

POSTGRES_TEST(a_deferred_statement_over_the_timeout_fails_the_commit_as_unavailable) {
    mv_store_options o = {.statement_timeout_ms = 100, .pool_size = 1};
    mv_store *s = fresh(kind, "pl_timeout", &o);
    REQUIRE(s);
    mv_err err = {0};
    int64_t t0 = mv_now_ms();
    CHECK_CODE(mv_store_write(s, sleep_later, NULL, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK(strstr(err.message, "statement timeout") != NULL);
    CHECK(mv_now_ms() - t0 < 4000);
    totals t = read_totals(s);
    CHECK_INT(t.n, 0);
    mv_store_close(s);
}

typedef struct {
    mv_store *killer;
    int64_t pid;
} kill_arg;

static mv_code terminate_t(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_TERMINATE, &st, err, "i", *(int64_t *)ctx);
    bool done = st && mv_stmt_int64(st, 0) == 1;
    mv_stmt_done(st);
    if (rc != MV_OK) return rc;
    return done ? MV_OK : mv_err_set(err, MV_INTERNAL, "backend was not terminated");
}

/* Queues writes, has its own backend killed, then returns: the commit's flush meets the dead
 * connection. */
static mv_code killed_mid_pipeline(mv_db *db, void *ctx, mv_err *err) {
    kill_arg *k = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_BACKEND_PID, &st, err, "");
    k->pid = st ? mv_stmt_int64(st, 0) : 0;
    mv_stmt_done(st);
    if (rc != MV_OK) return rc;
    for (int64_t i = 1; i <= 3 && rc == MV_OK; i++)
        rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", i, i);
    if (rc != MV_OK) return rc;
    mv_err kerr = {0};
    if ((rc = mv_store_write(k->killer, terminate_t, &k->pid, &kerr)) != MV_OK)
        return mv_err_copy(err, &kerr);
    return mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)4, (int64_t)4);
}

POSTGRES_TEST(a_connection_killed_mid_pipeline_fails_as_unavailable_and_the_pool_recovers) {
    mv_store_options one = {.pool_size = 1};
    mv_store *s = fresh(kind, "pl_kill", &one);
    REQUIRE(s);
    const char *url = mv__store_url(s);
    mv_store *killer = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &killer, &err) == MV_OK);
    kill_arg k = {killer, 0};
    CHECK_CODE(mv_store_write(s, killed_mid_pipeline, &k, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK(k.pid > 0);
    CHECK(strstr(err.message, "postgres") != NULL);
    /* the pool's one connection is replaced; nothing of the killed transaction is there */
    totals t = read_totals(s);
    CHECK_INT(t.n, 0);
    batch next = {.rows = {{1, 1}, {2, 2}}, .n = 2};
    CHECK_CODE(mv_store_write(s, batch_t, &next, &err), MV_OK, &err);
    t = read_totals(s);
    CHECK_INT(t.n, 2);
    mv_store_close(killer);
    mv_store_close(s);
}

static mv_code many_t(mv_db *db, void *ctx, mv_err *err) {
    int n = *(int *)ctx;
    mv_code rc = MV_OK;
    for (int i = 1; i <= n && rc == MV_OK; i++)
        rc = mv_db_execf_later(db, i % 2 ? SQL_INSERT : SQL_INSERT_OTHER, err, "ii",
                               (int64_t)(i % 2 ? i : 1), (int64_t)(i % 2 ? 1 : i));
    return rc;
}

STORE_TEST(a_transaction_of_many_deferred_writes_commits_them_all) {
    mv_store *s = fresh(kind, "pl_many", NULL);
    REQUIRE(s);
    mv_err err = {0};
    int n = 1000; /* more than one pipeline holds: flushed on the way */
    CHECK_CODE(mv_store_write(s, many_t, &n, &err), MV_OK, &err);
    totals t = read_totals(s);
    CHECK_INT(t.n, 1000);
    CHECK_INT(t.sum, 1000);
    mv_store_close(s);
}

/* A statement first used in a flush that an earlier failure aborted was never prepared on the
 * server: its next use must prepare it again. */
static mv_code dup_then_new(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)1, (int64_t)1);
    return rc != MV_OK ? rc
                       : mv_db_execf_later(db, SQL_INSERT_OTHER, err, "ii", (int64_t)2, (int64_t)2);
}

static mv_code other_t(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_INSERT_OTHER, NULL, err, "ii", (int64_t)3, (int64_t)3);
}

STORE_TEST(a_statement_first_sent_in_an_aborted_flush_works_afterwards) {
    mv_store_options one = {.pool_size = 1};
    mv_store *s = fresh(kind, "pl_reprepare", &one);
    REQUIRE(s);
    mv_err err = {0};
    batch first = {.rows = {{1, 1}}, .n = 1};
    REQUIRE(mv_store_write(s, batch_t, &first, &err) == MV_OK);
    CHECK_CODE(mv_store_write(s, dup_then_new, NULL, &err), MV_INTERNAL, &err);
    CHECK_CODE(mv_store_write(s, other_t, NULL, &err), MV_OK, &err);
    totals t = read_totals(s);
    CHECK_INT(t.n, 2);
    CHECK_INT(t.sum, 4);
    mv_store_close(s);
}

static mv_code nothing_t(mv_db *db, void *ctx, mv_err *err) {
    (void)db;
    (void)ctx;
    (void)err;
    return MV_OK;
}

static mv_code write_read_write_t(mv_db *db, void *ctx, mv_err *err) {
    totals *t = ctx;
    mv_code rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)10, (int64_t)1);
    if (rc == MV_OK) rc = sum_in(db, t, err);
    if (rc == MV_OK) rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)11, (int64_t)1);
    return rc;
}

POSTGRES_TEST(
    deferred_writes_begin_and_commit_share_one_round_trip_and_reads_and_rollbacks_wait_for_no_answer) {
    mv_store *s = fresh(kind, "pl_trips", NULL);
    REQUIRE(s);
    mv_err err = {0};
    /* warm: every statement prepared once on the connection the pool hands out */
    batch warm = {.rows = {{1, 1}, {2, 2}, {3, 3}}, .n = 3, .read_after = true};
    REQUIRE(mv_store_write(s, batch_t, &warm, &err) == MV_OK);
    uint64_t t0 = mv__store_round_trips(s);
    batch b = {.rows = {{4, 4}, {5, 5}, {6, 6}}, .n = 3};
    CHECK_CODE(mv_store_write(s, batch_t, &b, &err), MV_OK, &err);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 1); /* BEGIN, 3 inserts, COMMIT */
    t0 = mv__store_round_trips(s);
    CHECK_CODE(mv_store_write(s, nothing_t, NULL, &err), MV_OK, &err);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 0); /* nothing to send at all */
    t0 = mv__store_round_trips(s);
    totals t = {0};
    CHECK_CODE(mv_store_write(s, write_read_write_t, &t, &err), MV_OK, &err);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 2); /* BEGIN+insert+read, insert+COMMIT */
    CHECK_INT(t.n, 7);
    /* a read transaction's COMMIT is sent without waiting; its answer is read with the next
     * flush of the connection */
    t0 = mv__store_round_trips(s);
    t = read_totals(s);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 1); /* BEGIN+read+COMMIT */
    CHECK_INT(t.n, 8);
    t = read_totals(s);
    CHECK_INT(t.n, 8);
    batch more = {.rows = {{20, 1}}, .n = 1};
    t0 = mv__store_round_trips(s);
    CHECK_CODE(mv_store_write(s, batch_t, &more, &err), MV_OK, &err);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 1);
    CHECK_CODE(mv_store_write(s, create_t, NULL, &err), MV_INTERNAL, &err); /* already exists */
    t = read_totals(s);
    CHECK_INT(t.n, 9);
    /* a transaction that fails at its commit: one round trip, the ROLLBACK read later */
    batch dup = {.rows = {{21, 1}, {20, 1}}, .n = 2};
    t0 = mv__store_round_trips(s);
    CHECK_CODE(mv_store_write(s, batch_t, &dup, &err), MV_INTERNAL, &err);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 1);
    t = read_totals(s);
    CHECK_INT(t.n, 9);
    mv_store_close(s);
}

static const char SQL_WAKE[] = "SELECT pg_notify('pl_wake', '')";
static const char SQL_BAD_AFTER[] = "SELECT 1 / 0";

typedef struct {
    bool fail_callback; /* roll back instead */
    bool bad_after;     /* an after-commit statement that fails */
} wake_arg;

static mv_code wake_t(mv_db *db, void *ctx, mv_err *err) {
    wake_arg *w = ctx;
    mv_code rc =
        mv_db_execf_later(db, SQL_INSERT, err, "ii", (int64_t)(w->bad_after ? 2 : 1), (int64_t)1);
    for (int i = 0; i < 3 && rc == MV_OK; i++) /* asked for three times: sent once */
        rc = mv_db_exec_after_commit(db, SQL_WAKE, err);
    if (rc == MV_OK && w->bad_after) rc = mv_db_exec_after_commit(db, SQL_BAD_AFTER, err);
    if (rc == MV_OK && w->fail_callback) rc = mv_err_set(err, MV_ABORTED, "changed my mind");
    return rc;
}

POSTGRES_TEST(a_statement_after_the_commit_runs_once_only_when_it_commits_and_cannot_fail_it) {
    mv_store_options one = {.pool_size = 1};
    mv_store *s = fresh(kind, "pl_after", &one);
    REQUIRE(s);
    mv__listener *l = NULL;
    mv_err err = {0};
    REQUIRE(mv__listener_new(s, "pl_wake", &l, &err) == MV_OK);
    (void)mv__listener_wait(l, 50); /* connects and listens */
    wake_arg rollback = {.fail_callback = true};
    CHECK_CODE(mv_store_write(s, wake_t, &rollback, &err), MV_ABORTED, &err);
    CHECK(!mv__listener_wait(l, 300)); /* rolled back: no wake-up */
    wake_arg ok = {0};
    uint64_t t0 = mv__store_round_trips(s);
    CHECK_CODE(mv_store_write(s, wake_t, &ok, &err), MV_OK, &err);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - t0), 1); /* with the COMMIT, one flush */
    CHECK(mv__listener_wait(l, 5000));
    CHECK(!mv__listener_wait(l, 200)); /* once */
    /* a failing after-commit statement does not fail the commit (the statements after a commit
     * share one implicit transaction: the wake-up is lost with it) */
    wake_arg bad = {.bad_after = true};
    CHECK_CODE(mv_store_write(s, wake_t, &bad, &err), MV_OK, &err);
    totals t = read_totals(s);
    CHECK_INT(t.n, 2);
    /* and the connection carries on */
    (void)mv__listener_wait(l, 100);
    CHECK_CODE(mv_store_write(s, create_t, NULL, &err), MV_INTERNAL, &err);
    CHECK_CODE(mv_store_write(s, wake_t, &ok, &err), MV_INTERNAL, &err); /* id 1 again */
    batch next = {.rows = {{3, 3}}, .n = 1};
    CHECK_CODE(mv_store_write(s, batch_t, &next, &err), MV_OK, &err);
    t = read_totals(s);
    CHECK_INT(t.n, 3);
    mv__listener_free(l);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(
        reads_after_deferred_writes_in_the_same_transaction_see_them,
        a_deferred_unique_violation_fails_the_commit_and_leaves_nothing_behind,
        a_deferred_check_violation_fails_the_commit_and_leaves_nothing_behind,
        a_deferred_failure_is_reported_by_the_next_statement_that_needs_a_result,
        a_swallowed_deferred_failure_still_fails_the_commit_with_its_code,
        a_deferred_statement_over_the_timeout_fails_the_commit_as_unavailable,
        a_connection_killed_mid_pipeline_fails_as_unavailable_and_the_pool_recovers,
        a_transaction_of_many_deferred_writes_commits_them_all,
        a_statement_first_sent_in_an_aborted_flush_works_afterwards,
        deferred_writes_begin_and_commit_share_one_round_trip_and_reads_and_rollbacks_wait_for_no_answer,
        a_statement_after_the_commit_runs_once_only_when_it_commits_and_cannot_fail_it);
}
