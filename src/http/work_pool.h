/* http/work_pool.h — a fixed set of threads that run queued jobs in arrival order.
 *
 * The HTTP server suspends a request's connection and hands the request to one of these pools,
 * so an I/O thread never waits for a commit or for the network. The queue is intrusive (the job
 * lives inside the request it runs), so submitting allocates nothing and never fails; its length
 * is bounded by the server's connection limit (one request in flight per connection). */
#ifndef MISSIVE_HTTP_WORK_POOL_H
#define MISSIVE_HTTP_WORK_POOL_H

#include <stddef.h>

typedef struct mv__job {
    struct mv__job *next;
    void (*run)(struct mv__job *job);
} mv__job;

typedef struct mv__work_pool mv__work_pool;

/* Starts nthreads threads (at least 1). NULL when out of memory or no thread could start. */
mv__work_pool *mv__work_pool_new(int nthreads);
/* Queues job; job->run(job) runs on a pool thread. job must stay valid until run starts. */
void mv__work_pool_submit(mv__work_pool *pool, mv__job *job);
/* Runs every job still queued, then joins the threads and frees the pool. NULL-safe. */
void mv__work_pool_free(mv__work_pool *pool);

#endif
