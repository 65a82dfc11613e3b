/* http/gate.h — the front door of the HTTP server: accepts connections and holds each one until
 * its first request head (request line and headers) has fully arrived, then hands the socket to
 * libmicrohttpd.
 *
 * Why a gate in front of libmicrohttpd: slow or malformed heads are the cheapest attack on a
 * server, and libmicrohttpd 0.9.x can neither bound the time a head may take (its timeout is an
 * idle timeout, reset by every byte) nor answer its own errors (414, 431, 505, 400) in our JSON
 * shape. The gate only peeks (MSG_PEEK), so libmicrohttpd still reads the request itself; what the
 * gate holds costs one small struct per connection, and a connection whose head does not arrive
 * within the header timeout is answered 408 and closed. It also keeps the connection limits:
 * at most max_connections open in all (when full, the oldest connection still sending its head is
 * dropped to make room, so slow clients cannot lock fresh ones out) and max_per_ip from one
 * address. */
#ifndef MISSIVE_HTTP_GATE_H
#define MISSIVE_HTTP_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct mv__gate mv__gate;

typedef struct mv__gate_options {
    int listen_fd;         /* bound, listening, non-blocking; owned by the gate from start */
    int max_connections;   /* open connections at most, in the gate and handed off */
    int max_per_ip;        /* 0 = no limit */
    int header_timeout_ms; /* time for the whole first head */
    size_t max_head;       /* request line + headers, bytes */
    size_t max_target;     /* request target, bytes */
    /* The bytes are not HTTP yet (TLS): a connection is handed off as soon as its first bytes
     * arrive, without a look at them; the header timeout then bounds only the wait for those. */
    bool opaque;
    /* Hands a connection whose first head is complete and well-formed to the server. The callee
     * owns fd from then on (and closes it on failure, returning false). A connection handed off
     * stays counted until mv__gate_conn_closed. */
    bool (*hand_off)(void *ctx, int fd, const struct sockaddr *addr, socklen_t addrlen);
    void *ctx;
    /* May be NULL; else receives the gate before its thread starts (NULL again on failure), so
     * that the server's threads may use it from the first connection on. */
    struct mv__gate **self;
} mv__gate_options;

/* Starts the gate's thread. On failure closes opts->listen_fd and returns NULL. */
mv__gate *mv__gate_start(const mv__gate_options *opts);
/* A handed-off connection was closed by the server: keeps the per-address and total counts (the
 * address is the client's). */
void mv__gate_conn_closed(mv__gate *gate, const struct sockaddr *addr);
/* Stops accepting: connections the kernel has already completed are still taken in (their
 * requests are answered; a server that is draining answers 503), then the listening socket is
 * closed. Returns when done; later connects are refused, and nobody who managed to connect is
 * reset. Heads still arriving have one more second. */
void mv__gate_stop_accepting(mv__gate *gate);
/* Connections open now (in the gate and handed off). */
int mv__gate_open_connections(mv__gate *gate);
/* Stops the thread and frees the gate. NULL-safe. */
void mv__gate_free(mv__gate *gate);

/* Checks one complete request head (up to and including the blank line) the way the gate does.
 * Returns 0 when it may be handed on, else the status to answer (400, 414, 431, 505) and a
 * client-facing message in msg. Exposed for the tests and the access handler. */
int mv__gate_check_head(const char *head, size_t len, size_t max_target, char *msg,
                        size_t msg_size);
/* Writes a complete HTTP/1.1 error response with the JSON error body
 * {"error":{"code":"invalid_argument","message":msg}} (code "draining" for 503) into buf;
 * returns its length. */
size_t mv__gate_error_response(int status, const char *msg, char *buf, size_t size);

#endif
