/* store/changes_sql.c — the change log's statements per dialect (changes_sql.h). */
#include "store/changes_sql.h"

#include <stddef.h>

/* The event id is `seq` on PostgreSQL and the row id on SQLite: one statement text per dialect,
 * the same code around it. */
#define READ_CHANGES(ev)                                                                           \
    "SELECT " ev ", tenant_id, message_id, kind, viewer_id, created_at FROM stream_events "        \
    "WHERE " ev " > ? ORDER BY " ev " LIMIT ?"
static const char SQL_READ_SQLITE[] = READ_CHANGES("id");
static const char SQL_READ_PG[] = READ_CHANGES("seq");
static const char SQL_LATEST_SQLITE[] = "SELECT (SELECT COALESCE(MAX(id), 0) FROM stream_events), "
                                        "(SELECT upto FROM stream_events_pruned WHERE one = 1), 0";
static const char SQL_LATEST_PG[] =
    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM stream_events), "
    "(SELECT upto FROM stream_events_pruned WHERE one = 1), "
    "CASE WHEN EXISTS (SELECT 1 FROM stream_events WHERE seq IS NULL) THEN 1 ELSE 0 END";
#define GC_MAX(ev) "SELECT COALESCE(MAX(" ev "), 0) FROM stream_events WHERE created_at <= ?"
static const char SQL_GC_MAX_SQLITE[] = GC_MAX("id");
static const char SQL_GC_MAX_PG[] = GC_MAX("seq"); /* MAX skips the unsequenced (NULL) rows */
static const char SQL_GC_DELETE_SQLITE[] = "DELETE FROM stream_events WHERE id <= ?";
static const char SQL_GC_DELETE_PG[] = "DELETE FROM stream_events WHERE seq <= ?";
static const char SQL_UNSEQUENCED_PG[] =
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM stream_events WHERE seq IS NULL) THEN 1 ELSE 0 END";

static const char *const SQL_SQLITE[] = {
    [MV__CHANGES_READ] = SQL_READ_SQLITE,     [MV__CHANGES_LATEST] = SQL_LATEST_SQLITE,
    [MV__CHANGES_GC_MAX] = SQL_GC_MAX_SQLITE, [MV__CHANGES_GC_DELETE] = SQL_GC_DELETE_SQLITE,
    [MV__CHANGES_UNSEQUENCED] = NULL,
};
static const char *const SQL_PG[] = {
    [MV__CHANGES_READ] = SQL_READ_PG,
    [MV__CHANGES_LATEST] = SQL_LATEST_PG,
    [MV__CHANGES_GC_MAX] = SQL_GC_MAX_PG,
    [MV__CHANGES_GC_DELETE] = SQL_GC_DELETE_PG,
    [MV__CHANGES_UNSEQUENCED] = SQL_UNSEQUENCED_PG,
};

const char *mv__changes_sql(mv_db *db, mv__changes_stmt which) {
    return (mv_db_kind(db) == MV_STORE_POSTGRES ? SQL_PG : SQL_SQLITE)[which];
}

bool mv__changes_numbered_after_commit(const mv_store *store) {
    return mv_store_kind_of(store) == MV_STORE_POSTGRES;
}
