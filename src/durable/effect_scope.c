/* effect_scope.c — running one owned side effect between durable transitions (§3.5):
 * intent → admit → executing → execute → committed, and on any failure a `failed` transition
 * that records whether the effect had begun. The executor never runs unless the intent and the
 * executing transition were durably recorded, so after a crash the journal shows either "never
 * began" or "began, outcome unknown" — never a silent gap.
 *
 * Also here: cancellation flags, lifecycle events (token-only, validated, fail-open observers),
 * the evidence a request gathers about its effects, and the clock rules shared by the module. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "durable/durable_internal.h"

/* ---- cancellation --------------------------------------------------------------------------- */

/* One condition for every flag (mv__abort_wait): fires are rare, and a waiter woken by another
 * flag's fire only checks its own and waits on. Monotonic, so a clock step moves no deadline. */
static pthread_mutex_t abort_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t abort_cv;
static pthread_once_t abort_once = PTHREAD_ONCE_INIT;

static void abort_cv_init(void) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&abort_cv, &a);
    pthread_condattr_destroy(&a);
}

void mv_abort_fire(mv_abort *abort, const char *reason) {
    if (!abort || atomic_load(&abort->aborted)) return;
    mv_strlcpy(abort->reason, reason ? reason : "operation aborted", sizeof abort->reason);
    atomic_store(&abort->aborted, 1);
    pthread_once(&abort_once, abort_cv_init);
    pthread_mutex_lock(&abort_mu);
    pthread_cond_broadcast(&abort_cv);
    pthread_mutex_unlock(&abort_mu);
}

void mv__abort_wait(const mv_abort *abort, int64_t ms) {
    if (ms <= 0) return;
    pthread_once(&abort_once, abort_cv_init);
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_sec += (time_t)(ms / 1000);
    at.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&abort_mu);
    /* the flag is read under the mutex that a fire broadcasts under: no fire is missed */
    for (int rc = 0; rc != ETIMEDOUT && !mv_abort_is_set(abort);)
        rc = pthread_cond_timedwait(&abort_cv, &abort_mu, &at);
    pthread_mutex_unlock(&abort_mu);
}

bool mv_abort_is_set(const mv_abort *abort) {
    return abort && atomic_load((_Atomic int *)&abort->aborted);
}

static mv_code aborted(const mv_abort *abort, mv_err *err) {
    return mv_err_set(err, MV_ABORTED, "%s",
                      abort->reason[0] ? abort->reason : "operation aborted");
}

/* ---- clock -------------------------------------------------------------------------------- */

mv_code mv_durable_now(const mv_clock *clock, const char *label, int64_t *out, mv_err *err) {
    int64_t t = mv_clock_now(clock);
    if (!mv_valid_timestamp(t))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "%s must be a non-negative safe integer timestamp", label);
    *out = t;
    return MV_OK;
}

mv_code mv_durable_add(int64_t t, int64_t d, const char *label, int64_t *out, mv_err *err) {
    if (!mv_valid_timestamp(t) || d < 0 || d > MV_MAX_SAFE_INT - t)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "%s must be a non-negative safe integer timestamp", label);
    *out = t + d;
    return MV_OK;
}

/* ---- lifecycle events --------------------------------------------------------------------- */

static const char *const stage_names[] = {"execution", "admission", "compensation",
                                          "reconciliation"};
static const char *const phase_names[] = {"started", "succeeded", "failed", "ambiguous"};

const char *mv_effect_stage_name(mv_effect_stage stage) {
    return (unsigned)stage < 4 ? stage_names[stage] : "invalid";
}

const char *mv_effect_phase_name(mv_effect_phase phase) {
    return (unsigned)phase < 4 ? phase_names[phase] : "invalid";
}

void mv_effect_emit(const mv_effect_observer *observers, size_t n, const mv_effect_event *ev) {
    if (!ev->capability || !mv_valid_capability(ev->capability)) return;
    if (!ev->effect_id || !mv_valid_token(ev->effect_id, 64)) return;
    if ((unsigned)ev->stage > MV_STAGE_RECONCILIATION || (unsigned)ev->phase > MV_PHASE_AMBIGUOUS)
        return;
    if (ev->target && !mv_valid_token(ev->target, 128)) return;
    if (ev->digest && !mv_valid_digest(ev->digest)) return;
    if (!mv_valid_timestamp(ev->at)) return;
    if (ev->duration_ms < -1 || ev->duration_ms > MV_MAX_SAFE_INT) return;
    if (ev->attempt < 0) return;
    if (ev->error_code && !mv_valid_error_code(ev->error_code)) return;
    for (size_t i = 0; i < n; i++)
        if (observers[i].fn) observers[i].fn(ev, observers[i].ctx);
}

/* ---- evidence ----------------------------------------------------------------------------- */

void mv_evidence_mark_began(mv_effect_evidence *e) {
    e->began = true;
    e->retry_declared = false;
    e->uncertain++;
}

void mv_evidence_mark_committed(mv_effect_evidence *e) {
    e->began = e->committed = true;
    if (e->uncertain > 0) e->uncertain--;
}

void mv_evidence_mark_ambiguous(mv_effect_evidence *e) {
    e->began = true;
    e->retry_declared = false;
    if (e->uncertain < 1) e->uncertain = 1;
}

void mv_evidence_mark_failed(mv_effect_evidence *e) {
    e->began = true;
    e->retry_declared = false;
    if (e->uncertain > 0) e->uncertain--;
}

mv_code mv_evidence_mark_safe_to_retry(mv_effect_evidence *e, mv_err *err) {
    if (e->began)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "cannot mark an idempotent request safe to retry after an effect began");
    e->retry_declared = true;
    return MV_OK;
}

bool mv_evidence_safe_to_retry(const mv_effect_evidence *e) {
    return e->retry_declared && !e->began;
}

bool mv_evidence_ambiguous(const mv_effect_evidence *e) { return e->uncertain > 0; }

/* ---- run ---------------------------------------------------------------------------------- */

typedef struct {
    mv_effect_observer obs[2];
    const mv_effect_context *c;
    const mv_clock *clock;
} emitter;

static void emit(emitter *em, mv_effect_stage stage, mv_effect_phase phase, int64_t since,
                 const char *error_code) {
    int64_t at = mv_clock_now(em->clock);
    mv_effect_event ev = {.effect_id = em->c->effect_id,
                          .capability = em->c->capability,
                          .stage = stage,
                          .phase = phase,
                          .at = at,
                          .duration_ms = since < 0 ? -1 : (at >= since ? at - since : 0),
                          .attempt = em->c->attempt,
                          .error_code = error_code,
                          .target = em->c->target,
                          .digest = em->c->digest};
    mv_effect_emit(em->obs, 2, &ev);
}

mv_code mv_effect_run(mv_effect_scope *scope, const mv_effect_input *in,
                      mv_effect_execute_fn execute, void *ctx, json_t **result, mv_err *err) {
    if (result) *result = NULL;
    if (!execute)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "owned effect executor must be a function");
    if (!in || !in->capability || !mv_valid_capability(in->capability))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "owned effect capability is invalid");
    char generated[37];
    const char *effect_id = in->effect_id;
    if (!effect_id) {
        mv_code rc = mv_id_uuid(generated, err);
        if (rc) return rc;
        effect_id = generated;
    }
    if (!mv_valid_token(effect_id, 64))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "effect id must be a bounded printable token");
    if (in->target && !mv_valid_token(in->target, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "effect ledger: invalid target");
    if (in->digest && !mv_valid_digest(in->digest))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "effect ledger: invalid digest");
    if (in->attempt < 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "owned effect attempt must be a positive safe integer");
    if ((unsigned)in->stage > MV_STAGE_RECONCILIATION)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "owned effect stage is invalid");

    mv_abort *abort = in->abort ? in->abort : scope->abort;
    mv_effect_context c = {.effect_id = effect_id,
                           .capability = in->capability,
                           .stage = in->stage,
                           .target = in->target,
                           .digest = in->digest,
                           .tenant_id = in->tenant_id,
                           .principal_id = in->principal_id,
                           .attempt = in->attempt,
                           .abort = abort};
    emitter em = {.obs = {scope->observer, in->observer}, .c = &c, .clock = scope->clock};
    const mv_effect_transitions *tr = &in->transitions;
    mv_err orig = {0};
    mv_code rc = MV_OK;
    bool began = false, recorded = false;
    int64_t started = mv_clock_now(scope->clock);
    json_t *out = NULL;

    if (mv_abort_is_set(abort)) {
        rc = aborted(abort, &orig);
        goto fail;
    }
    if (tr->intent && (rc = tr->intent(&c, tr->ctx, &orig))) goto fail;
    recorded = true;
    if (in->admit) {
        int64_t t0 = mv_clock_now(scope->clock);
        emit(&em, MV_STAGE_ADMISSION, MV_PHASE_STARTED, -1, NULL);
        if ((rc = in->admit(&c, in->admit_ctx, &orig))) goto fail;
        emit(&em, MV_STAGE_ADMISSION, MV_PHASE_SUCCEEDED, t0, NULL);
    }
    if (mv_abort_is_set(abort)) {
        rc = aborted(abort, &orig);
        goto fail;
    }
    if (tr->executing && (rc = tr->executing(&c, tr->ctx, &orig))) goto fail;
    began = true;
    mv_evidence_mark_began(&scope->evidence);
    started = mv_clock_now(scope->clock);
    emit(&em, c.stage, MV_PHASE_STARTED, -1, NULL);
    if ((rc = execute(&c, ctx, &out, &orig))) {
        goto fail;
    }
    if (tr->committed && (rc = tr->committed(&c, out, tr->ctx, &orig))) goto fail;
    mv_evidence_mark_committed(&scope->evidence);
    emit(&em, c.stage, MV_PHASE_SUCCEEDED, started, NULL);
    if (result)
        *result = out;
    else
        json_decref(out);
    return MV_OK;

fail:
    json_decref(out);
    if (orig.code == MV_OK) orig.code = rc; /* a callback returned a code without filling err */
    const char *code = in->error_code_fn ? in->error_code_fn(&orig, began, in->policy_ctx)
                       : in->error_code  ? in->error_code
                       : began           ? "execution_failed"
                                         : "admission_failed";
    if (!code || !mv_valid_error_code(code))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "effect errorCode is invalid");
    mv_effect_phase phase = in->failure_phase_fn
                                ? in->failure_phase_fn(&orig, began, in->policy_ctx)
                            : began ? MV_PHASE_AMBIGUOUS
                                    : MV_PHASE_FAILED;
    if (phase != MV_PHASE_FAILED && phase != MV_PHASE_AMBIGUOUS)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "effect failurePhase is invalid");
    /* A rejected intent recorded nothing of ours: "failing" it would overwrite whichever effect
     * already owns that id. */
    if (tr->failed && recorded) {
        mv_err ignored = {0};
        mv_effect_failure f = {.began = began, .error_code = code, .error = &orig};
        (void)tr->failed(&c, &f, tr->ctx, &ignored); /* swallowed: the original error matters */
    }
    if (began && phase == MV_PHASE_FAILED) mv_evidence_mark_failed(&scope->evidence);
    emit(&em, began ? c.stage : (in->admit ? MV_STAGE_ADMISSION : c.stage),
         began ? phase : MV_PHASE_FAILED, started, code);
    mv_err_copy(err, &orig);
    return orig.code;
}
