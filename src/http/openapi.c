/* openapi.c — serves the embedded API description. The bytes come from the generated
 * build/gen/openapi_json.c; nothing is parsed or rebuilt per request. */
#include "http/openapi.h"
#include "http/request.h"

extern const unsigned char mv__openapi_json[];
extern const size_t mv__openapi_json_len;

const char *mv_http_openapi_document(size_t *len) {
    if (len) *len = mv__openapi_json_len;
    return (const char *)mv__openapi_json;
}

static void handle_openapi(mv_http_request *req, mv_http_response *res, void *app) {
    (void)req;
    (void)app;
    size_t len;
    const char *doc = mv_http_openapi_document(&len);
    mv_http_text(res, 200, "application/json", doc, len);
    mv_http_set_header(res, "Cache-Control", "public, max-age=3600");
}

mv_code mv_http_openapi_routes(mv_router *router, mv_err *err) {
    mv_route r = {.method = "GET",
                  .pattern = "/openapi.json",
                  .handler = handle_openapi,
                  .public_route = true};
    return mv_router_add(router, &r, err);
}
