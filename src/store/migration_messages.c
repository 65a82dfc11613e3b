/* migration_messages.c — messages, their role index and client-request reservations.
 *
 * One `messages` table holds active and archived messages (archiving is one conditional update,
 * never a copy). Visibility queries read three narrow indexes — by sender, by recipient, and by
 * role through `message_roles` — each ordered (archived, created_at DESC, id DESC) so a page is a
 * bounded index range scan whatever the table size or page depth. */
#include "store/driver.h"

#define MESSAGES_SQL                                                                               \
    "CREATE TABLE messages ("                                                                      \
    " id TEXT PRIMARY KEY,"                                                                        \
    " type TEXT NOT NULL,"                                                                         \
    " template_cd TEXT NOT NULL,"                                                                  \
    " from_user TEXT,"                                                                             \
    " to_user TEXT,"                                                                               \
    " to_roles TEXT NOT NULL,"                                                                     \
    " sender_content TEXT NOT NULL,"                                                               \
    " receiver_content TEXT NOT NULL,"                                                             \
    " documents TEXT NOT NULL,"                                                                    \
    " payment_session TEXT,"                                                                       \
    " payment_cd TEXT NOT NULL,"                                                                   \
    " payload TEXT NOT NULL,"                                                                      \
    " display TEXT,"                                                                               \
    " client_request_id TEXT,"                                                                     \
    " client_request_owner_id TEXT,"                                                               \
    " client_request_item_index INTEGER,"                                                          \
    " action_state TEXT NOT NULL,"                                                                 \
    " archived INTEGER NOT NULL,"                                                                  \
    " action_cd TEXT,"                                                                             \
    " action_attempt_id TEXT,"                                                                     \
    " action_claimed_by TEXT,"                                                                     \
    " action_claimed_at BIGINT,"                                                                   \
    " action_lease_expires_at BIGINT,"                                                             \
    " action_failure_message TEXT,"                                                                \
    " action_approval_id TEXT,"                                                                    \
    " archived_by TEXT,"                                                                           \
    " archived_at BIGINT,"                                                                         \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL);"                                                                \
    "CREATE INDEX messages_by_sender ON messages (from_user, archived, created_at DESC, id DESC);" \
    "CREATE INDEX messages_by_recipient ON messages (to_user, archived, created_at DESC, id "      \
    "DESC);"                                                                                       \
    "CREATE INDEX messages_by_action_state ON messages (action_state, action_lease_expires_at);"   \
    "CREATE UNIQUE INDEX messages_by_attempt ON messages (action_attempt_id)"                      \
    " WHERE action_attempt_id IS NOT NULL;"                                                        \
    "CREATE UNIQUE INDEX messages_by_client_request ON messages"                                   \
    " (client_request_owner_id, template_cd, client_request_id, client_request_item_index)"        \
    " WHERE client_request_id IS NOT NULL;"                                                        \
    "CREATE TABLE message_roles ("                                                                 \
    " message_id TEXT NOT NULL REFERENCES messages (id),"                                          \
    " role TEXT NOT NULL,"                                                                         \
    " archived INTEGER NOT NULL,"                                                                  \
    " created_at BIGINT NOT NULL,"                                                                 \
    " PRIMARY KEY (message_id, role));"                                                            \
    "CREATE INDEX message_roles_by_role ON message_roles"                                          \
    " (role, archived, created_at DESC, message_id DESC);"                                         \
    "CREATE TABLE message_requests ("                                                              \
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
    " PRIMARY KEY (client_request_owner_id, template_cd, client_request_id));"                     \
    "CREATE INDEX message_requests_by_state ON message_requests (state, lease_expires_at);"        \
    "CREATE INDEX message_requests_by_completion ON message_requests (state, completed_at);"

const mv_migration mv_migration_messages = {
    .version = 1,
    .name = "messages",
    .sqlite_sql = MESSAGES_SQL,
    .postgres_sql = MESSAGES_SQL, /* the same text: no dialect-specific types are used */
};
