/* store/write_async.h — a store write that does not wait for its commit.
 *
 * mv_store_write() returns once the transaction holding fn's work is durable, so the thread that
 * calls it sleeps through the commit (and, with group commit, through the other jobs of its
 * batch). A request handler that has nothing else to do until then can instead queue the write
 * and return: done(rc, err, done_ctx) runs once the batch holding the job has committed (or
 * failed), on the thread that committed it. See docs/internals.md "Group commit". */
#ifndef MISSIVE_STORE_WRITE_ASYNC_H
#define MISSIVE_STORE_WRITE_ASYNC_H

#include <stdbool.h>

#include "missive/store.h"

/* The end of an asynchronous write: rc is fn's code or the commit's error (err then holds the
 * message; err is NULL on MV_OK). err is valid only during the call. done runs on the store's
 * committing thread (see below) and must not wait for a write of the same store: no
 * mv_store_write from it (it would wait for a batch that only this thread can lead). It may read,
 * and it may queue another asynchronous write. */
typedef void (*mv__write_done)(mv_code rc, const mv_err *err, void *done_ctx);

/* Queues fn as a write job of store and returns at once. fn runs as for mv_store_write — SQLite:
 * in its own savepoint of a group commit (a batch may hold synchronous and asynchronous jobs);
 * PostgreSQL: in a transaction of its own (store/pg_batch.c) — on a thread of the store's: a
 * synchronous writer already leading (SQLite), or else one of the store's writer threads
 * (started by the first call), so the caller never runs a commit. done is called exactly once,
 * after the commit that holds the job is durable — or with the error that failed it — and ctx,
 * done_ctx must stay valid until then.
 *
 * Without group commit (`groupCommit: false`) this runs mv_store_write on the caller's thread and
 * calls done before returning: check mv__store_writes_async first when the caller must not
 * block. */
void mv__store_write_async(mv_store *store, mv_tx_fn fn, void *ctx, mv__write_done done,
                           void *done_ctx);

/* The same for a callback that may be run more than once (db.h: mv__store_write_rerunnable): on
 * PostgreSQL such jobs share one pipelined transaction without savepoints (a batch of creates:
 * one round trip), and when it fails each is run again alone on the leading thread. */
void mv__store_write_async_rerunnable(mv_store *store, mv_tx_fn fn, void *ctx, mv__write_done done,
                                      void *done_ctx);

/* True when mv__store_write_async returns before the commit (group commit on, either store). */
bool mv__store_writes_async(const mv_store *store);

/* True when a read costs no round trip (SQLite: a local file), so a caller that must not wait on
 * a server (an I/O thread) may still read on its own thread before it queues the write. */
bool mv__store_reads_locally(const mv_store *store);

/* How many asynchronous writes (a request's: a create, an action) were queued on store so far: a
 * background worker compares two readings to tell whether requests wrote in between, and then
 * leaves them room (deliver/outbox.c). */
uint64_t mv__store_async_writes(mv_store *store);

#endif
