/* http/routes_ui.h — the web inbox and operator console (DESIGN "Web inbox and console"): static
 * files under /ui/, served from a table of assets compiled into the program.
 *
 * The table is handed in rather than linked here so that this layer stays free of generated code:
 * the daemon passes the table that the build generates from ui/ (cmd/ui_assets, see
 * scripts/embed-ui), a test passes its own. Every answer carries a Content-Security-Policy that
 * forbids inline script, an ETag, and Cache-Control: no-cache (revalidate: the file names carry no
 * version, so a browser must ask again, and gets 304 while the build has not changed). */
#ifndef MISSIVE_HTTP_ROUTES_UI_H
#define MISSIVE_HTTP_ROUTES_UI_H

#include <stdatomic.h>
#include <stddef.h>

#include "http/router.h"

typedef struct mv_ui_asset {
    const char *name;         /* "missive-inbox.js": the path below /ui/ */
    const char *content_type; /* "text/javascript; charset=utf-8" */
    const char *etag;         /* quoted strong validator, e.g. "\"3f2a…\"" */
    const unsigned char *data;
    size_t len;
} mv_ui_asset;

/* The policy every /ui/ answer carries: scripts and styles from this origin only (no inline
 * script, no eval), API calls to this origin only, no frames, no plugins, no form posts. */
#define MV_UI_CSP                                                                                  \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "                \
    "img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'none'; "                 \
    "frame-ancestors 'none'"

typedef struct mv_ui_routes {
    const mv_ui_asset *assets;  /* borrowed; ends with an entry whose name is NULL */
    const char *index;          /* the asset answered at /ui/ ("index.html") */
    const atomic_bool *enabled; /* NULL: always served; false: every /ui route answers 404
                                 * not_found, as an unknown route (switched by a reload) */
    /* "ui.oidc" (both or neither): the console signs in with this OpenID Connect provider. The
     * issuer's origin joins connect-src of the policy (discovery and the token request are the
     * browser's); GET /ui/oidc.json tells the console. Borrowed. */
    const char *oidc_issuer;
    const char *oidc_client_id;
} mv_ui_routes;

/* Registers GET /ui (308 to /ui/), GET /ui/ (the index asset), GET /ui/{file} (an asset by
 * name; an unknown name is 404 not_found, as an unknown route), GET /ui/missive-inbox.js (the
 * element, when the table has it) and GET /ui/oidc.json ({"issuer", "clientId"}, both null
 * without "ui.oidc"). All are public: the pages hold
 * no data, every API call they make authenticates on its own. ui must outlive router. */
mv_code mv_ui_routes_add(mv_router *router, const mv_ui_routes *ui, mv_err *err);

#endif
