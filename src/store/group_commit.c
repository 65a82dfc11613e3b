/* group_commit.c — one group-commit engine for both stores.
 *
 * With synchronous commits every transaction waits for a flush to disk (SQLite's fsync,
 * PostgreSQL's WAL flush and the wake-up of a backend of its own), so one transaction per request
 * caps writes at that rate. Writers therefore queue their callbacks; a thread that holds a lead
 * takes everything queued (up to GC_MAX jobs) and hands the batch to the store's driver, which
 * runs the jobs in one transaction and commits once (SQLite: below; PostgreSQL: pg_batch.c);
 * then it hands its lead on and ends the jobs of its batch. Every job ends only after the commit
 * that contains its work is durable — or with the error that failed it — so durability is
 * unchanged; the flush is shared. One failing job never fails the others of its batch: SQLite
 * runs each job in a savepoint; PostgreSQL batches only rerunnable jobs and runs them again alone
 * when their transaction fails (pg_batch.c).
 *
 * Leads: SQLite has one writer, so one lead; PostgreSQL runs a few batches at once, each on a
 * connection of its own (store.c creates its engines). Two kinds of job share the queue. A
 * synchronous writer (mv_store_write) waits on its own semaphore, posted once per event: its end,
 * or a lead handed to it; finding a lead free, it leads at once (a lone write waits for nobody). An
 * asynchronous job (mv__store_write_async, write_async.h) has nobody waiting: its done callback
 * runs on the leading thread after the commit. Finding a lead free, it hands it to the store's
 * writer threads (started by the first asynchronous job, one per lead), so the caller — an HTTP I/O
 * thread — never runs a commit. After a batch the lead goes to the oldest job still queued: a
 * synchronous one's writer, else a writer thread (the leader itself when it is one: it keeps
 * leading until the queue is empty); nobody waiting, it is given up.
 *
 * Why synchronous writers still lead themselves rather than all writes going through the writer
 * thread: measured on the 2-core benchmark machine, a writer thread that every synchronous write
 * must wake (and that then competes for a core with the request threads as one runnable thread
 * among dozens) halved saga3 throughput (≈ 1,350 → ≈ 700 sagas/s, see bench/RESULTS.md). For an
 * asynchronous job the wake-up is one per batch, not one per job, and it replaces the wake-ups of
 * the request's thread (see docs/internals.md "Group commit"). */
#include <stdatomic.h>
#include <stdlib.h>

#include "base/callctx.h"
#include "missive/base.h"
#include "store/group_commit.h"

#define GC_MAX MV_GC_MAX
#define GC_MAX_LEADERS 64

struct mv_gc {
    mv_store *store;
    bool sqlite;
    int max_leaders, max_batch;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when the last lead is given up */
    mv_gc_job *head, *tail;
    int leaders;      /* leads held: batches running, or handed to a job or a writer thread */
    int writer_leads; /* leads handed to the writer threads and not yet taken */
    bool quit;
    sem_t writer_wake; /* posted once per lead handed to the writer threads, and at the end */
    pthread_mutex_t start_mu;
    pthread_t writers[GC_MAX_LEADERS];
    int nwriters;
    bool start_failed;
};

mv_gc *mv__gc_new(mv_store *store, int leaders, int max_batch) {
    mv_gc *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->store = store;
    g->sqlite = mv_store_kind_of(store) == MV_STORE_SQLITE;
    g->max_leaders = leaders < 1 ? 1 : leaders > GC_MAX_LEADERS ? GC_MAX_LEADERS : leaders;
    g->max_batch = max_batch < 1 ? 1 : max_batch > MV_GC_MAX ? MV_GC_MAX : max_batch;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->idle, NULL);
    pthread_mutex_init(&g->start_mu, NULL);
    sem_init(&g->writer_wake, 0, 0);
    return g;
}

void mv__gc_free(mv_gc *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    while (g->leaders > 0)
        pthread_cond_wait(&g->idle, &g->mu);
    g->quit = true;
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_lock(&g->start_mu);
    for (int i = 0; i < g->nwriters; i++)
        sem_post(&g->writer_wake);
    for (int i = 0; i < g->nwriters; i++)
        pthread_join(g->writers[i], NULL);
    pthread_mutex_unlock(&g->start_mu);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->idle);
    pthread_mutex_destroy(&g->start_mu);
    sem_destroy(&g->writer_wake);
    free(g);
}

/* Appends a job and takes a lead for it when one is free (mu held). */
static bool enqueue(mv_gc *g, mv_gc_job *job) {
    if (g->tail)
        g->tail->next = job;
    else
        g->head = job;
    g->tail = job;
    if (g->leaders >= g->max_leaders) return false;
    g->leaders++;
    return true;
}

/* Gives a lead up (mu held). */
static void drop_lead(mv_gc *g) {
    if (--g->leaders == 0) pthread_cond_broadcast(&g->idle);
}

/* Ends the jobs of a batch: wakes the synchronous writers, calls the asynchronous jobs' done and
 * frees them. */
static void finish_batch(mv_gc_job *batch) {
    mv_callctx saved; /* a synchronous leader's own request context, kept across the dones */
    bool saved_ctx = false;
    for (mv_gc_job *j = batch, *next; j; j = next) {
        next = j->next; /* j belongs to its writer again once posted */
        if (j->on_done) {
            if (!saved_ctx) saved = *mv__callctx(), saved_ctx = true;
            mv__callctx_reset();
            j->on_done(j->rc, j->rc == MV_OK ? NULL : &j->err, j->done_ctx);
            free(j);
        } else {
            sem_post(&j->wake);
        }
    }
    if (saved_ctx) *mv__callctx() = saved;
}

/* Runs batches while this thread holds a lead (see the top of the file). */
static void lead(mv_gc *g, bool writer) {
    for (;;) {
        pthread_mutex_lock(&g->mu);
        mv_gc_job *batch = g->head, *last = batch;
        if (!batch) { /* another leader took what was queued */
            drop_lead(g);
            pthread_mutex_unlock(&g->mu);
            return;
        }
        for (int n = 1; n < g->max_batch && last->next; n++)
            last = last->next;
        g->head = last->next;
        if (!g->head) g->tail = NULL;
        last->next = NULL;
        pthread_mutex_unlock(&g->mu);

        if (g->sqlite)
            mv__gc_run_sqlite(g->store, batch);
        else
            mv__gc_run_pg(g->store, batch);
        /* an asynchronous job the driver could not settle in its batch runs alone, here */
        for (mv_gc_job *j = batch; j; j = j->next)
            if (j->alone && j->on_done) {
                j->alone = false;
                mv_err_clear(&j->err);
                j->rc = mv__store_write_alone(g->store, j->fn, j->ctx, &j->err);
            }

        pthread_mutex_lock(&g->mu);
        mv_gc_job *next = g->head;
        /* the lead goes to a synchronous writer: its job stays on its stack until it has taken
         * the post below; an asynchronous next job may be run and freed by another leader as soon
         * as the lock is let go, so nothing of it is read after that */
        sem_t *hand_to = NULL;
        bool keep = false, wake_writer = false;
        if (!next)
            drop_lead(g);
        else if (next->on_done && writer)
            keep = true;
        else if (next->on_done)
            wake_writer = true, g->writer_leads++;
        else
            next->leads++, hand_to = &next->wake;
        for (mv_gc_job *j = batch; j; j = j->next)
            j->done = true;
        pthread_mutex_unlock(&g->mu);
        if (hand_to) sem_post(hand_to);
        if (wake_writer) sem_post(&g->writer_wake);
        finish_batch(batch);
        if (!keep) return;
    }
}

mv_code mv__gc_write(mv_gc *g, mv_tx_fn fn, void *ctx, bool rerunnable, mv_err *err) {
    mv_gc_job job = {.fn = fn, .ctx = ctx, .rerunnable = rerunnable};
    sem_init(&job.wake, 0, 0);
    pthread_mutex_lock(&g->mu);
    bool leading = enqueue(g, &job);
    pthread_mutex_unlock(&g->mu);
    for (;;) {
        if (leading) lead(g, false);
        while (sem_wait(&job.wake) != 0) {
        }
        /* A lead handed to this job is taken first, so none is lost; job.done is written before
         * the post that ends the job, never read before a post. */
        pthread_mutex_lock(&g->mu);
        leading = job.leads > 0;
        if (leading) job.leads--;
        bool done = job.done;
        pthread_mutex_unlock(&g->mu);
        if (!leading && done) break;
    }
    sem_destroy(&job.wake);
    if (job.alone) return mv__store_write_alone(g->store, fn, ctx, err);
    if (err) mv_err_copy(err, &job.err);
    return job.rc;
}

/* ---- the writer threads ----------------------------------------------------------------- */

/* Sleeps until a lead is handed to the writer threads, then leads until the queue is empty. */
static void *writer_main(void *arg) {
    mv_gc *g = arg;
#ifdef __GLIBC__
    pthread_setname_np(pthread_self(), "mv-writer"); /* else it inherits its starter's name */
#endif
    for (;;) {
        while (sem_wait(&g->writer_wake) != 0) {
        }
        pthread_mutex_lock(&g->mu);
        bool handed = g->writer_leads > 0, quit = g->quit;
        if (handed) g->writer_leads--;
        pthread_mutex_unlock(&g->mu);
        if (handed)
            lead(g, true);
        else if (quit)
            return NULL;
    }
}

/* Starts the writer threads (one per lead) on the first asynchronous job. */
static bool writers_start(mv_gc *g) {
    pthread_mutex_lock(&g->start_mu);
    while (!g->start_failed && g->nwriters < g->max_leaders) {
        if (pthread_create(&g->writers[g->nwriters], NULL, writer_main, g) != 0)
            g->start_failed = true; /* fewer threads than leads: they take the leads in turn */
        else
            g->nwriters++;
    }
    bool ok = g->nwriters > 0;
    pthread_mutex_unlock(&g->start_mu);
    return ok;
}

bool mv__gc_write_async(mv_gc *g, mv_tx_fn fn, void *ctx, bool rerunnable, mv__write_done done,
                        void *done_ctx) {
    if (!writers_start(g)) return false;
    mv_gc_job *job = calloc(1, sizeof *job);
    if (!job) return false;
    *job = (mv_gc_job){
        .fn = fn, .ctx = ctx, .rerunnable = rerunnable, .on_done = done, .done_ctx = done_ctx};
    pthread_mutex_lock(&g->mu);
    bool wake = enqueue(g, job);
    if (wake) g->writer_leads++;
    pthread_mutex_unlock(&g->mu);
    if (wake) sem_post(&g->writer_wake);
    return true;
}

/* ---- the SQLite driver: one transaction, a savepoint per job ------------------------------- */

/* The batch's own statements, prepared once per connection (the statement cache) instead of
 * parsed on every transaction and every job. */
static const char SQL_GC_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_GC_SAVEPOINT[] = "SAVEPOINT mv_job";
static const char SQL_GC_ROLLBACK_TO[] = "ROLLBACK TO mv_job";
static const char SQL_GC_RELEASE[] = "RELEASE mv_job";
static const char SQL_GC_COMMIT[] = "COMMIT";

void mv__gc_run_sqlite(mv_store *s, mv_gc_job *batch) {
    mv_db *db;
    mv_err e = {0};
    mv_code rc = mv__store_acquire(s, &db, &e);
    uint64_t trips = rc == MV_OK && db->drv->round_trips ? db->drv->round_trips(db->conn) : 0;
    if (rc == MV_OK) {
        mv__store_write_lock(s, true);
        rc = mv_db_execf(db, SQL_GC_BEGIN, NULL, &e, "");
        if (rc == MV_OK) {
            bool single = batch->next == NULL, aborted = false;
            for (mv_gc_job *j = batch; j; j = j->next) {
                /* An error that made SQLite roll the whole transaction back (full disk, I/O) must
                 * not let the jobs after it run outside any transaction: they fail unrun, and
                 * the COMMIT below fails for the ones before. */
                if (aborted) {
                    j->rc = mv_err_set(&j->err, MV_STORE_UNAVAILABLE,
                                       "the store aborted the transaction; try again");
                    continue;
                }
                if (!single && (j->rc = mv_db_execf(db, SQL_GC_SAVEPOINT, NULL, &j->err, "")))
                    continue;
                j->rc = j->fn(db, j->ctx, &j->err);
                if (db->drv->in_transaction && !db->drv->in_transaction(db->conn)) {
                    aborted = true;
                    continue;
                }
                if (single) continue;
                if (j->rc != MV_OK) mv_db_execf(db, SQL_GC_ROLLBACK_TO, NULL, NULL, "");
                mv_db_execf(db, SQL_GC_RELEASE, NULL, NULL, "");
            }
            bool any_ok = false;
            for (mv_gc_job *j = batch; j; j = j->next)
                any_ok |= j->rc == MV_OK;
            rc = any_ok ? mv_db_execf(db, SQL_GC_COMMIT, NULL, &e, "") : MV_INTERNAL;
            if (rc != MV_OK) db->drv->exec(db->conn, "ROLLBACK", NULL);
            if (!any_ok) rc = MV_OK; /* nothing to commit: each job keeps its own error */
        }
        mv__store_write_lock(s, false);
        mv__store_release(s, db, trips);
    }
    if (rc != MV_OK) /* the batch as a whole failed: every job that had succeeded fails with it */
        for (mv_gc_job *j = batch; j; j = j->next)
            if (j->rc == MV_OK) j->rc = mv_err_copy(&j->err, &e);
    for (mv_gc_job *j = batch; j; j = j->next)
        mv__store_wrote(s, j->rc);
    if (rc == MV_OK) mv__store_committed(s);
}
