/* http/router.h — method + path pattern → handler, and the dispatch that applies the fixed order
 * of checks before any handler runs.
 *
 * Patterns are literal segments and {name} parameters ("/messages/{id}/actions/{usertype}").
 * A pattern may end with "/" ("/ui/"): its last segment is then the empty literal.
 * When several patterns match a path, the one with a literal earliest wins ("/messages/count"
 * beats "/messages/{id}"). HEAD is answered by the GET route (without the body). A path that
 * matches no route for this method is 404 not_found, even when another method would match
 * (DESIGN: GET /messages/{id}/action/{actionCd} is 404); that 404 carries `Allow` with the
 * methods the path does answer.
 *
 * mv_http_dispatch runs, in this order: route lookup (404) → authentication (401) → the route's
 * parameter check (400) → body size (413) → body JSON (400, routes with a body) → handler (which
 * checks body fields and does the work). It also counts the request in the metrics and writes
 * the request log line when those are configured. */
#ifndef MISSIVE_HTTP_ROUTER_H
#define MISSIVE_HTTP_ROUTER_H

#include <stdbool.h>

#include "http/http_server.h"

typedef struct mv_auth mv_auth;       /* auth.h */
typedef struct mv_metrics mv_metrics; /* metrics.h */

/* Checks req's path parameters (mv_http_param); returns MV_OK or fills err (400-class). */
typedef mv_code (*mv_http_param_check)(const mv_http_request *req, mv_err *err);

typedef struct mv_route {
    const char *method;  /* "GET", "POST", ... */
    const char *pattern; /* "/messages/{id}" — copied */
    mv_http_handler handler;
    bool public_route;                /* no authentication (health, metrics) */
    bool json_body;                   /* parse the body into req->json ({} when empty) */
    mv_http_param_check check_params; /* may be NULL */
    void *ctx;                        /* handed to the handler as req->route_ctx */
    bool accepts_ticket;              /* a `ticket` query parameter may authenticate (event streams:
                                       * browsers' EventSource cannot send headers); no other route */
    bool io_thread; /* the handler neither blocks nor waits (it passes anything that may to a pool
                     * with mv_http_later_submit, and answers later): the server runs it on the I/O
                     * thread that read the request (a token never waits for a key refresh there:
                     * the request parks) */
} mv_route;

/* A new router; app is passed to every handler. Free with mv_router_free (NULL-safe). */
mv_router *mv_router_new(void *app);
void mv_router_free(mv_router *router);
/* Registers a route. Fails with MV_INVALID_ARGUMENT on a malformed pattern (must start with
 * '/', parameters are whole segments "{name}") or a duplicate method + pattern. */
mv_code mv_router_add(mv_router *router, const mv_route *route, mv_err *err);
/* Calls fn for every registered route, in registration order (the API description's tests). */
void mv_router_each(const mv_router *router,
                    void (*fn)(void *ctx, const char *method, const char *pattern), void *ctx);
/* Authentication for non-public routes (borrowed; NULL means every non-public route is 401). */
void mv_router_set_auth(mv_router *router, const mv_auth *auth);
/* Verifies a stream ticket into *out (arena-owned) or fails with MV_UNAUTHENTICATED. */
typedef mv_code (*mv_ticket_auth_fn)(void *ctx, mv_http_request *req, const char *ticket,
                                     mv_principal *out, mv_err *err);
/* Ticket authentication for routes with accepts_ticket (NULL: tickets are refused with 401). */
void mv_router_set_ticket_auth(mv_router *router, mv_ticket_auth_fn fn, void *ctx);

/* CORS (DESIGN "Live updates"): requests whose Origin is one of origins (copied) get
 * Access-Control-Allow-Origin echoing it; OPTIONS preflight from such an origin is answered 204
 * with the methods of the matching routes, the headers the API reads and Access-Control-Max-Age.
 * Any other origin gets no CORS header at all (never a wildcard). May be called again while
 * requests are served (a reload): each request sees the old set or the new one. */
mv_code mv_router_set_cors(mv_router *router, const char *const *origins, size_t n, int max_age_s,
                           mv_err *err);

/* Request counters and durations (borrowed; NULL disables). */
void mv_router_set_metrics(mv_router *router, mv_metrics *metrics);
/* When true, one JSON log line per request (default false, so tests and fuzzers stay quiet). */
void mv_router_set_logging(mv_router *router, bool on);

/* True when req's route runs on the I/O thread (mv_route.io_thread), in any auth mode. */
bool mv_router_io_thread(mv_router *router, mv_http_request *req);

/* Routes req and fills res. Always produces a response (status != 0). Sets X-Request-Id (taken
 * from the request's X-Request-Id when it is a printable token of at most 40 characters,
 * generated otherwise). */
void mv_http_dispatch(mv_router *router, mv_http_request *req, mv_http_response *res);
/* The end of a dispatch whose handler answered later (mv_http_answer_later): X-Request-Id,
 * metrics and the request log line, once res holds the answer. The server calls it. */
void mv_http_dispatch_end(mv_router *router, mv_http_request *req, mv_http_response *res);

#endif
