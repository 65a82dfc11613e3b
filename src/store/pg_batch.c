/* pg_batch.c — group commit for PostgreSQL: concurrent writes that may be run again
 * (mv__store_write_rerunnable, db.h) share one transaction on one connection.
 *
 * Why: a create is one round trip (pipeline mode, store/pg.c), but each one is still a
 * transaction of its own — its own BEGIN, commit record, WAL flush wait and wake-up on a backend
 * of its own, and with 32 clients on two cores the backends' CPU, not the disk, bounds the rate.
 * Writers that arrive while batches are in flight queue here; at most PG_BATCH_LEADERS batches
 * run at once, each led by a writer thread that takes up to PG_BATCH_MAX queued jobs, runs each
 * job's callback on one connection inside one transaction (pipelined: the jobs' deferred writes
 * and the COMMIT go out in one flush) and wakes the writers of its batch, each on its own
 * semaphore, after the commit; then it hands its lead to the oldest job still queued. A writer
 * that finds fewer batches running leads at once: a lone write waits for nobody and is exactly
 * one plain transaction (a batch of one runs as mv_store_write would).
 *
 * No savepoints: in pipeline mode a failed statement makes the server skip everything up to the
 * flush's end, so a savepoint could not be rolled back to without a round trip per job. A batch
 * therefore either commits whole or not at all, and when it does not, each job learns precisely
 * what happened to it:
 * - the commit succeeded: every job committed;
 * - a callback failed, or a statement did (a constraint, a key taken, a timeout): the
 *   transaction never committed, and every job of the batch is run again alone, in a plain
 *   transaction on its own writer's thread (the callbacks are rerunnable by contract) — the
 *   failing one fails there with its own error, the others commit;
 * - the connection was lost while the COMMIT was on its way: nobody can know whether it
 *   committed, exactly as for a single transaction, and every job fails with store_unavailable
 *   (a create's retry with its clientRequestId then replays or creates; never both, never lost).
 *   Lost before the COMMIT was sent: nothing committed, every job is run again alone.
 * A callback sees the uncommitted rows of the jobs before it in its batch, as with SQLite's group
 * commit (store.h). `"storeOptions": {"groupCommit": false}` turns batching off. */
#include <semaphore.h>
#include <stdlib.h>

#include "store/pg_batch.h"

/* Jobs per transaction: a create queues four statements, and the pipeline flushes early at 256
 * queued results (pg.c), so 32 creates stay one round trip. */
#define PG_BATCH_MAX 32
/* Batches in flight at once (each on a connection of its own). */
#define PG_BATCH_LEADERS 4

typedef struct pg_job {
    mv_tx_fn fn;
    void *ctx;
    mv_err err;
    mv_code rc;
    sem_t wake; /* posted once per lead handed to this job, and once when it is done */
    int leads;  /* leads handed to this job and not yet taken (under mu) */
    bool done;  /* under mu */
    bool alone; /* the batch failed before its commit: run again in a transaction of its own */
    struct pg_job *next;
} pg_job;

struct mv_pg_batch {
    mv_store *store;
    pthread_mutex_t mu;
    pg_job *head, *tail;
    int leaders; /* leads held: batches running, or handed to a queued job */
};

mv_pg_batch *mv__pg_batch_new(mv_store *store) {
    mv_pg_batch *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->store = store;
    pthread_mutex_init(&b->mu, NULL);
    return b;
}

void mv__pg_batch_free(mv_pg_batch *b) {
    if (!b) return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* One transaction for the jobs of batch (at least two). */
static void run_together(mv_store *s, pg_job *batch) {
    mv_db *db;
    mv_err e = {0};
    mv_code rc = mv__store_acquire(s, &db, &e);
    if (rc != MV_OK) { /* nothing ran: each job tries alone (and gets its own error) */
        for (pg_job *j = batch; j; j = j->next)
            j->alone = true;
        return;
    }
    uint64_t trips = db->drv->round_trips ? db->drv->round_trips(db->conn) : 0;
    bool failed = (rc = db->drv->begin(db->conn, true, &e)) != MV_OK, commit_sent = false;
    for (pg_job *j = batch; j && !failed; j = j->next)
        failed = (j->rc = j->fn(db, j->ctx, &j->err)) != MV_OK;
    if (!failed) {
        commit_sent = true;
        rc = db->drv->exec(db->conn, "COMMIT", &e);
    }
    if (failed || rc != MV_OK) db->drv->exec(db->conn, "ROLLBACK", NULL);
    bool unknown = commit_sent && rc != MV_OK && db->drv->is_broken(db->conn);
    mv__store_release(s, db, trips);
    for (pg_job *j = batch; j; j = j->next) {
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

/* Takes up to PG_BATCH_MAX queued jobs and runs them; then hands this lead to the oldest job
 * still queued (or gives it up) and wakes the writers of the batch. */
static void lead(mv_pg_batch *b) {
    pthread_mutex_lock(&b->mu);
    pg_job *batch = b->head, *last = batch;
    if (!batch) {
        b->leaders--;
        pthread_mutex_unlock(&b->mu);
        return;
    }
    for (int n = 1; n < PG_BATCH_MAX && last->next; n++)
        last = last->next;
    b->head = last->next;
    if (!b->head) b->tail = NULL;
    last->next = NULL;
    pthread_mutex_unlock(&b->mu);

    if (batch->next)
        run_together(b->store, batch);
    else
        batch->rc = mv__store_write_alone(b->store, batch->fn, batch->ctx, &batch->err);

    pthread_mutex_lock(&b->mu);
    pg_job *next_leader = b->head;
    if (next_leader)
        next_leader->leads++;
    else
        b->leaders--;
    for (pg_job *j = batch; j; j = j->next)
        j->done = true;
    pthread_mutex_unlock(&b->mu);
    if (next_leader) sem_post(&next_leader->wake);
    for (pg_job *j = batch, *next; j; j = next) {
        next = j->next; /* j belongs to its writer again once posted */
        sem_post(&j->wake);
    }
}

/* Appends a job (mu held). The job lives on its writer's stack until it is done. */
static void enqueue(mv_pg_batch *b, pg_job *job) {
    if (b->tail)
        b->tail->next = job;
    else
        b->head = job;
    b->tail = job;
}

mv_code mv__pg_batch_write(mv_pg_batch *b, mv_tx_fn fn, void *ctx, mv_err *err) {
    pg_job job = {.fn = fn, .ctx = ctx};
    sem_init(&job.wake, 0, 0);
    pthread_mutex_lock(&b->mu);
    enqueue(b, &job);
    bool leading = b->leaders < PG_BATCH_LEADERS;
    if (leading) b->leaders++;
    pthread_mutex_unlock(&b->mu);
    for (;;) {
        if (leading) lead(b);
        while (sem_wait(&job.wake) != 0) {
        }
        /* Each post is one event: a lead handed to this job (taken first, so none is lost) or
         * the end of its batch. */
        pthread_mutex_lock(&b->mu);
        leading = job.leads > 0;
        if (leading) job.leads--;
        bool done = job.done;
        pthread_mutex_unlock(&b->mu);
        if (!leading && done) break;
    }
    sem_destroy(&job.wake);
    if (job.alone) return mv__store_write_alone(b->store, fn, ctx, err);
    if (err) mv_err_copy(err, &job.err);
    return job.rc;
}
