/* missive/store.h — opening a store, migrating its schema, and running transactions.
 *
 * A store is a pool of connections to one database: SQLite (`sqlite:PATH`, the embedded default,
 * WAL mode) or PostgreSQL (`postgres://…`, any libpq URI). All work happens inside a transaction
 * callback: mv_store_write() runs fn in a write transaction and commits when fn returns MV_OK,
 * rolls back otherwise; mv_store_read() runs fn in a read-only transaction. The statements used
 * inside the callback are in "store/db.h" (library-internal). Callbacks must not call external
 * services and must not open another transaction on the same store. */
#ifndef MISSIVE_STORE_H
#define MISSIVE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "missive/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_store mv_store;
typedef struct mv_db mv_db; /* one connection, valid only inside a transaction callback */

typedef enum mv_store_kind { MV_STORE_SQLITE, MV_STORE_POSTGRES } mv_store_kind;

typedef struct mv_store_options {
    int pool_size;            /* connections; 0 → 8 (1 for sqlite::memory:) */
    const char *synchronous;  /* SQLite: "FULL" (default), "NORMAL" or "OFF" */
    int busy_timeout_ms;      /* SQLite: wait for another process's writer; 0 → 10000 */
    int statement_timeout_ms; /* PostgreSQL: per statement; 0 → 30000 */
    bool allow_memory;        /* accept sqlite::memory: (tests only) */
    bool no_group_commit;     /* one transaction per write: no SQLite group commit, no PostgreSQL
                                 batching of rerunnable writes (benchmark baseline) */
} mv_store_options;

/* Opens a store by URL. opts may be NULL for defaults. Unknown schemes fail with
 * MV_INVALID_ARGUMENT naming the accepted ones. Does not migrate. *out owned by the caller:
 * free with mv_store_close(). */
mv_code mv_store_open(const char *url, const mv_store_options *opts, mv_store **out, mv_err *err);
/* Closes every connection. NULL-safe. No transaction may be running. */
void mv_store_close(mv_store *store);

/* Which driver the store uses. */
mv_store_kind mv_store_kind_of(const mv_store *store);
/* True for sqlite::memory: (durable engines refuse it unless told otherwise). */
bool mv_store_is_memory(const mv_store *store);

/* Applies pending migrations in one transaction each. *applied (may be NULL) receives how many
 * were applied (0 when the schema was current). A database whose schema is newer than this
 * binary knows fails with MV_SCHEMA_TOO_NEW. Safe to run concurrently from several processes. */
mv_code mv_store_migrate(mv_store *store, int *applied, mv_err *err);
/* The schema version recorded in the database (0 when never migrated). */
mv_code mv_store_schema_version(mv_store *store, int *version, mv_err *err);
/* The newest schema version this binary knows. */
int mv_store_latest_version(void);
/* Fails with MV_SCHEMA_TOO_NEW or MV_STORE_UNAVAILABLE unless the schema is exactly current
 * (used by the daemon's --no-migrate and by /healthz). */
mv_code mv_store_check_schema(mv_store *store, mv_err *err);

typedef mv_code (*mv_tx_fn)(mv_db *db, void *ctx, mv_err *err);

/* Runs fn inside a write transaction; commits iff fn returns MV_OK (the commit is durable before
 * this returns). On SQLite one writer runs at a time per process (BEGIN IMMEDIATE across
 * processes), and concurrent writers are group-committed: each callback runs in its own
 * savepoint of a shared transaction, so a failing callback never affects another's work. fn may
 * therefore see other callers' uncommitted rows, exactly as if they had committed just before.
 * Returns fn's code, or the commit's error. */
mv_code mv_store_write(mv_store *store, mv_tx_fn fn, void *ctx, mv_err *err);
/* Runs fn inside a read transaction (a consistent snapshot). */
mv_code mv_store_read(mv_store *store, mv_tx_fn fn, void *ctx, mv_err *err);
/* A trivial round trip (SELECT 1) — store reachability for health checks. */
mv_code mv_store_ping(mv_store *store, mv_err *err);

/* True while the last write transaction failed with MV_STORE_UNAVAILABLE (a full disk, an I/O
 * error, a lost server) and none has committed since. */
bool mv_store_write_failing(const mv_store *store);
/* Commits a small write that needs fresh space (and removes it again): MV_OK when the store can
 * take writes now, else MV_STORE_UNAVAILABLE. The readiness check runs it while writes fail. */
mv_code mv_store_probe_write(mv_store *store, mv_err *err);
/* Readiness (/readyz): the schema is current and a small write commits (the probe above instead
 * while writes are failing). MV_STORE_UNAVAILABLE (or the schema's error) with the reason in err.
 */
mv_code mv_store_ready(mv_store *store, mv_err *err);

/* Copies a SQLite store into a new SQLite file at path (refused when path exists), consistent as
 * of one moment even while this and other processes write: SQLite's online backup, in one read
 * transaction, so writers are not held up (WAL). The file appears complete or not at all (it is
 * written under a temporary name and renamed). On PostgreSQL: MV_INVALID_ARGUMENT saying to use
 * pg_dump. */
mv_code mv_store_backup(mv_store *store, const char *path, mv_err *err);
/* Replaces the whole contents of a SQLite store with the backup at path, after checking that it
 * is a missive store whose schema this binary knows (MV_INVALID_ARGUMENT otherwise, nothing
 * changed). No other process may use the store meanwhile. Does not migrate. On PostgreSQL:
 * MV_INVALID_ARGUMENT saying to use pg_restore. */
mv_code mv_store_restore(mv_store *store, const char *path, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
