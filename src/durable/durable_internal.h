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

/* Reconciliation keyset scans (reconcile.c): one state at a time, (updated_at, id) order. */
extern const char mv_sql_scan_effects[];
extern const char mv_sql_scan_sagas[];

#endif
