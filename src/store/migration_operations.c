/* migration_operations.c — what operating missive needs from the schema (docs/operations.md):
 *
 * - a message's last handler failure in words a client may read (code, time), beside the
 *   existing action_failure_message, so `lastFailure` is one row read;
 * - the indexes of the list routes, each ordered as its page (newest first, id as tie-break), so
 *   a page is a bounded index range scan whatever the table size or page depth. Every list is
 *   within one tenant (migration 4), so the tenant leads every index; approvals are listed per
 *   tenant (approvers) and per tenant and principal (their own). Both dialects accept the same
 *   DDL. */
#include "store/driver.h"

#define OPERATIONS_SQL                                                                             \
    "ALTER TABLE messages ADD COLUMN action_failure_code TEXT;"                                    \
    "ALTER TABLE messages ADD COLUMN action_failed_at BIGINT;"                                     \
    "CREATE INDEX sagas_list_all ON sagas (tenant_id, created_at DESC, saga_id DESC);"             \
    "CREATE INDEX sagas_list_by_state ON sagas (tenant_id, state, created_at DESC, saga_id DESC);" \
    "CREATE INDEX sagas_list_by_definition ON sagas"                                               \
    " (tenant_id, definition, created_at DESC, saga_id DESC);"                                     \
    "CREATE INDEX sagas_list_by_definition_state ON sagas"                                         \
    " (tenant_id, definition, state, created_at DESC, saga_id DESC);"                              \
    "CREATE INDEX approvals_list_by_tenant ON approvals"                                           \
    " (tenant_id, state, created_at DESC, approval_id DESC);"                                      \
    "CREATE INDEX approvals_list_by_principal ON approvals"                                        \
    " (tenant_id, principal_id, state, created_at DESC, approval_id DESC);"

const mv_migration mv_migration_operations = {
    .version = 6,
    .name = "operations",
    .sqlite_sql = OPERATIONS_SQL,
    .postgres_sql = OPERATIONS_SQL,
};
