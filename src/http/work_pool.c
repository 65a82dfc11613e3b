/* work_pool.c — N threads, one mutex, one condition variable, a FIFO of intrusive jobs.
 *
 * Deliberately plain: the work behind a request (a commit, a webhook call) costs milliseconds,
 * so a lock-free queue would buy nothing measurable. Freeing the pool finishes every queued job
 * first, so a request that was accepted is always answered. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "http/work_pool.h"

struct mv__work_pool {
    pthread_mutex_t mu;
    pthread_cond_t ready;
    mv__job *head, *tail;
    bool stopping;
    int nthreads;
    pthread_t threads[];
};

static void *worker(void *p) {
    mv__work_pool *pool = p;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->head && !pool->stopping)
            pthread_cond_wait(&pool->ready, &pool->mu);
        mv__job *job = pool->head;
        if (!job) break; /* stopping and nothing left */
        pool->head = job->next;
        if (!pool->head) pool->tail = NULL;
        pthread_mutex_unlock(&pool->mu);
        job->next = NULL;
        job->run(job);
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

mv__work_pool *mv__work_pool_new(int nthreads) {
    if (nthreads < 1) nthreads = 1;
    mv__work_pool *pool = calloc(1, sizeof *pool + (size_t)nthreads * sizeof(pthread_t));
    if (!pool) return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->ready, NULL);
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
    if (pool->tail)
        pool->tail->next = job;
    else
        pool->head = job;
    pool->tail = job;
    pthread_cond_signal(&pool->ready);
    pthread_mutex_unlock(&pool->mu);
}

void mv__work_pool_free(mv__work_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->ready);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->ready);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}
