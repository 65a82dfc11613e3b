/* missive/timers.h — the durable timers behind expiry, reminders, escalation, snooze, scheduled
 * send and saga delays, as an operator sees them.
 *
 * Timers live in the store (schema from `missive migrate`): one row each, pending until a daemon
 * fires it — exactly once across every daemon sharing the store — or until it is cancelled. The
 * library schedules and fires them itself; this header only lists them. */
#ifndef MISSIVE_TIMERS_H
#define MISSIVE_TIMERS_H

#include <jansson.h>
#include <stdint.h>

#include "missive/error.h"
#include "missive/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a timer does when it fires ("expiry", "reminder", "escalation", "snooze", "send",
 * "saga") and where it stands ("pending", "fired", "cancelled", "failed"). */
typedef struct mv_timers_filter {
    const char *tenant_id; /* NULL: every tenant (operators); else only that tenant's */
    const char *state;     /* NULL: every state */
    const char *kind;      /* NULL: every kind */
    int limit;             /* 1..1000; 0 → 100 */
    const char *cursor;    /* from the previous page's next cursor; NULL: the first page */
    int min_claims;        /* only timers taken at least this often (2: a lease ran out); 0: any */
} mv_timers_filter;

/* A page of timers in due order (then id): *out receives a new JSON object
 * {"timers": [{"id", "tenantId", "kind", "ref", "dueAt", "state", "claims", "createdAt",
 * "firedAt"}], "nextCursor": string or null} owned by the caller (json_decref). A bad filter
 * (limit, state, kind, cursor) is MV_INVALID_ARGUMENT naming the field. */
mv_code mv_timers_list(mv_store *store, const mv_timers_filter *filter, json_t **out, mv_err *err);

/* Counts of timers by kind and state: *out receives a new JSON array of
 * {"kind", "state", "count"} (the caller owns it). */
mv_code mv_timers_count(mv_store *store, json_t **out, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
