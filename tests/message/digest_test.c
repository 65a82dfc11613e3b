/* digest_test.c — digests (message/digest.c) on every store kind with a manual clock: a user with
 * `digest.sms.everyMs` gets nothing per message, and when the window closes one delivery of kind
 * "digest" listing the messages still unread (one of three read → two listed); all read → no
 * delivery; an email digest is one email; a critical template is never held; two daemons firing
 * the same window at once (real threads, two store connections) send it once, counted by the
 * receiver's deliveryIds and Idempotency-Keys. */
#include <pthread.h>

#include "deliver/outbox_text.h"
#include "durable/timer.h"
#include "fixture.h"
#include "message/timers.h"
#include "missive/inbox.h"
#include "missive/reach.h"
#include "support/http_sink.h"

static const char BOOKING[] =
    "{\"templateCd\": \"booking\", \"actions\": [], \"type\": \"notification\", \"category\": "
    "\"bookings\", \"receiverContent\": {\"title\": \"{{guest}} booked\", \"short\": \"short "
    "{{guest}}\", \"long\": \"long\"}, \"prepare\": {\"toUser\": \"{{to}}\"},"
    " \"channels\": {\"email\": true, \"sms\": {\"title\": \"SMS: {{guest}}\"}}}";
static const char ALARM[] =
    "{\"templateCd\": \"alarm\", \"actions\": [], \"type\": \"notification\", \"critical\": true,"
    " \"receiverContent\": {\"title\": \"Alarm\"}, \"prepare\": {\"toUser\": \"{{to}}\"},"
    " \"channels\": {\"sms\": true}}";

#define WINDOW 60000

/* One daemon's view: a service with the templates on its own connection to the shared store. */
typedef struct node {
    fixture f;
    mv__timer_engine *e;
} node;

typedef struct world {
    node a, b;
    bool two;
    http_sink *sink;
    mv_reach *reach;
    mv_webhook_config wh;
    mv_outbox_config oc;
} world;

static int node_open(node *n, world *w, const char *kind, const char *name, const char *url) {
    mv_service_options o = {.email = true, .reach = w->reach};
    int ok =
        url ? fixture_open_url(&n->f, url, NULL, &o) : fixture_open_opts(&n->f, kind, name, &o);
    if (!ok) return 0;
    const char *tpls[] = {BOOKING, ALARM};
    mv_err err = {0};
    for (size_t i = 0; i < 2; i++) {
        json_t *t = json_loads(tpls[i], 0, NULL);
        mv_code rc = mv_registry_register(n->f.registry, t, "<test>", &err);
        json_decref(t);
        if (rc != MV_OK) return 0;
    }
    mv__timer_engine_options eo = {.clock = &n->f.clock, .lease_ms = 10000};
    return mv__timer_engine_new(n->f.store, &eo, &n->e, &err) == MV_OK &&
           mv__service_register_timers(n->f.svc, n->e, &err) == MV_OK;
}

static int world_open(world *w, const char *kind, const char *name, bool two) {
    memset(w, 0, sizeof *w);
    if (!(w->sink = http_sink_start())) return 0;
    char channels[300];
    snprintf(channels, sizeof channels, "{\"sms\": {\"webhook\": \"%s/sms\"}}",
             http_sink_url(w->sink));
    json_t *c = json_loads(channels, 0, NULL);
    mv_err err = {0};
    mv_code rc = mv_reach_new(c, NULL, true, &w->reach, &err);
    json_decref(c);
    if (rc != MV_OK || !node_open(&w->a, w, kind, name, NULL)) return 0;
    w->two = two;
    if (two && !node_open(&w->b, w, kind, name, w->a.f.url)) return 0;
    w->wh = (mv_webhook_config){.secret = "digest-secret", .secret_len = 13};
    w->oc = (mv_outbox_config){.clock = &w->a.f.clock, .webhook = &w->wh, .backoff_base_ms = 1000};
    return 1;
}

static void world_close(world *w) {
    mv__timer_engine_free(w->a.e);
    mv__timer_engine_free(w->b.e);
    if (w->two) fixture_close(&w->b.f);
    fixture_close(&w->a.f);
    mv_reach_free(w->reach);
    http_sink_stop(w->sink);
}

/* Both daemons' clocks move together. */
static void advance(world *w, int64_t ms) {
    w->a.f.now += ms;
    w->b.f.now = w->a.f.now;
}

static void prefer(world *w, const char *user, const char *set) {
    mv_user u = {.id = user};
    json_t *p = json_loads(set, 0, NULL);
    mv_err err = {0};
    CHECK_CODE(mv_preferences_put(w->a.f.store, w->reach, &u, p, NULL, &err), MV_OK, &err);
    json_decref(p);
}

/* A message of template_cd to `to`; its id (malloc'd) or NULL. */
static char *create(world *w, const char *template_cd, const char *to, const char *guest) {
    mv_user u = {.id = "alice"};
    json_t *payload = json_pack("{s:s,s:s}", "to", to, "guest", guest);
    mv_create_request req = {.template_cd = template_cd, .user = &u, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_create(w->a.f.svc, &req, &msgs, NULL, &err);
    if (rc != MV_OK) fprintf(stderr, "create: %s\n", err.message);
    char *id = rc == MV_OK ? strdup(first_id(msgs)) : NULL;
    json_decref(msgs);
    json_decref(payload);
    return id;
}

static void mark_read(world *w, const char *id, const char *user) {
    mv_user u = {.id = user};
    json_t *m = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_mark(w->a.f.svc, id, &u, MV_MARK_READ, &m, &err), MV_OK, &err);
    json_decref(m);
}

static int fire(node *n) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(n->e, &p, &err) != MV_OK) fprintf(stderr, "run: %s\n", err.message);
    return p.fired;
}

static const char SQL_ROWS_OF_KIND[] = "SELECT COUNT(*) FROM outbox WHERE kind = ?";
typedef struct {
    const char *kind;
    int64_t n;
} rows_arg;
static mv_code rows_tx(mv_db *db, void *ctx, mv_err *err) {
    rows_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_ROWS_OF_KIND, &st, err, "s", a->kind);
    if (st) a->n = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return rc;
}
/* The creates' deliveries decided, as the outbox's next run does first. */
static void plan(world *w) {
    mv_err err = {0};
    if (mv__outbox_plan_due(w->a.f.store, &w->oc, 100, &err) != MV_OK)
        fprintf(stderr, "plan: %s\n", err.message);
}

/* The delivery rows of a kind, once planned. */
static int64_t rows(world *w, const char *kind) {
    plan(w);
    rows_arg a = {kind, -1};
    mv_store_read(w->a.f.store, rows_tx, &a, NULL);
    return a.n;
}

static int run_outbox(world *w) {
    int delivered = 0;
    mv_err err = {0};
    if (mv_outbox_run_due(w->a.f.store, &w->oc, 100, &delivered, &err) != MV_OK)
        fprintf(stderr, "outbox: %s\n", err.message);
    return delivered;
}

/* The i-th request the receiver got, as JSON (NULL when there is none). */
static json_t *received(world *w, int i) {
    http_sink_request r;
    if (!http_sink_get(w->sink, i, &r)) return NULL;
    json_t *body = json_loads(r.body, 0, NULL);
    const char *key = http_sink_header(&r, "Idempotency-Key");
    if (body && key) json_object_set_new(body, "_key", json_string(key));
    http_sink_request_free(&r);
    return body;
}

STORE_TEST(a_digest_of_three_messages_is_one_delivery_listing_the_two_still_unread) {
    world w;
    REQUIRE(world_open(&w, kind, "dg_three", false));
    prefer(&w, "bob", "{\"digest\": {\"sms\": {\"everyMs\": 60000}}}");
    w.a.f.now = 1700000000000LL - 1700000000000LL % WINDOW + 1000; /* just after a window opens */
    char *m1 = create(&w, "booking", "bob", "Ann"), *m2 = create(&w, "booking", "bob", "Ben"),
         *m3 = create(&w, "booking", "bob", "Cy");
    REQUIRE(m1 && m2 && m3);
    CHECK_INT(rows(&w, "webhook"), 0); /* held: nothing per message */
    CHECK_INT(rows(&w, "email"), 3);   /* email is not digested for bob */
    mark_read(&w, m2, "bob");
    advance(&w, WINDOW - 1001); /* the last millisecond of the window */
    CHECK_INT(fire(&w.a), 0);
    advance(&w, 1);
    CHECK_INT(fire(&w.a), 1);
    CHECK_INT(rows(&w, "webhook"), 1);
    CHECK_INT(run_outbox(&w), 1);
    advance(&w, 10 * WINDOW); /* once per window: nothing more */
    CHECK_INT(fire(&w.a), 0);
    CHECK_INT(run_outbox(&w), 0);
    REQUIRE(http_sink_count(w.sink) == 1);
    json_t *body = received(&w, 0);
    REQUIRE(body);
    CHECK_STR(mv_json_str(body, "kind"), "digest");
    CHECK_STR(mv_json_str(body, "channel"), "sms");
    CHECK_STR(mv_json_str(json_object_get(body, "to"), "userId"), "bob");
    CHECK(json_is_null(json_object_get(body, "messageId")));
    CHECK_STR(mv_json_str(body, "_key"), mv_json_str(body, "deliveryId"));
    CHECK_INT(json_integer_value(json_object_get(body, "unread")), 2);
    CHECK_INT(json_integer_value(json_object_get(body, "windowEnd")) -
                  json_integer_value(json_object_get(body, "windowStart")),
              WINDOW);
    CHECK_STR(mv_json_str(json_object_get(body, "content"), "title"), "2 unread messages");
    CHECK_STR(mv_json_str(json_object_get(body, "content"), "short"), "SMS: Ann\nSMS: Cy");
    json_t *listed = json_object_get(body, "messages");
    REQUIRE(json_array_size(listed) == 2);
    CHECK_STR(mv_json_str(json_array_get(listed, 0), "messageId"), m1);
    CHECK_STR(mv_json_str(json_array_get(listed, 1), "messageId"), m3);
    CHECK_STR(mv_json_str(json_array_get(listed, 0), "templateCd"), "booking");
    CHECK_STR(mv_json_str(json_array_get(listed, 0), "category"), "bookings");
    CHECK_STR(mv_json_str(json_object_get(json_array_get(listed, 1), "content"), "title"),
              "SMS: Cy");
    json_decref(body);
    free(m1);
    free(m2);
    free(m3);
    world_close(&w);
}

STORE_TEST(a_window_whose_messages_were_all_read_sends_nothing_and_a_critical_one_is_not_held) {
    world w;
    REQUIRE(world_open(&w, kind, "dg_read", false));
    prefer(&w, "bob", "{\"digest\": {\"sms\": {\"everyMs\": 60000}}}");
    char *m1 = create(&w, "booking", "bob", "Ann"), *m2 = create(&w, "booking", "bob", "Ben");
    REQUIRE(m1 && m2);
    char *alarm = create(&w, "alarm", "bob", "x");
    REQUIRE(alarm);
    free(alarm);
    CHECK_INT(rows(&w, "webhook"), 1); /* the critical alarm, at once */
    mark_read(&w, m1, "bob");
    mark_read(&w, m2, "bob");
    advance(&w, WINDOW);
    CHECK_INT(fire(&w.a), 1);          /* the window closed… */
    CHECK_INT(rows(&w, "webhook"), 1); /* …with nothing unread: no digest */
    CHECK_INT(run_outbox(&w), 1);
    json_t *body = received(&w, 0);
    CHECK_STR(mv_json_str(body, "kind"), "message");
    json_decref(body);
    /* another user without a digest preference gets every message at once */
    free(create(&w, "booking", "carol", "Ann"));
    CHECK_INT(rows(&w, "webhook"), 2);
    free(m1);
    free(m2);
    world_close(&w);
}

STORE_TEST(an_email_digest_is_one_email_counting_the_unread_messages) {
    world w;
    REQUIRE(world_open(&w, kind, "dg_email", false));
    prefer(&w, "bob", "{\"digest\": {\"email\": {\"everyMs\": 60000}}}");
    free(create(&w, "booking", "bob", "Ann"));
    free(create(&w, "booking", "bob", "Ben"));
    CHECK_INT(rows(&w, "email"), 0);
    CHECK_INT(rows(&w, "webhook"), 2); /* sms is not digested for bob */
    advance(&w, WINDOW);
    CHECK_INT(fire(&w.a), 1);
    CHECK_INT(rows(&w, "email"), 1);
    world_close(&w);
}

typedef struct racer {
    world *w;
    node *n;
    pthread_barrier_t *go;
    int fired;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    pthread_barrier_wait(r->go);
    for (int i = 0; i < 20; i++)
        r->fired += fire(r->n);
    return NULL;
}

STORE_TEST(two_daemons_firing_the_same_window_at_once_send_its_digest_once) {
    world w;
    REQUIRE(world_open(&w, kind, "dg_two", true));
    prefer(&w, "bob", "{\"digest\": {\"sms\": {\"everyMs\": 60000}}}");
    prefer(&w, "dan", "{\"digest\": {\"sms\": {\"everyMs\": 60000}}}");
    for (int i = 0; i < 3; i++) {
        free(create(&w, "booking", "bob", "Ann"));
        free(create(&w, "booking", "dan", "Ann"));
    }
    plan(&w);
    advance(&w, WINDOW);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    racer ra = {&w, &w.a, &go, 0}, rb = {&w, &w.b, &go, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race, &ra);
    pthread_create(&tb, NULL, race, &rb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&go);
    CHECK_INT(ra.fired + rb.fired, 2); /* bob's window and dan's, each by one daemon */
    CHECK_INT(run_outbox(&w), 2);
    CHECK_INT(run_outbox(&w), 0);
    REQUIRE(http_sink_count(w.sink) == 2);
    json_t *x = received(&w, 0), *y = received(&w, 1);
    REQUIRE(x && y);
    CHECK(strcmp(mv_json_str(x, "deliveryId"), mv_json_str(y, "deliveryId")) != 0);
    CHECK(strcmp(mv_json_str(x, "_key"), mv_json_str(y, "_key")) != 0);
    CHECK(strcmp(mv_json_str(json_object_get(x, "to"), "userId"),
                 mv_json_str(json_object_get(y, "to"), "userId")) != 0);
    CHECK_INT(json_array_size(json_object_get(x, "messages")), 3);
    CHECK_INT(json_array_size(json_object_get(y, "messages")), 3);
    json_decref(x);
    json_decref(y);
    world_close(&w);
}

int main(void) {
    return RUN_TESTS(
        a_digest_of_three_messages_is_one_delivery_listing_the_two_still_unread,
        a_window_whose_messages_were_all_read_sends_nothing_and_a_critical_one_is_not_held,
        an_email_digest_is_one_email_counting_the_unread_messages,
        two_daemons_firing_the_same_window_at_once_send_its_digest_once);
}
