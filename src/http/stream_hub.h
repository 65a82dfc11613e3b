/* http/stream_hub.h — live updates: GET /messages/stream (Server-Sent Events), POST
 * /stream-tickets, and the one thread per daemon that reads the change log and fans it out.
 *
 * The change log is the truth; wake-ups only say "look now" (PostgreSQL LISTEN/NOTIFY; on SQLite
 * a poll of the newest id). Every stream keeps its own position in the log, so a stream that
 * resumes with Last-Event-ID replays exactly the changes after it, and a stream never waits for
 * another. Streams hold no thread: the hub writes into each stream's queue and the server parks
 * idle connections (sse.h). Retention of the log is not the hub's: the daemon's recovery loop
 * prunes it (mv_changes_gc), on its interval. */
#ifndef MISSIVE_HTTP_STREAM_HUB_H
#define MISSIVE_HTTP_STREAM_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/router.h"
#include "missive/inbox.h"

typedef struct mv_stream_hub mv_stream_hub;

typedef struct mv_stream_hub_options {
    mv_service *service;  /* borrowed */
    mv_store *store;      /* borrowed: the change log */
    int max_connections;  /* 0 → 20000; beyond → 503 stream_capacity */
    int max_per_user;     /* 0 → 16 */
    int64_t heartbeat_ms; /* 0 → 15000: a ": ping" comment line this often */
    int poll_ms;          /* 0 → 100 on SQLite, 500 on PostgreSQL (a fallback to NOTIFY) */
    const void *secret;   /* ticket HMAC key (copied); NULL → a random per-process key */
    size_t secret_len;
    int64_t ticket_ttl_ms;    /* 0 → 60000 */
    const mv_clock *clock;    /* NULL → real time (ticket and token expiry) */
    const char *locale_claim; /* the JWT claim naming the reader's language (NULL: none) */
} mv_stream_hub_options;

/* Starts the hub's thread. Free with mv_stream_hub_free (NULL-safe). */
mv_code mv_stream_hub_new(const mv_stream_hub_options *opts, mv_stream_hub **out, mv_err *err);
/* SIGTERM: refuses new streams (503) and ends every open one cleanly (what is queued is sent). */
void mv_stream_hub_drain(mv_stream_hub *hub);
/* Stops the thread and ends every stream. */
void mv_stream_hub_free(mv_stream_hub *hub);
/* Open streams. */
int mv_stream_hub_connections(mv_stream_hub *hub);
/* Entries of the hub's index of open streams by user and role (one per stream under its user id,
 * one per role it holds), as of the hub's last turn: 0 once every stream is closed and dropped. */
size_t mv_stream_hub_index_entries(mv_stream_hub *hub);

/* Registers GET /messages/stream and POST /stream-tickets, and the router's ticket check. */
mv_code mv_stream_routes_add(mv_router *router, mv_stream_hub *hub, mv_err *err);

#endif
