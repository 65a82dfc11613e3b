/* router.c — a list of routes matched segment by segment, and the dispatch that applies the
 * fixed order of checks (DESIGN "HTTP"): route → authentication → route parameters → body size
 * → body JSON → handler.
 *
 * A linear scan is enough: the daemon has about fifteen routes, and the scan allocates nothing
 * but the path parameters of the route that wins. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/callctx.h"
#include "http/auth.h"
#include "http/metrics.h"
#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"

#define MAX_SEGMENTS 16

typedef struct route_entry {
    mv_route r;
    char *pattern;
    char *method;
    int nseg;
    char *seg[MAX_SEGMENTS]; /* literal text, or the parameter name when is_param */
    bool is_param[MAX_SEGMENTS];
} route_entry;

struct mv_router {
    void *app;
    route_entry *routes;
    size_t nroutes, cap;
    const mv_auth *auth;
    mv_metrics *metrics;
    bool logging;
    mv_ticket_auth_fn ticket_auth;
    void *ticket_ctx;
    /* Replaced whole by mv_router_set_cors (a reload, while requests run): a request reads the
     * pointer once; a replaced set is kept until the router is freed, so none is freed under a
     * reader (a few bytes per reload). */
    _Atomic(struct cors_set *) cors;
    struct cors_set *retired;
};

typedef struct cors_set {
    struct cors_set *next_retired;
    char **origins;
    size_t n;
    int max_age_s;
} cors_set;

static void cors_set_free(cors_set *c) {
    for (size_t i = 0; c && i < c->n; i++)
        free(c->origins[i]);
    if (c) free(c->origins);
    free(c);
}

mv_router *mv_router_new(void *app) {
    mv_router *r = calloc(1, sizeof *r);
    if (r) r->app = app;
    return r;
}

static void entry_free(route_entry *e) {
    free(e->pattern);
    free(e->method);
    for (int i = 0; i < e->nseg; i++)
        free(e->seg[i]);
}

void mv_router_free(mv_router *router) {
    if (!router) return;
    cors_set_free(atomic_load(&router->cors));
    for (cors_set *c = router->retired, *next; c; c = next) {
        next = c->next_retired;
        cors_set_free(c);
    }
    for (size_t i = 0; i < router->nroutes; i++)
        entry_free(&router->routes[i]);
    free(router->routes);
    free(router);
}

void mv_router_each(const mv_router *router,
                    void (*fn)(void *ctx, const char *method, const char *pattern), void *ctx) {
    for (size_t i = 0; router && i < router->nroutes; i++)
        fn(ctx, router->routes[i].method, router->routes[i].pattern);
}

void mv_router_set_auth(mv_router *router, const mv_auth *auth) { router->auth = auth; }

void mv_router_set_metrics(mv_router *router, mv_metrics *metrics) {
    router->metrics = metrics;
    if (!metrics) return;
    mv_metrics_describe(metrics, "missive_http_requests_total", "counter",
                        "HTTP requests answered, by route pattern, method and status.");
    mv_metrics_describe(metrics, "missive_http_request_duration_seconds", "histogram",
                        "Time from routing to response, by route pattern and method.");
}

void mv_router_set_ticket_auth(mv_router *router, mv_ticket_auth_fn fn, void *ctx) {
    router->ticket_auth = fn;
    router->ticket_ctx = ctx;
}

mv_code mv_router_set_cors(mv_router *router, const char *const *origins, size_t n, int max_age_s,
                           mv_err *err) {
    cors_set *c = calloc(1, sizeof *c);
    if (!c || (n && !(c->origins = calloc(n, sizeof *c->origins)))) goto nomem;
    for (; c->n < n; c->n++)
        if (!(c->origins[c->n] = strdup(origins[c->n]))) goto nomem;
    c->max_age_s = max_age_s;
    cors_set *old = atomic_exchange(&router->cors, c);
    if (old) {
        old->next_retired = router->retired;
        router->retired = old;
    }
    return MV_OK;
nomem:
    cors_set_free(c);
    return mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

void mv_router_set_logging(mv_router *router, bool on) { router->logging = on; }

mv_code mv_router_add(mv_router *router, const mv_route *route, mv_err *err) {
    if (!route || !route->method || !route->pattern || !route->handler)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "route needs a method, a pattern and a handler");
    const char *p = route->pattern;
    if (p[0] != '/')
        return mv_err_set(err, MV_INVALID_ARGUMENT, "route pattern \"%s\" must start with '/'", p);
    for (size_t i = 0; i < router->nroutes; i++)
        if (strcmp(router->routes[i].method, route->method) == 0 &&
            strcmp(router->routes[i].pattern, p) == 0)
            return mv_err_set(err, MV_INVALID_ARGUMENT, "route %s %s is registered twice",
                              route->method, p);
    route_entry e = {0};
    e.r = *route;
    e.pattern = strdup(p);
    e.method = strdup(route->method);
    if (!e.pattern || !e.method) goto oom;
    e.r.pattern = e.pattern;
    e.r.method = e.method;
    const char *s = p + 1;
    while (true) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (e.nseg == MAX_SEGMENTS) {
            entry_free(&e);
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "route pattern \"%s\" has too many segments", p);
        }
        bool param = n >= 2 && s[0] == '{' && s[n - 1] == '}';
        if ((!param && (memchr(s, '{', n) || memchr(s, '}', n))) || (param && n == 2) ||
            (n == 0 && slash)) { /* a trailing '/' ("/ui/") is a last, empty literal */
            entry_free(&e);
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "route pattern \"%s\": a parameter must be a whole segment {name} "
                              "and segments must not be empty",
                              p);
        }
        e.is_param[e.nseg] = param;
        e.seg[e.nseg] = param ? strndup(s + 1, n - 2) : strndup(s, n);
        if (!e.seg[e.nseg]) goto oom;
        e.nseg++;
        if (!slash) break;
        s = slash + 1;
    }
    if (router->nroutes == router->cap) {
        size_t ncap = router->cap ? router->cap * 2 : 16;
        route_entry *nr = realloc(router->routes, ncap * sizeof *nr);
        if (!nr) goto oom;
        router->routes = nr;
        router->cap = ncap;
    }
    router->routes[router->nroutes++] = e;
    return MV_OK;
oom:
    entry_free(&e);
    return mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

/* ---- matching ---------------------------------------------------------------------------- */

typedef struct path_split {
    int n;
    const char *seg[MAX_SEGMENTS];
    size_t len[MAX_SEGMENTS];
} path_split;

static bool split_path(const char *path, path_split *out) {
    out->n = 0;
    if (!path || path[0] != '/') return false;
    const char *s = path + 1;
    while (true) {
        if (out->n == MAX_SEGMENTS) return false;
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        out->seg[out->n] = s;
        out->len[out->n] = n;
        out->n++;
        if (!slash) return true;
        s = slash + 1;
    }
}

/* HEAD is GET without the body (RFC 9110 9.3.2): the server sends the GET answer's status and
 * headers, and libmicrohttpd leaves the body out. */
static bool method_fits(const route_entry *e, const char *method) {
    return strcmp(e->method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(e->method, "GET") == 0);
}

/* Finds the best route for method + path and fills req->params. NULL when none matches. */
static const route_entry *match(mv_router *router, mv_http_request *req) {
    path_split ps;
    if (!split_path(req->path, &ps)) return NULL;
    char *decoded[MAX_SEGMENTS];
    for (int i = 0; i < ps.n; i++) {
        size_t dlen;
        decoded[i] = mv_http_decode_segment(req->arena, ps.seg[i], ps.len[i], &dlen);
        if (!decoded[i] || strlen(decoded[i]) != dlen) return NULL; /* %00 matches nothing */
        if (i < ps.n - 1 && ps.len[i] == 0) return NULL;            /* "//" */
    }
    const route_entry *best = NULL;
    unsigned best_score = 0;
    for (size_t r = 0; r < router->nroutes; r++) {
        const route_entry *e = &router->routes[r];
        if (e->nseg != ps.n || !method_fits(e, req->method)) continue;
        unsigned score = 0;
        bool ok = true;
        for (int i = 0; i < ps.n && ok; i++) {
            if (e->is_param[i]) {
                ok = decoded[i][0] != '\0';
            } else {
                ok = strcmp(e->seg[i], decoded[i]) == 0;
                score |= 1u << (MAX_SEGMENTS - 1 - i);
            }
        }
        if (ok && (!best || score > best_score)) {
            best = e;
            best_score = score;
        }
    }
    if (!best) return NULL;
    int nparams = 0;
    for (int i = 0; i < best->nseg; i++)
        nparams += best->is_param[i];
    if (nparams) {
        req->params = mv_arena_alloc(req->arena, (size_t)nparams * sizeof *req->params);
        if (!req->params) return NULL;
        for (int i = 0; i < best->nseg; i++)
            if (best->is_param[i]) {
                req->params[req->nparams].name = best->seg[i];
                req->params[req->nparams].value = decoded[i];
                req->nparams++;
            }
    }
    return best;
}

bool mv_router_io_thread(mv_router *router, mv_http_request *req) {
    const route_entry *e = match(router, req);
    req->params = NULL; /* the dispatch matches again */
    req->nparams = 0;
    /* any auth mode: a token never waits for a key refresh through a server (it parks) */
    return e && e->r.io_thread && (e->r.public_route || router->auth);
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_request_id(mv_http_request *req) {
    const char *given = mv_http_header_get(req, "X-Request-Id");
    if (given && mv_valid_token(given, 40)) {
        mv_strlcpy(req->request_id, given, sizeof req->request_id);
    } else if (mv_id_uuid(req->request_id, NULL) != MV_OK) {
        mv_id_message(req->request_id);
    }
}

/* Methods outside this list are labelled "other" so a client cannot grow the metrics. */
static const char *method_label(const char *m) {
    static const char *const known[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0) return known[i];
    return "other";
}

/* ---- parking for a key refresh -------------------------------------------------------------
 * A bearer token naming a kid the JWKS lacks while a refresh runs would hold a pool thread until
 * the identity provider answers; enough of them (a flood of made-up kids while the provider
 * hangs) would hold every thread, and requests with known kids would queue behind them. Instead
 * the request answers later: it waits, with no thread, for that refresh, and its route runs again
 * on the write pool once it is done. */

typedef struct parked {
    mv_jwks_waiter w;
    mv_router *router;
    const route_entry *e;
    mv_http_later *later;
} parked;

static void run_route(mv_router *router, const route_entry *e, mv_http_request *req,
                      mv_http_response *res, bool may_park);

static void rerun(mv_http_request *req, mv_http_response *res, void *ctx) {
    parked *k = ctx;
    run_route(k->router, k->e, req, res, false);
}

static void refreshed(void *ctx) { /* on the JWKS refresher's thread */
    parked *k = ctx;
    mv_http_later_done(k->later, rerun, k);
}

/* True when req now waits for the refresh `refresh`; false when it is done already (or the
 * request cannot wait without a thread): authenticate again now. */
static bool park(mv_router *router, const route_entry *e, mv_http_request *req,
                 unsigned long refresh) {
    parked *k = mv_arena_alloc(req->arena, sizeof *k);
    mv_http_later *later = k ? mv_http_answer_later(req) : NULL;
    if (!later) return false;
    *k = (parked){.w = {.generation = refresh, .fn = refreshed, .ctx = k},
                  .router = router,
                  .e = e,
                  .later = later};
    if (mv_auth_when_refreshed(router->auth, &k->w)) return true;
    mv_http_later_cancel(later);
    return false;
}

/* The principal of req for route e: a ticket on the routes that take one, else the authenticator.
 * Through a server a token never waits for a key refresh: with may_park (the first run) it parks
 * the request (*parked_out), else (the run after the refresh) it is refused at once. */
static mv_code authenticate(mv_router *router, const route_entry *e, mv_http_request *req,
                            mv_principal *p, bool may_park, bool *parked_out, mv_err *err) {
    const char *ticket = e->r.accepts_ticket ? mv_http_query_get(req, "ticket") : NULL;
    if (ticket)
        return router->ticket_auth
                   ? router->ticket_auth(router->ticket_ctx, req, ticket, p, err)
                   : mv_err_set(err, MV_UNAUTHENTICATED, "stream tickets are not enabled");
    if (!req->server_ctx) return mv_auth_authenticate(router->auth, req, p, err);
    unsigned long refresh = 0;
    mv_code rc = mv_auth_authenticate_nowait(router->auth, req, p, &refresh, err);
    if (rc == MV_OK || !refresh || !may_park) return rc;
    if (park(router, e, req, refresh)) {
        *parked_out = true;
        return rc;
    }
    *err = (mv_err){0};
    return mv_auth_authenticate_nowait(router->auth, req, p, &refresh, err);
}

static void run_route(mv_router *router, const route_entry *e, mv_http_request *req,
                      mv_http_response *res, bool may_park) {
    mv_err err = {0};
    if (!e->r.public_route) {
        mv_principal *p = mv_arena_alloc(req->arena, sizeof *p);
        if (!p) {
            mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
            return;
        }
        if (!router->auth && !e->r.accepts_ticket) {
            mv_http_errorf(res, MV_UNAUTHENTICATED, "authentication required");
            return;
        }
        bool waits = false;
        mv_code rc = authenticate(router, e, req, p, may_park, &waits, &err);
        if (waits) return; /* run again when the keys are refreshed */
        if (rc != MV_OK) {
            mv_http_error(res, &err);
            res->detail = mv_arena_strdup(res->arena, err.message); /* the request log's reason */
            return;
        }
        req->principal = p;
    }
    if (e->r.check_params && e->r.check_params(req, &err) != MV_OK) {
        if (err.code == MV_OK) err.code = MV_INVALID_ARGUMENT;
        mv_http_error(res, &err);
        return;
    }
    if (req->body_too_large) {
        mv_http_errorf(res, MV_PAYLOAD_TOO_LARGE, "request body is larger than %d bytes",
                       MV_HTTP_MAX_BODY);
        return;
    }
    if (e->r.json_body && mv_http_read_json_body(req, &req->json, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    e->r.handler(req, res, router->app);
    if (!req->answer_later && res->status == 0) /* else res may be the completion's already */
        mv_http_errorf(res, MV_INTERNAL, "handler for %s gave no response", e->pattern);
}

/* ---- CORS -------------------------------------------------------------------------------- */

/* The request's Origin when it is one of the allowed ones, else NULL. */
static const char *allowed_origin(const cors_set *cors, const mv_http_request *req) {
    const char *origin = mv_http_header_get(req, "Origin");
    for (size_t i = 0; origin && cors && i < cors->n; i++)
        if (strcmp(cors->origins[i], origin) == 0) return origin;
    return NULL;
}

/* The methods of `known` that req's path answers, ", "-separated into out (64 bytes). */
static void path_methods(mv_router *router, mv_http_request *req, const char *const *known,
                         size_t nknown, char out[64]) {
    out[0] = '\0';
    const char *saved = req->method;
    mv_http_header *params = req->params;
    size_t np = req->nparams;
    for (size_t k = 0; k < nknown; k++) {
        req->method = known[k];
        req->params = NULL;
        req->nparams = 0;
        if (match(router, req)) {
            if (out[0]) strcat(out, ", ");
            strcat(out, known[k]);
        }
    }
    req->method = saved;
    req->params = params;
    req->nparams = np;
}

/* OPTIONS preflight: 204, and from an allowed origin the methods the path answers. */
static void preflight(mv_router *router, const cors_set *cors, mv_http_request *req,
                      mv_http_response *res, const char *origin) {
    res->status = 204;
    if (!origin) return;
    char methods[64];
    static const char *const known[] = {"GET", "POST"};
    path_methods(router, req, known, 2, methods);
    if (!methods[0]) return;
    char age[24];
    snprintf(age, sizeof age, "%d", cors->max_age_s);
    mv_http_set_header(res, "Access-Control-Allow-Origin", origin);
    mv_http_set_header(res, "Vary", "Origin");
    mv_http_set_header(res, "Access-Control-Allow-Methods", methods);
    mv_http_set_header(res, "Access-Control-Allow-Headers",
                       "Authorization, Content-Type, Idempotency-Key, X-Resume-Token, "
                       "Last-Event-ID, X-Request-Id, X-User-Id, X-User-Roles, "
                       "X-User-Permissions, X-Tenant-Id, traceparent");
    mv_http_set_header(res, "Access-Control-Max-Age", age);
}

void mv_http_dispatch(mv_router *router, mv_http_request *req, mv_http_response *res) {
    req->started_s = mono_seconds();
    set_request_id(req);
    /* W3C trace context: kept for this request's log line and the webhooks it causes */
    mv__callctx_reset();
    const char *traceparent = mv_http_header_get(req, "traceparent");
    if (mv__traceparent_valid(traceparent))
        mv_strlcpy(mv__callctx()->traceparent, traceparent, sizeof mv__callctx()->traceparent);
    const cors_set *cors = atomic_load(&router->cors);
    const char *origin = allowed_origin(cors, req);
    if (cors && cors->n && strcmp(req->method, "OPTIONS") == 0) {
        preflight(router, cors, req, res, origin);
        mv_http_set_header(res, "X-Request-Id", req->request_id);
        return;
    }
    if (origin) {
        mv_http_set_header(res, "Access-Control-Allow-Origin", origin);
        mv_http_set_header(res, "Vary", "Origin");
        mv_http_set_header(res, "Access-Control-Expose-Headers",
                           "Idempotent-Replayed, Retry-After, X-Request-Id");
    }
    const route_entry *e = match(router, req);
    if (e) {
        req->route = e->pattern;
        req->route_ctx = e->r.ctx;
        run_route(router, e, req, res, true);
        if (req->answer_later) { /* the server calls mv_http_dispatch_end with the answer */
            mv__callctx_reset();
            return;
        }
    } else {
        const char *path = req->path && mv_valid_token(req->path, 200) ? req->path : "(this path)";
        mv_http_errorf(res, MV_NOT_FOUND, "no route for %s %s", method_label(req->method), path);
        /* a path known under other methods stays 404 (the contract), and says which they are */
        static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
        char allow[64];
        path_methods(router, req, known, sizeof known / sizeof *known, allow);
        if (allow[0]) mv_http_set_header(res, "Allow", allow);
    }
    mv_http_dispatch_end(router, req, res);
}

void mv_http_dispatch_end(mv_router *router, mv_http_request *req, mv_http_response *res) {
    if (!mv__callctx()->traceparent[0]) { /* a deferred answer ends on another thread */
        const char *traceparent = mv_http_header_get(req, "traceparent");
        if (mv__traceparent_valid(traceparent))
            mv_strlcpy(mv__callctx()->traceparent, traceparent, sizeof mv__callctx()->traceparent);
    }
    mv_http_set_header(res, "X-Request-Id", req->request_id);
    double elapsed = mono_seconds() - req->started_s;
    const char *route = req->route ? req->route : "unmatched";
    const char *method = method_label(req->method);
    if (router->metrics) {
        char status[8];
        snprintf(status, sizeof status, "%d", res->status);
        const char *labels[] = {"route", route, "method", method, "status", status, NULL};
        mv_metrics_counter_add(router->metrics, "missive_http_requests_total", labels, 1);
        const char *hl[] = {"route", route, "method", method, NULL};
        mv_metrics_observe(router->metrics, "missive_http_request_duration_seconds", hl, elapsed);
    }
    if (router->logging) {
        const char *tp = mv__callctx()->traceparent;
        mv_log_field f[] = {
            {"method", MV_LOG_STR, method},
            {"route", MV_LOG_STR, route},
            {"status", MV_LOG_INT, .i = res->status},
            {"durationMs", MV_LOG_REAL, .d = round(elapsed * 1e6) / 1e3},
            {"requestId", MV_LOG_STR, req->request_id},
            {"error", MV_LOG_STR, res->error_code && res->status >= 400 ? res->error_code : NULL},
            {"detail", MV_LOG_STR, res->detail},
            {"traceparent", MV_LOG_STR, tp[0] ? tp : NULL},
        };
        mv_log_fields(res->status >= 500 ? "error" : "info", "request", f, sizeof f / sizeof *f);
    }
    mv__callctx_reset();
}
