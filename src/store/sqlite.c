/* sqlite.c — the SQLite driver: WAL journal, synchronous=FULL unless configured, a busy timeout
 * for writers in other processes, and BEGIN IMMEDIATE for write transactions so a transaction
 * that will write takes the lock up front instead of failing half-way with SQLITE_BUSY. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/driver.h"

static mv_code sqlite_error(sqlite3 *db, int rc, mv_err *err) {
    mv_code code = (rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_CANTOPEN ||
                    rc == SQLITE_IOERR || rc == SQLITE_FULL)
                       ? MV_STORE_UNAVAILABLE
                       : MV_INTERNAL;
    return mv_err_set(err, code, "sqlite: %s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

static mv_code sq_exec(void *conn, const char *sql, mv_err *err) {
    int rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? MV_OK : sqlite_error(conn, rc, err);
}

/* A new database gets 1 KiB pages (SQLite's default is 4 KiB). A create inserts into a few
 * indexes whose keys land on different leaves (per sender, per recipient, per client request), and
 * a commit writes every page it dirtied to the WAL whole, then a checkpoint copies it back: the
 * bytes a create writes scale with the page size, not the ~100 bytes it adds to each page. An
 * existing database keeps the page size it was made with (SQLite cannot change it in WAL mode). */
#define NEW_PAGE_SIZE 1024
/* The WAL is checkpointed automatically when it holds this many bytes of pages (16 MiB, 16 times
 * SQLite's default at 1 KiB pages): the checkpoint runs inside a commit, and the pages every create
 * rewrites are copied back once per checkpoint however often the WAL holds them, so fewer, larger
 * checkpoints copy fewer pages per write. */
#define AUTOCHECKPOINT_BYTES (16 * 1024 * 1024)

static int set_autocheckpoint(sqlite3 *db) {
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    int page = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return sqlite3_wal_autocheckpoint(db, AUTOCHECKPOINT_BYTES / (page > 0 ? page : 4096));
}

static mv_code sq_connect(const char *url, const mv_store_options *o, void **out, mv_err *err) {
    const char *path = url + strlen("sqlite:");
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(
        path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        mv_err_set(err, MV_STORE_UNAVAILABLE, "sqlite: cannot open \"%s\": %s", path,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return MV_STORE_UNAVAILABLE;
    }
    sqlite3_busy_timeout(db, o->busy_timeout_ms);
    /* temp_store=MEMORY: the statement journals SQLite keeps for a statement inside a savepoint
     * (every write under group commit) stay in memory instead of a temporary file created,
     * written and unlinked per statement. page_size: see NEW_PAGE_SIZE (a no-op on a database
     * that has tables). */
    char pragmas[256];
    snprintf(pragmas, sizeof pragmas,
             "PRAGMA page_size=%d; PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; "
             "PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;",
             NEW_PAGE_SIZE, o->synchronous);
    /* Switching a new file to WAL takes an exclusive lock without calling the busy handler, so
     * processes opening the same new file at once see SQLITE_BUSY here: retry for the timeout. */
    for (int waited = 0; (rc = sqlite3_exec(db, pragmas, NULL, NULL, NULL)) == SQLITE_BUSY &&
                         waited < o->busy_timeout_ms;
         waited += 5)
        sqlite3_sleep(5);
    if (rc == SQLITE_OK) rc = set_autocheckpoint(db);
    mv_code code = rc == SQLITE_OK ? MV_OK : sqlite_error(db, rc, err);
    if (code != MV_OK) {
        sqlite3_close(db);
        return code;
    }
    *out = db;
    return MV_OK;
}

static void sq_disconnect(void *conn) { sqlite3_close_v2(conn); }

static mv_code sq_begin(void *conn, bool write, mv_err *err) {
    return sq_exec(conn, write ? "BEGIN IMMEDIATE" : "BEGIN", err);
}

/* db.h: a claim may say FOR UPDATE SKIP LOCKED; SQLite (one writer at a time, no row locks)
 * needs nothing there. */
static const char SKIP_LOCKED[] = " FOR UPDATE SKIP LOCKED";

static mv_code sq_prepare(void *conn, const char *sql, void **out, mv_err *err) {
    sqlite3_stmt *st;
    const char *skip = strstr(sql, SKIP_LOCKED);
    char *own = NULL;
    if (skip) {
        size_t n = strlen(sql), at = (size_t)(skip - sql), cut = sizeof SKIP_LOCKED - 1;
        if (!(own = malloc(n - cut + 1))) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        memcpy(own, sql, at);
        memcpy(own + at, skip + cut, n - at - cut + 1);
        sql = own;
    }
    int rc = sqlite3_prepare_v3(conn, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    free(own);
    if (rc != SQLITE_OK) return sqlite_error(conn, rc, err);
    *out = st;
    return MV_OK;
}

static void sq_finalize(void *st) { sqlite3_finalize(st); }

/* Statements run on this thread (a first step each): what mv__store_round_trips counts on SQLite,
 * where a transaction runs on one thread and there is no network — tests pin a path's statements.
 */
static _Thread_local uint64_t statements;
static uint64_t sq_statements(void *conn) {
    (void)conn;
    return statements;
}

static int sq_step(void *conn, void *stmt, bool first, const mv_param *params, int n,
                   int64_t *changes, mv_err *err) {
    sqlite3_stmt *st = stmt;
    if (first) {
        statements++;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        for (int i = 0; i < n; i++) {
            switch (params[i].type) {
            case MV_PARAM_NULL: sqlite3_bind_null(st, i + 1); break;
            case MV_PARAM_INT: sqlite3_bind_int64(st, i + 1, params[i].i); break;
            case MV_PARAM_TEXT:
                /* not copied: the text belongs to the mv_stmt, which resets this statement
                 * before it frees or replaces a bound value (store.c, mv_stmt_done) */
                sqlite3_bind_text(st, i + 1, params[i].s, -1, SQLITE_STATIC);
                break;
            }
        }
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) {
        *changes = sqlite3_changes64(conn);
        return 0;
    }
    sqlite_error(conn, rc, err);
    sqlite3_reset(st);
    return -1;
}

static const char *sq_text(void *st, int col) { return (const char *)sqlite3_column_text(st, col); }
static int64_t sq_int64(void *st, int col) { return sqlite3_column_int64(st, col); }
static bool sq_is_null(void *st, int col) { return sqlite3_column_type(st, col) == SQLITE_NULL; }
static int sq_column_count(void *st) { return sqlite3_column_count(st); }
static void sq_reset(void *st) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static bool sq_in_transaction(void *conn) { return !sqlite3_get_autocommit(conn); }

static bool sq_unique_violation(void *conn) {
    int code = sqlite3_extended_errcode(conn);
    return code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY;
}

const mv_driver mv_sqlite_driver = {
    .name = "sqlite",
    .connect = sq_connect,
    .disconnect = sq_disconnect,
    .exec = sq_exec,
    .begin = sq_begin,
    .prepare = sq_prepare,
    .finalize = sq_finalize,
    .step = sq_step,
    .text = sq_text,
    .int64 = sq_int64,
    .is_null = sq_is_null,
    .column_count = sq_column_count,
    .reset = sq_reset,
    .is_broken = NULL,
    .in_transaction = sq_in_transaction,
    .send = NULL, /* a deferred statement runs at once: there is no network to save */
    .unique_violation = sq_unique_violation,
    .round_trips = sq_statements,
    .backup = mv__sqlite_backup,
    .restore = mv__sqlite_restore,
};
