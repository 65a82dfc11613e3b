/* server.c — libmicrohttpd in, mv_http_request out; mv_http_response in, bytes out; and the
 * threads that keep the two apart.
 *
 * The request path: the gate (gate.c) accepts a connection and holds it until its first request
 * head is complete and well-formed, then hands the socket to libmicrohttpd, whose I/O threads
 * (about one per core, epoll) read heads and bodies. When a request is complete its I/O thread
 * builds the mv_http_request, suspends the connection and queues the request on a work pool —
 * reads (GET/HEAD/OPTIONS) on one, everything else (commits, webhooks, sagas) on another, so a
 * slow webhook never queues a health check or a list behind it. The pool thread runs
 * mv_http_dispatch and resumes the connection; the I/O thread then sends the answer. An I/O
 * thread therefore never waits for a store or the network, and a slow client only costs a socket.
 * A handler whose work waits on an outgoing call may answer later (mv_http_answer_later): its
 * pool thread returns at once, and the completion queues the answer back on the write pool.
 *
 * A route whose handler never blocks (mv_route.io_thread: the create and the action, whose
 * write joins the group commit without waiting for it) runs on the I/O thread itself, whatever
 * the auth mode (a token needing a key refresh parks): an error is answered there and then, without
 * suspending; otherwise the connection is suspended, and the completion — on the store's
 * committing thread — keeps the outcome and resumes the connection (mv_http_later_done_io); the
 * I/O thread then renders the answer, writes the request log line and sends it: one wake-up of
 * the committing thread per batch and one of the I/O thread per answer, instead of a pool
 * hand-off and a commit wait per request. Anything such a handler finds it must block on (a
 * prepare webhook, a key already reserved, an action's handler) it hands to the write pool
 * in rounds (mv_http_later_submit).
 *
 * Everything with meaning (routing, checks, errors) happens in mv_http_dispatch; this file only
 * converts. Bodies are buffered up to MV_HTTP_MAX_BODY: a Content-Length over the limit is
 * answered as soon as the headers are in (the dispatch still runs authentication and route checks
 * first, in the fixed order), and a chunked body is counted while it arrives — past the limit it is
 * discarded rather than buffered, then answered 413; past DISCARD_LIMIT the connection is
 * dropped. The path and query reach us still percent-encoded (the unescape callback is a no-op)
 * so that "%2F" inside a path parameter cannot change which route matches. Errors found before a
 * route runs (a head the gate refuses, a too-long target, too many header bytes, an unsupported
 * Transfer-Encoding) are answered in the same JSON error shape as every other error.
 *
 * Graceful stop (drain): requests already admitted run to the end and are answered; a request that
 * arrives during the drain is answered 503 draining with "Connection: close"; when the admitted
 * ones are done the gate stops accepting, and the drain waits (up to its timeout) until every
 * request received has been answered. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/gate.h"
#include "http/jwt.h"
#include "http/mhd_errors.h"
#include "http/request.h"
#include "http/router.h"
#include "http/sse.h"
#include "http/work_pool.h"

#define DISCARD_LIMIT (16 * MV_HTTP_MAX_BODY)
#define CONNECTION_MEMORY (64 * 1024) /* request line + headers must fit, with read buffer */
#define DRAIN_GRACE_MS 200            /* after the last answer: time for clients to hang up */

_Static_assert(MV_HTTP_MAX_HEAD + 1024 < CONNECTION_MEMORY / 2,
               "a head the gate accepts must fit libmicrohttpd's read buffer");
_Static_assert(MV_JWT_MAX_TOKEN + 4096 < MV_HTTP_MAX_HEAD,
               "a bearer token just over the JWT limit must reach the JWT check (401), not 431");

struct mv_http_server {
    struct MHD_Daemon *daemon;
    mv__gate *gate;
    mv__work_pool *reads, *writes;
    mv_router *router;
    int port;
    atomic_bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int in_flight;              /* guarded by mu: requests received and not yet answered */
    int admitted;               /* guarded by mu: requests handed to a pool and not yet answered */
    struct conn_request *spare; /* guarded by mu: finished requests kept for reuse */
    int nspare;
};

#define MAX_SPARE 256 /* finished requests (with their arena's first block) kept for reuse */

typedef struct conn_request {
    mv__job job; /* first: the pool hands back this pointer */
    struct conn_request *next_spare;
    mv_http_server *srv;
    struct MHD_Connection *conn;
    mv_arena *arena;
    mv_http_request req;
    mv_http_response res;
    mv_err init_err;
    bool init_failed;
    int reject_status; /* 0, or the status of an error found while building (414, 431, 501) */
    size_t header_bytes;
    char *body;
    size_t len, cap;
    size_t received;
    size_t expected; /* Content-Length, 0 when absent */
    bool too_large;
    bool started;               /* the access handler has seen the request */
    const char *content_length; /* while collecting headers: the first Content-Length */
    bool framing_conflict;      /* two different Content-Lengths */
    bool admitted;
    bool taken; /* an event stream took the socket (sse.h): libmicrohttpd drops the connection */
    atomic_bool answered;
    /* answering later (mv_http_answer_later): the holds are the handler's return and the
     * completion's mv_http_later_done (or _done_io); whichever comes last queues `then` */
    atomic_int holds;
    mv_http_then then;
    void *then_ctx;
    bool then_io;       /* mv_http_later_done_io: `then` runs on the I/O thread at the resume */
    atomic_bool render; /* resumed for then_io's `then` */
} conn_request;

/* ---- listen address ---------------------------------------------------------------------- */

mv_code mv_http_parse_listen(const char *listen, char *host, size_t host_size, int *port,
                             mv_err *err) {
    if (!listen || !*listen)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "listen address must be HOST:PORT");
    const char *colon;
    const char *h = listen;
    size_t hlen;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':')
            return mv_err_set(err, MV_INVALID_ARGUMENT, "listen address \"%s\" must be [IPV6]:PORT",
                              listen);
        h = listen + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || memchr(listen, ':', (size_t)(colon - listen)))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "listen address \"%s\" must be HOST:PORT (IPv6 as [ADDR]:PORT)",
                              listen);
        hlen = (size_t)(colon - listen);
    }
    if (hlen == 0 || hlen >= host_size)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "listen address \"%s\" has no host", listen);
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end || errno || p < 0 || p > 65535 || colon[1] == '-' ||
        colon[1] == '+')
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "listen address \"%s\": port must be a number from 0 to 65535", listen);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return MV_OK;
}

bool mv_http_host_is_loopback(const char *host) {
    if (strcmp(host, "localhost") == 0) return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
        if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;
    }
    return false;
}

/* ---- request building -------------------------------------------------------------------- */

typedef struct target_buf {
    char *p;
    size_t len, cap;
    bool overflow;
    size_t nargs;
} target_buf;

static void target_add(target_buf *t, const char *s) {
    size_t n = strlen(s);
    if (t->overflow || t->len + n + 1 > t->cap) {
        t->overflow = true;
        return;
    }
    memcpy(t->p + t->len, s, n + 1);
    t->len += n;
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    (void)kind;
    target_buf *t = cls;
    if (++t->nargs > MV_HTTP_MAX_QUERY_PARAMS) return MHD_NO;
    target_add(t, t->p[t->len - 1] == '?' ? "" : "&");
    target_add(t, key ? key : "");
    if (value) {
        target_add(t, "=");
        target_add(t, value);
    }
    return MHD_YES;
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
    (void)kind;
    conn_request *cr = cls;
    cr->header_bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
    if (strcasecmp(key, "Content-Length") == 0) {
        if (cr->content_length && strcmp(cr->content_length, value ? value : "") != 0)
            cr->framing_conflict = true;
        cr->content_length = value ? value : "";
    }
    if (!cr->init_failed &&
        mv_http_request_add_header(&cr->req, key, value, &cr->init_err) != MV_OK)
        cr->init_failed = true;
    return MHD_YES;
}

static void reject(conn_request *cr, int status, const char *message) {
    cr->init_failed = true;
    cr->reject_status = status;
    mv_err_set(&cr->init_err, MV_INVALID_ARGUMENT, "%s", message);
}

static enum MHD_Result measure_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    (void)kind;
    *(size_t *)cls += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 2;
    return MHD_YES;
}

static void build_request(conn_request *cr, struct MHD_Connection *c, const char *url,
                          const char *method) {
    size_t need = strlen(url) + 2; /* the target is rebuilt in a buffer of just its size */
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, measure_arg, &need);
    target_buf t = {.cap = need < MV_HTTP_MAX_TARGET + 2 ? need : MV_HTTP_MAX_TARGET + 2};
    t.p = mv_arena_alloc(cr->arena, t.cap);
    if (!t.p) {
        cr->init_failed = true;
        mv_err_set(&cr->init_err, MV_NO_MEMORY, "out of memory");
        return;
    }
    target_add(&t, url);
    int nargs = MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, NULL, NULL);
    if (nargs > MV_HTTP_MAX_QUERY_PARAMS) {
        mv_http_request_init(&cr->req, cr->arena, method, "/", NULL);
        reject(cr, 400, "too many query parameters");
        return;
    }
    if (nargs > 0) {
        target_add(&t, "?");
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &t);
    }
    if (t.overflow) {
        mv_http_request_init(&cr->req, cr->arena, method, "/", NULL);
        reject(cr, 414, "request target is too long");
        return;
    }
    if (mv_http_request_init(&cr->req, cr->arena, method, t.p, &cr->init_err) != MV_OK) {
        cr->init_failed = true;
        return;
    }
    MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, cr);
    if (cr->header_bytes > MV_HTTP_MAX_HEAD) {
        reject(cr, 431, "request header fields are too large");
        return;
    }
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    if (te && strcasecmp(te, "chunked") != 0)
        reject(cr, 501, "Transfer-Encoding other than chunked is not supported");
    else if (cr->framing_conflict || (te && cr->content_length))
        reject(cr, 400, "conflicting Content-Length or Transfer-Encoding");
}

/* ---- answering --------------------------------------------------------------------------- */

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)cls;
    (void)pos;
    (void)buf;
    (void)max;
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static enum MHD_Result queue(mv_http_server *srv, struct MHD_Connection *c, conn_request *cr) {
    mv_http_response *res = &cr->res;
    /* An event stream's body is written later, from the stream hub; any other body lives in the
     * request's arena (or is static) until on_completed, which MHD calls once it is done sending:
     * no copy of what may be a page of messages. A HEAD answer keeps the body (libmicrohttpd sends
     * its Content-Length and not the bytes), but an event stream is closed at once. */
    struct MHD_Response *r;
    if (cr->taken) return MHD_NO; /* closes the stand-in socket; the stream has the real one */
    if (res->stream && strcmp(cr->req.method, "HEAD") == 0) {
        mv_sse_close(res->stream); /* HEAD: the stream's headers, no stream */
        mv_sse_release(res->stream);
        res->stream = NULL;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, no_body, NULL, NULL);
    } else if (res->stream) {
        r = mv_sse_mhd_response(res->stream, c);
        mv_sse_release(res->stream);
        res->stream = NULL;
    } else {
        r = MHD_create_response_from_buffer(res->body_len, (void *)res->body,
                                            MHD_RESPMEM_PERSISTENT);
    }
    if (!r) return MHD_NO;
    for (size_t i = 0; i < res->nheaders; i++)
        MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
    if (atomic_load(&srv->stopping)) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = mv__mhd_queue_response(c, (unsigned)res->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Answers on the I/O thread: errors found while building the request, 413s that need no store,
 * and 503 draining. */
static enum MHD_Result respond_now(mv_http_server *srv, struct MHD_Connection *c,
                                   conn_request *cr) {
    mv_http_response_init(&cr->res, cr->arena);
    if (atomic_load(&srv->stopping) && !cr->init_failed && !cr->too_large) {
        mv_http_errorf(&cr->res, MV_DRAINING, "the server is shutting down; retry elsewhere");
    } else if (cr->init_failed) {
        mv_http_error(&cr->res, &cr->init_err);
        if (cr->reject_status) cr->res.status = cr->reject_status;
    } else {
        cr->req.body = "";
        cr->req.body_len = 0;
        cr->req.body_too_large = true;
        mv_http_dispatch(srv->router, &cr->req, &cr->res);
    }
    return queue(srv, c, cr);
}

static void release_later(conn_request *cr);

/* On a pool thread: the route's work, then back to the I/O thread. */
static void run_request(mv__job *job) {
    conn_request *cr = (conn_request *)job;
    mv_http_response_init(&cr->res, cr->arena);
    cr->req.body = cr->body ? cr->body : "";
    cr->req.body_len = cr->too_large ? 0 : cr->len;
    cr->req.body_too_large = cr->too_large;
    cr->req.server_ctx = cr;
    mv_http_dispatch(cr->srv->router, &cr->req, &cr->res);
    if (cr->req.answer_later) {
        release_later(cr); /* cr may be answered and gone once this returns */
        return;
    }
    /* an event stream takes its socket while the connection is still suspended */
    mv_http_response *res = &cr->res;
    if (res->stream && strcmp(cr->req.method, "GET") == 0 && !atomic_load(&cr->srv->stopping) &&
        mv_sse_take_connection(res->stream, cr->conn, res->status, res->headers, res->nheaders)) {
        mv_sse_release(res->stream);
        res->stream = NULL;
        cr->taken = true;
    }
    atomic_store(&cr->answered, true);
    MHD_resume_connection(cr->conn);
}

/* ---- answering later ---------------------------------------------------------------------
 * A handler that took a mv_http_later returned without an answer; its connection stays
 * suspended and the request admitted (a drain waits for it). The answer is made by `then` on the
 * write pool, after both the handler has returned and the completion has come, in either order:
 * two holds, the last one released queues the job. No lock: one atomic counter. */

/* The answer is in res: the request log and metrics, then back to the I/O thread. */
static void finish_later(conn_request *cr) {
    if (cr->res.status == 0) mv_http_errorf(&cr->res, MV_INTERNAL, "a deferred answer was empty");
    mv_http_dispatch_end(cr->srv->router, &cr->req, &cr->res);
    atomic_store(&cr->answered, true);
    MHD_resume_connection(cr->conn);
}

/* `then` may itself hand the answer on to a later one (a request parked for a key refresh runs
 * its route only now, and that route's handler may answer later): then it is that one's turn. */
static void run_later(mv__job *job) {
    conn_request *cr = (conn_request *)job;
    cr->req.answer_later = false;
    cr->then(&cr->req, &cr->res, cr->then_ctx);
    if (cr->req.answer_later) {
        release_later(cr); /* cr may be answered and gone once this returns */
        return;
    }
    finish_later(cr);
}

/* The last hold released: `then` on the I/O thread (mv_http_later_done_io) or the write pool. */
static void release_later(conn_request *cr) {
    if (atomic_fetch_sub(&cr->holds, 1) != 1) return;
    if (cr->then_io) { /* the I/O thread renders, logs and sends (on_request) */
        atomic_store(&cr->render, true);
        MHD_resume_connection(cr->conn);
        return;
    }
    cr->job.run = run_later;
    mv__work_pool_submit(cr->srv->writes, &cr->job);
}

mv_http_later *mv_http_answer_later(mv_http_request *req) {
    conn_request *cr = req->server_ctx;
    if (!cr) return NULL;
    cr->then = NULL;
    cr->then_io = false;
    atomic_store(&cr->holds, 2);
    req->answer_later = true;
    return (mv_http_later *)cr;
}

void mv_http_later_done(mv_http_later *later, mv_http_then then, void *ctx) {
    conn_request *cr = (conn_request *)later;
    cr->then = then;
    cr->then_ctx = ctx;
    release_later(cr);
}

void mv_http_later_done_io(mv_http_later *later, mv_http_then then, void *ctx) {
    conn_request *cr = (conn_request *)later;
    cr->then = then;
    cr->then_ctx = ctx;
    cr->then_io = true;
    release_later(cr);
}

static void later_round(mv__job *job) {
    mv_http_later_rounds *l = (mv_http_later_rounds *)job;
    void (*fn)(void *) = l->fn;
    void *arg = l->arg;
    fn(arg); /* may queue the next round through l */
}

void mv_http_later_submit(void *rounds, void (*fn)(void *arg), void *arg) {
    mv_http_later_rounds *l = rounds;
    l->fn = fn;
    l->arg = arg;
    l->job.run = later_round;
    mv__work_pool_submit(((conn_request *)l->later)->srv->writes, &l->job);
}

void mv_http_later_cancel(mv_http_later *later) {
    conn_request *cr = (conn_request *)later;
    cr->req.answer_later = false;
    atomic_store(&cr->holds, 0);
}

static bool is_read_method(const char *m) {
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0;
}

/* On the I/O thread, for a route that never blocks (mv_route.io_thread): the dispatch runs here;
 * an answer made at once is queued at once (no suspend, no pool); a handler that answers later
 * leaves the connection suspended until its completion. */
static enum MHD_Result run_inline(mv_http_server *srv, struct MHD_Connection *c, conn_request *cr) {
    mv_http_response_init(&cr->res, cr->arena);
    cr->req.body = cr->body ? cr->body : "";
    cr->req.body_len = cr->too_large ? 0 : cr->len;
    cr->req.body_too_large = cr->too_large;
    cr->req.server_ctx = cr;
    cr->req.io_thread = true;
    mv_http_dispatch(srv->router, &cr->req, &cr->res);
    if (!cr->req.answer_later) {
        atomic_store(&cr->answered, true);
        return queue(srv, c, cr);
    }
    MHD_suspend_connection(c);
    release_later(cr); /* the completion may have come already: then this answers */
    return MHD_YES;
}

static enum MHD_Result admit(mv_http_server *srv, struct MHD_Connection *c, conn_request *cr) {
    if (cr->init_failed || atomic_load(&srv->stopping)) return respond_now(srv, c, cr);
    pthread_mutex_lock(&srv->mu);
    srv->admitted++;
    pthread_mutex_unlock(&srv->mu);
    cr->admitted = true;
    cr->conn = c;
    if (!cr->too_large && mv_router_io_thread(srv->router, &cr->req)) return run_inline(srv, c, cr);
    cr->job.run = run_request;
    MHD_suspend_connection(c);
    mv__work_pool_submit(is_read_method(cr->req.method) ? srv->reads : srv->writes, &cr->job);
    return MHD_YES;
}

/* A request record: a spare one (its arena keeps a block) when there is one, else a new one. */
static conn_request *conn_request_new(mv_http_server *srv) {
    pthread_mutex_lock(&srv->mu);
    conn_request *cr = srv->spare;
    if (cr) {
        srv->spare = cr->next_spare;
        srv->nspare--;
    }
    srv->in_flight++;
    pthread_mutex_unlock(&srv->mu);
    if (cr) {
        mv_arena *arena = cr->arena;
        memset(cr, 0, sizeof *cr);
        cr->arena = arena;
    } else {
        cr = calloc(1, sizeof *cr);
        if (cr) cr->arena = mv_arena_new();
        if (!cr || !cr->arena) {
            free(cr);
            pthread_mutex_lock(&srv->mu);
            srv->in_flight--;
            pthread_mutex_unlock(&srv->mu);
            return NULL;
        }
    }
    cr->srv = srv;
    return cr;
}

/* libmicrohttpd calls this with the raw target as soon as the request line is in, before it
 * splits the query into parameters. A query libmicrohttpd would choke on (more parameters than
 * its per-connection memory holds makes 0.9.75 stall until the connection times out) is cut
 * here, in libmicrohttpd's own buffer, which it parses right after this call, and the request is
 * marked to be answered 400 / 414 in our error shape. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)c;
    conn_request *cr = conn_request_new(cls);
    if (!cr) return NULL;
    const char *q = strchr(uri, '?');
    if (!q) return cr;
    size_t nparams = 1;
    for (const char *p = q + 1; *p; p++)
        if (*p == '&') nparams++;
    if (strlen(uri) > MV_HTTP_MAX_TARGET)
        cr->reject_status = 414;
    else if (nparams > MV_HTTP_MAX_QUERY_PARAMS)
        cr->reject_status = 400;
    if (cr->reject_status) ((char *)q)[1] = '\0'; /* the buffer is libmicrohttpd's and mutable */
    return cr;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    mv_http_server *srv = cls;
    conn_request *cr = *con_cls;
    if (!cr) {
        cr = conn_request_new(srv); /* the URI callback ran out of memory */
        if (!cr) return MHD_NO;
        *con_cls = cr;
    }
    if (!cr->started) {
        cr->started = true;
        int cut = cr->reject_status; /* set by on_uri */
        build_request(cr, c, url, method);
        if (cut == 414) reject(cr, 414, "request target is too long");
        if (cut == 400) reject(cr, 400, "too many query parameters");
        if (cr->init_failed || atomic_load(&srv->stopping))
            return respond_now(srv, c, cr); /* before reading the body; MHD then closes */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno == ERANGE || n > MV_HTTP_MAX_BODY) {
                cr->too_large = true;
                return respond_now(srv, c, cr);
            }
            cr->expected = (size_t)n;
        }
        return MHD_YES;
    }
    if (atomic_load(&cr->answered)) return queue(srv, c, cr); /* resumed by the pool */
    if (atomic_exchange(&cr->render, false)) {                /* resumed by mv_http_later_done_io */
        cr->then(&cr->req, &cr->res, cr->then_ctx);
        if (cr->res.status == 0)
            mv_http_errorf(&cr->res, MV_INTERNAL, "a deferred answer was empty");
        mv_http_dispatch_end(srv->router, &cr->req, &cr->res);
        atomic_store(&cr->answered, true);
        return queue(srv, c, cr);
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        cr->received += n;
        if (cr->received > DISCARD_LIMIT) return MHD_NO;
        if (cr->too_large) return MHD_YES;
        if (cr->len + n > MV_HTTP_MAX_BODY) {
            cr->too_large = true;
            return MHD_YES; /* keep reading (and dropping) so the client gets its 413 */
        }
        if (cr->len + n + 1 > cr->cap) {
            /* first allocation: the announced size exactly (a small body stays a small
             * allocation), else 4 KiB; then doubling */
            size_t ncap = cr->cap ? cr->cap : cr->expected ? cr->expected + 1 : 4096;
            while (ncap < cr->len + n + 1)
                ncap *= 2;
            char *nb = realloc(cr->body, ncap);
            if (!nb) return MHD_NO;
            cr->body = nb;
            cr->cap = ncap;
        }
        memcpy(cr->body + cr->len, upload_data, n);
        cr->len += n;
        cr->body[cr->len] = '\0';
        return MHD_YES;
    }
    if (cr->admitted) return MHD_YES; /* still running on a pool */
    return admit(srv, c, cr);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)c;
    (void)toe;
    mv_http_server *srv = cls;
    conn_request *cr = *con_cls;
    if (!cr) return;
    *con_cls = NULL;
    bool admitted = cr->admitted;
    mv_arena_reset(cr->arena);
    free(cr->body);
    cr->body = NULL;
    pthread_mutex_lock(&srv->mu);
    if (srv->nspare < MAX_SPARE) {
        cr->next_spare = srv->spare;
        srv->spare = cr;
        srv->nspare++;
        cr = NULL;
    }
    srv->in_flight--;
    if (admitted) srv->admitted--;
    if (srv->in_flight == 0 || srv->admitted == 0) pthread_cond_broadcast(&srv->idle);
    pthread_mutex_unlock(&srv->mu);
    if (cr) {
        mv_arena_free(cr->arena);
        free(cr);
    }
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    mv_http_server *srv = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = srv; /* the gate counted it when it accepted it */
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        mv__gate_conn_closed(srv->gate, ci->client_addr);
        *socket_context = NULL;
    }
}

static bool hand_off(void *ctx, int fd, const struct sockaddr *addr, socklen_t addrlen) {
    mv_http_server *srv = ctx;
    return MHD_add_connection(srv->daemon, fd, addr, addrlen) == MHD_YES; /* closes fd on failure */
}

static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strlen(s);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static mv_code open_listener(const char *listen_addr, int *fd_out, int *port_out, mv_err *err) {
    char host[256];
    int port;
    mv_code rc = mv_http_parse_listen(listen_addr, host, sizeof host, &port, err);
    if (rc != MV_OK) return rc;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", port);
    int gai = getaddrinfo(host, portstr, &hints, &ai);
    if (gai != 0 || !ai)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "listen address \"%s\": %s", listen_addr,
                          gai_strerror(gai));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return mv_err_set(err, MV_IO, "cannot listen on %s (address in use or not available)",
                          listen_addr);
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl = sizeof ss;
    *port_out = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *port_out = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return MV_OK;
}

mv_code mv_http_server_start(const mv_http_server_options *opts, mv_router *router,
                             mv_http_server **out, mv_err *err) {
    *out = NULL;
    int listen_fd = -1, port = 0;
    mv_code rc = open_listener(opts->listen, &listen_fd, &port, err);
    if (rc != MV_OK) return rc;
    mv_http_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        close(listen_fd);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    srv->router = router;
    srv->port = port;

    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->idle, NULL);

    int ncpu = cpu_count();
    int io_threads = opts->io_threads > 0 ? opts->io_threads : ncpu;
    int read_threads = opts->read_threads > 0 ? opts->read_threads : (2 * ncpu > 4 ? 2 * ncpu : 4);
    int write_threads = opts->threads > 0 ? opts->threads : 64;
    int limit = opts->max_connections > 0 ? opts->max_connections : 10000;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)limit + 256 > rl.rlim_cur)
        limit =
            rl.rlim_cur > 512 ? (int)(rl.rlim_cur - 256) : 256; /* room for store and webhooks */
    limit = mv_sse_share_descriptors(limit); /* and for event streams, which are not ours */
    int timeout_ms = opts->connection_timeout_ms > 0 ? opts->connection_timeout_ms : 30000;
    unsigned timeout_s = (unsigned)((timeout_ms + 999) / 1000);

    srv->reads = mv__work_pool_new(read_threads);
    srv->writes = mv__work_pool_new(write_threads);
    if (!srv->reads || !srv->writes) {
        close(listen_fd);
        mv_http_server_free(srv);
        return mv_err_set(err, MV_NO_MEMORY, "cannot start the request threads");
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET;
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_CERT_CALLBACK, 0, opts->tls_cert_callback},
                                   {MHD_OPTION_END, 0, NULL}};
    if (opts->tls_cert_callback) flags |= MHD_USE_TLS;
    srv->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)io_threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)limit, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
        MHD_OPTION_ARRAY, opts->tls_cert_callback ? tls : tls + 1, MHD_OPTION_END);
    if (!srv->daemon) {
        close(listen_fd);
        mv_http_server_free(srv);
        return mv_err_set(err, MV_IO, "cannot start the HTTP server on %s", opts->listen);
    }
    mv__gate_options go = {
        .listen_fd = listen_fd,
        .max_connections = limit,
        .max_per_ip = opts->max_connections_per_ip >= 0
                          ? (opts->max_connections_per_ip ? opts->max_connections_per_ip : 512)
                          : 0,
        .header_timeout_ms = opts->header_timeout_ms > 0 ? opts->header_timeout_ms : 10000,
        .max_head = MV_HTTP_MAX_HEAD,
        .max_target = MV_HTTP_MAX_TARGET,
        .opaque = opts->tls_cert_callback != NULL,
        .hand_off = hand_off,
        .ctx = srv,
        .self = &srv->gate, /* on_connection reads it as soon as the first client connects */
    };
    if (!mv__gate_start(&go)) {
        mv_http_server_free(srv);
        return mv_err_set(err, MV_NO_MEMORY, "cannot start the HTTP server on %s", opts->listen);
    }
    *out = srv;
    return MV_OK;
}

int mv_http_server_port(const mv_http_server *server) { return server->port; }

int mv_http_server_in_flight(mv_http_server *server) {
    pthread_mutex_lock(&server->mu);
    int n = server->in_flight;
    pthread_mutex_unlock(&server->mu);
    return n;
}

static struct timespec deadline_after(int64_t ms) {
    struct timespec d;
    clock_gettime(CLOCK_REALTIME, &d);
    d.tv_sec += ms / 1000;
    d.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (d.tv_nsec >= 1000000000L) {
        d.tv_sec++;
        d.tv_nsec -= 1000000000L;
    }
    return d;
}

static bool before_ts(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* True while now is before t. */
static bool before(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return before_ts(&now, t);
}

bool mv_http_server_drain(mv_http_server *server, int64_t timeout_ms) {
    atomic_store(&server->stopping, true);
    struct timespec deadline = deadline_after(timeout_ms);
    /* 1: the admitted requests finish; newcomers are answered 503 draining meanwhile */
    pthread_mutex_lock(&server->mu);
    while (server->admitted > 0)
        if (pthread_cond_timedwait(&server->idle, &server->mu, &deadline) == ETIMEDOUT) break;
    pthread_mutex_unlock(&server->mu);
    /* 2: no more connections; 3: every request received is answered, and the clients have had
     * a moment to close (every answer now says "Connection: close"): a request already on its
     * way on a kept-alive connection is answered 503 rather than reset when the server stops */
    mv__gate_stop_accepting(server->gate);
    struct timespec grace =
        deadline_after(timeout_ms < DRAIN_GRACE_MS ? timeout_ms : DRAIN_GRACE_MS);
    pthread_mutex_lock(&server->mu);
    for (;;) {
        bool idle = server->in_flight == 0;
        if (idle) {
            pthread_mutex_unlock(&server->mu);
            bool open = mv__gate_open_connections(server->gate) > 0;
            pthread_mutex_lock(&server->mu);
            if (!open || before(&grace) == false) break;
        }
        struct timespec tick = deadline_after(10);
        if (!before(&deadline)) break;
        if (before_ts(&deadline, &tick)) tick = deadline;
        pthread_cond_timedwait(&server->idle, &server->mu, &tick);
    }
    bool drained = server->in_flight == 0;
    pthread_mutex_unlock(&server->mu);
    return drained;
}

void mv_http_server_free(mv_http_server *server) {
    if (!server) return;
    mv__gate_stop_accepting(server->gate);
    /* The pools first: a job still running resumes its connection, which must still exist. */
    mv__work_pool_free(server->reads);
    mv__work_pool_free(server->writes);
    /* An answer still to come from a store's committing thread resumes its connection from
     * there: give such commits a moment before the connections go (a drain has waited already). */
    struct timespec until = deadline_after(5000);
    pthread_mutex_lock(&server->mu);
    while (server->admitted > 0 && before(&until)) {
        struct timespec tick = deadline_after(10);
        pthread_cond_timedwait(&server->idle, &server->mu, &tick);
    }
    pthread_mutex_unlock(&server->mu);
    if (server->daemon) MHD_stop_daemon(server->daemon);
    mv__gate_free(server->gate);
    for (conn_request *cr = server->spare, *next; cr; cr = next) {
        next = cr->next_spare;
        mv_arena_free(cr->arena);
        free(cr);
    }
    pthread_cond_destroy(&server->idle);
    pthread_mutex_destroy(&server->mu);
    free(server);
}
