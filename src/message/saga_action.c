/* saga_action.c — an action whose handler is a saga. The saga's id is the action's attempt id,
 * so a retried press (same attempt) continues the same saga and never re-runs a committed step,
 * while a press after compensation (a new attempt) starts a new saga. The saga's input is the
 * handler request of the attempt's first press; later presses only resume or compensate. */
#include <string.h>

#include "message/service.h"
#include "missive/saga_webhook.h"

static mv_code saga_outcome(const char *attempt_id, json_t *record, const mv_err *e,
                            json_t **result, mv_err *err);

static json_t *step_results(const json_t *record) {
    json_t *out = json_object();
    size_t i;
    json_t *step;
    json_array_foreach(json_object_get(record, "steps"), i, step) {
        json_t *r = json_object_get(step, "result");
        const char *name = mv_json_str(step, "name");
        if (name) json_object_set(out, name, r ? r : json_null());
    }
    return out;
}

mv_code mv__saga_action_run(mv_service *svc, const char *name, const mv_action_input *in,
                            json_t **result, mv_err *err) {
    const mv_saga_definition *def =
        svc->o.find_saga && svc->o.sagas ? svc->o.find_saga(svc->o.find_saga_ctx, name) : NULL;
    if (!def)
        return mv_err_set(err, MV_SAGA_DEFINITION_NOT_FOUND, "saga \"%s\" is not defined", name);
    mv_saga_engine *engine = svc->o.sagas;
    json_t *record = NULL;
    mv_err e = {0};
    mv_code rc = mv_saga_get(engine, in->attempt_id, &record, &e);
    if (rc == MV_SAGA_NOT_FOUND) {
        mv_err_clear(&e);
        json_t *input = mv__handler_request(in);
        /* the outcome is read from the record below; e keeps the step's error for the message */
        mv_saga_execute_in(engine, mv__svc_tenant(in->user), def, in->attempt_id, input, in->abort,
                           &record, &e);
        json_decref(input);
    } else if (rc == MV_OK) {
        int state = mv_saga_state_parse(mv_json_str(record, "state"));
        bool running = state == MV_SAGA_RUNNING, compensating = state == MV_SAGA_COMPENSATING;
        if (running || compensating) {
            json_decref(record);
            record = NULL;
            if (running)
                mv_saga_resume(engine, def, in->attempt_id, in->abort, &record, &e);
            else
                mv_saga_compensate(engine, def, in->attempt_id, in->abort, &record, &e);
        }
    }
    return saga_outcome(in->attempt_id, record, &e, result, err);
}

/* What the action answers for its saga's record (owned; NULL: nothing known, e says why). */
static mv_code saga_outcome(const char *attempt_id, json_t *record, const mv_err *e,
                            json_t **result, mv_err *err) {
    mv_code rc;
    if (!record) return mv_err_copy(err, e); /* nothing known: the attempt is retryable */
    const char *state = mv_json_str(record, "state");
    int st = mv_saga_state_parse(state);
    if (st == MV_SAGA_COMPLETED) {
        *result = step_results(record);
        rc = MV_OK;
    } else if (st == MV_SAGA_COMPENSATED) {
        rc = mv_err_set(err, MV_ACTION_COMPENSATED,
                        "saga \"%s\" was compensated: the action had no effect and may be pressed "
                        "again",
                        attempt_id);
    } else {
        rc = mv_err_set(err, MV_ACTION_NEEDS_REVIEW, "saga \"%s\" is %s%s%s", attempt_id, state,
                        e->message[0] ? ": " : "", e->message);
    }
    if (rc != MV_OK && err) mv_strlcpy(err->saga_id, attempt_id, sizeof err->saga_id);
    json_decref(record);
    return rc;
}

/* ---- on the loop ---------------------------------------------------------------------------- */

typedef struct saga_call {
    char attempt_id[64];
    mv__saga_action_done done;
    void *ctx;
} saga_call;

static void saga_call_done(void *p, mv_code rc, json_t *record, const mv_err *e) {
    saga_call *c = p;
    json_t *result = NULL;
    mv_err err = {0}, local = {0};
    if (e) mv_err_copy(&local, e);
    if (local.code == MV_OK) local.code = rc;
    if (rc == MV_DRAINING && mv_saga_state_parse(mv_json_str(record, "state")) == MV_SAGA_RUNNING) {
        /* stopped at shutdown: the attempt stays retryable and its next press goes on */
        rc = mv_err_copy(&err, &local);
        mv_strlcpy(err.saga_id, c->attempt_id, sizeof err.saga_id);
        json_decref(record);
    } else {
        rc = saga_outcome(c->attempt_id, record, &local, &result, &err);
    }
    c->done(c->ctx, rc, result, &err);
    free(c);
}

static const mv_saga_definition *find_definition(mv_service *svc, const char *name) {
    return svc->o.find_saga && svc->o.sagas ? svc->o.find_saga(svc->o.find_saga_ctx, name) : NULL;
}

bool mv__saga_action_on_loop(mv_service *svc, const char *name) {
    return svc->o.loop && mv_saga_book_owns(find_definition(svc, name));
}

mv_code mv__saga_action_start(mv_service *svc, const char *name, const mv_action_input *in,
                              void (*submit)(void *, void (*)(void *), void *), void *submit_ctx,
                              mv__saga_action_done done, void *ctx, mv_err *err) {
    const mv_saga_definition *def = find_definition(svc, name);
    if (!def)
        return mv_err_set(err, MV_SAGA_DEFINITION_NOT_FOUND, "saga \"%s\" is not defined", name);
    saga_call *c = calloc(1, sizeof *c);
    if (!c) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_strlcpy(c->attempt_id, in->attempt_id, sizeof c->attempt_id);
    c->done = done;
    c->ctx = ctx;
    /* (the action's abort, fired when its claim is lost, is not needed here: the saga's own
     * runner lease, kept by the loop's timer, keeps any other runner out) */
    mv_saga_async env = {
        .loop = svc->o.loop, .submit = submit, .submit_ctx = submit_ctx, .stop = svc->o.saga_stop};
    mv_saga_engine *engine = svc->o.sagas;
    json_t *record = NULL;
    mv_err e = {0};
    bool started = false;
    mv_code rc = mv_saga_get(engine, in->attempt_id, &record, &e);
    if (rc == MV_SAGA_NOT_FOUND) {
        mv_err_clear(&e);
        json_t *input = mv__handler_request(in);
        rc = mv_saga_book_start_async(engine, def, &env, mv__svc_tenant(in->user), in->attempt_id,
                                      input, saga_call_done, c, &started, &record, NULL, &e);
        json_decref(input);
    } else if (rc == MV_OK) {
        int state = mv_saga_state_parse(mv_json_str(record, "state"));
        if (state == MV_SAGA_RUNNING || state == MV_SAGA_COMPENSATING) {
            json_decref(record);
            record = NULL;
            rc = mv_saga_book_run_async(engine, def, &env, in->attempt_id,
                                        state == MV_SAGA_COMPENSATING, saga_call_done, c, &started,
                                        &record, &e);
        }
    }
    if (started) return MV_OK;
    if (e.code == MV_OK) e.code = rc;
    saga_call_done(c, rc, record, &e); /* nothing ran: the answer now */
    return MV_OK;
}
