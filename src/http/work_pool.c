/* work_pool.c — N threads, one mutex, a FIFO of intrusive jobs and a LIFO stack of idle threads.
 *
 * A job submitted while a thread is idle is handed to that thread directly: the submitter pops
 * the most recently idled thread (its stack and caches are the warmest), stores the job in it
 * and posts its own semaphore after releasing the mutex, so the woken thread runs the job
 * without first taking the pool's mutex again. (With one condition variable signalled under the
 * mutex, the woken thread used to wake only to sleep on the mutex the submitter still held: two
 * context switches per request instead of one.) Jobs queue only when every thread is busy.
 * Freeing the pool finishes every queued job first, so a request that was accepted is always
 * answered. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>

#include "http/work_pool.h"

typedef struct idle_thread {
    struct idle_thread *next;
    sem_t wake;
    mv__job *job; /* the job handed over, or NULL when woken to stop */
} idle_thread;

struct mv__work_pool {
    pthread_mutex_t mu;
    mv__job *head, *tail;
    idle_thread *idle; /* guarded by mu */
    bool stopping;
    int nthreads;
    pthread_t threads[];
};

static void *worker(void *p) {
    mv__work_pool *pool = p;
    idle_thread self = {0};
    sem_init(&self.wake, 0, 0);
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        mv__job *job = pool->head;
        if (job) {
            pool->head = job->next;
            if (!pool->head) pool->tail = NULL;
        } else {
            if (pool->stopping) break;
            self.job = NULL;
            self.next = pool->idle;
            pool->idle = &self;
            pthread_mutex_unlock(&pool->mu);
            while (sem_wait(&self.wake) != 0 && errno == EINTR) {
            }
            job = self.job; /* we are off the idle stack: whoever posted popped us */
            if (!job) {
                pthread_mutex_lock(&pool->mu);
                continue;
            }
            job->next = NULL;
            job->run(job);
            pthread_mutex_lock(&pool->mu);
            continue;
        }
        pthread_mutex_unlock(&pool->mu);
        job->next = NULL;
        job->run(job);
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    sem_destroy(&self.wake);
    return NULL;
}

mv__work_pool *mv__work_pool_new(int nthreads) {
    if (nthreads < 1) nthreads = 1;
    mv__work_pool *pool = calloc(1, sizeof *pool + (size_t)nthreads * sizeof(pthread_t));
    if (!pool) return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1024 * 1024); /* handlers keep little on the stack */
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&pool->threads[i], &attr, worker, pool) != 0) break;
        pool->nthreads++;
    }
    pthread_attr_destroy(&attr);
    if (pool->nthreads == 0) {
        mv__work_pool_free(pool);
        return NULL;
    }
    return pool;
}

void mv__work_pool_submit(mv__work_pool *pool, mv__job *job) {
    job->next = NULL;
    pthread_mutex_lock(&pool->mu);
    idle_thread *t = pool->idle;
    if (t) {
        pool->idle = t->next;
        t->job = job;
    } else {
        if (pool->tail)
            pool->tail->next = job;
        else
            pool->head = job;
        pool->tail = job;
    }
    pthread_mutex_unlock(&pool->mu);
    if (t) sem_post(&t->wake);
}

void mv__work_pool_free(mv__work_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->stopping = true;
    idle_thread *t = pool->idle;
    pool->idle = NULL;
    pthread_mutex_unlock(&pool->mu);
    while (t) {
        idle_thread *next = t->next; /* read before the post: t lives on its thread's stack */
        sem_post(&t->wake);
        t = next;
    }
    for (int i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}
