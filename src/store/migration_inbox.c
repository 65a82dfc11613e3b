/* migration_inbox.c — per-viewer inbox state and the durable change log behind live streams.
 *
 * `message_viewers` holds one row per (message, user) that ever touched the message: the state is
 * per viewer, so a role-addressed message has one row per member who marked it, and absent means
 * "never seen". `stream_events` is the change log every state change writes in its own
 * transaction; on SQLite its id is the SSE event id (one writer at a time: ids become visible in
 * id order). On PostgreSQL migration 9 adds a `seq` that a sequencer assigns after the commit, and
 * that is the event id there (message/changes.c). `stream_events_pruned` remembers the highest id
 * retention removed, so a client resuming below it is told to refetch (`reset`) instead of silently
 * missing events. */
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
    "CREATE INDEX stream_events_by_time ON stream_events (created_at);" TALLIES_SQL

/* Maintained counters behind GET /messages/count (message/tally.c), filled here from the active
 * messages that exist (no viewer state exists yet). owner '' = a role-set row; role_set '' = the
 * user's own (sender or recipient) row. */
#define TALLIES_SQL                                                                                \
    "CREATE TABLE inbox_tallies ("                                                                 \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " owner TEXT NOT NULL,"                                                                        \
    " role_set TEXT NOT NULL,"                                                                     \
    " n_active BIGINT NOT NULL,"                                                                   \
    " n_dismissed BIGINT NOT NULL,"                                                                \
    " n_seen BIGINT NOT NULL,"                                                                     \
    " n_read BIGINT NOT NULL,"                                                                     \
    " PRIMARY KEY (tenant_id, owner, role_set));"                                                  \
    "INSERT INTO inbox_tallies (tenant_id, owner, role_set, n_active, n_dismissed, n_seen, "       \
    "n_read)"                                                                                      \
    " SELECT tenant_id, u, '', COUNT(*), 0, 0, 0 FROM ("                                           \
    "  SELECT tenant_id, id, from_user AS u FROM messages"                                         \
    "   WHERE archived = 0 AND from_user IS NOT NULL AND from_user <> ''"                          \
    "  UNION SELECT tenant_id, id, to_user AS u FROM messages"                                     \
    "   WHERE archived = 0 AND to_user IS NOT NULL AND to_user <> '') AS d"                        \
    " GROUP BY tenant_id, u;"                                                                      \
    "INSERT INTO inbox_tallies (tenant_id, owner, role_set, n_active, n_dismissed, n_seen, "       \
    "n_read)"                                                                                      \
    " SELECT tenant_id, u, to_roles, COUNT(*), 0, 0, 0 FROM ("                                     \
    "  SELECT tenant_id, id, from_user AS u, to_roles FROM messages"                               \
    "   WHERE archived = 0 AND from_user IS NOT NULL AND from_user <> '' AND to_roles <> '[]'"     \
    "  UNION SELECT tenant_id, id, to_user AS u, to_roles FROM messages"                           \
    "   WHERE archived = 0 AND to_user IS NOT NULL AND to_user <> '' AND to_roles <> '[]') AS d"   \
    " GROUP BY tenant_id, u, to_roles;"                                                            \
    "INSERT INTO inbox_tallies (tenant_id, owner, role_set, n_active, n_dismissed, n_seen, "       \
    "n_read)"                                                                                      \
    " SELECT tenant_id, '', to_roles, COUNT(*), 0, 0, 0 FROM messages"                             \
    " WHERE archived = 0 AND to_roles <> '[]' GROUP BY tenant_id, to_roles;"

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
