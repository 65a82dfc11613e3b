/* migration_partial_indexes.c — the state indexes of messages and message_requests become partial
 * indexes over the states their scans read (issue 13: fewer index writes per create).
 *
 * Every create inserts one `messages` row (action_state 'active') and, with an idempotency key, one
 * `message_requests` row ('pending'), and every index over those rows cost each insert a B-tree
 * write. The three state indexes of migrations 1 and 4 were read only by the reconciliation scans
 * and client-request retention, each asking for one state named as a literal; a partial index with
 * that state as its predicate holds just those rows, so:
 *  - an 'active' message enters none of them (it enters the processing index when claimed and
 *    leaves it when archived or released);
 *  - a reservation enters only the pending index, and moves to the completed one when its create
 *    commits (it was in both old indexes from its insert on).
 * The key columns after the time are the scans' keyset order, so a page is an index range read in
 * order with no sort, at any depth. Failed reservations (rare: a create that failed definitively)
 * get one too, so the metrics gauge counts every state from an index as it did from the old one.
 *
 * The same statements on both dialects: SQLite and PostgreSQL both use a partial index for a query
 * whose WHERE clause contains the index's predicate (the queries name the state literally; a bound
 * parameter would not prove it). tests/message/index_test.c checks every query's plan. */
#include "store/driver.h"

#define PARTIAL_INDEXES_SQL                                                                        \
    "DROP INDEX messages_by_action_state;"                                                         \
    "DROP INDEX message_requests_by_state;"                                                        \
    "DROP INDEX message_requests_by_completion;"                                                   \
    "CREATE INDEX messages_processing_by_lease ON messages (action_lease_expires_at, id)"          \
    " WHERE action_state = 'processing';"                                                          \
    "CREATE INDEX messages_retryable_by_update ON messages (updated_at, id)"                       \
    " WHERE action_state = 'retryable';"                                                           \
    "CREATE INDEX message_requests_pending_by_lease ON message_requests (lease_expires_at,"        \
    " client_request_owner_id, template_cd, client_request_id) WHERE state = 'pending';"           \
    "CREATE INDEX message_requests_completed_by_time ON message_requests (completed_at)"           \
    " WHERE state = 'completed';"                                                                  \
    "CREATE INDEX message_requests_failed_by_time ON message_requests (failed_at)"                 \
    " WHERE state = 'failed';"

const mv_migration mv_migration_partial_indexes = {
    .version = 11,
    .name = "partial_indexes",
    .sqlite_sql = PARTIAL_INDEXES_SQL,
    .postgres_sql = PARTIAL_INDEXES_SQL, /* the same statements: both dialects accept them */
};
