/* migration_changes.c — the change log's event id becomes a sequence number assigned after commit
 * (PostgreSQL only; message/changes.c explains why).
 *
 * `stream_events.seq` is the public event id. Writers insert with seq NULL and take no lock; a
 * reader's sequencer step numbers committed rows later, one sequencer at a time. Rows that exist
 * when this migration runs keep their id as their event id (seq = id), so a client resuming with
 * an id it received before the upgrade loses nothing; every later seq is above them. The unique
 * index is what readers page by (and it refuses a duplicate number should the sequencer ever hand
 * one out twice). A B-tree also indexes NULLs, so the same index finds the unsequenced rows (the
 * planner uses it for `seq IS NULL`); a partial index for them would only cost every insert one
 * more index entry.
 *
 * SQLite needs none of it: one writer at a time means ids already become visible in id order, so
 * the id stays the event id there and this migration only records its version. */
#include "store/driver.h"

const mv_migration mv_migration_changes = {
    .version = 9,
    .name = "changes",
    .sqlite_sql = "SELECT 1",
    .postgres_sql = "ALTER TABLE stream_events ADD COLUMN seq BIGINT;"
                    "UPDATE stream_events SET seq = id;"
                    "CREATE UNIQUE INDEX stream_events_by_seq ON stream_events (seq);",
};
