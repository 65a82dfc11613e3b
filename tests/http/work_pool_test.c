/* work_pool_test.c — the request pool: every job submitted (from several threads at once, to
 * idle and to busy threads alike) runs exactly once, on a pool thread, and freeing the pool runs
 * the jobs still queued before it returns. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "http/work_pool.h"
#include "test.h"

typedef struct counted_job {
    mv__job job; /* first: run receives this pointer */
    atomic_int runs;
    pthread_t ran_on;
    int sleep_us;
} counted_job;

static void count_run(mv__job *j) {
    counted_job *c = (counted_job *)j;
    if (c->sleep_us) usleep((useconds_t)c->sleep_us);
    c->ran_on = pthread_self();
    atomic_fetch_add(&c->runs, 1);
}

#define SUBMITTERS 4
#define PER_SUBMITTER 5000

typedef struct {
    mv__work_pool *pool;
    counted_job *jobs;
} submitter_arg;

static void *submit_all(void *p) {
    submitter_arg *a = p;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        a->jobs[i].job.run = count_run;
        a->jobs[i].sleep_us = i % 1000 == 0 ? 2000 : 0; /* now and then every thread is busy */
        mv__work_pool_submit(a->pool, &a->jobs[i].job);
        if (i % 7 == 0) usleep(10); /* and now and then threads go idle */
    }
    return NULL;
}

TEST(every_job_submitted_from_four_threads_runs_exactly_once_on_a_pool_thread) {
    mv__work_pool *pool = mv__work_pool_new(3);
    REQUIRE(pool != NULL);
    static counted_job jobs[SUBMITTERS][PER_SUBMITTER];
    pthread_t t[SUBMITTERS];
    submitter_arg args[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++) {
        args[i] = (submitter_arg){pool, jobs[i]};
        REQUIRE(pthread_create(&t[i], NULL, submit_all, &args[i]) == 0);
    }
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_join(t[i], NULL);
    mv__work_pool_free(pool); /* runs what is still queued */
    int wrong = 0, on_submitter = 0;
    for (int i = 0; i < SUBMITTERS; i++)
        for (int k = 0; k < PER_SUBMITTER; k++) {
            wrong += atomic_load(&jobs[i][k].runs) != 1;
            for (int s = 0; s < SUBMITTERS; s++)
                on_submitter += pthread_equal(jobs[i][k].ran_on, t[s]) != 0;
        }
    CHECK_INT(wrong, 0);
    CHECK_INT(on_submitter, 0);
}

TEST(freeing_the_pool_runs_the_jobs_still_queued_behind_a_slow_one) {
    mv__work_pool *pool = mv__work_pool_new(1);
    REQUIRE(pool != NULL);
    static counted_job jobs[50];
    jobs[0].sleep_us = 50000; /* the only thread is busy: the rest queue */
    for (int i = 0; i < 50; i++) {
        jobs[i].job.run = count_run;
        mv__work_pool_submit(pool, &jobs[i].job);
    }
    mv__work_pool_free(pool);
    int ran = 0;
    for (int i = 0; i < 50; i++)
        ran += atomic_load(&jobs[i].runs);
    CHECK_INT(ran, 50);
}

int main(void) {
    return RUN_TESTS(every_job_submitted_from_four_threads_runs_exactly_once_on_a_pool_thread,
                     freeing_the_pool_runs_the_jobs_still_queued_behind_a_slow_one);
}
