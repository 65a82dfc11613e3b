/* message_routes_fuzz.c — libFuzzer harness: the real message routes over a message service on an
 * in-memory SQLite store. The first input byte picks a route, the rest is the request body (or
 * the query string). Every input must produce a status and a JSON body; nothing may crash, leak
 * or trip a sanitizer, whatever the JSON says. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/request.h"
#include "http/routes_messages.h"
#include "missive/message.h"

static const char *TEMPLATE =
    "{\"templateCd\": \"fuzz\", \"receiverContent\": {\"title\": \"{{a}} {{#b}}{{.}}{{/b}}\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\", \"fanOut\": \"items\"},"
    " \"actions\": [{\"actionCd\": \"go\", \"name\": \"Go {{a}}\", \"variant\": \"primary\","
    "   \"receiver\": true, \"sender\": true, \"condition\": {\"!=\": [{\"var\": \"payload.x\"}, 1]},"
    "   \"senderNotification\": \"{{a}} {{result}}\"}]}";

static mv_store *store;
static mv_registry *registry;
static mv_service *service;
static mv_auth *auth;
static mv_router *router;
static mv_message_routes routes;
static char message_id[25];

static void setup(void) {
    mv_store_options so = {.allow_memory = true};
    mv_store_open("sqlite::memory:", &so, &store, NULL);
    mv_store_migrate(store, NULL, NULL);
    registry = mv_registry_new();
    json_t *t = json_loads(TEMPLATE, 0, NULL);
    mv_registry_register(registry, t, "<fuzz>", NULL);
    json_decref(t);
    mv_service_options o = {.store = store, .registry = registry, .client_request_wait_zero = true};
    mv_service_new(&o, &service, NULL);
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    mv_auth_new(&ao, &auth, NULL);
    router = mv_router_new(NULL);
    mv_router_set_auth(router, auth);
    routes = (mv_message_routes){.service = service, .admin_permission = "is.admin"};
    mv_message_routes_add(router, &routes, NULL);
    /* one message whose actions the fuzzer can press */
    mv_user u = {.id = "fuzzer"};
    json_t *payload = json_pack("{s:[{s:s,s:s}]}", "items", "to", "fuzzer", "a", "x");
    mv_create_request req = {.template_cd = "fuzz", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_message_create(service, &req, &m, NULL, NULL);
    mv_strlcpy(message_id, mv_json_str(json_array_get(m, 0), "id"), sizeof message_id);
    json_decref(m);
    json_decref(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!router) setup();
    if (size < 1) return 0;
    char target[512];
    const char *method = "POST";
    const char *body = (const char *)data + 1;
    size_t body_len = size - 1;
    switch (data[0] % 4) {
    case 0: snprintf(target, sizeof target, "/messages/new/fuzz"); break;
    case 1: snprintf(target, sizeof target, "/messages/%s/action/go", message_id); break;
    case 2: {
        method = "GET";
        size_t n = body_len < 200 ? body_len : 200;
        char q[201];
        for (size_t i = 0; i < n; i++) q[i] = (body[i] > 32 && body[i] < 127 && body[i] != '#') ? body[i] : '_';
        q[n] = 0;
        snprintf(target, sizeof target, "/messages?%s", q);
        body_len = 0;
        break;
    }
    default: snprintf(target, sizeof target, "/messages/%s/actions/receiver", message_id);
             method = "GET";
             body_len = 0;
    }
    mv_arena *arena = mv_arena_new();
    mv_http_request req;
    mv_http_response res;
    if (mv_http_request_init(&req, arena, method, target, NULL) == MV_OK) {
        mv_http_request_add_header(&req, "X-User-Id", "fuzzer", NULL);
        if (body_len) {
            req.body = mv_arena_strndup(arena, body, body_len);
            req.body_len = body_len;
        }
        mv_http_response_init(&res, arena);
        mv_http_dispatch(router, &req, &res);
        if (res.status < 200 || res.status > 599) abort();
        json_t *parsed = NULL;
        if (res.body && mv_json_parse(res.body, res.body_len, &parsed, NULL) != MV_OK) abort();
        json_decref(parsed);
    }
    mv_arena_free(arena);
    return 0;
}
