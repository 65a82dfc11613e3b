/* migration_durable.c — schema of the durable tables (placeholder until that module lands). */
#include "store/driver.h"

const mv_migration mv_migration_durable = {
    .version = 3,
    .name = "durable",
    .sqlite_sql = "SELECT 1",
    .postgres_sql = "SELECT 1",
};
