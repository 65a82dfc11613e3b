/* saga_webhook.c — saga definitions written as JSON files whose steps and compensations are
 * webhooks (DESIGN "Sagas and approvals over HTTP"), adapted to mv_saga_definition and kept in a
 * book by name.
 *
 * The adapter adds no state of its own: each step is one mv_saga_step() whose executor POSTs the
 * step call and maps the webhook outcome onto what the engine must know — 2xx committed, 4xx or
 * never sent conclusively not committed (MV_SAGA_STEP_FAILED: the saga compensates), anything
 * else ambiguous (the saga goes to manual review). The saga input is stored as the step's
 * compensation arguments, so a compensation run days later (or by another process) sends the
 * same input without re-reading anything. A definition is validated completely when loaded, so a
 * bad file stops the daemon at start, never a saga halfway. A step declared idempotent is called
 * again with the same key on a 5xx or a timeout (retry_step), the wait on a loop timer when the
 * saga runs on the loop, and on a condition that a stop wakes (mv__abort_wait) in the blocking
 * engine, whose caller waits for the step's outcome. */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/callctx.h"
#include "base/json_files.h"
#include "durable/durable_internal.h"
#include "missive/saga_webhook.h"

#define MAX_ATTEMPTS_LIMIT 1000

typedef struct wh_def wh_def;

typedef struct wh_step {
    wh_def *def;
    char *name, *run_url, *compensate_url;
    bool idempotent;  /* the far side deduplicates by Idempotency-Key: 5xx and timeouts retried */
    int64_t delay_ms; /* delayMs: the saga waits this long (durably) before the step */
} wh_step;

struct wh_def {
    mv_saga_definition def; /* what the engine sees; def.ctx is this struct */
    const mv_webhook_config *wh;
    char *name, *capability;
    int64_t backoff_initial, backoff_max;
    wh_step *steps;
    mv_saga_compensator *compensators;
    size_t nsteps;
};

struct mv_saga_book {
    const mv_webhook_config *wh;
    wh_def **defs;
    size_t n, cap;
};

/* ---- the webhook calls ------------------------------------------------------------------- */

typedef struct step_call {
    const wh_step *step;
    mv_saga_ctx *saga;
    const json_t *input;
} step_call;

/* initial·2^(attempt−1), capped at max. */
static int64_t backoff(int attempt, void *def_ctx) {
    const wh_def *d = def_ctx;
    int64_t delay = d->backoff_initial;
    for (int i = 1; i < attempt && delay < d->backoff_max; i++)
        delay = delay > d->backoff_max / 2 ? d->backoff_max : delay * 2;
    return delay < d->backoff_max ? delay : d->backoff_max;
}

/* Whether call `attempt` of an idempotent step may be made again with the same key: after a 5xx
 * or a timeout (the far side may have acted; it deduplicates), and — once a call may have acted —
 * after a call that never left (the far side restarting), up to the saga's maxAttempts. */
static bool retry_step(const wh_step *st, const mv_webhook_response *res, int attempt) {
    if (!st->idempotent || attempt >= st->def->def.max_attempts) return false;
    if (res->outcome == MV_WEBHOOK_NOT_SENT) return attempt > 1;
    return res->outcome == MV_WEBHOOK_AMBIGUOUS &&
           ((res->status >= 500 && res->status <= 599) ||
            (res->status == 0 && res->failure && strcmp(res->failure, "timed out") == 0));
}

/* What the step's last call (number `attempt`) says, for the engine: 2xx committed (*result, the
 * JSON body or null), 4xx conclusively not committed (MV_SAGA_STEP_FAILED, error_code
 * step_rejected), never sent likewise (step_not_sent) unless an earlier call with the same key
 * may have acted, anything else ambiguous (MV_UPSTREAM_FAILED: manual review). */
static mv_code step_outcome(const wh_step *st, const mv_webhook_response *res, int attempt,
                            json_t **result, char error_code[65], mv_err *err) {
    char code[65], words[256]; /* what the step said, without its URL (the log has that) */
    mv_webhook_failure_words(res, code, words);
    error_code[0] = '\0';
    switch (res->outcome) {
    case MV_WEBHOOK_OK:
        /* The far side said it is done: committed, whatever the body. A body that is not JSON
         * (or none) is kept as null rather than turning a done effect into an unknown one. */
        *result = res->json ? json_incref(res->json) : json_null();
        return MV_OK;
    case MV_WEBHOOK_NOT_SENT:
        if (attempt > 1) break; /* says nothing about the calls before it */
        /* fall through */
    case MV_WEBHOOK_REJECTED:
        mv_strlcpy(error_code,
                   res->outcome == MV_WEBHOOK_REJECTED ? "step_rejected" : "step_not_sent", 65);
        return mv_err_set(err, MV_SAGA_STEP_FAILED, "saga step %s: %s", st->name, words);
    case MV_WEBHOOK_AMBIGUOUS: break;
    }
    if (attempt > 1)
        return mv_err_set(err, MV_UPSTREAM_FAILED, "saga step %s: %s (after %d attempts)", st->name,
                          words, attempt);
    return mv_err_set(err, MV_UPSTREAM_FAILED, "saga step %s: %s", st->name, words);
}

static mv_code execute_step(mv_saga_step_call *call, void *p, json_t **result, mv_err *err) {
    step_call *sc = p;
    const wh_step *st = sc->step;
    json_t *body = json_pack("{s:s, s:s, s:O, s:o, s:s}", "sagaId", call->saga_id, "step",
                             call->step, "input", (json_t *)sc->input, "results",
                             mv_saga_ctx_results(sc->saga), "effectId", call->effect_id);
    if (!body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_webhook_response res = {0};
    int attempt = 1;
    for (;; attempt++) {
        mv_err werr = {0};
        mv__callctx_call("saga_step", NULL, NULL, call->saga_id);
        mv_webhook_post(st->def->wh, st->run_url, body, call->effect_id, &res, &werr);
        if (!retry_step(st, &res, attempt)) break;
        /* the blocking engine answers once the step has an outcome, so its caller's thread (which
         * waits for the calls too) waits out the backoff, woken at once by a stop */
        mv__abort_wait(call->abort, backoff(attempt, st->def));
        if (mv_abort_is_set(call->abort)) break; /* the last answer stands */
        mv_webhook_response_free(&res);
    }
    json_decref(body);
    mv_code rc = step_outcome(st, &res, attempt, result, call->error_code, err);
    mv_webhook_response_free(&res);
    return rc;
}

static mv_code compensate_step(const json_t *args, const mv_saga_compensation_call *call, void *p,
                               mv_err *err) {
    const wh_step *step = p;
    json_t *input = json_object_get(args, "input");
    json_t *body = json_pack("{s:s, s:s, s:O, s:O, s:s, s:i}", "sagaId", call->saga_id, "step",
                             call->step, "input", input ? input : json_null(), "result",
                             call->result ? (json_t *)call->result : json_null(),
                             "compensationEffectId", call->effect_id, "attempt", call->attempt);
    if (!body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_webhook_response res = {0};
    mv_err werr = {0};
    mv__callctx_call("saga_compensation", NULL, NULL, call->saga_id);
    mv_code rc =
        mv_webhook_post(step->def->wh, step->compensate_url, body, call->effect_id, &res, &werr);
    json_decref(body);
    char code[65], words[256];
    mv_webhook_failure_words(&res, code, words);
    mv_webhook_response_free(&res);
    if (rc != MV_OK)
        return mv_err_set(err, MV_UPSTREAM_FAILED, "saga compensation %s: %s", call->step, words);
    return MV_OK;
}

static mv_code run_definition(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    wh_def *d = def_ctx;
    json_t *args = json_pack("{s:O}", "input", (json_t *)input);
    if (!args) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = MV_OK;
    for (size_t i = 0; i < d->nsteps && rc == MV_OK; i++) {
        step_call sc = {.step = &d->steps[i], .saga = ctx, .input = input};
        if (d->steps[i].delay_ms > 0)
            rc = mv_saga_delay(ctx, d->steps[i].name, d->steps[i].delay_ms, err);
        if (rc == MV_OK)
            rc = mv_saga_step(ctx, d->steps[i].name, args, execute_step, &sc, NULL, err);
    }
    json_decref(args);
    return rc;
}

/* ---- the same calls on the loop ---------------------------------------------------------------
 * One run at a time per saga, as a chain: a job (on a submit thread) saves and posts, the call's
 * completion (on the loop's thread) only hands its outcome to the next job. The outcome words and
 * codes come from the same classification as execute_step and compensate_step above. */

typedef struct async_run {
    wh_def *d;
    mv_saga_async env;
    mv__saga_runner *r;
    mv_loop_timer *lease;
    json_t *input, *args;
    size_t next;                    /* the next step to begin */
    const mv__saga_comp_call *comp; /* the compensation in flight, or NULL */
    const char *effect_id;          /* the step's key (the engine's, valid while it runs) */
    int attempt;                    /* calls made for the step in flight (same key each time) */
    _Atomic(mv_loop_timer *) retry; /* the wait before its next call, or NULL */
    int64_t retry_at;               /* when that call is due (wall clock) */
    char traceparent[64];
    mv_saga_async_done done;
    void *done_ctx;
    /* the last call's outcome, from the loop's thread to the next job */
    mv_code call_rc;
    mv_webhook_response res;
    mv_err call_err;
} async_run;

static void async_free(async_run *a) {
    json_decref(a->input);
    json_decref(a->args);
    free(a);
}

/* Ends the run: the lease timer stopped (never on the loop's thread: we are on a submit thread or
 * the caller's), the run ended as the engine ends it, then done. */
static void async_finish(async_run *a, mv_code rc, const mv_err *err) {
    mv_loop_timer_cancel(a->lease);
    json_t *record = NULL;
    rc = mv__saga_runner_finish(a->r, rc, &record);
    mv_err e = {0};
    if (err) mv_err_copy(&e, err);
    e.code = rc;
    a->done(a->done_ctx, rc, record, &e);
    async_free(a);
}

static bool async_extend(void *p) {
    async_run *a = p;
    return mv__saga_runner_extend(a->r);
}

/* The labels a call carries (request trace, saga id), as the thread that ran the saga had them. */
static void async_label(const async_run *a, const char *kind) {
    mv_strlcpy(mv__callctx()->traceparent, a->traceparent, sizeof mv__callctx()->traceparent);
    mv__callctx_call(kind, NULL, NULL, mv__saga_runner_id(a->r));
}

static void async_steps(async_run *a);
static void async_compensations(async_run *a, mv_code rc, const mv_err *err);

static void async_call_done(void *p, mv_code rc, mv_webhook_response *res, const mv_err *err,
                            void (*next)(void *)) {
    async_run *a = p;
    a->call_rc = rc;
    a->res = *res; /* owned from here */
    mv_err_copy(&a->call_err, err);
    a->env.submit(a->env.submit_ctx, next, a);
}

/* ---- steps ---- */

static void step_job(void *p);
static void step_retry_job(void *p);
static void step_record(async_run *a);

static void step_call_done(void *p, mv_code rc, mv_webhook_response *res, const mv_err *err) {
    async_call_done(p, rc, res, err, step_job);
}

static bool post_step(async_run *a);

/* The retry timer's tick: at the due time, or at once when the run is told to stop (a drain
 * does not wait out a backoff), the next job; once (step_retry_job cancels the timer). */
static bool retry_fire(void *p) {
    async_run *a = p;
    if (mv_now_ms() < a->retry_at && !mv_abort_is_set(a->env.stop)) return true;
    a->env.submit(a->env.submit_ctx, step_retry_job, a);
    return false;
}

/* The step's outcome → the engine (step_outcome, as execute_step), or — an idempotent step's
 * 5xx or timeout — its next call after the backoff, waiting on a loop timer (no thread). */
static void step_job(void *p) {
    async_run *a = p;
    const wh_step *st = &a->d->steps[a->next];
    if (a->call_rc == MV_DRAINING) { /* abandoned at shutdown: its outcome is not known */
        mv_webhook_response_free(&a->res);
        mv_err e = {0};
        mv_err_set(&e, MV_DRAINING, "the server is shutting down; saga %s continues later",
                   mv__saga_runner_id(a->r));
        mv_strlcpy(e.saga_id, mv__saga_runner_id(a->r), sizeof e.saga_id);
        async_finish(a, MV_DRAINING, &e);
        mv__callctx_reset();
        return;
    }
    if (!mv_abort_is_set(a->env.stop) && retry_step(st, &a->res, a->attempt)) {
        int64_t delay = backoff(a->attempt, a->d);
        a->retry_at = mv_now_ms() + delay;
        mv_loop_timer *t = mv_loop_every(a->env.loop,
                                         delay < 1     ? 1
                                         : delay < 100 ? delay
                                                       : 100,
                                         retry_fire, a);
        if (t) {
            atomic_store(&a->retry, t);
            mv__callctx_reset();
            return; /* the answer is kept: it stands if the next call cannot be made */
        }
    }
    step_record(a);
}

/* The wait is over: the same call again, unless the run is stopping or the call cannot be sent
 * (then the last answer stands). */
static void step_retry_job(void *p) {
    async_run *a = p;
    mv_loop_timer *t;
    while (!(t = atomic_exchange(&a->retry, NULL))) /* step_job stores it right after starting */
        sched_yield();
    mv_loop_timer_cancel(t);
    mv_webhook_response last = a->res;
    bool stopping = mv_abort_is_set(a->env.stop);
    if (stopping || !post_step(a)) {
        /* not sent: post_step left its own answer in a->res (stopping: a->res is still last) */
        if (!stopping) mv_webhook_response_free(&a->res);
        a->res = last;
        step_record(a);
        return;
    }
    mv_webhook_response_free(&last);
    mv__callctx_reset();
}

static void step_record(async_run *a) {
    const wh_step *st = &a->d->steps[a->next];
    json_t *result = NULL;
    mv_err err = {0};
    char error_code[65];
    mv_code rc = step_outcome(st, &a->res, a->attempt, &result, error_code, &err);
    mv_webhook_response_free(&a->res);
    mv_err out = {0};
    rc = mv__saga_runner_step_end(a->r, rc, result, error_code, &err, &out);
    if (rc != MV_OK) {
        async_compensations(a, rc, &out);
    } else {
        a->next++;
        async_steps(a);
    }
    mv__callctx_reset();
}

/* Posts the step a->next (its call number ++a->attempt, under the key the engine gave it); false
 * when it could not be sent (a->res then says so). */
static bool post_step(async_run *a) {
    const wh_step *st = &a->d->steps[a->next];
    json_t *body = json_pack("{s:s, s:s, s:O, s:o, s:s}", "sagaId", mv__saga_runner_id(a->r),
                             "step", st->name, "input", a->input, "results",
                             mv__saga_runner_results(a->r), "effectId", a->effect_id);
    async_label(a, "saga_step");
    a->attempt++; /* before the post: its completion may run at once, on another thread */
    mv_err perr = {0};
    mv_code rc = body ? mv_webhook_post_async(a->env.loop, a->d->wh, st->run_url, body,
                                              a->effect_id, step_call_done, a, &perr)
                      : mv_err_set(&perr, MV_NO_MEMORY, "out of memory");
    json_decref(body);
    if (rc == MV_OK) return true; /* step_job goes on */
    a->attempt--;
    /* never sent: the loop is stopping (its outcome is then left open, as if cut off), or the
     * call could not be built — conclusively not sent, as mv_webhook_post says */
    a->call_rc = rc;
    a->res = (mv_webhook_response){.outcome = MV_WEBHOOK_NOT_SENT};
    a->call_err = perr;
    return false;
}

/* Begins steps from a->next until one needs a call (posted) or the run is over. */
static void async_steps(async_run *a) {
    for (; a->next < a->d->nsteps; a->next++) {
        if (mv_abort_is_set(a->env.stop)) {
            mv_err e = {0};
            mv_err_set(&e, MV_DRAINING, "the server is shutting down; saga %s continues later",
                       mv__saga_runner_id(a->r));
            mv_strlcpy(e.saga_id, mv__saga_runner_id(a->r), sizeof e.saga_id);
            async_finish(a, MV_DRAINING, &e);
            return;
        }
        const wh_step *st = &a->d->steps[a->next];
        const char *effect_id = NULL;
        mv_err err = {0};
        mv_code rc =
            st->delay_ms > 0 ? mv__saga_runner_delay(a->r, st->name, st->delay_ms, &err) : MV_OK;
        if (rc == MV_SAGA_DELAYED) { /* saved waiting: its timer resumes it, no thread waits */
            async_finish(a, MV_OK, NULL);
            return;
        }
        if (rc == MV_OK) rc = mv__saga_runner_step_begin(a->r, st->name, a->args, &effect_id, &err);
        if (rc != MV_OK) {
            async_compensations(a, rc, &err);
            return;
        }
        if (!effect_id) continue; /* committed before: not run again */
        a->effect_id = effect_id;
        a->attempt = 0;
        if (!post_step(a)) step_job(a);
        return;
    }
    const mv__saga_comp_call *call = NULL;
    mv_err err = {0};
    mv_code rc = mv__saga_runner_ran(a->r, MV_OK, NULL, &call, &err);
    async_finish(a, rc, &err);
}

/* ---- compensations ---- */

static void comp_job(void *p);

static void comp_call_done(void *p, mv_code rc, mv_webhook_response *res, const mv_err *err) {
    async_call_done(p, rc, res, err, comp_job);
}

/* Posts a->comp (compensate_step's request); false when it could not be sent. */
static bool comp_post(async_run *a) {
    const mv__saga_comp_call *c = a->comp;
    const wh_step *step = c->comp->ctx;
    json_t *input = json_object_get(c->args, "input");
    json_t *body = json_pack("{s:s, s:s, s:O, s:O, s:s, s:i}", "sagaId", c->call.saga_id, "step",
                             c->call.step, "input", input ? input : json_null(), "result",
                             c->call.result ? (json_t *)c->call.result : json_null(),
                             "compensationEffectId", c->call.effect_id, "attempt", c->call.attempt);
    async_label(a, "saga_compensation");
    mv_err perr = {0};
    mv_code rc = body ? mv_webhook_post_async(a->env.loop, a->d->wh, step->compensate_url, body,
                                              c->call.effect_id, comp_call_done, a, &perr)
                      : mv_err_set(&perr, MV_NO_MEMORY, "out of memory");
    json_decref(body);
    if (rc == MV_OK) return true;
    a->call_rc = rc;
    a->res = (mv_webhook_response){.outcome = MV_WEBHOOK_NOT_SENT};
    a->call_err = perr;
    return false;
}

/* rc/err: the engine's answer; a->comp the next compensation to call (or NULL: the end). */
static void comp_next(async_run *a, mv_code rc, const mv_err *err) {
    if (!a->comp) {
        async_finish(a, rc, err);
    } else if (!comp_post(a)) {
        comp_job(a); /* not sent: a failed attempt, recorded now */
    }
}

/* The compensation call's outcome → the engine (compensate_step's classification: anything but
 * 2xx is a failed attempt, also a call abandoned at shutdown). */
static void comp_job(void *p) {
    async_run *a = p;
    const mv__saga_comp_call *c = a->comp;
    char code[65], words[256];
    mv_webhook_failure_words(&a->res, code, words);
    mv_webhook_response_free(&a->res);
    mv_err err = {0};
    mv_code rc = a->call_rc == MV_OK ? MV_OK
                                     : mv_err_set(&err, MV_UPSTREAM_FAILED,
                                                  "saga compensation %s: %s", c->call.step, words);
    mv_err out = {0};
    rc = mv__saga_runner_comp_end(a->r, rc, &err, &a->comp, &out);
    comp_next(a, rc, &out);
    mv__callctx_reset();
}

/* The run stopped at a step (rc, err: what mv_saga_step returned): resume_loaded's end. */
static void async_compensations(async_run *a, mv_code rc, const mv_err *err) {
    mv_err out = {0};
    rc = mv__saga_runner_ran(a->r, rc, err, &a->comp, &out);
    comp_next(a, rc, &out);
}

/* ---- starting ---- */

bool mv_saga_book_owns(const mv_saga_definition *def) { return def && def->run == run_definition; }

static mv_code async_begin(mv__saga_runner *r, const mv_saga_definition *def,
                           const mv_saga_async *env, mv_saga_async_done done, void *done_ctx,
                           async_run **out, mv_err *err) {
    async_run *a = calloc(1, sizeof *a);
    if (a) {
        a->d = def->ctx;
        a->env = *env;
        a->r = r;
        a->done = done;
        a->done_ctx = done_ctx;
        a->input = mv__saga_runner_input(r);
        a->args = a->input ? json_pack("{s:O}", "input", a->input) : NULL;
        mv_strlcpy(a->traceparent, mv__callctx()->traceparent, sizeof a->traceparent);
    }
    int64_t period = mv__saga_runner_lease_ms(r) / 3;
    if (a && a->args) a->lease = mv_loop_every(env->loop, period > 0 ? period : 1, async_extend, a);
    if (!a || !a->args || !a->lease) {
        if (a) async_free(a);
        mv__saga_runner_finish(r, MV_NO_MEMORY, NULL);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory (or the loop is stopping)");
    }
    *out = a;
    return MV_OK;
}

static mv_code check_async(const mv_saga_definition *def, const mv_saga_async *env,
                           mv_saga_async_done done, mv_err *err) {
    if (!mv_saga_book_owns(def) || !env || !env->loop || !env->submit || !done)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "an asynchronous saga needs a book's definition, a loop, a submit "
                          "function and a completion");
    return MV_OK;
}

mv_code mv_saga_book_start_async(mv_saga_engine *engine, const mv_saga_definition *def,
                                 const mv_saga_async *env, const char *tenant, const char *saga_id,
                                 const json_t *input, mv_saga_async_done done, void *done_ctx,
                                 bool *started, json_t **record, bool *replayed, mv_err *err) {
    *started = false;
    if (record) *record = NULL;
    if (replayed) *replayed = false;
    mv_code rc = check_async(def, env, done, err);
    if (rc) return rc;
    mv__saga_runner *r = NULL;
    if ((rc = mv__saga_runner_start(engine, tenant, def, saga_id, input, &r, record, replayed,
                                    err)) ||
        !r)
        return rc;
    async_run *a;
    if ((rc = async_begin(r, def, env, done, done_ctx, &a, err))) return rc;
    *started = true;
    async_steps(a);
    return MV_OK;
}

mv_code mv_saga_book_run_async(mv_saga_engine *engine, const mv_saga_definition *def,
                               const mv_saga_async *env, const char *saga_id, bool compensate,
                               mv_saga_async_done done, void *done_ctx, bool *started,
                               json_t **record, mv_err *err) {
    *started = false;
    if (record) *record = NULL;
    mv_code rc = check_async(def, env, done, err);
    if (rc) return rc;
    mv__saga_runner *r = NULL;
    if ((rc = mv__saga_runner_take(engine, def, saga_id, &r, record, err))) return rc;
    async_run *a;
    if ((rc = async_begin(r, def, env, done, done_ctx, &a, err))) return rc;
    *started = true;
    if (compensate) {
        mv_err out = {0};
        rc = mv__saga_runner_compensate(r, &a->comp, &out);
        comp_next(a, rc, &out);
    } else if (!mv__saga_runner_running(r)) { /* resume_loaded: other states are answered */
        async_finish(a, MV_OK, NULL);
    } else {
        async_steps(a);
    }
    return MV_OK;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static void def_free(wh_def *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nsteps; i++) {
        free(d->steps[i].name);
        free(d->steps[i].run_url);
        free(d->steps[i].compensate_url);
    }
    free(d->steps);
    free(d->compensators);
    free(d->name);
    free(d->capability);
    free(d);
}

typedef struct parse {
    const char *source;
    mv_err *err;
} parse;

static mv_code fail(const parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mv_code fail(const parse *p, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mv_err_set(p->err, MV_INVALID_CONFIG, "%s: %s", p->source, msg);
}

/* Fails on the first key of obj that is not in allowed (NULL-terminated); path prefixes it. */
static mv_code only_keys(const parse *p, const json_t *obj, const char *path,
                         const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        (void)v;
        const char *const *a = allowed;
        while (*a && strcmp(*a, key) != 0)
            a++;
        if (!*a) return fail(p, "unknown key \"%s%s\"", path, key);
    }
    return MV_OK;
}

static bool valid_url(const char *s) {
    size_t skip = strncmp(s, "http://", 7) == 0 ? 7 : strncmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip || !s[skip] || s[skip] == '/') return false;
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) return false;
    return true;
}

/* {"webhook": URL} at path (e.g. "steps[0].run"); *out is a malloc'd copy. */
static mv_code read_call(const parse *p, const json_t *step, const char *key, const char *path,
                         char **out) {
    json_t *v = json_object_get(step, key);
    if (!json_is_object(v)) return fail(p, "%s.%s must be an object {\"webhook\": URL}", path, key);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.%s.", path, key);
    static const char *const allowed[] = {"webhook", NULL};
    mv_code rc = only_keys(p, v, prefix, allowed);
    if (rc) return rc;
    const char *url = mv_json_str(v, "webhook");
    if (!url || !valid_url(url))
        return fail(p, "%s.%s.webhook must be an http:// or https:// URL%s%s%s", path, key,
                    url ? ", got \"" : "", url ? url : "", url ? "\"" : "");
    *out = strdup(url);
    return *out ? MV_OK : mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
}

static bool get_int(const json_t *v, int64_t min, int64_t max, int64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t i = json_integer_value(v);
    if (i < min || i > max) return false;
    *out = i;
    return true;
}

static mv_code read_retry(const parse *p, const json_t *root, wh_def *d) {
    d->def.max_attempts = MV_DEFAULT_SAGA_MAX_ATTEMPTS;
    d->backoff_initial = MV_DEFAULT_SAGA_BACKOFF_INITIAL_MS;
    d->backoff_max = MV_DEFAULT_SAGA_BACKOFF_MAX_MS;
    json_t *retry = json_object_get(root, "retry");
    if (!retry) return MV_OK;
    if (!json_is_object(retry)) return fail(p, "retry must be an object");
    static const char *const allowed[] = {"maxAttempts", "backoffMs", NULL};
    mv_code rc = only_keys(p, retry, "retry.", allowed);
    if (rc) return rc;
    json_t *v = json_object_get(retry, "maxAttempts");
    int64_t n;
    if (v) {
        if (!get_int(v, 1, MAX_ATTEMPTS_LIMIT, &n))
            return fail(p, "retry.maxAttempts must be an integer between 1 and %d",
                        MAX_ATTEMPTS_LIMIT);
        d->def.max_attempts = (int)n;
    }
    json_t *b = json_object_get(retry, "backoffMs");
    if (!b) return MV_OK;
    if (!json_is_object(b)) return fail(p, "retry.backoffMs must be an object");
    static const char *const ballowed[] = {"initial", "max", NULL};
    if ((rc = only_keys(p, b, "retry.backoffMs.", ballowed))) return rc;
    if ((v = json_object_get(b, "initial"))) {
        if (!get_int(v, 0, MV_MAX_SAFE_INT, &n))
            return fail(p, "retry.backoffMs.initial must be a non-negative integer");
        d->backoff_initial = n;
    }
    if ((v = json_object_get(b, "max"))) {
        if (!get_int(v, 0, MV_MAX_SAFE_INT, &n))
            return fail(p, "retry.backoffMs.max must be a non-negative integer");
        d->backoff_max = n;
    }
    if (d->backoff_max < d->backoff_initial)
        return fail(p, "retry.backoffMs.max must be at least retry.backoffMs.initial");
    return MV_OK;
}

static mv_code read_steps(const parse *p, const json_t *root, wh_def *d) {
    json_t *steps = json_object_get(root, "steps");
    if (!json_is_array(steps) || json_array_size(steps) == 0)
        return fail(p, "steps must be a non-empty array");
    size_t n = json_array_size(steps);
    d->steps = calloc(n, sizeof *d->steps);
    d->compensators = calloc(n, sizeof *d->compensators);
    if (!d->steps || !d->compensators) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
    static const char *const allowed[] = {"name",       "run",     "compensate",
                                          "idempotent", "delayMs", NULL};
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(steps, i);
        char path[32];
        snprintf(path, sizeof path, "steps[%zu]", i);
        if (!json_is_object(s)) return fail(p, "%s must be an object", path);
        char prefix[40];
        snprintf(prefix, sizeof prefix, "%s.", path);
        mv_code rc = only_keys(p, s, prefix, allowed);
        if (rc) return rc;
        wh_step *st = &d->steps[i];
        st->def = d;
        d->nsteps = i + 1; /* owned from here: def_free releases what was read */
        const char *name = mv_json_str(s, "name");
        if (!mv_valid_token(name, 128))
            return fail(p,
                        "%s.name must be a string of 1 to 128 printable characters without "
                        "spaces",
                        path);
        for (size_t k = 0; k < i; k++)
            if (strcmp(d->steps[k].name, name) == 0)
                return fail(p, "%s.name \"%s\" is used by steps[%zu] as well", path, name, k);
        if (!(st->name = strdup(name))) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
        if ((rc = read_call(p, s, "run", path, &st->run_url)) ||
            (rc = read_call(p, s, "compensate", path, &st->compensate_url)))
            return rc;
        json_t *idem = json_object_get(s, "idempotent");
        if (idem && !json_is_boolean(idem))
            return fail(p, "%s.idempotent must be true or false", path);
        st->idempotent = json_is_true(idem);
        json_t *delay = json_object_get(s, "delayMs");
        if (delay && !get_int(delay, 0, MV_SAGA_MAX_DELAY_MS, &st->delay_ms))
            return fail(p,
                        "%s.delayMs must be an integer from 0 to %" PRId64
                        " (milliseconds, at most 365 days)",
                        path, MV_SAGA_MAX_DELAY_MS);
        d->compensators[i] = (mv_saga_compensator){st->name, compensate_step, st};
    }
    d->def.compensators = d->compensators;
    d->def.ncompensators = n;
    return MV_OK;
}

static mv_code parse_definition(const parse *p, const json_t *root, const mv_webhook_config *wh,
                                wh_def **out) {
    *out = NULL;
    if (!json_is_object(root)) return fail(p, "a saga definition must be a JSON object");
    static const char *const allowed[] = {"name", "capability", "retry", "steps", NULL};
    mv_code rc = only_keys(p, root, "", allowed);
    if (rc) return rc;
    wh_def *d = calloc(1, sizeof *d);
    if (!d) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
    d->wh = wh;
    const char *name = mv_json_str(root, "name");
    json_t *cap = json_object_get(root, "capability");
    if (!mv_valid_token(name, 128)) {
        rc = fail(p, "name must be a string of 1 to 128 printable characters without spaces");
    } else if (cap && !json_is_null(cap) &&
               (!json_is_string(cap) || !mv_valid_capability(json_string_value(cap)) ||
                strlen(json_string_value(cap)) > 128)) {
        rc = fail(p, "capability must be a capability id such as \"orders.checkout\" (lowercase "
                     "letters and digits, parts joined by '.' or '-')");
    } else if (!(d->name = strdup(name)) ||
               (json_is_string(cap) && !(d->capability = strdup(json_string_value(cap))))) {
        rc = mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
    } else if (!(rc = read_retry(p, root, d)) && !(rc = read_steps(p, root, d))) {
        d->def.name = d->name;
        d->def.capability = d->capability;
        d->def.run = run_definition;
        d->def.backoff = backoff;
        d->def.ctx = d;
        mv_err check = {0};
        if (mv_saga_definition_check(&d->def, &check) != MV_OK) rc = fail(p, "%s", check.message);
    }
    if (rc) {
        def_free(d);
        return rc;
    }
    *out = d;
    return MV_OK;
}

/* ---- the book ------------------------------------------------------------------------------ */

mv_saga_book *mv_saga_book_new(const mv_webhook_config *wh) {
    mv_saga_book *b = calloc(1, sizeof *b);
    if (b) b->wh = wh;
    return b;
}

void mv_saga_book_free(mv_saga_book *book) {
    if (!book) return;
    for (size_t i = 0; i < book->n; i++)
        def_free(book->defs[i]);
    free(book->defs);
    free(book);
}

static wh_def *find(const mv_saga_book *book, const char *name) {
    for (size_t i = 0; book && name && i < book->n; i++)
        if (strcmp(book->defs[i]->name, name) == 0) return book->defs[i];
    return NULL;
}

mv_code mv_saga_book_add_json(mv_saga_book *book, const json_t *json, const char *source_name,
                              mv_err *err) {
    parse p = {.source = source_name ? source_name : "saga definition", .err = err};
    wh_def *d = NULL;
    mv_code rc = parse_definition(&p, json, book->wh, &d);
    if (rc) return rc;
    if (!d) return mv_err_set(err, MV_INTERNAL, "%s: the definition was not built", p.source);
    if (find(book, d->name)) {
        rc = fail(&p, "saga definition \"%s\" is already defined", d->name);
        def_free(d);
        return rc;
    }
    if (book->n == book->cap) {
        size_t cap = book->cap ? book->cap * 2 : 8;
        wh_def **nd = realloc(book->defs, cap * sizeof *nd);
        if (!nd) {
            def_free(d);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        book->defs = nd;
        book->cap = cap;
    }
    book->defs[book->n++] = d;
    return MV_OK;
}

mv_code mv_saga_book_load_file(mv_saga_book *book, const char *path, mv_err *err) {
    json_t *json = NULL;
    mv_code rc = mv_json_load_file(path, &json, err);
    if (rc == MV_INVALID_JSON) {
        if (err) err->code = MV_INVALID_CONFIG; /* a definition file that does not parse */
        return MV_INVALID_CONFIG;
    }
    if (rc) return rc;
    rc = mv_saga_book_add_json(book, json, path, err);
    json_decref(json);
    return rc;
}

mv_code mv_saga_book_load_dir(mv_saga_book *book, const char *dir, mv_err *err) {
    mv__json_files files;
    mv_code rc = mv__json_files_list(dir, "the saga directory", &files, err);
    if (rc != MV_OK) return rc;
    char report[sizeof err->message] = "";
    size_t used = 0, failed = 0, dropped = 0;
    for (size_t i = 0; i < files.n; i++) {
        mv_err e = {0};
        if (mv_saga_book_load_file(book, files.paths[i], &e) == MV_OK) continue;
        if (e.code == MV_NO_MEMORY) {
            rc = mv_err_copy(err, &e);
            goto done;
        }
        failed++;
        size_t need = strlen(e.message) + (used ? 1 : 0);
        if (dropped || used + need + 40 >= sizeof report) {
            dropped++;
            continue;
        }
        used += (size_t)snprintf(report + used, sizeof report - used, "%s%s", used ? "\n" : "",
                                 e.message);
    }
    if (failed) {
        if (dropped) snprintf(report + used, sizeof report - used, "\n… and %zu more", dropped);
        rc = mv_err_set(err, MV_INVALID_CONFIG, "%s", report);
    }
done:
    mv__json_files_free(&files);
    return rc;
}

size_t mv_saga_book_count(const mv_saga_book *book) { return book ? book->n : 0; }

const mv_saga_definition *mv_saga_book_find(const mv_saga_book *book, const char *name) {
    wh_def *d = find(book, name);
    return d ? &d->def : NULL;
}
