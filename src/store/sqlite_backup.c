/* sqlite_backup.c — copying a whole SQLite store to a file and back, with SQLite's online backup
 * API (sqlite3_backup_*).
 *
 * A backup copies every page in one step, inside one read transaction of the source: in WAL mode
 * that is a snapshot, so the copy is consistent as of one moment and writers (this process's and
 * others') carry on meanwhile. The copy is written under a temporary name in the target's
 * directory, switched to a self-contained rollback journal, synced and renamed, so a backup file
 * that exists is complete. A restore first opens the file read-only and checks it is a missive
 * store of a schema version this binary knows, and only then copies it over the store. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/driver.h"

static const char SQL_SCHEMA_VERSION[] = "SELECT COALESCE(MAX(version), 0) FROM schema_version";
static const char SQL_HAS_MESSAGES[] =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'messages'";
static const char SQL_PAGE_SIZE[] = "PRAGMA page_size";
static const char SQL_SELF_CONTAINED[] = "PRAGMA journal_mode=DELETE";

#define BUSY_RETRY_MS 5
#define BUSY_LIMIT_MS 30000

/* Copies src into dest in one step, waiting out a writer that holds the destination (or a source
 * being recovered) for up to BUSY_LIMIT_MS. */
static int copy_all(sqlite3 *dest, sqlite3 *src) {
    sqlite3_backup *b = sqlite3_backup_init(dest, "main", src, "main");
    if (!b) return sqlite3_errcode(dest);
    int rc;
    for (int waited = 0; (rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED;
         waited += BUSY_RETRY_MS) {
        if (waited >= BUSY_LIMIT_MS) break;
        sqlite3_sleep(BUSY_RETRY_MS);
    }
    int fin = sqlite3_backup_finish(b);
    return rc == SQLITE_DONE ? fin : rc;
}

static bool sync_path(const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

/* The directory part of path ("." when none) into buf. */
static void dir_of(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

mv_code mv__sqlite_backup(void *conn, const char *path, mv_err *err) {
    if (access(path, F_OK) == 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%s already exists; a backup never overwrites",
                          path);
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.partial-%d", path, (int)getpid()) >= (int)sizeof tmp)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "the backup path is too long");
    sqlite3 *dest = NULL;
    int rc = sqlite3_open_v2(tmp, &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK) rc = copy_all(dest, conn);
    if (rc == SQLITE_OK) rc = sqlite3_exec(dest, SQL_SELF_CONTAINED, NULL, NULL, NULL);
    mv_code code = MV_OK;
    if (rc != SQLITE_OK)
        code = mv_err_set(err, MV_IO, "cannot write the backup %s: %s", path,
                          dest ? sqlite3_errmsg(dest) : sqlite3_errstr(rc));
    sqlite3_close(dest);
    dir_of(path, dir, sizeof dir);
    if (code == MV_OK && (!sync_path(tmp, O_RDONLY) || rename(tmp, path) != 0 ||
                          !sync_path(dir, O_RDONLY | O_DIRECTORY)))
        code = mv_err_set(err, MV_IO, "cannot write the backup %s: %s", path, strerror(errno));
    if (code != MV_OK) unlink(tmp);
    return code;
}

/* One integer from sql on db; false when the statement does not run (not a missive store). */
static bool query_int(sqlite3 *db, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    bool ok =
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
    if (ok) *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return ok;
}

/* Switches db to the journal mode named (lower case); false when it stays in another. */
static bool journal_mode(sqlite3 *db, const char *mode) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", mode);
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW &&
              strcmp((const char *)sqlite3_column_text(st, 0), mode) == 0;
    sqlite3_finalize(st);
    return ok;
}

/* Copies src over the store's database conn. A WAL database cannot take a copy of another page
 * size (a store made before new stores got 1 KiB pages, or a backup of one), so then the store
 * leaves WAL for the copy, which gives it the file's page size, and returns to WAL after: that
 * needs no other connection to the store (a running daemon), and says so when there is one. */
static mv_code copy_into_store(sqlite3 *conn, sqlite3 *src, const char *path, mv_err *err) {
    int64_t dest_page = 0, src_page = 0;
    bool same = query_int(conn, SQL_PAGE_SIZE, &dest_page) &&
                query_int(src, SQL_PAGE_SIZE, &src_page) && dest_page == src_page;
    if (!same && !journal_mode(conn, "delete"))
        return mv_err_set(err, MV_STORE_UNAVAILABLE,
                          "cannot restore %s (page size %lld) over a store of page size %lld while "
                          "another connection has the store open; stop the daemons using it",
                          path, (long long)src_page, (long long)dest_page);
    int rc = copy_all(conn, src);
    if (!same && !journal_mode(conn, "wal") && rc == SQLITE_OK) rc = SQLITE_ERROR;
    if (rc != SQLITE_OK)
        return mv_err_set(err, MV_IO, "cannot restore %s: %s", path, sqlite3_errstr(rc));
    return MV_OK;
}

mv_code mv__sqlite_restore(void *conn, const char *path, int max_version, mv_err *err) {
    if (access(path, R_OK) != 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "cannot read %s: %s", path, strerror(errno));
    sqlite3 *src = NULL;
    int rc = sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY, NULL);
    int64_t version = 0, messages = 0;
    mv_code code = MV_OK;
    if (rc != SQLITE_OK || !query_int(src, SQL_SCHEMA_VERSION, &version) ||
        !query_int(src, SQL_HAS_MESSAGES, &messages) || version < 1 || messages != 1)
        code = mv_err_set(err, MV_INVALID_ARGUMENT, "%s is not a missive store (no schema version)",
                          path);
    else if (version > max_version)
        code = mv_err_set(err, MV_INVALID_ARGUMENT,
                          "%s holds schema version %lld; this missive knows versions 1 to %d", path,
                          (long long)version, max_version);
    if (code == MV_OK) code = copy_into_store(conn, src, path, err);
    sqlite3_close(src);
    return code;
}
