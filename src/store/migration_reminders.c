/* migration_reminders.c — what reminders and escalation keep (docs/time.md).
 *
 * message_viewers.reminded_at: when the viewer was last reminded (viewer.remindedAt).
 * messages.escalated_at: when the last escalation step added roles (escalatedAt).
 * stream_events.kind gains 'reminded': a change told only to its viewer, as `message.reminded`.
 * SQLite cannot alter a CHECK constraint, so the log is rebuilt under the same name with its rows
 * and ids; AUTOINCREMENT's high-water mark (sqlite_sequence) is carried over so that no event id
 * is ever handed out twice, even after retention removed every row. */
#include "store/driver.h"

#define EVENT_KINDS "('created', 'updated', 'viewer', 'reminded')"
#define COLUMNS_SQL                                                                                \
    "ALTER TABLE message_viewers ADD COLUMN reminded_at BIGINT;"                                   \
    "ALTER TABLE messages ADD COLUMN escalated_at BIGINT;"

const mv_migration mv_migration_reminders = {
    .version = 19,
    .name = "reminders",
    .sqlite_sql = COLUMNS_SQL
    "CREATE TABLE stream_events_new (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " tenant_id TEXT NOT NULL,"
    " message_id TEXT NOT NULL,"
    " kind TEXT NOT NULL CHECK (kind IN " EVENT_KINDS "),"
    " viewer_id TEXT,"
    " created_at BIGINT NOT NULL);"
    "INSERT INTO stream_events_new (id, tenant_id, message_id, kind, viewer_id, created_at)"
    " SELECT id, tenant_id, message_id, kind, viewer_id, created_at FROM stream_events;"
    "DELETE FROM sqlite_sequence WHERE name = 'stream_events_new';"
    "INSERT INTO sqlite_sequence (name, seq) SELECT 'stream_events_new', COALESCE(MAX(seq), 0) FROM"
    " (SELECT seq FROM sqlite_sequence WHERE name = 'stream_events'"
    "  UNION ALL SELECT MAX(id) FROM stream_events_new"
    "  UNION ALL SELECT upto FROM stream_events_pruned) AS s;"
    "DROP TABLE stream_events;"
    "ALTER TABLE stream_events_new RENAME TO stream_events;"
    "CREATE INDEX stream_events_by_time ON stream_events (created_at);",
    .postgres_sql = COLUMNS_SQL
    "ALTER TABLE stream_events DROP CONSTRAINT stream_events_kind_check;"
    "ALTER TABLE stream_events ADD CONSTRAINT stream_events_kind_check CHECK (kind IN " EVENT_KINDS
    ");",
};
