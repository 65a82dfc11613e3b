/* base/callctx.h — what the current thread is working for: the W3C trace context of the request
 * that caused the work, and the ids (message, attempt, saga) and kind of the outgoing call being
 * made. Thread-local, so the webhook client can forward `traceparent` and report which message or
 * saga a failed call belonged to without every layer threading these through its arguments.
 *
 * Whoever starts a unit of work on a thread (the router per request, the outbox worker per row,
 * the recovery loop per saga) resets it first; callers of a webhook set the kind and ids just
 * before the call. Nothing here changes behaviour: it only labels logs, metrics and headers. */
#ifndef MISSIVE_BASE_CALLCTX_H
#define MISSIVE_BASE_CALLCTX_H

#include <stdbool.h>

typedef struct mv_callctx {
    char traceparent[64]; /* "" or a valid version-00 traceparent */
    char message_id[32];
    char attempt_id[64];
    char saga_id[160];
    const char *kind; /* static string: "handler", "prepare", "payment", "saga_step", ...; NULL */
} mv_callctx;

/* The calling thread's context (never NULL). */
mv_callctx *mv__callctx(void);
/* Clears every field of the calling thread's context. */
void mv__callctx_reset(void);
/* Sets the kind and ids of the next outgoing call (NULL leaves an id unchanged). */
void mv__callctx_call(const char *kind, const char *message_id, const char *attempt_id,
                      const char *saga_id);
/* True when s is a W3C traceparent: "00-<32 hex, not all 0>-<16 hex, not all 0>-<2 hex>"
 * (lower-case). */
bool mv__traceparent_valid(const char *s);

#endif
