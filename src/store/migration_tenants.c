/* migration_tenants.c — tenants isolate messages, client requests and sagas (DESIGN "Security
 * rules"). Every message, role row, reservation and saga carries the tenant it was created in;
 * rows that existed before belong to `default` (approvals already had a tenant).
 *
 * The visibility indexes gain tenant_id as their first column, so a page is still one bounded
 * index range per branch, now within the caller's tenant. Reservations are keyed by tenant too
 * (the same user id and key in two tenants are two requests): SQLite cannot change a primary
 * key in place, so message_requests is rebuilt with the same statements on both dialects. */
#include "store/driver.h"

#define TENANTS_SQL                                                                                \
    "ALTER TABLE messages ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';"                   \
    "ALTER TABLE message_roles ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';"              \
    "ALTER TABLE sagas ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default';"                      \
    "DROP INDEX messages_by_sender;"                                                               \
    "DROP INDEX messages_by_recipient;"                                                            \
    "DROP INDEX message_roles_by_role;"                                                            \
    "DROP INDEX messages_by_client_request;"                                                       \
    "CREATE INDEX messages_by_sender ON messages"                                                  \
    " (tenant_id, from_user, archived, created_at DESC, id DESC);"                                 \
    "CREATE INDEX messages_by_recipient ON messages"                                               \
    " (tenant_id, to_user, archived, created_at DESC, id DESC);"                                   \
    "CREATE INDEX message_roles_by_role ON message_roles"                                          \
    " (tenant_id, role, archived, created_at DESC, message_id DESC);"                              \
    "CREATE UNIQUE INDEX messages_by_client_request ON messages (tenant_id,"                       \
    " client_request_owner_id, template_cd, client_request_id, client_request_item_index)"         \
    " WHERE client_request_id IS NOT NULL;"                                                        \
    "CREATE TABLE message_requests_v4 ("                                                           \
    " tenant_id TEXT NOT NULL DEFAULT 'default',"                                                  \
    " client_request_owner_id TEXT NOT NULL,"                                                      \
    " template_cd TEXT NOT NULL,"                                                                  \
    " client_request_id TEXT NOT NULL,"                                                            \
    " state TEXT NOT NULL,"                                                                        \
    " fingerprint TEXT NOT NULL,"                                                                  \
    " item_count INTEGER,"                                                                         \
    " lease_owner_id TEXT,"                                                                        \
    " lease_expires_at BIGINT,"                                                                    \
    " completed_at BIGINT,"                                                                        \
    " failed_at BIGINT,"                                                                           \
    " failure_message TEXT,"                                                                       \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL,"                                                                 \
    " PRIMARY KEY (tenant_id, client_request_owner_id, template_cd, client_request_id));"          \
    "INSERT INTO message_requests_v4 (tenant_id, client_request_owner_id, template_cd,"            \
    " client_request_id, state, fingerprint, item_count, lease_owner_id, lease_expires_at,"        \
    " completed_at, failed_at, failure_message, created_at, updated_at)"                           \
    " SELECT 'default', client_request_owner_id, template_cd, client_request_id, state,"           \
    " fingerprint, item_count, lease_owner_id, lease_expires_at, completed_at, failed_at,"         \
    " failure_message, created_at, updated_at FROM message_requests;"                              \
    "DROP TABLE message_requests;"                                                                 \
    "ALTER TABLE message_requests_v4 RENAME TO message_requests;"                                  \
    "CREATE INDEX message_requests_by_state ON message_requests (state, lease_expires_at);"        \
    "CREATE INDEX message_requests_by_completion ON message_requests (state, completed_at);"       \
    "CREATE TABLE store_probe (id INTEGER PRIMARY KEY, filler BYTEA);"

const mv_migration mv_migration_tenants = {
    .version = 4,
    .name = "tenants",
    .sqlite_sql = TENANTS_SQL,
    .postgres_sql = TENANTS_SQL, /* the same statements: both dialects accept them */
};
