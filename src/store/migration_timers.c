/* migration_timers.c — one table for every delayed thing (expiry, reminders, escalation, snooze,
 * scheduled send, saga delays): durable time (issue 26).
 *
 * A timer is pending until it fires (fired), is cancelled, or gives up after repeated failures
 * (failed). next_at is when a daemon may next take it: its due time while nobody holds it, its
 * lease's end while a daemon fires it — so a due timer and a timer whose firing daemon died are the
 * same index range, and claiming reads `next_at <= now` over the partial index of pending timers
 * only: the cost follows the due timers, never the fired history or the far-future ones. claims
 * counts the leases taken; a pending timer claimed more than once outlived a lease (reconcile).
 * messages.expires_at is when a message expires (its expiry timer's due time), NULL for never.
 * The operator list (mv_timers_list) pages in due order over timers_by_due, its filters (tenant,
 * state, kind) applied to the rows it walks: one index write per timer rather than one per filter.
 */
#include "store/driver.h"

#define TIMERS_SQL                                                                                 \
    "CREATE TABLE timers ("                                                                        \
    " timer_id TEXT PRIMARY KEY,"                                                                  \
    " tenant_id TEXT NOT NULL DEFAULT 'default',"                                                  \
    " kind TEXT NOT NULL,"                                                                         \
    " ref TEXT NOT NULL,"                                                                          \
    " due_at BIGINT NOT NULL,"                                                                     \
    " next_at BIGINT NOT NULL,"                                                                    \
    " state TEXT NOT NULL,"                                                                        \
    " lease_owner TEXT,"                                                                           \
    " claims INTEGER NOT NULL DEFAULT 0,"                                                          \
    " created_at BIGINT NOT NULL,"                                                                 \
    " fired_at BIGINT);"                                                                           \
    "CREATE INDEX timers_pending_by_next ON timers (next_at, timer_id) WHERE state = 'pending';"   \
    "CREATE INDEX timers_by_due ON timers (due_at, timer_id);"                                     \
    "ALTER TABLE messages ADD COLUMN expires_at BIGINT;"

const mv_migration mv_migration_timers = {
    .version = 17,
    .name = "timers",
    .sqlite_sql = TIMERS_SQL,
    .postgres_sql = TIMERS_SQL, /* the same statements: both dialects accept them */
};
