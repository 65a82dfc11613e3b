/* daemon_limits_test.c — the daemon's inputs on each store: user ids, roles and tenants longer than
 * MV_MAX_ID_BYTES (the 3,000 characters; PostgreSQL answered 500) are 400
 * invalid_argument naming the field whether they come in the create body (rendered into toUser),
 * from a prepare webhook (toRoles[3], fromUser) or in the identity headers, and nothing is
 * stored; ids at the limit are stored and found. A template's required field missing from the
 * body is 400 naming it, before the reservation: the same Idempotency-Key then creates. */
#include <curl/curl.h>
#include <sys/stat.h>

#include "message/fixture.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"

typedef struct {
    char *data;
    size_t len;
} body_buf;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
    body_buf *b = ud;
    char *grown = realloc(b->data, b->len + size * n + 1);
    if (!grown) return 0;
    b->data = grown;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* One request whose header lines may be of any length (test_http's are bounded). */
static test_reply call(int port, const char *method, const char *path, const char *const *headers,
                       const char *body) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    for (size_t i = 0; headers && headers[i]; i++)
        hdrs = curl_slist_append(hdrs, headers[i]);
    body_buf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 15000L);
    test_reply r = {0};
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    if (b.data) r.json = json_loads(b.data, 0, NULL);
    free(b.data);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return r;
}

static const char *error_message(const test_reply *r) {
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "message"));
}

/* A header line "name: " + n bytes starting with tag. */
static char *header_of(const char *name, size_t n, char tag) {
    size_t k = strlen(name);
    char *s = malloc(k + 2 + n + 1);
    snprintf(s, k + 3, "%s: ", name);
    memset(s + k + 2, 'x', n);
    s[k + 2] = tag;
    s[k + 2 + n] = '\0';
    return s;
}

static char *text_of(size_t n, char tag) {
    char *s = malloc(n + 1);
    memset(s, 'y', n);
    s[0] = tag;
    s[n] = '\0';
    return s;
}

/* Expects 400 invalid_argument whose message starts with want. */
#define CHECK_400(reply, want)                                                                     \
    do {                                                                                           \
        test_reply r_ = (reply);                                                                   \
        CHECK_INT(r_.status, 400);                                                                 \
        CHECK_STR(test_reply_code(&r_) ? test_reply_code(&r_) : "", "invalid_argument");           \
        const char *m_ = error_message(&r_);                                                       \
        CHECK(m_ &&strncmp(m_, want, strlen(want)) == 0);                                          \
        if (m_ && strncmp(m_, want, strlen(want)) != 0) fprintf(stderr, "  got: %s\n", m_);        \
        test_reply_free(&r_);                                                                      \
    } while (0)

static pid_t start(const char *kind, http_sink *sink, mv_store **store, int *port) {
    char dir[600], path[800], config[800], log[800], url[700];
    mv_strlcpy(url, test_store_url(kind, "ids"), sizeof url);
    mv_strlcpy(dir, test_tmp_path(kind), sizeof dir);
    snprintf(path, sizeof path, "%s/templates", dir);
    mkdir(dir, 0700);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/templates/stay.json", dir);
    if (!test_write_file(path, "{\"templateCd\": \"stay\", \"receiverContent\": {\"title\":"
                               " \"{{guest}} wants {{listing}}\"}, \"prepare\": {\"toUser\":"
                               " \"{{hostId}}\"}, \"required\": [\"listing\", \"hostId\"],"
                               " \"actions\": []}"))
        return -1;
    snprintf(path, sizeof path, "%s/templates/hooked.json", dir);
    if (!test_write_file(path,
                         "{\"templateCd\": \"hooked\", \"receiverContent\": {\"title\": \"t\"},"
                         " \"prepare\": {\"webhook\": \"%s/prepare\"}, \"actions\": []}",
                         http_sink_url(sink)))
        return -1;
    snprintf(config, sizeof config, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"auth\": {\"mode\": \"headers\"}}",
                         url, dir))
        return -1;
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    *port = test_free_port();
    pid_t pid = test_daemon_start(config, *port, NULL, log);
    mv_err err = {0};
    if (pid > 0 && mv_store_open(url, NULL, store, &err) != MV_OK) {
        fprintf(stderr, "store: %s\n", err.message);
        *store = NULL;
    }
    return pid;
}

STORE_TEST(ids_past_the_limit_are_400_naming_the_field_on_every_way_in_and_store_nothing) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    mv_store *store = NULL;
    int port;
    pid_t pid = start(kind, sink, &store, &port);
    REQUIRE(pid > 0 && store);
    const char *ana[] = {"X-User-Id: ana", NULL};
    char *huge = text_of(3000, 'h'), body[4000];

    /* the create body, rendered into toUser */
    snprintf(body, sizeof body, "{\"hostId\": \"%s\", \"listing\": \"Flat\"}", huge);
    CHECK_400(call(port, "POST", "/messages/new/stay", ana, body),
              "toUser must be at most 255 bytes (it has 3000) (message 0 of template \"stay\")");
    /* a prepare webhook's items */
    snprintf(body, sizeof body, "{\"toUser\": \"bob\", \"toRoles\": [\"a\", \"b\", \"c\", \"%s\"]}",
             huge);
    http_sink_set_default(sink, &(http_sink_response){.body = body});
    CHECK_400(call(port, "POST", "/messages/new/hooked", ana, "{}"),
              "toRoles[3] must be at most 255 bytes (it has 3000)");
    snprintf(body, sizeof body, "{\"toUser\": \"bob\", \"fromUser\": \"%s\"}", huge);
    http_sink_set_default(sink, &(http_sink_response){.body = body});
    CHECK_400(call(port, "POST", "/messages/new/hooked", ana, "{}"),
              "fromUser must be at most 255 bytes (it has 3000)");
    /* the identity headers, on a create, a list and a count */
    char *user = header_of("X-User-Id", 3000, 'u'), *tenant = header_of("X-Tenant-Id", 3000, 't');
    char *role = header_of("X-User-Roles", 3000, 'r');
    memcpy(role + strlen("X-User-Roles: "), "a, b,", 5); /* the third role is the long one */
    const char *by_user[] = {user, NULL}, *by_role[] = {"X-User-Id: ana", role, NULL},
               *by_tenant[] = {"X-User-Id: ana", tenant, NULL};
    CHECK_400(call(port, "POST", "/messages/new/stay", by_user,
                   "{\"hostId\": \"bob\", \"listing\": \"Flat\"}"),
              "X-User-Id must be at most 255 bytes (it has 3000)");
    CHECK_400(call(port, "GET", "/messages", by_role, NULL),
              "X-User-Roles[2] must be at most 255 bytes (it has 2995)");
    CHECK_400(call(port, "GET", "/messages/count", by_tenant, NULL),
              "X-Tenant-Id must be at most 255 bytes (it has 3000)");
    /* a required field missing: refused before the reservation, so the key is still free */
    const char *keyed[] = {"X-User-Id: ana", "Idempotency-Key: stay-1", NULL};
    CHECK_400(call(port, "POST", "/messages/new/stay", keyed, "{\"hostId\": \"bob\"}"),
              "\"listing\" is required by template \"stay\"");
    CHECK_400(
        call(port, "POST", "/messages/new/stay", keyed, "{\"hostId\": \"bob\", \"listing\": null}"),
        "\"listing\" is required by template \"stay\"");
    CHECK_INT(fixture_rows(store, 'm'), 0);
    CHECK_INT(fixture_rows(store, 'r'), 0);
    test_reply ok = call(port, "POST", "/messages/new/stay", keyed,
                         "{\"hostId\": \"bob\", \"listing\": \"Flat\"}");
    CHECK_INT(ok.status, 201);
    test_reply_free(&ok);
    CHECK_INT(fixture_rows(store, 'm'), 1);
    CHECK_INT(fixture_rows(store, 'r'), 1);

    /* at the limit: a 255-byte sender, recipient and tenant, stored and found */
    char *from = header_of("X-User-Id", MV_MAX_ID_BYTES, 'f');
    char *in = header_of("X-Tenant-Id", MV_MAX_ID_BYTES, 'n');
    char *host = text_of(MV_MAX_ID_BYTES, 'o'), *to = header_of("X-User-Id", MV_MAX_ID_BYTES, 'o');
    memset(to + strlen("X-User-Id: ") + 1, 'y', MV_MAX_ID_BYTES - 1); /* the same as host */
    const char *sender[] = {from, in, NULL}, *recipient[] = {to, in, NULL};
    snprintf(body, sizeof body, "{\"hostId\": \"%s\", \"listing\": \"Flat\"}", host);
    ok = call(port, "POST", "/messages/new/stay", sender, body);
    CHECK_INT(ok.status, 201);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(ok.json, "messages"), 0), "toUser"), host);
    test_reply_free(&ok);
    test_reply list = call(port, "GET", "/messages", recipient, NULL);
    CHECK_INT(list.status, 200);
    CHECK_INT(json_array_size(json_object_get(list.json, "messages")), 1);
    test_reply_free(&list);
    test_reply count = call(port, "GET", "/messages/count", recipient, NULL);
    CHECK_INT(count.status, 200);
    CHECK_INT(json_integer_value(json_object_get(count.json, "count")), 1);
    test_reply_free(&count);
    CHECK_INT(fixture_rows(store, 'm'), 2);

    CHECK_INT(test_daemon_stop(pid), 0);
    mv_store_close(store);
    http_sink_stop(sink);
    free(huge), free(user), free(tenant), free(role);
    free(from), free(in), free(host), free(to);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return RUN_TESTS(ids_past_the_limit_are_400_naming_the_field_on_every_way_in_and_store_nothing);
}
