/* migration_outbox.c — schema of the outbox tables (placeholder until that module lands). */
#include "store/driver.h"

const mv_migration mv_migration_outbox = {
    .version = 2,
    .name = "outbox",
    .sqlite_sql = "SELECT 1",
    .postgres_sql = "SELECT 1",
};
