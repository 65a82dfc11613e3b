/* pg_batch.c — the PostgreSQL driver of the group-commit engine (group_commit.c): the jobs of one
 * batch share one transaction on one connection, led by a writer thread or a synchronous writer.
 *
 * Why: a create is one round trip (pipeline mode, store/pg.c), but each one alone is still a
 * transaction of its own — its own BEGIN, commit record, WAL flush wait and wake-up on a backend
 * of its own, and with 32 clients on two cores the backends' CPU, not the disk, bounds the rate.
 *
 * Only rerunnable jobs (db.h: mv__store_write_rerunnable) share a transaction, pipelined and
 * without savepoints: their deferred writes and the COMMIT leave in one flush, so a batch of up
 * to 32 creates costs one round trip. In pipeline mode a failed statement makes the server skip
 * everything up to the flush's end, so such a batch commits whole or not at all, and when it does
 * not each job learns precisely what happened to it: the commit succeeded — every job committed;
 * a callback or a statement failed (a constraint, a key taken, a timeout, a deadlock) — the
 * transaction never committed and every job is run again alone (a synchronous job on its writer's
 * thread, an asynchronous one on the leader's): the failing one fails there with its own error,
 * the others commit; the connection was lost while the COMMIT was on its way — nobody can know
 * whether it committed, exactly as for a single transaction, and every job fails with
 * store_unavailable (a create's retry with its clientRequestId then replays or creates; never
 * both, never lost); lost before the COMMIT was sent — nothing committed, every job is run again
 * alone.
 *
 * Every other job is a transaction of its own, on an engine of its own whose leaders take one job
 * each (as many as the pool has connections): an asynchronous one runs on a writer thread, a
 * synchronous one on its caller's thread (store.c). Why not savepoints
 * as on SQLite: PostgreSQL has row locks, and a batch holds every lock its jobs took until its
 * commit. Measured (bench/group_commit.c create, 32 threads sharing 8 receivers): batches of
 * plain creates in savepoints waited on each other's tally rows and deadlocked (SQLSTATE 40P01,
 * p99 2 s, 140 creates/s), and a plain job cannot be run again. A rerunnable batch that deadlocks
 * is simply run again job by job.
 * A callback sees the uncommitted rows of the jobs before it in its transaction. `"storeOptions":
 * {"groupCommit": false}` turns batching off. */
#include <stdlib.h>

#include "store/group_commit.h"

/* One pipelined transaction for rerunnable jobs (at least two). */
static void run_together(mv_store *s, mv_gc_job **jobs, int n) {
    mv_db *db;
    mv_err e = {0};
    mv_code rc = mv__store_acquire(s, &db, &e);
    if (rc != MV_OK) { /* nothing ran: each job tries alone (and gets its own error) */
        for (int i = 0; i < n; i++)
            jobs[i]->alone = true;
        return;
    }
    uint64_t trips = db->drv->round_trips ? db->drv->round_trips(db->conn) : 0;
    bool failed = (rc = db->drv->begin(db->conn, true, &e)) != MV_OK, commit_sent = false;
    for (int i = 0; i < n && !failed; i++)
        failed = (jobs[i]->rc = jobs[i]->fn(db, jobs[i]->ctx, &jobs[i]->err)) != MV_OK;
    if (!failed) {
        commit_sent = true;
        rc = db->drv->exec(db->conn, "COMMIT", &e);
    }
    if (failed || rc != MV_OK) db->drv->exec(db->conn, "ROLLBACK", NULL);
    bool unknown = commit_sent && rc != MV_OK && db->drv->is_broken(db->conn);
    mv__store_release(s, db, trips);
    for (int i = 0; i < n; i++) {
        mv_gc_job *j = jobs[i];
        if (!failed && rc == MV_OK) {
            j->rc = MV_OK;
            mv__store_wrote(s, MV_OK);
        } else if (unknown) {
            j->rc =
                mv_err_set(&j->err, MV_STORE_UNAVAILABLE,
                           "the connection to the store was lost during the commit: %s", e.message);
            mv__store_wrote(s, j->rc);
        } else {
            j->alone = true;
        }
    }
    if (!failed && rc == MV_OK) mv__store_committed(s);
}

void mv__gc_run_pg(mv_store *s, mv_gc_job *batch) {
    if (batch->next) {
        mv_gc_job *jobs[MV_GC_MAX];
        int n = 0;
        for (mv_gc_job *j = batch; j && n < MV_GC_MAX; j = j->next)
            jobs[n++] = j;
        run_together(s, jobs, n);
    } else {
        batch->rc = mv__store_write_alone(s, batch->fn, batch->ctx, &batch->err);
    }
}
