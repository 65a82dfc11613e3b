/* migration_send_at.c — scheduled send: when a message scheduled for later is sent.
 *
 * messages.send_at is NULL for a message sent at once. Set, the message was created with a sendAt:
 * until then it is stored scheduled (archived 2, out of every list but its sender's scheduled one)
 * and a `send` timer (message/schedule.c) makes it active at send_at. */
#include "store/driver.h"

#define SEND_AT_SQL "ALTER TABLE messages ADD COLUMN send_at BIGINT;"

const mv_migration mv_migration_send_at = {
    .version = 20,
    .name = "send_at",
    .sqlite_sql = SEND_AT_SQL,
    .postgres_sql = SEND_AT_SQL, /* the same statement: both dialects accept it */
};
