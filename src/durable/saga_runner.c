/* saga_runner.c — the saga run in halves (durable_internal.h), for a driver whose calls wait
 * elsewhere. */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "store/db.h"
#include "store/saga_sql.h"

/* ---- the runner in halves (durable_internal.h) -------------------------------------------------
 * The same run as as_runner + resume_loaded + mv_saga_step + compensate_loaded, cut where the
 * executor or a compensator would be called, so that a driver can make those calls elsewhere (on
 * the outgoing-call loop) and come back with their outcome on another thread. Every save is the
 * engine's own (step_intent, step_committed, step_failed, comp_*, save_with, end_run) and the
 * lifecycle events are those mv_effect_run emits, in the same order. */

struct mv__saga_runner {
    mv_saga_engine *e;
    const mv_saga_definition *def;
    char saga_id[129], runner[37];
    mv__saga_record *rec;
    mv_saga_ctx ctx;
    /* the step in flight (step.step owned while step_live) */
    step_run step;
    bool step_live;
    char step_name[129], effect_id[37];
    mv_effect_context c;
    int64_t started;
    /* after the steps: the run's error, returned once compensation is done */
    mv_err run_err;
    int comp_index;
    comp_run comp;
    bool comp_live; /* comp.step is owned */
    mv__saga_comp_call comp_call;
};

static void runner_emit(mv__saga_runner *r, mv_effect_phase phase, int64_t since,
                        const char *error_code) {
    int64_t at = mv_clock_now(r->e->clock);
    mv_effect_event ev = {.effect_id = r->c.effect_id,
                          .capability = r->c.capability,
                          .stage = r->c.stage,
                          .phase = phase,
                          .at = at,
                          .duration_ms = since < 0 ? -1 : (at >= since ? at - since : 0),
                          .attempt = r->c.attempt,
                          .error_code = error_code};
    mv_effect_observer obs[2] = {r->e->observer, {0}};
    mv_effect_emit(obs, 2, &ev);
}

static mv__saga_runner *runner_new(mv_saga_engine *e, const mv_saga_definition *def,
                                   const char *saga_id, const char *runner, mv__saga_record *rec) {
    mv__saga_runner *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->e = e;
    r->def = def;
    mv_strlcpy(r->saga_id, saga_id, sizeof r->saga_id);
    mv_strlcpy(r->runner, runner, sizeof r->runner);
    r->rec = rec;
    r->ctx = (mv_saga_ctx){.e = e, .def = def, .saga_id = r->saga_id, .rec = &r->rec};
    return r;
}

mv_code mv__saga_runner_start(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                              const char *saga_id, const json_t *input, mv__saga_runner **out,
                              json_t **record, bool *replayed, mv_err *err) {
    mv_code rc;
    mv__saga_record *created = NULL;
    *out = NULL;
    if (record) *record = NULL;
    if (replayed) *replayed = false;
    if ((rc = mv__saga_checked_create(e, tenant, def, saga_id, input, NULL, &created, err)))
        return rc;
    if (created) {
        *out = runner_new(e, def, saga_id, created->runner, created);
        if (*out) return MV_OK;
        mv__saga_drop_runner(e, saga_id, created->runner);
        mv__saga_record_free(created);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    /* taken: what mv_saga_start_in answers (nothing runs) */
    return mv_saga_start_in(e, tenant, def, saga_id, input, NULL, record, replayed, err);
}

mv_code mv__saga_runner_take(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                             mv__saga_runner **out, json_t **record, mv_err *err) {
    mv_code rc;
    char runner[37];
    mv__saga_record *rec = NULL;
    *out = NULL;
    if (record) *record = NULL;
    if ((rc = mv__saga_check_call(def, saga_id, NULL, err)) ||
        (rc = mv__saga_take_runner(e, saga_id, runner, err)))
        return mv__saga_finish(e, saga_id, record, rc);
    if (!(rc = mv__saga_load(e, saga_id, &rec, err)) &&
        !(rc = mv__saga_check_definition(def, rec, err))) {
        mv_strlcpy(rec->runner, runner, sizeof rec->runner);
        if ((*out = runner_new(e, def, saga_id, runner, rec))) return MV_OK;
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    mv__saga_end_run(e, saga_id, &rec, runner);
    rc = mv__saga_finish_run(e, saga_id, rec, record, rc);
    mv__saga_record_free(rec);
    return rc;
}

const char *mv__saga_runner_id(const mv__saga_runner *r) { return r->saga_id; }

bool mv__saga_runner_running(const mv__saga_runner *r) {
    return saga_is(r->rec, MV_SAGA_RUNNING) || saga_is(r->rec, MV_SAGA_WAITING);
}

mv_code mv__saga_runner_delay(mv__saga_runner *r, const char *name, int64_t delay_ms, mv_err *err) {
    return mv_saga_delay(&r->ctx, name, delay_ms, err);
}

bool mv__saga_runner_compensating(const mv__saga_runner *r) {
    return saga_is(r->rec, MV_SAGA_COMPENSATING);
}

json_t *mv__saga_runner_input(const mv__saga_runner *r) { return json_deep_copy(r->rec->input); }

json_t *mv__saga_runner_results(const mv__saga_runner *r) { return mv_saga_ctx_results(&r->ctx); }

int64_t mv__saga_runner_lease_ms(const mv__saga_runner *r) { return r->e->runner_lease_ms; }

typedef struct {
    const char *id, *runner;
    int64_t until, changes;
} extend_tx;

static mv_code extend_fn(mv_db *db, void *ctx, mv_err *err) {
    extend_tx *t = ctx;
    return mv_db_execf(db, mv__sql_saga_extend_runner, &t->changes, err, "iss", t->until, t->id,
                       t->runner);
}

bool mv__saga_runner_extend(const mv__saga_runner *r) {
    int64_t now;
    if (mv__saga_now_ms(r->e, &now, NULL))
        return true; /* a clock that cannot be read: try again later */
    extend_tx t = {.id = r->saga_id, .runner = r->runner};
    t.until = now > MV_MAX_SAFE_INT - r->e->runner_lease_ms ? MV_MAX_SAFE_INT
                                                            : now + r->e->runner_lease_ms;
    if (mv_store_write(r->e->store, extend_fn, &t, NULL) != MV_OK) return true;
    return t.changes == 1;
}

mv_code mv__saga_runner_step_begin(mv__saga_runner *r, const char *name,
                                   const json_t *compensation_args, const char **effect_id,
                                   mv_err *err) {
    mv_saga_engine *e = r->e;
    mv_code rc;
    *effect_id = NULL;
    /* mv_saga_step's checks and its answer for a step already in the record */
    if (!mv_valid_token(name, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step must be a bounded printable token");
    if (!mv__saga_find_compensator(r->def, name))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step %s has no compensator", name);
    int index = mv__saga_find_step(r->rec, name);
    if (index >= 0) {
        const mv__saga_step *existing = &r->rec->steps[index];
        if (step_is(existing, MV_STEP_COMMITTED)) return MV_OK;
        if (step_is(existing, MV_STEP_EXECUTING) || step_is(existing, MV_STEP_AMBIGUOUS)) {
            if (!saga_is(r->rec, MV_SAGA_MANUAL_REVIEW) &&
                (rc = mv__saga_save_with(e, &r->rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err)))
                return rc;
            return mv__saga_ambiguous(r->saga_id, name, err);
        }
        return mv_err_set(err, MV_SAGA_RESOLUTION, "saga %s: step %s cannot resume from %s",
                          r->saga_id, name, mv_saga_step_state_name(existing->state));
    }
    char comp_id[37];
    if ((rc = mv_id_uuid(r->effect_id, err)) || (rc = mv_id_uuid(comp_id, err))) return rc;
    mv_strlcpy(r->step_name, name, sizeof r->step_name);
    r->step = (step_run){.ctx = &r->ctx, .name = r->step_name, .effect_id = r->effect_id};
    if ((rc =
             mv__saga_new_step(&r->step.step, name, r->effect_id, comp_id, compensation_args, err)))
        return rc;
    r->step_live = true;
    /* mv_effect_run up to the executor: the intent, then "started" */
    r->c =
        (mv_effect_context){.effect_id = r->effect_id,
                            .capability = r->def->capability ? r->def->capability : "saga.execute",
                            .stage = MV_STAGE_EXECUTION};
    r->started = mv_clock_now(e->clock);
    mv_err orig = {0};
    if ((rc = mv__saga_step_intent(&r->c, &r->step, &orig))) {
        if (orig.code == MV_OK) orig.code = rc;
        runner_emit(
            r, MV_PHASE_FAILED, r->started,
            mv__saga_step_error_code(&orig, false, &r->step)); /* aborted_before_execution */
        mv__saga_step_clear(&r->step.step);
        r->step_live = false;
        mv_err_copy(err, &orig);
        if (err) mv_strlcpy(err->saga_id, r->saga_id, sizeof err->saga_id);
        return orig.code;
    }
    r->started = mv_clock_now(e->clock);
    runner_emit(r, MV_PHASE_STARTED, -1, NULL);
    *effect_id = r->effect_id;
    return MV_OK;
}

mv_code mv__saga_runner_step_end(mv__saga_runner *r, mv_code call_rc, json_t *result,
                                 const char *error_code, const mv_err *call_err, mv_err *err) {
    mv_err orig = {0};
    mv_code rc = call_rc;
    if (rc != MV_OK && call_err) mv_err_copy(&orig, call_err);
    mv_strlcpy(r->step.call.error_code, error_code ? error_code : "",
               sizeof r->step.call.error_code);
    if (rc == MV_SAGA_STEP_FAILED && r->step.call.error_code[0] &&
        !mv_valid_error_code(r->step.call.error_code)) {
        json_decref(result);
        result = NULL;
        rc = mv_err_set(&orig, MV_INVALID_ARGUMENT, "saga step error code is invalid");
    }
    if (rc == MV_OK && !(rc = mv__saga_step_committed(&r->c, result, &r->step, &orig))) {
        runner_emit(r, MV_PHASE_SUCCEEDED, r->started, NULL);
        json_decref(result);
        mv__saga_step_clear(&r->step.step);
        r->step_live = false;
        return MV_OK;
    }
    json_decref(result);
    if (orig.code == MV_OK) orig.code = rc;
    const char *code = mv__saga_step_error_code(&orig, true, &r->step);
    mv_effect_phase phase = mv__saga_step_phase(&orig, true, &r->step);
    mv_err ignored = {0};
    mv_effect_failure f = {.began = true, .error_code = code, .error = &orig};
    (void)mv__saga_step_failed(&r->c, &f, &r->step, &ignored);
    runner_emit(r, phase, r->started, code);
    mv__saga_step_clear(&r->step.step);
    r->step_live = false;
    mv_err_copy(err, &orig);
    if (err) mv_strlcpy(err->saga_id, r->saga_id, sizeof err->saga_id);
    return orig.code;
}

/* compensate_loaded's loop from r->comp_index down: the next call to make (*call), or the end of
 * the compensation (its result). */
static mv_code comp_advance(mv__saga_runner *r, const mv__saga_comp_call **call, mv_err *err) {
    mv_saga_engine *e = r->e;
    mv_code rc;
    for (; r->comp_index >= 0; r->comp_index--) {
        int pick = mv__saga_comp_pick(e, r->def, &r->rec, r->comp_index, &r->comp, &rc, err);
        if (pick == PICK_SKIP) continue;
        if (pick == PICK_STOP) return rc;
        const mv_saga_compensator *comp = r->comp.comp;
        r->comp_live = true;
        r->c = (mv_effect_context){.effect_id = r->comp.step.comp_id,
                                   .capability =
                                       r->def->capability ? r->def->capability : "saga.compensate",
                                   .stage = MV_STAGE_COMPENSATION,
                                   .attempt = r->comp.attempt};
        r->started = mv_clock_now(e->clock);
        /* mv_effect_run up to the executor: the executing transition, then "started" */
        mv_err orig = {0};
        if ((rc = mv__saga_comp_executing(&r->c, &r->comp, &orig))) {
            if (orig.code == MV_OK) orig.code = rc;
            mv_err ignored = {0};
            mv_effect_failure f = {
                .began = false, .error_code = "compensation_failed", .error = &orig};
            (void)mv__saga_comp_failed(&r->c, &f, &r->comp, &ignored);
            runner_emit(r, MV_PHASE_FAILED, r->started, "compensation_failed");
            mv__saga_step_clear(&r->comp.step);
            r->comp_live = false;
            if (r->comp.has_transition_error) return mv_err_copy(err, &r->comp.transition_error);
            return MV_OK;
        }
        r->started = mv_clock_now(e->clock);
        runner_emit(r, MV_PHASE_STARTED, -1, NULL);
        r->comp_call = (mv__saga_comp_call){.comp = comp,
                                            .args = r->comp.step.args,
                                            .call = {.saga_id = r->saga_id,
                                                     .step = r->comp.step.name,
                                                     .effect_id = r->c.effect_id,
                                                     .attempt = r->comp.attempt,
                                                     .result = r->comp.step.result}};
        *call = &r->comp_call;
        return MV_OK;
    }
    return mv__saga_save_with(e, &r->rec, MV_SAGA_COMPENSATED, 0, NULL, err);
}

/* The end of the compensation a run went into: its error, or the run's. */
static mv_code comp_over(mv__saga_runner *r, mv_code lrc, mv_err *err) {
    if (lrc) return lrc;
    return mv_err_copy(err, &r->run_err);
}

/* compensate_loaded's prelude; then the first call. */
static mv_code comp_begin(mv__saga_runner *r, const mv__saga_comp_call **call, mv_err *err) {
    bool go = false;
    mv_code rc = mv__saga_comp_prelude(r->e, &r->rec, r->saga_id, &go, err);
    if (rc || !go) return rc;
    r->comp_index = (int)r->rec->nsteps - 1;
    return comp_advance(r, call, err);
}

mv_code mv__saga_runner_ran(mv__saga_runner *r, mv_code run_rc, const mv_err *run_err,
                            const mv__saga_comp_call **call, mv_err *err) {
    mv_code rc;
    *call = NULL;
    if (run_rc == MV_OK) { /* resume_loaded after a run that returned MV_OK */
        if ((rc = mv__saga_refresh(r->e, r->saga_id, &r->rec, err))) return rc;
        if (saga_is(r->rec, MV_SAGA_RUNNING))
            return mv__saga_save_with(r->e, &r->rec, MV_SAGA_COMPLETED, 0, NULL, err);
        return MV_OK;
    }
    memset(&r->run_err, 0, sizeof r->run_err);
    if (run_err) mv_err_copy(&r->run_err, run_err);
    if (r->run_err.code == MV_OK) r->run_err.code = run_rc;
    if (run_rc == MV_SAGA_CONCURRENCY) return mv_err_copy(err, &r->run_err);
    if ((rc = mv__saga_refresh(r->e, r->saga_id, &r->rec, err))) return rc;
    if (saga_is(r->rec, MV_SAGA_MANUAL_REVIEW)) return mv_err_copy(err, &r->run_err);
    rc = comp_begin(r, call, err);
    return *call ? MV_OK : comp_over(r, rc, err);
}

mv_code mv__saga_runner_compensate(mv__saga_runner *r, const mv__saga_comp_call **call,
                                   mv_err *err) {
    *call = NULL;
    r->run_err = (mv_err){0}; /* compensate_loaded alone: its own result */
    return comp_begin(r, call, err);
}

mv_code mv__saga_runner_comp_end(mv__saga_runner *r, mv_code call_rc, const mv_err *call_err,
                                 const mv__saga_comp_call **call, mv_err *err) {
    *call = NULL;
    mv_code rc = call_rc;
    mv_err orig = {0};
    if (rc != MV_OK && call_err) mv_err_copy(&orig, call_err);
    if (rc == MV_OK && !(rc = mv__saga_comp_committed(&r->c, NULL, &r->comp, &orig))) {
        runner_emit(r, MV_PHASE_SUCCEEDED, r->started, NULL);
        mv__saga_step_clear(&r->comp.step);
        r->comp_live = false;
        r->comp_index--;
        rc = comp_advance(r, call, err);
        return *call ? MV_OK : comp_over(r, rc, err);
    }
    if (orig.code == MV_OK) orig.code = rc;
    mv_err ignored = {0};
    mv_effect_failure f = {.began = true, .error_code = "compensation_failed", .error = &orig};
    (void)mv__saga_comp_failed(&r->c, &f, &r->comp, &ignored);
    runner_emit(r, MV_PHASE_FAILED, r->started, "compensation_failed");
    mv__saga_step_clear(&r->comp.step);
    r->comp_live = false;
    /* the failed attempt is recorded; the next call retries when due */
    return comp_over(
        r, r->comp.has_transition_error ? mv_err_copy(err, &r->comp.transition_error) : MV_OK, err);
}

mv_code mv__saga_runner_finish(mv__saga_runner *r, mv_code rc, json_t **record) {
    if (!r) return rc;
    if (r->step_live) mv__saga_step_clear(&r->step.step);
    if (r->comp_live) mv__saga_step_clear(&r->comp.step);
    mv__saga_end_run(r->e, r->saga_id, &r->rec, r->runner);
    rc = mv__saga_finish_run(r->e, r->saga_id, r->rec, record, rc);
    mv__saga_record_free(r->rec);
    free(r);
    return rc;
}
