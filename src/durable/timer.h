/* durable/timer.h — the timer engine: schedule and cancel inside the caller's transaction, and
 * fire due timers exactly once across every daemon sharing the store.
 *
 * A fire is two transactions. The claim takes up to a batch of due timers (`next_at <= now` over
 * the partial index of pending timers) with a lease: next_at moves to the lease's end and
 * lease_owner to a token of this claim. The fire then runs, for each claimed timer, its kind's
 * local function in one transaction with the conditional `pending → fired` of that timer under
 * this claim's token — so the fire and its local effect commit together or not at all, and a
 * daemon killed in between leaves the timer to its lease: once the lease ends the timer is due
 * again and any daemon claims it anew. A kind whose fire calls out (an action's handler) does so in
 * its call function, before the local transaction and outside any transaction; whatever it calls
 * keeps its own exactly-once (the message claim) since a lease that ends may run it again.
 *
 * The store knows no domain words and neither does this engine: a kind is a name and two function
 * pointers registered by a higher layer (message/, durable/saga). */
#ifndef MISSIVE_DURABLE_TIMER_H
#define MISSIVE_DURABLE_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "missive/base.h"
#include "missive/timers.h"
#include "store/db.h"

#define MV__TIMER_ID_MAX 200
#define MV__TIMER_KIND_MAX 32
#define MV__TIMER_REF_MAX 160
#define MV__TIMER_TENANT_MAX 256
/* A timer taken this often without firing (each claim's lease ended, or its fire failed) is
 * given up: state failed, reported by reconcile. */
#define MV__TIMER_MAX_CLAIMS 10

typedef struct mv__timer {
    char id[MV__TIMER_ID_MAX];
    char tenant[MV__TIMER_TENANT_MAX];
    char kind[MV__TIMER_KIND_MAX];
    char ref[MV__TIMER_REF_MAX];
    int64_t due_at;
    int claims;
} mv__timer;

/* Makes timer id pending at due_at (a new row, or an existing one re-armed whatever its state —
 * a daemon still firing the old arming then loses its claim and its local effect rolls back).
 * Runs in the caller's write transaction. On PostgreSQL a timer due within the daemons' longest
 * sleep wakes them after the commit. */
mv_code mv__timer_schedule(mv_db *db, const char *id, const char *tenant, const char *kind,
                           const char *ref, int64_t due_at, int64_t now, mv_err *err);
/* A pending timer → cancelled; *cancelled (may be NULL) says whether it was pending. */
mv_code mv__timer_cancel(mv_db *db, const char *id, int64_t now, bool *cancelled, mv_err *err);

/* A kind's fire. call (may be NULL) runs first, outside any transaction: MV_OK goes on to local,
 * an error leaves the timer to its lease (it is claimed again later). local (may be NULL) runs
 * inside the fire's transaction after this claim's conditional `pending → fired`: an error rolls
 * both back (the timer is retried after its lease). Both must be safe to run again for the same
 * timer after a crash: local's effect never committed then, call's may have. */
typedef mv_code (*mv__timer_call_fn)(void *ctx, const mv__timer *t, int64_t now, mv_err *err);
typedef mv_code (*mv__timer_local_fn)(void *ctx, mv_db *db, const mv__timer *t, int64_t now,
                                      mv_err *err);
/* A call that waits elsewhere (the outgoing-call loop) instead of on the engine's thread: start
 * begins it and returns MV_OK with *pending set, after which wake(wake_ctx) runs exactly once, on
 * any thread, when it has ended; or it ends at once — *pending NULL, its outcome returned (as a
 * call's), wake never runs. finish (on the engine's thread, after wake) returns the outcome of a
 * pending call and frees it. The engine starts every call of a claim before it waits for any. */
typedef mv_code (*mv__timer_start_fn)(void *ctx, const mv__timer *t, int64_t now,
                                      void (*wake)(void *wake_ctx), void *wake_ctx, void **pending,
                                      mv_err *err);
typedef mv_code (*mv__timer_finish_fn)(void *ctx, void *pending, mv_err *err);

/* After each fire committed (on the firing thread): lag_ms = fired − due. */
typedef void (*mv__timer_fired_fn)(void *ctx, const mv__timer *t, int64_t lag_ms);

typedef struct mv__timer_engine mv__timer_engine;

typedef struct mv__timer_engine_options {
    const mv_clock *clock; /* NULL: the wall clock */
    int64_t lease_ms;      /* 0 → 30000 */
    int batch;             /* timers per claim, 1..1000; 0 → 256 */
    int poll_ms;           /* the loop's longest sleep on SQLite; 0 → 250 */
    mv__timer_fired_fn on_fired;
    void *on_fired_ctx;
} mv__timer_engine_options;

mv_code mv__timer_engine_new(mv_store *store, const mv__timer_engine_options *opts,
                             mv__timer_engine **out, mv_err *err);
/* Stops the loop (if started) and frees. NULL-safe. */
void mv__timer_engine_free(mv__timer_engine *e);

/* Registers kind (a static string) before the engine fires anything. At most 16 kinds. */
mv_code mv__timer_engine_register(mv__timer_engine *e, const char *kind, mv__timer_call_fn call,
                                  mv__timer_local_fn local, void *ctx, mv_err *err);
/* The same with an asynchronous call (start and finish both set). */
mv_code mv__timer_engine_register_async(mv__timer_engine *e, const char *kind,
                                        mv__timer_start_fn start, mv__timer_finish_fn finish,
                                        mv__timer_local_fn local, void *ctx, mv_err *err);

typedef struct mv__timer_pass {
    int claimed;  /* timers this pass took */
    int fired;    /* committed fires */
    int failed;   /* fires that failed (left to their lease, or given up) */
    int given_up; /* of those, timers moved to failed */
} mv__timer_pass;

/* One claim of up to a batch of due timers and their fires, at the engine's clock. A timer of a
 * kind not registered here is left to its lease (another daemon may know it). */
mv_code mv__timer_engine_run(mv__timer_engine *e, mv__timer_pass *pass, mv_err *err);

/* When the next pending timer may be claimed (its next_at), or INT64_MAX when there is none. */
mv_code mv__timer_next_at(mv_store *store, int64_t *out, mv_err *err);

/* Starts the engine's own thread: it runs passes while timers are due, then sleeps until the next
 * one (at most poll_ms on SQLite; on PostgreSQL until a daemon that scheduled a nearer timer wakes
 * it, at most MV__TIMER_MAX_SLEEP_MS). One thread per engine, whatever the number of timers. */
#define MV__TIMER_MAX_SLEEP_MS 5000
mv_code mv__timer_engine_start(mv__timer_engine *e, mv_err *err);
/* Wakes the loop now (a timer was scheduled in this process). Thread-safe; NULL-safe. */
void mv__timer_engine_wake(mv__timer_engine *e);

#endif
