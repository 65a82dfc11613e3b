/* saga_wake.c — the `saga_wake` timer kind: a saga saved waiting (mv_saga_delay) armed a timer
 * "saga:<id>" for its wakeAt in the same transaction; its fire resumes the saga. The timer engine
 * claims each due timer in one process at a time, and the saga's runner lease and journaled steps
 * keep a resume that runs twice (a process killed mid-resume, its claim's lease ended) from
 * calling any step twice. */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "durable/timer.h"

typedef struct pending {
    mv_saga_engine *e;
    mv__timer t;
    void (*wake)(void *);
    void *wake_ctx;
    mv_code rc;
    mv_err err;
} pending;

/* What to resume: *def NULL when there is nothing to do (the saga is gone, or has left its wait:
 * resumed already, compensated meanwhile). A running saga is a wake cut short (its process
 * killed after it saved the saga running): resumed again. */
static mv_code what(mv_saga_engine *e, const mv__timer *t, const mv_saga_definition **def,
                    mv_err *err) {
    *def = NULL;
    mv__saga_record *rec = NULL;
    mv_code rc = mv__saga_load(e, t->ref, &rec, err);
    if (rc) return rc == MV_SAGA_NOT_FOUND ? MV_OK : rc;
    bool go = saga_is(rec, MV_SAGA_WAITING) || saga_is(rec, MV_SAGA_RUNNING);
    char definition[129];
    mv_strlcpy(definition, rec->definition, sizeof definition);
    mv__saga_record_free(rec);
    if (!go) return MV_OK;
    if (!(*def = e->find ? e->find(e->find_ctx, definition) : NULL))
        return mv_err_set(err, MV_SAGA_DEFINITION_NOT_FOUND,
                          "saga %s: definition %s is not loaded here", t->ref, definition);
    return MV_OK;
}

/* After the resume (run_rc, run_err): the fire is done once the saga has left this wait, whatever
 * the run's outcome (a failed step is the saga's to record). Left to the timer's lease: a saga
 * still waiting for this wake (the store failed, or it was woken before its wakeAt), or still
 * running under another runner's lease (a live one finishes it; a dead one's lease ends before
 * the next claim). */
static mv_code after(mv_saga_engine *e, const mv__timer *t, mv_code run_rc, const mv_err *run_err,
                     mv_err *err) {
    mv__saga_record *rec = NULL;
    mv_code rc = mv__saga_load(e, t->ref, &rec, err);
    if (rc) return rc == MV_SAGA_NOT_FOUND ? MV_OK : rc;
    bool still = (saga_is(rec, MV_SAGA_WAITING) && rec->has_wake_at && rec->wake_at <= t->due_at) ||
                 (saga_is(rec, MV_SAGA_RUNNING) && run_rc == MV_SAGA_CONCURRENCY);
    mv__saga_record_free(rec);
    if (!still) return MV_OK;
    if (run_rc != MV_OK) return mv_err_copy(err, run_err);
    return mv_err_set(err, MV_SAGA_DELAYED, "saga %s: not due yet", t->ref);
}

static void wake_done(void *ctx, mv_code rc, json_t *record, const mv_err *err) {
    pending *p = ctx;
    json_decref(record);
    p->rc = rc;
    if (err) mv_err_copy(&p->err, err);
    p->err.code = rc;
    p->wake(p->wake_ctx);
}

static mv_code wake_start(void *ctx, const mv__timer *t, int64_t now, void (*wake)(void *),
                          void *wake_ctx, void **out, mv_err *err) {
    (void)now;
    mv_saga_engine *e = ctx;
    *out = NULL;
    const mv_saga_definition *def;
    mv_code rc = what(e, t, &def, err);
    if (rc || !def) return rc;
    mv_err run_err = {0};
    if (e->wake_env.loop && mv_saga_book_owns(def)) {
        pending *p = calloc(1, sizeof *p);
        if (!p) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        *p = (pending){.e = e, .t = *t, .wake = wake, .wake_ctx = wake_ctx};
        bool started = false;
        rc = mv_saga_book_run_async(e, def, &e->wake_env, t->ref, false, wake_done, p, &started,
                                    NULL, &run_err);
        if (started) {
            *out = p;
            return MV_OK;
        }
        free(p);
    } else {
        rc = mv_saga_resume(e, def, t->ref, NULL, NULL, &run_err);
    }
    return after(e, t, rc, &run_err, err);
}

static mv_code wake_finish(void *ctx, void *p_, mv_err *err) {
    pending *p = p_;
    mv_code rc = after(ctx, &p->t, p->rc, &p->err, err);
    free(p);
    return rc;
}

mv_code mv__saga_wake_register(struct mv__timer_engine *te, mv_saga_engine *e,
                               const mv_saga_definition *(*find)(void *ctx, const char *name),
                               void *find_ctx, const mv_saga_async *env, mv_err *err) {
    e->find = find;
    e->find_ctx = find_ctx;
    if (env) e->wake_env = *env;
    return mv__timer_engine_register_async(te, MV__SAGA_WAKE_KIND, wake_start, wake_finish, NULL, e,
                                           err);
}
