/* missive/saga_webhook.h — saga definitions from JSON files whose steps and compensations are
 * webhooks (DESIGN.md "Sagas and approvals over HTTP"), kept in a book by name.
 *
 * File format:
 *   {"name": "checkout", "capability": "orders.checkout",
 *    "retry": {"maxAttempts": 3, "backoffMs": {"initial": 100, "max": 60000}},
 *    "steps": [{"name": "reserve", "run": {"webhook": URL}, "compensate": {"webhook": URL},
 *               "idempotent": false}, …]}
 * A step call POSTs {"sagaId","step","input","results": {earlier step: result},"effectId"} with
 * Idempotency-Key: effectId — 2xx → committed (the JSON body is the result; null when empty or
 * not JSON); 4xx or connection refused → conclusively not committed (step errorCode
 * "step_rejected" / "step_not_sent"; the saga compensates); 5xx, timeout or a connection dropped
 * after sending → ambiguous (manual review). A compensation POSTs {"sagaId","step","input",
 * "result","compensationEffectId","attempt"} with Idempotency-Key: compensationEffectId — 2xx →
 * compensated, anything else → a failed attempt retried after initial·2^(n−1) capped at max.
 * A step with "idempotent": true (its far side deduplicates by Idempotency-Key) is called again
 * with the same key and body on a 5xx or a timeout, after the same backoff, up to maxAttempts
 * calls, before it counts as ambiguous; on the loop the wait is a timer, not a thread.
 * Defaults: maxAttempts 3, backoffMs {"initial": 100, "max": 60000}; capability optional. The
 * saga input is kept as each step's compensation arguments ({"input": …}).
 *
 * A book is filled once (not thread-safe while adding) and read-only afterwards: lookups and the
 * definitions it hands out may be used from any number of threads. */
#ifndef MISSIVE_SAGA_WEBHOOK_H
#define MISSIVE_SAGA_WEBHOOK_H

#include <jansson.h>

#include "missive/deliver.h"
#include "missive/durable.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_saga_book mv_saga_book;

/* A new, empty book. wh (may be NULL: defaults, unsigned) stays borrowed: it must outlive the
 * book. Free with mv_saga_book_free (NULL-safe). */
mv_saga_book *mv_saga_book_new(const mv_webhook_config *wh);
void mv_saga_book_free(mv_saga_book *book);
/* Parses and validates one definition (unknown keys, names, capability, URLs, retry values are
 * errors naming the file and key: MV_INVALID_CONFIG) and adds it (a second definition with the
 * same name is an error). */
mv_code mv_saga_book_add_json(mv_saga_book *book, const json_t *json, const char *source_name,
                              mv_err *err);
mv_code mv_saga_book_load_file(mv_saga_book *book, const char *path, mv_err *err);
/* Every *.json in name order; every bad file is reported (one per line in err->message). */
mv_code mv_saga_book_load_dir(mv_saga_book *book, const char *dir, mv_err *err);
/* The definition, or NULL. Borrowed: valid as long as the book. */
const mv_saga_definition *mv_saga_book_find(const mv_saga_book *book, const char *name);
/* How many definitions the book holds (0 for NULL). */
size_t mv_saga_book_count(const mv_saga_book *book);

/* ---- running on the outgoing-call loop -------------------------------------------------------
 * A saga of this book can run without holding a thread while its steps' calls wait: each step's
 * intent is saved, its webhook waits on the loop (mv_webhook_post_async), and the outcome is
 * recorded on a thread of the caller's choosing (env->submit), which then starts the next step
 * or compensation. Records, journal rows, effect ids (the Idempotency-Keys), statuses and the
 * crash/takeover behaviour are the synchronous engine's; in addition the runner lease is extended
 * every lease/3 by a loop timer while the saga runs, so a step slower than the lease keeps it. */
typedef struct mv_saga_async {
    mv_loop *loop; /* where the calls wait (and the lease timer runs) */
    /* Runs fn(arg) soon on a thread that may block (store writes), never on the loop's thread
     * and never inline. At most one job of a saga is outstanding at a time. */
    void (*submit)(void *submit_ctx, void (*fn)(void *arg), void *arg);
    void *submit_ctx;
    /* May be NULL. Once fired (shutdown), no further step is started: the run ends with
     * MV_DRAINING, its last commit written and its lease dropped, so recovery resumes it. A step
     * whose call the loop abandons is left executing (as after a crash mid-step); a compensation
     * call abandoned counts as a failed attempt, retried after its backoff. */
    mv_abort *stop;
} mv_saga_async;

/* The end of a run started by mv_saga_book_start_async: what mv_saga_start_in would have
 * returned (record owned by the callee, may be NULL). Runs on a submit thread. */
typedef void (*mv_saga_async_done)(void *ctx, mv_code rc, json_t *record, const mv_err *err);

/* mv_saga_start_in for def (a definition of a book), its calls waiting on env->loop. When the
 * saga is new, *started is true, the function returns MV_OK and done(done_ctx, …) runs exactly
 * once, later or before this returns. Otherwise *started is false and nothing runs: rc, *record
 * and *replayed are mv_saga_start_in's (a replay, a mismatch, or an error before the saga
 * existed). env is copied; engine and def must outlive the run. */
mv_code mv_saga_book_start_async(mv_saga_engine *engine, const mv_saga_definition *def,
                                 const mv_saga_async *env, const char *tenant, const char *saga_id,
                                 const json_t *input, mv_saga_async_done done, void *done_ctx,
                                 bool *started, json_t **record, bool *replayed, mv_err *err);
/* mv_saga_resume (compensate false) or mv_saga_compensate for def, as above: *started true when
 * the runner lease was taken (done follows), else the call's answer now. */
mv_code mv_saga_book_run_async(mv_saga_engine *engine, const mv_saga_definition *def,
                               const mv_saga_async *env, const char *saga_id, bool compensate,
                               mv_saga_async_done done, void *done_ctx, bool *started,
                               json_t **record, mv_err *err);
/* True when def came from a book (mv_saga_book_find), i.e. can run on the loop. */
bool mv_saga_book_owns(const mv_saga_definition *def);

#ifdef __cplusplus
}
#endif

#endif
