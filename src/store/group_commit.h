/* store/group_commit.h — the group-commit engine (group_commit.c) shared by both stores, its two
 * batch drivers (SQLite: group_commit.c; PostgreSQL: pg_batch.c) and what they need of store.c. */
#ifndef MISSIVE_STORE_GROUP_COMMIT_H
#define MISSIVE_STORE_GROUP_COMMIT_H

#include <semaphore.h>

#include "store/driver.h"
#include "store/write_async.h"

/* One queued write. A synchronous job lives on its writer's stack until it is done; an
 * asynchronous one (on_done set) is heap-allocated and freed after its done ran. */
typedef struct mv_gc_job {
    mv_tx_fn fn;
    void *ctx;
    mv_err err;
    mv_code rc;
    bool rerunnable; /* fn may run more than once (db.h: mv__store_write_rerunnable) */
    /* set by a driver: the batch failed before its commit; the job is run again alone */
    bool alone;
    /* synchronous: each post of wake is one event — a lead handed to the job, or its end */
    sem_t wake;
    int leads; /* leads handed to this job and not yet taken (under the engine's lock) */
    bool done; /* under the engine's lock */
    mv__write_done on_done;
    void *done_ctx;
    struct mv_gc_job *next;
} mv_gc_job;

/* The most jobs in one batch. */
#define MV_GC_MAX 64

typedef struct mv_gc mv_gc;

/* leaders: batches that may run at once (SQLite: 1, one writer; PostgreSQL: a few, each on a
 * connection of its own); max_batch: the most jobs a leader takes at once (1: every job alone).
 * NULL when out of memory. */
mv_gc *mv__gc_new(mv_store *store, int leaders, int max_batch);
/* Waits until nothing is queued or running (every done called), then ends the writer threads.
 * NULL-safe. */
void mv__gc_free(mv_gc *g);
/* Queues a job and waits for its end: mv_store_write / mv__store_write_rerunnable. */
mv_code mv__gc_write(mv_gc *g, mv_tx_fn fn, void *ctx, bool rerunnable, mv_err *err);
/* Queues a job whose done runs after its commit, on the thread that led its batch. False when it
 * could not be queued (no memory, no writer thread): nothing ran. */
bool mv__gc_write_async(mv_gc *g, mv_tx_fn fn, void *ctx, bool rerunnable, mv__write_done done,
                        void *done_ctx);

/* The batch drivers: run every job of batch (a list of at least one) and set each job's rc/err
 * (or alone, PostgreSQL only, for a synchronous rerunnable job its writer runs again itself). */
void mv__gc_run_sqlite(mv_store *s, mv_gc_job *batch);
void mv__gc_run_pg(mv_store *s, mv_gc_job *batch);

/* store.c's own steps, for the drivers: a pooled connection, the write's bookkeeping (failing
 * state, commit hook, round trips), the SQLite writer lock and one plain write transaction. */
mv_code mv__store_acquire(mv_store *s, mv_db **out, mv_err *err);
void mv__store_release(mv_store *s, mv_db *db, uint64_t trips_before);
void mv__store_wrote(mv_store *s, mv_code rc);
void mv__store_committed(mv_store *s);
void mv__store_write_lock(mv_store *s, bool lock);
mv_code mv__store_write_alone(mv_store *s, mv_tx_fn fn, void *ctx, mv_err *err);

#endif
