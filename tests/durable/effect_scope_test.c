/* effect_scope_test.c — the two effect-scope scenarios of SEMANTICS §5 plus the failure paths:
 * transition order, lifecycle events, evidence, error-code rules, abort before any transition, the
 * abortable wait. */
#include <pthread.h>

#include "durable/durable_internal.h"
#include "durable/fixture.h"

typedef struct {
    char log[16][160];
    int n;
} trace;

static void logf_(trace *t, const char *what, const char *id) {
    if (t->n < 16) snprintf(t->log[t->n++], sizeof t->log[0], "%s:%s", what, id);
}

static mv_code tr_intent(const mv_effect_context *c, void *ctx, mv_err *err) {
    (void)err;
    logf_(ctx, "intent", c->effect_id);
    return MV_OK;
}
static mv_code tr_executing(const mv_effect_context *c, void *ctx, mv_err *err) {
    (void)err;
    logf_(ctx, "executing", c->effect_id);
    return MV_OK;
}
static mv_code tr_committed(const mv_effect_context *c, const json_t *r, void *ctx, mv_err *err) {
    (void)err;
    (void)r;
    logf_(ctx, "committed", c->effect_id);
    return MV_OK;
}
static mv_code tr_failed(const mv_effect_context *c, const mv_effect_failure *f, void *ctx,
                         mv_err *err) {
    char buf[80];
    snprintf(buf, sizeof buf, "%s/%s/%d", c->effect_id, f->error_code, f->began);
    logf_(ctx, "failed", buf);
    return mv_err_set(err, MV_INTERNAL, "this error must be swallowed");
}

static void observe(const mv_effect_event *ev, void *ctx) {
    trace *t = ctx;
    if (t->n < 16)
        snprintf(t->log[t->n++], 80, "%s:%s%s%s", mv_effect_stage_name(ev->stage),
                 mv_effect_phase_name(ev->phase), ev->error_code ? ":" : "",
                 ev->error_code ? ev->error_code : "");
}

static mv_code return_effect_id(const mv_effect_context *c, void *ctx, json_t **result,
                                mv_err *err) {
    (void)ctx;
    (void)err;
    *result = json_string(c->effect_id);
    return MV_OK;
}

TEST(owned_effect_runs_intent_executing_committed_with_one_effect_id) {
    trace transitions = {0}, events = {0};
    mv_effect_scope scope = {.observer = {observe, &events}};
    mv_effect_input in = {
        .capability = "payments.charge",
        .transitions = {tr_intent, tr_executing, tr_committed, tr_failed, &transitions}};
    json_t *result = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_effect_run(&scope, &in, return_effect_id, NULL, &result, &err), MV_OK, &err);
    REQUIRE(json_is_string(result));
    const char *id = json_string_value(result);
    char want[80];
    CHECK_INT(transitions.n, 3);
    snprintf(want, sizeof want, "intent:%s", id);
    CHECK_STR(transitions.log[0], want);
    snprintf(want, sizeof want, "executing:%s", id);
    CHECK_STR(transitions.log[1], want);
    snprintf(want, sizeof want, "committed:%s", id);
    CHECK_STR(transitions.log[2], want);
    CHECK(mv_valid_uuid(id));
    CHECK_INT(events.n, 2);
    CHECK_STR(events.log[0], "execution:started");
    CHECK_STR(events.log[1], "execution:succeeded");
    CHECK(scope.evidence.began && scope.evidence.committed);
    CHECK(!mv_evidence_ambiguous(&scope.evidence));
    json_decref(result);
}

TEST(manual_evidence_tracks_began_committed_and_ambiguity) {
    mv_effect_evidence e = {0};
    mv_err err = {0};
    CHECK_CODE(mv_evidence_mark_safe_to_retry(&e, &err), MV_OK, &err);
    CHECK(mv_evidence_safe_to_retry(&e));
    mv_evidence_mark_began(&e);
    CHECK(!mv_evidence_safe_to_retry(&e));
    CHECK(e.began && !e.committed && mv_evidence_ambiguous(&e));
    CHECK_CODE(mv_evidence_mark_safe_to_retry(&e, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "after an effect began") != NULL);
    mv_evidence_mark_failed(&e);
    CHECK(e.began && !e.committed && !mv_evidence_ambiguous(&e));
    mv_evidence_mark_ambiguous(&e);
    CHECK(mv_evidence_ambiguous(&e));
    mv_evidence_mark_committed(&e);
    CHECK(e.began && e.committed && !mv_evidence_ambiguous(&e));
}

static mv_code fail_exec(const mv_effect_context *c, void *ctx, json_t **result, mv_err *err) {
    (void)c;
    (void)result;
    (*(int *)ctx)++;
    return mv_err_set(err, MV_UPSTREAM_FAILED, "connection dropped");
}

TEST(executor_failure_after_began_is_ambiguous_and_keeps_the_original_error) {
    trace transitions = {0}, events = {0};
    mv_effect_scope scope = {.observer = {observe, &events}};
    mv_effect_input in = {
        .effect_id = "fx1",
        .capability = "db.write",
        .transitions = {tr_intent, tr_executing, tr_committed, tr_failed, &transitions}};
    int calls = 0;
    mv_err err = {0};
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_STR(err.message, "connection dropped");
    CHECK_INT(calls, 1);
    CHECK_STR(transitions.log[2], "failed:fx1/execution_failed/1");
    CHECK_STR(events.log[1], "execution:ambiguous:execution_failed");
    CHECK(mv_evidence_ambiguous(&scope.evidence));
}

static mv_code deny_admit(const mv_effect_context *c, void *ctx, mv_err *err) {
    (void)c;
    (void)ctx;
    return mv_err_set(err, MV_APPROVAL_PENDING, "capability approval is still pending");
}

TEST(admission_failure_never_executes_and_is_reported_as_admission_failed) {
    trace transitions = {0}, events = {0};
    mv_effect_scope scope = {0};
    mv_effect_input in = {
        .effect_id = "fx2",
        .capability = "db.write",
        .admit = deny_admit,
        .observer = {observe, &events},
        .transitions = {tr_intent, tr_executing, tr_committed, tr_failed, &transitions}};
    int calls = 0;
    mv_err err = {0};
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_APPROVAL_PENDING,
               &err);
    CHECK_INT(calls, 0);
    CHECK_INT(transitions.n, 2);
    CHECK_STR(transitions.log[1], "failed:fx2/admission_failed/0");
    CHECK_INT(events.n, 2);
    CHECK_STR(events.log[0], "admission:started");
    CHECK_STR(events.log[1], "admission:failed:admission_failed");
    CHECK(!scope.evidence.began);
}

static const char *bad_code(const mv_err *e, bool began, void *ctx) {
    (void)e;
    (void)began;
    (void)ctx;
    return "Not-Valid";
}

TEST(invalid_error_code_replaces_the_error_and_abort_stops_before_any_transition) {
    trace transitions = {0};
    mv_effect_scope scope = {0};
    mv_effect_input in = {
        .effect_id = "fx3",
        .capability = "db.write",
        .error_code_fn = bad_code,
        .transitions = {tr_intent, tr_executing, tr_committed, tr_failed, &transitions}};
    int calls = 0;
    mv_err err = {0};
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_INVALID_ARGUMENT,
               &err);
    CHECK_STR(err.message, "effect errorCode is invalid");
    mv_abort abort = {0};
    mv_abort_fire(&abort, "cancelled");
    in.error_code_fn = NULL;
    in.abort = &abort;
    transitions.n = 0;
    calls = 0;
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_ABORTED, &err);
    CHECK_STR(err.message, "cancelled");
    CHECK_INT(calls, 0);
    CHECK_INT(transitions.n, 0); /* nothing was recorded, so nothing is failed */
    in.abort = NULL;
    in.effect_id = "has space";
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_INVALID_ARGUMENT,
               &err);
    CHECK_STR(err.message, "effect id must be a bounded printable token");
    in.effect_id = "ok";
    in.capability = "Bad";
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_INVALID_ARGUMENT,
               &err);
    CHECK_STR(err.message, "owned effect capability is invalid");
}

STORE_TEST(scope_with_journal_records_committed_and_unknown) {
    mv_store *s = fixture_store(kind, "scope.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, NULL, &j, &err) == MV_OK);
    mv_effect_scope scope = {0};
    mv_effect_input in = {
        .effect_id = "ok1", .capability = "db.write", .transitions = mv_journal_transitions(j)};
    json_t *res = NULL;
    CHECK_CODE(mv_effect_run(&scope, &in, return_effect_id, NULL, &res, &err), MV_OK, &err);
    json_decref(res);
    int calls = 0;
    in.effect_id = "bad1";
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_UPSTREAM_FAILED, &err);
    mv_effect_record r;
    CHECK_CODE(mv_journal_get(j, "ok1", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_COMMITTED);
    CHECK_CODE(mv_journal_get(j, "bad1", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_UNKNOWN);
    CHECK_STR(r.error_code, "execution_failed");
    /* a duplicate effect id fails at intent, before executing */
    calls = 0;
    CHECK_CODE(mv_effect_run(&scope, &in, fail_exec, &calls, NULL, &err), MV_EFFECT_TRANSITION,
               &err);
    CHECK_INT(calls, 0);
    CHECK_CODE(mv_journal_get(j, "bad1", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_UNKNOWN); /* the rejected duplicate did not touch it */
    CHECK_INT(r.version, 3);
    mv_journal_free(j);
    mv_store_close(s);
}

static void *fire_later(void *p) {
    mv_sleep_ms(100);
    mv_abort_fire(p, "stopping");
    return NULL;
}

/* mv__abort_wait lasts its time unless the flag is set, and a fire from another thread ends it. */
TEST(an_abortable_wait_lasts_its_time_and_a_fire_ends_it_at_once) {
    mv_abort abort = {0}, other = {0};
    int64_t t0 = mv_now_ms();
    mv__abort_wait(&abort, 150);
    int64_t waited = mv_now_ms() - t0;
    CHECK(waited >= 149);
    CHECK(waited < 1500);
    t0 = mv_now_ms();
    mv__abort_wait(NULL, 60); /* no flag: the whole time */
    CHECK(mv_now_ms() - t0 >= 59);
    pthread_t th;
    t0 = mv_now_ms();
    REQUIRE(pthread_create(&th, NULL, fire_later, &other) == 0);
    mv__abort_wait(&abort, 400); /* another flag's fire does not end this wait */
    CHECK(mv_now_ms() - t0 >= 399);
    pthread_join(th, NULL);
    CHECK(mv_abort_is_set(&other));
    t0 = mv_now_ms();
    REQUIRE(pthread_create(&th, NULL, fire_later, &abort) == 0);
    mv__abort_wait(&abort, 10000);
    waited = mv_now_ms() - t0;
    pthread_join(th, NULL);
    CHECK(waited >= 90);
    CHECK(waited < 2000); /* not the 10 s */
    t0 = mv_now_ms();
    mv__abort_wait(&abort, 10000); /* already set: at once */
    CHECK(mv_now_ms() - t0 < 1000);
}

int main(void) {
    return RUN_TESTS(owned_effect_runs_intent_executing_committed_with_one_effect_id,
                     manual_evidence_tracks_began_committed_and_ambiguity,
                     executor_failure_after_began_is_ambiguous_and_keeps_the_original_error,
                     admission_failure_never_executes_and_is_reported_as_admission_failed,
                     invalid_error_code_replaces_the_error_and_abort_stops_before_any_transition,
                     scope_with_journal_records_committed_and_unknown,
                     an_abortable_wait_lasts_its_time_and_a_fire_ends_it_at_once);
}
