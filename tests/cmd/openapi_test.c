/* openapi_test.c — api/openapi.json against the daemon's route table: every registered route is
 * described (method and path), every described operation is registered, every $ref resolves,
 * operation ids are unique, and GET /openapi.json answers the repository's document byte for
 * byte. */
#include "cmd/daemon.h"
#include "http/openapi.h"
#include "missive/base.h"
#include "support/http_call.h"
#include "test.h"

static json_t *load_doc(void) {
    json_error_t je;
    json_t *doc = json_load_file("api/openapi.json", 0, &je);
    if (!doc) fprintf(stderr, "api/openapi.json: %s (line %d)\n", je.text, je.line);
    return doc;
}

/* "/messages/{id}/action/{actionCd}" → "/messages/{}/action/{}" */
static void normalise(const char *pattern, char *out, size_t n) {
    size_t o = 0;
    for (const char *p = pattern; *p && o + 3 < n; p++) {
        out[o++] = *p;
        if (*p == '{') {
            while (*p && *p != '}')
                p++;
            out[o++] = '}';
            if (!*p) break;
        }
    }
    out[o] = '\0';
}

typedef struct {
    json_t *described; /* "method /path" → true, from the document */
    json_t *registered;
} tables;

static void on_route(void *ctx, const char *method, const char *pattern) {
    tables *t = ctx;
    char norm[256], key[300], lower[16];
    normalise(pattern, norm, sizeof norm);
    size_t i = 0;
    for (; method[i] && i < sizeof lower - 1; i++)
        lower[i] = (char)(method[i] | 0x20);
    lower[i] = '\0';
    snprintf(key, sizeof key, "%s %s", lower, norm);
    json_object_set_new(t->registered, key, json_true());
}

static const char *const METHODS[] = {"get",    "post",    "put",  "patch",
                                      "delete", "options", "head", NULL};

TEST(every_route_the_daemon_registers_is_described_and_every_description_is_registered) {
    json_t *doc = load_doc();
    REQUIRE(doc);
    tables t = {.described = json_object(), .registered = json_object()};
    const char *path;
    json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), path, item) {
        char norm[256], key[300];
        normalise(path, norm, sizeof norm);
        for (int m = 0; METHODS[m]; m++)
            if (json_object_get(item, METHODS[m])) {
                snprintf(key, sizeof key, "%s %s", METHODS[m], norm);
                json_object_set_new(t.described, key, json_true());
            }
    }
    mv_daemon d;
    memset(&d, 0, sizeof d);
    mv_router *router = mv_router_new(&d);
    mv_err err = {0};
    CHECK_CODE(mv_daemon_routes(router, &d, &err), MV_OK, &err);
    mv_router_each(router, on_route, &t);
    CHECK(json_object_size(t.registered) >= 32);
    const char *key;
    json_t *v;
    json_object_foreach(t.registered, key, v) {
        if (!json_object_get(t.described, key)) {
            char m[400];
            snprintf(m, sizeof m, "route \"%s\" is not in api/openapi.json", key);
            test_fail_(__FILE__, __LINE__, m);
        }
    }
    json_object_foreach(t.described, key, v) {
        if (!json_object_get(t.registered, key)) {
            char m[400];
            snprintf(m, sizeof m, "\"%s\" is described but the daemon has no such route", key);
            test_fail_(__FILE__, __LINE__, m);
        }
    }
    mv_router_free(router);
    json_decref(t.described);
    json_decref(t.registered);
    json_decref(doc);
}

/* Checks every "$ref" under v resolves inside doc. */
static void check_refs(json_t *doc, json_t *v, int *bad) {
    if (json_is_object(v)) {
        const char *ref = mv_json_str(v, "$ref");
        if (ref) {
            char path[512];
            snprintf(path, sizeof path, "%s", ref + 2); /* "#/a/b" → "a/b" */
            for (char *p = path; *p; p++)
                if (*p == '/') *p = '.';
            if (strncmp(ref, "#/", 2) != 0 || !mv_json_path(doc, path)) {
                fprintf(stderr, "unresolved $ref %s\n", ref);
                (*bad)++;
            }
        }
        const char *k;
        json_t *c;
        json_object_foreach(v, k, c) check_refs(doc, c, bad);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) check_refs(doc, c, bad);
    }
}

TEST(the_document_is_openapi_3_1_with_resolving_refs_unique_operation_ids_and_error_codes) {
    json_t *doc = load_doc();
    REQUIRE(doc);
    CHECK_STR(mv_json_str(doc, "openapi"), "3.1.0");
    json_t *schemes = mv_json_path(doc, "components.securitySchemes");
    CHECK(json_object_get(schemes, "trustedHeaders") && json_object_get(schemes, "bearerJwt"));
    int bad = 0;
    check_refs(doc, doc, &bad);
    CHECK_INT(bad, 0);
    json_t *ids = json_object();
    const char *path;
    json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), path, item) {
        for (int m = 0; METHODS[m]; m++) {
            json_t *op = json_object_get(item, METHODS[m]);
            if (!op) continue;
            const char *id = mv_json_str(op, "operationId");
            CHECK(id != NULL);
            if (id) {
                CHECK(json_object_get(ids, id) == NULL);
                json_object_set_new(ids, id, json_true());
            }
            json_t *responses = json_object_get(op, "responses");
            CHECK(json_object_size(responses) >= 1);
            /* authenticated routes describe their 401 */
            json_t *sec = json_object_get(op, "security");
            if (!sec || json_array_size(sec) > 0) CHECK(json_object_get(responses, "401") != NULL);
        }
    }
    CHECK(json_object_size(ids) >= 30);
    json_decref(ids);
    json_decref(doc);
}

TEST(get_openapi_json_serves_the_repository_document_without_authentication) {
    FILE *f = fopen("api/openapi.json", "rb");
    REQUIRE(f);
    static char file[1 << 20];
    size_t n = fread(file, 1, sizeof file, f);
    fclose(f);
    mv_router *router = mv_router_new(NULL);
    mv_err err = {0};
    CHECK_CODE(mv_http_openapi_routes(router, &err), MV_OK, &err);
    call c;
    call_init(&c, "GET", "/openapi.json");
    call_run(&c, router);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(mv_http_response_header(&c.res, "Content-Type"), "application/json");
    CHECK_INT(c.res.body_len, n);
    CHECK(c.res.body && memcmp(c.res.body, file, n) == 0);
    CHECK_STR(mv_json_str(c.body, "openapi"), "3.1.0");
    call_free(&c);
    mv_router_free(router);
}

int main(void) {
    return RUN_TESTS(
        every_route_the_daemon_registers_is_described_and_every_description_is_registered,
        the_document_is_openapi_3_1_with_resolving_refs_unique_operation_ids_and_error_codes,
        get_openapi_json_serves_the_repository_document_without_authentication);
}
