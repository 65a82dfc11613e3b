/* migration_request_ids.c — a client request finds its messages through its own row.
 *
 * messages_by_client_request indexed every message created with a key by (tenant, owner,
 * template, client request id): a second B-tree entry per create beside message_requests' primary
 * key on the same key, both random within the owner, so each create dirtied a page of each. The
 * reservation now keeps the smallest and largest id of the messages its create wrote (ids are
 * time-ordered), set in the same transaction that completes it; the replay and the retention's
 * detach read messages by that primary-key range and match the whole key on each row. A
 * message's uniqueness per (key, item) never rested on the index alone: only the transaction that
 * inserts or completes the reservation, under its lease, writes the messages. Reservations that
 * exist get their range from the index before it is dropped (NULL when they have no messages). */
#include "store/driver.h"

#define KEY_MATCH                                                                                  \
    " FROM messages m WHERE m.tenant_id = message_requests.tenant_id"                              \
    " AND m.client_request_owner_id = message_requests.client_request_owner_id"                    \
    " AND m.template_cd = message_requests.template_cd"                                            \
    " AND m.client_request_id = message_requests.client_request_id)"

#define REQUEST_IDS_SQL                                                                            \
    "ALTER TABLE message_requests ADD COLUMN first_message_id TEXT;"                               \
    "ALTER TABLE message_requests ADD COLUMN last_message_id TEXT;"                                \
    "UPDATE message_requests SET first_message_id = (SELECT MIN(m.id)" KEY_MATCH ","               \
    " last_message_id = (SELECT MAX(m.id)" KEY_MATCH ";"                                           \
    "DROP INDEX messages_by_client_request;"

const mv_migration mv_migration_request_ids = {
    .version = 24,
    .name = "request_ids",
    .sqlite_sql = REQUEST_IDS_SQL,
    .postgres_sql = REQUEST_IDS_SQL, /* the same statements: both dialects accept them */
};
