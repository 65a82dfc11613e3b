/* store/changes_sql.h — the change log's statements (`stream_events`) in the store's dialect.
 *
 * The log's event id is the row id where the store commits one writer at a time (SQLite), and
 * `seq`, numbered after commit by a sequencer, where commits land in any order (PostgreSQL:
 * message/changes.c says why). The code that reads and trims the log is the same for both; only
 * the column, and whether a sequencer has anything to do, differ, and the store answers both. */
#ifndef MISSIVE_STORE_CHANGES_SQL_H
#define MISSIVE_STORE_CHANGES_SQL_H

#include <stdbool.h>

#include "missive/store.h"
#include "store/db.h"

typedef enum {
    /* (after, limit) → rows of (event id, tenant_id, message_id, kind, viewer_id, created_at) */
    MV__CHANGES_READ,
    /* () → one row: the newest event id, retention's watermark, 1 when rows await a number */
    MV__CHANGES_LATEST,
    /* (created_at) → one row: the newest event id of a change at or before it (0 when none) */
    MV__CHANGES_GC_MAX,
    /* (event id) → removes the changes up to it */
    MV__CHANGES_GC_DELETE,
    /* () → one row: 1 when committed changes await a number; NULL where none ever do */
    MV__CHANGES_UNSEQUENCED
} mv__changes_stmt;

/* The statement on db's store, a static constant (db.h: the statement cache's key), or NULL when
 * the store has no such statement (MV__CHANGES_UNSEQUENCED where event ids are row ids). */
const char *mv__changes_sql(mv_db *db, mv__changes_stmt which);

/* True when the store's change ids are numbered after commit (a sequencer must run before readers
 * see new changes); false when a row's id is its event id. */
bool mv__changes_numbered_after_commit(const mv_store *store);

#endif
