/* saga_record_test.c — the typed saga record (durable/saga_internal.h) on both stores: what a
 * load parses from the saga row and its step rows, that the public JSON built from it is the
 * shape it always was (no internal field leaks), that a transition written from a record whose
 * version has moved is refused and changes neither the saga row nor a step row, and that a
 * compensation's step transition is one round trip on PostgreSQL. */
#include "durable/fixture.h"
#include "durable/saga_internal.h"
#include "store/driver.h"

typedef struct {
    mv_store *store;
    mv_saga_engine *engine;
    mv_clock clock;
    int64_t now;
} rig;

static bool rig_open(rig *r, const char *kind, const char *name) {
    r->store = fixture_store(kind, name, NULL, 0);
    if (!r->store) return false;
    r->now = 1000;
    r->clock = mv_manual_clock(&r->now);
    mv_saga_engine_options o = {.clock = &r->clock};
    mv_err err = {0};
    return mv_saga_engine_new(r->store, &o, &r->engine, &err) == MV_OK;
}

static void rig_close(rig *r) {
    mv_saga_engine_free(r->engine);
    mv_store_close(r->store);
}

/* "ok" commits with a result; "declined" fails as a business failure; "lost" fails with an
 * outcome nobody knows (ambiguous). */
static mv_code run_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)ctx;
    if (strcmp(call->step, "declined") == 0) {
        snprintf(call->error_code, sizeof call->error_code, "card_declined");
        return mv_err_set(err, MV_SAGA_STEP_FAILED, "declined");
    }
    if (strcmp(call->step, "lost") == 0) return mv_err_set(err, MV_UPSTREAM_FAILED, "timeout");
    *result = json_pack("{s:i}", "x", 1);
    return MV_OK;
}

static mv_code undo(const json_t *args, const mv_saga_compensation_call *call, void *ctx,
                    mv_err *err) {
    (void)args, (void)call, (void)ctx, (void)err;
    return MV_OK;
}

static mv_code two_steps(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    const char *second = def_ctx;
    json_t *args = json_pack("{s:s}", "sku", "a");
    mv_code rc = mv_saga_step(ctx, "ok", args, run_step, NULL, NULL, err);
    json_decref(args);
    return rc ? rc : mv_saga_step(ctx, second, NULL, run_step, NULL, NULL, err);
}

static const mv_saga_compensator UNDO[] = {
    {"ok", undo, NULL}, {"declined", undo, NULL}, {"lost", undo, NULL}};

static mv_saga_definition def_with(const char *second) {
    return (mv_saga_definition){.name = "typed",
                                .run = two_steps,
                                .ctx = (void *)second,
                                .compensators = UNDO,
                                .ncompensators = 3};
}

STORE_TEST(a_load_parses_the_rows_into_fields_and_the_public_shape_is_unchanged) {
    rig r;
    REQUIRE(rig_open(&r, kind, "rec_parse.db"));
    mv_saga_definition def = def_with("declined");
    mv_err err = {0};
    json_t *input = json_pack("{s:s}", "order", "o-1"), *out = NULL;
    CHECK_CODE(mv_saga_execute_in(r.engine, "t1", &def, "typed-1", input, NULL, &out, &err),
               MV_SAGA_STEP_FAILED, &err);
    mv__saga_record *rec = NULL;
    REQUIRE(mv__saga_load(r.engine, "typed-1", &rec, &err) == MV_OK);
    CHECK_STR(rec->id, "typed-1");
    CHECK_STR(rec->definition, "typed");
    CHECK_STR(rec->tenant, "t1");
    CHECK_INT(rec->state, MV_SAGA_COMPENSATED);
    CHECK(json_equal(rec->input, input));
    CHECK_INT((int64_t)strlen(rec->fingerprint), 64);
    CHECK(rec->version > 1);
    CHECK(!rec->has_wake_at);
    CHECK_STR(rec->runner, ""); /* the run's own state: nothing held after a load */
    CHECK_INT(rec->pending, -1);
    CHECK(!rec->stale && !rec->end_run);
    REQUIRE(rec->nsteps == 2);
    const mv__saga_step *ok = &rec->steps[0], *declined = &rec->steps[1];
    CHECK_STR(ok->name, "ok");
    CHECK_INT(ok->state, MV_STEP_COMPENSATED);
    CHECK_INT(ok->attempts, 1);
    CHECK_INT(json_integer_value(json_object_get(ok->result, "x")), 1);
    CHECK_STR(mv_json_str(ok->args, "sku"), "a");
    CHECK_STR(ok->error_code, "");
    CHECK_STR(declined->name, "declined");
    CHECK_INT(declined->state, MV_STEP_FAILED);
    CHECK_STR(declined->error_code, "card_declined");
    CHECK(declined->result == NULL);
    CHECK(json_is_null(declined->args));
    CHECK(strcmp(ok->effect_id, ok->comp_id) != 0 && strlen(ok->effect_id) == 36);
    /* the public JSON: what the engine answered, what mv_saga_get answers, the keys it always had
     */
    json_t *pub = mv__saga_public_json(rec), *got = NULL;
    CHECK_CODE(mv_saga_get(r.engine, "typed-1", &got, &err), MV_OK, &err);
    CHECK(json_equal(pub, got));
    CHECK(json_equal(pub, out));
    static const char *const keys[] = {"sagaId", "definition", "state",    "input",
                                       "steps",  "createdAt",  "updatedAt"};
    CHECK_INT((int64_t)json_object_size(pub), 7);
    for (int k = 0; k < 7; k++)
        CHECK(json_object_get(pub, keys[k]) != NULL);
    json_t *s0 = json_array_get(json_object_get(pub, "steps"), 0),
           *s1 = json_array_get(json_object_get(pub, "steps"), 1);
    CHECK_INT((int64_t)json_object_size(s0), 6); /* name state attempts effectId comp… result */
    CHECK(json_object_get(s0, "compensationArgs") == NULL);
    CHECK_STR(mv_json_str(s1, "errorCode"), "card_declined");
    CHECK(json_object_get(s1, "result") == NULL);
    json_decref(pub);
    json_decref(got);
    json_decref(out);
    json_decref(input);
    mv__saga_record_free(rec);
    rig_close(&r);
}

STORE_TEST(a_transition_from_a_stale_version_is_refused_and_changes_no_row) {
    rig r;
    REQUIRE(rig_open(&r, kind, "rec_stale.db"));
    mv_saga_definition def = def_with("lost");
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "typed-2", NULL, NULL, NULL, &err),
               MV_UPSTREAM_FAILED, &err);
    mv__saga_record *a = NULL, *b = NULL, *now = NULL;
    REQUIRE(mv__saga_load(r.engine, "typed-2", &a, &err) == MV_OK);
    REQUIRE(mv__saga_load(r.engine, "typed-2", &b, &err) == MV_OK);
    CHECK_INT(a->state, MV_SAGA_MANUAL_REVIEW);
    REQUIRE(a->nsteps == 2 && a->steps[1].state == MV_STEP_AMBIGUOUS);
    int64_t version = a->version;
    r.now += 10;
    /* a moves the saga on: its version is now the store's */
    CHECK_CODE(mv__saga_save_with(r.engine, &a, MV_SAGA_COMPENSATING, 0, NULL, &err), MV_OK, &err);
    CHECK_INT(a->version, version + 1);
    /* b still holds the old version: its step transition and its state change are refused */
    mv__saga_step step;
    mv__saga_step_copy(&step, &b->steps[1]);
    step.state = MV_STEP_FAILED;
    mv_strlcpy(step.error_code, "not_committed", sizeof step.error_code);
    r.now += 10;
    CHECK_CODE(mv__saga_save_with(r.engine, &b, MV_SAGA_COMPENSATING, 1, &step, &err),
               MV_SAGA_CONCURRENCY, &err);
    CHECK(b->stale);
    CHECK_INT(b->version, version); /* the record is not what the store holds: left as it was */
    CHECK_INT(b->steps[1].state, MV_STEP_AMBIGUOUS);
    REQUIRE(mv__saga_load(r.engine, "typed-2", &now, &err) == MV_OK);
    CHECK_INT(now->version, version + 1);
    CHECK_INT(now->state, MV_SAGA_COMPENSATING);
    CHECK_INT(now->steps[1].state, MV_STEP_AMBIGUOUS); /* the step row did not move */
    CHECK_STR(now->steps[1].error_code, a->steps[1].error_code);
    CHECK_INT(now->updated_at, a->updated_at);
    mv__saga_record_free(now);
    /* a transition the tables forbid is refused before anything is written */
    mv__saga_step back;
    mv__saga_step_copy(&back, &a->steps[0]);
    back.state = MV_STEP_EXECUTING;
    CHECK_CODE(mv__saga_save_with(r.engine, &a, KEEP_STATE, 0, &back, &err), MV_INTERNAL, &err);
    CHECK(!a->stale);
    mv__saga_record_free(a);
    mv__saga_record_free(b);
    rig_close(&r);
}

STORE_TEST(a_compensations_step_transition_is_one_write) {
    rig r;
    REQUIRE(rig_open(&r, kind, "rec_one.db"));
    mv_saga_definition def = def_with("declined");
    mv_err err = {0};
    /* warm: a saga compensated (its first step committed → compensating → compensated) has
     * prepared both statements on the connection */
    CHECK_CODE(mv_saga_execute(r.engine, &def, "typed-3-warm", NULL, NULL, NULL, &err),
               MV_SAGA_STEP_FAILED, &err);
    mv__saga_record *rec = NULL;
    json_t *input = json_pack("{}");
    def = def_with("lost");
    CHECK_CODE(mv_saga_execute(r.engine, &def, "typed-3", input, NULL, NULL, &err),
               MV_UPSTREAM_FAILED, &err);
    json_decref(input);
    REQUIRE(mv__saga_load(r.engine, "typed-3", &rec, &err) == MV_OK);
    uint64_t t0 = mv__store_round_trips(r.store);
    CHECK_CODE(mv__saga_save_with(r.engine, &rec, MV_SAGA_COMPENSATING, 0, NULL, &err), MV_OK,
               &err);
    uint64_t state_trips = mv__store_round_trips(r.store) - t0;
    mv__saga_step step;
    mv__saga_step_copy(&step, &rec->steps[0]);
    step.state = MV_STEP_COMPENSATING;
    step.attempts = 1;
    t0 = mv__store_round_trips(r.store);
    CHECK_CODE(mv__saga_save_with(r.engine, &rec, KEEP_STATE, 0, &step, &err), MV_OK, &err);
    uint64_t step_trips = mv__store_round_trips(r.store) - t0;
    printf("[%s] round trips: a state change %llu, a step transition %llu\n", kind,
           (unsigned long long)state_trips, (unsigned long long)step_trips);
    if (strcmp(kind, "postgres") == 0) { /* BEGIN, the one statement and COMMIT in one flush */
        CHECK_INT((int64_t)state_trips, 1);
        CHECK_INT((int64_t)step_trips, 1);
    }
    mv__saga_record *now = NULL;
    REQUIRE(mv__saga_load(r.engine, "typed-3", &now, &err) == MV_OK);
    CHECK_INT(now->version, rec->version);
    CHECK_INT(now->state, MV_SAGA_COMPENSATING);
    CHECK_INT(now->steps[0].state, MV_STEP_COMPENSATING);
    CHECK_INT(now->steps[0].attempts, 1);
    mv__saga_record_free(now);
    mv__saga_record_free(rec);
    rig_close(&r);
}

static mv_effect_record effect_of(mv_store *store, const char *id) {
    mv_journal *j = NULL;
    mv_journal_options o = {0};
    mv_effect_record rec = {0};
    if (mv_journal_new(store, &o, &j, NULL) != MV_OK || mv_journal_get(j, id, &rec, NULL) != MV_OK)
        rec.state = (mv_effect_state)-1;
    mv_journal_free(j);
    return rec;
}

/* A step that fails: its row and its effect move in one statement on PostgreSQL; an operator's
 * outcome for an ambiguous step (its effect `unknown`, not `executing`) takes the journal's full
 * transition in the same transaction, and both rows still move together. */
STORE_TEST(a_failed_steps_row_and_effect_move_in_one_write) {
    rig r;
    REQUIRE(rig_open(&r, kind, "rec_fail.db"));
    mv_saga_definition def = def_with("declined");
    mv_err err = {0};
    CHECK_CODE(mv_saga_execute(r.engine, &def, "typed-4-warm", NULL, NULL, NULL, &err),
               MV_SAGA_STEP_FAILED, &err);
    uint64_t t0 = mv__store_round_trips(r.store);
    CHECK_CODE(mv_saga_execute(r.engine, &def, "typed-4", NULL, NULL, NULL, &err),
               MV_SAGA_STEP_FAILED, &err);
    uint64_t trips = mv__store_round_trips(r.store) - t0;
    printf("[%s] round trips of a 2-step saga whose second step fails, compensated: %llu\n", kind,
           (unsigned long long)trips);
    /* start, step 1's start, its commit with step 2's start, step 2 failed, step 1 compensating,
     * compensated, the saga compensated: seven writes, one round trip each */
    if (strcmp(kind, "postgres") == 0) CHECK_INT((int64_t)trips, 7);
    mv__saga_record *rec = NULL;
    REQUIRE(mv__saga_load(r.engine, "typed-4", &rec, &err) == MV_OK);
    REQUIRE(rec->nsteps == 2);
    CHECK_INT(rec->steps[1].state, MV_STEP_FAILED);
    mv_effect_record fx = effect_of(r.store, rec->steps[1].effect_id);
    CHECK_INT(fx.state, MV_EFFECT_FAILED);
    CHECK_STR(fx.error_code, "card_declined");
    mv__saga_record_free(rec);
    /* the fallback: an ambiguous step resolved not-committed */
    def = def_with("lost");
    CHECK_CODE(mv_saga_execute(r.engine, &def, "typed-5", NULL, NULL, NULL, &err),
               MV_UPSTREAM_FAILED, &err);
    REQUIRE(mv__saga_load(r.engine, "typed-5", &rec, &err) == MV_OK);
    CHECK_INT(effect_of(r.store, rec->steps[1].effect_id).state, MV_EFFECT_UNKNOWN);
    mv_saga_resolution res = {.kind = "execution",
                              .outcome = "not-committed",
                              .step = "lost",
                              .effect_id = rec->steps[1].effect_id,
                              .error_code = "gave_up"};
    CHECK_CODE(mv_saga_resolve(r.engine, &def, "typed-5", &res, NULL, &err), MV_OK, &err);
    mv__saga_record *now = NULL;
    REQUIRE(mv__saga_load(r.engine, "typed-5", &now, &err) == MV_OK);
    CHECK_INT(now->state, MV_SAGA_COMPENSATING);
    CHECK_INT(now->steps[1].state, MV_STEP_FAILED);
    CHECK_STR(now->steps[1].error_code, "gave_up");
    fx = effect_of(r.store, rec->steps[1].effect_id);
    CHECK_INT(fx.state, MV_EFFECT_FAILED);
    CHECK_STR(fx.error_code, "gave_up");
    mv__saga_record_free(now);
    mv__saga_record_free(rec);
    rig_close(&r);
}

int main(void) {
    RUN_TESTS(a_load_parses_the_rows_into_fields_and_the_public_shape_is_unchanged,
              a_transition_from_a_stale_version_is_refused_and_changes_no_row,
              a_compensations_step_transition_is_one_write,
              a_failed_steps_row_and_effect_move_in_one_write);
}
