/* recovery.c — sagas whose runner died are driven on by whoever looks next.
 *
 * A runner holds the saga's runner lease while it works and extends it with every save, so a
 * `running` or `compensating` saga whose lease expired has no live runner: its daemon crashed,
 * lost the store, or was killed. One pass lists such sagas (oldest first, through the
 * (state, created_at) index, so the cost follows the sagas in flight, not the history) and hands
 * each to the engine, which takes the runner lease with a conditional update before touching the
 * saga: with several daemons running passes at once, each saga is driven by exactly one of them
 * and the others count it busy. A saga with no runner at all (its creator died between creating
 * and running it, or its compensation waits for a backoff) is picked up once it has been quiet
 * for stale_ms. What the engine decides is the engine's: a step left executing still goes to
 * manual review, never to a blind retry. */
#include <stdlib.h>
#include <string.h>

#include "durable/durable_internal.h"
#include "missive/operations.h"
#include "store/db.h"

static const char SQL_RECOVERABLE_SAGAS[] =
    "SELECT saga_id, definition FROM sagas WHERE state = ? AND "
    "((runner_id IS NOT NULL AND runner_expires_at <= ?) OR (runner_id IS NULL AND updated_at <= "
    "?)) "
    "ORDER BY created_at, saga_id LIMIT ?";

typedef struct {
    char id[129], definition[129];
} candidate;

typedef struct {
    const char *state;
    int64_t now, quiet_before;
    int limit, n;
    candidate *out;
} find_tx;

static mv_code find_fn(mv_db *db, void *ctx, mv_err *err) {
    find_tx *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_RECOVERABLE_SAGAS, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "siii", t->state, t->now, t->quiet_before, (int64_t)t->limit);
    int r = 0;
    t->n = 0;
    /* the statement's LIMIT stops it at t->limit rows */
    while ((r = mv_stmt_step(st, err)) == 1 && t->n < t->limit) {
        const char *id = mv_stmt_text(st, 0), *def = mv_stmt_text(st, 1);
        mv_strlcpy(t->out[t->n].id, id ? id : "", sizeof t->out[t->n].id);
        mv_strlcpy(t->out[t->n].definition, def ? def : "", sizeof t->out[t->n].definition);
        t->n++;
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

/* Drives one saga; counts the outcome. */
static void drive(mv_saga_engine *engine, const candidate *c, bool running, mv_saga_finder find,
                  void *find_ctx, mv_recovery_event on_event, void *event_ctx,
                  mv_recovery_report *report) {
    const mv_saga_definition *def = find ? find(find_ctx, c->definition) : NULL;
    const char *state = running ? "running" : "compensating";
    if (!def) {
        report->skipped++;
        mv_err e = {0};
        mv_err_set(&e, MV_SAGA_NOT_FOUND, "saga definition \"%s\" is not loaded", c->definition);
        if (on_event) on_event(event_ctx, c->id, state, "skipped", &e);
        return;
    }
    mv_err e = {0};
    mv_code rc = running ? mv_saga_resume(engine, def, c->id, NULL, NULL, &e)
                         : mv_saga_compensate(engine, def, c->id, NULL, NULL, &e);
    if (rc == MV_SAGA_CONCURRENCY) {
        report->busy++;
        return; /* another runner holds it: not ours to log */
    }
    if (running)
        report->resumed++;
    else
        report->compensated++;
    if (rc != MV_OK) report->failed++;
    if (on_event)
        on_event(event_ctx, c->id, state, running ? "resume" : "compensate",
                 rc != MV_OK ? &e : NULL);
}

mv_code mv_saga_recover(mv_saga_engine *engine, mv_store *store, int64_t now, int64_t stale_ms,
                        int limit, mv_saga_finder find, void *find_ctx, mv_recovery_event on_event,
                        void *event_ctx, mv_recovery_report *report, mv_err *err) {
    mv_recovery_report local = {0};
    if (!report) report = &local;
    memset(report, 0, sizeof *report);
    if (limit < 1 || limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "recovery limit must be between 1 and 1000");
    if (!mv_valid_timestamp(now) || stale_ms < 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "recovery needs a valid time and stale_ms");
    candidate *found = calloc((size_t)limit, sizeof *found);
    if (!found) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = MV_OK;
    for (int pass = 0; pass < 2 && rc == MV_OK; pass++) {
        find_tx t = {.state = pass == 0 ? "running" : "compensating",
                     .now = now,
                     .quiet_before = now - stale_ms,
                     .limit = limit,
                     .out = found};
        rc = mv_store_read(store, find_fn, &t, err);
        for (int i = 0; rc == MV_OK && i < t.n; i++)
            drive(engine, &found[i], pass == 0, find, find_ctx, on_event, event_ctx, report);
    }
    free(found);
    return rc;
}
