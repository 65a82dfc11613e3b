/* durable_internal.h — helpers shared by the durable modules (journal, effect scope, approvals,
 * sagas, reconciliation): timestamp rules, lifecycle event emission, and the reconciliation scan
 * statements (exposed so a test can check their query plans). */
#ifndef MISSIVE_DURABLE_INTERNAL_H
#define MISSIVE_DURABLE_INTERNAL_H

#include "missive/durable.h"

/* Timestamps are integers a JSON number carries exactly (2^53 − 1), like the reference's safe
 * integers. */
#define MV_MAX_SAFE_INT INT64_C(9007199254740991)

static inline bool mv_valid_timestamp(int64_t t) { return t >= 0 && t <= MV_MAX_SAFE_INT; }

/* Reads the clock; an invalid value fails with MV_INVALID_ARGUMENT
 * "<label> must be a non-negative safe integer timestamp". */
mv_code mv_durable_now(const mv_clock *clock, const char *label, int64_t *out, mv_err *err);
/* Waits up to ms (monotonic) on the calling thread, returning at once when abort (may be NULL) is
 * or becomes set: a condition that mv_abort_fire broadcasts, no polling. */
void mv__abort_wait(const mv_abort *abort, int64_t ms);
/* t + d, failing like mv_durable_now with label when the sum is not a valid timestamp. */
mv_code mv_durable_add(int64_t t, int64_t d, const char *label, int64_t *out, mv_err *err);

/* Emits ev to every observer with a function, after validating it (invalid events are dropped,
 * as the reference's emitEffectLifecycle). */
void mv_effect_emit(const mv_effect_observer *observers, size_t n, const mv_effect_event *ev);

/* ---- the journal inside another module's write transaction (journal.c) --------------------
 * A saga step is an effect: its journal row moves in the same transaction as the saga record,
 * so the two never disagree after a crash. */
#define MV__EFFECT_MASK(state) (1u << (unsigned)(state))
#define MV__EFFECT_ANY 0x1fu

/* Inserts the effect in admission (in is trusted: callers validate it). */
mv_code mv__journal_insert_tx(mv_db *db, const mv_effect_intent *in, int64_t now, mv_err *err);
/* Moves effect id from any state in from_mask to `to` (error_code may be NULL: kept). A missing
 * row is MV_EFFECT_TRANSITION, or a no-op when missing_ok. */
mv_code mv__journal_move_tx(mv_db *db, const char *id, unsigned from_mask, mv_effect_state to,
                            const char *error_code, int64_t now, bool missing_ok, mv_err *err);

/* The intent and executing transitions in one: the row is inserted already executing (version 2,
 * as the two transitions would leave it). */
mv_code mv__journal_insert_executing_tx(mv_db *db, const mv_effect_intent *in, int64_t now,
                                        mv_err *err);
/* mv__journal_move_tx for a caller that knows the row's state: one conditional UPDATE from
 * `expected`; only when that changes nothing, the full transition (read, check from_mask, update).
 */
mv_code mv__journal_move_from_tx(mv_db *db, const char *id, mv_effect_state expected,
                                 unsigned from_mask, mv_effect_state to, const char *error_code,
                                 int64_t now, bool missing_ok, mv_err *err);

/* Reconciliation keyset scans (reconcile.c): one state at a time, effects in (updated_at, id)
 * order, sagas in (created_at, id) order. */
extern const char mv_sql_scan_effects[];
extern const char mv_sql_scan_sagas[];

/* ---- a saga run in halves (saga.c), for a driver whose calls wait elsewhere ------------------
 * The run of mv_saga_start_in / mv_saga_resume / mv_saga_compensate with the executor and
 * compensator calls cut out: the driver makes each call itself and hands its outcome back, on any
 * thread (one at a time). The saves, records, journal rows, effect ids and lifecycle events are
 * the engine's own. Every runner ends with mv__saga_runner_finish. */
typedef struct mv__saga_runner mv__saga_runner;

/* A compensation to call: comp->fn's arguments, valid until the next call on the runner. */
typedef struct mv__saga_comp_call {
    const mv_saga_compensator *comp;
    const json_t *args;
    mv_saga_compensation_call call;
} mv__saga_comp_call;

/* As mv_saga_start_in (abort NULL): a new saga gives *out (the lease held, nothing run yet); an
 * existing id gives *out NULL and mv_saga_start_in's answer (replay or mismatch). */
mv_code mv__saga_runner_start(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                              const char *saga_id, const json_t *input, mv__saga_runner **out,
                              json_t **record, bool *replayed, mv_err *err);
/* As mv_saga_resume / mv_saga_compensate up to the run: takes the runner lease and loads. On
 * failure *out is NULL and *record what those calls would give. */
mv_code mv__saga_runner_take(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                             mv__saga_runner **out, json_t **record, mv_err *err);
const char *mv__saga_runner_id(const mv__saga_runner *r);
/* running, or waiting (a resume goes on with the steps: a wait that is over ends there) */
bool mv__saga_runner_running(const mv__saga_runner *r);
bool mv__saga_runner_compensating(const mv__saga_runner *r);
json_t *mv__saga_runner_input(const mv__saga_runner *r);   /* a new reference */
json_t *mv__saga_runner_results(const mv__saga_runner *r); /* mv_saga_ctx_results */
int64_t mv__saga_runner_lease_ms(const mv__saga_runner *r);
/* Extends the runner lease (any thread, also while a step is being saved); false once the runner
 * no longer holds it. */
bool mv__saga_runner_extend(const mv__saga_runner *r);
/* mv_saga_delay for the step about to begin: MV_SAGA_DELAYED when the saga is (still) waiting,
 * saved so — the driver then ends the run with mv__saga_runner_finish(r, MV_OK, ...). */
mv_code mv__saga_runner_delay(mv__saga_runner *r, const char *name, int64_t delay_ms, mv_err *err);
/* mv_saga_step up to the executor. MV_OK with *effect_id set: make the call (its idempotency key)
 * and give its outcome to step_end; MV_OK with *effect_id NULL: the step was already committed.
 * Any error is mv_saga_step's. */
mv_code mv__saga_runner_step_begin(mv__saga_runner *r, const char *name,
                                   const json_t *compensation_args, const char **effect_id,
                                   mv_err *err);
/* The call's outcome (what the executor would have returned; result owned, error_code as in
 * mv_saga_step_call); returns what mv_saga_step returns. */
mv_code mv__saga_runner_step_end(mv__saga_runner *r, mv_code call_rc, json_t *result,
                                 const char *error_code, const mv_err *call_err, mv_err *err);
/* After the steps (run_rc: the run's result, run_err its error): completes the saga, or starts
 * compensating. *call set: a compensation to make, then comp_end; else the run's result. */
mv_code mv__saga_runner_ran(mv__saga_runner *r, mv_code run_rc, const mv_err *run_err,
                            const mv__saga_comp_call **call, mv_err *err);
/* mv_saga_compensate's run, in the same halves as ran. */
mv_code mv__saga_runner_compensate(mv__saga_runner *r, const mv__saga_comp_call **call,
                                   mv_err *err);
mv_code mv__saga_runner_comp_end(mv__saga_runner *r, mv_code call_rc, const mv_err *call_err,
                                 const mv__saga_comp_call **call, mv_err *err);
/* Ends the run (a pending commit written, the lease dropped), fills *record (may be NULL) as the
 * engine's calls do, frees r (NULL-safe) and returns rc. */
mv_code mv__saga_runner_finish(mv__saga_runner *r, mv_code rc, json_t **record);

/* ---- saga delays (saga_wake.c) ----------------------------------------------------------------
 * Registers the `saga_wake` timer kind on a timer engine: a saga waiting before a delayed step
 * (mv_saga_delay) is resumed by whichever process claims its timer, with the definition find(ctx,
 * name) gives — a book's definition on env's loop when env is given (its calls wait there, no
 * thread per saga), any other through mv_saga_resume. The resume runs in the timer's call,
 * outside any transaction. A saga still in that wait afterwards (another runner held it, the
 * store failed, the definition is not loaded here) leaves the timer to its lease, so a later
 * claim, here or in another process, tries again. */
struct mv__timer_engine;
struct mv_saga_async;
mv_code mv__saga_wake_register(struct mv__timer_engine *te, mv_saga_engine *e,
                               const mv_saga_definition *(*find)(void *ctx, const char *name),
                               void *find_ctx, const struct mv_saga_async *env, mv_err *err);

#endif
