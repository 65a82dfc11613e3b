/* http/openapi.h — GET /openapi.json: the OpenAPI 3.1 description of every route, compiled into
 * the library from api/openapi.json at build time (scripts/embed), so the daemon serves exactly
 * the document the repository holds and the tests validate responses against. */
#ifndef MISSIVE_HTTP_OPENAPI_H
#define MISSIVE_HTTP_OPENAPI_H

#include <stddef.h>

#include "http/router.h"

/* The document's bytes (NUL-terminated) and length. */
const char *mv_http_openapi_document(size_t *len);
/* Registers GET /openapi.json (public, application/json, cacheable for an hour). */
mv_code mv_http_openapi_routes(mv_router *router, mv_err *err);

#endif
