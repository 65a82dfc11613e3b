/* missive/reconcile.h — reconciliation scans over the message service's own records: actions
 * whose attempt was abandoned (a processing lease that expired, a retryable attempt nobody
 * retried) and idempotent creates whose reservation lease expired while pending. The durable
 * primitives' scans (effects, sagas) are in durable.h; `missive reconcile` prints both.
 *
 * Like those, each call reads one keyset page over an index that holds only the states in doubt,
 * so the cost does not grow with the retained history or the page depth. */
#ifndef MISSIVE_RECONCILE_H
#define MISSIVE_RECONCILE_H

#include <jansson.h>
#include <stdint.h>

#include "missive/error.h"
#include "missive/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_reconcile_scan {
    int64_t now;          /* leases that expired before now are reported */
    int64_t stale_before; /* actions: retryable messages updated at or before this */
    const char *cursor;   /* NULL = first page; else the previous page's next_cursor */
    int limit;            /* 0 → 100; 1..1000 */
} mv_reconcile_scan;

typedef struct mv_reconcile_results {
    json_t *findings;  /* array of finding objects (owned) */
    char *next_cursor; /* malloc'd; NULL on the last page */
} mv_reconcile_results;

/* Frees the members and zeroes them. NULL-safe. */
void mv_reconcile_results_clear(mv_reconcile_results *r);

/* Messages in `processing` whose action lease expired before scan->now, then `retryable` ones
 * updated at or before scan->stale_before, over the (action_state, action_lease_expires_at)
 * index: {"messageId","templateCd","actionState","actionCd","actionAttemptId",
 * "leaseExpiresAt"?,"updatedAt","reason":"lease-expired"|"stale-retryable"}.
 * Errors: MV_INVALID_ARGUMENT "reconciliation limit must be between 1 and 1000",
 * "invalid reconciliation cursor"; store errors. */
mv_code mv_reconcile_actions_page(mv_store *store, const mv_reconcile_scan *scan,
                                  mv_reconcile_results *out, mv_err *err);

/* Client-request reservations still `pending` whose lease expired before scan->now (the creator
 * died or gave up; the next retry takes the reservation over), over the (state,
 * lease_expires_at) index: {"ownerId","templateCd","clientRequestId","state":"pending",
 * "leaseExpiresAt","updatedAt","reason":"lease-expired"}. Same errors. */
mv_code mv_reconcile_requests_page(mv_store *store, const mv_reconcile_scan *scan,
                                   mv_reconcile_results *out, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
