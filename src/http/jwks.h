/* http/jwks.h — where the JWT verification keys come from: a JWKS file read once, or a JWKS URL
 * fetched at start and refreshed by a background thread.
 *
 * The thread refreshes every refresh interval, and sooner when a token names a kid the current
 * set lacks (at most once per kid interval, 10 s in the daemon, so a flood of made-up kids
 * cannot hammer the identity provider). A failed refresh — network, timeout, an answer that is
 * not a usable key set — keeps the last good keys. Requests never wait for the periodic refresh;
 * only the one that asked for an unknown kid waits, bounded by the fetch timeout. */
#ifndef MISSIVE_HTTP_JWKS_H
#define MISSIVE_HTTP_JWKS_H

#include <stdint.h>

#include "http/jwk.h"
#include "missive/deliver.h"

typedef struct mv_jwks_source mv_jwks_source;

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
/* Completed fetch attempts so far (tests). */
unsigned long mv_jwks_source_fetches(mv_jwks_source *src);

#endif
