/* routes_links_test.c — action links end to end through the router (no socket) on every store
 * kind: a channel delivery carries one link per action its recipient may run; GET shows an HTML
 * page (CSP, no script) and never runs the handler; POST runs it once, as the bound recipient,
 * with "trigger": "link"; a second POST, concurrent POSTs and a POST racing an in-app press give
 * exactly one run; an altered, re-signed, spliced or expired token is the 400 link_invalid page;
 * retention forgets the uses of expired links only. */
#include <pthread.h>
#include <unistd.h>

#include "../message/fixture.h"
#include "deliver/outbox_text.h"
#include "http/auth.h"
#include "http/http_server.h"
#include "http/routes_reach.h"
#include "message/reach_internal.h"
#include "support/daemon_proc.h"
#include "support/http_call.h"

static const char OFFER[] =
    "{\"templateCd\": \"offer\", \"type\": \"request\", \"category\": \"offers\","
    " \"receiverContent\": {\"title\": \"Flat <b>{{flat}}</b>\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"}, \"channels\": {\"sms\": true},"
    " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Book {{flat}}\", \"variant\": "
    "\"primary\", \"receiver\": true},"
    "  {\"actionCd\": \"decline\", \"name\": \"Decline\", \"variant\": \"secondary\", "
    "\"receiver\": true,"
    "   \"confirmation\": {\"title\": \"Why?\", \"message\": \"Tell us\", \"notesLabel\": "
    "\"Reason\"}},"
    "  {\"actionCd\": \"audit\", \"name\": \"Audit\", \"variant\": \"secondary\", \"receiver\": "
    "true, \"permission\": "
    "\"is.auditor\"},"
    "  {\"actionCd\": \"withdraw\", \"name\": \"Withdraw\", \"variant\": \"dark\", \"sender\": "
    "true}]}";

static bool with_email; /* the service queues emails too */

static const char SECRET[] = "0123456789abcdef0123456789abcdef-links";

typedef struct env {
    fixture f;
    mv_auth *auth;
    mv_router *router;
    mv_reach *reach;
    mv_reach_routes routes;
    int runs;
    char trigger[16], notes[64];
    pthread_mutex_t mu;
} env;

static mv_code count_run(void *ctx, const mv_action_input *in, json_t **result, mv_err *err) {
    (void)err;
    env *e = ctx;
    usleep(50 * 1000); /* long enough for a racing claim to meet this one in flight */
    pthread_mutex_lock(&e->mu);
    e->runs++;
    snprintf(e->trigger, sizeof e->trigger, "%s", in->trigger ? in->trigger : "(null)");
    const char *n = mv_json_str(in->input, "notes");
    snprintf(e->notes, sizeof e->notes, "%s", n ? n : "");
    pthread_mutex_unlock(&e->mu);
    *result = json_pack("{s:b}", "booked", 1);
    return MV_OK;
}

static int env_open(env *e, const char *kind, const char *name) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    json_t *ch = json_loads("{\"sms\": {\"webhook\": \"http://127.0.0.1:9/sms\"}}", 0, NULL);
    mv_code rc = mv_reach_new(ch, NULL, false, &e->reach, NULL);
    json_decref(ch);
    if (rc != MV_OK || mv_reach_set_links(e->reach, "https://missive.example.com/", SECRET,
                                          strlen(SECRET), 600000, NULL) != MV_OK)
        return 0;
    mv_service_options o = {.reach = e->reach, .email = with_email};
    if (!fixture_open_opts(&e->f, kind, name, &o)) return 0;
    e->f.now = mv_now_ms(); /* links expire by the real clock the pages read */
    json_t *t = json_loads(OFFER, 0, NULL);
    mv_err err = {0};
    rc = mv_registry_register(e->f.registry, t, "<offer>", &err);
    json_decref(t);
    if (rc != MV_OK) {
        fprintf(stderr, "offer: %s\n", err.message);
        return 0;
    }
    mv_service_set_handler(e->f.svc, "offer", "accept", count_run, e);
    mv_service_set_handler(e->f.svc, "offer", "decline", count_run, e);
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&ao, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_reach_routes){e->f.store, e->f.svc};
    return mv_reach_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    fixture_close(&e->f);
    mv_reach_free(e->reach);
    pthread_mutex_destroy(&e->mu);
}

static void plan(mv_store *store) {
    mv_err err = {0};
    if (mv__outbox_plan_due(store, NULL, 10, &err) != MV_OK)
        fprintf(stderr, "plan: %s\n", err.message);
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

/* Creates an offer to bob; *links: the links of its sms delivery (new reference). */
static char *create_offer(env *e, json_t **links) {
    mv_user alice = {.id = "alice"};
    json_t *payload = json_pack("{s:s,s:s}", "to", "bob", "flat", "4B");
    mv_create_request req = {.template_cd = "offer", .user = &alice, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    char *id = NULL;
    if (mv_message_create(e->f.svc, &req, &msgs, NULL, &err) == MV_OK)
        id = strdup(mv_json_str(json_array_get(msgs, 0), "id"));
    else
        fprintf(stderr, "create: %s\n", err.message);
    json_decref(msgs);
    json_decref(payload);
    json_t *row = NULL;
    plan(e->f.store); /* its deliveries decided, as the outbox's next run does */
    mv_store_read(e->f.store, last_delivery_tx, &row, NULL);
    *links = json_incref(json_object_get(json_object_get(row, "body"), "links"));
    json_decref(row);
    return id;
}

/* The path of a link URL ("/a/…"). */
static const char *path_of(const json_t *links, const char *action) {
    const char *url = mv_json_str(links, action);
    return url ? strstr(url, "/a/") : NULL;
}

static int page(env *e, const char *method, const char *path, const char *form, call *c) {
    call_init(c, method, path);
    if (form) {
        call_header(c, "Content-Type", "application/x-www-form-urlencoded");
        call_body(c, form);
    }
    call_run(c, e->router);
    return c->res.status;
}

static const char *body_of(const call *c) { return c->res.body ? c->res.body : ""; }

static bool page_code(const call *c, const char *code) {
    char want[96];
    snprintf(want, sizeof want, "<meta name=\"missive-code\" content=\"%s\">", code);
    return strstr(body_of(c), want) != NULL;
}

static const char *state_of(env *e, const char *id) {
    static char state[32];
    json_t *m = NULL;
    mv_user bob = {.id = "bob"};
    state[0] = '\0';
    if (mv_message_get(e->f.svc, id, &bob, &m, NULL) == MV_OK)
        snprintf(state, sizeof state, "%s", mv_json_str(m, "actionState"));
    json_decref(m);
    return state;
}

STORE_TEST(a_delivery_carries_one_link_per_action_its_recipient_may_run_from_outside) {
    env e;
    REQUIRE(env_open(&e, kind, "links_set"));
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    CHECK_INT(json_object_size(links), 2); /* accept, decline: no permission, no sender action */
    CHECK(!strncmp(mv_json_str(links, "accept") ?: "", "https://missive.example.com/a/", 30));
    CHECK(path_of(links, "decline") != NULL);
    CHECK(!json_object_get(links, "audit") && !json_object_get(links, "withdraw"));
    json_decref(links);
    free(id);
    env_close(&e);
}

STORE_TEST(get_shows_a_confirmation_page_and_never_runs_the_handler) {
    env e;
    REQUIRE(env_open(&e, kind, "links_get"));
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    for (int i = 0; i < 3; i++) { /* a mail scanner, a preview, the user */
        call c;
        CHECK_INT(page(&e, "GET", path_of(links, "accept"), NULL, &c), 200);
        CHECK(strstr(mv_http_response_header(&c.res, "Content-Type") ?: "", "text/html") != NULL);
        CHECK(strstr(mv_http_response_header(&c.res, "Content-Security-Policy") ?: "",
                     "default-src 'none'") != NULL);
        CHECK(!strstr(body_of(&c), "<script"));
        CHECK(strstr(body_of(&c), "<form method=\"post\">") != NULL);
        CHECK(strstr(body_of(&c), "Book 4B") != NULL);                    /* the action */
        CHECK(strstr(body_of(&c), "Flat &lt;b&gt;4B&lt;/b&gt;") != NULL); /* the message, escaped */
        call_free(&c);
    }
    CHECK_INT(e.runs, 0);
    CHECK_STR(state_of(&e, id), "active");
    /* an action with notes asks for them */
    call c;
    CHECK_INT(page(&e, "GET", path_of(links, "decline"), NULL, &c), 200);
    CHECK(strstr(body_of(&c), "name=\"input\"") != NULL);
    call_free(&c);
    json_decref(links);
    free(id);
    env_close(&e);
}

STORE_TEST(post_runs_the_action_once_as_the_recipient_and_a_second_post_is_410) {
    env e;
    REQUIRE(env_open(&e, kind, "links_post"));
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    call c;
    CHECK_INT(page(&e, "POST", path_of(links, "decline"), "input=too+far%21", &c), 200);
    CHECK(strstr(mv_http_response_header(&c.res, "Content-Security-Policy") ?: "", "'none'"));
    call_free(&c);
    CHECK_INT(e.runs, 1);
    CHECK_STR(e.trigger, "link");
    CHECK_STR(e.notes, "too far!");
    CHECK_STR(state_of(&e, id), "archived");
    CHECK_INT(page(&e, "POST", path_of(links, "decline"), "", &c), 410);
    CHECK(page_code(&c, "message_archived"));
    call_free(&c);
    CHECK_INT(page(&e, "POST", path_of(links, "accept"), "", &c), 410); /* archived meanwhile */
    call_free(&c);
    CHECK_INT(page(&e, "GET", path_of(links, "accept"), NULL, &c), 410);
    call_free(&c);
    CHECK_INT(e.runs, 1);
    json_decref(links);
    free(id);
    env_close(&e);
}

typedef struct racer {
    env *e;
    const char *path; /* NULL: press in the app as bob */
    const char *message_id;
    int status;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    if (r->path) {
        call c;
        r->status = page(r->e, "POST", r->path, "", &c);
        call_free(&c);
    } else {
        mv_user bob = {.id = "bob"};
        mv_action_request ar = {.message_id = r->message_id, .action_cd = "accept", .user = &bob};
        json_t *result = NULL;
        mv_err err = {0};
        mv_code rc = mv_action_handle(r->e->f.svc, &ar, &result, &err);
        r->status = mv_code_http_status(rc);
        json_decref(result);
    }
    return NULL;
}

static int run_race(racer *rs, int n) {
    pthread_t th[8];
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, race, &rs[i]);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        ok += rs[i].status == 200;
    }
    return ok;
}

STORE_TEST(concurrent_posts_of_one_link_run_the_action_exactly_once) {
    env e;
    REQUIRE(env_open(&e, kind, "links_race"));
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    racer rs[6];
    for (int i = 0; i < 6; i++)
        rs[i] = (racer){&e, path_of(links, "accept"), id, 0};
    CHECK_INT(run_race(rs, 6), 1);
    CHECK_INT(e.runs, 1);
    for (int i = 0; i < 6; i++)
        CHECK(rs[i].status == 200 || rs[i].status == 409 || rs[i].status == 410);
    json_decref(links);
    free(id);
    env_close(&e);
}

/* The same race through a real server (two write threads): each press suspends its request and
 * is answered from its completion (mv__action_begin), exactly one runs the action. */
typedef struct server_racer {
    int port;
    const char *path;
    long status;
} server_racer;

static void *race_server(void *arg) {
    server_racer *r = arg;
    test_reply t = test_http(r->port, "POST", r->path, NULL, "");
    r->status = t.status;
    test_reply_free(&t);
    return NULL;
}

STORE_TEST(concurrent_posts_through_the_server_run_the_action_exactly_once) {
    enum { N = 6 };
    env e;
    REQUIRE(env_open(&e, kind, "links_server"));
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    mv_http_server_options so = {.listen = "127.0.0.1:0", .threads = 2};
    mv_http_server *srv = NULL;
    mv_err err = {0};
    REQUIRE(mv_http_server_start(&so, e.router, &srv, &err) == MV_OK);
    server_racer rs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        rs[i] = (server_racer){mv_http_server_port(srv), path_of(links, "accept"), 0};
        pthread_create(&th[i], NULL, race_server, &rs[i]);
    }
    int ok = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += rs[i].status == 200;
        refused += rs[i].status == 409 || rs[i].status == 410;
    }
    CHECK_INT(ok, 1);
    CHECK_INT(refused, N - 1);
    CHECK_INT(e.runs, 1);
    CHECK_STR(e.trigger, "link");
    CHECK_STR(state_of(&e, id), "archived");
    CHECK(mv_http_server_drain(srv, 5000));
    mv_http_server_free(srv);
    json_decref(links);
    free(id);
    env_close(&e);
}

STORE_TEST(a_post_racing_an_in_app_press_runs_the_action_exactly_once) {
    env e;
    REQUIRE(env_open(&e, kind, "links_press"));
    for (int round = 0; round < 3; round++) {
        json_t *links = NULL;
        char *id = create_offer(&e, &links);
        REQUIRE(id);
        racer rs[2] = {{&e, path_of(links, "accept"), id, 0}, {&e, NULL, id, 0}};
        int before = e.runs;
        CHECK_INT(run_race(rs, 2), 1);
        CHECK_INT(e.runs - before, 1);
        CHECK_STR(state_of(&e, id), "archived");
        json_decref(links);
        free(id);
    }
    env_close(&e);
}

STORE_TEST(an_altered_spliced_or_expired_token_is_the_link_invalid_page_and_acts_on_nothing) {
    env e;
    REQUIRE(env_open(&e, kind, "links_bad"));
    json_t *l1 = NULL, *l2 = NULL;
    char *id1 = create_offer(&e, &l1), *id2 = create_offer(&e, &l2);
    REQUIRE(id1 && id2);
    char bad[4][2200];
    const char *p1 = path_of(l1, "accept"), *p2 = path_of(l2, "decline");
    /* 0: one payload character changed */
    snprintf(bad[0], sizeof bad[0], "%s", p1);
    bad[0][5] = bad[0][5] == 'A' ? 'B' : 'A';
    /* 1: another message's payload with this link's signature */
    const char *dot1 = strchr(p1, '.'), *dot2 = strchr(p2, '.');
    snprintf(bad[1], sizeof bad[1], "%.*s%s", (int)(dot2 - p2), p2, dot1);
    /* 2: a token signed with another secret */
    mv_reach *other = NULL;
    REQUIRE(mv_reach_new(NULL, NULL, false, &other, NULL) == MV_OK);
    REQUIRE(mv_reach_set_links(other, "https://x", "another-secret-another-secret-012", 33, 600000,
                               NULL) == MV_OK);
    char *forged = NULL, *expired = NULL;
    REQUIRE(mv_link_url(other, "default", id1, "accept", "bob", mv_now_ms(), &forged, NULL) ==
            MV_OK);
    snprintf(bad[2], sizeof bad[2], "%s", strstr(forged, "/a/"));
    /* 3: a genuine token whose time is up */
    REQUIRE(mv_link_url(e.reach, "default", id1, "accept", "bob", mv_now_ms() - 700000, &expired,
                        NULL) == MV_OK);
    snprintf(bad[3], sizeof bad[3], "%s", strstr(expired, "/a/"));
    for (int i = 0; i < 4; i++) {
        for (int m = 0; m < 2; m++) {
            call c;
            CHECK_INT(page(&e, m ? "POST" : "GET", bad[i], m ? "" : NULL, &c), 400);
            if (!page_code(&c, "link_invalid")) test_failf_(__FILE__, __LINE__, "case %d", i);
            CHECK(!strstr(body_of(&c), "SELECT") && !strstr(body_of(&c), "127.0.0.1"));
            call_free(&c);
        }
    }
    call c;
    CHECK_INT(page(&e, "GET", "/a/not-a-token", NULL, &c), 400);
    call_free(&c);
    CHECK_INT(e.runs, 0);
    CHECK_STR(state_of(&e, id1), "active");
    CHECK_STR(state_of(&e, id2), "active");
    free(forged);
    free(expired);
    mv_reach_free(other);
    json_decref(l1);
    json_decref(l2);
    free(id1);
    free(id2);
    env_close(&e);
}

static const char SQL_EMAIL_BODY[] = "SELECT payload FROM outbox WHERE kind = 'email'";
static mv_code email_tx(mv_db *db, void *ctx, mv_err *err) {
    json_t **out = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_EMAIL_BODY, &st, err, "");
    if (st) *out = json_loads(mv_stmt_text(st, 0), 0, NULL);
    mv_stmt_done(st);
    return rc;
}

STORE_TEST(the_email_carries_the_same_links_as_the_channel_delivery) {
    env e;
    with_email = true;
    REQUIRE(env_open(&e, kind, "links_email"));
    with_email = false;
    /* the offer lists only sms: email joins when the template names it */
    json_t *t = json_loads(OFFER, 0, NULL);
    json_object_set_new(json_object_get(t, "channels"), "email", json_true());
    REQUIRE(mv_registry_register(e.f.registry, t, "<offer>", NULL) == MV_OK);
    json_decref(t);
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    json_t *row = NULL;
    plan(e.f.store);
    mv_store_read(e.f.store, email_tx, &row, NULL);
    const char *body = mv_json_str(row, "body");
    char want[600];
    snprintf(want, sizeof want, "Book 4B: %s", mv_json_str(links, "accept"));
    CHECK(body && strstr(body, want));
    snprintf(want, sizeof want, "Decline: %s", mv_json_str(links, "decline"));
    CHECK(body && strstr(body, want));
    json_decref(row);
    json_decref(links);
    free(id);
    env_close(&e);
}

static const char SQL_USES[] = "SELECT COUNT(*), MIN(expires_at) FROM link_uses";
typedef struct {
    int64_t n, min_expiry;
} uses_arg;
static mv_code uses_tx(mv_db *db, void *ctx, mv_err *err) {
    uses_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_USES, &st, err, "");
    if (st) a->n = mv_stmt_int64(st, 0), a->min_expiry = mv_stmt_int64(st, 1);
    mv_stmt_done(st);
    return rc;
}

static mv_code spend_old_tx(mv_db *db, void *ctx, mv_err *err) {
    const mv_link *l = ctx;
    return mv__link_consume_tx(db, l, l->expires_at - 1000, err);
}

STORE_TEST(retention_forgets_only_the_uses_of_links_past_their_expiry) {
    env e;
    REQUIRE(env_open(&e, kind, "links_gc"));
    json_t *links = NULL;
    char *id = create_offer(&e, &links);
    REQUIRE(id);
    call c;
    CHECK_INT(page(&e, "POST", path_of(links, "accept"), "", &c), 200);
    call_free(&c);
    uses_arg u = {-1, 0};
    mv_store_read(e.f.store, uses_tx, &u, NULL);
    CHECK_INT(u.n, 1);
    int64_t expiry = u.min_expiry; /* the token's own: ttlMs after it was made */
    CHECK(expiry > mv_now_ms() && expiry <= mv_now_ms() + 600000);
    /* a use of a link that expired an hour ago */
    mv_link old = {.tenant = "default",
                   .action_cd = "accept",
                   .user_id = "bob",
                   .expires_at = mv_now_ms() - 3600000,
                   .token_id = "old-token"};
    snprintf(old.message_id, sizeof old.message_id, "%s", id);
    mv_err err = {0};
    CHECK_CODE(mv_store_write(e.f.store, spend_old_tx, &old, &err), MV_OK, &err);
    int64_t removed = -1;
    CHECK_CODE(mv_links_gc(e.f.store, mv_now_ms(), &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 1);
    mv_store_read(e.f.store, uses_tx, &u, NULL);
    CHECK_INT(u.n, 1);
    CHECK_INT(u.min_expiry, expiry); /* the live token's use is kept: it still says 410 */
    CHECK_INT(page(&e, "POST", path_of(links, "accept"), "", &c), 410);
    call_free(&c);
    CHECK_CODE(mv_links_gc(e.f.store, expiry + 1, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 1);
    mv_store_read(e.f.store, uses_tx, &u, NULL);
    CHECK_INT(u.n, 0);
    CHECK_INT(e.runs, 1);
    json_decref(links);
    free(id);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(
        a_delivery_carries_one_link_per_action_its_recipient_may_run_from_outside,
        get_shows_a_confirmation_page_and_never_runs_the_handler,
        post_runs_the_action_once_as_the_recipient_and_a_second_post_is_410,
        concurrent_posts_of_one_link_run_the_action_exactly_once,
        concurrent_posts_through_the_server_run_the_action_exactly_once,
        a_post_racing_an_in_app_press_runs_the_action_exactly_once,
        an_altered_spliced_or_expired_token_is_the_link_invalid_page_and_acts_on_nothing,
        the_email_carries_the_same_links_as_the_channel_delivery,
        retention_forgets_only_the_uses_of_links_past_their_expiry);
}
