/* http/sse.h — one Server-Sent Events response: a byte queue a producer thread appends to and
 * that reaches the socket without a thread per stream.
 *
 * Plain HTTP: server.c gives the stream the socket itself (mv_sse_take_connection) once the head
 * is decided; libmicrohttpd lets the connection go, and the stream's loop (one thread, one epoll
 * for all of them) writes what the socket does not take at once and notices hang-ups. An idle
 * stream then costs this struct, no buffer and no libmicrohttpd state. TLS (or a stream without
 * a loop): mv_sse_mhd_response, and libmicrohttpd keeps the connection, suspended while the queue
 * is empty. A stream has up to three owners — the producer (the stream hub), the server, the loop
 * — and is freed when all released it. */
#ifndef MISSIVE_HTTP_SSE_H
#define MISSIVE_HTTP_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mv_sse_stream mv_sse_stream;

/* A new open stream with one reference (the producer's). max_queued bytes not yet sent (0 →
 * 1 MiB) is a safety bound only: past it the stream is closed (the client resumes with
 * Last-Event-ID). A producer paces itself with mv_sse_has_room instead, so the queue stays
 * near its low-water mark. */
mv_sse_stream *mv_sse_stream_new(size_t max_queued);
/* Queues n bytes; false when the stream is closed or the safety bound was passed (the stream
 * is then closed). Thread-safe. */
bool mv_sse_write(mv_sse_stream *s, const char *data, size_t n);
/* Bytes queued and not yet handed to the socket. */
size_t mv_sse_queued(mv_sse_stream *s);
/* True when fewer than low_water bytes are queued and the socket can take more. When the queue
 * is the reason, the next time the client's reads bring it below low_water on_room(ctx) is called
 * (once, on the server's thread; it must be quick); when the socket is (the client does not read),
 * the producer has to ask again later. */
bool mv_sse_has_room(mv_sse_stream *s, size_t low_water, void (*on_room)(void *ctx), void *ctx);
/* Closes every stream of the n whose client hung up (a parked connection is not watched by the
 * server, so without this a closed one would only be noticed at its next write). Thread-safe;
 * one poll(2) for all of them. */
void mv_sse_close_hung_up(mv_sse_stream *const *s, int n);
/* Queues one event: "id: <id>\nevent: <event>\ndata: <data>\n\n" (data must be one line). */
bool mv_sse_event(mv_sse_stream *s, int64_t id, const char *event, const char *data);
/* Ends the stream after what is queued has been sent. Thread-safe, idempotent. */
void mv_sse_close(mv_sse_stream *s);
/* False once closed by either side (the client went away, or mv_sse_close). */
bool mv_sse_is_open(mv_sse_stream *s);
/* fn(ctx) is called once when the stream closes, whoever closes it (at once when it is closed
 * already); NULL stops it. It runs under the stream's lock on whichever thread closed it: it must
 * be quick and not call back into the stream. After mv_sse_on_close(s, NULL, NULL) returns, the
 * old fn is not running and will not run. */
void mv_sse_on_close(mv_sse_stream *s, void (*fn)(void *ctx), void *ctx);
/* True once the stream's loop took the socket (it then notices a hang-up itself). */
bool mv_sse_is_taken(mv_sse_stream *s);
/* Milliseconds (monotonic) of the last write, for heartbeats. */
int64_t mv_sse_last_write_ms(mv_sse_stream *s);
/* Takes one more reference. */
void mv_sse_retain(mv_sse_stream *s);
/* Drops one reference; the last one frees the stream. NULL-safe. */
void mv_sse_release(mv_sse_stream *s);

/* The thread and epoll set that serve taken streams. NULL when out of memory or descriptors.
 * Freeing it closes every socket it still holds. */
typedef struct mv_sse_loop mv_sse_loop;
mv_sse_loop *mv_sse_loop_new(void);
void mv_sse_loop_free(mv_sse_loop *loop); /* NULL-safe */
/* Taken streams whose socket is still open. */
int mv_sse_loop_streams(mv_sse_loop *loop);
/* The loop s goes to when the server lets it take its socket (borrowed; it must outlive s's
 * socket: free the loop before the producer's last use of it). */
void mv_sse_set_loop(mv_sse_stream *s, mv_sse_loop *loop);

/* Descriptors: a hub reserves room for n taken streams (negative n gives it back), raising
 * RLIMIT_NOFILE toward n + a server at its default limit, as far as the hard limit allows; the
 * server passes its connection limit through mv_sse_share_descriptors, which lowers it when the
 * descriptor limit cannot hold both (the server keeping at least half). */
void mv_sse_reserve_descriptors(int n);
int mv_sse_share_descriptors(int server_limit);

struct MHD_Response;
struct MHD_Connection;
struct mv_http_header;
/* server.c, on a pool thread while libmicrohttpd holds connection c suspended (out of its epoll
 * set) and before any byte of the answer went out: s takes the socket, with the answer's head
 * (status and headers, plus Date and Connection: close; the body is delimited by the close). The
 * connection's descriptor number is left on an unconnected socket, so libmicrohttpd closes that
 * instead: the caller must make libmicrohttpd drop the connection when it resumes it (return
 * MHD_NO from the access handler). False — nothing changed, serve it with mv_sse_mhd_response —
 * when s has no loop, c is TLS, or no descriptor is left. */
bool mv_sse_take_connection(mv_sse_stream *s, struct MHD_Connection *c, int status,
                            const struct mv_http_header *headers, size_t nheaders);
/* server.c: a libmicrohttpd response that streams s over connection c. Takes a reference for the
 * server (released when libmicrohttpd frees the response). NULL when out of memory. */
struct MHD_Response *mv_sse_mhd_response(mv_sse_stream *s, struct MHD_Connection *c);

#endif
