/* message/create_async.h — a create answered from its commit.
 *
 * The daemon's common create (a declarative prepare, no payment session: nothing to call out)
 * needs no thread to wait for its write: the documents are built on the calling thread, the write
 * joins the store's group commit (store/write_async.h), and the completion — on the thread that
 * committed — hands over the messages. Same rules as mv_message_create: idempotency by client
 * request id (a fresh key is written blind together with the messages; a key that exists is
 * resolved by mv_message_create on a thread that may block), definitive failures recorded, the
 * change log and inbox counts in the same transaction. */
#ifndef MISSIVE_MESSAGE_CREATE_ASYNC_H
#define MISSIVE_MESSAGE_CREATE_ASYNC_H

#include <stdbool.h>

#include "missive/message.h"

/* The end of an asynchronous create, called exactly once: rc MV_OK with *messages a new array
 * (owned by the callee), else the error in err (valid only during the call). again: the client
 * request id already had a reservation — nothing was written; run mv_message_create (same
 * request) on a thread that may block, which replays, takes over or waits. Runs on the store's
 * committing thread (must not block on the store), or on the caller's thread before
 * mv__message_create_async returns when the request fails its checks. */
typedef void (*mv__create_done)(void *ctx, mv_code rc, json_t *messages, const mv_err *err,
                                bool again);

/* Starts req as an asynchronous create and returns true (done follows), or returns false —
 * nothing started — when this create must run as mv_message_create: it calls out (a prepare
 * hook or webhook, a payment session) or the store commits on the caller's thread (PostgreSQL,
 * groupCommit false). req and everything it points to stay valid until done, and req->payload
 * unchanged for good: the messages reference its payload and documents (no copy). */
bool mv__message_create_async(mv_service *svc, const mv_create_request *req, mv__create_done done,
                              void *done_ctx);

#endif
