/* json_body_fuzz.c — libFuzzer harness for what the daemon reads from a client: JSON bodies
 * (mv_http_read_json_body with and without a Content-Type) and bearer tokens (jwt mode). The
 * first byte picks the target so one corpus covers both. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/request.h"
#include "missive/base.h"

static const char SECRET[] = "fuzz-secret-fuzz-secret-fuzz-sec";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static mv_auth *auth;
    if (!auth) {
        mv_auth_options o = {.mode = MV_AUTH_JWT, .secret = SECRET, .secret_len = sizeof SECRET - 1};
        mv_auth_new(&o, &auth, NULL);
    }
    uint8_t which = data[0];
    data++;
    size--;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    mv_arena *a = mv_arena_new();
    mv_http_request req;
    mv_http_request_init(&req, a, "POST", "/x", NULL);
    if (which & 1) {
        char *h = malloc(size + 8);
        memcpy(h, "Bearer ", 7);
        memcpy(h + 7, text, size + 1);
        mv_http_request_add_header(&req, "Authorization", h, NULL);
        free(h);
        mv_principal p;
        mv_err err = {0};
        mv_code rc = mv_auth_authenticate(auth, &req, &p, &err);
        if (rc != MV_OK && rc != MV_UNAUTHENTICATED) abort();
        if (rc == MV_OK && (!p.user_id || !p.tenant || !json_is_object(p.permissions))) abort();
    } else {
        if (which & 2) mv_http_request_add_header(&req, "Content-Type", "application/json", NULL);
        req.body = text;
        req.body_len = size;
        json_t *v = NULL;
        mv_err err = {0};
        mv_code rc = mv_http_read_json_body(&req, &v, &err);
        if (rc == MV_OK && !v) abort();
        if (rc != MV_OK && rc != MV_INVALID_JSON) abort();
        mv_http_response res;
        mv_http_response_init(&res, a);
        if (rc != MV_OK) mv_http_error(&res, &err);
    }
    mv_arena_free(a);
    free(text);
    return 0;
}
