/* http_sink.h — a tiny HTTP/1.1 server on 127.0.0.1 for tests: it records every request and
 * answers from a script. Safe to use from multi-threaded tests; each connection is served on its
 * own thread, one request per connection (answers carry `Connection: close`).
 *
 *   http_sink *s = http_sink_start();
 *   http_sink_push(s, &(http_sink_response){.status = 500});          // next request gets 500
 *   http_sink_push(s, &(http_sink_response){.path = "/charge", .delay_ms = 3000});
 *   ... call http_sink_url(s) ...                                     // "http://127.0.0.1:PORT"
 *   http_sink_request r;
 *   if (http_sink_get(s, 0, &r)) { CHECK_STR(r.method, "POST");
 *       CHECK_STR(http_sink_header(&r, "Idempotency-Key"), "k"); http_sink_request_free(&r); }
 *   http_sink_stop(s);                                                // then the port refuses
 *
 * Answer choice for each request, in order: the handler (if set), else the first queued response
 * whose path is NULL or a prefix of the request path (consumed), else the default (200 `{}`). */
#ifndef MISSIVE_TEST_HTTP_SINK_H
#define MISSIVE_TEST_HTTP_SINK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct http_sink http_sink;

typedef struct http_sink_response {
    int status;                /* 0 → 200 */
    const char *body;          /* NULL → "" (copied when queued) */
    int delay_ms;              /* wait before answering (cut short by http_sink_stop) */
    bool close_without_answer; /* read the request, then drop the connection */
    const char *path;          /* queued responses only: match requests whose path starts so */
} http_sink_response;

typedef struct http_sink_request {
    char *method, *path; /* path includes any query string */
    char **names, **values;
    int nheaders;
    char *body; /* NUL-terminated; body_len excludes the NUL */
    size_t body_len;
} http_sink_request;

/* Starts on a free port; NULL on failure. */
http_sink *http_sink_start(void);
/* Stops, joins its threads and frees it. NULL-safe. */
void http_sink_stop(http_sink *s);
int http_sink_port(const http_sink *s);
/* "http://127.0.0.1:PORT" (no trailing slash). */
const char *http_sink_url(const http_sink *s);

/* Queues one scripted answer (FIFO). */
void http_sink_push(http_sink *s, const http_sink_response *r);
/* The answer when nothing queued matches. */
void http_sink_set_default(http_sink *s, const http_sink_response *r);
/* A function deciding every answer (runs on the connection's thread; res->body must stay valid
 * until it returns — it is copied right after). NULL removes it. */
typedef void (*http_sink_handler)(void *ctx, const http_sink_request *req, http_sink_response *res);
void http_sink_set_handler(http_sink *s, http_sink_handler fn, void *ctx);

/* Requests received completely so far (recorded before any delay or answer). */
int http_sink_count(http_sink *s);
/* Waits until at least n requests were received; false after timeout_ms. */
bool http_sink_wait(http_sink *s, int n, int timeout_ms);
/* A copy of request i (0-based, arrival order); false if there is none. Free with
 * http_sink_request_free(). */
bool http_sink_get(http_sink *s, int i, http_sink_request *out);
void http_sink_request_free(http_sink_request *r);
/* Header value by case-insensitive name, or NULL. */
const char *http_sink_header(const http_sink_request *r, const char *name);

#endif
