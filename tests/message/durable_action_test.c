/* durable_action_test.c — actions that need a human approval (signed single-use resume tokens
 * bound to tenant, principal, message and input) and actions whose handler is a saga (saga id =
 * attempt id: completed, compensated back to active, manual review resumed after resolution). */
#include "fixture.h"

static const unsigned char SECRET[] = "0123456789abcdef0123456789abcdef-approval";

static const char *APPROVAL_TEMPLATE =
    "{\"templateCd\": \"refund\", \"type\": \"approval\","
    " \"receiverContent\": {\"title\": \"Refund {{amount}}\"},"
    " \"prepare\": {\"toRoles\": [\"finance\"]},"
    " \"actions\": [{\"actionCd\": \"approve\", \"name\": \"Approve\", \"variant\": \"primary\","
    "   \"receiver\": true, \"approval\": {\"capability\": \"refunds.large\"}},"
    "  {\"actionCd\": \"book\", \"name\": \"Book\", \"variant\": \"primary\", \"receiver\": true,"
    "   \"handler\": {\"saga\": \"booking\"}}]}";

typedef struct {
    int calls, fail_first;
} counter;

static mv_code counted(void *ctx, const mv_action_input *in, json_t **result, mv_err *err) {
    counter *c = ctx;
    (void)in;
    if (c->calls++ < c->fail_first) return mv_err_set(err, MV_UPSTREAM_FAILED, "flaky");
    *result = json_string("refunded");
    return MV_OK;
}

/* ---- a two-step saga in C ---- */

typedef struct {
    int reserve_runs, charge_runs, release_runs;
    mv_code charge_outcome; /* MV_OK, MV_SAGA_STEP_FAILED (not committed) or other (ambiguous) */
} saga_script;

static saga_script script;

static mv_code reserve_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)call;
    (void)ctx;
    (void)err;
    script.reserve_runs++;
    *result = json_string("held");
    return MV_OK;
}

static mv_code charge_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)ctx;
    script.charge_runs++;
    if (script.charge_outcome == MV_SAGA_STEP_FAILED) {
        mv_strlcpy(call->error_code, "card_declined", sizeof call->error_code);
        return mv_err_set(err, MV_SAGA_STEP_FAILED, "declined");
    }
    if (script.charge_outcome != MV_OK) return mv_err_set(err, MV_UPSTREAM_FAILED, "timeout");
    *result = json_string("charged");
    return MV_OK;
}

static mv_code release(const json_t *args, const mv_saga_compensation_call *call, void *ctx,
                       mv_err *err) {
    (void)args;
    (void)call;
    (void)ctx;
    (void)err;
    script.release_runs++;
    return MV_OK;
}

static mv_code booking_run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    (void)def_ctx;
    mv_code rc = mv_saga_step(ctx, "reserve", NULL, reserve_step, NULL, NULL, err);
    return rc != MV_OK ? rc : mv_saga_step(ctx, "charge", NULL, charge_step, NULL, NULL, err);
}

static const mv_saga_compensator compensators[] = {{"reserve", release, NULL},
                                                   {"charge", release, NULL}};
static const mv_saga_definition booking = {
    .name = "booking", .run = booking_run, .compensators = compensators, .ncompensators = 2};

static const mv_saga_definition *find_saga(void *ctx, const char *name) {
    (void)ctx;
    return strcmp(name, "booking") == 0 ? &booking : NULL;
}

typedef struct {
    fixture f;
    mv_approvals *approvals;
    mv_saga_engine *sagas;
    counter handler;
} env;

static int env_open(env *e, const char *kind, const char *name) {
    memset(e, 0, sizeof *e);
    memset(&script, 0, sizeof script);
    /* the durable engines need the store first: open the fixture, then rebuild the service */
    if (!fixture_open(&e->f, kind, name)) return 0;
    mv_approvals_options ao = {.secret = SECRET, .secret_len = 32, .clock = &e->f.clock};
    mv_saga_engine_options so = {.clock = &e->f.clock};
    mv_err err = {0};
    if (mv_approvals_new(e->f.store, &ao, &e->approvals, &err) != MV_OK ||
        mv_saga_engine_new(e->f.store, &so, &e->sagas, &err) != MV_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 0;
    }
    mv_service_free(e->f.svc);
    mv_service_options o = {.store = e->f.store,
                            .registry = e->f.registry,
                            .clock = &e->f.clock,
                            .approvals = e->approvals,
                            .sagas = e->sagas,
                            .find_saga = find_saga};
    if (mv_service_new(&o, &e->f.svc, &err) != MV_OK) return 0;
    json_t *t = json_loads(APPROVAL_TEMPLATE, 0, NULL);
    int ok = mv_registry_register(e->f.registry, t, "<refund>", &err) == MV_OK;
    if (!ok) fprintf(stderr, "%s\n", err.message);
    json_decref(t);
    mv_service_set_handler(e->f.svc, "refund", "approve", counted, &e->handler);
    return ok;
}

static void env_close(env *e) {
    mv_saga_engine_free(e->sagas);
    mv_approvals_free(e->approvals);
    fixture_close(&e->f);
}

static char *create_refund(env *e) {
    mv_user u = {.id = "requester"};
    json_t *payload = json_pack("{s:i}", "amount", 900);
    mv_create_request req = {.template_cd = "refund", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_create(e->f.svc, &req, &m, NULL, &err);
    char *id = m ? strdup(first_id(m)) : NULL;
    json_decref(m);
    json_decref(payload);
    return id;
}

static const char *FINANCE[] = {"finance"};

static mv_code press(env *e, const char *id, const char *action, const char *user,
                     const char *token, json_t *input, mv_err *err) {
    mv_user u = {.id = user, .roles = FINANCE, .nroles = 1};
    mv_action_request req = {
        .message_id = id, .action_cd = action, .user = &u, .input = input, .resume_token = token};
    json_t *r = NULL;
    mv_code rc = mv_action_handle(e->f.svc, &req, &r, err);
    json_decref(r);
    return rc;
}

static const char *state_of(env *e, const char *id, char buf[16]) {
    json_t *m = NULL;
    mv_message_get(e->f.svc, id, NULL, &m, NULL);
    mv_strlcpy(buf, mv_json_str(m, "actionState"), 16);
    json_decref(m);
    return buf;
}

STORE_TEST(an_action_needing_approval_runs_once_after_the_approver_decides) {
    env e;
    REQUIRE(env_open(&e, kind, "approval.db"));
    char *id = create_refund(&e), *other = create_refund(&e);
    REQUIRE(id && other);
    mv_err err = {0};
    char st[16];
    CHECK_CODE(press(&e, id, "approve", "ana", NULL, NULL, &err), MV_APPROVAL_REQUIRED, &err);
    char approval[64], token[512];
    mv_strlcpy(approval, err.approval_id, sizeof approval);
    mv_strlcpy(token, err.resume_token, sizeof token);
    CHECK(mv_valid_uuid(approval));
    CHECK(strncmp(token, "v1.", 3) == 0);
    CHECK(err.expires_at == e.f.now + 900000);
    CHECK_STR(state_of(&e, id, st), "active"); /* nothing claimed */
    CHECK_CODE(press(&e, id, "approve", "ana", token, NULL, &err), MV_APPROVAL_PENDING, &err);
    CHECK_STR(state_of(&e, id, st), "active");
    CHECK_CODE(mv_approval_decide(e.approvals, approval, "default", "approved", "boss", &err),
               MV_OK, &err);
    CHECK_CODE(press(&e, id, "approve", "bob", token, NULL, &err), MV_APPROVAL_BINDING, &err);
    CHECK_CODE(press(&e, other, "approve", "ana", token, NULL, &err), MV_APPROVAL_BINDING, &err);
    json_t *input = json_pack("{s:i}", "amount", 1);
    CHECK_CODE(press(&e, id, "approve", "ana", token, input, &err), MV_APPROVAL_BINDING, &err);
    json_decref(input);
    CHECK_INT(e.handler.calls, 0);
    CHECK_CODE(press(&e, id, "approve", "ana", token, NULL, &err), MV_OK, &err);
    CHECK_INT(e.handler.calls, 1);
    CHECK_STR(state_of(&e, id, st), "archived");
    CHECK_CODE(press(&e, other, "approve", "ana", "v1.forged.token", NULL, &err),
               MV_APPROVAL_TOKEN_INVALID, &err);
    free(id);
    free(other);
    env_close(&e);
}

STORE_TEST(a_retry_of_an_approved_attempt_needs_no_new_approval_but_a_token_is_single_use) {
    env e;
    REQUIRE(env_open(&e, kind, "approval-retry.db"));
    e.handler.fail_first = 1;
    char *id = create_refund(&e);
    mv_err err = {0};
    CHECK_CODE(press(&e, id, "approve", "ana", NULL, NULL, &err), MV_APPROVAL_REQUIRED, &err);
    char token[512];
    mv_strlcpy(token, err.resume_token, sizeof token);
    mv_approval_decide(e.approvals, err.approval_id, "default", "approved", "boss", &err);
    CHECK_CODE(press(&e, id, "approve", "ana", token, NULL, &err), MV_ACTION_RETRYABLE, &err);
    CHECK_CODE(press(&e, id, "approve", "ana", NULL, NULL, &err), MV_OK, &err);
    CHECK_INT(e.handler.calls, 2);
    /* the consumed token cannot approve anything else */
    char *next = create_refund(&e);
    CHECK_CODE(press(&e, next, "approve", "ana", token, NULL, &err), MV_APPROVAL_BINDING, &err);
    free(next);
    free(id);
    env_close(&e);
}

STORE_TEST(a_saga_handler_completes_and_returns_each_steps_result) {
    env e;
    REQUIRE(env_open(&e, kind, "saga-ok.db"));
    char *id = create_refund(&e);
    mv_user u = {.id = "ana", .roles = FINANCE, .nroles = 1};
    mv_action_request req = {.message_id = id, .action_cd = "book", .user = &u};
    json_t *r = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_action_handle(e.f.svc, &req, &r, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(r, "reserve"), "held");
    CHECK_STR(mv_json_str(r, "charge"), "charged");
    json_decref(r);
    char st[16];
    CHECK_STR(state_of(&e, id, st), "archived");
    free(id);
    env_close(&e);
}

STORE_TEST(a_compensated_saga_returns_the_message_to_active_and_a_new_press_is_a_new_saga) {
    env e;
    REQUIRE(env_open(&e, kind, "saga-comp.db"));
    script.charge_outcome = MV_SAGA_STEP_FAILED;
    char *id = create_refund(&e);
    mv_err err = {0};
    CHECK_CODE(press(&e, id, "book", "ana", NULL, NULL, &err), MV_ACTION_COMPENSATED, &err);
    char saga1[160];
    mv_strlcpy(saga1, err.saga_id, sizeof saga1);
    CHECK(mv_valid_uuid(saga1));
    CHECK_INT(script.release_runs, 1);
    char st[16];
    CHECK_STR(state_of(&e, id, st), "active");
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_get(e.sagas, saga1, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    json_decref(rec);
    script.charge_outcome = MV_OK;
    CHECK_CODE(press(&e, id, "book", "ana", NULL, NULL, &err), MV_OK, &err);
    CHECK_INT(script.reserve_runs, 2); /* a new attempt ran a new saga */
    free(id);
    env_close(&e);
}

STORE_TEST(an_ambiguous_step_needs_review_and_a_press_after_resolution_continues_the_same_saga) {
    env e;
    REQUIRE(env_open(&e, kind, "saga-review.db"));
    script.charge_outcome = MV_UPSTREAM_FAILED;
    char *id = create_refund(&e);
    mv_err err = {0};
    CHECK_CODE(press(&e, id, "book", "ana", NULL, NULL, &err), MV_ACTION_NEEDS_REVIEW, &err);
    char saga[160], attempt[64];
    mv_strlcpy(saga, err.saga_id, sizeof saga);
    mv_strlcpy(attempt, err.attempt_id, sizeof attempt);
    CHECK_STR(saga, attempt);
    char st[16];
    CHECK_STR(state_of(&e, id, st), "retryable");
    /* still in review: pressing again changes nothing */
    CHECK_CODE(press(&e, id, "book", "ana", NULL, NULL, &err), MV_ACTION_NEEDS_REVIEW, &err);
    CHECK_INT(script.charge_runs, 1);
    json_t *rec = NULL;
    mv_saga_get(e.sagas, saga, &rec, &err);
    const char *effect = mv_json_str(json_array_get(json_object_get(rec, "steps"), 1), "effectId");
    json_t *charged = json_string("charged-by-operator");
    mv_saga_resolution res = {.kind = "execution",
                              .step = "charge",
                              .effect_id = effect,
                              .outcome = "committed",
                              .result = charged};
    json_t *after = NULL;
    CHECK_CODE(mv_saga_resolve(e.sagas, &booking, saga, &res, &after, &err), MV_OK, &err);
    json_decref(after);
    json_decref(charged);
    json_decref(rec);
    mv_user u = {.id = "ana", .roles = FINANCE, .nroles = 1};
    mv_action_request req = {.message_id = id, .action_cd = "book", .user = &u};
    json_t *r = NULL;
    CHECK_CODE(mv_action_handle(e.f.svc, &req, &r, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(r, "charge"), "charged-by-operator");
    json_decref(r);
    CHECK_INT(script.reserve_runs, 1);
    CHECK_INT(script.charge_runs, 1);
    CHECK_STR(state_of(&e, id, st), "archived");
    free(id);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(
        an_action_needing_approval_runs_once_after_the_approver_decides,
        a_retry_of_an_approved_attempt_needs_no_new_approval_but_a_token_is_single_use,
        a_saga_handler_completes_and_returns_each_steps_result,
        a_compensated_saga_returns_the_message_to_active_and_a_new_press_is_a_new_saga,
        an_ambiguous_step_needs_review_and_a_press_after_resolution_continues_the_same_saga);
}
