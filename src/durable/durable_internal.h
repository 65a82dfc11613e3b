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

/* Reconciliation keyset scans (reconcile.c): one state at a time, (updated_at, id) order. */
extern const char mv_sql_scan_effects[];
extern const char mv_sql_scan_sagas[];

#endif
