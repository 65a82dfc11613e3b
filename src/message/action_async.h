/* message/action_async.h — the one action: started, then done.
 *
 * Every press — the daemon's, the library's blocking mv_action_handle — is this one operation:
 * mv__action_begin reads and checks the press on the calling thread when the store reads locally,
 * and an action with nothing to call or approve goes no further than its write, queued on the
 * store's group commit (store/write_async.h). The rest runs in rounds on env->submit's threads:
 * the read on a remote store, the approval gate, the claim, a C handler; a handler that waits on
 * the service's loop (a webhook, the webhook payment provider, a book's saga) holds no thread,
 * its lease kept by the loop's timer, and its completion queues the round that records the
 * outcome. Same rules and errors as mv_action_handle. */
#ifndef MISSIVE_MESSAGE_ACTION_ASYNC_H
#define MISSIVE_MESSAGE_ACTION_ASYNC_H

#include <stdbool.h>

#include "missive/message.h"

/* The end of an action, called exactly once: rc MV_OK with result a new reference (owned by the
 * callee; JSON null for an action without a result), else the error in err (valid only during
 * the call). Runs on whichever thread ended the work — the store's committing thread, a submit
 * thread, or the caller's before mv__action_begin returns — and must not block. */
typedef void (*mv__action_done)(void *ctx, mv_code rc, json_t *result, const mv_err *err);

typedef struct mv__action_env {
    /* runs fn(arg) soon on a thread that may block, never inline (one round queued at a time) */
    void (*submit)(void *submit_ctx, void (*fn)(void *arg), void *arg);
    void *submit_ctx;
    mv__action_done done;
    void *done_ctx;
    bool first_here; /* the calling thread may block: the read and first round run on it */
} mv__action_env;

/* Starts req; env->done follows. req and everything it points to stay valid until done ran. */
void mv__action_begin(mv_service *svc, const mv_action_request *req, const mv__action_env *env);

#endif
