/* timer_test.c — the timer engine (durable/timer.c) on both stores: a due timer fires once and
 * not before; its local effect commits with the fire or not at all; a claim whose daemon died
 * is taken over only after its lease, and the late first claimant changes nothing; re-arming and
 * cancelling win over a fire in flight; a timer that keeps failing is given up; four engines on
 * threads and three processes (one killed with SIGKILL while timers are due) fire every timer
 * exactly once; the claim reads the partial index of pending timers, never the table; the loop
 * fires within a second of due, on PostgreSQL woken by the scheduling daemon's NOTIFY. Time is a
 * manual clock wherever waiting would be slow. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "durable/fixture.h"
#include "durable/timer.h"
#include "store/db.h"

#define T0 INT64_C(1800000000000)

/* ---- helpers -------------------------------------------------------------------------------- */

/* fire_log: one row per committed local effect, written inside the fire's transaction. */
static const char SQL_LOG_TABLE[] = "CREATE TABLE fire_log (timer_id TEXT NOT NULL, pid BIGINT)";
static const char SQL_LOG_INSERT[] = "INSERT INTO fire_log (timer_id, pid) VALUES (?, ?)";
static const char SQL_LOG_COUNT[] = "SELECT COUNT(*), COUNT(DISTINCT timer_id) FROM fire_log";
static const char SQL_LOG_ONE[] = "SELECT COUNT(*) FROM fire_log WHERE timer_id = ?";
static const char SQL_STATE[] = "SELECT state, claims FROM timers WHERE timer_id = ?";

static mv_code exec_fn(mv_db *db, void *ctx, mv_err *err) { return mv_db_exec(db, ctx, err); }

static mv_store *timer_store(const char *kind, const char *name, char *url, size_t n) {
    mv_store *s = fixture_store(kind, name, url, n);
    mv_err err = {0};
    if (s && mv_store_write(s, exec_fn, (void *)SQL_LOG_TABLE, &err) != MV_OK) {
        fprintf(stderr, "fire_log: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

typedef struct {
    const char *prefix;
    int n;
    int64_t due, now;
    const char *kind; /* NULL: "test" */
} sched_arg;

static mv_code sched_fn(mv_db *db, void *ctx, mv_err *err) {
    sched_arg *a = ctx;
    mv_code rc = MV_OK;
    for (int i = 0; i < a->n && rc == MV_OK; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s%d", a->prefix, i);
        rc = mv__timer_schedule(db, id, "default", a->kind ? a->kind : "test", id, a->due, a->now,
                                err);
    }
    return rc;
}

/* n timers prefix0.. of kind, due at due. */
static mv_code schedule_kind(mv_store *s, const char *kind, const char *prefix, int n, int64_t due,
                             int64_t now) {
    sched_arg a = {prefix, n, due, now, kind};
    mv_err err = {0};
    mv_code rc = mv_store_write(s, sched_fn, &a, &err);
    if (rc) fprintf(stderr, "schedule: %s\n", err.message);
    return rc;
}

static mv_code schedule(mv_store *s, const char *prefix, int n, int64_t due, int64_t now) {
    sched_arg a = {prefix, n, due, now, NULL};
    mv_err err = {0};
    mv_code rc = mv_store_write(s, sched_fn, &a, &err);
    if (rc) fprintf(stderr, "schedule: %s\n", err.message);
    return rc;
}

typedef struct {
    const char *sql, *id;
    int64_t a, b;
    char text[32];
} row_arg;

static mv_code row_fn(mv_db *db, void *ctx, mv_err *err) {
    row_arg *r = ctx;
    mv_stmt *st;
    mv_code rc =
        r->id ? mv_db_row(db, r->sql, &st, err, "s", r->id) : mv_db_row(db, r->sql, &st, err, "");
    if (rc) return rc;
    r->a = r->b = -1;
    r->text[0] = '\0';
    if (st) {
        const char *t = mv_stmt_text(st, 0);
        mv_strlcpy(r->text, t ? t : "", sizeof r->text);
        r->a = mv_stmt_int64(st, 0);
        if (mv_stmt_column_count(st) > 1) r->b = mv_stmt_int64(st, 1);
        mv_stmt_done(st);
    }
    return MV_OK;
}

static row_arg query(mv_store *s, const char *sql, const char *id) {
    row_arg r = {.sql = sql, .id = id};
    mv_err err = {0};
    if (mv_store_read(s, row_fn, &r, &err) != MV_OK) fprintf(stderr, "query: %s\n", err.message);
    return r;
}

/* The kind under test: local logs the fire; call may be told to fail. */
typedef struct {
    atomic_int calls, locals, fail_calls, fail_locals;
    mv_store *rearm_store; /* when set, the call re-arms the timer it fires (a re-arm in flight) */
} test_kind;

typedef struct {
    const char *id;
    int64_t now;
} rearm_arg;

static mv_code rearm_fn(mv_db *db, void *ctx, mv_err *err) {
    rearm_arg *r = ctx;
    return mv__timer_schedule(db, r->id, "default", "test", r->id, r->now + 60000, r->now, err);
}

static mv_code test_call(void *ctx, const mv__timer *t, int64_t now, mv_err *err) {
    test_kind *k = ctx;
    atomic_fetch_add(&k->calls, 1);
    if (k->rearm_store) { /* the same id armed again, a minute later, while this fire is in flight
                           */
        rearm_arg r = {t->id, now};
        mv_code rc = mv_store_write(k->rearm_store, rearm_fn, &r, err);
        if (rc) return rc;
    }
    if (atomic_load(&k->fail_calls) > 0) {
        atomic_fetch_sub(&k->fail_calls, 1);
        return mv_err_set(err, MV_IO, "the call failed");
    }
    return MV_OK;
}

static mv_code test_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    (void)now;
    test_kind *k = ctx;
    atomic_fetch_add(&k->locals, 1);
    mv_code rc = mv_db_execf(db, SQL_LOG_INSERT, NULL, err, "si", t->ref, (int64_t)getpid());
    if (rc == MV_OK && atomic_load(&k->fail_locals) > 0) {
        atomic_fetch_sub(&k->fail_locals, 1);
        return mv_err_set(err, MV_IO, "the local effect failed");
    }
    return rc;
}

static mv__timer_engine *engine(mv_store *s, int64_t *now, test_kind *k, int64_t lease_ms,
                                int batch) {
    static mv_clock clocks[8];
    static int used;
    mv_clock *c = now ? &clocks[used++ % 8] : NULL;
    if (c) *c = mv_manual_clock(now);
    mv__timer_engine_options o = {.clock = c, .lease_ms = lease_ms, .batch = batch};
    mv__timer_engine *e = NULL;
    mv_err err = {0};
    if (mv__timer_engine_new(s, &o, &e, &err) != MV_OK ||
        mv__timer_engine_register(e, "test", test_call, test_local, k, &err) != MV_OK) {
        fprintf(stderr, "engine: %s\n", err.message);
        mv__timer_engine_free(e);
        return NULL;
    }
    return e;
}

static mv__timer_pass run(mv__timer_engine *e) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(e, &p, &err) != MV_OK) fprintf(stderr, "run: %s\n", err.message);
    return p;
}

/* ---- one engine, a manual clock -------------------------------------------------------------- */

STORE_TEST(a_due_timer_fires_once_and_not_before_it_is_due) {
    mv_store *s = timer_store(kind, "once", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {0};
    mv__timer_engine *e = engine(s, &now, &k, 30000, 0);
    REQUIRE(e);
    REQUIRE(schedule(s, "a", 3, T0 + 1000, T0) == MV_OK);
    int64_t next = 0;
    mv_err err = {0};
    CHECK_CODE(mv__timer_next_at(s, &next, &err), MV_OK, &err);
    CHECK_INT(next, T0 + 1000);
    now = T0 + 999;
    CHECK_INT(run(e).claimed, 0);
    CHECK_INT(atomic_load(&k.locals), 0);
    now = T0 + 1000;
    mv__timer_pass p = run(e);
    CHECK_INT(p.claimed, 3);
    CHECK_INT(p.fired, 3);
    now = T0 + 1000000; /* long after every lease: nothing is due again */
    CHECK_INT(run(e).claimed, 0);
    row_arg c = query(s, SQL_LOG_COUNT, NULL);
    CHECK_INT(c.a, 3);
    CHECK_INT(c.b, 3);
    row_arg st = query(s, SQL_STATE, "a1");
    CHECK_STR(st.text, "fired");
    CHECK_INT(st.b, 1);
    CHECK_CODE(mv__timer_next_at(s, &next, &err), MV_OK, &err);
    CHECK(next == INT64_MAX);
    mv__timer_engine_free(e);
    mv_store_close(s);
}

STORE_TEST(a_failed_local_effect_rolls_the_fire_back_and_the_timer_fires_after_its_lease) {
    mv_store *s = timer_store(kind, "rollback", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {0};
    atomic_store(&k.fail_locals, 1);
    mv__timer_engine *e = engine(s, &now, &k, 5000, 0);
    REQUIRE(e);
    REQUIRE(schedule(s, "r", 2, T0, T0) == MV_OK);
    mv__timer_pass p = run(e);
    CHECK_INT(p.claimed, 2);
    /* the batch failed as a whole (its first local effect), then each timer fired alone */
    CHECK_INT(p.fired, 2);
    CHECK_INT(atomic_load(&k.locals), 3);
    row_arg c = query(s, SQL_LOG_COUNT, NULL);
    CHECK_INT(c.a, 2); /* the batch's rows rolled back with it */
    mv__timer_engine_free(e);

    /* a timer whose local effect fails alone stays leased, then fires once its lease ends */
    test_kind k2 = {0};
    atomic_store(&k2.fail_locals, 2); /* the batch, then the timer alone */
    e = engine(s, &now, &k2, 5000, 0);
    REQUIRE(e);
    REQUIRE(schedule(s, "x", 1, T0, T0) == MV_OK);
    p = run(e);
    CHECK_INT(p.claimed, 1);
    CHECK_INT(p.fired, 0);
    CHECK_INT(p.failed, 1);
    CHECK_INT(query(s, SQL_LOG_ONE, "x0").a, 0);
    row_arg st = query(s, SQL_STATE, "x0");
    CHECK_STR(st.text, "pending");
    now = T0 + 4999;
    CHECK_INT(run(e).claimed, 0);
    now = T0 + 5000;
    p = run(e);
    CHECK_INT(p.fired, 1);
    CHECK_INT(query(s, SQL_LOG_ONE, "x0").a, 1);
    st = query(s, SQL_STATE, "x0");
    CHECK_STR(st.text, "fired");
    CHECK_INT(st.b, 2); /* claimed twice: reconcile reports such timers */
    mv__timer_engine_free(e);
    mv_store_close(s);
}

STORE_TEST(
    a_claim_whose_daemon_died_is_taken_over_after_its_lease_and_the_late_fire_changes_nothing) {
    mv_store *s = timer_store(kind, "lease", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind ka = {0}, kb = {0};
    atomic_store(&ka.fail_calls, 1); /* daemon A claims, then "dies" in its call */
    mv__timer_engine *a = engine(s, &now, &ka, 10000, 0);
    mv__timer_engine *b = engine(s, &now, &kb, 10000, 0);
    REQUIRE(a && b);
    REQUIRE(schedule(s, "l", 1, T0, T0) == MV_OK);
    mv__timer_pass p = run(a);
    CHECK_INT(p.claimed, 1);
    CHECK_INT(p.fired, 0);
    now = T0 + 9999;
    CHECK_INT(run(b).claimed, 0); /* A's lease still holds */
    now = T0 + 10000;
    p = run(b);
    CHECK_INT(p.claimed, 1);
    CHECK_INT(p.fired, 1);
    now = T0 + 100000;
    CHECK_INT(run(a).claimed, 0);
    CHECK_INT(run(b).claimed, 0);
    CHECK_INT(query(s, SQL_LOG_ONE, "l0").a, 1);
    CHECK_INT(atomic_load(&ka.locals), 0);
    CHECK_INT(atomic_load(&kb.locals), 1);
    mv__timer_engine_free(a);
    mv__timer_engine_free(b);
    mv_store_close(s);
}

STORE_TEST(a_timer_re_armed_while_it_fires_keeps_its_new_due_time_and_the_old_fire_does_nothing) {
    mv_store *s = timer_store(kind, "rearm", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {.rearm_store = s};
    mv__timer_engine *e = engine(s, &now, &k, 10000, 0);
    REQUIRE(e);
    REQUIRE(schedule(s, "m", 1, T0, T0) == MV_OK);
    mv__timer_pass p = run(e);
    CHECK_INT(p.claimed, 1);
    CHECK_INT(p.fired, 0);
    CHECK_INT(atomic_load(&k.locals), 0);
    row_arg st = query(s, SQL_STATE, "m0");
    CHECK_STR(st.text, "pending");
    CHECK_INT(st.b, 0);
    int64_t next = 0;
    mv_err err = {0};
    CHECK_CODE(mv__timer_next_at(s, &next, &err), MV_OK, &err);
    CHECK_INT(next, T0 + 60000);
    k.rearm_store = NULL;
    now = T0 + 60000;
    CHECK_INT(run(e).fired, 1);
    CHECK_INT(query(s, SQL_LOG_ONE, "m0").a, 1);
    mv__timer_engine_free(e);
    mv_store_close(s);
}

typedef struct {
    const char *id;
    int64_t now;
    bool cancelled;
} cancel_arg;

static mv_code cancel_fn(mv_db *db, void *ctx, mv_err *err) {
    cancel_arg *c = ctx;
    return mv__timer_cancel(db, c->id, c->now, &c->cancelled, err);
}

STORE_TEST(a_cancelled_timer_never_fires_and_a_fired_one_cannot_be_cancelled) {
    mv_store *s = timer_store(kind, "cancel", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {0};
    mv__timer_engine *e = engine(s, &now, &k, 10000, 0);
    REQUIRE(e);
    REQUIRE(schedule(s, "c", 2, T0 + 10, T0) == MV_OK);
    mv_err err = {0};
    cancel_arg c = {"c0", T0};
    CHECK_CODE(mv_store_write(s, cancel_fn, &c, &err), MV_OK, &err);
    CHECK(c.cancelled);
    now = T0 + 10;
    CHECK_INT(run(e).fired, 1);
    CHECK_INT(query(s, SQL_LOG_ONE, "c0").a, 0);
    CHECK_STR(query(s, SQL_STATE, "c0").text, "cancelled");
    cancel_arg late = {"c1", now};
    CHECK_CODE(mv_store_write(s, cancel_fn, &late, &err), MV_OK, &err);
    CHECK(!late.cancelled);
    CHECK_STR(query(s, SQL_STATE, "c1").text, "fired");
    mv__timer_engine_free(e);
    mv_store_close(s);
}

STORE_TEST(a_timer_that_keeps_failing_is_given_up_after_the_claim_limit) {
    mv_store *s = timer_store(kind, "giveup", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {0};
    atomic_store(&k.fail_calls, 1000);
    mv__timer_engine *e = engine(s, &now, &k, 1000, 0);
    REQUIRE(e);
    REQUIRE(schedule(s, "g", 1, T0, T0) == MV_OK);
    int given_up = 0;
    for (int i = 0; i <= MV__TIMER_MAX_CLAIMS + 2; i++, now += 1000)
        given_up += run(e).given_up;
    CHECK_INT(given_up, 1);
    CHECK_INT(atomic_load(&k.calls), MV__TIMER_MAX_CLAIMS);
    row_arg st = query(s, SQL_STATE, "g0");
    CHECK_STR(st.text, "failed");
    CHECK_INT(st.b, MV__TIMER_MAX_CLAIMS + 1);
    CHECK_INT(query(s, SQL_LOG_ONE, "g0").a, 0);
    mv__timer_engine_free(e);
    mv_store_close(s);
}

STORE_TEST(a_claim_takes_at_most_a_batch_and_leaves_the_rest_due_for_the_next) {
    mv_store *s = timer_store(kind, "batch", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {0};
    mv__timer_engine *e = engine(s, &now, &k, 60000, 10);
    REQUIRE(e);
    REQUIRE(schedule(s, "b", 25, T0, T0) == MV_OK);
    CHECK_INT(run(e).fired, 10);
    CHECK_INT(run(e).fired, 10);
    CHECK_INT(run(e).fired, 5);
    CHECK_INT(run(e).claimed, 0);
    row_arg c = query(s, SQL_LOG_COUNT, NULL);
    CHECK_INT(c.b, 25);
    mv__timer_engine_free(e);
    mv_store_close(s);
}

typedef struct {
    const char *id, *tenant, *kind;
    int64_t due;
} put_timer;

static mv_code put_fn(mv_db *db, void *ctx, mv_err *err) {
    const put_timer *p = ctx;
    mv_code rc = MV_OK;
    for (; rc == MV_OK && p->id; p++)
        rc = mv__timer_schedule(db, p->id, p->tenant, p->kind, p->id, p->due, T0, err);
    return rc;
}

STORE_TEST(the_timer_list_pages_in_due_order_and_a_tenant_sees_only_its_own_timers) {
    mv_store *s = timer_store(kind, "list", NULL, 0);
    REQUIRE(s);
    put_timer p[] = {{"e1", "acme", "expiry", T0 + 3},
                     {"e2", "acme", "snooze", T0 + 1},
                     {"e3", "other", "expiry", T0 + 2},
                     {"e4", "acme", "expiry", T0 + 2},
                     {NULL, NULL, NULL, 0}};
    mv_err err = {0};
    REQUIRE(mv_store_write(s, put_fn, p, &err) == MV_OK);
    json_t *page = NULL;
    mv_timers_filter f = {.tenant_id = "acme", .limit = 2};
    CHECK_CODE(mv_timers_list(s, &f, &page, &err), MV_OK, &err);
    json_t *rows = json_object_get(page, "timers");
    REQUIRE(json_array_size(rows) == 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 0), "id")), "e2");
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 1), "id")), "e4");
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 1), "state")), "pending");
    const char *cursor = json_string_value(json_object_get(page, "nextCursor"));
    REQUIRE(cursor);
    char saved[256];
    mv_strlcpy(saved, cursor, sizeof saved);
    json_decref(page);
    f.cursor = saved;
    CHECK_CODE(mv_timers_list(s, &f, &page, &err), MV_OK, &err);
    rows = json_object_get(page, "timers");
    CHECK_INT(json_array_size(rows), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(rows, 0), "id")), "e1");
    CHECK(json_is_null(json_object_get(page, "nextCursor")));
    json_decref(page);
    mv_timers_filter all = {.kind = "expiry"};
    CHECK_CODE(mv_timers_list(s, &all, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(page, "timers")), 3); /* every tenant's */
    json_decref(page);
    mv_timers_filter bad = {.state = "sleeping"};
    CHECK_CODE(mv_timers_list(s, &bad, &page, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "state") != NULL);
    mv_timers_filter badc = {.cursor = "!!"};
    CHECK_CODE(mv_timers_list(s, &badc, &page, &err), MV_INVALID_PAGINATION, &err);
    json_t *counts = NULL;
    CHECK_CODE(mv_timers_count(s, &counts, &err), MV_OK, &err);
    CHECK_INT(json_array_size(counts), 2); /* expiry/pending 3, snooze/pending 1 */
    CHECK_INT(json_integer_value(json_object_get(json_array_get(counts, 0), "count")), 3);
    json_decref(counts);
    mv_store_close(s);
}

STORE_TEST(
    a_kind_without_a_call_fires_in_the_claims_transaction_and_a_failure_falls_back_to_each_alone) {
    mv_store *s = timer_store(kind, "local", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    test_kind k = {0};
    mv_clock clock = mv_manual_clock(&now);
    mv__timer_engine_options o = {.clock = &clock, .lease_ms = 10000};
    mv__timer_engine *e = NULL;
    mv_err err = {0};
    REQUIRE(mv__timer_engine_new(s, &o, &e, &err) == MV_OK);
    REQUIRE(mv__timer_engine_register(e, "local", NULL, test_local, &k, &err) == MV_OK);
    REQUIRE(schedule_kind(s, "local", "o", 5, T0, T0) == MV_OK);
    uint64_t trips = mv__store_round_trips(s);
    mv__timer_pass p = run(e);
    CHECK_INT(p.claimed, 5);
    CHECK_INT(p.fired, 5);
    CHECK_INT(atomic_load(&k.calls), 0);
    if (strcmp(kind, "postgres") == 0) /* BEGIN + claim + 5 × (fire, effect) + COMMIT at most */
        CHECK(mv__store_round_trips(s) - trips <= 13);
    CHECK_INT(query(s, SQL_LOG_COUNT, NULL).b, 5);
    /* a local effect fails once: the claim rolls back with it, then each timer fires alone */
    atomic_store(&k.fail_locals, 1);
    REQUIRE(schedule_kind(s, "local", "q", 4, T0 + 5, T0) == MV_OK);
    now = T0 + 5;
    p = run(e);
    CHECK_INT(p.claimed, 4);
    CHECK_INT(p.fired, 4);
    row_arg c = query(s, SQL_LOG_COUNT, NULL);
    CHECK_INT(c.a, 9);
    CHECK_INT(c.b, 9);
    now = T0 + 1000000;
    CHECK_INT(run(e).claimed, 0);
    mv__timer_engine_free(e);
    mv_store_close(s);
}

/* An asynchronous kind: start keeps the call pending; a helper thread ends them all together. */
typedef struct {
    test_kind k; /* first: the local effect (test_local) shares the kind's context */
    pthread_mutex_t mu;
    int started, max_started_at_first_wake;
    void (*wake[8])(void *);
    void *wake_ctx[8];
    int finished;
} async_kind;

static mv_code async_start(void *ctx, const mv__timer *t, int64_t now, void (*wake)(void *),
                           void *wake_ctx, void **pending, mv_err *err) {
    (void)now;
    (void)err;
    async_kind *a = ctx;
    pthread_mutex_lock(&a->mu);
    int i = a->started++;
    a->wake[i] = wake;
    a->wake_ctx[i] = wake_ctx;
    pthread_mutex_unlock(&a->mu);
    *pending = strcmp(t->id, "y2") == 0 ? (void *)"fail" : (void *)"ok";
    return MV_OK;
}

static mv_code async_finish(void *ctx, void *pending, mv_err *err) {
    async_kind *a = ctx;
    pthread_mutex_lock(&a->mu);
    a->finished++;
    pthread_mutex_unlock(&a->mu);
    return strcmp(pending, "ok") == 0 ? MV_OK : mv_err_set(err, MV_IO, "the call failed");
}

static void *async_ender(void *arg) {
    async_kind *a = arg;
    for (int t = 0; t < 400; t++) { /* until every call started, or 2 s */
        pthread_mutex_lock(&a->mu);
        int n = a->started;
        pthread_mutex_unlock(&a->mu);
        if (n == 5) break;
        usleep(5000);
    }
    pthread_mutex_lock(&a->mu);
    a->max_started_at_first_wake = a->started;
    int n = a->started;
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < n; i++)
        a->wake[i](a->wake_ctx[i]);
    return NULL;
}

STORE_TEST(every_asynchronous_call_of_a_claim_is_started_before_any_is_waited_for) {
    mv_store *s = timer_store(kind, "async", NULL, 0);
    REQUIRE(s);
    int64_t now = T0;
    mv_clock clock = mv_manual_clock(&now);
    async_kind a = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mv__timer_engine_options o = {.clock = &clock, .lease_ms = 10000};
    mv__timer_engine *e = NULL;
    mv_err err = {0};
    REQUIRE(mv__timer_engine_new(s, &o, &e, &err) == MV_OK);
    REQUIRE(mv__timer_engine_register_async(e, "async", async_start, async_finish, test_local, &a,
                                            &err) == MV_OK);
    REQUIRE(schedule_kind(s, "async", "y", 5, T0, T0) == MV_OK);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, async_ender, &a) == 0);
    mv__timer_pass p = run(e);
    pthread_join(th, NULL);
    CHECK_INT(a.max_started_at_first_wake, 5);
    CHECK_INT(a.finished, 5);
    CHECK_INT(p.claimed, 5);
    CHECK_INT(p.fired, 4);
    CHECK_INT(p.failed, 1);
    CHECK_INT(query(s, SQL_LOG_ONE, "y2").a, 0); /* its call failed: left to its lease */
    CHECK_STR(query(s, SQL_STATE, "y2").text, "pending");
    CHECK_INT(query(s, SQL_LOG_COUNT, NULL).b, 4);
    mv__timer_engine_free(e);
    mv_store_close(s);
}

/* ---- many engines ------------------------------------------------------------------------------
 */

typedef struct {
    mv_store *s;
    test_kind *k;
    int64_t *now;
    atomic_int *fired;
} racer;

static void *race_main(void *arg) {
    racer *r = arg;
    mv__timer_engine *e = engine(r->s, r->now, r->k, 60000, 50);
    if (!e) return NULL;
    for (int idle = 0; idle < 3;) {
        mv__timer_pass p = run(e);
        atomic_fetch_add(r->fired, p.fired);
        idle = p.claimed == 0 ? idle + 1 : 0;
    }
    mv__timer_engine_free(e);
    return NULL;
}

STORE_TEST(four_engines_on_threads_fire_every_due_timer_exactly_once) {
    mv_store *s = timer_store(kind, "threads", NULL, 0);
    REQUIRE(s);
    enum { N = 2000 };
    REQUIRE(schedule(s, "t", N, T0, T0) == MV_OK);
    int64_t now = T0 + 1;
    test_kind k = {0};
    atomic_int fired = 0;
    racer r = {s, &k, &now, &fired};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&th[i], NULL, race_main, &r) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(atomic_load(&fired), N);
    row_arg c = query(s, SQL_LOG_COUNT, NULL);
    CHECK_INT(c.a, N);
    CHECK_INT(c.b, N);
    mv_store_close(s);
}

/* A child process: an engine loop on its own store connection, with a real clock. */
static void child_loop(const char *url, int64_t lease_ms, int ready_fd) {
    mv_store *cs = NULL;
    mv_err ce = {0};
    test_kind k = {0};
    if (mv_store_open(url, NULL, &cs, &ce) != MV_OK) _exit(3);
    mv__timer_engine *e = engine(cs, NULL, &k, lease_ms, 20);
    if (!e) _exit(4);
    char b = 'r';
    if (write(ready_fd, &b, 1) != 1) _exit(5);
    for (;;) {
        mv__timer_pass p = run(e);
        if (p.claimed == 0) usleep(5000);
    }
}

STORE_TEST(
    three_processes_fire_every_timer_exactly_once_though_one_is_killed_while_timers_are_due) {
    char url[600];
    mv_store *s = timer_store(kind, "procs", url, sizeof url);
    REQUIRE(s);
    enum { N = 3000 };
    int64_t start = mv_now_ms();
    REQUIRE(schedule(s, "p", N, start, start) == MV_OK);
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        kids[i] = fork();
        REQUIRE(kids[i] >= 0);
        if (kids[i] == 0) child_loop(url, 1000, ready[1]);
    }
    char b;
    for (int i = 0; i < 3; i++)
        CHECK(read(ready[0], &b, 1) == 1);
    /* kill -9 the first as soon as it has fired something, with most timers still due */
    for (int i = 0; i < 2000; i++) {
        if (query(s, SQL_LOG_COUNT, NULL).a > 50) break;
        usleep(1000);
    }
    kill(kids[0], SIGKILL);
    int st = 0;
    waitpid(kids[0], &st, 0);
    CHECK(WIFSIGNALED(st));
    int64_t left = query(s, SQL_LOG_COUNT, NULL).a;
    CHECK(left < N); /* killed while timers were due */
    /* the others fire the rest, the dead one's claims after their lease */
    for (int i = 0; i < 600 && query(s, SQL_LOG_COUNT, NULL).a < N; i++)
        usleep(50 * 1000);
    usleep(1500 * 1000); /* past every lease: nothing fires twice late */
    for (int i = 1; i < 3; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], &st, 0);
    }
    close(ready[0]);
    close(ready[1]);
    row_arg c = query(s, SQL_LOG_COUNT, NULL);
    CHECK_INT(c.a, N);
    CHECK_INT(c.b, N);
    mv_store_close(s);
}

/* ---- the claim's plan, and the loop ------------------------------------------------------------
 */

extern const char *const mv__timer_plan_sql[][2]; /* durable/timer.c */

typedef struct {
    int i; /* the statement */
    char plan[4096];
} plan_arg;

/* The plan of statement a->i, its parameters bound as its binds say. */
static mv_code plan_fn(mv_db *db, void *ctx, mv_err *err) {
    plan_arg *a = ctx;
    static char sql[8][1024]; /* the statement cache keys on the pointer: a buffer each */
    bool pg = mv_db_kind(db) == MV_STORE_POSTGRES;
    snprintf(sql[a->i], sizeof sql[0], "%s %s", pg ? "EXPLAIN (COSTS OFF)" : "EXPLAIN QUERY PLAN",
             mv__timer_plan_sql[a->i][0]);
    static const char no_seq[] = "SET LOCAL enable_seqscan = off";
    mv_code rc = pg ? mv_db_exec(db, no_seq, err) : MV_OK;
    mv_stmt *st;
    if (rc || (rc = mv_db_prepare(db, sql[a->i], &st, err))) return rc;
    const char *binds = mv__timer_plan_sql[a->i][1];
    for (int p = 0; binds[p]; p++) {
        if (binds[p] == 's')
            mv_stmt_bind_text(st, p + 1, "k");
        else
            mv_stmt_bind_int64(st, p + 1, 1);
    }
    size_t len = 0;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1 && len < sizeof a->plan - 200) {
        const char *line = mv_stmt_text(st, pg ? 0 : 3);
        len += (size_t)snprintf(a->plan + len, sizeof a->plan - len, "%s\n", line ? line : "");
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

/* A whole-table read: SQLite's "SCAN timers" without an index, PostgreSQL's Seq Scan. */
static bool scans_the_table(const char *plan) {
    if (strstr(plan, "Seq Scan")) return true;
    for (const char *p = plan; (p = strstr(p, "SCAN ")) != NULL; p += 5) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (!memmem(p, n, "USING", 5) && memmem(p, n, "timers", 6)) return true;
    }
    return false;
}

STORE_TEST(the_claim_and_the_fire_read_the_index_of_pending_timers_never_the_table) {
    mv_store *s = timer_store(kind, "plan", NULL, 0);
    REQUIRE(s);
    bool pg = strcmp(kind, "postgres") == 0;
    for (int i = 0; mv__timer_plan_sql[i][0]; i++) {
        plan_arg a = {.i = i};
        mv_err err = {0};
        CHECK_CODE(mv_store_write(s, plan_fn, &a, &err), MV_OK, &err);
        CHECK(strstr(a.plan, "timers_pending_by_next") != NULL);
        CHECK(!scans_the_table(a.plan));
        if (i == 0) { /* the claim: the due range in order, then each row by its key */
            CHECK(strstr(a.plan, "TEMP B-TREE") == NULL && strstr(a.plan, "Sort") == NULL);
            CHECK(strstr(a.plan, pg ? "timers_pkey" : "(timer_id=?)") != NULL);
        }
        if (i == 1) /* the fire of a claim's rows: exactly their next_at, not every pending timer */
            CHECK(strstr(a.plan, pg ? "Index Cond: (next_at =" : "(next_at=?)") != NULL);
        if (test_current_failed_ || getenv("PLANS"))
            fprintf(stderr, "%s\n%s", mv__timer_plan_sql[i][0], a.plan);
    }
    mv_store_close(s);
}

typedef struct {
    atomic_int n;
    atomic_llong lag;
} fired_log;

static void on_fired(void *ctx, const mv__timer *t, int64_t lag_ms) {
    (void)t;
    fired_log *f = ctx;
    atomic_store(&f->lag, lag_ms);
    atomic_fetch_add(&f->n, 1);
}

/* On PostgreSQL the sleeping loop (5 s with nothing due) is woken by the scheduler's NOTIFY; on
 * SQLite it polls every 250 ms. Either way the timer fires well within a second of due. */
STORE_TEST(the_loop_fires_a_timer_scheduled_while_it_sleeps_within_a_second_of_due) {
    char url[600];
    mv_store *s = timer_store(kind, "loop", url, sizeof url);
    REQUIRE(s);
    test_kind k = {0};
    fired_log f = {0};
    mv__timer_engine_options o = {.poll_ms = 250, .on_fired = on_fired, .on_fired_ctx = &f};
    mv__timer_engine *e = NULL;
    mv_err err = {0};
    REQUIRE(mv__timer_engine_new(s, &o, &e, &err) == MV_OK);
    REQUIRE(mv__timer_engine_register(e, "test", test_call, test_local, &k, &err) == MV_OK);
    REQUIRE(mv__timer_engine_start(e, &err) == MV_OK);
    usleep(300 * 1000); /* the loop has looked and gone to sleep */
    /* scheduled through another store handle, as another daemon would */
    mv_store *other = NULL;
    REQUIRE(mv_store_open(url, NULL, &other, &err) == MV_OK);
    int64_t due = mv_now_ms() + 400;
    REQUIRE(schedule(other, "w", 1, due, mv_now_ms()) == MV_OK);
    mv_store_close(other);
    for (int i = 0; i < 400 && atomic_load(&f.n) == 0; i++)
        usleep(10 * 1000);
    CHECK_INT(atomic_load(&f.n), 1);
    CHECK(atomic_load(&f.lag) >= 0);
    CHECK(atomic_load(&f.lag) < 1000);
    mv__timer_engine_free(e);
    CHECK_INT(query(s, SQL_LOG_ONE, "w0").a, 1);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(
        a_due_timer_fires_once_and_not_before_it_is_due,
        a_failed_local_effect_rolls_the_fire_back_and_the_timer_fires_after_its_lease,
        a_claim_whose_daemon_died_is_taken_over_after_its_lease_and_the_late_fire_changes_nothing,
        a_timer_re_armed_while_it_fires_keeps_its_new_due_time_and_the_old_fire_does_nothing,
        a_cancelled_timer_never_fires_and_a_fired_one_cannot_be_cancelled,
        a_timer_that_keeps_failing_is_given_up_after_the_claim_limit,
        a_claim_takes_at_most_a_batch_and_leaves_the_rest_due_for_the_next,
        the_timer_list_pages_in_due_order_and_a_tenant_sees_only_its_own_timers,
        a_kind_without_a_call_fires_in_the_claims_transaction_and_a_failure_falls_back_to_each_alone,
        every_asynchronous_call_of_a_claim_is_started_before_any_is_waited_for,
        four_engines_on_threads_fire_every_due_timer_exactly_once,
        three_processes_fire_every_timer_exactly_once_though_one_is_killed_while_timers_are_due,
        the_claim_and_the_fire_read_the_index_of_pending_timers_never_the_table,
        the_loop_fires_a_timer_scheduled_while_it_sleeps_within_a_second_of_due);
}
