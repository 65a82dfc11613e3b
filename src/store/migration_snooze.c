/* migration_snooze.c — per-viewer snooze: when a viewer's snooze of a message ends.
 *
 * message_viewers.snoozed_until is NULL while the message is not snoozed for that viewer; set, the
 * message is out of that viewer's inbox and counts (the tallies count it as hidden, like a
 * dismissal: message/tally.c) until a `snooze` timer (message/snooze.c) clears it. */
#include "store/driver.h"

#define SNOOZE_SQL "ALTER TABLE message_viewers ADD COLUMN snoozed_until BIGINT;"

const mv_migration mv_migration_snooze = {
    .version = 18,
    .name = "snooze",
    .sqlite_sql = SNOOZE_SQL,
    .postgres_sql = SNOOZE_SQL, /* the same statement: both dialects accept it */
};
