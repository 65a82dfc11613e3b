/* http/sse.h — one Server-Sent Events response: a byte queue a producer thread appends to and
 * the server drains to the socket, without a thread per stream.
 *
 * server.c hands the connection to mv_sse_mhd_response(); when the queue is empty the
 * connection is suspended (libmicrohttpd stops polling it) and the next write resumes it, so an
 * idle stream costs its queue and libmicrohttpd's connection state, nothing else. A stream has
 * two owners — the producer (the stream hub) and the server — and is freed when both released it.
 */
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
/* Milliseconds (monotonic) of the last write, for heartbeats. */
int64_t mv_sse_last_write_ms(mv_sse_stream *s);
/* Takes one more reference. */
void mv_sse_retain(mv_sse_stream *s);
/* Drops one reference; the last one frees the stream. NULL-safe. */
void mv_sse_release(mv_sse_stream *s);

struct MHD_Response;
struct MHD_Connection;
/* server.c: a libmicrohttpd response that streams s over connection c. Takes a reference for the
 * server (released when libmicrohttpd frees the response). NULL when out of memory. */
struct MHD_Response *mv_sse_mhd_response(mv_sse_stream *s, struct MHD_Connection *c);

#endif
