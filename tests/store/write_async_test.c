/* write_async_test.c — asynchronous store writes (store/write_async.h): jobs queued from many
 * threads beside synchronous writers share the group commit, each done is called exactly once
 * with its own outcome after the commit, a failing job rolls back only its own savepoint, a job
 * that aborts the shared transaction fails exactly the jobs it took with it, a done may queue
 * the next write, and closing the store ends every queued job first — on both stores. Without
 * group commit the same calls run on the caller's thread. A process killed with SIGKILL while
 * jobs are in flight loses none whose done reported success. */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

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

STORE_TEST(closing_the_store_ends_every_queued_async_job_first) {
    enum { N = 400 };
    const char *url = test_store_url(kind, "write_async_close");
    REQUIRE(url);
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

/* ---- the caller never runs the commit ---- */

typedef struct {
    sem_t entered, release;
    pthread_t caller, ran_on, done_on;
    atomic_int dones;
    mv_code rc;
} gate;

static mv_code gated_tx(mv_db *db, void *ctx, mv_err *err) {
    gate *g = ctx;
    g->ran_on = pthread_self();
    sem_post(&g->entered);
    while (sem_wait(&g->release) != 0) {
    }
    return mv_db_execf(db, SQL_INSERT, NULL, err, "i", (int64_t)77);
}

static void gated_done(mv_code rc, const mv_err *err, void *ctx) {
    (void)err;
    gate *g = ctx;
    g->rc = rc;
    g->done_on = pthread_self();
    atomic_fetch_add(&g->dones, 1);
}

STORE_TEST(an_async_write_returns_before_its_callback_runs_and_ends_on_another_thread) {
    mv_store *s = test_store_fresh(kind, "write_async_gate");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    CHECK(mv__store_writes_async(s));
    gate *g = calloc(1, sizeof *g);
    sem_init(&g->entered, 0, 0);
    sem_init(&g->release, 0, 0);
    g->caller = pthread_self();
    /* the callback blocks until released: were it run on this thread, this call never returns */
    mv__store_write_async(s, gated_tx, g, gated_done, g);
    while (sem_wait(&g->entered) != 0) {
    }
    CHECK_INT(atomic_load(&g->dones), 0);
    CHECK(!pthread_equal(g->ran_on, g->caller));
    CHECK_INT(count_rows(s, SQL_COUNT, 0), 0); /* not committed yet: nothing visible */
    sem_post(&g->release);
    for (int i = 0; i < 2000 && atomic_load(&g->dones) == 0; i++)
        mv_sleep_ms(1);
    CHECK_INT(atomic_load(&g->dones), 1);
    CHECK_CODE(g->rc, MV_OK, NULL);
    CHECK(!pthread_equal(g->done_on, g->caller));
    CHECK_INT(count_rows(s, SQL_EXISTS, 77), 1);
    mv_store_close(s);
    sem_destroy(&g->entered);
    sem_destroy(&g->release);
    free(g);
}

/* ---- rerunnable asynchronous jobs ---- */

/* Rerunnable: sets nothing outside the transaction but its count of runs. */
static mv_code insert_rerunnable_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t id = ((job *)ctx)->id;
    mv_code rc = mv_db_execf_later(db, SQL_INSERT, err, "i", id);
    if (rc == MV_OK && id % 5 == 0 && id < 100000)
        rc = mv_err_set(err, MV_INVALID_ARGUMENT, "fifth %lld", (long long)id);
    return rc;
}

static void *rerunnable_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        job *j = &w->jobs[i];
        if (w->async) {
            mv__store_write_async_rerunnable(w->store, insert_rerunnable_tx, j, job_done, j);
        } else {
            mv_err err = {0};
            j->rc = mv__store_write_rerunnable(w->store, insert_rerunnable_tx, j, &err);
            mv_strlcpy(j->message, err.message, sizeof j->message);
            atomic_fetch_add(&j->dones, 1);
            atomic_fetch_add(&all_dones, 1);
        }
    }
    return NULL;
}

STORE_TEST(rerunnable_async_jobs_share_batches_and_a_failing_one_fails_alone) {
    enum { THREADS = 16, PER = 40 };
    mv_store *s = test_store_fresh(kind, "write_async_rerun");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    atomic_store(&all_dones, 0);
    job *jobs = calloc(THREADS * PER, sizeof *jobs);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER; i++)
            jobs[t * PER + i].id = 1 + t * 1000 + i;
        w[t] = (worker){s, &jobs[t * PER], PER, t % 4 != 0}; /* mostly async */
        pthread_create(&th[t], NULL, rerunnable_worker, &w[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    wait_dones(THREADS * PER);
    int once = 0, right = 0, mismatches = 0, ok = 0;
    for (int i = 0; i < THREADS * PER; i++) {
        once += atomic_load(&jobs[i].dones) == 1;
        bool fifth = jobs[i].id % 5 == 0;
        right += fifth ? jobs[i].rc == MV_INVALID_ARGUMENT && strstr(jobs[i].message, "fifth")
                       : jobs[i].rc == MV_OK;
        mismatches += (jobs[i].rc == MV_OK) != (count_rows(s, SQL_EXISTS, jobs[i].id) == 1);
        ok += jobs[i].rc == MV_OK;
    }
    CHECK_INT(once, THREADS * PER);
    CHECK_INT(right, THREADS * PER);
    CHECK_INT(mismatches, 0);
    CHECK_INT(count_rows(s, SQL_COUNT, 0), ok);
    /* then all succeed: on PostgreSQL they share round trips (a batch: one flush) */
    memset(jobs, 0, THREADS * PER * sizeof *jobs);
    atomic_store(&all_dones, 0);
    uint64_t trips = mv__store_round_trips(s);
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER; i++)
            jobs[t * PER + i].id = 100000 + t * 1000 + i;
        pthread_create(&th[t], NULL, rerunnable_worker, &w[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    wait_dones(THREADS * PER);
    ok = 0;
    for (int i = 0; i < THREADS * PER; i++)
        ok += jobs[i].rc == MV_OK && atomic_load(&jobs[i].dones) == 1;
    CHECK_INT(ok, THREADS * PER);
    uint64_t used = mv__store_round_trips(s) - trips;
    if (strcmp(kind, "postgres") == 0) {
        fprintf(stderr, "postgres: %d rerunnable writes in %llu round trips\n", THREADS * PER,
                (unsigned long long)used);
        CHECK(used < (uint64_t)(THREADS * PER) * 3 / 4);
    }
    mv_store_close(s);
    free(jobs);
}

/* ---- a process killed mid-flight ---- */

static int report_fd;

static void report_done(mv_code rc, const mv_err *err, void *ctx) {
    (void)err;
    job *j = ctx;
    if (rc == MV_OK && write(report_fd, &j->id, sizeof j->id) != (ssize_t)sizeof j->id) _exit(3);
}

STORE_TEST(a_process_killed_with_async_jobs_in_flight_loses_none_it_reported_done) {
    const char *url = test_store_url(kind, "write_async_kill");
    REQUIRE(url);
    mv_store *s;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    mv_store_close(s);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        report_fd = fds[1];
        mv_store *cs;
        if (mv_store_open(url, NULL, &cs, NULL) != MV_OK) _exit(1);
        static job jobs[200000];
        for (int i = 0; i < 200000; i++) { /* far more than can finish before the kill */
            jobs[i].id = 2 * (i + 1);
            if (i % 2)
                mv__store_write_async(cs, insert_pair_tx, &jobs[i], report_done, &jobs[i]);
            else
                mv__store_write_async_rerunnable(cs, insert_one_tx, &jobs[i], report_done,
                                                 &jobs[i]);
            if (i % 64 == 63) mv_sleep_ms(1);
        }
        _exit(2);
    }
    close(fds[1]);
    enum { WANT = 300 };
    int64_t *ids = calloc(400000, sizeof *ids);
    int n = 0;
    while (n < WANT && read(fds[0], &ids[n], sizeof ids[n]) == (ssize_t)sizeof ids[n])
        n++;
    kill(pid, SIGKILL);
    /* what the child reported before it died: every one of those writes was durable */
    while (n < 400000 && read(fds[0], &ids[n], sizeof ids[n]) == (ssize_t)sizeof ids[n])
        n++;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(n >= WANT);
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    int missing = 0;
    for (int i = 0; i < n; i++)
        missing += count_rows(s, SQL_EXISTS, ids[i]) != 1;
    CHECK_INT(missing, 0);
    CHECK(count_rows(s, SQL_COUNT, 0) >= n);
    mv_store_close(s);
    free(ids);
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
        an_async_write_returns_before_its_callback_runs_and_ends_on_another_thread,
        rerunnable_async_jobs_share_batches_and_a_failing_one_fails_alone,
        a_process_killed_with_async_jobs_in_flight_loses_none_it_reported_done,
        without_group_commit_an_async_write_ends_on_the_callers_thread_before_returning);
}
