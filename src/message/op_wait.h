/* message/op_wait.h — the blocking library calls as a wait on the one asynchronous operation.
 *
 * mv_message_create (and the other blocking calls built on a start/done operation) start the
 * operation with a waiter as its submit and after, and run what it queues on the caller's own
 * thread until done: the caller's thread is the operation's only worker, the store's committing
 * thread or the loop may end it, and a timed step waits on a condition variable, not a sleep. */
#ifndef MISSIVE_MESSAGE_OP_WAIT_H
#define MISSIVE_MESSAGE_OP_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct mv__waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void (*fn)(void *arg); /* the one queued step, due at `at` (monotonic ms) */
    void *arg;
    int64_t at;
    bool finished;
} mv__waiter;

void mv__waiter_init(mv__waiter *w);
/* A submit and an after (create_async.h) queueing on w (the void * is the waiter). */
void mv__waiter_submit(void *w, void (*fn)(void *arg), void *arg);
void mv__waiter_after(void *w, int64_t ms, void (*fn)(void *arg), void *arg);
/* The operation is done (from its done, on any thread): the run returns. */
void mv__waiter_finish(mv__waiter *w);
/* Runs the queued steps on this thread until finished, then frees w's resources. */
void mv__waiter_run(mv__waiter *w);

#endif
