/* saga_test.c — sagas (SEMANTICS §5 durable scenarios 10–17) on SQLite files with a manual clock,
 * plus: two processes resuming one saga (one proceeds, the other gets MV_SAGA_CONCURRENCY, no
 * step runs twice), idempotent start, the public JSON shape, encryption at rest, and sixteen
 * threads of sagas sharing PostgreSQL commits while a lost compare-and-set still fails alone. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "durable/fixture.h"
#include "store/db.h"
#include "store/driver.h"

typedef struct {
    char log[32][96];
    int n;
    char charge_comp_ids[4][40];
    int ncharge_ids;
    int charge_comp_failures_left;
    bool comp_always_fail;
    bool business_failure_after_steps;
    bool fail_after_reserve;
    mv_code charge_rc;
    int executions, charge_executions;
    char charge_result[64];
    mv_abort *abort_on_executing;
} world;

static void note(world *w, const char *what, const char *step) {
    if (w->n < 32) snprintf(w->log[w->n++], 96, "%s:%s", what, step);
}

static mv_code exec_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    world *w = ctx;
    note(w, "execute", call->step);
    w->executions++;
    if (strcmp(call->step, "charge") == 0) {
        w->charge_executions++;
        if (w->charge_rc) return mv_err_set(err, w->charge_rc, "connection dropped");
    }
    char r[64];
    snprintf(r, sizeof r, "%s-ok", call->step);
    *result = json_string(r);
    return MV_OK;
}

static mv_code compensate_step(const json_t *args, const mv_saga_compensation_call *call, void *ctx,
                               mv_err *err) {
    (void)args;
    world *w = ctx;
    note(w, "compensate", call->step);
    if (strcmp(call->step, "charge") == 0 && w->ncharge_ids < 4)
        snprintf(w->charge_comp_ids[w->ncharge_ids++], 40, "%s", call->effect_id);
    if (w->comp_always_fail) return mv_err_set(err, MV_UPSTREAM_FAILED, "refund failed");
    if (strcmp(call->step, "charge") == 0 && w->charge_comp_failures_left > 0) {
        w->charge_comp_failures_left--;
        return mv_err_set(err, MV_UPSTREAM_FAILED, "refund failed");
    }
    return MV_OK;
}

static mv_code checkout_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    world *w = def_ctx;
    json_t *args = json_pack("{s:s}", "sku", "a");
    json_t *r = NULL;
    mv_code rc = mv_saga_step(ctx, "reserve", args, exec_step, w, &r, err);
    json_decref(args);
    json_decref(r);
    if (rc) return rc;
    if (w->fail_after_reserve) return mv_err_set(err, MV_UPSTREAM_FAILED, "abort");
    args = json_pack("{s:i}", "amount", 5);
    r = NULL;
    rc = mv_saga_step(ctx, "charge", args, exec_step, w, &r, err);
    json_decref(args);
    if (rc) return rc;
    snprintf(w->charge_result, sizeof w->charge_result, "%s",
             json_is_string(r) ? json_string_value(r) : "");
    json_decref(r);
    if (w->business_failure_after_steps)
        return mv_err_set(err, MV_UPSTREAM_FAILED, "business failure");
    return MV_OK;
}

static int64_t backoff_5(int attempt, void *ctx) {
    (void)attempt;
    (void)ctx;
    return 5;
}

static mv_saga_compensator comps[2];

static mv_saga_definition checkout(world *w, int max_attempts) {
    comps[0] = (mv_saga_compensator){"reserve", compensate_step, w};
    comps[1] = (mv_saga_compensator){"charge", compensate_step, w};
    return (mv_saga_definition){.name = "checkout",
                                .capability = "orders.checkout",
                                .run = checkout_run,
                                .compensators = comps,
                                .ncompensators = 2,
                                .max_attempts = max_attempts,
                                .backoff = backoff_5,
                                .ctx = w};
}

typedef struct {
    mv_store *store;
    mv_saga_engine *engine;
    int64_t now;
    mv_clock clock;
} rig;

static void on_save(const json_t *record, void *ctx) {
    world *w = ctx;
    json_t *steps = json_object_get(record, "steps");
    size_t i;
    json_t *s;
    json_array_foreach(steps, i, s) {
        if (w->abort_on_executing && strcmp(mv_json_str(s, "state"), "executing") == 0)
            mv_abort_fire(w->abort_on_executing, "cancelled after persistence");
    }
}

static bool rig_open(rig *r, const char *kind, const char *name, world *w,
                     const unsigned char *key) {
    r->store = fixture_store(kind, name, NULL, 0);
    if (!r->store) return false;
    r->now = 100;
    r->clock = mv_manual_clock(&r->now);
    mv_saga_engine_options o = {
        .clock = &r->clock, .on_save = on_save, .on_save_ctx = w, .encryption_key = key};
    mv_err err = {0};
    return mv_saga_engine_new(r->store, &o, &r->engine, &err) == MV_OK;
}

static void rig_close(rig *r) {
    mv_saga_engine_free(r->engine);
    mv_store_close(r->store);
}

static const char *step_field(const json_t *rec, int i, const char *key) {
    return mv_json_str(json_array_get(json_object_get(rec, "steps"), (size_t)i), key);
}

STORE_TEST(checkout_compensates_in_reverse_with_retries_sharing_one_effect_id) {
    world w = {.business_failure_after_steps = true, .charge_comp_failures_left = 1};
    rig r;
    REQUIRE(rig_open(&r, kind, "s10.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 2);
    json_t *input = json_pack("{s:s}", "order", "o1"), *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_checkout", input, NULL, &rec, &err),
               MV_UPSTREAM_FAILED, &err);
    CHECK_STR(err.message, "business failure");
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "compensating");
    CHECK_STR(step_field(rec, 1, "state"), "compensation-failed");
    CHECK_INT(json_integer_value(json_object_get(json_array_get(json_object_get(rec, "steps"), 1),
                                                 "nextAttemptAt")),
              105);
    json_decref(rec);
    r.now = 105;
    CHECK_CODE(mv_saga_compensate(r.engine, &def, "saga_checkout", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    const char *want[] = {"execute:reserve", "execute:charge", "compensate:charge",
                          "compensate:charge", "compensate:reserve"};
    CHECK_INT(w.n, 5);
    for (int i = 0; i < 5 && i < w.n; i++)
        CHECK_STR(w.log[i], want[i]);
    CHECK_INT(w.ncharge_ids, 2);
    CHECK_STR(w.charge_comp_ids[0], w.charge_comp_ids[1]);
    CHECK_STR(w.charge_comp_ids[0], step_field(rec, 1, "compensationEffectId"));
    json_decref(rec);
    json_decref(input);
    rig_close(&r);
}

static mv_code ambiguous_saga(rig *r, world *w, mv_saga_definition *def, json_t **rec,
                              mv_err *err) {
    w->charge_rc = MV_UPSTREAM_FAILED;
    *def = checkout(w, 3);
    json_t *input = json_object();
    mv_code rc = mv_saga_execute(r->engine, def, "saga_ambiguous", input, NULL, rec, err);
    json_decref(input);
    return rc;
}

STORE_TEST(ambiguous_step_goes_to_manual_review_and_is_reconciled) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "s11.db", &w, NULL));
    mv_saga_definition def;
    json_t *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(ambiguous_saga(&r, &w, &def, &rec, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_STR(err.message, "connection dropped");
    json_decref(rec);
    CHECK_CODE(mv_saga_resume(r.engine, &def, "saga_ambiguous", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "manual-review");
    CHECK_STR(step_field(rec, 1, "state"), "ambiguous");
    CHECK_STR(step_field(rec, 1, "errorCode"), "execution_unknown");
    char charge_effect[64];
    snprintf(charge_effect, sizeof charge_effect, "%s", step_field(rec, 1, "effectId"));
    json_decref(rec);
    json_t *findings = NULL;
    CHECK_CODE(mv_reconcile_sagas(r.store, r.now, &findings, &err), MV_OK, &err);
    json_t *want = json_pack("[{s:s, s:s, s:s, s:s, s:s}]", "sagaId", "saga_ambiguous", "state",
                             "manual-review", "step", "charge", "effectId", charge_effect, "reason",
                             "ambiguous-execution");
    CHECK(json_equal(findings, want));
    json_decref(want);
    json_decref(findings);
    CHECK_CODE(mv_saga_compensate(r.engine, &def, "saga_ambiguous", NULL, NULL, &err),
               MV_SAGA_AMBIGUOUS_STEP, &err);
    CHECK_STR(err.message, "saga saga_ambiguous: step charge has an ambiguous effect");
    mv_reconcile_options o = {.stale_before = r.now, .limit = 1};
    mv_reconcile_page page;
    CHECK_CODE(mv_reconcile_sagas_page(r.store, &o, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 1);
    CHECK_STR(page.cursor, "");
    mv_reconcile_page_clear(&page);
    rig_close(&r);
}

STORE_TEST(operator_resolution_commits_the_step_and_resume_completes_without_rerunning) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "s12.db", &w, NULL));
    mv_saga_definition def;
    json_t *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(ambiguous_saga(&r, &w, &def, &rec, &err), MV_UPSTREAM_FAILED, &err);
    char charge_effect[64];
    snprintf(charge_effect, sizeof charge_effect, "%s", step_field(rec, 1, "effectId"));
    json_decref(rec);
    mv_saga_resolution bad = {.kind = "execution",
                              .step = "charge",
                              .effect_id = charge_effect,
                              .outcome = "compensated"};
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_ambiguous", &bad, NULL, &err),
               MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "saga resolution kind or outcome is invalid");
    mv_saga_resolution wrong = {
        .kind = "execution", .step = "charge", .effect_id = "other", .outcome = "committed"};
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_ambiguous", &wrong, NULL, &err),
               MV_SAGA_RESOLUTION, &err);
    CHECK_STR(err.message, "saga saga_ambiguous: step charge execution effect id does not match");
    json_t *charged = json_string("charged");
    mv_saga_resolution ok = {.kind = "execution",
                             .step = "charge",
                             .effect_id = charge_effect,
                             .outcome = "committed",
                             .result = charged};
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_ambiguous", &ok, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "running");
    json_decref(rec);
    w.charge_rc = MV_OK;
    CHECK_CODE(mv_saga_resume(r.engine, &def, "saga_ambiguous", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    CHECK_STR(w.charge_result, "charged");
    CHECK_INT(w.charge_executions, 1);
    /* the same resolution again: the step is no longer awaiting one */
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_ambiguous", &ok, NULL, &err),
               MV_SAGA_RESOLUTION, &err);
    CHECK_STR(
        err.message,
        "saga saga_ambiguous: step charge is not awaiting an execution resolution (committed)");
    json_decref(charged);
    json_decref(rec);
    rig_close(&r);
}

/* The journal state of effect id ("" when it has no row). */
static void journal_state(mv_store *store, const char *id, char out[16], char cap[129]) {
    mv_journal *j = NULL;
    mv_journal_options o = {0};
    mv_effect_record rec;
    out[0] = cap[0] = '\0';
    if (mv_journal_new(store, &o, &j, NULL) == MV_OK &&
        mv_journal_get(j, id, &rec, NULL) == MV_OK) {
        snprintf(out, 16, "%s", mv_effect_state_name(rec.state));
        snprintf(cap, 129, "%s", rec.capability);
    }
    mv_journal_free(j);
}

STORE_TEST(saga_steps_are_effects_in_the_journal_named_by_the_capability) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "sjournal.db", &w, NULL));
    mv_saga_definition def;
    json_t *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(ambiguous_saga(&r, &w, &def, &rec, &err), MV_UPSTREAM_FAILED, &err);
    char reserve[64], charge[64], state[16], cap[129];
    snprintf(reserve, sizeof reserve, "%s", step_field(rec, 0, "effectId"));
    snprintf(charge, sizeof charge, "%s", step_field(rec, 1, "effectId"));
    json_decref(rec);
    journal_state(r.store, reserve, state, cap);
    CHECK_STR(state, "committed");
    CHECK_STR(cap, "orders.checkout");
    journal_state(r.store, charge, state, cap);
    CHECK_STR(state, "unknown");
    /* the ambiguous step is found as any effect is */
    json_t *findings = NULL;
    CHECK_CODE(mv_reconcile_effects(r.store, r.now, (mv_effect_observer){0}, &findings, &err),
               MV_OK, &err);
    json_t *want =
        json_pack("[{s:s, s:s, s:s, s:I}]", "effectId", charge, "capability", "orders.checkout",
                  "state", "ambiguous", "updatedAt", (json_int_t)r.now);
    CHECK(json_equal(findings, want));
    json_decref(want);
    json_decref(findings);
    /* an operator's resolution settles the journal row too: nothing left to reconcile */
    mv_saga_resolution ok = {
        .kind = "execution", .step = "charge", .effect_id = charge, .outcome = "not-committed"};
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_ambiguous", &ok, NULL, &err), MV_OK, &err);
    journal_state(r.store, charge, state, cap);
    CHECK_STR(state, "failed");
    CHECK_CODE(mv_reconcile_effects(r.store, r.now, (mv_effect_observer){0}, &findings, &err),
               MV_OK, &err);
    CHECK_INT(json_array_size(findings), 0);
    json_decref(findings);
    rig_close(&r);
}

/* A step executor that reads its own journal row while it runs (as a crash would leave it). */
static char seen_state[16];
static mv_store *seen_store;
static mv_code peeking_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)ctx;
    (void)err;
    char cap[129];
    journal_state(seen_store, call->effect_id, seen_state, cap);
    *result = json_null();
    return MV_OK;
}
static mv_code peeking_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    (void)def_ctx;
    return mv_saga_step(ctx, "reserve", NULL, peeking_step, NULL, NULL, err);
}

STORE_TEST(a_step_in_flight_is_executing_in_the_journal_before_its_call) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "sjournal2.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 3);
    def.capability = NULL; /* the reference's default capability */
    def.run = peeking_run;
    seen_store = r.store;
    json_t *input = json_object(), *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_peek", input, NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(seen_state, "executing");
    char state[16], cap[129];
    journal_state(r.store, step_field(rec, 0, "effectId"), state, cap);
    CHECK_STR(state, "committed");
    CHECK_STR(cap, "saga.execute");
    json_decref(rec);
    json_decref(input);
    rig_close(&r);
}

static const char SQL_PUT_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version) VALUES (?, ?, ?, '{}', '', ?, 3, 100, 100, 1)";

static const char SQL_PUT_STEP[] =
    "INSERT INTO saga_steps (saga_id, idx, name, state, effect_id, compensation_effect_id, "
    "compensation_args, result, attempts, error_code, next_attempt_at, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 100, 100)";

/* A saga written by hand with its steps (a JSON array, as the record shows them): as rows of
 * saga_steps, or (document: a store before migration 10) as the steps document. */
typedef struct {
    const char *id, *def, *state, *steps;
    bool document;
} put_saga;

static void bind_opt_text(mv_stmt *st, int i, const json_t *v) {
    char *text = v ? mv_json_compact(v) : NULL;
    if (text)
        mv_stmt_bind_text(st, i, text);
    else
        mv_stmt_bind_null(st, i);
    free(text);
}

static mv_code put_step(mv_db *db, const char *id, size_t idx, const json_t *s, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_PUT_STEP, &st, err);
    if (rc) return rc;
    mv_stmt_bind_text(st, 1, id);
    mv_stmt_bind_int64(st, 2, (int64_t)idx);
    static const char *const texts[] = {"name", "state", "effectId", "compensationEffectId"};
    for (int k = 0; k < 4; k++)
        mv_stmt_bind_text(st, 3 + k, mv_json_str(s, texts[k]));
    json_t *null = json_null(), *args = json_object_get(s, "compensationArgs");
    bind_opt_text(st, 7, args ? args : null);
    json_decref(null);
    bind_opt_text(st, 8, json_object_get(s, "result"));
    mv_stmt_bind_int64(st, 9, json_integer_value(json_object_get(s, "attempts")));
    if (mv_json_str(s, "errorCode"))
        mv_stmt_bind_text(st, 10, mv_json_str(s, "errorCode"));
    else
        mv_stmt_bind_null(st, 10);
    if (json_object_get(s, "nextAttemptAt"))
        mv_stmt_bind_int64(st, 11, json_integer_value(json_object_get(s, "nextAttemptAt")));
    else
        mv_stmt_bind_null(st, 11);
    int r = mv_stmt_step(st, err);
    mv_stmt_done(st);
    return r < 0 ? (err && err->code ? err->code : MV_INTERNAL) : MV_OK;
}

static mv_code put_saga_fn(mv_db *db, void *ctx, mv_err *err) {
    put_saga *p = ctx;
    mv_code rc = mv_db_execf(db, SQL_PUT_SAGA, NULL, err, "ssss", p->id, p->def, p->state,
                             p->document ? p->steps : "[]");
    if (rc || p->document) return rc;
    json_t *steps = NULL;
    if ((rc = mv_json_parse(p->steps, strlen(p->steps), &steps, err))) return rc;
    size_t i;
    json_t *s;
    json_array_foreach(steps, i, s) {
        if ((rc = put_step(db, p->id, i, s, err))) break;
    }
    json_decref(steps);
    return rc;
}

TEST(saga_and_step_states_have_one_name_each_both_ways) {
    for (int i = 0; i < MV_SAGA_STATE_COUNT; i++)
        CHECK_INT(mv_saga_state_parse(mv_saga_state_name((mv_saga_state)i)), i);
    for (int i = 0; i < MV_STEP_STATE_COUNT; i++)
        CHECK_INT(mv_saga_step_state_parse(mv_saga_step_state_name((mv_saga_step_state)i)), i);
    CHECK_STR(mv_saga_state_name(MV_SAGA_MANUAL_REVIEW), "manual-review");
    CHECK_STR(mv_saga_step_state_name(MV_STEP_COMPENSATION_FAILED), "compensation-failed");
    CHECK_INT(mv_saga_state_parse("manual_review"), -1);
    CHECK_INT(mv_saga_step_state_parse(NULL), -1);
    CHECK_STR(mv_saga_state_name(MV_SAGA_STATE_COUNT), "invalid");
}

STORE_TEST(no_resolution_moves_a_saga_out_of_a_terminal_state) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "sterminal.db", &w, NULL));
    mv_err err = {0};
    /* an inconsistent record: completed, yet a step still executing */
    put_saga p = {"saga_done", "checkout", "completed",
                  "[{\"name\":\"charge\",\"effectId\":\"effect_charge\","
                  "\"compensationEffectId\":\"effect_refund\",\"state\":\"executing\","
                  "\"compensationArgs\":null,\"attempts\":0}]"};
    REQUIRE(mv_store_write(r.store, put_saga_fn, &p, &err) == MV_OK);
    mv_saga_definition def = checkout(&w, 3);
    mv_saga_resolution res = {.kind = "execution",
                              .step = "charge",
                              .effect_id = "effect_charge",
                              .outcome = "committed"};
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_done", &res, &rec, &err), MV_INTERNAL, &err);
    CHECK_STR(err.message, "saga saga_done: completed->running transition is not allowed");
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    rig_close(&r);
}

STORE_TEST(resolved_compensation_lets_compensate_finish) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "s13.db", &w, NULL));
    mv_err err = {0};
    put_saga p = {"saga_review", "checkout", "manual-review",
                  "[{\"name\":\"reserve\",\"effectId\":\"effect_reserve\","
                  "\"compensationEffectId\":\"effect_release\",\"state\":\"compensating\","
                  "\"compensationArgs\":{},\"attempts\":1}]"};
    REQUIRE(mv_store_write(r.store, put_saga_fn, &p, &err) == MV_OK);
    mv_saga_definition def = checkout(&w, 3);
    mv_saga_resolution res = {.kind = "compensation",
                              .step = "reserve",
                              .effect_id = "effect_release",
                              .outcome = "compensated"};
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "saga_review", &res, &rec, &err), MV_OK, &err);
    CHECK_STR(step_field(rec, 0, "state"), "compensated");
    json_decref(rec);
    CHECK_CODE(mv_saga_compensate(r.engine, &def, "saga_review", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    CHECK_INT(w.n, 0); /* the operator said it was compensated: nothing runs again */
    json_decref(rec);
    rig_close(&r);
}

STORE_TEST(pre_aborted_execute_persists_nothing) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "s14.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 3);
    mv_abort abort = {0};
    mv_abort_fire(&abort, "cancelled");
    json_t *rec = NULL, *input = json_object();
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_cancel", input, &abort, &rec, &err),
               MV_ABORTED, &err);
    CHECK_STR(err.message, "cancelled");
    CHECK(rec == NULL);
    CHECK_INT(w.executions, 0);
    CHECK_CODE(mv_saga_get(r.engine, "saga_cancel", &rec, &err), MV_SAGA_NOT_FOUND, &err);
    json_decref(input);
    rig_close(&r);
}

STORE_TEST(abort_after_the_step_is_persisted_fails_it_before_execution) {
    mv_abort abort = {0};
    world w = {.abort_on_executing = &abort};
    rig r;
    REQUIRE(rig_open(&r, kind, "s15.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 3);
    json_t *rec = NULL, *input = json_object();
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_late", input, &abort, &rec, &err), MV_ABORTED,
               &err);
    CHECK_STR(err.message, "cancelled after persistence");
    CHECK_INT(w.executions, 0);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "compensating");
    CHECK_INT(json_array_size(json_object_get(rec, "steps")), 1);
    CHECK_STR(step_field(rec, 0, "state"), "failed");
    CHECK_STR(step_field(rec, 0, "errorCode"), "aborted_before_execution");
    json_decref(rec);
    w.abort_on_executing = NULL;
    CHECK_CODE(mv_saga_compensate(r.engine, &def, "saga_late", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    CHECK_INT(w.n, 0);
    json_decref(rec);
    json_decref(input);
    rig_close(&r);
}

TEST(definition_is_validated_eagerly) {
    world w = {0};
    mv_saga_definition def = checkout(&w, 3);
    mv_err err = {0};
    def.run = NULL;
    CHECK_CODE(mv_saga_definition_check(&def, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "saga run must be a function");
    def = checkout(&w, -1);
    CHECK_CODE(mv_saga_definition_check(&def, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "saga maxAttempts") != NULL);
    def = checkout(&w, 3);
    def.name = "has space";
    CHECK_CODE(mv_saga_definition_check(&def, &err), MV_INVALID_ARGUMENT, &err);
    def = checkout(&w, 3);
    def.capability = "Bad";
    CHECK_CODE(mv_saga_definition_check(&def, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "saga capability is invalid");
    mv_saga_compensator broken = {"reserve", NULL, NULL};
    def = checkout(&w, 3);
    def.compensators = &broken;
    def.ncompensators = 1;
    CHECK_CODE(mv_saga_definition_check(&def, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "saga compensator reserve must be a function");
}

STORE_TEST(exhausted_compensation_goes_to_manual_review) {
    world w = {.fail_after_reserve = true, .comp_always_fail = true};
    rig r;
    REQUIRE(rig_open(&r, kind, "s17.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 1);
    json_t *rec = NULL, *input = json_object();
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_stuck", input, NULL, &rec, &err),
               MV_UPSTREAM_FAILED, &err);
    CHECK_STR(err.message, "abort");
    CHECK_STR(mv_json_str(rec, "state"), "manual-review");
    CHECK_STR(step_field(rec, 0, "state"), "compensation-failed");
    CHECK(json_object_get(json_array_get(json_object_get(rec, "steps"), 0), "nextAttemptAt") ==
          NULL);
    json_decref(rec);
    json_t *findings;
    CHECK_CODE(mv_reconcile_sagas(r.store, 0, &findings, &err), MV_OK, &err);
    CHECK_INT(json_array_size(findings), 1);
    CHECK_STR(mv_json_str(json_array_get(findings, 0), "reason"), "manual-review");
    json_decref(findings);
    /* not-compensated with attempts exhausted keeps it in review; compensated releases it */
    json_decref(input);
    rig_close(&r);
}

STORE_TEST(saga_json_has_the_public_shape_and_hides_compensation_args) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "shape.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 3);
    json_t *rec = NULL, *input = json_pack("{s:i}", "n", 1);
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_shape", input, NULL, &rec, &err), MV_OK, &err);
    json_decref(rec);
    CHECK_CODE(mv_saga_get(r.engine, "saga_shape", &rec, &err), MV_OK, &err);
    const char *keys[] = {"sagaId", "definition", "state",    "input",
                          "steps",  "createdAt",  "updatedAt"};
    CHECK_INT(json_object_size(rec), 7);
    for (int i = 0; i < 7; i++)
        CHECK(json_object_get(rec, keys[i]) != NULL);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    CHECK(json_equal(json_object_get(rec, "input"), input));
    json_t *step = json_array_get(json_object_get(rec, "steps"), 0);
    CHECK_INT(json_object_size(step),
              6); /* name state attempts effectId compensationEffectId result */
    CHECK(json_object_get(step, "compensationArgs") == NULL);
    CHECK_STR(mv_json_str(step, "result"), "reserve-ok");
    CHECK(mv_valid_uuid(mv_json_str(step, "effectId")));
    /* completed: resume and compensate return it unchanged */
    json_t *again = NULL;
    CHECK_CODE(mv_saga_compensate(r.engine, &def, "saga_shape", NULL, &again, &err), MV_OK, &err);
    CHECK(json_equal(again, rec));
    json_decref(again);
    /* another definition is a mismatch */
    mv_saga_definition other = def;
    other.name = "other";
    CHECK_CODE(mv_saga_resume(r.engine, &other, "saga_shape", NULL, NULL, &err), MV_SAGA_MISMATCH,
               &err);
    CHECK_STR(err.message, "saga definition mismatch");
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_shape", input, NULL, NULL, &err),
               MV_SAGA_EXISTS, &err);
    CHECK_STR(err.message, "saga saga_shape: already exists");
    json_decref(rec);
    json_decref(input);
    rig_close(&r);
}

STORE_TEST(start_with_the_same_id_replays_or_reports_a_mismatch) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "start.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 3);
    json_t *input = json_pack("{s:i, s:s}", "a", 1, "b", "x");
    json_t *same = json_pack("{s:s, s:i}", "b", "x", "a", 1); /* key order does not matter */
    json_t *different = json_pack("{s:i}", "a", 2);
    json_t *rec = NULL;
    bool replayed = true;
    mv_err err = {0};
    CHECK_CODE(mv_saga_start(r.engine, &def, "saga_start", input, NULL, &rec, &replayed, &err),
               MV_OK, &err);
    CHECK(!replayed);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    CHECK_INT(w.executions, 2);
    CHECK_CODE(mv_saga_start(r.engine, &def, "saga_start", same, NULL, &rec, &replayed, &err),
               MV_OK, &err);
    CHECK(replayed);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    CHECK_INT(w.executions, 2);
    json_decref(rec);
    CHECK_CODE(mv_saga_start(r.engine, &def, "saga_start", different, NULL, &rec, &replayed, &err),
               MV_SAGA_MISMATCH, &err);
    CHECK(rec == NULL);
    mv_saga_definition other = def;
    other.name = "refund";
    CHECK_CODE(mv_saga_start(r.engine, &other, "saga_start", input, NULL, &rec, &replayed, &err),
               MV_SAGA_MISMATCH, &err);
    json_decref(input);
    json_decref(same);
    json_decref(different);
    rig_close(&r);
}

static int64_t bad_backoff(int attempt, void *ctx) {
    (void)attempt;
    (void)ctx;
    return -1;
}

STORE_TEST(
    invalid_backoff_sends_the_saga_to_review_and_not_compensated_resolution_respects_the_limit) {
    world w = {.fail_after_reserve = true, .comp_always_fail = true};
    rig r;
    REQUIRE(rig_open(&r, kind, "backoff.db", &w, NULL));
    mv_saga_definition def = checkout(&w, 3);
    def.backoff = bad_backoff;
    json_t *rec = NULL, *input = json_object();
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_backoff", input, NULL, &rec, &err),
               MV_INVALID_ARGUMENT, &err); /* compensate's own error propagates, as the reference */
    CHECK_STR(err.message, "saga backoff must return a non-negative safe integer");
    json_decref(rec);
    CHECK_CODE(mv_saga_get(r.engine, "saga_backoff", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "manual-review");
    CHECK_STR(step_field(rec, 0, "state"), "compensation-failed");
    CHECK_STR(step_field(rec, 0, "errorCode"), "invalid_retry_policy");
    json_decref(rec);
    /* a compensating step resolved as not compensated, attempts below the limit: retry allowed */
    put_saga p = {"saga_nc", "checkout", "manual-review",
                  "[{\"name\":\"reserve\",\"effectId\":\"e_r\",\"compensationEffectId\":"
                  "\"c_r\",\"state\":\"compensating\",\"attempts\":1}]"};
    REQUIRE(mv_store_write(r.store, put_saga_fn, &p, &err) == MV_OK);
    mv_saga_resolution res = {.kind = "compensation",
                              .step = "reserve",
                              .effect_id = "c_r",
                              .outcome = "not-compensated"};
    CHECK_CODE(mv_saga_resolve(r.engine, NULL, "saga_nc", &res, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "compensating");
    CHECK_STR(step_field(rec, 0, "state"), "compensation-failed");
    json_decref(rec);
    put_saga q = {"saga_nc2", "checkout", "manual-review",
                  "[{\"name\":\"reserve\",\"effectId\":\"e_r2\",\"compensationEffectId\":"
                  "\"c_r2\",\"state\":\"compensating\",\"attempts\":3}]"};
    REQUIRE(mv_store_write(r.store, put_saga_fn, &q, &err) == MV_OK);
    res.effect_id = "c_r2";
    CHECK_CODE(mv_saga_resolve(r.engine, NULL, "saga_nc2", &res, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "manual-review"); /* stored maxAttempts 3 reached */
    json_decref(rec);
    json_decref(input);
    rig_close(&r);
}

/* ---- encryption at rest -------------------------------------------------------------------- */

static const char SQL_RAW_SAGA[] = "SELECT input, steps FROM sagas WHERE saga_id = ?";
static const char SQL_RAW_STEPS[] =
    "SELECT name, compensation_args, result FROM saga_steps WHERE saga_id = ? ORDER BY idx";
/* Changes the first character of the nonce (always a full 6 bits, always a different one: the
 * old tamper wrote 'AA' over the last two, which are already "AA" now and then) */
static const char SQL_TAMPER_SAGA[] =
    "UPDATE sagas SET input = substr(input, 1, 7) || CASE WHEN substr(input, 8, 1) = 'A' THEN 'B' "
    "ELSE 'A' END || substr(input, 9) WHERE saga_id = ?";

typedef struct {
    const char *id;
    char input[4096], steps[8192];
} raw_saga;

static mv_code raw_fn(mv_db *db, void *ctx, mv_err *err) {
    raw_saga *r = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_RAW_SAGA, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "s", r->id);
    if (mv_stmt_step(st, err) == 1) {
        snprintf(r->input, sizeof r->input, "%s", mv_stmt_text(st, 0));
        snprintf(r->steps, sizeof r->steps, "%s", mv_stmt_text(st, 1));
    }
    mv_stmt_done(st);
    /* the step rows (migration 10), appended as `"name":"<name>",<args>,<result>;` */
    if ((rc = mv_db_prepare(db, SQL_RAW_STEPS, &st, err))) return rc;
    mv_stmt_bindf(st, "s", r->id);
    while (mv_stmt_step(st, err) == 1) {
        size_t n = strlen(r->steps);
        snprintf(r->steps + n, sizeof r->steps - n, "\"name\":\"%s\",%s,%s;", mv_stmt_text(st, 0),
                 mv_stmt_text(st, 1) ? mv_stmt_text(st, 1) : "",
                 mv_stmt_text(st, 2) ? mv_stmt_text(st, 2) : "");
    }
    mv_stmt_done(st);
    return MV_OK;
}

static mv_code tamper_fn(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_TAMPER_SAGA, NULL, err, "s", (const char *)ctx);
}

STORE_TEST(encrypted_saga_stores_no_plaintext_and_detects_tampering) {
    world w = {0};
    rig r;
    unsigned char key[32];
    memset(key, 0x42, sizeof key);
    REQUIRE(rig_open(&r, kind, "enc.db", &w, key));
    mv_saga_definition def = checkout(&w, 3);
    json_t *input = json_pack("{s:s}", "card", "4242-secret"), *rec = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_enc", input, NULL, &rec, &err), MV_OK, &err);
    CHECK(json_equal(json_object_get(rec, "input"), input));
    CHECK_STR(step_field(rec, 0, "result"), "reserve-ok");
    json_decref(rec);
    raw_saga raw = {.id = "saga_enc"};
    REQUIRE(mv_store_read(r.store, raw_fn, &raw, &err) == MV_OK);
    CHECK(strncmp(raw.input, "enc:v1:", 7) == 0);
    CHECK(strstr(raw.input, "4242") == NULL);
    CHECK(strstr(raw.steps, "reserve-ok") == NULL);
    CHECK(strstr(raw.steps, "sku") == NULL);
    CHECK(strstr(raw.steps, "\"name\":\"reserve\"") != NULL); /* tokens stay readable */
    /* without the key the engine refuses rather than guessing */
    mv_saga_engine *plain;
    REQUIRE(mv_saga_engine_new(r.store, NULL, &plain, &err) == MV_OK);
    CHECK_CODE(mv_saga_get(plain, "saga_enc", &rec, &err), MV_INTERNAL, &err);
    CHECK(strstr(err.message, "encrypted") != NULL);
    mv_saga_engine_free(plain);
    REQUIRE(mv_store_write(r.store, tamper_fn, "saga_enc", &err) == MV_OK);
    CHECK_CODE(mv_saga_get(r.engine, "saga_enc", &rec, &err), MV_INTERNAL, &err);
    CHECK(strstr(err.message, "cannot be decrypted") != NULL);
    json_decref(input);
    rig_close(&r);
}

/* ---- two processes resuming one saga ------------------------------------------------------- */

typedef struct {
    const char *count_path;
    int ready_fd, go_fd;
} racer;

static mv_code race_exec(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)result;
    racer *r = ctx;
    int fd = open(r->count_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0) return mv_err_set(err, MV_IO, "cannot open the count file");
    char line[160];
    int n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), call->step);
    ssize_t wr = write(fd, line, (size_t)n);
    close(fd);
    return wr == n ? MV_OK : mv_err_set(err, MV_IO, "short write");
}

static mv_code race_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    racer *r = def_ctx;
    char b = 'r';
    /* this runner holds the saga; the test starts the second runner now and lets us go after */
    if (write(r->ready_fd, &b, 1) != 1 || read(r->go_fd, &b, 1) != 1)
        return mv_err_set(err, MV_IO, "barrier failed");
    mv_code rc = mv_saga_step(ctx, "one", NULL, race_exec, r, NULL, err);
    if (rc) return rc;
    return mv_saga_step(ctx, "two", NULL, race_exec, r, NULL, err);
}

static mv_code noop_comp(const json_t *a, const mv_saga_compensation_call *c, void *ctx,
                         mv_err *err) {
    (void)a;
    (void)c;
    (void)ctx;
    (void)err;
    return MV_OK;
}

STORE_TEST(two_processes_resuming_one_saga_one_proceeds_and_no_step_runs_twice) {
    char url[600];
    mv_store *s = fixture_store(kind, "race.db", url, sizeof url);
    REQUIRE(s);
    const char *count_path = test_tmp_path("race.count");
    mv_err err = {0};
    put_saga p = {"saga_race", "race", "running", "[]"};
    REQUIRE(mv_store_write(s, put_saga_fn, &p, &err) == MV_OK);
    mv_store_close(s);
    int ready[2], go[2];
    REQUIRE(pipe(ready) == 0 && pipe(go) == 0);
    pid_t kids[2];
    char b[2];
    for (int k = 0; k < 2; k++) {
        /* the second runner starts while the first is inside its run, holding the saga */
        if (k == 1) CHECK(read(ready[0], b, 1) == 1);
        kids[k] = fork();
        REQUIRE(kids[k] >= 0);
        if (kids[k] == 0) {
            racer r = {.count_path = count_path, .ready_fd = ready[1], .go_fd = go[0]};
            mv_saga_compensator c[] = {{"one", noop_comp, NULL}, {"two", noop_comp, NULL}};
            mv_saga_definition def = {
                .name = "race", .run = race_run, .compensators = c, .ncompensators = 2, .ctx = &r};
            mv_store *cs = NULL;
            mv_saga_engine *e = NULL;
            mv_err ce = {0};
            int status = 3;
            if (mv_store_open(url, NULL, &cs, &ce) == MV_OK &&
                mv_saga_engine_new(cs, NULL, &e, &ce) == MV_OK) {
                mv_code rc = mv_saga_resume(e, &def, "saga_race", NULL, NULL, &ce);
                status = rc == MV_OK ? 0 : rc == MV_SAGA_CONCURRENCY ? 1 : 2;
            }
            mv_saga_engine_free(e);
            mv_store_close(cs);
            _exit(status);
        }
    }
    int codes[2], st = 0;
    waitpid(kids[1], &st, 0); /* refused at once: it never reaches its run */
    codes[1] = WIFEXITED(st) ? WEXITSTATUS(st) : -100 - WTERMSIG(st);
    CHECK(write(go[1], "g", 1) == 1);
    waitpid(kids[0], &st, 0);
    codes[0] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    CHECK_INT(codes[0], 0);
    CHECK_INT(codes[1], 1); /* MV_SAGA_CONCURRENCY */
    FILE *f = fopen(count_path, "r");
    REQUIRE(f);
    char line[160];
    int one = 0, two = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, " one")) one++;
        if (strstr(line, " two")) two++;
    }
    fclose(f);
    CHECK_INT(one, 1);
    CHECK_INT(two, 1);
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    mv_saga_engine *e;
    REQUIRE(mv_saga_engine_new(s, NULL, &e, &err) == MV_OK);
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_get(e, "saga_race", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    mv_saga_engine_free(e);
    mv_store_close(s);
}

/* ---- kill -9 between a step's return and the saga's next write ---------------------------- */

static mv_code crash_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    racer *r = def_ctx;
    mv_code rc = mv_saga_step(ctx, "one", NULL, race_exec, r, NULL, err);
    if (rc) return rc;
    char b = 'r';
    if (write(r->ready_fd, &b, 1) != 1) return mv_err_set(err, MV_IO, "barrier failed");
    for (;;)
        pause(); /* killed here: step one returned, its commit not yet written */
}

static mv_code crash_run_two(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    racer *r = def_ctx;
    mv_code rc = mv_saga_step(ctx, "one", NULL, race_exec, r, NULL, err);
    if (rc) return rc;
    return mv_saga_step(ctx, "two", NULL, race_exec, r, NULL, err);
}

STORE_TEST(a_runner_killed_after_a_step_returned_leaves_it_for_review_and_it_never_runs_twice) {
    char url[600];
    mv_store *s = fixture_store(kind, "crash.db", url, sizeof url);
    REQUIRE(s);
    mv_store_close(s); /* the child opens its own */
    const char *count_path = test_tmp_path("crash.count");
    unlink(count_path);
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    mv_saga_compensator c[] = {{"one", noop_comp, NULL}, {"two", noop_comp, NULL}};
    racer r = {.count_path = count_path, .ready_fd = ready[1]};
    mv_saga_definition def = {
        .name = "crash", .run = crash_run, .compensators = c, .ncompensators = 2, .ctx = &r};
    pid_t kid = fork();
    REQUIRE(kid >= 0);
    if (kid == 0) {
        mv_store *cs = NULL;
        mv_saga_engine *e = NULL;
        mv_err ce = {0};
        mv_saga_engine_options o = {.runner_lease_ms = 50};
        if (mv_store_open(url, NULL, &cs, &ce) == MV_OK &&
            mv_saga_engine_new(cs, &o, &e, &ce) == MV_OK)
            mv_saga_execute(e, &def, "saga_crash", NULL, NULL, NULL, &ce);
        _exit(3);
    }
    char b;
    CHECK(read(ready[0], &b, 1) == 1);
    kill(kid, SIGKILL);
    int st = 0;
    waitpid(kid, &st, 0);
    CHECK(WIFSIGNALED(st));
    close(ready[0]);
    close(ready[1]);
    usleep(100 * 1000); /* the dead runner's 50 ms lease runs out */
    mv_saga_engine *e = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_saga_engine_new(s, NULL, &e, &err) == MV_OK);
    def.run = crash_run_two;
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_resume(e, &def, "saga_crash", NULL, &rec, &err), MV_SAGA_AMBIGUOUS_STEP,
               &err);
    CHECK_STR(mv_json_str(rec, "state"), "manual-review");
    CHECK_STR(step_field(rec, 0, "state"), "executing");
    char effect[64], state[16], cap[129];
    snprintf(effect, sizeof effect, "%s", step_field(rec, 0, "effectId"));
    journal_state(s, effect, state, cap);
    CHECK_STR(state, "executing");
    json_decref(rec);
    /* the operator knows it committed; the saga goes on without calling step one again */
    mv_saga_resolution res = {
        .kind = "execution", .step = "one", .effect_id = effect, .outcome = "committed"};
    CHECK_CODE(mv_saga_resolve(e, &def, "saga_crash", &res, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_saga_resume(e, &def, "saga_crash", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    FILE *f = fopen(count_path, "r");
    REQUIRE(f);
    char line[160];
    int one = 0, two = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, " one")) one++;
        if (strstr(line, " two")) two++;
    }
    fclose(f);
    CHECK_INT(one, 1);
    CHECK_INT(two, 1);
    mv_saga_engine_free(e);
    mv_store_close(s);
}

/* ---- a very long runner lease ------------------------------------------------------------- */

typedef struct {
    mv_saga_engine *other;
    int inner_calls;
    mv_code inner_rc;
} lease_probe;

static mv_code lease_probe_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err);

static mv_saga_definition lease_probe_def(lease_probe *p) {
    static mv_saga_compensator c[1];
    c[0] = (mv_saga_compensator){"one", compensate_step, NULL};
    return (mv_saga_definition){
        .name = "probe", .run = lease_probe_run, .compensators = c, .ncompensators = 1, .ctx = p};
}

/* While this runner holds the saga, a second engine tries to resume it. */
static mv_code lease_probe_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    (void)err;
    lease_probe *p = def_ctx;
    if (p->inner_calls++ == 0) {
        mv_saga_definition def = lease_probe_def(p);
        mv_err inner = {0};
        p->inner_rc = mv_saga_resume(p->other, &def, mv_saga_ctx_id(ctx), NULL, NULL, &inner);
    }
    return MV_OK;
}

STORE_TEST(a_runner_lease_longer_than_the_clock_can_count_is_still_held) {
    rig r;
    world w = {0};
    REQUIRE(rig_open(&r, kind, "longlease.db", &w, NULL));
    mv_saga_engine *holder = NULL, *other = NULL;
    mv_err err = {0};
    mv_saga_engine_options o = {.clock = &r.clock, .runner_lease_ms = INT64_MAX};
    REQUIRE(mv_saga_engine_new(r.store, &o, &holder, &err) == MV_OK);
    mv_saga_engine_options o2 = {.clock = &r.clock};
    REQUIRE(mv_saga_engine_new(r.store, &o2, &other, &err) == MV_OK);
    lease_probe p = {.other = other};
    mv_saga_definition def = lease_probe_def(&p);
    CHECK_CODE(mv_saga_execute(holder, &def, "saga_long_lease", NULL, NULL, NULL, &err), MV_OK,
               &err);
    CHECK_INT(p.inner_calls, 1); /* the second engine never ran the saga */
    CHECK_INT(p.inner_rc, MV_SAGA_CONCURRENCY);
    mv_saga_engine_free(holder);
    mv_saga_engine_free(other);
    rig_close(&r);
}

/* ---- migration 10: step documents become rows -------------------------------------------- */

static const char SQL_UNDO_MIGRATION_10[] = "DROP TABLE saga_steps";
static const char SQL_COUNT_STEP_ROWS[] = "SELECT COUNT(*) FROM saga_steps WHERE saga_id = ?";
static const char SQL_STEP_ARGS[] =
    "SELECT compensation_args FROM saga_steps WHERE saga_id = ? ORDER BY idx";

static mv_code undo_10_fn(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_UNDO_MIGRATION_10, err);
}

extern const mv_migration mv_migration_saga_steps;

/* Later migrations stay applied, so migration 10 is replayed by itself. */
static mv_code replay_10_fn(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db,
                      mv_db_kind(db) == MV_STORE_POSTGRES ? mv_migration_saga_steps.postgres_sql
                                                          : mv_migration_saga_steps.sqlite_sql,
                      err);
}

typedef struct {
    const char *id;
    int64_t rows;
    char doc[256], args[3][128];
} step_rows;

static mv_code step_rows_fn(mv_db *db, void *ctx, mv_err *err) {
    step_rows *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_COUNT_STEP_ROWS, &st, err, "s", t->id);
    if (rc) return rc;
    t->rows = st ? mv_stmt_int64(st, 0) : -1;
    mv_stmt_done(st);
    if ((rc = mv_db_row(db, SQL_RAW_SAGA, &st, err, "s", t->id))) return rc;
    snprintf(t->doc, sizeof t->doc, "%s", st ? mv_stmt_text(st, 1) : "");
    mv_stmt_done(st);
    if ((rc = mv_db_prepare(db, SQL_STEP_ARGS, &st, err))) return rc;
    mv_stmt_bindf(st, "s", t->id);
    for (int i = 0; i < 3 && mv_stmt_step(st, err) == 1; i++)
        snprintf(t->args[i], sizeof t->args[i], "%s", mv_stmt_text(st, 0));
    mv_stmt_done(st);
    return MV_OK;
}

STORE_TEST(migration_10_moves_step_documents_into_rows_and_the_saga_reads_the_same) {
    world w = {0};
    rig r;
    REQUIRE(rig_open(&r, kind, "mig10.db", &w, NULL));
    mv_err err = {0};
    /* the schema as it was before migration 10, holding a saga written by the document engine */
    REQUIRE(mv_store_write(r.store, undo_10_fn, NULL, &err) == MV_OK);
    const char *doc =
        "[{\"name\":\"reserve\",\"effectId\":\"e_r\",\"compensationEffectId\":\"c_r\","
        "\"state\":\"compensated\",\"compensationArgs\":{\"sku\":\"a\",\"n\":[1,2]},"
        "\"attempts\":1,\"result\":{\"ok\":true}},"
        "{\"name\":\"charge\",\"effectId\":\"e_c\",\"compensationEffectId\":\"c_c\","
        "\"state\":\"compensation-failed\",\"compensationArgs\":\"enc-free text\","
        "\"attempts\":2,\"result\":null,\"errorCode\":\"compensation_failed\","
        "\"nextAttemptAt\":4000},"
        "{\"name\":\"ship\",\"effectId\":\"e_s\",\"compensationEffectId\":\"c_s\","
        "\"state\":\"failed\",\"compensationArgs\":null,\"attempts\":0,"
        "\"errorCode\":\"not_committed\"}]";
    put_saga p = {"saga_mig", "checkout", "compensating", doc, true};
    REQUIRE(mv_store_write(r.store, put_saga_fn, &p, &err) == MV_OK);
    CHECK_CODE(mv_store_write(r.store, replay_10_fn, NULL, &err), MV_OK, &err);
    step_rows t = {.id = "saga_mig"};
    REQUIRE(mv_store_read(r.store, step_rows_fn, &t, &err) == MV_OK);
    CHECK_INT(t.rows, 3);
    CHECK_STR(t.doc, "[]");
    json_t *args0 = NULL;
    CHECK(mv_json_parse(t.args[0], strlen(t.args[0]), &args0, &err) == MV_OK);
    json_t *want_args = json_pack("{s:s, s:[i,i]}", "sku", "a", "n", 1, 2);
    CHECK(json_equal(args0, want_args));
    json_decref(want_args);
    json_decref(args0);
    CHECK_STR(t.args[1], "\"enc-free text\"");
    CHECK_STR(t.args[2], "null");
    json_t *rec = NULL, *want = NULL;
    CHECK_CODE(mv_saga_get(r.engine, "saga_mig", &rec, &err), MV_OK, &err);
    REQUIRE(mv_json_parse(doc, strlen(doc), &want, &err) == MV_OK);
    size_t i;
    json_t *s;
    json_array_foreach(want, i, s) json_object_del(s, "compensationArgs"); /* never public */
    CHECK(json_equal(json_object_get(rec, "steps"), want));
    CHECK_STR(mv_json_str(rec, "state"), "compensating");
    json_decref(rec);
    json_decref(want);
    rig_close(&r);
}

/* ---- a step's commit travels with the saga's next write ------------------------------------ */

typedef struct {
    mv_store *store;
    mv_abort *abort_between; /* fired after the first step returns */
    int saves;
    char stored_first[32];  /* step 0's state as stored while the run is between steps */
    char journal_first[16]; /* and its effect's journal state */
} fold_probe;

static void count_save(const json_t *record, void *ctx) {
    (void)record;
    ((fold_probe *)ctx)->saves++;
}

static mv_code fold_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)call, (void)ctx, (void)err;
    *result = json_pack("{s:b}", "ok", 1);
    return MV_OK;
}

static mv_code fold_comp(const json_t *args, const mv_saga_compensation_call *call, void *ctx,
                         mv_err *err) {
    (void)args, (void)call, (void)ctx, (void)err;
    return MV_OK;
}

static mv_code fold_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    fold_probe *p = def_ctx;
    static const char *const names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        mv_code rc = mv_saga_step(ctx, names[i], NULL, fold_step, NULL, NULL, err);
        if (rc) return rc;
        if (i > 0) continue;
        mv_saga_engine *reader = NULL;
        json_t *rec = NULL;
        char cap[129];
        if (mv_saga_engine_new(p->store, NULL, &reader, NULL) == MV_OK &&
            mv_saga_get(reader, mv_saga_ctx_id(ctx), &rec, NULL) == MV_OK) {
            snprintf(p->stored_first, sizeof p->stored_first, "%s", step_field(rec, 0, "state"));
            journal_state(p->store, step_field(rec, 0, "effectId"), p->journal_first, cap);
        }
        json_decref(rec);
        mv_saga_engine_free(reader);
        if (p->abort_between) mv_abort_fire(p->abort_between, "stopped between steps");
    }
    return MV_OK;
}

STORE_TEST(a_step_commit_is_written_with_the_next_step_and_a_stopped_run_still_writes_it) {
    rig r;
    world w = {0};
    REQUIRE(rig_open(&r, kind, "fold.db", &w, NULL));
    fold_probe p = {.store = r.store};
    mv_saga_engine *e = NULL;
    mv_err err = {0};
    mv_saga_engine_options o = {.clock = &r.clock, .on_save = count_save, .on_save_ctx = &p};
    REQUIRE(mv_saga_engine_new(r.store, &o, &e, &err) == MV_OK);
    mv_saga_compensator c[3] = {
        {"a", fold_comp, NULL}, {"b", fold_comp, NULL}, {"c", fold_comp, NULL}};
    mv_saga_definition def = {
        .name = "fold", .run = fold_run, .compensators = c, .ncompensators = 3, .ctx = &p};
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_execute(e, &def, "saga_fold", NULL, NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    /* between the steps the store still had step a executing: its commit came with b's start */
    CHECK_STR(p.stored_first, "executing");
    CHECK_STR(p.journal_first, "executing");
    /* saves: a's start, a's commit + b's start, b's commit + c's start, c's commit + the end */
    CHECK_INT(p.saves, 4);
    json_decref(rec);
    CHECK_CODE(mv_saga_get(e, "saga_fold", &rec, &err), MV_OK, &err);
    char state[16], cap[129];
    for (int i = 0; i < 3; i++) {
        CHECK_STR(step_field(rec, i, "state"), "committed");
        journal_state(r.store, step_field(rec, i, "effectId"), state, cap);
        CHECK_STR(state, "committed");
    }
    json_decref(rec);
    /* a run stopped between steps writes the commit it holds as it lets go of the saga */
    mv_abort stop = {0};
    p.abort_between = &stop;
    CHECK_CODE(mv_saga_execute(e, &def, "saga_fold_stop", NULL, &stop, &rec, &err), MV_ABORTED,
               &err);
    CHECK_STR(step_field(rec, 0, "state"), "committed");
    CHECK(json_array_size(json_object_get(rec, "steps")) == 1);
    json_decref(rec);
    mv_saga_engine *other = NULL;
    REQUIRE(mv_saga_engine_new(r.store, NULL, &other, &err) == MV_OK);
    CHECK_CODE(mv_saga_get(other, "saga_fold_stop", &rec, &err), MV_OK, &err);
    CHECK_STR(step_field(rec, 0, "state"), "committed");
    journal_state(r.store, step_field(rec, 0, "effectId"), state, cap);
    CHECK_STR(state, "committed");
    json_decref(rec);
    /* and the lease went with it: another runner resumes at once and finishes */
    p.abort_between = NULL;
    CHECK_CODE(mv_saga_resume(other, &def, "saga_fold_stop", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    mv_saga_engine_free(other);
    mv_saga_engine_free(e);
    rig_close(&r);
}

static mv_code flat_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input, (void)def_ctx;
    static const char *const names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        json_t *args = json_pack("{s:i}", "i", i);
        mv_code rc = mv_saga_step(ctx, names[i], args, fold_step, NULL, NULL, err);
        json_decref(args);
        if (rc) return rc;
    }
    return MV_OK;
}

/* The start (BEGIN + INSERT, then COMMIT) waits for its answer: 2; each of the four saves of a
 * running saga is BEGIN, its statement and COMMIT sent in one flush: 4 (before: 2 each, 10). */
POSTGRES_TEST(a_three_step_saga_costs_five_round_trips_on_postgresql) {
    rig r;
    world w = {0};
    REQUIRE(rig_open(&r, kind, "trips.db", &w, NULL));
    mv_saga_compensator c[3] = {
        {"a", fold_comp, NULL}, {"b", fold_comp, NULL}, {"c", fold_comp, NULL}};
    mv_saga_definition def = {
        .name = "flat", .run = flat_run, .compensators = c, .ncompensators = 3};
    mv_err err = {0};
    json_t *rec = NULL;
    REQUIRE(mv_saga_execute(r.engine, &def, "saga_trips_warm", NULL, NULL, NULL, &err) == MV_OK);
    uint64_t t0 = mv__store_round_trips(r.store);
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_trips", NULL, NULL, &rec, &err), MV_OK, &err);
    uint64_t trips = mv__store_round_trips(r.store) - t0;
    printf("round trips per 3-step saga: %llu\n", (unsigned long long)trips);
    CHECK_INT((int64_t)trips, 5);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    json_decref(rec);
    CHECK_CODE(mv_saga_get(r.engine, "saga_trips", &rec, &err), MV_OK, &err);
    char state[16], cap[129];
    for (int i = 0; i < 3; i++) {
        CHECK_STR(step_field(rec, i, "state"), "committed");
        journal_state(r.store, step_field(rec, i, "effectId"), state, cap);
        CHECK_STR(state, "committed");
    }
    json_decref(rec);
    rig_close(&r);
}

static const char SQL_BUMP_VERSION[] = "UPDATE sagas SET version = version + 1 WHERE saga_id = ?";

static mv_code bump_fn(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_BUMP_VERSION, NULL, err, "s", (const char *)ctx);
}

/* Step b moves the saga's version under its runner (as another writer would). */
static mv_code bump_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)call;
    mv_code rc = mv_store_write(ctx, bump_fn, "saga_moved", err);
    *result = json_pack("{s:b}", "ok", 1);
    return rc;
}

static mv_code moved_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    mv_code rc = mv_saga_step(ctx, "a", NULL, fold_step, NULL, NULL, err);
    if (rc == MV_OK) rc = mv_saga_step(ctx, "b", NULL, bump_step, def_ctx, NULL, err);
    if (rc == MV_OK) rc = mv_saga_step(ctx, "c", NULL, fold_step, NULL, NULL, err);
    return rc;
}

/* The save after b (b's commit with c's start) is sent blind and fails its compare-and-set: the
 * runner stops with saga_concurrency, and neither c's row nor its effect was written. */
STORE_TEST(a_save_whose_version_moved_answers_saga_concurrency_and_writes_nothing) {
    rig r;
    world w = {0};
    REQUIRE(rig_open(&r, kind, "moved.db", &w, NULL));
    mv_saga_compensator c[3] = {
        {"a", fold_comp, NULL}, {"b", fold_comp, NULL}, {"c", fold_comp, NULL}};
    mv_saga_definition def = {
        .name = "moved", .run = moved_run, .compensators = c, .ncompensators = 3, .ctx = r.store};
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_moved", NULL, NULL, NULL, &err),
               MV_SAGA_CONCURRENCY, &err);
    CHECK_STR(err.saga_id, "saga_moved");
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_get(r.engine, "saga_moved", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "running");
    CHECK(json_array_size(json_object_get(rec, "steps")) == 2);
    CHECK_STR(step_field(rec, 1, "state"), "executing");
    char state[16], cap[129];
    journal_state(r.store, step_field(rec, 1, "effectId"), state, cap);
    CHECK_STR(state, "executing");
    json_decref(rec);
    rig_close(&r);
}

/* ---- concurrent sagas share commits on PostgreSQL ------------------------------------------ */

#define BATCH_THREADS 16
#define BATCH_SAGAS 8 /* per thread; one of them has its version moved under it */
#define BATCH_MOVED 3 /* the index of that one */

static mv_code bump_own_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    mv_code rc = mv_store_write(ctx, bump_fn, (void *)call->saga_id, err);
    *result = json_pack("{s:b}", "ok", 1);
    return rc;
}

static mv_code moved_own_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    mv_code rc = mv_saga_step(ctx, "a", NULL, fold_step, NULL, NULL, err);
    if (rc == MV_OK) rc = mv_saga_step(ctx, "b", NULL, bump_own_step, def_ctx, NULL, err);
    if (rc == MV_OK) rc = mv_saga_step(ctx, "c", NULL, fold_step, NULL, NULL, err);
    return rc;
}

typedef struct {
    mv_saga_engine *engine;
    const mv_saga_definition *flat, *moved;
    const char *prefix;
    int t;
    mv_code rc[BATCH_SAGAS];
    char err_saga[BATCH_SAGAS][160];
} batch_runner;

static void *run_batch_sagas(void *arg) {
    batch_runner *b = arg;
    for (int i = 0; i < BATCH_SAGAS; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s_%d_%d", b->prefix, b->t, i);
        mv_err err = {0};
        b->rc[i] = mv_saga_execute(b->engine, i == BATCH_MOVED ? b->moved : b->flat, id, NULL, NULL,
                                   NULL, &err);
        snprintf(b->err_saga[i], sizeof b->err_saga[i], "%s", err.saga_id);
    }
    return NULL;
}

/* Runs BATCH_THREADS threads of sagas on store (through engine), checks every outcome and
 * returns the round trips they took. */
static uint64_t run_saga_wave(mv_store *store, mv_saga_engine *engine, const char *prefix) {
    mv_saga_compensator c[3] = {
        {"a", fold_comp, NULL}, {"b", fold_comp, NULL}, {"c", fold_comp, NULL}};
    mv_saga_definition flat = {
        .name = "flat", .run = flat_run, .compensators = c, .ncompensators = 3};
    mv_saga_definition moved = {
        .name = "moved", .run = moved_own_run, .compensators = c, .ncompensators = 3, .ctx = store};
    static batch_runner b[BATCH_THREADS];
    pthread_t th[BATCH_THREADS];
    uint64_t t0 = mv__store_round_trips(store);
    for (int t = 0; t < BATCH_THREADS; t++) {
        b[t] = (batch_runner){
            .engine = engine, .flat = &flat, .moved = &moved, .prefix = prefix, .t = t};
        pthread_create(&th[t], NULL, run_batch_sagas, &b[t]);
    }
    for (int t = 0; t < BATCH_THREADS; t++)
        pthread_join(th[t], NULL);
    uint64_t trips = mv__store_round_trips(store) - t0;
    mv_err err = {0};
    char state[16], cap[129];
    for (int t = 0; t < BATCH_THREADS; t++)
        for (int i = 0; i < BATCH_SAGAS; i++) {
            char id[64];
            snprintf(id, sizeof id, "%s_%d_%d", prefix, t, i);
            json_t *rec = NULL;
            CHECK_CODE(mv_saga_get(engine, id, &rec, &err), MV_OK, &err);
            if (i == BATCH_MOVED) { /* as alone: saga_concurrency, c neither started nor written */
                CHECK_INT(b[t].rc[i], MV_SAGA_CONCURRENCY);
                CHECK_STR(b[t].err_saga[i], id);
                CHECK_STR(mv_json_str(rec, "state"), "running");
                CHECK(json_array_size(json_object_get(rec, "steps")) == 2);
                CHECK_STR(step_field(rec, 1, "state"), "executing");
                journal_state(store, step_field(rec, 1, "effectId"), state, cap);
                CHECK_STR(state, "executing");
            } else {
                CHECK_INT(b[t].rc[i], MV_OK);
                CHECK_STR(mv_json_str(rec, "state"), "completed");
                for (int k = 0; k < 3; k++) {
                    CHECK_STR(step_field(rec, k, "state"), "committed");
                    journal_state(store, step_field(rec, k, "effectId"), state, cap);
                    CHECK_STR(state, "committed");
                }
            }
            json_decref(rec);
        }
    return trips;
}

/* Sixteen threads running sagas at once share transactions (store/pg_batch.c): they take fewer
 * round trips than the same sagas on a store with group commit off (each write its own
 * transaction) — and a save that lost its compare-and-set, in a batch or not, still fails alone
 * with saga_concurrency and writes nothing, while every other saga completes. */
POSTGRES_TEST(sixteen_threads_running_sagas_share_commits_and_a_lost_save_still_fails_alone) {
    rig r;
    world w = {0};
    mv_saga_engine *alone_engine = NULL;
    REQUIRE(rig_open(&r, kind, "batch.db", &w, NULL));
    mv_store_options no_batch = {.no_group_commit = true};
    mv_store *alone = test_store_fresh_with(kind, "batch_alone.db", &no_batch);
    REQUIRE(alone != NULL);
    mv_err err = {0};
    mv_saga_engine_options o = {.clock = &r.clock};
    REQUIRE(mv_saga_engine_new(alone, &o, &alone_engine, &err) == MV_OK);
    uint64_t shared = run_saga_wave(r.store, r.engine, "saga_shared");
    uint64_t single = run_saga_wave(alone, alone_engine, "saga_alone");
    printf("round trips for %d concurrent sagas: %llu sharing commits, %llu alone\n",
           BATCH_THREADS * BATCH_SAGAS, (unsigned long long)shared, (unsigned long long)single);
    CHECK(shared < single);
    CHECK(shared < (uint64_t)BATCH_THREADS * BATCH_SAGAS * 5); /* five writes per saga, shared */
    mv_saga_engine_free(alone_engine);
    mv_store_close(alone);
    rig_close(&r);
}

/* ---- migration 12: a running saga's saves touch no indexed column ---------------------------- */

/* Every column some index of `sagas` holds (no index has an expression or a predicate). */
static const char SQL_PG_INDEXED[] =
    "SELECT DISTINCT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'sagas'::regclass ORDER BY 1";
static const char SQL_SQLITE_INDEXED[] =
    "SELECT DISTINCT ii.name FROM pragma_index_list('sagas') il, pragma_index_info(il.name) ii "
    "ORDER BY 1";
static const char SQL_SAGA_ROW[] =
    "SELECT saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version, tenant_id, runner_id, runner_expires_at FROM sagas "
    "WHERE saga_id = ?";
static const char *const saga_columns[] = {
    "saga_id",          "definition", "state",      "input",   "input_fingerprint", "steps",
    "max_attempts",     "created_at", "updated_at", "version", "tenant_id",         "runner_id",
    "runner_expires_at"};
#define NCOLS ((int)(sizeof saga_columns / sizeof saga_columns[0]))

typedef struct {
    char names[16][64];
    int n;
} indexed_columns;

static mv_code indexed_fn(mv_db *db, void *ctx, mv_err *err) {
    indexed_columns *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(
        db, mv_db_kind(db) == MV_STORE_POSTGRES ? SQL_PG_INDEXED : SQL_SQLITE_INDEXED, &st, err);
    if (rc) return rc;
    t->n = 0;
    while (mv_stmt_step(st, err) == 1 && t->n < 16)
        snprintf(t->names[t->n++], sizeof t->names[0], "%s", mv_stmt_text(st, 0));
    mv_stmt_done(st);
    return MV_OK;
}

static int column_of(const char *name) {
    for (int i = 0; i < NCOLS; i++)
        if (strcmp(saga_columns[i], name) == 0) return i;
    return -1;
}

typedef struct {
    const char *id;
    char v[NCOLS][160];
} saga_row;

static mv_code saga_row_fn(mv_db *db, void *ctx, mv_err *err) {
    saga_row *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_SAGA_ROW, &st, err, "s", t->id);
    if (rc || !st) return rc ? rc : mv_err_set(err, MV_SAGA_NOT_FOUND, "no row");
    for (int i = 0; i < NCOLS; i++)
        snprintf(t->v[i], sizeof t->v[i], "%s",
                 mv_stmt_is_null(st, i) ? "<null>" : mv_stmt_text(st, i));
    mv_stmt_done(st);
    return MV_OK;
}

typedef struct {
    rig *r;
    saga_row rows[3]; /* the stored row during each step's call: after 1, 2 and 3 saves */
    int n;
    char finding[32];
} hot_probe;

static void finding_for(mv_store *store, int64_t stale_before, const char *id, char out[32]) {
    json_t *findings = NULL;
    out[0] = '\0';
    if (mv_reconcile_sagas(store, stale_before, &findings, NULL) != MV_OK) {
        snprintf(out, 32, "error");
        return;
    }
    size_t i;
    json_t *f;
    json_array_foreach(findings, i, f) {
        if (strcmp(mv_json_str(f, "sagaId"), id) == 0)
            snprintf(out, 32, "%s", mv_json_str(f, "reason"));
    }
    json_decref(findings);
}

static mv_code hot_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    hot_probe *p = ctx;
    int64_t saved_at = p->r->now; /* the save before this call was written at this time */
    p->r->now += 7;
    if (p->n < 3) {
        p->rows[p->n].id = call->saga_id;
        mv_store_read(p->r->store, saga_row_fn, &p->rows[p->n], err);
        p->n++;
    }
    if (p->n == 3) { /* mid-flight, three saves in: the scan still finds it (a step executing) */
        finding_for(p->r->store, saved_at - 1, call->saga_id, p->finding);
    }
    *result = json_pack("{s:b}", "ok", 1);
    return MV_OK;
}

static mv_code hot_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    static const char *const names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        mv_code rc = mv_saga_step(ctx, names[i], NULL, hot_step, def_ctx, NULL, err);
        if (rc) return rc;
    }
    return MV_OK;
}

STORE_TEST(a_running_sagas_saves_change_no_indexed_column_and_reconcile_still_sees_them) {
    rig r;
    world w = {0};
    REQUIRE(rig_open(&r, kind, "hot.db", &w, NULL));
    mv_err err = {0};
    indexed_columns ix = {0};
    REQUIRE(mv_store_read(r.store, indexed_fn, &ix, &err) == MV_OK);
    CHECK(ix.n >= 5); /* the key, the scan index and the list indexes' columns */
    for (int i = 0; i < ix.n; i++) {
        CHECK(column_of(ix.names[i]) >= 0); /* a column this test does not know fails it */
        CHECK(strcmp(ix.names[i], "updated_at") != 0);
    }
    hot_probe p = {.r = &r};
    mv_saga_compensator c[3] = {
        {"a", fold_comp, NULL}, {"b", fold_comp, NULL}, {"c", fold_comp, NULL}};
    mv_saga_definition def = {
        .name = "hot", .run = hot_run, .compensators = c, .ncompensators = 3, .ctx = &p};
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_execute(r.engine, &def, "saga_hot", NULL, NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    REQUIRE(p.n == 3);
    int updated = column_of("updated_at"), version = column_of("version");
    /* the saves between did happen (a new version, a later time each)… */
    CHECK_STR(p.rows[0].v[version], "2");
    CHECK_STR(p.rows[2].v[version], "4");
    CHECK(strcmp(p.rows[0].v[updated], p.rows[2].v[updated]) != 0);
    CHECK_INT(json_integer_value(json_object_get(rec, "updatedAt")), r.now);
    /* …and left every indexed column as the first one wrote it */
    for (int i = 0; i < ix.n; i++) {
        int col = column_of(ix.names[i]);
        if (col < 0) continue;
        if (strcmp(p.rows[0].v[col], p.rows[2].v[col]) != 0)
            fprintf(stderr, "  indexed column %s: %s -> %s\n", ix.names[i], p.rows[0].v[col],
                    p.rows[2].v[col]);
        CHECK_STR(p.rows[0].v[col], p.rows[2].v[col]);
    }
    /* the reconciliation scan (over the new index) still found it while it ran */
    CHECK_STR(p.finding, "ambiguous-execution");
    json_decref(rec);
    rig_close(&r);
}

static const char SQL_PUT_TIMED_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version) VALUES (?, 'd', 'running', '{}', '', '[]', 3, ?, ?, 1)";
static const char SQL_TOUCH_SAGA[] = "UPDATE sagas SET updated_at = ? WHERE saga_id = ?";

typedef struct {
    const char *id;
    int64_t created, updated;
} timed_saga;

static const timed_saga timed[] = {{"s_a", 100, 300}, {"s_b", 200, 150}, {"s_c", 300, 100}};

static mv_code put_timed_fn(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = MV_OK;
    for (size_t i = 0; rc == MV_OK && i < 3; i++)
        rc = mv_db_execf(db, SQL_PUT_TIMED_SAGA, NULL, err, "sii", timed[i].id, timed[i].created,
                         timed[i].updated);
    return rc;
}

static mv_code touch_fn(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_TOUCH_SAGA, NULL, err, "is", (int64_t)900, (const char *)ctx);
}

/* Pages of one through the running sagas, the first one found saved (updated_at moved) between
 * two pages; *order gets the ids found, in order. */
static void page_through(mv_store *store, char order[8][16], int *n) {
    mv_reconcile_options o = {.stale_before = 1000, .limit = 1};
    mv_reconcile_page page = {0};
    char cursor[256] = "";
    *n = 0;
    mv_err err = {0};
    for (int guard = 0; guard < 8; guard++) {
        o.cursor = cursor[0] ? cursor : NULL;
        if (mv_reconcile_sagas_page(store, &o, &page, &err) != MV_OK) break;
        json_t *f = json_array_get(page.findings, 0);
        if (f && *n < 8) snprintf(order[(*n)++], 16, "%s", mv_json_str(f, "sagaId"));
        if (guard == 0 && f)
            mv_store_write(store, touch_fn, (void *)mv_json_str(f, "sagaId"), &err);
        snprintf(cursor, sizeof cursor, "%s", page.cursor);
        mv_reconcile_page_clear(&page);
        if (!cursor[0]) break;
    }
}

STORE_TEST(reconcile_pages_sagas_in_creation_order_and_a_save_between_pages_moves_none) {
    mv_store *s = fixture_store(kind, "hotpages.db", NULL, 0);
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, put_timed_fn, NULL, &err) == MV_OK);
    char order[8][16];
    int n = 0;
    page_through(s, order, &n);
    CHECK_INT(n, 3); /* each exactly once, though s_a was saved after the first page */
    CHECK_STR(order[0], "s_a");
    CHECK_STR(order[1], "s_b");
    CHECK_STR(order[2], "s_c");
    /* staleness is still the time of the last save: s_a, saved at 900, is not stale at 200 */
    json_t *findings = NULL;
    CHECK_CODE(mv_reconcile_sagas(s, 200, &findings, &err), MV_OK, &err);
    CHECK_INT((int64_t)json_array_size(findings), 2);
    CHECK_STR(mv_json_str(json_array_get(findings, 0), "sagaId"), "s_b");
    CHECK_STR(mv_json_str(json_array_get(findings, 0), "reason"), "stale-running");
    CHECK_STR(mv_json_str(json_array_get(findings, 1), "sagaId"), "s_c");
    json_decref(findings);
    mv_store_close(s);
}

static const char SQL_PG_FILLFACTOR[] =
    "SELECT COALESCE(array_to_string(reloptions, ','), '') FROM pg_class WHERE relname = 'sagas'";

static const char SQL_PG_EFFECTS_INDEX[] =
    "SELECT indexdef FROM pg_indexes WHERE indexname = 'effects_state_updated'";
static const char SQL_SQLITE_EFFECTS_INDEX[] =
    "SELECT sql FROM sqlite_master WHERE name = 'effects_state_updated'";

static mv_code effects_index_fn(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    bool pg = mv_db_kind(db) == MV_STORE_POSTGRES;
    mv_code rc = mv_db_row(db, pg ? SQL_PG_EFFECTS_INDEX : SQL_SQLITE_EFFECTS_INDEX, &st, err, "");
    if (!rc && st) snprintf(ctx, 512, "%s", mv_stmt_text(st, 0));
    mv_stmt_done(st);
    return rc;
}

static mv_code fillfactor_fn(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_PG_FILLFACTOR, &st, err, "");
    if (!rc && st) snprintf(ctx, 64, "%s", mv_stmt_text(st, 0));
    mv_stmt_done(st);
    return rc;
}

STORE_TEST(migration_12_on_a_version_11_store_keeps_every_saga_findable_in_creation_order) {
    const char *url = test_store_url(kind, "mig12");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(test_store_migrate_to(s, 11, &err) == MV_OK); /* a release before 12 */
    int v = 0, applied = 0, later = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, 11);
    REQUIRE(mv_store_write(s, put_timed_fn, NULL, &err) == MV_OK);
    indexed_columns before = {0}, after = {0};
    REQUIRE(mv_store_read(s, indexed_fn, &before, &err) == MV_OK);
    bool had_updated = false;
    for (int i = 0; i < before.n; i++)
        had_updated |= strcmp(before.names[i], "updated_at") == 0;
    CHECK(had_updated); /* version 11 indexed it */
    for (int i = 0; mv_migrations[i]; i++)
        later += mv_migrations[i]->version > 11;
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, later);
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, mv_store_latest_version());
    REQUIRE(mv_store_read(s, indexed_fn, &after, &err) == MV_OK);
    for (int i = 0; i < after.n; i++)
        CHECK(strcmp(after.names[i], "updated_at") != 0);
    CHECK_INT(after.n, before.n - 1);
    char ix[512] = ""; /* the effects' scan index: only the states reconciliation reads */
    CHECK_CODE(mv_store_read(s, effects_index_fn, ix, &err), MV_OK, &err);
    CHECK(strstr(ix, "WHERE") && strstr(ix, "'executing'") && !strstr(ix, "'committed'"));
    if (strcmp(kind, "postgres") == 0) {
        char opts[64] = "";
        CHECK_CODE(mv_store_read(s, fillfactor_fn, opts, &err), MV_OK, &err);
        CHECK_STR(opts, "fillfactor=70");
    }
    /* the rows written before the migration: found once each, in creation order, by the new
     * index; and staleness still by updated_at */
    char order[8][16];
    int n = 0;
    page_through(s, order, &n);
    CHECK_INT(n, 3);
    CHECK_STR(order[0], "s_a");
    CHECK_STR(order[2], "s_c");
    json_t *findings = NULL;
    CHECK_CODE(mv_reconcile_sagas(s, 200, &findings, &err), MV_OK, &err);
    CHECK_INT((int64_t)json_array_size(findings), 2); /* s_b (150) and s_c (100); s_a was saved */
    json_decref(findings);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(
        checkout_compensates_in_reverse_with_retries_sharing_one_effect_id,
        ambiguous_step_goes_to_manual_review_and_is_reconciled,
        operator_resolution_commits_the_step_and_resume_completes_without_rerunning,
        saga_steps_are_effects_in_the_journal_named_by_the_capability,
        a_step_in_flight_is_executing_in_the_journal_before_its_call,
        saga_and_step_states_have_one_name_each_both_ways,
        no_resolution_moves_a_saga_out_of_a_terminal_state,
        resolved_compensation_lets_compensate_finish, pre_aborted_execute_persists_nothing,
        abort_after_the_step_is_persisted_fails_it_before_execution,
        definition_is_validated_eagerly, exhausted_compensation_goes_to_manual_review,
        saga_json_has_the_public_shape_and_hides_compensation_args,
        start_with_the_same_id_replays_or_reports_a_mismatch,
        invalid_backoff_sends_the_saga_to_review_and_not_compensated_resolution_respects_the_limit,
        encrypted_saga_stores_no_plaintext_and_detects_tampering,
        two_processes_resuming_one_saga_one_proceeds_and_no_step_runs_twice,
        a_runner_lease_longer_than_the_clock_can_count_is_still_held,
        migration_10_moves_step_documents_into_rows_and_the_saga_reads_the_same,
        a_step_commit_is_written_with_the_next_step_and_a_stopped_run_still_writes_it,
        a_three_step_saga_costs_five_round_trips_on_postgresql,
        sixteen_threads_running_sagas_share_commits_and_a_lost_save_still_fails_alone,
        a_save_whose_version_moved_answers_saga_concurrency_and_writes_nothing,
        a_runner_killed_after_a_step_returned_leaves_it_for_review_and_it_never_runs_twice,
        a_running_sagas_saves_change_no_indexed_column_and_reconcile_still_sees_them,
        reconcile_pages_sagas_in_creation_order_and_a_save_between_pages_moves_none,
        migration_12_on_a_version_11_store_keeps_every_saga_findable_in_creation_order);
}
