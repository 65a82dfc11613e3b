/* write_async_test.c — asynchronous store writes (store/write_async.h): jobs queued from many
 * threads beside synchronous writers share the group commit, each done is called exactly once
 * with its own outcome after the commit, a failing job rolls back only its own savepoint, a job
 * that aborts the shared transaction fails exactly the jobs it took with it, a done may queue
 * the next write, and closing the store ends every queued job first. On PostgreSQL (no group
 * commit) the same calls run on the caller's thread. */
#include <pthread.h>
#include <stdatomic.h>

#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "store/write_async.h"
#include "support/stores.h"

static const char SQL_CREATE[] = "CREATE TABLE IF NOT EXISTS g (id BIGINT PRIMARY KEY, v TEXT)";
static const char SQL_INSERT[] = "INSERT INTO g (id, v) VALUES (?, 'x')";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM g";
static const char SQL_EXISTS[] = "SELECT COUNT(*) FROM g WHERE id = ?";

static mv_code create_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE, err);
}

static int64_t count_rows(mv_store *s, const char *sql, int64_t id);

/* One write job and what its done saw. */
typedef struct job {
    int64_t id;
    atomic_int dones;
    mv_code rc;
    char message[64];
    bool committed_when_done; /* the row (of a successful job) was readable inside done */
    mv_store *store;
} job;

/* Inserts id and id+1000000; odd ids then fail deliberately, after writing. */
static mv_code insert_pair_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t id = ((job *)ctx)->id;
    mv_code rc = mv_db_execf(db, SQL_INSERT, NULL, err, "i", id);
    if (rc == MV_OK) rc = mv_db_execf(db, SQL_INSERT, NULL, err, "i", id + 1000000);
    if (rc == MV_OK && id % 2) rc = mv_err_set(err, MV_INVALID_ARGUMENT, "odd %lld", (long long)id);
    return rc;
}

static atomic_int all_dones;

static void job_done(mv_code rc, const mv_err *err, void *ctx) {
    job *j = ctx;
    j->rc = rc;
    if (err) mv_strlcpy(j->message, err->message, sizeof j->message);
    atomic_fetch_add(&j->dones, 1);
    atomic_fetch_add(&all_dones, 1);
}

static void wait_dones(int n) {
    for (int i = 0; i < 2000 && atomic_load(&all_dones) < n; i++)
        mv_sleep_ms(5);
}

typedef struct {
    mv_store *store;
    job *jobs;
    int n;
    bool async;
} worker;

static void *run_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        job *j = &w->jobs[i];
        if (w->async) {
            mv__store_write_async(w->store, insert_pair_tx, j, job_done, j);
        } else {
            mv_err err = {0};
            j->rc = mv_store_write(w->store, insert_pair_tx, j, &err);
            mv_strlcpy(j->message, err.message, sizeof j->message);
            atomic_fetch_add(&j->dones, 1);
            atomic_fetch_add(&all_dones, 1);
        }
    }
    return NULL;
}

STORE_TEST(async_jobs_beside_sync_writers_each_end_once_with_their_own_outcome) {
    enum { THREADS = 12, PER = 60 };
    mv_store *s = test_store_fresh(kind, "write_async_mix");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    atomic_store(&all_dones, 0);
    job *jobs = calloc(THREADS * PER, sizeof *jobs);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER; i++)
            jobs[t * PER + i].id = t * 1000 + i;
        w[t] = (worker){s, &jobs[t * PER], PER, t % 2 == 0}; /* half async, half sync */
        pthread_create(&th[t], NULL, run_worker, &w[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    wait_dones(THREADS * PER);
    int once = 0, right = 0;
    for (int i = 0; i < THREADS * PER; i++) {
        once += atomic_load(&jobs[i].dones) == 1;
        bool odd = jobs[i].id % 2;
        right += odd ? jobs[i].rc == MV_INVALID_ARGUMENT && strstr(jobs[i].message, "odd")
                     : jobs[i].rc == MV_OK;
    }
    CHECK_INT(once, THREADS * PER);
    CHECK_INT(right, THREADS * PER);
    /* both rows of every even id, none of any odd one */
    CHECK_INT(count_rows(s, SQL_COUNT, 0), THREADS * PER);
    mv_store_close(s);
    free(jobs);
}

typedef struct {
    const char *sql;
    int64_t id, n;
} count_arg;

static mv_code count_tx(mv_db *db, void *ctx, mv_err *err) {
    count_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = a->sql == SQL_EXISTS ? mv_db_row(db, a->sql, &st, err, "i", a->id)
                                      : mv_db_row(db, a->sql, &st, err, "");
    a->n = st ? mv_stmt_int64(st, 0) : -1;
    mv_stmt_done(st);
    return rc;
}

static int64_t count_rows(mv_store *s, const char *sql, int64_t id) {
    count_arg a = {sql, id, -1};
    mv_err err = {0};
    if (mv_store_read(s, count_tx, &a, &err) != MV_OK) return -2;
    return a.n;
}

/* ---- done runs after the commit, and may queue the next write ---- */

static mv_code insert_one_tx(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_INSERT, NULL, err, "i", ((job *)ctx)->id);
}

typedef struct {
    job jobs[50];
    int next;
    mv_store *store;
    atomic_int finished;
    int visible; /* dones whose own row another connection could read inside the done */
} chain;

static void chain_done(mv_code rc, const mv_err *err, void *ctx);

static void chain_step(chain *c) {
    job *j = &c->jobs[c->next++];
    mv__store_write_async(c->store, insert_one_tx, j, chain_done, c);
}

static void chain_done(mv_code rc, const mv_err *err, void *ctx) {
    (void)err;
    chain *c = ctx;
    job *j = &c->jobs[c->next - 1];
    j->rc = rc;
    atomic_fetch_add(&j->dones, 1);
    /* committed before done: a read transaction (its own connection) sees the row */
    if (rc == MV_OK && count_rows(c->store, SQL_EXISTS, j->id) == 1) c->visible++;
    if (c->next < 50)
        chain_step(c);
    else
        atomic_store(&c->finished, 1);
}

STORE_TEST(a_done_runs_after_its_commit_and_may_queue_the_next_write) {
    mv_store *s = test_store_fresh(kind, "write_async_chain");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    chain *c = calloc(1, sizeof *c);
    c->store = s;
    for (int i = 0; i < 50; i++)
        c->jobs[i].id = 5000 + i;
    chain_step(c);
    for (int i = 0; i < 2000 && !atomic_load(&c->finished); i++)
        mv_sleep_ms(5);
    CHECK_INT(atomic_load(&c->finished), 1);
    int once = 0;
    for (int i = 0; i < 50; i++)
        once += atomic_load(&c->jobs[i].dones) == 1 && c->jobs[i].rc == MV_OK;
    CHECK_INT(once, 50);
    CHECK_INT(c->visible, 50);
    CHECK_INT(count_rows(s, SQL_COUNT, 0), 50);
    mv_store_close(s);
    free(c);
}

/* ---- a job that aborts the shared transaction ---- */

/* Inserts id; every 7th then rolls the whole transaction back, as SQLite itself does on a full
 * disk or an I/O error, and fails. */
static mv_code insert_or_abort_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t id = ((job *)ctx)->id;
    mv_code rc = mv_db_execf(db, SQL_INSERT, NULL, err, "i", id);
    if (rc == MV_OK && id % 7 == 0) {
        mv_db_exec(db, "ROLLBACK", NULL);
        rc = mv_err_set(err, MV_STORE_UNAVAILABLE, "simulated abort");
    }
    return rc;
}

static void *abort_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        job *j = &w->jobs[i];
        if (w->async) {
            mv__store_write_async(w->store, insert_or_abort_tx, j, job_done, j);
        } else {
            j->rc = mv_store_write(w->store, insert_or_abort_tx, j, NULL);
            atomic_fetch_add(&j->dones, 1);
            atomic_fetch_add(&all_dones, 1);
        }
    }
    return NULL;
}

TEST(a_job_that_aborts_the_batch_fails_exactly_the_async_jobs_it_took_with_it) {
    enum { THREADS = 8, PER = 60 };
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path("write-async-abort.db"));
    mv_store *s;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    atomic_store(&all_dones, 0);
    job *jobs = calloc(THREADS * PER, sizeof *jobs);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER; i++)
            jobs[t * PER + i].id = 1 + t * 1000 + i;
        w[t] = (worker){s, &jobs[t * PER], PER, t % 4 != 0}; /* mostly async */
        pthread_create(&th[t], NULL, abort_worker, &w[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    wait_dones(THREADS * PER);
    /* the invariant: a write is durable exactly when its done (or return) said it succeeded */
    int mismatches = 0, ok = 0, aborters_ok = 0, once = 0;
    for (int i = 0; i < THREADS * PER; i++) {
        once += atomic_load(&jobs[i].dones) == 1;
        bool present = count_rows(s, SQL_EXISTS, jobs[i].id) == 1;
        mismatches += (jobs[i].rc == MV_OK) != present;
        ok += jobs[i].rc == MV_OK;
        aborters_ok += jobs[i].id % 7 == 0 && jobs[i].rc == MV_OK;
    }
    CHECK_INT(once, THREADS * PER);
    CHECK_INT(mismatches, 0);
    CHECK(ok > 0);
    CHECK_INT(aborters_ok, 0);
    mv_store_close(s);
    free(jobs);
}

/* ---- closing with jobs queued ---- */

TEST(closing_the_store_ends_every_queued_async_job_first) {
    enum { N = 400 };
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path("write-async-close.db"));
    mv_store *s;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    atomic_store(&all_dones, 0);
    job *jobs = calloc(N, sizeof *jobs);
    for (int i = 0; i < N; i++) {
        jobs[i].id = 2 * (i + 1); /* even: every one succeeds */
        mv__store_write_async(s, insert_pair_tx, &jobs[i], job_done, &jobs[i]);
    }
    mv_store_close(s); /* at once: most jobs are still queued */
    int once = 0, ok = 0;
    for (int i = 0; i < N; i++) {
        once += atomic_load(&jobs[i].dones) == 1;
        ok += jobs[i].rc == MV_OK;
    }
    CHECK_INT(atomic_load(&all_dones), N);
    CHECK_INT(once, N);
    CHECK_INT(ok, N);
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_INT(count_rows(s, SQL_COUNT, 0), 2 * N);
    mv_store_close(s);
    free(jobs);
}

TEST(without_group_commit_an_async_write_ends_on_the_callers_thread_before_returning) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path("write-async-nogc.db"));
    mv_store *s;
    mv_err err = {0};
    mv_store_options o = {.no_group_commit = true};
    REQUIRE(mv_store_open(url, &o, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    CHECK(!mv__store_writes_async(s));
    atomic_store(&all_dones, 0);
    job a = {.id = 2}, b = {.id = 3};
    mv__store_write_async(s, insert_pair_tx, &a, job_done, &a);
    CHECK_INT(atomic_load(&a.dones), 1);
    CHECK_CODE(a.rc, MV_OK, NULL);
    mv__store_write_async(s, insert_pair_tx, &b, job_done, &b);
    CHECK_INT(atomic_load(&b.dones), 1);
    CHECK_INT(b.rc, MV_INVALID_ARGUMENT);
    CHECK(strstr(b.message, "odd 3") != NULL);
    CHECK_INT(count_rows(s, SQL_COUNT, 0), 2);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(
        async_jobs_beside_sync_writers_each_end_once_with_their_own_outcome,
        a_done_runs_after_its_commit_and_may_queue_the_next_write,
        a_job_that_aborts_the_batch_fails_exactly_the_async_jobs_it_took_with_it,
        closing_the_store_ends_every_queued_async_job_first,
        without_group_commit_an_async_write_ends_on_the_callers_thread_before_returning);
}
