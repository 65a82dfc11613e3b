/* migration_request_scan.c — the pending-reservation index carries the tenant (issue 13).
 *
 * A client-request reservation is keyed by (tenant, owner, template, client request id), but the
 * reconciliation scan of expired reservations paged by (lease, owner, template, id): two tenants'
 * reservations with the same owner, template, id and lease were one position, so a page ending on
 * the first skipped the second. The scan now orders by the whole key after the lease, and this
 * index is that order, so a page is still an index range read in order with no sort. */
#include "store/driver.h"

#define REQUEST_SCAN_SQL                                                                           \
    "DROP INDEX message_requests_pending_by_lease;"                                                \
    "CREATE INDEX message_requests_pending_by_lease ON message_requests (lease_expires_at,"        \
    " tenant_id, client_request_owner_id, template_cd, client_request_id)"                         \
    " WHERE state = 'pending';"

const mv_migration mv_migration_request_scan = {
    .version = 14,
    .name = "request_scan",
    .sqlite_sql = REQUEST_SCAN_SQL,
    .postgres_sql = REQUEST_SCAN_SQL, /* the same statements: both dialects accept them */
};
