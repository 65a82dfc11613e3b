/* http/jwks.h — where the JWT verification keys come from: a JWKS file read once, or a JWKS URL
 * fetched at start and refreshed by a background thread.
 *
 * The thread refreshes every refresh interval, and sooner when a token names a kid the current
 * set lacks (at most once per kid interval, 10 s in the daemon, so a flood of made-up kids
 * cannot hammer the identity provider). A failed refresh — network, timeout, an answer that is
 * not a usable key set — keeps the last good keys. Requests never wait for the periodic refresh.
 * A request naming an unknown kid while such a refresh runs either waits for it (bounded by the
 * fetch timeout: mv_jwks_source_refresh) or, through a server, leaves its thread and is run again
 * when the refresh is done (mv_jwks_source_request + mv_jwks_source_when): a hanging provider then
 * holds no thread that a request with a known kid would need. */
#ifndef MISSIVE_HTTP_JWKS_H
#define MISSIVE_HTTP_JWKS_H

#include <stdbool.h>
#include <stdint.h>

#include "http/jwk.h"
#include "missive/deliver.h"

typedef struct mv_jwks_source mv_jwks_source;

/* A wait for a refresh without a thread: fn(ctx) runs once, on the refresher's thread, when the
 * fetch numbered `generation` is done (whatever its outcome). The caller owns the record and keeps
 * it valid until then. */
typedef struct mv_jwks_waiter {
    struct mv_jwks_waiter *next;
    unsigned long generation;
    void (*fn)(void *ctx);
    void *ctx;
} mv_jwks_waiter;

typedef struct mv_jwks_source_options {
    const char *file; /* exactly one of file and url */
    const char *url;
    int refresh_s;                 /* 0 → 300 */
    int64_t kid_interval_ms;       /* 0 → 10000: minimum time between unknown-kid refreshes */
    const mv_webhook_config *http; /* timeouts of the fetch; NULL → defaults */
} mv_jwks_source_options;

/* A file must load (errors name the file). A URL is fetched once now; when that fails the
 * source starts empty (every asymmetric token is refused) and the thread retries every kid
 * interval. Free with mv_jwks_source_close (NULL-safe). */
mv_code mv_jwks_source_open(const mv_jwks_source_options *o, mv_jwks_source **out, mv_err *err);
void mv_jwks_source_close(mv_jwks_source *src);

/* The current set, retained (release it), or NULL when none was ever loaded. */
mv_jwks *mv_jwks_source_get(mv_jwks_source *src);
/* After a token named a kid the current set lacks: refreshes now unless the last such refresh
 * was less than the kid interval ago, waits for it, and returns the set then current (retained,
 * may be NULL). */
mv_jwks *mv_jwks_source_refresh(mv_jwks_source *src);
/* After a token named a kid the current set lacks, without waiting: starts a refresh as
 * mv_jwks_source_refresh would, and returns the generation that will hold it (for
 * mv_jwks_source_when), or 0 when no refresh is under way (a file, or the last one was less than
 * the kid interval ago and is done): the set is then as current as it will be. */
unsigned long mv_jwks_source_request(mv_jwks_source *src);
/* Queues w until fetch w->generation is done; false (w untouched, fn not called) when it is done
 * already or the source is closing. Waiters left at close are dropped, not called. */
bool mv_jwks_source_when(mv_jwks_source *src, mv_jwks_waiter *w);
/* Completed fetch attempts so far (tests). */
unsigned long mv_jwks_source_fetches(mv_jwks_source *src);

#endif
