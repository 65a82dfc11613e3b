/* routes_ui.c — GET /ui/ and GET /ui/{file}: the compiled-in web inbox and console.
 *
 * Nothing here reads the disk or the store: an answer is a lookup in the asset table and a few
 * headers, so the routes are public and cost the same whoever asks. The security headers are the
 * point of the file: the pages render message text that any sender controls, so besides the
 * component's own rule (text, never HTML) the browser is told to run no inline script and to talk
 * to this origin only. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "http/request.h"
#include "http/routes_ui.h"
#include "missive/base.h"

static const mv_ui_asset *find_asset(const mv_ui_routes *ui, const char *name) {
    for (const mv_ui_asset *a = ui->assets; name && a->name; a++)
        if (strcmp(a->name, name) == 0) return a;
    return NULL;
}

/* If-None-Match holds a list of entity tags (or "*"); a weak W/ prefix still names our tag. */
static bool not_modified(const mv_http_request *req, const mv_ui_asset *a) {
    const char *inm = mv_http_header_get(req, "If-None-Match");
    return inm && (strcmp(inm, "*") == 0 || strstr(inm, a->etag) != NULL);
}

/* The issuer's origin ("https://idp.example.com" of "https://idp.example.com/realms/x"), or 0
 * bytes when there is no issuer or it is not a plain http(s) origin. */
static size_t issuer_origin(const char *issuer, char *out, size_t cap) {
    const char *p = issuer ? strstr(issuer, "://") : NULL;
    if (!p || (strncmp(issuer, "https://", 8) != 0 && strncmp(issuer, "http://", 7) != 0)) return 0;
    size_t n = (size_t)(p + 3 - issuer) + strcspn(p + 3, "/?#");
    if (n >= cap || strpbrk(issuer, " ;,'\"\r\n") != NULL) return 0;
    memcpy(out, issuer, n);
    out[n] = '\0';
    return n;
}

static void security_headers(mv_http_response *res, const mv_ui_routes *ui) {
    char origin[512], csp[1024];
    if (ui && issuer_origin(ui->oidc_issuer, origin, sizeof origin)) {
        /* discovery and the token request go to the identity provider */
        const char *policy = MV_UI_CSP;
        snprintf(csp, sizeof csp, "%s", policy);
        char *at = strstr(csp, "connect-src 'self'");
        if (at) {
            size_t head = (size_t)(at - csp) + strlen("connect-src 'self'");
            snprintf(csp + head, sizeof csp - head, " %s%s", origin,
                     policy + head); /* the rest of the policy, after connect-src 'self' */
        }
        mv_http_set_header(res, "Content-Security-Policy", csp);
    } else {
        mv_http_set_header(res, "Content-Security-Policy", MV_UI_CSP);
    }
    mv_http_set_header(res, "X-Content-Type-Options", "nosniff");
    mv_http_set_header(res, "Referrer-Policy", "no-referrer");
    mv_http_set_header(res, "Cross-Origin-Opener-Policy", "same-origin");
    mv_http_set_header(res, "X-Frame-Options", "DENY");
}

/* Off: the same answer as a path no route matches. */
static bool ui_off(const mv_http_request *req, mv_http_response *res) {
    const mv_ui_routes *ui = req->route_ctx;
    if (!ui->enabled || atomic_load(ui->enabled)) return false;
    mv_http_errorf(res, MV_NOT_FOUND, "no route for GET %s",
                   mv_valid_token(req->path, 200) ? req->path : "(this path)");
    return true;
}

static void serve(mv_http_request *req, mv_http_response *res, const mv_ui_asset *a) {
    const mv_ui_routes *ui = req->route_ctx;
    if (ui_off(req, res)) return;
    if (!a) {
        mv_http_errorf(res, MV_NOT_FOUND, "no route for GET /ui/%s",
                       mv_valid_token(mv_http_param(req, "file"), 200) ? mv_http_param(req, "file")
                                                                       : "(this path)");
        return;
    }
    security_headers(res, ui);
    mv_http_set_header(res, "Cache-Control", "no-cache");
    mv_http_set_header(res, "ETag", a->etag);
    if (not_modified(req, a)) {
        res->status = 304;
        return;
    }
    res->status = 200;
    mv_http_set_header(res, "Content-Type", a->content_type);
    res->body = (const char *)a->data; /* static, outlives the response */
    res->body_len = a->len;
}

static void handle_index(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    const mv_ui_routes *ui = req->route_ctx;
    serve(req, res, find_asset(ui, ui->index));
}

static void handle_file(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    serve(req, res, find_asset(req->route_ctx, mv_http_param(req, "file")));
}

/* The element has a route of its own: it is the address applications embed (and the one the API
 * description names). */
static void handle_element(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    serve(req, res, find_asset(req->route_ctx, "missive-inbox.js"));
}

/* What the console needs to sign in: public, like the pages (a client id is not a secret). */
static void handle_oidc(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    if (ui_off(req, res)) return;
    const mv_ui_routes *ui = req->route_ctx;
    bool on = ui->oidc_issuer && ui->oidc_client_id;
    json_t *doc = json_pack("{s:s?,s:s?}", "issuer", on ? ui->oidc_issuer : NULL, "clientId",
                            on ? ui->oidc_client_id : NULL);
    security_headers(res, ui);
    mv_http_set_header(res, "Cache-Control", "no-cache");
    mv_http_json(res, 200, doc); /* steals doc */
}

static void handle_bare(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    if (ui_off(req, res)) return;
    security_headers(res, req->route_ctx);
    mv_http_set_header(res, "Location", "/ui/");
    mv_http_text(res, 308, "text/plain; charset=utf-8", "/ui/\n", 5);
}

mv_code mv_ui_routes_add(mv_router *router, const mv_ui_routes *ui, mv_err *err) {
    void *ctx = (void *)ui;
    const mv_route table[] = {
        {"GET", "/ui", handle_bare, true, false, NULL, ctx},
        {"GET", "/ui/", handle_index, true, false, NULL, ctx},
        {"GET", "/ui/{file}", handle_file, true, false, NULL, ctx},
        {"GET", "/ui/missive-inbox.js", handle_element, true, false, NULL, ctx},
        {"GET", "/ui/oidc.json", handle_oidc, true, false, NULL, ctx},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
