/* message/create_async.h — the one create: started, then done.
 *
 * Every create — the daemon's, the library's blocking mv_message_create, mv_message_create_start
 * — is this one operation: mv__create_begin runs what needs no wait on the calling thread (the
 * checks; for a template that calls nothing outside, the documents and a write queued on the
 * store's group commit, store/write_async.h) and leaves the rest to rounds on env->submit's
 * threads: the reservation of a client request id, the prepare and payment calls (they wait on
 * the service's loop), and a wait on another request's live reservation (a timer on the loop, or
 * env->after). Same rules as documented for mv_message_create: idempotency by client request id,
 * definitive failures recorded, the change log and inbox counts in the same transaction. */
#ifndef MISSIVE_MESSAGE_CREATE_ASYNC_H
#define MISSIVE_MESSAGE_CREATE_ASYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "missive/message.h"

/* The end of a create, called exactly once: rc MV_OK with messages a new array (owned by the
 * callee; replayed when it is an earlier request's answer), else the error in err (valid only
 * during the call). Runs on whichever thread ended the work — the store's committing thread, a
 * submit thread, or the caller's before mv__create_begin returns — and must not block. */
typedef void (*mv__create_done)(void *ctx, mv_code rc, json_t *messages, bool replayed,
                                const mv_err *err);

typedef struct mv__create_env {
    /* runs fn(arg) soon on a thread that may block, never inline (one round queued at a time) */
    void (*submit)(void *submit_ctx, void (*fn)(void *arg), void *arg);
    void *submit_ctx;
    /* as submit, after ms; NULL: a timer on the service's loop, which then submits */
    void (*after)(void *submit_ctx, int64_t ms, void (*fn)(void *arg), void *arg);
    mv__create_done done;
    void *done_ctx;
    bool share_payload; /* req->payload is the caller's own copy, unchanged for good: the
                         * messages reference its payload and documents instead of copying */
    bool first_here;    /* the calling thread may block: the first round runs on it */
} mv__create_env;

/* Starts req; env->done follows. req and everything it points to stay valid until done ran. */
void mv__create_begin(mv_service *svc, const mv_create_request *req, const mv__create_env *env);

#endif
