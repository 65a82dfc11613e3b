/* saga_async_test.c — webhook sagas run on the outgoing-call loop (mv_saga_book_start_async,
 * mv_saga_book_run_async) against the synchronous engine, on both stores: the same calls (paths,
 * bodies, Idempotency-Keys), the same records, journal rows and lifecycle events; compensation in
 * reverse order and a failed compensation's backoff; the runner lease kept by the loop's timer
 * while a step is slower than the lease; a run stopped between steps left for the next runner; a
 * call abandoned by the loop left executing, as after a crash. The outcomes are recorded on a
 * small pool of the test's own (the submit function), never on the loop's thread. */
#include <pthread.h>
#include <stdatomic.h>

#include "durable/durable_internal.h"
#include "durable/fixture.h"
#include "durable/timer.h"
#include "missive/saga_webhook.h"
#include "support/http_sink.h"

/* ---- a two-thread pool for the driver's jobs --------------------------------------------- */

typedef struct job {
    void (*fn)(void *);
    void *arg;
    struct job *next;
} job;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    bool stop;
    pthread_t threads[2];
    pthread_t loop_thread; /* the thread completions ran on (the loop's) */
    int jobs, on_loop;     /* jobs run, and how many of them ran on the loop's thread */
} pool;

static void *pool_worker(void *p) {
    pool *q = p;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        job *j = q->head;
        if (!j) break;
        q->head = j->next;
        if (!q->head) q->tail = NULL;
        q->jobs++;
        pthread_mutex_unlock(&q->mu);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* The driver's submit function. */
static void pool_submit(void *ctx, void (*fn)(void *), void *arg) {
    pool *q = ctx;
    job *j = calloc(1, sizeof *j);
    j->fn = fn;
    j->arg = arg;
    pthread_mutex_lock(&q->mu);
    q->loop_thread = pthread_self(); /* the driver submits from call completions only */
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void pool_start(pool *q) {
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&q->threads[i], NULL, pool_worker, q);
}

static void pool_stop(pool *q) {
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < 2; i++)
        pthread_join(q->threads[i], NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
}

/* ---- the end of a run ---------------------------------------------------------------------- */

typedef struct outcome {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int calls;
    mv_code rc;
    json_t *record;
    mv_err err;
    pthread_t thread;
} outcome;

static void outcome_init(outcome *o) {
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
}

static void on_done(void *ctx, mv_code rc, json_t *record, const mv_err *err) {
    outcome *o = ctx;
    pthread_mutex_lock(&o->mu);
    o->calls++;
    o->rc = rc;
    o->record = record;
    mv_err_copy(&o->err, err);
    o->thread = pthread_self();
    o->done = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static bool outcome_wait(outcome *o, int timeout_ms) {
    int64_t until = mv_now_ms() + timeout_ms;
    pthread_mutex_lock(&o->mu);
    while (!o->done && mv_now_ms() < until) {
        pthread_mutex_unlock(&o->mu);
        mv_sleep_ms(5);
        pthread_mutex_lock(&o->mu);
    }
    bool done = o->done;
    pthread_mutex_unlock(&o->mu);
    return done;
}

static void outcome_free(outcome *o) {
    json_decref(o->record);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
}

/* ---- the world ------------------------------------------------------------------------------ */

typedef struct events {
    pthread_mutex_t mu;
    char log[4096];
} events;

/* stage/phase/errorCode of every lifecycle event, one line each (effect ids left out: they are
 * new for every saga) */
static void observe(const mv_effect_event *ev, void *ctx) {
    events *e = ctx;
    pthread_mutex_lock(&e->mu);
    size_t n = strlen(e->log);
    snprintf(e->log + n, sizeof e->log - n, "%s/%s/%s/%d\n", mv_effect_stage_name(ev->stage),
             mv_effect_phase_name(ev->phase), ev->error_code ? ev->error_code : "-", ev->attempt);
    pthread_mutex_unlock(&e->mu);
}

typedef struct env {
    mv_store *store;
    int64_t now;
    mv_clock clock;
    mv_saga_engine *engine;
    mv_journal *journal;
    http_sink *sink;
    mv_webhook_config wh;
    mv_saga_book *book;
    const mv_saga_definition *def;
    mv_loop *loop;
    pool pool;
    mv_abort stop;
    events events;
} env;

static const char SECRET[] = "saga-async-test-secret";

/* real_clock: the wall clock (lease tests), else a manual one; lease_ms 0: the default;
 * charge_extra: more keys of the charge step (", \"idempotent\": true"); timeout_ms: the calls'. */
static bool env_open_with(env *e, const char *kind, const char *name, bool real_clock,
                          int64_t lease_ms, const char *retry, const char *charge_extra,
                          int timeout_ms) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->events.mu, NULL);
    if (!(e->store = fixture_store(kind, name, NULL, 0))) return false;
    e->now = 1000000;
    e->clock = mv_manual_clock(&e->now);
    mv_saga_engine_options o = {.clock = real_clock ? NULL : &e->clock,
                                .runner_lease_ms = lease_ms,
                                .observer = {observe, &e->events}};
    mv_journal_options jo = {.clock = real_clock ? NULL : &e->clock};
    e->sink = http_sink_start();
    e->wh = (mv_webhook_config){
        .secret = SECRET, .secret_len = strlen(SECRET), .timeout_ms = timeout_ms};
    e->book = mv_saga_book_new(&e->wh);
    if (!e->sink || !e->book || mv_saga_engine_new(e->store, &o, &e->engine, NULL) != MV_OK ||
        mv_journal_new(e->store, &jo, &e->journal, NULL) != MV_OK ||
        mv_loop_new(NULL, &e->loop, NULL) != MV_OK)
        return false;
    char text[2048];
    const char *u = http_sink_url(e->sink);
    snprintf(text, sizeof text,
             "{\"name\": \"checkout\", \"capability\": \"orders.checkout\"%s%s,"
             " \"steps\": ["
             "  {\"name\": \"reserve\", \"run\": {\"webhook\": \"%s/reserve\"},"
             "   \"compensate\": {\"webhook\": \"%s/release\"}},"
             "  {\"name\": \"charge\", \"run\": {\"webhook\": \"%s/charge\"},"
             "   \"compensate\": {\"webhook\": \"%s/refund\"}%s},"
             "  {\"name\": \"ship\", \"run\": {\"webhook\": \"%s/ship\"},"
             "   \"compensate\": {\"webhook\": \"%s/unship\"}}]}",
             retry ? ", \"retry\": " : "", retry ? retry : "", u, u, u, u, charge_extra, u, u);
    json_t *j = NULL;
    mv_err err = {0};
    bool ok = mv_json_parse(text, strlen(text), &j, &err) == MV_OK &&
              mv_saga_book_add_json(e->book, j, "checkout.json", &err) == MV_OK;
    json_decref(j);
    if (!ok) return false;
    e->def = mv_saga_book_find(e->book, "checkout");
    pool_start(&e->pool);
    return e->def != NULL;
}

static bool env_open(env *e, const char *kind, const char *name, bool real_clock, int64_t lease_ms,
                     const char *retry) {
    return env_open_with(e, kind, name, real_clock, lease_ms, retry, "", 0);
}

static void env_close(env *e) {
    mv_loop_free(e->loop);
    pool_stop(&e->pool);
    mv_saga_book_free(e->book);
    http_sink_stop(e->sink);
    mv_journal_free(e->journal);
    mv_saga_engine_free(e->engine);
    mv_store_close(e->store);
    pthread_mutex_destroy(&e->events.mu);
}

static mv_saga_async async_env(env *e) {
    return (mv_saga_async){
        .loop = e->loop, .submit = pool_submit, .submit_ctx = &e->pool, .stop = &e->stop};
}

/* Starts saga id on the loop and waits for its end (o filled). */
static bool run_async(env *e, const char *id, const json_t *input, outcome *o) {
    outcome_init(o);
    mv_saga_async a = async_env(e);
    bool started = false;
    mv_err err = {0};
    mv_code rc = mv_saga_book_start_async(e->engine, e->def, &a, NULL, id, input, on_done, o,
                                          &started, NULL, NULL, &err);
    if (rc != MV_OK || !started) {
        fprintf(stderr, "start_async: %s (%s)\n", mv_code_name(rc), err.message);
        return false;
    }
    return outcome_wait(o, 10000);
}

static json_t *step_of(const json_t *record, size_t i) {
    return json_array_get(json_object_get(record, "steps"), i);
}

/* Request i of the sink: path, Idempotency-Key, body (caller decrefs). */
typedef struct seen {
    char path[64], key[64];
    bool signed_ok;
    json_t *body;
} seen;

static bool get_seen(env *e, int i, seen *out) {
    memset(out, 0, sizeof *out);
    http_sink_request r;
    if (!http_sink_get(e->sink, i, &r)) return false;
    snprintf(out->path, sizeof out->path, "%s", r.path);
    const char *k = http_sink_header(&r, "Idempotency-Key");
    snprintf(out->key, sizeof out->key, "%s", k ? k : "");
    char expected[80];
    mv_webhook_signature(SECRET, strlen(SECRET), r.body, r.body_len, expected);
    const char *s = http_sink_header(&r, "X-Missive-Signature");
    out->signed_ok = s && strcmp(s, expected) == 0;
    mv_json_parse(r.body, r.body_len, &out->body, NULL);
    http_sink_request_free(&r);
    return true;
}

/* A body without the ids that differ between two sagas (sagaId, effectId, compensationEffectId,
 * and the effect ids inside earlier results): canonical text, caller frees. */
static char *body_shape(const json_t *body) {
    json_t *b = json_deep_copy(body);
    json_object_del(b, "sagaId");
    json_object_del(b, "effectId");
    json_object_del(b, "compensationEffectId");
    char *s = mv_json_canonical(b);
    json_decref(b);
    return s;
}

/* A record without ids and times: names, states, attempts, results, error codes. */
static char *record_shape(const json_t *rec) {
    json_t *steps = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(rec, "steps"), i, s) {
        json_t *c = json_deep_copy(s);
        json_object_del(c, "effectId");
        json_object_del(c, "compensationEffectId");
        json_object_del(c, "nextAttemptAt");
        json_array_append_new(steps, c);
    }
    json_t *shape = json_pack("{s:O, s:O, s:O, s:o}", "state", json_object_get(rec, "state"),
                              "definition", json_object_get(rec, "definition"), "input",
                              json_object_get(rec, "input"), "steps", steps);
    char *out = mv_json_canonical(shape);
    json_decref(shape);
    return out;
}

/* The journal row of effect id: its state name ("" when absent). */
static const char *journal_state(env *e, const char *id) {
    static mv_effect_record rec;
    if (!id || mv_journal_get(e->journal, id, &rec, NULL) != MV_OK) return "";
    return mv_effect_state_name(rec.state);
}

static void scripted_checkout(env *e, int ship_status) {
    http_sink_push(e->sink, &(http_sink_response){.path = "/reserve", .body = "{\"hold\": 1}"});
    http_sink_push(e->sink, &(http_sink_response){.path = "/charge", .body = "{\"paid\": 42}"});
    http_sink_push(e->sink, &(http_sink_response){.path = "/ship", .status = ship_status});
}

/* Runs the same scripted saga through the engine (sync-N) and on the loop (async-N), then checks
 * that the far side saw the same calls and both records, journals and events are alike. */
static void same_as_the_engine(const char *kind, const char *name, int ship_status,
                               mv_code expected_rc, const char *expected_state,
                               const char *const *paths, int ncalls) {
    env e;
    REQUIRE(env_open(&e, kind, name, false, 0, NULL));
    json_t *input = json_pack("{s:s, s:i}", "order", "o-9", "amount", 42);
    scripted_checkout(&e, ship_status);
    json_t *sync_rec = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(e.engine, e.def, "sync-1", input, NULL, &sync_rec, &err),
               expected_rc, &err);
    REQUIRE(sync_rec);
    char sync_events[4096];
    snprintf(sync_events, sizeof sync_events, "%s", e.events.log);
    e.events.log[0] = '\0';
    REQUIRE(http_sink_count(e.sink) == ncalls);
    scripted_checkout(&e, ship_status);
    outcome o;
    REQUIRE(run_async(&e, "async-1", input, &o));
    CHECK_CODE(o.rc, expected_rc, &o.err);
    CHECK_INT(o.calls, 1);
    CHECK(!pthread_equal(o.thread, e.pool.loop_thread)); /* recorded on the pool, not the loop */
    REQUIRE(o.record);
    CHECK_STR(mv_json_str(o.record, "state"), expected_state);
    CHECK_STR(o.err.message, err.message);
    CHECK_STR(o.err.saga_id, expected_rc == MV_OK ? "" : "async-1");
    /* the same calls in the same order, the same bodies, the keys the records name */
    REQUIRE(http_sink_count(e.sink) == 2 * ncalls);
    for (int i = 0; i < ncalls; i++) {
        seen a, b;
        REQUIRE(get_seen(&e, i, &a));
        REQUIRE(get_seen(&e, ncalls + i, &b));
        CHECK_STR(a.path, paths[i]);
        CHECK_STR(b.path, paths[i]);
        CHECK(a.signed_ok && b.signed_ok);
        char *sa = body_shape(a.body), *sb = body_shape(b.body);
        CHECK_STR(sb, sa);
        free(sa);
        free(sb);
        CHECK_STR(mv_json_str(b.body, "sagaId"), "async-1");
        const char *step = mv_json_str(b.body, "step");
        json_t *st = NULL;
        for (size_t k = 0; k < 3; k++)
            if (step && mv_json_str(step_of(o.record, k), "name") &&
                strcmp(mv_json_str(step_of(o.record, k), "name"), step) == 0)
                st = step_of(o.record, k);
        REQUIRE(st);
        bool comp = json_object_get(b.body, "compensationEffectId") != NULL;
        CHECK_STR(b.key, mv_json_str(st, comp ? "compensationEffectId" : "effectId"));
        json_decref(a.body);
        json_decref(b.body);
    }
    char *ra = record_shape(sync_rec), *rb = record_shape(o.record);
    CHECK_STR(rb, ra);
    free(ra);
    free(rb);
    for (size_t k = 0; k < json_array_size(json_object_get(o.record, "steps")); k++)
        CHECK_STR(journal_state(&e, mv_json_str(step_of(o.record, k), "effectId")),
                  journal_state(&e, mv_json_str(step_of(sync_rec, k), "effectId")));
    CHECK_STR(e.events.log, sync_events);
    /* the runner lease is dropped at the end, as the engine drops it: another runner may go on */
    json_t *again = NULL;
    CHECK_CODE(mv_saga_resume(e.engine, e.def, "async-1", NULL, &again, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(again, "state"), expected_state);
    json_decref(again);
    CHECK_INT(http_sink_count(e.sink), 2 * ncalls);
    json_decref(sync_rec);
    outcome_free(&o);
    json_decref(input);
    env_close(&e);
}

STORE_TEST(three_steps_on_the_loop_send_and_save_what_the_engine_does) {
    const char *paths[] = {"/reserve", "/charge", "/ship"};
    same_as_the_engine(kind, "async_same", 204, MV_OK, "completed", paths, 3);
}

STORE_TEST(a_rejected_third_step_on_the_loop_compensates_the_second_then_the_first) {
    const char *paths[] = {"/reserve", "/charge", "/ship", "/refund", "/release"};
    same_as_the_engine(kind, "async_comp", 422, MV_SAGA_STEP_FAILED, "compensated", paths, 5);
}

STORE_TEST(an_ambiguous_step_on_the_loop_goes_to_manual_review_without_compensating) {
    const char *paths[] = {"/reserve", "/charge", "/ship"};
    same_as_the_engine(kind, "async_amb", 503, MV_UPSTREAM_FAILED, "manual-review", paths, 3);
}

STORE_TEST(a_failing_compensation_on_the_loop_waits_for_its_backoff_and_keeps_its_key) {
    env e;
    REQUIRE(env_open(&e, kind, "async_backoff", false, 0,
                     "{\"maxAttempts\": 3, \"backoffMs\": {\"initial\": 1000, \"max\": 1500}}"));
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 402});
    http_sink_push(e.sink, &(http_sink_response){.path = "/release", .status = 503});
    json_t *input = json_object();
    outcome o;
    REQUIRE(run_async(&e, "saga-b", input, &o));
    CHECK_CODE(o.rc, MV_SAGA_STEP_FAILED, &o.err);
    REQUIRE(o.record);
    CHECK_STR(mv_json_str(o.record, "state"), "compensating");
    CHECK_STR(mv_json_str(step_of(o.record, 0), "state"), "compensation-failed");
    CHECK_INT(json_integer_value(json_object_get(step_of(o.record, 0), "nextAttemptAt")),
              e.now + 1000);
    CHECK_INT(http_sink_count(e.sink), 3); /* reserve, charge, release */
    /* not due: a compensation run on the loop sends nothing */
    e.now += 999;
    outcome o2, o3;
    outcome_init(&o2);
    mv_saga_async a = async_env(&e);
    bool started = false;
    mv_err err = {0};
    CHECK_CODE(mv_saga_book_run_async(e.engine, e.def, &a, "saga-b", true, on_done, &o2, &started,
                                      NULL, &err),
               MV_OK, &err);
    REQUIRE(started && outcome_wait(&o2, 5000));
    CHECK_CODE(o2.rc, MV_OK, &o2.err);
    CHECK_STR(mv_json_str(o2.record, "state"), "compensating");
    CHECK_INT(http_sink_count(e.sink), 3);
    e.now += 1;
    outcome_init(&o3);
    CHECK_CODE(mv_saga_book_run_async(e.engine, e.def, &a, "saga-b", true, on_done, &o3, &started,
                                      NULL, &err),
               MV_OK, &err);
    REQUIRE(started && outcome_wait(&o3, 5000));
    CHECK_CODE(o3.rc, MV_OK, &o3.err);
    CHECK_STR(mv_json_str(o3.record, "state"), "compensated");
    CHECK_INT(json_integer_value(json_object_get(step_of(o3.record, 0), "attempts")), 2);
    CHECK_INT(http_sink_count(e.sink), 4);
    seen first, second;
    REQUIRE(get_seen(&e, 2, &first));
    REQUIRE(get_seen(&e, 3, &second));
    CHECK_STR(first.path, "/release");
    CHECK_STR(second.path, "/release");
    CHECK_STR(first.key, second.key);
    CHECK_STR(second.key, mv_json_str(step_of(o3.record, 0), "compensationEffectId"));
    CHECK_INT(json_integer_value(json_object_get(first.body, "attempt")), 1);
    CHECK_INT(json_integer_value(json_object_get(second.body, "attempt")), 2);
    json_decref(first.body);
    json_decref(second.body);
    outcome_free(&o);
    outcome_free(&o2);
    outcome_free(&o3);
    json_decref(input);
    env_close(&e);
}

typedef struct slow_far {
    env *e;
    int delay_ms;
    const char *slow_path;
    bool stop_on_slow; /* fire e->stop when the slow call arrives */
    int count[8];
} slow_far;

static void slow_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    slow_far *f = ctx;
    res->status = 200;
    res->body = "{\"ok\": true}";
    if (strcmp(req->path, f->slow_path) == 0) {
        res->delay_ms = f->delay_ms;
        if (f->stop_on_slow) mv_abort_fire(&f->e->stop, "stopping");
    }
}

STORE_TEST(a_step_slower_than_the_runner_lease_keeps_it_on_the_loop) {
    env e;
    /* a lease long enough that its renewal (every third of it) survives a commit stalled by a
     * loaded machine; the step is three leases long */
    REQUIRE(env_open(&e, kind, "async_lease", true, 1000, NULL));
    slow_far f = {.e = &e, .delay_ms = 3000, .slow_path = "/charge"};
    http_sink_set_handler(e.sink, slow_handler, &f);
    json_t *input = json_object();
    outcome o;
    outcome_init(&o);
    mv_saga_async a = async_env(&e);
    bool started = false;
    mv_err err = {0};
    CHECK_CODE(mv_saga_book_start_async(e.engine, e.def, &a, NULL, "saga-l", input, on_done, &o,
                                        &started, NULL, NULL, &err),
               MV_OK, &err);
    REQUIRE(started);
    REQUIRE(http_sink_wait(e.sink, 2, 5000)); /* charge is in flight */
    /* two leases later another runner (the recovery loop, another daemon) still finds it held */
    for (int i = 0; i < 4; i++) {
        mv_sleep_ms(500);
        json_t *rec = NULL;
        CHECK_CODE(mv_saga_resume(e.engine, e.def, "saga-l", NULL, &rec, &err), MV_SAGA_CONCURRENCY,
                   &err);
        json_decref(rec);
    }
    REQUIRE(outcome_wait(&o, 10000));
    CHECK_CODE(o.rc, MV_OK, &o.err);
    CHECK_STR(mv_json_str(o.record, "state"), "completed");
    CHECK_INT(http_sink_count(e.sink), 3); /* each step once */
    outcome_free(&o);
    json_decref(input);
    env_close(&e);
}

STORE_TEST(a_run_stopped_between_steps_writes_its_commit_and_is_resumed_by_the_next_runner) {
    env e;
    REQUIRE(env_open(&e, kind, "async_stop", false, 0, NULL));
    slow_far f = {.e = &e, .delay_ms = 100, .slow_path = "/reserve", .stop_on_slow = true};
    http_sink_set_handler(e.sink, slow_handler, &f);
    json_t *input = json_pack("{s:i}", "n", 1);
    outcome o;
    REQUIRE(run_async(&e, "saga-s", input, &o));
    CHECK_CODE(o.rc, MV_DRAINING, &o.err);
    CHECK_STR(o.err.saga_id, "saga-s");
    CHECK(strstr(o.err.message, "http") == NULL); /* no URL in words a client may see */
    CHECK_INT(http_sink_count(e.sink), 1);        /* reserve only */
    json_t *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_saga_get(e.engine, "saga-s", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "running");
    CHECK_INT(json_array_size(json_object_get(rec, "steps")), 1);
    CHECK_STR(mv_json_str(step_of(rec, 0), "state"), "committed"); /* the commit was written */
    CHECK_STR(journal_state(&e, mv_json_str(step_of(rec, 0), "effectId")), "committed");
    json_decref(rec);
    /* the lease was dropped: the next runner goes on at once and does not send reserve again */
    http_sink_set_handler(e.sink, NULL, NULL);
    CHECK_CODE(mv_saga_resume(e.engine, e.def, "saga-s", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    CHECK_INT(http_sink_count(e.sink), 3);
    seen s;
    REQUIRE(get_seen(&e, 1, &s));
    CHECK_STR(s.path, "/charge");
    json_decref(s.body);
    json_decref(rec);
    outcome_free(&o);
    json_decref(input);
    env_close(&e);
}

STORE_TEST(a_step_call_abandoned_by_the_loop_is_left_executing_as_after_a_crash) {
    env e;
    REQUIRE(env_open(&e, kind, "async_abandon", false, 0, NULL));
    slow_far f = {.e = &e, .delay_ms = 3000, .slow_path = "/charge"};
    http_sink_set_handler(e.sink, slow_handler, &f);
    json_t *input = json_object();
    outcome o;
    outcome_init(&o);
    mv_saga_async a = async_env(&e);
    bool started = false;
    mv_err err = {0};
    CHECK_CODE(mv_saga_book_start_async(e.engine, e.def, &a, NULL, "saga-x", input, on_done, &o,
                                        &started, NULL, NULL, &err),
               MV_OK, &err);
    REQUIRE(started && http_sink_wait(e.sink, 2, 5000));
    mv_loop_stop(e.loop); /* shutdown: the call in flight is abandoned */
    REQUIRE(outcome_wait(&o, 5000));
    CHECK_CODE(o.rc, MV_DRAINING, &o.err);
    REQUIRE(o.record);
    CHECK_STR(mv_json_str(o.record, "state"), "running");
    CHECK_STR(mv_json_str(step_of(o.record, 1), "state"), "executing");
    /* the next runner cannot know whether charge happened: manual review, charge not resent */
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_resume(e.engine, e.def, "saga-x", NULL, &rec, &err), MV_SAGA_AMBIGUOUS_STEP,
               &err);
    CHECK_STR(mv_json_str(rec, "state"), "manual-review");
    CHECK_INT(http_sink_count(e.sink), 2);
    json_decref(rec);
    outcome_free(&o);
    json_decref(input);
    env_close(&e);
}

STORE_TEST(an_existing_saga_id_is_answered_at_once_replayed_or_mismatched_and_runs_nothing) {
    env e;
    REQUIRE(env_open(&e, kind, "async_replay", false, 0, NULL));
    json_t *input = json_pack("{s:i}", "n", 1), *other = json_pack("{s:i}", "n", 2);
    outcome o;
    REQUIRE(run_async(&e, "saga-r", input, &o));
    CHECK_CODE(o.rc, MV_OK, &o.err);
    CHECK_INT(http_sink_count(e.sink), 3);
    mv_saga_async a = async_env(&e);
    bool started = true, replayed = false;
    json_t *rec = NULL;
    mv_err err = {0};
    outcome unused;
    outcome_init(&unused);
    CHECK_CODE(mv_saga_book_start_async(e.engine, e.def, &a, NULL, "saga-r", input, on_done,
                                        &unused, &started, &rec, &replayed, &err),
               MV_OK, &err);
    CHECK(!started && replayed);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    CHECK_CODE(mv_saga_book_start_async(e.engine, e.def, &a, NULL, "saga-r", other, on_done,
                                        &unused, &started, &rec, &replayed, &err),
               MV_SAGA_MISMATCH, &err);
    CHECK(!started && !replayed);
    /* a definition the book does not own cannot run on the loop */
    mv_saga_definition plain = *e.def;
    plain.run = NULL;
    CHECK_CODE(mv_saga_book_start_async(e.engine, &plain, &a, NULL, "saga-p", input, on_done,
                                        &unused, &started, &rec, &replayed, &err),
               MV_INVALID_ARGUMENT, &err);
    CHECK(!started);
    CHECK_INT(http_sink_count(e.sink), 3);
    CHECK(!unused.done);
    outcome_free(&unused);
    outcome_free(&o);
    json_decref(input);
    json_decref(other);
    env_close(&e);
}

/* ---- idempotent steps retried on a 5xx or a timeout ------------------------------------------ */

/* A far side whose /charge fails (status, or no answer for delay_ms) its first `fail` calls,
 * then answers `then` (0: 200); every other path answers 200. */
typedef struct flaky {
    int fail, status, delay_ms, then;
    atomic_int charges;
} flaky;

static void flaky_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    flaky *f = ctx;
    *res = (http_sink_response){.body = "{\"ok\": true}"};
    if (strcmp(req->path, "/charge") != 0) return;
    bool failing = atomic_fetch_add(&f->charges, 1) < f->fail;
    res->status = failing ? f->status : f->then;
    if (failing) res->delay_ms = f->delay_ms;
    if (res->status >= 400) res->body = "{\"error\": {\"code\": \"busy\", \"message\": \"later\"}}";
}

/* Runs saga id through the blocking engine or on the loop: its code, record (owned) and error. */
static mv_code run_either(env *e, bool on_loop, const char *id, json_t **rec, mv_err *err) {
    json_t *input = json_pack("{s:s}", "order", id);
    mv_code rc;
    if (!on_loop) {
        rc = mv_saga_execute(e->engine, e->def, id, input, NULL, rec, err);
    } else {
        outcome o;
        if (!run_async(e, id, input, &o)) {
            json_decref(input);
            return mv_err_set(err, MV_INTERNAL, "the run on the loop did not end");
        }
        rc = o.rc;
        *rec = o.record;
        o.record = NULL;
        mv_err_copy(err, &o.err);
        outcome_free(&o);
    }
    json_decref(input);
    return rc;
}

/* What one run should come to: its code, saga state, the charge step's state and journal row,
 * the calls to /charge (all with the step's effect id as Idempotency-Key and in the body) and
 * the calls in all. */
typedef struct expect {
    mv_code rc;
    const char *state, *charge_state, *journal;
    int charges, calls;
} expect;

/* Runs the checkout against far side f, through the engine and then on the loop, and checks
 * each run against x. */
static void check_runs(env *e, const char *id, const flaky *script, const expect *x) {
    for (int on_loop = 0; on_loop < 2; on_loop++) {
        flaky f = *script;
        atomic_init(&f.charges, 0);
        http_sink_set_handler(e->sink, flaky_handler, &f);
        int from = http_sink_count(e->sink);
        char sid[64];
        snprintf(sid, sizeof sid, "%s-%s", id, on_loop ? "loop" : "sync");
        json_t *rec = NULL;
        mv_err err = {0};
        CHECK_CODE(run_either(e, on_loop, sid, &rec, &err), x->rc, &err);
        if (x->rc == MV_UPSTREAM_FAILED && x->charges > 1)
            CHECK(strstr(err.message, "attempts") != NULL);
        CHECK(strstr(err.message, "http") == NULL); /* no URL in words a client may see */
        REQUIRE(rec);
        CHECK_STR(mv_json_str(rec, "state"), x->state);
        CHECK_STR(mv_json_str(step_of(rec, 1), "state"), x->charge_state);
        const char *key = mv_json_str(step_of(rec, 1), "effectId");
        CHECK_STR(journal_state(e, key), x->journal);
        int n = 0, all = http_sink_count(e->sink) - from;
        for (int i = from; i < from + all; i++) {
            seen s;
            REQUIRE(get_seen(e, i, &s));
            if (strcmp(s.path, "/charge") == 0) {
                n++;
                CHECK_STR(s.key, key); /* one Idempotency-Key: the far side deduplicates */
                CHECK_STR(mv_json_str(s.body, "effectId"), key);
            }
            json_decref(s.body);
        }
        CHECK_INT(n, x->charges);
        CHECK_INT(all, x->calls);
        http_sink_set_handler(e->sink, NULL, NULL);
        json_decref(rec);
    }
}

static const char RETRY[] = "{\"maxAttempts\": 3, \"backoffMs\": {\"initial\": 20, \"max\": 40}}";
static const char IDEMPOTENT[] = ", \"idempotent\": true";

STORE_TEST(an_idempotent_step_answering_503_twice_is_called_again_with_its_key_and_completes) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_ok", false, 0, RETRY, IDEMPOTENT, 0));
    /* reserve, charge ×3, ship */
    check_runs(&e, "retry", &(flaky){.fail = 2, .status = 503},
               &(expect){MV_OK, "completed", "committed", "committed", 3, 5});
    env_close(&e);
}

STORE_TEST(an_idempotent_step_answering_503_every_time_goes_to_manual_review_after_max_attempts) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_exhaust", false, 0, RETRY, IDEMPOTENT, 0));
    /* reserve, charge ×3: no ship, nothing compensated */
    check_runs(&e, "exhaust", &(flaky){.fail = 1000, .status = 503},
               &(expect){MV_UPSTREAM_FAILED, "manual-review", "ambiguous", "unknown", 3, 4});
    env_close(&e);
}

STORE_TEST(a_step_not_declared_idempotent_goes_to_manual_review_after_one_503) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_not_idem", false, 0,
                          "{\"maxAttempts\": 5, \"backoffMs\": {\"initial\": 10, \"max\": 10}}", "",
                          0));
    check_runs(&e, "plain", &(flaky){.fail = 1, .status = 503},
               &(expect){MV_UPSTREAM_FAILED, "manual-review", "ambiguous", "unknown", 1, 2});
    env_close(&e);
}

STORE_TEST(a_timeout_of_an_idempotent_step_is_retried_like_a_5xx) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_timeout", false, 0, RETRY, IDEMPOTENT, 300));
    /* the first charge answers, but after the 300 ms timeout */
    check_runs(&e, "slow", &(flaky){.fail = 1, .status = 200, .delay_ms = 1500},
               &(expect){MV_OK, "completed", "committed", "committed", 2, 4});
    env_close(&e);
}

STORE_TEST(a_4xx_on_a_retry_of_an_idempotent_step_is_conclusive_and_the_saga_compensates) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_reject", false, 0, RETRY, IDEMPOTENT, 0));
    /* reserve, charge 503, charge 422, release */
    check_runs(&e, "reject", &(flaky){.fail = 1, .status = 503, .then = 422},
               &(expect){MV_SAGA_STEP_FAILED, "compensated", "failed", "failed", 2, 4});
    env_close(&e);
}

static void mark_ran(void *p) { atomic_fetch_add((atomic_int *)p, 1); }

STORE_TEST(the_wait_before_a_retry_on_the_loop_holds_no_thread_and_a_stop_cuts_it_short) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_wait", false, 0,
                          "{\"maxAttempts\": 3, \"backoffMs\": {\"initial\": 3000, \"max\": 3000}}",
                          IDEMPOTENT, 0));
    flaky f = {.fail = 1, .status = 503};
    http_sink_set_handler(e.sink, flaky_handler, &f);
    json_t *input = json_object();
    outcome o;
    outcome_init(&o);
    mv_saga_async a = async_env(&e);
    bool started = false;
    mv_err err = {0};
    CHECK_CODE(mv_saga_book_start_async(e.engine, e.def, &a, NULL, "saga-w", input, on_done, &o,
                                        &started, NULL, NULL, &err),
               MV_OK, &err);
    REQUIRE(started && http_sink_wait(e.sink, 2, 5000)); /* the first charge answered 503 */
    mv_sleep_ms(100);
    /* both threads of the pool are free during the backoff: two jobs run at once */
    atomic_int ran = 0;
    pool_submit(&e.pool, mark_ran, &ran);
    pool_submit(&e.pool, mark_ran, &ran);
    for (int i = 0; i < 100 && atomic_load(&ran) < 2; i++)
        mv_sleep_ms(5);
    CHECK_INT(atomic_load(&ran), 2);
    CHECK_INT(http_sink_count(e.sink), 2); /* the retry is not due yet */
    CHECK(!o.done);
    REQUIRE(outcome_wait(&o, 10000));
    CHECK_CODE(o.rc, MV_OK, &o.err);
    CHECK_STR(mv_json_str(o.record, "state"), "completed");
    CHECK_INT(http_sink_count(e.sink), 4);
    outcome_free(&o);
    /* a stop during the wait ends it at once: the last answer stands (manual review) */
    atomic_store(&f.charges, 0);
    outcome_init(&o);
    int64_t t0 = mv_now_ms();
    CHECK_CODE(mv_saga_book_start_async(e.engine, e.def, &a, NULL, "saga-w2", input, on_done, &o,
                                        &started, NULL, NULL, &err),
               MV_OK, &err);
    REQUIRE(started && http_sink_wait(e.sink, 6, 5000));
    mv_abort_fire(&e.stop, "stopping");
    REQUIRE(outcome_wait(&o, 10000));
    CHECK(mv_now_ms() - t0 < 2500); /* not the 3 s backoff */
    CHECK_CODE(o.rc, MV_UPSTREAM_FAILED, &o.err);
    CHECK_STR(mv_json_str(o.record, "state"), "manual-review");
    CHECK_INT(http_sink_count(e.sink), 6);
    outcome_free(&o);
    json_decref(input);
    env_close(&e);
}

typedef struct blocking_run {
    env *e;
    mv_abort abort;
    mv_code rc;
    json_t *rec;
    mv_err err;
} blocking_run;

static void *run_blocking(void *p) {
    blocking_run *b = p;
    json_t *input = json_object();
    b->rc = mv_saga_execute(b->e->engine, b->e->def, "saga-b", input, &b->abort, &b->rec, &b->err);
    json_decref(input);
    return NULL;
}

/* The blocking engine waits out the backoff on its caller's thread (its answer is the step's
 * outcome), woken at once by a stop from another thread: the last answer stands. */
STORE_TEST(a_stop_during_the_blocking_engines_retry_wait_ends_it_at_once) {
    env e;
    REQUIRE(env_open_with(&e, kind, "retry_wait_sync", false, 0,
                          "{\"maxAttempts\": 3, \"backoffMs\": {\"initial\": 3000, \"max\": 3000}}",
                          IDEMPOTENT, 0));
    flaky f = {.fail = 1000, .status = 503};
    atomic_init(&f.charges, 0);
    http_sink_set_handler(e.sink, flaky_handler, &f);
    blocking_run b = {.e = &e};
    int64_t t0 = mv_now_ms();
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, run_blocking, &b) == 0);
    REQUIRE(http_sink_wait(e.sink, 2, 5000)); /* reserve, then the first charge answered 503 */
    mv_sleep_ms(100);
    CHECK_INT(http_sink_count(e.sink), 2); /* waiting: the retry is not due yet */
    mv_abort_fire(&b.abort, "stopping");
    pthread_join(th, NULL);
    CHECK(mv_now_ms() - t0 < 2500); /* not the 3 s backoff */
    CHECK_INT(atomic_load(&f.charges), 1);
    CHECK_INT(http_sink_count(e.sink), 2);
    CHECK_CODE(b.rc, MV_UPSTREAM_FAILED, &b.err);
    REQUIRE(b.rec);
    CHECK_STR(mv_json_str(b.rec, "state"), "manual-review");
    CHECK_STR(mv_json_str(step_of(b.rec, 1), "state"), "ambiguous");
    json_decref(b.rec);
    http_sink_set_handler(e.sink, NULL, NULL);
    env_close(&e);
}

/* ---- delays --------------------------------------------------------------------------------- */

static const mv_saga_definition *delay_def;
static const mv_saga_definition *find_delay_def(void *ctx, const char *name) {
    (void)ctx;
    return strcmp(name, "checkout") == 0 ? delay_def : NULL;
}

STORE_TEST(a_delayed_step_waits_holding_nothing_and_its_timer_resumes_it_in_either_runner) {
    env e;
    REQUIRE(env_open_with(&e, kind, "delay.db", false, 0, NULL, ", \"delayMs\": 60000", 0));
    delay_def = e.def;
    for (int on_loop = 0; on_loop < 2; on_loop++) {
        flaky f = {.then = 200};
        atomic_init(&f.charges, 0);
        http_sink_set_handler(e.sink, flaky_handler, &f);
        int from = http_sink_count(e.sink);
        char sid[64];
        snprintf(sid, sizeof sid, "delay-%s", on_loop ? "loop" : "sync");
        json_t *rec = NULL;
        mv_err err = {0};
        /* reserve runs, then the saga is saved waiting: the run is over */
        CHECK_CODE(run_either(&e, on_loop, sid, &rec, &err), MV_OK, &err);
        REQUIRE(rec);
        CHECK_STR(mv_json_str(rec, "state"), "waiting");
        CHECK_INT(json_integer_value(json_object_get(rec, "wakeAt")), e.now + 60000);
        CHECK_INT(http_sink_count(e.sink) - from, 1);
        json_decref(rec);
        mv__timer_engine *te = NULL;
        mv__timer_engine_options to = {.clock = &e.clock};
        mv_saga_async a = async_env(&e);
        REQUIRE(mv__timer_engine_new(e.store, &to, &te, &err) == MV_OK);
        REQUIRE(mv__saga_wake_register(te, e.engine, find_delay_def, NULL, on_loop ? &a : NULL,
                                       &err) == MV_OK);
        mv__timer_pass p = {0};
        CHECK_CODE(mv__timer_engine_run(te, &p, &err), MV_OK, &err);
        CHECK_INT(p.claimed, 0); /* not due */
        e.now += 60000;
        CHECK_CODE(mv__timer_engine_run(te, &p, &err), MV_OK, &err);
        CHECK_INT(p.fired, 1);
        CHECK_CODE(mv_saga_get(e.engine, sid, &rec, &err), MV_OK, &err);
        CHECK_STR(mv_json_str(rec, "state"), "completed");
        CHECK(json_object_get(rec, "wakeAt") == NULL);
        /* each step called once, under its own effect id as Idempotency-Key */
        CHECK_INT(http_sink_count(e.sink) - from, 3);
        CHECK_INT(atomic_load(&f.charges), 1);
        for (int i = 0; i < 3; i++) {
            seen sn;
            REQUIRE(get_seen(&e, from + i, &sn));
            CHECK_STR(sn.key, mv_json_str(step_of(rec, (size_t)i), "effectId"));
            json_decref(sn.body);
        }
        json_decref(rec);
        e.now += 600000;
        CHECK_CODE(mv__timer_engine_run(te, &p, &err), MV_OK, &err);
        CHECK_INT(p.claimed, 0);
        CHECK_INT(http_sink_count(e.sink) - from, 3);
        mv__timer_engine_free(te);
    }
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(
        three_steps_on_the_loop_send_and_save_what_the_engine_does,
        a_rejected_third_step_on_the_loop_compensates_the_second_then_the_first,
        an_ambiguous_step_on_the_loop_goes_to_manual_review_without_compensating,
        a_failing_compensation_on_the_loop_waits_for_its_backoff_and_keeps_its_key,
        a_step_slower_than_the_runner_lease_keeps_it_on_the_loop,
        a_run_stopped_between_steps_writes_its_commit_and_is_resumed_by_the_next_runner,
        a_step_call_abandoned_by_the_loop_is_left_executing_as_after_a_crash,
        an_existing_saga_id_is_answered_at_once_replayed_or_mismatched_and_runs_nothing,
        an_idempotent_step_answering_503_twice_is_called_again_with_its_key_and_completes,
        an_idempotent_step_answering_503_every_time_goes_to_manual_review_after_max_attempts,
        a_step_not_declared_idempotent_goes_to_manual_review_after_one_503,
        a_timeout_of_an_idempotent_step_is_retried_like_a_5xx,
        a_4xx_on_a_retry_of_an_idempotent_step_is_conclusive_and_the_saga_compensates,
        the_wait_before_a_retry_on_the_loop_holds_no_thread_and_a_stop_cuts_it_short,
        a_stop_during_the_blocking_engines_retry_wait_ends_it_at_once,
        a_delayed_step_waits_holding_nothing_and_its_timer_resumes_it_in_either_runner);
}
