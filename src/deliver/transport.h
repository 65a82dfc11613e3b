/* deliver/transport.h — what webhook.c, loop.c and smtp.c share: libcurl's one-time global
 * setup, URL redaction for error messages (credentials in a URL never reach a log), and one
 * webhook call split in three (set up, perform somewhere, conclude) so that the synchronous
 * client (curl_easy_perform on the caller's thread) and the event loop (curl_multi on one thread)
 * build the same request and classify the same outcomes. */
#ifndef MISSIVE_DELIVER_TRANSPORT_H
#define MISSIVE_DELIVER_TRANSPORT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/callctx.h"
#include "missive/deliver.h"

/* Runs curl_global_init once per process (thread-safe); false if it failed. */
bool mv_curl_ready(void);
/* Copies url into out without any "user:password@" part. */
void mv_url_redacted(const char *url, char *out, size_t size);

/* A response body being collected, up to max bytes. */
typedef struct sink_buf {
    char *data;
    size_t len, cap, max;
    bool too_large;
} sink_buf;

/* One outgoing call: the easy handle (CURLOPT_PRIVATE points back here) and what it owns. */
typedef struct mv__webhook_call {
    CURL *h;
    struct curl_slist *hdrs;
    sink_buf buf;
    char errbuf[CURL_ERROR_SIZE];
    const mv_webhook_config *cfg; /* borrowed: the observer and its context */
    const char *method;           /* "POST" or "GET" */
    char *url, *body;             /* owned */
    size_t body_len, max_response_bytes;
    struct timespec t0;
    mv_callctx cx; /* the caller's call context, for the observer */
    bool ready;    /* set up completely */
    bool started;  /* handed to libcurl (easy perform, or added to a multi handle) */
    bool aborted;  /* abandoned by a loop shutting down: concluded as MV_DRAINING */
} mv__webhook_call;

/* Builds the request (POST when body is non-NULL, else GET) with every limit, header and
 * signature; takes over body (freed by the cleanup) in every case. On failure err is set and
 * only the cleanup may follow. */
mv_code mv__webhook_call_setup(mv__webhook_call *w, const mv_webhook_config *cfg, const char *url,
                               char *body, size_t body_len, const char *key, mv_err *err);
/* Fills res (always) and err from the finished transfer's CURLcode, and calls the observer. */
mv_code mv__webhook_call_conclude(mv__webhook_call *w, CURLcode cc, mv_webhook_response *res,
                                  mv_err *err);
/* Frees what the call owns (not the struct itself). NULL-safe. */
void mv__webhook_call_cleanup(mv__webhook_call *w);

/* mv_webhook_post_async on a connection kept alive for the next call to the same receiver. Every
 * other call forbids reuse: on a reused connection that turns out dead libcurl sends the request
 * again, which only a receiver that drops duplicates by Idempotency-Key may see — the outbox's
 * deliveries (deliveryId), never an action's handler. */
mv_code mv__webhook_post_async_reusing(mv_loop *loop, const mv_webhook_config *cfg, const char *url,
                                       const json_t *body, const char *idempotency_key,
                                       mv_webhook_done done, void *ctx, mv_err *err);

#endif
