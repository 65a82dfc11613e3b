/* missive/defaults.h — every default value in one place.
 *
 * The library applies these when an option is 0 (or absent) and the daemon's config starts from
 * the same values, so `missived` and an embedding program behave alike unless configured
 * otherwise. Times are milliseconds. */
#ifndef MISSIVE_DEFAULTS_H
#define MISSIVE_DEFAULTS_H

#ifdef __cplusplus
extern "C" {
#endif

/* store (missive/store.h) */
#define MV_DEFAULT_STATEMENT_TIMEOUT_MS 30000 /* PostgreSQL, per statement */
#define MV_DEFAULT_BUSY_TIMEOUT_MS 10000      /* SQLite, waiting for another process's writer */

/* messages (missive/message.h) */
#define MV_DEFAULT_LIST_LIMIT 50
#define MV_DEFAULT_MAX_LIST_LIMIT 100
#define MV_DEFAULT_CLIENT_REQUEST_LEASE_MS 30000
#define MV_DEFAULT_CLIENT_REQUEST_WAIT_MS 5000
#define MV_DEFAULT_CLIENT_REQUEST_POLL_MS 200
#define MV_DEFAULT_ACTION_LEASE_MS 30000

/* delivery (missive/deliver.h) */
#define MV_DEFAULT_WEBHOOK_CONNECT_TIMEOUT_MS 2000
#define MV_DEFAULT_WEBHOOK_TIMEOUT_MS 10000
#define MV_DEFAULT_WEBHOOK_MAX_RESPONSE_BYTES 1048576
#define MV_DEFAULT_OUTBOX_POLL_MS 1000
#define MV_DEFAULT_OUTBOX_MAX_ATTEMPTS 10
#define MV_DEFAULT_OUTBOX_BACKOFF_MS 1000       /* doubles per attempt … */
#define MV_DEFAULT_OUTBOX_BACKOFF_CAP_MS 300000 /* … up to this */
#define MV_DEFAULT_OUTBOX_LEASE_MS 60000
#define MV_DEFAULT_TIMER_POLL_MS 250
#define MV_DEFAULT_TIMER_LEASE_MS 30000

/* durable execution (missive/durable.h, missive/saga_webhook.h) */
#define MV_DEFAULT_APPROVAL_TTL_MS 900000
#define MV_DEFAULT_SAGA_MAX_ATTEMPTS 3
#define MV_DEFAULT_SAGA_BACKOFF_INITIAL_MS 100
#define MV_DEFAULT_SAGA_BACKOFF_MAX_MS 60000
#define MV_DEFAULT_SAGA_RUNNER_LEASE_MS 30000
#define MV_DEFAULT_RECONCILE_LIMIT 100
#define MV_DEFAULT_RECONCILE_STALE_MS 60000

/* the daemon (missived) */
#define MV_DEFAULT_THREADS 64
#define MV_DEFAULT_MAX_CONNECTIONS 10000
#define MV_DEFAULT_MAX_CONNECTIONS_PER_IP 512
#define MV_DEFAULT_CONNECTION_TIMEOUT_MS 30000 /* an idle HTTP connection */
#define MV_DEFAULT_HEADER_TIMEOUT_MS 10000     /* a request's headers */
#define MV_DEFAULT_SHUTDOWN_TIMEOUT_MS 30000

#ifdef __cplusplus
}
#endif

#endif
