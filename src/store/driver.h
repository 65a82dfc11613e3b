/* store/driver.h — what a database driver provides to the generic SQL layer (store/store.c).
 * The generic layer owns connection pooling, statement caching, parameter storage and the
 * transaction protocol; a driver only talks to its database. */
#ifndef MISSIVE_STORE_DRIVER_H
#define MISSIVE_STORE_DRIVER_H

#include <pthread.h>

#include "store/db.h"

typedef struct mv_param {
    enum { MV_PARAM_NULL, MV_PARAM_TEXT, MV_PARAM_INT } type;
    int64_t i;
    char *s; /* owned */
} mv_param;

typedef struct mv_driver {
    const char *name;
    mv_code (*connect)(const char *url, const mv_store_options *opts, void **conn, mv_err *err);
    void (*disconnect)(void *conn);
    /* Several statements, no parameters. */
    mv_code (*exec)(void *conn, const char *sql, mv_err *err);
    /* BEGIN for reads; a write-intent BEGIN (SQLite: IMMEDIATE) for writes. */
    mv_code (*begin)(void *conn, bool write, mv_err *err);
    mv_code (*prepare)(void *conn, const char *sql, void **stmt, mv_err *err);
    void (*finalize)(void *stmt);
    /* first = true on the first step after a reset: bind params and execute. Returns 1 row,
     * 0 done, -1 error. *changes receives the affected row count when the statement finishes. */
    int (*step)(void *conn, void *stmt, bool first, const mv_param *params, int nparams,
                int64_t *changes, mv_err *err);
    const char *(*text)(void *stmt, int col);
    int64_t (*int64)(void *stmt, int col);
    bool (*is_null)(void *stmt, int col);
    int (*column_count)(void *stmt);
    void (*reset)(void *stmt);
    /* Queues a statement whose result nobody reads (db.h: mv_db_execf_later); its error surfaces
     * at the next step or exec of the connection. on_unique: the code of a unique violation
     * (MV_OK: the usual mapping). NULL: the generic layer steps it at once. */
    mv_code (*send)(void *conn, void *stmt, const mv_param *params, int nparams, mv_code on_unique,
                    mv_err *err);
    /* Sends sql (text, no parameters) right after the COMMIT of the open transaction, in the same
     * flush, once per transaction; nothing when it rolls back. Its failure does not fail the
     * commit. NULL: the generic layer runs it at once. */
    mv_code (*after_commit)(void *conn, const char *sql, mv_err *err);
    /* True when the last failed step was a unique violation (for drivers without send). */
    bool (*unique_violation)(void *conn);
    /* Round trips made on this connection so far (SQLite: statements run on this thread; NULL: none
     * are counted). */
    uint64_t (*round_trips)(void *conn);
    /* True when the connection is unusable and must be reopened (PostgreSQL after a drop). */
    bool (*is_broken)(void *conn);
    /* True while a transaction is open (SQLite rolls a transaction back by itself on some errors:
     * a full disk, an I/O error). NULL: assume it is. */
    bool (*in_transaction)(void *conn);
    /* The whole database into a new file at path, consistent as of one moment while others
     * write (outside any transaction). NULL: the database has its own tools (PostgreSQL). */
    mv_code (*backup)(void *conn, const char *path, mv_err *err);
    /* Replaces the database with the file at path, which must be a store whose schema version
     * is 1..max_version (outside any transaction). NULL as for backup. */
    mv_code (*restore)(void *conn, const char *path, int max_version, mv_err *err);
} mv_driver;

/* sqlite_backup.c */
mv_code mv__sqlite_backup(void *conn, const char *path, mv_err *err);
mv_code mv__sqlite_restore(void *conn, const char *path, int max_version, mv_err *err);

extern const mv_driver mv_sqlite_driver;
extern const mv_driver mv_pg_driver;

#define MV_STMT_CACHE_BUCKETS 64

struct mv_stmt {
    mv_db *db;
    const char *sql; /* cache key */
    void *drv_stmt;
    mv_param *params; /* grown as bound, up to MV_STMT_MAX_PARAMS */
    int nparams, cap;
    int64_t changes;
    bool started;
    mv_stmt *next;
};

struct mv_db {
    mv_store *store;
    const mv_driver *drv;
    void *conn;
    mv_stmt *cache[MV_STMT_CACHE_BUCKETS];
};

typedef struct mv_migration {
    int version;
    const char *name;
    const char *sqlite_sql;
    const char *postgres_sql;
} mv_migration;

/* The ordered list of migrations (store/migrations.c). */
extern const mv_migration *const mv_migrations[];

#endif
