/* store/db.h — the one SQL layer every domain module uses, inside mv_store_write/read callbacks.
 *
 * Queries are written once with `?` placeholders; the PostgreSQL driver rewrites them to $n.
 * Write SQL that both dialects accept: INTEGER/BIGINT/TEXT columns, JSON kept as TEXT, booleans
 * as 0/1 integers, times as BIGINT milliseconds, `INSERT … ON CONFLICT DO NOTHING`, `RETURNING`.
 * A claim whose concurrent claimants must skip each other's rows writes ` FOR UPDATE SKIP LOCKED`
 * (exactly so) after its SELECT: PostgreSQL locks; SQLite, one writer at a time and no row locks,
 * drops the clause.
 * Keep each statement in a `static const char SQL_NAME[]` constant: statements are cached per
 * connection keyed by that pointer, so the same constant is prepared once per connection.
 *
 *   mv_stmt *st;
 *   if ((rc = mv_db_prepare(db, SQL_CLAIM, &st, err))) return rc;
 *   mv_stmt_bindf(st, "ssi", attempt_id, message_id, now);
 *   int r = mv_stmt_step(st, err);        // 1 row, 0 done, -1 error (err filled)
 *   int64_t n = mv_stmt_changes(st);      // rows changed (compare-and-set)
 *   mv_stmt_done(st);                     // always: returns the statement to the cache
 *
 * A write whose result the caller never reads (no rows, no row count, no branch on its specific
 * error) may be deferred: mv_db_execf_later queues it and PostgreSQL sends it in libpq's pipeline
 * mode together with the next statement that needs a result, or with the COMMIT — BEGIN, the
 * deferred writes and COMMIT then cost one round trip. Its error fails the transaction and is
 * reported by that next statement or by the commit at the latest (same codes as mv_db_execf);
 * SQLite runs it at once. A later statement of the same transaction sees its effects.
 */
#ifndef MISSIVE_STORE_DB_H
#define MISSIVE_STORE_DB_H

#include <stdbool.h>
#include <stdint.h>

#include "missive/store.h"

typedef struct mv_stmt mv_stmt;

/* Prepares (or takes from the connection's cache) the statement for sql. The pointer sql must be
 * stable (a static constant): it is the cache key. */
mv_code mv_db_prepare(mv_db *db, const char *sql, mv_stmt **out, mv_err *err);

/* The most values one statement binds (placeholders are numbered 1..MV_STMT_MAX_PARAMS). A
 * caller that builds SQL with a variable number of placeholders ties its count to this limit
 * with a _Static_assert. */
#define MV_STMT_MAX_PARAMS 512

/* Binding (1-based). Text is copied; NULL text binds SQL NULL. */
void mv_stmt_bind_text(mv_stmt *st, int idx, const char *s);
void mv_stmt_bind_int64(mv_stmt *st, int idx, int64_t v);
void mv_stmt_bind_null(mv_stmt *st, int idx);
/* Binds parameters 1..n from fmt: 's' const char * (NULL → NULL), 'i' int64_t, 'n' no argument
 * (NULL), 'b' int used as a 0/1 boolean. */
void mv_stmt_bindf(mv_stmt *st, const char *fmt, ...);

/* Executes or advances: 1 = a row is available, 0 = done, -1 = error (err filled; the code is
 * MV_STORE_UNAVAILABLE when the connection is gone, MV_INTERNAL otherwise). */
int mv_stmt_step(mv_stmt *st, mv_err *err);

/* Columns of the current row (0-based). Text is NULL for SQL NULL and stays valid until the next
 * step or mv_stmt_done. */
const char *mv_stmt_text(mv_stmt *st, int col);
int64_t mv_stmt_int64(mv_stmt *st, int col);
bool mv_stmt_is_null(mv_stmt *st, int col);
int mv_stmt_column_count(mv_stmt *st);

/* Rows inserted/updated/deleted by the last completed step of this statement. */
int64_t mv_stmt_changes(mv_stmt *st);

/* Resets the statement, clears its bindings and returns it to the cache. NULL-safe. */
void mv_stmt_done(mv_stmt *st);

/* Runs one parameterised statement to completion; *changes (may be NULL) gets the row count. */
mv_code mv_db_execf(mv_db *db, const char *sql, int64_t *changes, mv_err *err, const char *fmt,
                    ...);
/* A single-row query: prepares sql, binds parameters from fmt (as mv_stmt_bindf) and steps once.
 * On MV_OK, *st is the statement positioned on the row — read its columns, then mv_stmt_done —
 * or NULL when there is no row. On an error *st is NULL.
 *
 *   mv_stmt *st;
 *   if ((rc = mv_db_row(db, SQL_GET_SAGA, &st, err, "s", id))) return rc;
 *   if (!st) return mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s: not found", id);
 *   … mv_stmt_text(st, 0) …
 *   mv_stmt_done(st); */
mv_code mv_db_row(mv_db *db, const char *sql, mv_stmt **st, mv_err *err, const char *fmt, ...);

/* Queues one parameterised statement whose result nobody reads (see the top of this file).
 * Returns an error only when it cannot be queued (or, on SQLite, when it failed). */
mv_code mv_db_execf_later(mv_db *db, const char *sql, mv_err *err, const char *fmt, ...);
/* The same, but a unique violation by this statement is reported as on_unique instead of
 * MV_INTERNAL: a caller may write the common case blind ("this key is new") and take a slower
 * path in a new transaction when the key turns out to exist. */
mv_code mv_db_execf_later_unique(mv_db *db, const char *sql, mv_code on_unique, mv_err *err,
                                 const char *fmt, ...);
/* mv_stmt_step's deferred twin for a statement bound by hand: queues it and returns it to the
 * cache (no mv_stmt_done needed). */
mv_code mv_stmt_exec_later(mv_stmt *st, mv_err *err);

/* A statement whose only purpose is a side effect once the transaction has committed — a
 * wake-up such as `SELECT pg_notify(…)`: PostgreSQL sends it (text, no parameters) right after
 * the COMMIT in the same flush, once per transaction however often it is asked for, and not at
 * all when the transaction rolls back; its failure (or a connection lost after the commit
 * answered) does not fail the commit, so it may be lost (the statements after one commit share
 * an implicit transaction: one failing loses the others too) — only for wake-ups that have a
 * timeout behind them. Why not inside the transaction: a NOTIFY takes one database-wide lock at
 * commit and holds it through the commit's WAL flush, so no two notifying transactions share a
 * flush. SQLite, which has no channel between connections (store/listen.h: its listeners poll,
 * and a commit in this process wakes them through the commit hook), sends nothing. sql must be a
 * static constant. */
mv_code mv_db_exec_after_commit(mv_db *db, const char *sql, mv_err *err);

/* mv_store_write for a callback that may be run more than once: on PostgreSQL concurrent such
 * writes share one transaction (store/pg_batch.c), and when that transaction fails each is run
 * again alone in a fresh transaction — so fn must set every result in ctx anew on each run and
 * do nothing outside the transaction. Its outcome is exactly mv_store_write's: committed iff
 * MV_OK, a failure of its own or a lost connection otherwise, never another writer's error. fn
 * may see the uncommitted rows of the writers before it in the batch. SQLite: mv_store_write. */
mv_code mv__store_write_rerunnable(mv_store *store, mv_tx_fn fn, void *ctx, mv_err *err);

/* Runs SQL text without parameters (may hold several statements; for DDL and migrations). */
mv_code mv_db_exec(mv_db *db, const char *sql, mv_err *err);

mv_store_kind mv_db_kind(const mv_db *db);

/* Round trips to the server (PostgreSQL: each flush that waits for answers) made by the committed
 * and failed transactions of this store so far; on SQLite, the statements they ran. For tests and
 * benchmarks. */
uint64_t mv__store_round_trips(mv_store *store);

#endif
