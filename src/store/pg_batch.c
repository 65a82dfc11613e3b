/* pg_batch.c — the PostgreSQL driver of the group-commit engine (group_commit.c): the jobs of one
 * batch share one transaction on one connection, led by a writer thread or a synchronous writer.
 *
 * Why: a create is one round trip (pipeline mode, store/pg.c), but each one alone is still a
 * transaction of its own — its own BEGIN, commit record, WAL flush wait and wake-up on a backend
 * of its own, and with 32 clients on two cores the backends' CPU, not the disk, bounds the rate.
 *
 * A batch has two kinds of job, each run in a transaction of its own:
 * - Rerunnable jobs (db.h: mv__store_write_rerunnable) go out without savepoints, pipelined: their
 *   deferred writes and the COMMIT leave in one flush, so a batch of creates costs one round trip.
 *   In pipeline mode a failed statement makes the server skip everything up to the flush's end,
 *   so such a batch commits whole or not at all, and when it does not each job learns precisely
 *   what happened to it: the commit succeeded — every job committed; a callback or a statement
 *   failed (a constraint, a key taken, a timeout) — the transaction never committed and every job
 *   is run again alone (a synchronous job on its writer's thread, an asynchronous one on the
 *   leader's): the failing one fails there with its own error, the others commit; the connection
 *   was lost while the COMMIT was on its way — nobody can know whether it committed, exactly as
 *   for a single transaction, and every job fails with store_unavailable (a create's retry with
 *   its clientRequestId then replays or creates; never both, never lost); lost before the COMMIT
 *   was sent — nothing committed, every job is run again alone.
 * - Every other job runs in a savepoint, as on SQLite: SAVEPOINT, the job's statements and a
 *   RELEASE go out in one flush, whose answer carries the job's own errors (so each error is the
 *   job's that caused it), and a failing job rolls back to its savepoint and leaves the others
 *   intact. One round trip per job, one commit for the batch.
 * A batch of one is a plain transaction. A callback sees the uncommitted rows of the jobs before
 * it in its transaction. `"storeOptions": {"groupCommit": false}` turns batching off. */
#include <stdlib.h>

#include "store/group_commit.h"

static const char SQL_PG_SAVEPOINT[] = "SAVEPOINT mv_job";
static const char SQL_PG_RELEASE[] = "RELEASE SAVEPOINT mv_job";

/* Every job of jobs that had succeeded fails with the batch's error. */
static void fail_committed(mv_gc_job **jobs, int n, const mv_err *e) {
    for (int i = 0; i < n; i++)
        if (jobs[i]->rc == MV_OK) jobs[i]->rc = mv_err_copy(&jobs[i]->err, e);
}

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

/* Rolls a failed job back to its savepoint. A job that returned an error of its own may leave
 * deferred statements queued: their flush (which may fail) comes first, then the rollback. False
 * when the transaction cannot go on. */
static bool rollback_job(mv_db *db) {
    for (int attempt = 0; attempt < 2; attempt++)
        if (db->drv->exec(db->conn, "ROLLBACK TO SAVEPOINT mv_job", NULL) == MV_OK)
            return db->drv->exec(db->conn, "RELEASE SAVEPOINT mv_job", NULL) == MV_OK;
    return false;
}

/* One transaction, a savepoint per job (at least two jobs). */
static void run_savepoints(mv_store *s, mv_gc_job **jobs, int n) {
    mv_db *db;
    mv_err e = {0};
    mv_code rc = mv__store_acquire(s, &db, &e);
    if (rc != MV_OK) {
        for (int i = 0; i < n; i++)
            jobs[i]->rc = mv_err_copy(&jobs[i]->err, &e);
        return;
    }
    uint64_t trips = db->drv->round_trips ? db->drv->round_trips(db->conn) : 0;
    bool aborted = (rc = db->drv->begin(db->conn, true, &e)) != MV_OK, any_ok = false;
    for (int i = 0; i < n; i++) {
        mv_gc_job *j = jobs[i];
        if (aborted) { /* the connection is gone: the jobs after it fail unrun */
            j->rc = mv_err_set(&j->err, MV_STORE_UNAVAILABLE,
                               "the store aborted the transaction; try again");
            continue;
        }
        j->rc = mv_db_execf_later(db, SQL_PG_SAVEPOINT, &j->err, "");
        if (j->rc == MV_OK) j->rc = j->fn(db, j->ctx, &j->err);
        /* the flush that answers for this job's deferred statements */
        if (j->rc == MV_OK) j->rc = mv_db_execf(db, SQL_PG_RELEASE, NULL, &j->err, "");
        if (j->rc != MV_OK && !rollback_job(db)) aborted = true;
        any_ok |= j->rc == MV_OK;
    }
    bool commit_sent = false;
    if (aborted) {
        rc = mv_err_set(&e, MV_STORE_UNAVAILABLE, "the store aborted the transaction; try again");
    } else if (any_ok) {
        commit_sent = true;
        rc = db->drv->exec(db->conn, "COMMIT", &e);
    }
    if (aborted || !any_ok || rc != MV_OK) db->drv->exec(db->conn, "ROLLBACK", NULL);
    if (commit_sent && rc != MV_OK && db->drv->is_broken(db->conn)) /* idle unless lost */
        mv_err_set(&e, MV_STORE_UNAVAILABLE,
                   "the connection to the store was lost during the commit: %.400s", e.message);
    mv__store_release(s, db, trips);
    if (rc != MV_OK) fail_committed(jobs, n, &e);
    for (int i = 0; i < n; i++)
        mv__store_wrote(s, jobs[i]->rc);
    if (rc == MV_OK && any_ok) mv__store_committed(s);
}

void mv__gc_run_pg(mv_store *s, mv_gc_job *batch) {
    mv_gc_job *together[MV_GC_MAX], *plain[MV_GC_MAX];
    int nt = 0, np = 0;
    for (mv_gc_job *j = batch; j && nt + np < MV_GC_MAX; j = j->next) {
        if (j->rerunnable)
            together[nt++] = j;
        else
            plain[np++] = j;
    }
    if (nt == 1) plain[np++] = together[--nt]; /* alone, it is a plain transaction */
    if (nt > 0) run_together(s, together, nt);
    if (np == 1) {
        plain[0]->rc = mv__store_write_alone(s, plain[0]->fn, plain[0]->ctx, &plain[0]->err);
    } else if (np > 1) {
        run_savepoints(s, plain, np);
    }
}
