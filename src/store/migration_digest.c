/* migration_digest.c — the deliveries a digest holds (message/digest.c), and when a spent
 * action link expires (message/links.c), so retention can drop the uses no token can repeat.
 *
 * One row per message held for one user's channel in one window; window_id is the id of the
 * window's digest timer, so the fire reads its rows by primary key prefix and deletes them in the
 * same transaction that inserts the digest's outbox row. item is the delivery's listing entry as
 * JSON (messageId, templateCd, category, content, links), rendered when the message was created.
 * link_uses rows spent before this migration get an expiry a year after their use: their tokens
 * carry the real one, which no link setting makes longer than that in practice, and a row kept a
 * while too long costs only its bytes. */
#include "store/driver.h"

#define DIGEST_SQL                                                                                 \
    "CREATE TABLE digest_items ("                                                                  \
    " window_id TEXT NOT NULL,"                                                                    \
    " message_id TEXT NOT NULL,"                                                                   \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " user_id TEXT NOT NULL,"                                                                      \
    " channel TEXT NOT NULL,"                                                                      \
    " item TEXT NOT NULL,"                                                                         \
    " created_at BIGINT NOT NULL,"                                                                 \
    " PRIMARY KEY (window_id, message_id));"                                                       \
    "ALTER TABLE link_uses ADD COLUMN expires_at BIGINT;"                                          \
    "UPDATE link_uses SET expires_at = used_at + 31536000000;"                                     \
    "CREATE INDEX link_uses_by_expiry ON link_uses (expires_at);"

const mv_migration mv_migration_digest = {
    .version = 23,
    .name = "digest",
    .sqlite_sql = DIGEST_SQL,
    .postgres_sql = DIGEST_SQL, /* the same statements: both dialects accept them */
};
