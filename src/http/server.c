/* server.c — libmicrohttpd in, mv_http_request out; mv_http_response in, bytes out.
 *
 * Everything with meaning (routing, checks, errors) happens in mv_http_dispatch; this file only
 * converts. Bodies are buffered up to MV_HTTP_MAX_BODY: a Content-Length over the limit is
 * answered as soon as the headers are in (the dispatch still runs authentication and route checks
 * first, in the fixed order), and a chunked body is counted while it arrives — past the limit it is
 * discarded rather than buffered, then answered 413; past DISCARD_LIMIT the connection is
 * dropped. The path and query reach us still percent-encoded (the unescape callback is a no-op)
 * so that "%2F" inside a path parameter cannot change which route matches.
 *
 * Graceful stop: quiesce (stop accepting), answer further requests on open connections with
 * "Connection: close", wait on a condition variable until no request is in flight or the timeout
 * passes, then stop the daemon. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/request.h"
#include "http/router.h"
#include "http/sse.h"

#define DISCARD_LIMIT (16 * MV_HTTP_MAX_BODY)
#define CONNECTION_MEMORY (64 * 1024) /* request line + headers must fit, with read buffer */

struct mv_http_server {
    struct MHD_Daemon *daemon;
    mv_router *router;
    int port;
    int quiesced_fd;
    atomic_bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int in_flight; /* guarded by mu */
};

typedef struct conn_request {
    mv_arena *arena;
    mv_http_request req;
    mv_err init_err;
    bool init_failed;
    char *body;
    size_t len, cap;
    size_t received;
    bool too_large;
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
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "listen address \"%s\" must be [IPV6]:PORT", listen);
        h = listen + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || memchr(listen, ':', (size_t)(colon - listen)))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "listen address \"%s\" must be HOST:PORT (IPv6 as [ADDR]:PORT)", listen);
        hlen = (size_t)(colon - listen);
    }
    if (hlen == 0 || hlen >= host_size)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "listen address \"%s\" has no host", listen);
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end || errno || p < 0 || p > 65535 || colon[1] == '-' || colon[1] == '+')
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
    if (!cr->init_failed && mv_http_request_add_header(&cr->req, key, value, &cr->init_err) != MV_OK)
        cr->init_failed = true;
    return MHD_YES;
}

static void build_request(conn_request *cr, struct MHD_Connection *c, const char *url,
                          const char *method) {
    target_buf t = {.cap = MV_HTTP_MAX_TARGET + 2};
    t.p = mv_arena_alloc(cr->arena, t.cap);
    if (!t.p) {
        cr->init_failed = true;
        mv_err_set(&cr->init_err, MV_NO_MEMORY, "out of memory");
        return;
    }
    target_add(&t, url);
    if (MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, NULL, NULL) > 0) {
        target_add(&t, "?");
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &t);
    }
    if (t.overflow) {
        mv_http_request_init(&cr->req, cr->arena, method, "/", NULL);
        cr->init_failed = true;
        mv_err_set(&cr->init_err, MV_INVALID_ARGUMENT, "request target is longer than %d bytes",
                   MV_HTTP_MAX_TARGET);
        return;
    }
    if (mv_http_request_init(&cr->req, cr->arena, method, t.p, &cr->init_err) != MV_OK) {
        cr->init_failed = true;
        return;
    }
    MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, cr);
}

/* ---- answering --------------------------------------------------------------------------- */

static enum MHD_Result respond(mv_http_server *srv, struct MHD_Connection *c, conn_request *cr) {
    mv_http_response res;
    mv_http_response_init(&res, cr->arena);
    if (cr->init_failed) {
        mv_http_error(&res, &cr->init_err);
    } else {
        cr->req.body = cr->body ? cr->body : "";
        cr->req.body_len = cr->too_large ? 0 : cr->len;
        cr->req.body_too_large = cr->too_large;
        mv_http_dispatch(srv->router, &cr->req, &res);
    }
    struct MHD_Response *r;
    if (res.stream) { /* an event stream: its body is written later, from the stream hub */
        r = mv_sse_mhd_response(res.stream, c);
        mv_sse_release(res.stream);
    } else {
        /* The body lives in the request's arena (or is static) until on_completed, which MHD
         * calls once it is done sending: no copy of what may be a page of messages. */
        r = MHD_create_response_from_buffer(res.body_len, (void *)res.body,
                                            MHD_RESPMEM_PERSISTENT);
    }
    if (!r) return MHD_NO;
    for (size_t i = 0; i < res.nheaders; i++)
        MHD_add_response_header(r, res.headers[i].name, res.headers[i].value);
    if (atomic_load(&srv->stopping)) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)res.status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    mv_http_server *srv = cls;
    conn_request *cr = *con_cls;
    if (!cr) {
        cr = calloc(1, sizeof *cr);
        if (!cr) return MHD_NO;
        cr->arena = mv_arena_new();
        if (!cr->arena) {
            free(cr);
            return MHD_NO;
        }
        *con_cls = cr;
        pthread_mutex_lock(&srv->mu);
        srv->in_flight++;
        pthread_mutex_unlock(&srv->mu);
        build_request(cr, c, url, method);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno == ERANGE || n > MV_HTTP_MAX_BODY) {
                cr->too_large = true;
                return respond(srv, c, cr); /* before reading the body; MHD then closes */
            }
        }
        return MHD_YES;
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
            size_t ncap = cr->cap ? cr->cap : 4096;
            while (ncap < cr->len + n + 1) ncap *= 2;
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
    return respond(srv, c, cr);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)c;
    (void)toe;
    mv_http_server *srv = cls;
    conn_request *cr = *con_cls;
    if (!cr) return;
    *con_cls = NULL;
    mv_arena_free(cr->arena);
    free(cr->body);
    free(cr);
    pthread_mutex_lock(&srv->mu);
    srv->in_flight--;
    if (srv->in_flight == 0) pthread_cond_broadcast(&srv->idle);
    pthread_mutex_unlock(&srv->mu);
}

static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strlen(s);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

mv_code mv_http_server_start(const mv_http_server_options *opts, mv_router *router,
                             mv_http_server **out, mv_err *err) {
    *out = NULL;
    char host[256];
    int port;
    mv_code rc = mv_http_parse_listen(opts->listen, host, sizeof host, &port, err);
    if (rc != MV_OK) return rc;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", port);
    int gai = getaddrinfo(host, portstr, &hints, &ai);
    if (gai != 0 || !ai)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "listen address \"%s\": %s", opts->listen,
                          gai_strerror(gai));
    mv_http_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        freeaddrinfo(ai);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    srv->router = router;
    srv->quiesced_fd = -1;
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->idle, NULL);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME; /* idle event streams are parked, not polled */
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    unsigned threads = opts->threads > 0 ? (unsigned)opts->threads : 8;
    unsigned limit = opts->max_connections > 0 ? (unsigned)opts->max_connections : 1024;
    int timeout_ms = opts->connection_timeout_ms > 0 ? opts->connection_timeout_ms : 30000;
    unsigned timeout_s = (unsigned)((timeout_ms + 999) / 1000);
    srv->daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, srv,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!srv->daemon) {
        mv_http_server_free(srv);
        return mv_err_set(err, MV_IO, "cannot listen on %s (address in use or not available)",
                          opts->listen);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss); /* the analyzer does not see getsockname fill it */
    socklen_t sl = sizeof ss;
    srv->port = port;
    if (info && getsockname(info->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        srv->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *out = srv;
    return MV_OK;
}

int mv_http_server_port(const mv_http_server *server) {
    return server->port;
}

int mv_http_server_in_flight(mv_http_server *server) {
    pthread_mutex_lock(&server->mu);
    int n = server->in_flight;
    pthread_mutex_unlock(&server->mu);
    return n;
}

bool mv_http_server_drain(mv_http_server *server, int64_t timeout_ms) {
    if (!atomic_exchange(&server->stopping, true) && server->daemon)
        server->quiesced_fd = (int)MHD_quiesce_daemon(server->daemon);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&server->mu);
    while (server->in_flight > 0)
        if (pthread_cond_timedwait(&server->idle, &server->mu, &deadline) == ETIMEDOUT) break;
    bool drained = server->in_flight == 0;
    pthread_mutex_unlock(&server->mu);
    return drained;
}

void mv_http_server_free(mv_http_server *server) {
    if (!server) return;
    if (server->daemon) MHD_stop_daemon(server->daemon);
    if (server->quiesced_fd >= 0) close(server->quiesced_fd);
    pthread_cond_destroy(&server->idle);
    pthread_mutex_destroy(&server->mu);
    free(server);
}
