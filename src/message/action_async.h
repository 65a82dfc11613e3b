/* message/action_async.h — an action answered from its commit.
 *
 * An action without a handler (nothing to call: claim, sender notification and archive in one
 * transaction) needs no thread to wait for its write: the message is read and the checks of
 * handleAction run on the calling thread, the write joins the store's group commit
 * (store/write_async.h), and the completion — on the thread that committed — hands over the
 * result. Same rules and errors as mv_action_start. */
#ifndef MISSIVE_MESSAGE_ACTION_ASYNC_H
#define MISSIVE_MESSAGE_ACTION_ASYNC_H

#include <stdbool.h>

#include "missive/message.h"

/* The end of an asynchronous action, called exactly once: rc MV_OK with *result a new reference
 * (owned by the callee; JSON null for an action without a result), else the error in err (valid
 * only during the call). Runs on the store's committing thread (must not block on the store), or
 * on the caller's thread before mv__action_start_async returns when a check failed. */
typedef void (*mv__action_done)(void *ctx, mv_code rc, json_t *result, const mv_err *err);

/* Starts req as an asynchronous action and returns true (done follows), or returns false —
 * nothing written — when it must run as mv_action_start: the action has a handler (or a custom
 * one registered), needs an approval, or the store commits on the caller's thread (PostgreSQL,
 * groupCommit false). Reads the message on the calling thread (SQLite: a local read). req and
 * everything it points to stay valid until done. When it returns false after reading the message
 * and passing the checks, *checked (if checked is not NULL) holds them for
 * mv__action_start_checked, which goes on without reading the message again; else NULL. */
bool mv__action_start_async(mv_service *svc, const mv_action_request *req, mv__action_done done,
                            void *done_ctx, mv_action_pending **checked);

/* mv_action_start for a press mv__action_start_async read and checked (same req, which stays
 * valid as for mv_action_start): the approval gate, the claim, the handler. Takes checked. The
 * claim's conditional UPDATE decides, as always, so a message changed since the read is refused
 * as it would have been had it been read here. */
mv_code mv__action_start_checked(mv_action_pending *checked, void (*wake)(void *ctx),
                                 void *wake_ctx, mv_action_pending **pending, json_t **result,
                                 mv_err *err);
/* Frees a checked press that will not be started (NULL is fine). */
void mv__action_checked_free(mv_action_pending *checked);

#endif
