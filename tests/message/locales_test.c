/* locales_test.c — messages in the reader's language on every store kind: a template's locales
 * rendered at create and counted in limits.messageBytes, read back by Accept-Language with the
 * de-AT → de → default fallback and a "locale" field (also through GET /messages/{id} and the
 * GET /messages list), channel
 * deliveries in the recipient's stored locale, and bad locales refused at load naming the tag. */
#include "deliver/outbox_text.h"
#include "fixture.h"
#include "http/auth.h"
#include "http/routes_messages.h"
#include "missive/reach.h"
#include "support/http_call.h"

static const char OFFER[] =
    "{\"templateCd\": \"offer\", \"type\": \"request\", \"label\": \"Offer\", \"actions\": "
    "[{\"actionCd\": \"accept\","
    " \"name\": \"Accept {{flat}}\", \"variant\": \"primary\", \"receiver\": true}],"
    " \"senderContent\": {\"title\": \"You offered {{flat}}\"},"
    " \"receiverContent\": {\"title\": \"Flat {{flat}} for you\", \"short\": \"short\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"}, \"channels\": {\"sms\": true},"
    " \"locales\": {\"de\": {\"receiverContent\": {\"title\": \"Wohnung {{flat}} f\\u00fcr Sie\"},"
    "   \"senderContent\": {\"title\": \"Sie boten {{flat}} an\"},"
    "   \"actions\": {\"accept\": {\"name\": \"{{flat}} annehmen\"}}, \"label\": \"Angebot\"},"
    "  \"fr\": {\"receiverContent\": {\"title\": \"Appartement {{flat}}\"}}}}";

typedef struct env {
    fixture f;
    mv_reach *reach;
    mv_auth *auth;
    mv_router *router;
    mv_message_routes routes;
} env;

static int env_open(env *e, const char *kind, const char *name, int64_t max_bytes) {
    memset(e, 0, sizeof *e);
    json_t *ch = json_loads("{\"sms\": {\"webhook\": \"http://127.0.0.1:9/sms\"}}", 0, NULL);
    mv_code rc = mv_reach_new(ch, NULL, false, &e->reach, NULL);
    json_decref(ch);
    if (rc != MV_OK) return 0;
    mv_service_options o = {.reach = e->reach, .max_message_bytes = max_bytes};
    if (!fixture_open_opts(&e->f, kind, name, &o)) return 0;
    json_t *t = json_loads(OFFER, 0, NULL);
    mv_err err = {0};
    rc = mv_registry_register(e->f.registry, t, "<offer>", &err);
    json_decref(t);
    if (rc != MV_OK) {
        fprintf(stderr, "offer: %s\n", err.message);
        return 0;
    }
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&ao, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_message_routes){e->f.svc, "is.admin"};
    return mv_message_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    fixture_close(&e->f);
    mv_reach_free(e->reach);
}

static char *create(env *e, const char *flat, mv_code *rc_out) {
    mv_user alice = {.id = "alice"};
    json_t *payload = json_pack("{s:s,s:s}", "to", "bob", "flat", flat);
    mv_create_request req = {.template_cd = "offer", .user = &alice, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    *rc_out = mv_message_create(e->f.svc, &req, &msgs, NULL, &err);
    char *id = *rc_out == MV_OK ? strdup(mv_json_str(json_array_get(msgs, 0), "id")) : NULL;
    json_decref(msgs);
    json_decref(payload);
    return id;
}

/* The receiver's title of id read with accept, and the locale the read reports. */
static const char *title_in(env *e, const char *id, const char *accept, char locale[16]) {
    static char title[128];
    json_t *m = NULL;
    mv_user bob = {.id = "bob"};
    mv_err err = {0};
    title[0] = locale[0] = '\0';
    if (mv_message_get(e->f.svc, id, &bob, &m, &err) != MV_OK ||
        mv_message_localize(e->f.svc, m, accept, &err) != MV_OK) {
        fprintf(stderr, "read: %s\n", err.message);
    } else {
        snprintf(title, sizeof title, "%s",
                 mv_json_str(json_object_get(m, "receiverContent"), "title"));
        const char *l = mv_json_str(m, "locale");
        snprintf(locale, 16, "%s", l ? l : "(null)");
    }
    json_decref(m);
    return title;
}

STORE_TEST(a_reader_gets_the_best_locale_with_de_at_falling_back_to_de_then_the_default) {
    env e;
    REQUIRE(env_open(&e, kind, "loc_read", 0));
    mv_code rc;
    char *id = create(&e, "3B", &rc);
    REQUIRE(id);
    char loc[16];
    CHECK_STR(title_in(&e, id, "de-AT", loc), "Wohnung 3B für Sie");
    CHECK_STR(loc, "de");
    CHECK_STR(title_in(&e, id, "fr-CH, de;q=0.8", loc), "Appartement 3B");
    CHECK_STR(loc, "fr");
    CHECK_STR(title_in(&e, id, "es, de;q=0.5", loc), "Wohnung 3B für Sie");
    CHECK_STR(title_in(&e, id, "es-MX, en", loc), "Flat 3B for you");
    CHECK_STR(loc, "(null)");
    CHECK_STR(title_in(&e, id, "DE", loc), "Wohnung 3B für Sie"); /* tags match case-blind */
    /* a locale without some text keeps the default's: fr has no short */
    json_t *m = NULL;
    mv_user bob = {.id = "bob"};
    REQUIRE(mv_message_get(e.f.svc, id, &bob, &m, NULL) == MV_OK);
    REQUIRE(mv_message_localize(e.f.svc, m, "fr", NULL) == MV_OK);
    CHECK_STR(mv_json_str(json_object_get(m, "receiverContent"), "short"), "short");
    json_decref(m);
    free(id);
    env_close(&e);
}

STORE_TEST(get_message_with_accept_language_de_at_reads_the_de_content) {
    env e;
    REQUIRE(env_open(&e, kind, "loc_http", 0));
    mv_code rc;
    char *id = create(&e, "4C", &rc);
    REQUIRE(id);
    char target[64];
    snprintf(target, sizeof target, "/messages/%s", id);
    call c;
    call_init(&c, "GET", target);
    call_header(&c, "X-User-Id", "bob");
    call_header(&c, "Accept-Language", "de-AT,de;q=0.9,en;q=0.5");
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(mv_json_str(json_object_get(c.body, "receiverContent"), "title"),
              "Wohnung 4C für Sie");
    CHECK_STR(mv_json_str(c.body, "locale"), "de");
    call_free(&c);
    call_init(&c, "GET", target); /* the sender reads the sender content in their language */
    call_header(&c, "X-User-Id", "alice");
    call_header(&c, "X-User-Locale", "de");
    call_run(&c, e.router);
    CHECK_STR(mv_json_str(json_object_get(c.body, "senderContent"), "title"), "Sie boten 4C an");
    call_free(&c);
    call_init(&c, "GET", target); /* no language named: the default, as before */
    call_header(&c, "X-User-Id", "bob");
    call_run(&c, e.router);
    CHECK_STR(mv_json_str(json_object_get(c.body, "receiverContent"), "title"), "Flat 4C for you");
    call_free(&c);
    free(id);
    env_close(&e);
}

STORE_TEST(a_list_is_in_the_readers_language_as_get_by_id_is) {
    env e;
    REQUIRE(env_open(&e, kind, "loc_list", 0));
    mv_code rc;
    char *a = create(&e, "4C", &rc), *b = create(&e, "5D", &rc);
    REQUIRE(a && b);
    call c;
    call_init(&c, "GET", "/messages");
    call_header(&c, "X-User-Id", "bob");
    call_header(&c, "Accept-Language", "de-AT,de;q=0.9");
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 200);
    json_t *page = json_object_get(c.body, "messages");
    REQUIRE(json_array_size(page) == 2);
    CHECK_STR(mv_json_str(json_object_get(json_array_get(page, 0), "receiverContent"), "title"),
              "Wohnung 5D für Sie"); /* newest first */
    CHECK_STR(mv_json_str(json_object_get(json_array_get(page, 1), "receiverContent"), "title"),
              "Wohnung 4C für Sie");
    CHECK_STR(mv_json_str(json_array_get(page, 0), "locale"), "de");
    CHECK(json_object_get(c.body, "nextCursor") &&
          json_is_null(json_object_get(c.body, "nextCursor")));
    call_free(&c);
    call_init(&c, "GET", "/messages?limit=1"); /* X-User-Locale in headers mode; paging kept */
    call_header(&c, "X-User-Id", "bob");
    call_header(&c, "X-User-Locale", "fr");
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 200);
    page = json_object_get(c.body, "messages");
    REQUIRE(json_array_size(page) == 1);
    CHECK_STR(mv_json_str(json_object_get(json_array_get(page, 0), "receiverContent"), "title"),
              "Appartement 5D");
    CHECK(json_is_string(json_object_get(c.body, "nextCursor")));
    call_free(&c);
    call_init(&c, "GET", "/messages"); /* no language named: the default, as before */
    call_header(&c, "X-User-Id", "bob");
    call_run(&c, e.router);
    page = json_object_get(c.body, "messages");
    CHECK_STR(mv_json_str(json_object_get(json_array_get(page, 0), "receiverContent"), "title"),
              "Flat 5D for you");
    call_free(&c);
    free(a);
    free(b);
    env_close(&e);
}

STORE_TEST(every_locale_counts_in_limits_message_bytes) {
    env e;
    /* the default content and payload fit in 80 bytes; with the two locales they do not */
    REQUIRE(env_open(&e, kind, "loc_bytes", 80));
    mv_code rc;
    char *id = create(&e, "5D", &rc);
    CHECK(id == NULL);
    CHECK_INT(rc, MV_PAYLOAD_TOO_LARGE);
    CHECK_INT(fixture_rows(e.f.store, 'm'), 0);
    free(id);
    env_close(&e);
}

static const char SQL_LAST_DELIVERY[] =
    "SELECT payload FROM outbox WHERE kind = 'webhook' ORDER BY created_at DESC, id LIMIT 1";
static mv_code last_delivery_tx(mv_db *db, void *ctx, mv_err *err) {
    json_t **out = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_LAST_DELIVERY, &st, err, "");
    if (st) *out = json_loads(mv_stmt_text(st, 0), 0, NULL);
    mv_stmt_done(st);
    return rc;
}

STORE_TEST(a_channel_delivery_is_in_the_recipients_stored_locale) {
    env e;
    REQUIRE(env_open(&e, kind, "loc_channel", 0));
    mv_user bob = {.id = "bob"};
    json_t *set = json_loads("{\"locale\": \"de-AT\"}", 0, NULL);
    mv_err err = {0};
    CHECK_CODE(mv_preferences_put(e.f.store, e.reach, &bob, set, NULL, &err), MV_OK, &err);
    json_decref(set);
    mv_code rc;
    char *id = create(&e, "6E", &rc);
    REQUIRE(id);
    json_t *row = NULL;
    CHECK_CODE(mv__outbox_plan_due(e.f.store, NULL, 10, &err), MV_OK, &err); /* decided now */
    mv_store_read(e.f.store, last_delivery_tx, &row, NULL);
    CHECK_STR(mv_json_str(json_object_get(json_object_get(row, "body"), "content"), "title"),
              "Wohnung 6E für Sie");
    json_decref(row);
    free(id);
    env_close(&e);
}

/* An HS256 token for claims (base64url of header and claims, signed with key). */
static char *hs256(const char *claims, const char *key) {
    static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    size_t hn = mv_b64url_len(strlen(header)), cn = mv_b64url_len(strlen(claims));
    char *t = malloc(hn + cn + 48);
    mv_b64url_encode(header, strlen(header), t);
    t[hn] = '.';
    mv_b64url_encode(claims, strlen(claims), t + hn + 1);
    unsigned char mac[32];
    mv_hmac_sha256(key, strlen(key), t, hn + 1 + cn, mac);
    t[hn + 1 + cn] = '.';
    mv_b64url_encode(mac, 32, t + hn + 2 + cn);
    return t;
}

STORE_TEST(a_jwt_claim_names_the_readers_language_when_accept_language_does_not) {
    env e;
    REQUIRE(env_open(&e, kind, "loc_jwt", 0));
    static const char KEY[] = "a-jwt-secret-of-at-least-32-bytes-long";
    mv_auth *jwt = NULL;
    mv_auth_options ao = {.mode = MV_AUTH_JWT, .secret = KEY, .secret_len = strlen(KEY)};
    REQUIRE(mv_auth_new(&ao, &jwt, NULL) == MV_OK);
    mv_router_set_auth(e.router, jwt);
    e.routes.locale_claim = "profile.lang";
    mv_code rc;
    char *id = create(&e, "7F", &rc);
    REQUIRE(id);
    char target[64], bearer[1024];
    snprintf(target, sizeof target, "/messages/%s", id);
    char *token =
        hs256("{\"sub\":\"bob\",\"exp\":4102444800,\"profile\":{\"lang\":\"de-AT\"}}", KEY);
    snprintf(bearer, sizeof bearer, "Bearer %s", token);
    call c;
    call_init(&c, "GET", target);
    call_header(&c, "Authorization", bearer);
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(mv_json_str(c.body, "locale"), "de");
    call_free(&c);
    call_init(&c, "GET", target); /* Accept-Language still comes first */
    call_header(&c, "Authorization", bearer);
    call_header(&c, "Accept-Language", "fr");
    call_run(&c, e.router);
    CHECK_STR(mv_json_str(c.body, "locale"), "fr");
    call_free(&c);
    call_init(&c, "GET", target); /* X-User-Locale is for headers mode only */
    char *plain = hs256("{\"sub\":\"bob\",\"exp\":4102444800}", KEY);
    snprintf(bearer, sizeof bearer, "Bearer %s", plain);
    call_header(&c, "Authorization", bearer);
    call_header(&c, "X-User-Locale", "de");
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 200);
    CHECK(json_object_get(c.body, "locale") == NULL);
    CHECK_STR(mv_json_str(json_object_get(c.body, "receiverContent"), "title"), "Flat 7F for you");
    call_free(&c);
    free(token);
    free(plain);
    mv_router_set_auth(e.router, e.auth);
    mv_auth_free(jwt);
    free(id);
    env_close(&e);
}

STORE_TEST(the_actions_listing_names_the_template_in_each_language_that_has_a_label) {
    env e;
    REQUIRE(env_open(&e, kind, "loclabel", 0));
    mv_code rc;
    char *id = create(&e, "3B", &rc);
    REQUIRE(id);
    mv_user bob = {.id = "bob"};
    json_t *out = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_actions(e.f.svc, id, MV_RECEIVER, &bob, false, &out, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(out, "label"), "Offer");
    json_t *labels = json_object_get(out, "labels");
    CHECK_INT(json_object_size(labels), 1); /* fr has no label: the reader falls back to "label" */
    CHECK_STR(mv_json_str(labels, "de"), "Angebot");
    json_decref(out);
    free(id);
    env_close(&e);
}

TEST(bad_locales_are_refused_at_load_naming_the_tag_or_field) {
    static const char *const bad[][2] = {
        {"{\"english\": {}}", "\"english\""},
        {"{\"de_AT\": {}}", "\"de_AT\""},
        {"{\"de\": {\"title\": \"x\"}}", "locales.de has unknown key \"title\""},
        {"{\"de\": {\"receiverContent\": {\"title\": \"{{#x}}\"}}}",
         "locales.de.receiverContent.title"},
        {"{\"de\": {\"actions\": {\"nope\": {\"name\": \"x\"}}}}", "\"nope\""},
        {"[]", "locales must be an object"},
        {"{\"de\": {\"label\": \"\"}}", "locales.de.label must be a string"},
        {"{\"de\": {\"label\": 7}}", "locales.de.label must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[600];
        snprintf(text, sizeof text,
                 "{\"templateCd\": \"t\", \"actions\": [{\"actionCd\": \"a\", \"name\": \"A\", "
                 "\"variant\": \"v\", \"receiver\": true}], \"locales\": %s}",
                 bad[i][0]);
        json_t *j = json_loads(text, 0, NULL);
        mv_template *t = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_template_parse(j, "t.json", &t, &err), MV_INVALID_TEMPLATE, &err);
        if (!strstr(err.message, bad[i][1]))
            test_failf_(__FILE__, __LINE__, "\"%s\" does not name %s", err.message, bad[i][1]);
        mv_template_release(t);
        json_decref(j);
    }
    /* seventeen locales are one too many */
    json_t *many = json_object();
    const char *tags[] = {"aa", "ab", "ae", "af", "ak", "am", "an", "ar", "as",
                          "av", "ay", "az", "ba", "be", "bg", "bh", "bi"};
    for (size_t i = 0; i < 17; i++)
        json_object_set_new(many, tags[i], json_object());
    json_t *j = json_pack("{s:s,s:[],s:o}", "templateCd", "t", "actions", "locales", many);
    mv_template *t = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_template_parse(j, "t.json", &t, &err), MV_INVALID_TEMPLATE, &err);
    CHECK(strstr(err.message, "at most 16") != NULL);
    json_object_del(json_object_get(j, "locales"), "bi");
    CHECK_CODE(mv_template_parse(j, "t.json", &t, &err), MV_OK, &err);
    mv_template_release(t);
    json_decref(j);
}

int main(void) {
    return RUN_TESTS(a_reader_gets_the_best_locale_with_de_at_falling_back_to_de_then_the_default,
                     the_actions_listing_names_the_template_in_each_language_that_has_a_label,
                     get_message_with_accept_language_de_at_reads_the_de_content,
                     a_list_is_in_the_readers_language_as_get_by_id_is,
                     every_locale_counts_in_limits_message_bytes,
                     a_channel_delivery_is_in_the_recipients_stored_locale,
                     a_jwt_claim_names_the_readers_language_when_accept_language_does_not,
                     bad_locales_are_refused_at_load_naming_the_tag_or_field);
}
