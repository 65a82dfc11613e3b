/* migration_saga_wake.c — saga delays: when a waiting saga wakes.
 *
 * sagas.wake_at is NULL unless the saga is waiting before a step that carries a delay; then it is
 * the time its `saga_wake` timer (durable/saga_wake.c) resumes it, shown as the saga's "wakeAt". */
#include "store/driver.h"

#define SAGA_WAKE_SQL "ALTER TABLE sagas ADD COLUMN wake_at BIGINT;"

const mv_migration mv_migration_saga_wake = {
    .version = 22,
    .name = "saga_wake",
    .sqlite_sql = SAGA_WAKE_SQL,
    .postgres_sql = SAGA_WAKE_SQL, /* the same statement: both dialects accept it */
};
