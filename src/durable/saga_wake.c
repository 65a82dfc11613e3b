/* saga_wake.c — the `saga_wake` timer kind: a saga saved waiting (mv_saga_delay) armed a timer
 * "saga:<id>" for its wakeAt in the same transaction; its fire resumes the saga. The timer engine
 * claims each due timer on one daemon at a time, and the saga's runner lease and journaled steps
 * keep a resume that runs twice (a daemon killed mid-resume, its claim's lease ended) from calling
 * any step twice. */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "durable/timer.h"

static mv_code wake_call(void *ctx, const mv__timer *t, int64_t now, mv_err *err) {
    (void)now;
    mv_saga_engine *e = ctx;
    json_t *rec = NULL;
    mv_code rc = mv__saga_load(e, t->ref, &rec, err);
    if (rc == MV_SAGA_NOT_FOUND) return MV_OK; /* nothing left to wake */
    if (rc) return rc;
    /* running: a wake cut short (its daemon killed after it saved the saga running) */
    bool waiting = saga_is(rec, MV_SAGA_WAITING), running = saga_is(rec, MV_SAGA_RUNNING);
    char definition[129];
    mv_strlcpy(definition, mv_json_str(rec, "definition"), sizeof definition);
    json_decref(rec);
    if (!waiting && !running) return MV_OK; /* resumed already, or compensated meanwhile */
    const mv_saga_definition *def = e->find ? e->find(e->find_ctx, definition) : NULL;
    if (!def)
        return mv_err_set(err, MV_SAGA_DEFINITION_NOT_FOUND,
                          "saga %s: definition %s is not loaded here", t->ref, definition);
    mv_err run_err = {0};
    mv_code run_rc = mv_saga_resume(e, def, t->ref, NULL, NULL, &run_err);
    /* The fire is done once the saga has left this wait, whatever the run's outcome (a failed
     * step is the saga's to record). Left to the timer's lease: a saga still waiting for this wake
     * (the store failed, or it was woken before its wakeAt), or still running under another
     * runner's lease (a live one finishes it; a dead one's lease ends before the next claim). */
    if ((rc = mv__saga_load(e, t->ref, &rec, err))) return rc == MV_SAGA_NOT_FOUND ? MV_OK : rc;
    bool still = (saga_is(rec, MV_SAGA_WAITING) &&
                  json_integer_value(json_object_get(rec, "wakeAt")) <= t->due_at) ||
                 (saga_is(rec, MV_SAGA_RUNNING) && run_rc == MV_SAGA_CONCURRENCY);
    json_decref(rec);
    if (!still) return MV_OK;
    if (run_rc != MV_OK) return mv_err_copy(err, &run_err);
    return mv_err_set(err, MV_SAGA_DELAYED, "saga %s: not due yet", t->ref);
}

mv_code mv__saga_wake_register(struct mv__timer_engine *te, mv_saga_engine *e,
                               const mv_saga_definition *(*find)(void *ctx, const char *name),
                               void *find_ctx, mv_err *err) {
    e->find = find;
    e->find_ctx = find_ctx;
    return mv__timer_engine_register(te, MV__SAGA_WAKE_KIND, wake_call, NULL, e, err);
}
