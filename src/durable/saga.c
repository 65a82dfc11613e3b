/* saga.c — durable sagas (§4.4): a sequence of steps, each journaled as executing before its
 * external call and committed after it, compensated in reverse order when a later step fails.
 *
 * The saga row holds the saga (state, input, version, runner lease) and each step is a row of
 * saga_steps, inserted when the step starts and updated by one small statement per transition.
 * Every save is one write transaction: a compare-and-set on the saga's version (which also extends
 * the runner lease), the step rows it changes and the step's effect in the journal, so one record
 * moves under one writer at a time and the saga, its steps and the journal never disagree. A
 * runner that finds the version moved under it stops with MV_SAGA_CONCURRENCY and touches
 * nothing: another runner owns the saga now (the reference would compensate; a lost race is not a
 * failure). An outcome the engine cannot know — a step that may or may not have committed, a
 * compensator that keeps failing — puts the saga in manual-review until an operator records the
 * outcome with mv_saga_resolve(). Input, results and compensation arguments can be encrypted at
 * rest.
 *
 * Round trips: the runner keeps the record in memory while it holds the lease and never re-reads
 * it between its own writes. A saga starts with one INSERT that also takes the runner lease; a
 * step's commit is written with the next write of the saga (the next step's start, the saga's end
 * or its compensation) rather than in a transaction of its own; the saga's end also drops the
 * lease. A 3-step saga is 5 write transactions. The price of folding a commit forward: a runner
 * that dies between a step's return and its next write leaves that step executing, which the next
 * runner treats as ambiguous (manual review), as it would a crash during the call itself. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "store/db.h"
#include "store/saga_sql.h"

/* ---- definitions ------------------------------------------------------------------------- */

mv_code mv_saga_definition_check(const mv_saga_definition *def, mv_err *err) {
    if (!def) return mv_err_set(err, MV_INVALID_ARGUMENT, "saga definition must be an object");
    if (!mv_valid_token(def->name, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga definition must be a bounded printable token");
    if (def->capability && (!mv_valid_capability(def->capability) || strlen(def->capability) > 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga capability is invalid");
    if (!def->run) return mv_err_set(err, MV_INVALID_ARGUMENT, "saga run must be a function");
    if (def->ncompensators && !def->compensators)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga compensators must be an object");
    for (size_t i = 0; i < def->ncompensators; i++) {
        const mv_saga_compensator *c = &def->compensators[i];
        if (!mv_valid_token(c->step, 128))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "saga compensator name must be a bounded printable token");
        if (!c->fn)
            return mv_err_set(err, MV_INVALID_ARGUMENT, "saga compensator %s must be a function",
                              c->step);
    }
    if (def->max_attempts < 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga maxAttempts must be a positive safe integer");
    return MV_OK;
}

int mv__saga_max_attempts(const mv_saga_definition *def) {
    return def->max_attempts > 0 ? def->max_attempts : MV_DEFAULT_SAGA_MAX_ATTEMPTS;
}

static int64_t default_backoff(int attempt) {
    if (attempt < 1) return 100;
    if (attempt > 10) return 60000;
    int64_t d = INT64_C(100) << (attempt - 1);
    return d < 60000 ? d : 60000;
}

const mv_saga_compensator *mv__saga_find_compensator(const mv_saga_definition *def,
                                                     const char *step) {
    for (size_t i = 0; i < def->ncompensators; i++)
        if (strcmp(def->compensators[i].step, step) == 0) return &def->compensators[i];
    return NULL;
}

int mv__saga_find_step(const mv__saga_record *rec, const char *name) {
    for (size_t i = 0; i < rec->nsteps; i++)
        if (strcmp(rec->steps[i].name, name) == 0) return (int)i;
    return -1;
}

int mv__saga_find_effect(const mv__saga_record *rec, const char *effect_id) {
    for (size_t i = 0; i < rec->nsteps; i++)
        if (strcmp(rec->steps[i].effect_id, effect_id) == 0) return (int)i;
    return -1;
}

mv_code mv__saga_check_call(const mv_saga_definition *def, const char *saga_id, mv_abort *abort,
                            mv_err *err) {
    mv_code rc;
    if ((rc = mv_saga_definition_check(def, err))) return rc;
    if (!mv_valid_token(saga_id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga id must be a bounded printable token");
    if (abort && mv_abort_is_set(abort))
        return mv_err_set(err, MV_ABORTED, "%s",
                          abort->reason[0] ? abort->reason : "saga execution aborted");
    return MV_OK;
}

mv_code mv__saga_check_definition(const mv_saga_definition *def, const mv__saga_record *rec,
                                  mv_err *err) {
    if (def && strcmp(rec->definition, def->name) != 0)
        return mv_err_set(err, MV_SAGA_MISMATCH, "saga definition mismatch");
    return MV_OK;
}

mv_code mv__saga_ambiguous(const char *saga_id, const char *step, mv_err *err) {
    mv_err_set(err, MV_SAGA_AMBIGUOUS_STEP, "saga %s: step %s has an ambiguous effect", saga_id,
               step);
    if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    return MV_SAGA_AMBIGUOUS_STEP;
}

/* ---- steps ------------------------------------------------------------------------------- */

mv_effect_phase mv__saga_step_phase(const mv_err *error, bool began, void *p) {
    (void)began;
    (void)p;
    return error->code == MV_SAGA_STEP_FAILED ? MV_PHASE_FAILED : MV_PHASE_AMBIGUOUS;
}

const char *mv__saga_step_error_code(const mv_err *error, bool began, void *p) {
    step_run *r = p;
    if (error->code == MV_SAGA_STEP_FAILED)
        return r->call.error_code[0] ? r->call.error_code : "not_committed";
    return began ? "execution_unknown" : "aborted_before_execution";
}

mv_code mv__saga_step_intent(const mv_effect_context *c, void *p, mv_err *err) {
    step_run *r = p;
    mv__saga_record *next;
    mv_code rc = mv__saga_with(r->ctx->e, *r->ctx->rec, KEEP_STATE, 0, NULL, &next, err);
    if (rc) return rc;
    mv__saga_step step;
    mv__saga_step_copy(&step, &r->step);
    if (!mv__saga_record_append(next, &step)) {
        mv__saga_record_free(next);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    next->has_wake_at = false; /* the wait before this step, if any, is over */
    journal_note note = {.insert = true,
                         .effect_id = c->effect_id,
                         .capability = c->capability,
                         .target = r->ctx->saga_id};
    return mv__saga_save_noted(r->ctx->e, r->ctx->rec, next, (int)next->nsteps - 1, true, &note,
                               err);
}

/* The commit is recorded in memory and written with the saga's next save (rec->pending): the next
 * step's intent, the saga's end or its compensation, whichever comes first. */
mv_code mv__saga_step_committed(const mv_effect_context *c, const json_t *result, void *p,
                                mv_err *err) {
    (void)c;
    step_run *r = p;
    int index = mv__saga_find_effect(*r->ctx->rec, r->effect_id);
    if (index < 0) return mv__saga_concurrency(r->ctx->saga_id, err);
    mv__saga_step step;
    mv__saga_step_copy(&step, &(*r->ctx->rec)->steps[index]);
    step.state = MV_STEP_COMMITTED;
    if (result) {
        json_decref(step.result);
        step.result = json_deep_copy(result);
    }
    mv__saga_record *next;
    mv_code rc = mv__saga_with(r->ctx->e, *r->ctx->rec, KEEP_STATE, index, &step, &next, err);
    if (rc) return rc;
    next->pending = index;
    mv__saga_record_free(*r->ctx->rec);
    *r->ctx->rec = next;
    return MV_OK;
}

mv_code mv__saga_step_failed(const mv_effect_context *c, const mv_effect_failure *f, void *p,
                             mv_err *err) {
    step_run *r = p;
    int index = mv__saga_find_effect(*r->ctx->rec, r->effect_id);
    if (index < 0) return mv__saga_concurrency(r->ctx->saga_id, err);
    bool known = f->error->code == MV_SAGA_STEP_FAILED || !f->began;
    mv__saga_step step;
    mv__saga_step_copy(&step, &(*r->ctx->rec)->steps[index]);
    step.state = known ? MV_STEP_FAILED : MV_STEP_AMBIGUOUS;
    mv_strlcpy(step.error_code, f->error_code ? f->error_code : "", sizeof step.error_code);
    journal_note note = {.effect_id = c->effect_id,
                         .from_mask = MV__EFFECT_MASK(MV_EFFECT_ADMISSION) |
                                      MV__EFFECT_MASK(MV_EFFECT_EXECUTING),
                         .to = known ? MV_EFFECT_FAILED : MV_EFFECT_UNKNOWN,
                         .error_code = f->error_code};
    return mv__saga_save_with_noted(r->ctx->e, r->ctx->rec,
                                    known ? MV_SAGA_COMPENSATING : MV_SAGA_MANUAL_REVIEW, index,
                                    &step, &note, err);
}

static mv_code step_execute(const mv_effect_context *c, void *p, json_t **result, mv_err *err) {
    step_run *r = p;
    r->call = (mv_saga_step_call){
        .saga_id = r->ctx->saga_id, .step = r->name, .effect_id = c->effect_id, .abort = c->abort};
    mv_code rc = r->execute(&r->call, r->cb_ctx, result, err);
    if (rc == MV_SAGA_STEP_FAILED && r->call.error_code[0] &&
        !mv_valid_error_code(r->call.error_code)) {
        /* a provider that cannot name its failure is not proof that nothing happened */
        json_decref(*result);
        *result = NULL;
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step error code is invalid");
    }
    return rc;
}

static mv_code delayed(const char *saga_id, const char *step, mv_err *err) {
    mv_err_set(err, MV_SAGA_DELAYED, "saga %s: waiting before step %s", saga_id, step);
    if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    return MV_SAGA_DELAYED;
}

mv_code mv_saga_delay(mv_saga_ctx *ctx, const char *step, int64_t delay_ms, mv_err *err) {
    if (!mv_valid_token(step, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step must be a bounded printable token");
    if (delay_ms < 0 || delay_ms > MV_SAGA_MAX_DELAY_MS)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga step %s delayMs must be an integer from 0 to %" PRId64, step,
                          MV_SAGA_MAX_DELAY_MS);
    /* a step already started waited before (or needed no wait): nothing to do */
    if (delay_ms == 0 || mv__saga_find_step(*ctx->rec, step) >= 0) return MV_OK;
    int64_t now, wake_at;
    mv_code rc = mv__saga_now_ms(ctx->e, &now, err);
    if (rc) return rc;
    if ((*ctx->rec)
            ->has_wake_at) { /* this step's wait: resumed by its timer, too early, or after */
        if (now < (*ctx->rec)->wake_at) return delayed(ctx->saga_id, step, err);
        if (!saga_is(*ctx->rec, MV_SAGA_WAITING)) return MV_OK; /* woken before */
        return mv__saga_save_with(ctx->e, ctx->rec, MV_SAGA_RUNNING, 0, NULL, err);
    }
    mv__saga_record *next;
    if ((rc = mv__saga_with(ctx->e, *ctx->rec, MV_SAGA_WAITING, 0, NULL, &next, err))) return rc;
    /* from the save's own time, so wakeAt − updatedAt is the delay */
    if ((rc = mv_durable_add(next->updated_at, delay_ms, "saga wakeAt", &wake_at, err))) {
        mv__saga_record_free(next);
        return rc;
    }
    next->has_wake_at = true;
    next->wake_at = wake_at;
    /* the wait, its timer and a commit still pending: one transaction, and the lease dropped */
    if ((rc = mv__saga_save_noted(ctx->e, ctx->rec, next, -1, false, NULL, err))) return rc;
    return delayed(ctx->saga_id, step, err);
}

const char *mv_saga_ctx_id(const mv_saga_ctx *ctx) { return ctx->saga_id; }

json_t *mv_saga_ctx_results(const mv_saga_ctx *ctx) {
    json_t *out = json_object();
    const mv__saga_record *rec = *ctx->rec;
    for (size_t i = 0; out && i < rec->nsteps; i++) {
        const mv__saga_step *s = &rec->steps[i];
        if (step_is(s, MV_STEP_COMMITTED))
            json_object_set_new(out, s->name, s->result ? json_incref(s->result) : json_null());
    }
    return out;
}

mv_code mv_saga_step(mv_saga_ctx *ctx, const char *name, const json_t *compensation_args,
                     mv_saga_step_fn execute, void *cb_ctx, json_t **result, mv_err *err) {
    mv_saga_engine *e = ctx->e;
    mv_code rc;
    if (result) *result = NULL;
    if (mv_abort_is_set(ctx->abort))
        return mv_err_set(err, MV_ABORTED, "%s",
                          ctx->abort->reason[0] ? ctx->abort->reason : "saga execution aborted");
    if (!mv_valid_token(name, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step must be a bounded printable token");
    if (!execute)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step execute must be a function");
    if (!mv__saga_find_compensator(ctx->def, name))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step %s has no compensator", name);
    /* The runner's record is the stored one (it holds the lease, and every save is a
     * compare-and-set on the version): a step already in it is not run again. */
    mv__saga_record *rec = *ctx->rec;
    int index = mv__saga_find_step(rec, name);
    if (index >= 0) {
        const mv__saga_step *existing = &rec->steps[index];
        if (step_is(existing, MV_STEP_COMMITTED)) {
            if (result && existing->result) *result = json_deep_copy(existing->result);
            return MV_OK;
        }
        if (step_is(existing, MV_STEP_EXECUTING) || step_is(existing, MV_STEP_AMBIGUOUS)) {
            if (!saga_is(rec, MV_SAGA_MANUAL_REVIEW) &&
                (rc = mv__saga_save_with(e, ctx->rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err)))
                return rc;
            return mv__saga_ambiguous(ctx->saga_id, name, err);
        }
        return mv_err_set(err, MV_SAGA_RESOLUTION, "saga %s: step %s cannot resume from %s",
                          ctx->saga_id, name, mv_saga_step_state_name(existing->state));
    }
    /* a new step waits while the saga does (a run that went on past mv_saga_delay's answer) */
    if (saga_is(rec, MV_SAGA_WAITING)) return delayed(ctx->saga_id, name, err);
    char effect_id[37], comp_id[37];
    if ((rc = mv_id_uuid(effect_id, err)) || (rc = mv_id_uuid(comp_id, err))) return rc;
    step_run r = {
        .ctx = ctx, .name = name, .execute = execute, .cb_ctx = cb_ctx, .effect_id = effect_id};
    if ((rc = mv__saga_new_step(&r.step, name, effect_id, comp_id, compensation_args, err)))
        return rc;
    mv_effect_scope scope = {.observer = e->observer, .clock = e->clock};
    mv_effect_input in = {.effect_id = effect_id,
                          .capability =
                              ctx->def->capability ? ctx->def->capability : "saga.execute",
                          .stage = MV_STAGE_EXECUTION,
                          .abort = ctx->abort,
                          .failure_phase_fn = mv__saga_step_phase,
                          .error_code_fn = mv__saga_step_error_code,
                          .policy_ctx = &r,
                          .transitions = {.intent = mv__saga_step_intent,
                                          .committed = mv__saga_step_committed,
                                          .failed = mv__saga_step_failed,
                                          .ctx = &r}};
    rc = mv_effect_run(&scope, &in, step_execute, &r, result, err);
    mv__saga_step_clear(&r.step);
    if (rc) {
        if (err) mv_strlcpy(err->saga_id, ctx->saga_id, sizeof err->saga_id);
    }
    return rc;
}

/* ---- compensate --------------------------------------------------------------------------- */

static mv_effect_phase always_failed(const mv_err *error, bool began, void *p) {
    (void)error;
    (void)began;
    (void)p;
    return MV_PHASE_FAILED;
}

mv_code mv__saga_comp_executing(const mv_effect_context *c, void *p, mv_err *err) {
    (void)c;
    comp_run *r = p;
    mv__saga_step step;
    mv__saga_step_copy(&step, &r->step);
    return mv__saga_save_with(r->e, r->rec, KEEP_STATE, r->index, &step, err);
}

mv_code mv__saga_comp_committed(const mv_effect_context *c, const json_t *result, void *p,
                                mv_err *err) {
    (void)c;
    (void)result;
    comp_run *r = p;
    r->step.state = MV_STEP_COMPENSATED;
    mv__saga_step step;
    mv__saga_step_copy(&step, &r->step);
    return mv__saga_save_with(r->e, r->rec, KEEP_STATE, r->index, &step, err);
}

mv_code mv__saga_comp_failed(const mv_effect_context *c, const mv_effect_failure *f, void *p,
                             mv_err *err) {
    (void)c;
    (void)f;
    comp_run *r = p;
    bool exhausted = r->attempt >= r->max;
    mv_code rc = MV_OK;
    mv__saga_step failed;
    mv__saga_step_copy(&failed, &r->step);
    failed.state = MV_STEP_COMPENSATION_FAILED;
    mv_strlcpy(failed.error_code, "compensation_failed", sizeof failed.error_code);
    if (!exhausted) {
        int64_t delay = r->def->backoff ? r->def->backoff(r->attempt, r->def->ctx)
                                        : default_backoff(r->attempt);
        int64_t now, next = 0;
        if (delay < 0 || delay > MV_MAX_SAFE_INT)
            rc = mv_err_set(&r->transition_error, MV_INVALID_ARGUMENT,
                            "saga backoff must return a non-negative safe integer");
        else if (!(rc = mv__saga_now_ms(r->e, &now, &r->transition_error)))
            rc = mv_durable_add(now, delay, "saga next retry", &next, &r->transition_error);
        if (!rc) {
            failed.has_next = true;
            failed.next_at = next;
        }
    }
    if (!rc)
        rc = mv__saga_save_with(r->e, r->rec,
                                exhausted ? MV_SAGA_MANUAL_REVIEW : MV_SAGA_COMPENSATING, r->index,
                                &failed, &r->transition_error);
    else
        mv__saga_step_clear(&failed);
    if (!rc) return MV_OK;
    r->has_transition_error = true;
    mv__saga_step invalid;
    mv__saga_step_copy(&invalid, &r->step);
    invalid.state = MV_STEP_COMPENSATION_FAILED;
    mv_strlcpy(invalid.error_code, "invalid_retry_policy", sizeof invalid.error_code);
    return mv__saga_save_with(r->e, r->rec, MV_SAGA_MANUAL_REVIEW, r->index, &invalid, err);
}

static mv_code comp_execute(const mv_effect_context *c, void *p, json_t **result, mv_err *err) {
    (void)result;
    comp_run *r = p;
    json_t *args = json_deep_copy(r->step.args);
    mv_saga_compensation_call call = {.saga_id = (*r->rec)->id,
                                      .step = r->step.name,
                                      .effect_id = c->effect_id,
                                      .attempt = r->attempt,
                                      .result = r->step.result,
                                      .abort = c->abort};
    mv_code rc = r->comp->fn(args ? args : json_null(), &call, r->comp->ctx, err);
    json_decref(args);
    return rc;
}

/* The start of a compensation (the synchronous engine's and the loop's): a saga already over
 * needs none (*go false); a step whose outcome is unknown sends it to manual review
 * (MV_SAGA_AMBIGUOUS_STEP); otherwise the saga is saved compensating and *go is true. */
mv_code mv__saga_comp_prelude(mv_saga_engine *e, mv__saga_record **rec, const char *saga_id,
                              bool *go, mv_err *err) {
    mv_code rc;
    *go = false;
    if (saga_is(*rec, MV_SAGA_COMPLETED) || saga_is(*rec, MV_SAGA_COMPENSATED)) return MV_OK;
    for (size_t i = 0; i < (*rec)->nsteps; i++) {
        const mv__saga_step *s = &(*rec)->steps[i];
        if (step_is(s, MV_STEP_AMBIGUOUS) || step_is(s, MV_STEP_EXECUTING) ||
            step_is(s, MV_STEP_COMPENSATING)) {
            char name[129];
            mv_strlcpy(name, s->name, sizeof name);
            if (!saga_is(*rec, MV_SAGA_MANUAL_REVIEW) &&
                (rc = mv__saga_save_with(e, rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err)))
                return rc;
            return mv__saga_ambiguous(saga_id, name, err);
        }
    }
    if (!saga_is(*rec, MV_SAGA_COMPENSATING) &&
        (rc = mv__saga_save_with(e, rec, MV_SAGA_COMPENSATING, 0, NULL, err)))
        return rc;
    *go = true;
    return MV_OK;
}

/* What compensation does at step `index` of *rec (both engines walk the steps backwards):
 * PICK_SKIP — nothing to undo there; PICK_STOP — the compensation stops here for now, *rc being
 * the result (a retry not due yet, or the saga sent to manual review: no compensator, attempts
 * exhausted); PICK_RUN — *r is the attempt to make (its step copy compensating, attempts + 1). */
int mv__saga_comp_pick(mv_saga_engine *e, const mv_saga_definition *def, mv__saga_record **rec,
                       int index, comp_run *r, mv_code *rc, mv_err *err) {
    *rc = MV_OK;
    const mv__saga_step *step = &(*rec)->steps[index];
    if (!step_is(step, MV_STEP_COMMITTED) && !step_is(step, MV_STEP_COMPENSATION_FAILED))
        return PICK_SKIP;
    int64_t now;
    if ((*rc = mv__saga_now_ms(e, &now, err))) return PICK_STOP;
    if (step->has_next && step->next_at > now) return PICK_STOP; /* not due yet */
    const mv_saga_compensator *comp = mv__saga_find_compensator(def, step->name);
    int max = mv__saga_max_attempts(def);
    int attempts = (int)step->attempts;
    if (!comp || attempts >= max) {
        if (!comp || !saga_is(*rec, MV_SAGA_MANUAL_REVIEW))
            *rc = mv__saga_save_with(e, rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err);
        return PICK_STOP;
    }
    *r = (comp_run){.e = e,
                    .def = def,
                    .comp = comp,
                    .rec = rec,
                    .index = index,
                    .attempt = attempts + 1,
                    .max = max};
    mv__saga_step_copy(&r->step, step);
    r->step.error_code[0] = '\0';
    r->step.has_next = false;
    r->step.state = MV_STEP_COMPENSATING;
    r->step.attempts = r->attempt;
    return PICK_RUN;
}

/* Compensates *rec (loaded, definition checked). */
static mv_code compensate_loaded(mv_saga_engine *e, const mv_saga_definition *def,
                                 mv__saga_record **rec, mv_abort *abort, mv_err *err) {
    mv_code rc;
    char saga_id[129];
    mv_strlcpy(saga_id, (*rec)->id, sizeof saga_id);
    if (mv_abort_is_set(abort))
        return mv_err_set(err, MV_ABORTED, "%s",
                          abort->reason[0] ? abort->reason : "saga execution aborted");
    bool go = false;
    if ((rc = mv__saga_comp_prelude(e, rec, saga_id, &go, err)) || !go) return rc;
    for (int index = (int)(*rec)->nsteps - 1; index >= 0; index--) {
        if (mv_abort_is_set(abort))
            return mv_err_set(err, MV_ABORTED, "%s",
                              abort->reason[0] ? abort->reason : "saga execution aborted");
        comp_run r;
        int pick = mv__saga_comp_pick(e, def, rec, index, &r, &rc, err);
        if (pick == PICK_SKIP) continue;
        if (pick == PICK_STOP) return rc;
        mv_effect_scope scope = {.observer = e->observer, .clock = e->clock};
        mv_effect_input in = {.effect_id = r.step.comp_id,
                              .capability = def->capability ? def->capability : "saga.compensate",
                              .stage = MV_STAGE_COMPENSATION,
                              .attempt = r.attempt,
                              .abort = abort,
                              .failure_phase_fn = always_failed,
                              .error_code = "compensation_failed",
                              .transitions = {.executing = mv__saga_comp_executing,
                                              .committed = mv__saga_comp_committed,
                                              .failed = mv__saga_comp_failed,
                                              .ctx = &r}};
        mv_err run_err = {0};
        rc = mv_effect_run(&scope, &in, comp_execute, &r, NULL, &run_err);
        mv__saga_step_clear(&r.step);
        if (rc) {
            if (r.has_transition_error) return mv_err_copy(err, &r.transition_error);
            return MV_OK; /* the failed attempt is recorded; the next call retries when due */
        }
    }
    return mv__saga_save_with(e, rec, MV_SAGA_COMPENSATED, 0, NULL, err);
}

/* The end of a run: a commit still pending is written and the runner lease dropped, in one
 * transaction; otherwise the lease is dropped unless the last save already did. */
void mv__saga_end_run(mv_saga_engine *e, const char *saga_id, mv__saga_record **rec,
                      const char *runner) {
    /* (after a failed save too: the compare-and-set succeeds only if the store is still at the
     * version this record has, i.e. holds exactly this record) */
    if (*rec && (*rec)->pending >= 0) {
        mv__saga_record *next;
        if (mv__saga_with(e, *rec, KEEP_STATE, 0, NULL, &next, NULL) == MV_OK) {
            /* this save ends the run whatever the state: it drops the lease like a final one */
            next->end_run = true;
            if (mv__saga_save_noted(e, rec, next, -1, false, NULL, NULL) == MV_OK) return;
        }
    }
    if (!*rec || (*rec)->runner[0] || (*rec)->stale)
        mv__saga_drop_runner(e, saga_id, runner); /* failing here only delays the next runner */
}

/* Fills *record with the saga: the runner's record when it is what the store holds, else as
 * stored now. */
mv_code mv__saga_finish_run(mv_saga_engine *e, const char *saga_id, const mv__saga_record *rec,
                            json_t **record, mv_code rc) {
    if (!record || !rec || rec->stale || rec->pending >= 0)
        return mv__saga_finish(e, saga_id, record, rc);
    *record = mv__saga_public_json(rec);
    return rc;
}

/* The frame of resume and compensate: validate, hold the runner lease, load, run, release. A saga
 * just created arrives as created (owned, lease held, runner named in it): nothing is read. */
static mv_code as_runner(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                         mv_abort *abort, mv__saga_record *created, json_t **record, mv_err *err,
                         loaded_fn run) {
    mv_code rc;
    mv__saga_record *rec = created;
    char runner[37];
    if (created) {
        mv_strlcpy(runner, created->runner, sizeof runner);
        rc = run(e, def, &rec, abort, err);
    } else {
        if ((rc = mv__saga_check_call(def, saga_id, abort, err)) ||
            (rc = mv__saga_take_runner(e, saga_id, runner, err)))
            return mv__saga_finish(e, saga_id, record, rc);
        if (!(rc = mv__saga_load(e, saga_id, &rec, err)) &&
            !(rc = mv__saga_check_definition(def, rec, err))) {
            mv_strlcpy(rec->runner, runner, sizeof rec->runner);
            rc = run(e, def, &rec, abort, err);
        }
    }
    mv__saga_end_run(e, saga_id, &rec, runner);
    rc = mv__saga_finish_run(e, saga_id, rec, record, rc);
    mv__saga_record_free(rec);
    return rc;
}

mv_code mv_saga_compensate(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                           mv_abort *abort, json_t **record, mv_err *err) {
    return as_runner(e, def, saga_id, abort, NULL, record, err, compensate_loaded);
}

/* ---- resume and execute ------------------------------------------------------------------- */

/* The runner's record after a failed save: what the store holds now. */
mv_code mv__saga_refresh(mv_saga_engine *e, const char *saga_id, mv__saga_record **rec,
                         mv_err *err) {
    if (!(*rec)->stale) return MV_OK;
    mv__saga_record *fresh;
    mv_code rc = mv__saga_load(e, saga_id, &fresh, err);
    if (rc) return rc;
    mv_strlcpy(fresh->runner, (*rec)->runner, sizeof fresh->runner);
    /* a commit this runner holds and the store does not have yet stays pending */
    int idx = (*rec)->pending;
    if (idx >= 0 && (size_t)idx < (*rec)->nsteps && (size_t)idx < fresh->nsteps) {
        const mv__saga_step *mine = &(*rec)->steps[idx];
        mv__saga_step *stored = &fresh->steps[idx];
        if (step_is(stored, MV_STEP_EXECUTING) && strcmp(stored->effect_id, mine->effect_id) == 0) {
            mv__saga_step_clear(stored);
            mv__saga_step_copy(stored, mine);
            fresh->pending = idx;
        }
    }
    mv__saga_record_free(*rec);
    *rec = fresh;
    return MV_OK;
}

static mv_code resume_loaded(mv_saga_engine *e, const mv_saga_definition *def,
                             mv__saga_record **rec, mv_abort *abort, mv_err *err) {
    mv_code rc;
    if (!saga_is(*rec, MV_SAGA_RUNNING) && !saga_is(*rec, MV_SAGA_WAITING)) return MV_OK;
    char saga_id[129];
    mv_strlcpy(saga_id, (*rec)->id, sizeof saga_id);
    mv_saga_ctx ctx = {.e = e, .def = def, .saga_id = saga_id, .rec = rec, .abort = abort};
    json_t *input = json_deep_copy((*rec)->input);
    mv_err run_err = {0};
    rc = def->run(&ctx, input, def->ctx, &run_err);
    json_decref(input);
    if (rc == MV_SAGA_DELAYED && saga_is(*rec, MV_SAGA_WAITING)) return MV_OK; /* until wakeAt */
    if (rc == MV_OK) {
        if ((rc = mv__saga_refresh(e, saga_id, rec, err))) return rc;
        if (saga_is(*rec, MV_SAGA_RUNNING))
            return mv__saga_save_with(e, rec, MV_SAGA_COMPLETED, 0, NULL, err);
        return MV_OK;
    }
    if (run_err.code == MV_OK) run_err.code = rc;
    if (rc == MV_SAGA_CONCURRENCY) return mv_err_copy(err, &run_err); /* the winner goes on */
    mv_code lrc = mv__saga_refresh(e, saga_id, rec, err);
    if (lrc) return lrc;
    if (!saga_is(*rec, MV_SAGA_MANUAL_REVIEW) && (lrc = compensate_loaded(e, def, rec, abort, err)))
        return lrc;
    return mv_err_copy(err, &run_err);
}

mv_code mv_saga_resume(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                       mv_abort *abort, json_t **record, mv_err *err) {
    return as_runner(e, def, saga_id, abort, NULL, record, err, resume_loaded);
}

typedef struct {
    const char *id, *definition, *input, *fingerprint, *tenant, *runner;
    int max_attempts;
    int64_t now, until;
    bool created;
} create_tx;

static mv_code create_fn(mv_db *db, void *ctx, mv_err *err) {
    create_tx *t = ctx;
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, mv__sql_saga_insert, &changes, err, "ssssiiissi", t->id,
                             t->definition, t->input, t->fingerprint, (int64_t)t->max_attempts,
                             t->now, t->now, t->tenant, t->runner, t->until);
    t->created = changes == 1;
    return rc;
}

static mv_code create_blind_fn(mv_db *db, void *ctx, mv_err *err) {
    create_tx *t = ctx;
    return mv_db_execf_later_unique(db, mv__sql_saga_insert_blind, MV_SAGA_EXISTS, err,
                                    "ssssiiissi", t->id, t->definition, t->input, t->fingerprint,
                                    (int64_t)t->max_attempts, t->now, t->now, t->tenant, t->runner,
                                    t->until);
}

/* Inserts the saga's row (t->created: it was new). The INSERT goes blind first, so on PostgreSQL
 * the start is one round trip (SQLite runs it at once); a taken id is its unique violation (the
 * transaction wrote nothing) and any other failure but a lost connection runs the precise INSERT
 * in a new transaction. The blind INSERT only queues a statement (t is set after the outcome), so
 * concurrent starts share commits (mv__store_write_rerunnable, store/pg_batch.c). */
static mv_code create_write(mv_saga_engine *e, create_tx *t, mv_err *err) {
    mv_err blind = {0};
    mv_code rc = mv__store_write_rerunnable(e->store, create_blind_fn, t, &blind);
    if (rc == MV_OK || rc == MV_SAGA_EXISTS) {
        t->created = rc == MV_OK;
        return MV_OK;
    }
    if (rc == MV_STORE_UNAVAILABLE) return mv_err_copy(err, &blind);
    return mv_store_write(e->store, create_fn, t, err);
}

/* Creates the row with this caller as its runner; *created (owned: the record as stored, with the
 * runner named) is NULL when the id is taken. */
static mv_code create(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                      const char *saga_id, const json_t *input, mv__saga_record **created,
                      mv_err *err) {
    mv_code rc;
    *created = NULL;
    char runner[37];
    create_tx t = {.id = saga_id,
                   .definition = def->name,
                   .tenant = tenant ? tenant : "default",
                   .runner = runner,
                   .max_attempts = mv__saga_max_attempts(def)};
    if ((rc = mv_id_uuid(runner, err)) || (rc = mv__saga_now_ms(e, &t.now, err))) return rc;
    t.until = t.now + e->runner_lease_ms;
    char fp[65];
    json_t *null_input = input ? NULL : json_null();
    mv__saga_input_fingerprint(e, input ? input : null_input, fp);
    char *text = mv__saga_seal_value(e, saga_id, input ? input : null_input);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    t.input = text;
    t.fingerprint = fp;
    rc = create_write(e, &t, err);
    free(text);
    if (rc || !t.created) return rc;
    mv__saga_record *rec = *created = mv__saga_record_new();
    if (rec) {
        mv_strlcpy(rec->id, saga_id, sizeof rec->id);
        mv_strlcpy(rec->definition, def->name, sizeof rec->definition);
        mv_strlcpy(rec->tenant, t.tenant, sizeof rec->tenant);
        mv_strlcpy(rec->fingerprint, fp, sizeof rec->fingerprint);
        mv_strlcpy(rec->runner, runner, sizeof rec->runner);
        rec->state = MV_SAGA_RUNNING;
        rec->max_attempts = t.max_attempts;
        rec->created_at = rec->updated_at = t.now;
        rec->version = 1;
        if (!(rec->input = input ? json_deep_copy(input) : json_null())) {
            mv__saga_record_free(rec);
            *created = NULL;
        }
    }
    if (!*created) { /* the row exists and holds our lease: let it expire rather than lie */
        mv__saga_drop_runner(e, saga_id, runner);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    return MV_OK;
}

mv_code mv_saga_execute(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                        const json_t *input, mv_abort *abort, json_t **record, mv_err *err) {
    return mv_saga_execute_in(e, NULL, def, saga_id, input, abort, record, err);
}

mv_code mv_saga_execute_in(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                           const char *saga_id, const json_t *input, mv_abort *abort,
                           json_t **record, mv_err *err) {
    mv_code rc;
    mv__saga_record *created = NULL;
    if (record) *record = NULL;
    if (tenant && !mv_valid_token(tenant, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga tenant must be a bounded printable token");
    if ((rc = mv__saga_check_call(def, saga_id, abort, err))) return rc; /* nothing persisted */
    if ((rc = create(e, tenant, def, saga_id, input, &created, err))) return rc;
    if (!created) {
        mv_err_set(err, MV_SAGA_EXISTS, "saga %s: already exists", saga_id);
        if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
        return mv__saga_finish(e, saga_id, record, MV_SAGA_EXISTS);
    }
    return as_runner(e, def, saga_id, abort, created, record, err, resume_loaded);
}

mv_code mv_saga_start(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                      const json_t *input, mv_abort *abort, json_t **record, bool *replayed,
                      mv_err *err) {
    return mv_saga_start_in(e, NULL, def, saga_id, input, abort, record, replayed, err);
}

/* A start's checks, then the saga's row: *created is the new record (its runner lease taken), or
 * NULL when the id already exists (the caller answers as a replay). */
mv_code mv__saga_checked_create(mv_saga_engine *e, const char *tenant,
                                const mv_saga_definition *def, const char *saga_id,
                                const json_t *input, mv_abort *abort, mv__saga_record **created,
                                mv_err *err) {
    mv_code rc;
    if (tenant && !mv_valid_token(tenant, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga tenant must be a bounded printable token");
    if ((rc = mv__saga_check_call(def, saga_id, abort, err))) return rc;
    return create(e, tenant, def, saga_id, input, created, err);
}

mv_code mv_saga_start_in(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                         const char *saga_id, const json_t *input, mv_abort *abort, json_t **record,
                         bool *replayed, mv_err *err) {
    mv_code rc;
    mv__saga_record *created = NULL;
    if (record) *record = NULL;
    if (replayed) *replayed = false;
    if ((rc = mv__saga_checked_create(e, tenant, def, saga_id, input, abort, &created, err)))
        return rc;
    if (created) return as_runner(e, def, saga_id, abort, created, record, err, resume_loaded);
    char owner[256];
    if ((rc = mv_saga_tenant(e, saga_id, owner, err))) return rc;
    if (strcmp(owner, tenant ? tenant : "default") != 0) /* another tenant's id does not exist */
        return mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s: not found", saga_id);
    mv__saga_record *rec;
    if ((rc = mv__saga_load(e, saga_id, &rec, err))) return rc;
    char fp[65];
    json_t *null_input = input ? NULL : json_null();
    mv__saga_input_fingerprint(e, input ? input : null_input, fp);
    if (strcmp(rec->definition, def->name) != 0)
        rc = mv_err_set(err, MV_SAGA_MISMATCH, "saga %s: belongs to another definition", saga_id);
    else if (strcmp(rec->fingerprint, fp) != 0)
        rc = mv_err_set(err, MV_SAGA_MISMATCH, "saga %s: was started with a different input",
                        saga_id);
    else if (replayed)
        *replayed = true;
    if (rc && err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    if (record && rc == MV_OK) *record = mv__saga_public_json(rec);
    mv__saga_record_free(rec);
    return rc;
}
