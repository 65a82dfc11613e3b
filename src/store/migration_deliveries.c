/* migration_deliveries.c — a message's channel deliveries decided after its create commits
 * (message/channels.c, "plans"): the message row carries when they are due and the template data
 * its channels render, and a partial index finds the due ones — one small entry per planned
 * message, gone when its plan is taken, whatever the number of messages beside them. */
#include "store/driver.h"

#define DELIVERIES_SQL                                                                             \
    "ALTER TABLE messages ADD COLUMN deliver_at BIGINT;"                                           \
    "ALTER TABLE messages ADD COLUMN deliver_data TEXT;"                                           \
    "CREATE INDEX messages_deliveries_due ON messages (deliver_at) WHERE deliver_at IS NOT NULL;"

const mv_migration mv_migration_deliveries = {
    .version = 26,
    .name = "deliveries",
    .sqlite_sql = DELIVERIES_SQL,
    .postgres_sql = DELIVERIES_SQL,
};
