/* migration_inbox.c — per-viewer inbox state and the durable change log behind live streams.
 *
 * `message_viewers` holds one row per (message, user) that ever touched the message: the state is
 * per viewer, so a role-addressed message has one row per member who marked it, and absent means
 * "never seen". `stream_events` is the change log every state change writes in its own
 * transaction; its id is the SSE event id. Ids must become visible in id order: SQLite has one
 * writer at a time, PostgreSQL writers take a transaction-scoped advisory lock before inserting
 * (message/changes.c). `stream_events_pruned` remembers the highest id retention removed, so a
 * client resuming below it is told to refetch (`reset`) instead of silently missing events. */
#include "store/driver.h"

#define VIEWERS_SQL                                                                                \
    "CREATE TABLE message_viewers ("                                                               \
    " message_id TEXT NOT NULL,"                                                                   \
    " viewer_id TEXT NOT NULL,"                                                                    \
    " viewer_tenant TEXT NOT NULL,"                                                                \
    " seen_at BIGINT,"                                                                             \
    " read_at BIGINT,"                                                                             \
    " dismissed_at BIGINT,"                                                                        \
    " viewer_changed_at BIGINT NOT NULL,"                                                          \
    " PRIMARY KEY (message_id, viewer_id));"                                                       \
    "CREATE TABLE stream_events_pruned (one INTEGER PRIMARY KEY, upto BIGINT NOT NULL);"           \
    "INSERT INTO stream_events_pruned (one, upto) VALUES (1, 0);"                                  \
    "CREATE INDEX stream_events_by_time ON stream_events (created_at);"

#define EVENTS_COLUMNS                                                                             \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " message_id TEXT NOT NULL,"                                                                   \
    " kind TEXT NOT NULL CHECK (kind IN ('created', 'updated', 'viewer')),"                        \
    " viewer_id TEXT,"                                                                             \
    " created_at BIGINT NOT NULL);"

const mv_migration mv_migration_inbox = {
    .version = 5,
    .name = "inbox",
    /* AUTOINCREMENT: an id is never reused, even after retention removed every row. */
    .sqlite_sql = "CREATE TABLE stream_events (id INTEGER PRIMARY KEY AUTOINCREMENT," EVENTS_COLUMNS
        VIEWERS_SQL,
    .postgres_sql =
        "CREATE TABLE stream_events (id BIGSERIAL PRIMARY KEY," EVENTS_COLUMNS VIEWERS_SQL,
};
