/* migration_messages.c — schema of the messages tables (placeholder until that module lands). */
#include "store/driver.h"

const mv_migration mv_migration_messages = {
    .version = 1,
    .name = "messages",
    .sqlite_sql = "SELECT 1",
    .postgres_sql = "SELECT 1",
};
