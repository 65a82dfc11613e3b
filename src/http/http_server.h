/* http/http_server.h — the daemon's own small HTTP model: a request, a response, a handler, a
 * per-request arena, and the server that feeds them from libmicrohttpd.
 *
 * Routing and handlers see only these structs, never a socket, so tests and fuzzers build a
 * request in memory and call mv_http_dispatch() (router.h) directly; server.c only converts
 * libmicrohttpd connections to and from them. Everything a request needs is allocated in its
 * arena and freed in one go when the request ends (nginx pools, PostgreSQL memory contexts). */
#ifndef MISSIVE_HTTP_SERVER_H
#define MISSIVE_HTTP_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "http/work_pool.h"
#include "missive/error.h"

/* The per-request arena: base/arena.h. */
/* ---- request / response ------------------------------------------------------------------ */

typedef struct mv_http_header {
    const char *name;
    const char *value;
} mv_http_header;

typedef struct mv_principal mv_principal; /* auth.h */

#define MV_HTTP_MAX_BODY (1024 * 1024) /* bodies over 1 MiB → 413 payload_too_large */
#define MV_HTTP_MAX_TARGET 8192        /* request target (path + query); longer → 414 */
#define MV_HTTP_MAX_HEAD (21 * 1024)   /* request line + header fields; more → 431 */
#define MV_HTTP_MAX_QUERY_PARAMS 256   /* query parameters; more → 400 */

typedef struct mv_http_request {
    mv_arena *arena;
    const char *method;    /* "GET", "POST", ... */
    const char *path;      /* raw path, still percent-encoded, without the query */
    mv_http_header *query; /* decoded query parameters, in order; value "" when absent */
    size_t nquery;
    mv_http_header *headers; /* as received; look up with mv_http_header_get (case-insensitive) */
    size_t nheaders, cap_headers;
    const char *body; /* body bytes (NUL-terminated for convenience), or NULL */
    size_t body_len;
    bool body_too_large; /* set by the server: the body exceeded MV_HTTP_MAX_BODY */

    /* Filled by mv_http_dispatch before the handler runs. */
    const char *route;      /* the matched pattern ("/messages/{id}"), NULL when none */
    void *route_ctx;        /* the matched route's ctx */
    mv_http_header *params; /* decoded path parameters by pattern name */
    size_t nparams;
    const mv_principal *principal; /* NULL on public routes */
    json_t *json; /* parsed body on routes that take one ({} when empty); borrowed */
    char request_id[48];
    double started_s; /* when the dispatch began (monotonic seconds) */

    /* Answering later (see mv_http_answer_later). */
    void *server_ctx;  /* set by the server: the request can be answered later; NULL otherwise */
    bool answer_later; /* the handler took a mv_http_later */
    bool io_thread;    /* set by the server: the handler runs on an I/O thread (must not block) */
} mv_http_request;

typedef struct mv_http_response {
    mv_arena *arena;
    int status; /* 0 until a handler sets it */
    mv_http_header *headers;
    size_t nheaders, cap_headers;
    const char *body; /* in the arena */
    size_t body_len;
    const char *detail;     /* for the request log only: the real message behind a masked 500 */
    const char *error_code; /* for the request log: the code of an error response */
    struct mv_sse_stream *stream; /* set by a streaming handler (sse.h): the body is this event
                                   * stream, not `body`; the response holds one reference */
} mv_http_response;

typedef void (*mv_http_handler)(mv_http_request *req, mv_http_response *res, void *app);

/* Prepares req from a method and a raw request target ("/messages?limit=5"): splits path and
 * query and percent-decodes the query. Strings are copied into arena. Fails with
 * MV_INVALID_ARGUMENT on a target that is not origin-form or is longer than
 * MV_HTTP_MAX_TARGET. */
mv_code mv_http_request_init(mv_http_request *req, mv_arena *arena, const char *method,
                             const char *target, mv_err *err);
/* Appends a header (copied into the arena). */
mv_code mv_http_request_add_header(mv_http_request *req, const char *name, const char *value,
                                   mv_err *err);
void mv_http_response_init(mv_http_response *res, mv_arena *arena);

/* ---- answering later ---------------------------------------------------------------------
 * A handler whose work waits on something other than a thread (an outgoing call on the event
 * loop) takes a mv_http_later and returns without an answer; its connection stays suspended.
 * Whoever finishes the work calls mv_http_later_done, from any thread: `then` runs on the
 * server's write pool (a thread that may block: store writes) once the handler has returned, fills
 * the response, and the server sends it (request log and metrics then, as for any answer). Until
 * then the request counts as in flight: a drain waits for it. */
typedef struct mv_http_later mv_http_later;
typedef void (*mv_http_then)(mv_http_request *req, mv_http_response *res, void *ctx);

/* NULL when req did not come through a server (mv_http_dispatch called directly): the handler
 * answers now. Otherwise exactly one of mv_http_later_done or (before anyone else saw the
 * handle, on the handler's thread) mv_http_later_cancel must follow. */
mv_http_later *mv_http_answer_later(mv_http_request *req);
/* The answer is ready to be made: runs then(req, res, ctx) on the write pool, then sends res.
 * May be called before the handler has returned (then waits for it). */
void mv_http_later_done(mv_http_later *later, mv_http_then then, void *ctx);
/* As mv_http_later_done, but `then` runs on the connection's I/O thread when it resumes (so it
 * must not block: it only renders what the completion left), followed by the request log and
 * the send: a completion on a busy thread (a store's committing thread) only resumes. */
void mv_http_later_done_io(mv_http_later *later, mv_http_then then, void *ctx);
/* The handler answers now after all (it fills res and returns as usual). */
void mv_http_later_cancel(mv_http_later *later);
/* Work answered later in rounds between calls on the loop (a saga's steps, a create's prepare and
 * payment calls), one round queued at a time, so one record serves them all: keep one in the
 * request's arena with `later` set, and pass mv_http_later_submit with it wherever a submit
 * function is asked for (mv__create_env, mv__action_env, mv_action_request, mv_saga_async). */
typedef struct mv_http_later_rounds {
    struct mv__job job;
    void (*fn)(void *arg);
    void *arg;
    mv_http_later *later;
} mv_http_later_rounds;
/* Queues fn(arg) on the write pool through rounds (an mv_http_later_rounds). */
void mv_http_later_submit(void *rounds, void (*fn)(void *arg), void *arg);

/* ---- server ------------------------------------------------------------------------------ */

typedef struct mv_router mv_router;
typedef struct mv_http_server mv_http_server;

typedef struct mv_http_server_options {
    const char *listen;        /* "HOST:PORT", "[v6]:PORT"; port 0 picks a free port */
    int threads;               /* threads for requests that write or call out (0 → 64) */
    int max_connections;       /* open connections at most (0 → 10000, capped by the
                                  descriptor limit) */
    int connection_timeout_ms; /* idle connection timeout (0 → 30000) */
    int io_threads;            /* libmicrohttpd I/O threads (0 → one per core) */
    int read_threads;          /* threads for GET/HEAD/OPTIONS requests (0 → 2 per core, ≥ 4) */
    int max_connections_per_ip; /* 0 → 512; negative → no limit */
    int header_timeout_ms;      /* a connection's first request head must arrive within this
                                   (0 → 10000); else 408 and closed */
    /* HTTPS when set: a gnutls_certificate_retrieve_function2 * that hands out the certificate
     * chain and key of each handshake (so they can change while the server runs). The head
     * checks then fall to libmicrohttpd, and header_timeout_ms bounds only the first bytes. */
    void *tls_cert_callback;
} mv_http_server_options;

/* Starts serving router (which must outlive the server). Fails with MV_INVALID_ARGUMENT on a
 * malformed listen address and MV_IO when the address cannot be bound. *out owned by the
 * caller: stop it with mv_http_server_drain() and free it with mv_http_server_free(). */
mv_code mv_http_server_start(const mv_http_server_options *opts, mv_router *router,
                             mv_http_server **out, mv_err *err);
/* The bound port (useful after listening on port 0). */
int mv_http_server_port(const mv_http_server *server);
/* Requests received and not yet answered. */
int mv_http_server_in_flight(mv_http_server *server);
/* Graceful stop, part one: requests already being handled run to the end (answered with
 * "Connection: close"); requests that arrive meanwhile are answered 503 draining; then stops
 * accepting connections and waits until every request received is answered, all within
 * timeout_ms. Returns true when none is left. */
bool mv_http_server_drain(mv_http_server *server, int64_t timeout_ms);
/* Closes every connection and joins the threads (waits for handlers still running). NULL-safe. */
void mv_http_server_free(mv_http_server *server);

/* Parses "HOST:PORT" / "[V6]:PORT" into host (without brackets) and port. Used by the server
 * and by the config check. */
mv_code mv_http_parse_listen(const char *listen, char *host, size_t host_size, int *port,
                             mv_err *err);
/* True for 127.0.0.0/8, ::1 and "localhost". */
bool mv_http_host_is_loopback(const char *host);

#endif
