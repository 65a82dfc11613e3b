/* channels_test.c — deliveries to named webhook channels on every store kind: queued in the
 * create's transaction, sent by the outbox to a fake receiver that sees each delivery once with
 * the documented body and a Standard Webhooks signature it verifies; a 500 is retried with the
 * same deliveryId; preferences switch a channel off for one category but never for a critical
 * template; tenant defaults apply in their tenant only; a template without "channels" emails as
 * before; a reminder goes to the receiver's channels as kind "reminder" with its title, once; a
 * template naming an unconfigured channel is refused. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>

#include "deliver/outbox_text.h"
#include "durable/timer.h"
#include "fixture.h"
#include "message/timers.h"
#include "missive/inbox.h"
#include "missive/reach.h"
#include "support/http_sink.h"

static const char SECRET[] = "channel-test-secret";

static const char BOOKING[] =
    "{\"templateCd\": \"booking\", \"actions\": [], \"type\": \"notification\", \"category\": "
    "\"bookings\","
    " \"receiverContent\": {\"title\": \"{{guest}} booked\", \"short\": \"short {{guest}}\","
    " \"long\": \"long\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"},"
    " \"channels\": {\"email\": true, \"sms\": {\"title\": \"SMS: {{guest}}\"}}}";
static const char ALARM[] =
    "{\"templateCd\": \"alarm\", \"actions\": [], \"type\": \"notification\", \"category\": "
    "\"bookings\","
    " \"critical\": true, \"receiverContent\": {\"title\": \"Alarm\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"}, \"channels\": {\"sms\": true}}";
static const char REMIND[] =
    "{\"templateCd\": \"remind\", \"actions\": [], \"category\": \"bookings\","
    " \"receiverContent\": {\"title\": \"{{guest}} asks\", \"short\": \"s\", \"long\": \"l\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"}, \"channels\": {\"email\": true, \"sms\": true},"
    " \"reminders\": [{\"afterMs\": 1000, \"title\": \"Reminder: {{guest}}\"}]}";
static const char PLAIN[] =
    "{\"templateCd\": \"plain\", \"actions\": [], \"type\": \"notification\","
    " \"receiverContent\": {\"title\": \"Plain\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"}}";

typedef struct world {
    fixture f;
    http_sink *sink;
    mv_reach *reach;
    mv_directory *dir;
    mv_webhook_config wh;
    mv_outbox_config oc;
} world;

static int world_open(world *w, const char *kind, const char *name, const char *preferences) {
    memset(w, 0, sizeof *w);
    if (!(w->sink = http_sink_start())) return 0;
    char channels[300];
    snprintf(channels, sizeof channels, "{\"sms\": {\"webhook\": \"%s/sms\"}}",
             http_sink_url(w->sink));
    json_t *c = json_loads(channels, 0, NULL);
    json_t *p = preferences ? json_loads(preferences, 0, NULL) : NULL;
    mv_err err = {0};
    mv_code rc = mv_reach_new(c, p, true, &w->reach, &err);
    json_decref(c);
    json_decref(p);
    if (rc != MV_OK) {
        fprintf(stderr, "reach: %s\n", err.message);
        return 0;
    }
    mv_service_options o = {.email = true, .reach = w->reach};
    if (!fixture_open_opts(&w->f, kind, name, &o)) return 0;
    const char *tpls[] = {BOOKING, ALARM, PLAIN, REMIND};
    for (size_t i = 0; i < 4; i++) {
        json_t *t = json_loads(tpls[i], 0, NULL);
        rc = mv_registry_register(w->f.registry, t, "<test>", &err);
        json_decref(t);
        if (rc != MV_OK) {
            fprintf(stderr, "template: %s\n", err.message);
            return 0;
        }
    }
    json_t *map = json_pack("{s:s}", "bob", "+43 660 1234567");
    mv_directory_open_map(map, &w->dir, &err);
    json_decref(map);
    w->wh = (mv_webhook_config){.secret = SECRET, .secret_len = strlen(SECRET)};
    w->oc = (mv_outbox_config){
        .clock = &w->f.clock, .webhook = &w->wh, .directory = w->dir, .backoff_base_ms = 1000};
    return 1;
}

static void world_close(world *w) {
    fixture_close(&w->f);
    mv_directory_close(w->dir);
    mv_reach_free(w->reach);
    http_sink_stop(w->sink);
}

static mv_code create_for(world *w, const char *template_cd, const char *tenant, const char *to,
                          const char *guest) {
    mv_user u = {.id = "alice", .tenant = tenant};
    json_t *payload = json_pack("{s:s,s:s}", "to", to, "guest", guest);
    mv_create_request req = {.template_cd = template_cd, .user = &u, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_create(w->f.svc, &req, &msgs, NULL, &err);
    if (rc != MV_OK) fprintf(stderr, "create: %s\n", err.message);
    json_decref(msgs);
    json_decref(payload);
    return rc;
}

static mv_code create(world *w, const char *template_cd, const char *tenant, const char *to) {
    return create_for(w, template_cd, tenant, to, "Ann");
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
/* The delivery rows of a kind, once the creates' deliveries are planned (as the outbox's next run
 * does first). */
static int64_t rows(world *w, const char *kind) {
    mv_err err = {0};
    if (mv__outbox_plan_due(w->f.store, &w->oc, 100, &err) != MV_OK)
        fprintf(stderr, "plan: %s\n", err.message);
    rows_arg a = {kind, -1};
    mv_store_read(w->f.store, rows_tx, &a, NULL);
    return a.n;
}

static int run_outbox(world *w) {
    int delivered = 0;
    mv_err err = {0};
    if (mv_outbox_run_due(w->f.store, &w->oc, 100, &delivered, &err) != MV_OK)
        fprintf(stderr, "outbox: %s\n", err.message);
    return delivered;
}

/* Standard Webhooks, recomputed with OpenSSL: base64 HMAC-SHA256 of "{id}.{ts}.{body}". */
static bool signature_verifies(const http_sink_request *r) {
    const char *id = http_sink_header(r, "webhook-id"),
               *ts = http_sink_header(r, "webhook-timestamp"),
               *sig = http_sink_header(r, "webhook-signature");
    if (!id || !ts || !sig) return false;
    size_t n = strlen(id) + strlen(ts) + 2;
    char *msg = malloc(n + r->body_len + 1);
    sprintf(msg, "%s.%s.", id, ts);
    memcpy(msg + n, r->body, r->body_len);
    unsigned char mac[32];
    unsigned int ml = 32;
    HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (unsigned char *)msg, n + r->body_len, mac,
         &ml);
    free(msg);
    char want[64] = "v1,";
    EVP_EncodeBlock((unsigned char *)want + 3, mac, 32);
    return strstr(sig, want) != NULL;
}

STORE_TEST(a_channel_receiver_gets_each_delivery_once_with_the_documented_body_and_signature) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_once", NULL));
    REQUIRE(create(&w, "booking", NULL, "bob") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 1);
    CHECK_INT(rows(&w, "email"), 1); /* email is listed too: its row waits for an email worker */
    CHECK_INT(run_outbox(&w), 1);
    CHECK_INT(run_outbox(&w), 0); /* sent: never again */
    CHECK_INT(http_sink_count(w.sink), 1);
    http_sink_request r;
    REQUIRE(http_sink_get(w.sink, 0, &r));
    CHECK_STR(r.path, "/sms");
    CHECK(signature_verifies(&r));
    json_t *body = json_loads(r.body, 0, NULL);
    REQUIRE(body);
    CHECK_STR(mv_json_str(body, "channel"), "sms");
    CHECK_STR(http_sink_header(&r, "Idempotency-Key"), mv_json_str(body, "deliveryId"));
    CHECK(mv_valid_uuid(mv_json_str(body, "deliveryId")));
    CHECK_STR(mv_json_str(json_object_get(body, "to"), "userId"), "bob");
    CHECK_STR(mv_json_str(json_object_get(body, "to"), "contact"), "+43 660 1234567");
    CHECK(mv_valid_message_id(mv_json_str(body, "messageId")));
    CHECK_STR(mv_json_str(body, "templateCd"), "booking");
    CHECK_STR(mv_json_str(body, "category"), "bookings");
    CHECK_STR(mv_json_str(body, "kind"), "message");
    json_t *content = json_object_get(body, "content");
    CHECK_STR(mv_json_str(content, "title"), "SMS: Ann");  /* the channel's override */
    CHECK_STR(mv_json_str(content, "short"), "short Ann"); /* the receiver content */
    CHECK(json_is_object(json_object_get(body, "links")));
    json_decref(body);
    http_sink_request_free(&r);
    world_close(&w);
}

static int64_t stored(world *w, const char *kind) { /* as committed: nothing planned first */
    rows_arg a = {kind, -1};
    mv_store_read(w->f.store, rows_tx, &a, NULL);
    return a.n;
}

static mv_code planned_tx(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc =
        mv_db_row(db, "SELECT COUNT(*) FROM messages WHERE deliver_at IS NOT NULL", &st, err, "");
    if (st) *(int64_t *)ctx = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return rc;
}

static int64_t planned(world *w) { /* messages whose deliveries are still to be decided */
    int64_t n = -1;
    mv_store_read(w->f.store, planned_tx, &n, NULL);
    return n;
}

static void *plan_thread(void *arg) {
    world *w = arg;
    mv_err err = {0};
    for (int i = 0; i < 3; i++)
        if (mv__outbox_plan_due(w->f.store, &w->oc, 4, &err) != MV_OK)
            fprintf(stderr, "plan: %s\n", err.message);
    return NULL;
}

/* A create with named channels commits its message with a plan and no delivery: the deliveries are
 * decided by the outbox afterwards, each plan once, with two workers deciding at the same time. */
STORE_TEST(a_create_commits_a_plan_that_two_workers_at_once_decide_once) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_plan", NULL));
    for (int i = 0; i < 10; i++)
        REQUIRE(create(&w, "booking", NULL, "bob") == MV_OK);
    REQUIRE(create(&w, "plain", NULL, "bob") == MV_OK); /* email only: queued at once */
    CHECK_INT(planned(&w), 10);
    CHECK_INT(stored(&w, "webhook"), 0);
    CHECK_INT(stored(&w, "email"), 1);
    pthread_t a, b;
    pthread_create(&a, NULL, plan_thread, &w);
    pthread_create(&b, NULL, plan_thread, &w);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_INT(planned(&w), 0);
    CHECK_INT(stored(&w, "webhook"), 10); /* one sms per message, not two */
    CHECK_INT(stored(&w, "email"), 11);
    CHECK_INT(run_outbox(&w), 10);
    CHECK_INT(run_outbox(&w), 0);
    CHECK_INT(http_sink_count(w.sink), 10);
    world_close(&w);
}

/* A scheduled message's plan waits for its sendAt, and a cancel before then takes it away. */
STORE_TEST(a_scheduled_message_is_planned_at_its_send_and_a_cancelled_one_never) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_sched", NULL));
    mv_user alice = {.id = "alice"};
    json_t *payload = json_pack("{s:s,s:s,s:I}", "to", "bob", "guest", "Ann", "sendAt",
                                (json_int_t)(w.f.now + 60000));
    mv_create_request req = {.template_cd = "booking", .user = &alice, .payload = payload};
    json_t *msgs = NULL, *c = NULL;
    mv_err err = {0};
    REQUIRE(mv_message_create(w.f.svc, &req, &msgs, NULL, &err) == MV_OK);
    char *keep = strdup(mv_json_str(json_array_get(msgs, 0), "id"));
    json_decref(msgs);
    msgs = NULL;
    REQUIRE(mv_message_create(w.f.svc, &req, &msgs, NULL, &err) == MV_OK);
    char *gone = strdup(mv_json_str(json_array_get(msgs, 0), "id"));
    json_decref(msgs);
    json_decref(payload);
    CHECK_INT(planned(&w), 2);
    CHECK_INT(run_outbox(&w), 0); /* not due before its sendAt */
    CHECK_INT(planned(&w), 2);
    CHECK_CODE(mv_message_cancel(w.f.svc, gone, &alice, &c, &err), MV_OK, &err);
    json_decref(c);
    CHECK_INT(planned(&w), 1);
    w.f.now += 120000;
    CHECK_INT(run_outbox(&w), 1); /* the one kept: its sms */
    CHECK_INT(planned(&w), 0);
    CHECK_INT(stored(&w, "webhook"), 1);
    CHECK_INT(http_sink_count(w.sink), 1);
    free(keep);
    free(gone);
    world_close(&w);
}

typedef struct payloads_arg {
    json_t *rows; /* [[kind, payload text], …] */
} payloads_arg;
static mv_code payloads_tx(mv_db *db, void *ctx, mv_err *err) {
    payloads_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, "SELECT kind, payload FROM outbox ORDER BY kind", &st, err);
    if (rc != MV_OK) return rc;
    while (mv_stmt_step(st, err) == 1)
        json_array_append_new(a->rows,
                              json_pack("[s,s]", mv_stmt_text(st, 0), mv_stmt_text(st, 1)));
    mv_stmt_done(st);
    return MV_OK;
}

/* The rows' payloads are written as text straight from the create (no jansson tree): each must be
 * exactly jansson's compact JSON of the documented object, escapes included. */
STORE_TEST(queued_payloads_are_compact_json_with_escaped_strings) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_text", NULL));
    const char *guest = "An\"n\\ \u00e9\u2603\n\t/<x>";
    REQUIRE(create_for(&w, "booking", NULL, "bob", guest) == MV_OK);
    payloads_arg a = {json_array()};
    rows(&w, "webhook"); /* planned */
    REQUIRE(mv_store_read(w.f.store, payloads_tx, &a, NULL) == MV_OK);
    REQUIRE(json_array_size(a.rows) == 2);
    char want[200];
    for (size_t i = 0; i < 2; i++) {
        const char *k = json_string_value(json_array_get(json_array_get(a.rows, i), 0));
        const char *text = json_string_value(json_array_get(json_array_get(a.rows, i), 1));
        json_t *p = json_loads(text, 0, NULL);
        REQUIRE(p);
        char *again = json_dumps(p, JSON_COMPACT);
        CHECK_STR(again, text);
        free(again);
        if (!strcmp(k, "email")) {
            CHECK_INT((int)json_object_size(p), 4);
            snprintf(want, sizeof want, "%s booked", guest);
            CHECK_STR(mv_json_str(p, "title"), want);
            CHECK_STR(mv_json_str(p, "toUser"), "bob");
            snprintf(want, sizeof want, "short %s", guest); /* the longer of short and long */
            CHECK_STR(mv_json_str(p, "body"), want);
            CHECK(mv_valid_message_id(mv_json_str(p, "messageId")));
        } else {
            CHECK_INT((int)json_object_size(p), 5);
            json_t *body = json_object_get(p, "body");
            CHECK_STR(mv_json_str(p, "idempotencyKey"), mv_json_str(body, "deliveryId"));
            CHECK_STR(mv_json_str(p, "contactOf"), "bob");
            CHECK_STR(mv_json_str(p, "channel"), "sms");
            CHECK(!strncmp(mv_json_str(p, "url"), http_sink_url(w.sink), 10));
            CHECK_INT((int)json_object_size(body), 9);
            CHECK(json_is_null(json_object_get(json_object_get(body, "to"), "contact")));
            snprintf(want, sizeof want, "SMS: %s", guest);
            CHECK_STR(mv_json_str(json_object_get(body, "content"), "title"), want);
            snprintf(want, sizeof want, "short %s", guest);
            CHECK_STR(mv_json_str(json_object_get(body, "content"), "short"), want);
        }
        json_decref(p);
    }
    json_decref(a.rows);
    world_close(&w);
}

STORE_TEST(a_receiver_answering_500_is_retried_with_the_same_delivery_id) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_retry", NULL));
    http_sink_push(w.sink, &(http_sink_response){.status = 500});
    REQUIRE(create(&w, "booking", NULL, "bob") == MV_OK);
    CHECK_INT(run_outbox(&w), 0);
    w.f.now += 10000; /* past the backoff */
    CHECK_INT(run_outbox(&w), 1);
    REQUIRE(http_sink_count(w.sink) == 2);
    http_sink_request a, b;
    REQUIRE(http_sink_get(w.sink, 0, &a));
    REQUIRE(http_sink_get(w.sink, 1, &b));
    json_t *ja = json_loads(a.body, 0, NULL), *jb = json_loads(b.body, 0, NULL);
    CHECK_STR(mv_json_str(ja, "deliveryId"), mv_json_str(jb, "deliveryId"));
    CHECK_STR(http_sink_header(&b, "Idempotency-Key"), mv_json_str(ja, "deliveryId"));
    CHECK(signature_verifies(&b));
    json_decref(ja);
    json_decref(jb);
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    world_close(&w);
}

STORE_TEST(preferences_turn_a_channel_off_for_one_category_but_not_for_a_critical_template) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_prefs", NULL));
    mv_user bob = {.id = "bob"};
    json_t *set = json_loads("{\"categories\": {\"bookings\": {\"sms\": false}}}", 0, NULL);
    mv_err err = {0};
    CHECK_CODE(mv_preferences_put(w.f.store, w.reach, &bob, set, NULL, &err), MV_OK, &err);
    json_decref(set);
    REQUIRE(create(&w, "booking", NULL, "bob") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 0); /* sms off for bookings */
    CHECK_INT(rows(&w, "email"), 1);   /* email still on */
    REQUIRE(create(&w, "alarm", NULL, "bob") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 1); /* critical: preferences ignored */
    REQUIRE(create(&w, "booking", NULL, "carol") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 2); /* another user's preferences are their own */
    world_close(&w);
}

STORE_TEST(tenant_defaults_apply_in_their_tenant_only) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_tenant",
                       "{\"defaults\": {\"channels\": {\"email\": false}},"
                       " \"tenants\": {\"acme\": {\"channels\": {\"sms\": false}}}}"));
    REQUIRE(create(&w, "booking", "acme", "bob") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 0); /* acme: sms off, email on (its own defaults) */
    CHECK_INT(rows(&w, "email"), 1);
    REQUIRE(create(&w, "booking", "other", "bob") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 1); /* other tenants: the defaults (email off) */
    CHECK_INT(rows(&w, "email"), 1);
    /* the user's own preference beats the tenant's default */
    mv_user bob = {.id = "bob", .tenant = "acme"};
    json_t *set = json_loads("{\"channels\": {\"sms\": true}}", 0, NULL);
    mv_err err = {0};
    CHECK_CODE(mv_preferences_put(w.f.store, w.reach, &bob, set, NULL, &err), MV_OK, &err);
    json_decref(set);
    REQUIRE(create(&w, "booking", "acme", "bob") == MV_OK);
    CHECK_INT(rows(&w, "webhook"), 2);
    world_close(&w);
}

STORE_TEST(a_template_without_channels_emails_as_before_and_role_messages_reach_only_the_inbox) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_plain", NULL));
    REQUIRE(create(&w, "plain", NULL, "bob") == MV_OK);
    CHECK_INT(rows(&w, "email"), 1);
    CHECK_INT(rows(&w, "webhook"), 0);
    /* "email" turned off by the user applies to templates without channels too */
    mv_user bob = {.id = "bob"};
    json_t *set = json_loads("{\"channels\": {\"email\": false}}", 0, NULL);
    mv_err err = {0};
    CHECK_CODE(mv_preferences_put(w.f.store, w.reach, &bob, set, NULL, &err), MV_OK, &err);
    json_decref(set);
    REQUIRE(create(&w, "plain", NULL, "bob") == MV_OK);
    CHECK_INT(rows(&w, "email"), 1);
    world_close(&w);
}

STORE_TEST(a_reminder_is_delivered_on_the_receivers_channels_with_kind_reminder_once) {
    world w;
    REQUIRE(world_open(&w, kind, "ch_remind", NULL));
    mv__timer_engine *e = NULL;
    mv__timer_engine_options o = {.clock = &w.f.clock};
    mv_err err = {0};
    REQUIRE(mv__timer_engine_new(w.f.store, &o, &e, &err) == MV_OK);
    REQUIRE(mv__service_register_timers(w.f.svc, e, &err) == MV_OK);
    REQUIRE(create(&w, "remind", NULL, "bob") == MV_OK);
    CHECK_INT(run_outbox(&w), 1); /* the message itself */
    CHECK_INT(rows(&w, "email"), 1);
    w.f.now += 1000;
    mv__timer_pass p = {0};
    CHECK_CODE(mv__timer_engine_run(e, &p, &err), MV_OK, &err);
    CHECK_INT(p.fired, 1);
    CHECK_INT(rows(&w, "webhook"), 2);
    CHECK_INT(rows(&w, "email"), 2);
    CHECK_INT(run_outbox(&w), 1);
    CHECK_INT(run_outbox(&w), 0);
    REQUIRE(http_sink_count(w.sink) == 2);
    http_sink_request r;
    REQUIRE(http_sink_get(w.sink, 1, &r));
    json_t *body = json_loads(r.body, 0, NULL);
    REQUIRE(body);
    CHECK_STR(mv_json_str(body, "kind"), "reminder");
    CHECK_STR(mv_json_str(json_object_get(body, "to"), "userId"), "bob");
    CHECK_STR(mv_json_str(json_object_get(body, "content"), "title"), "Reminder: Ann");
    CHECK_STR(mv_json_str(json_object_get(body, "content"), "short"), "s");
    json_decref(body);
    http_sink_request_free(&r);
    mv__timer_engine_free(e);
    world_close(&w);
}

TEST(a_template_naming_an_unconfigured_channel_is_refused_naming_it) {
    json_t *c = json_loads("{\"sms\": {\"webhook\": \"http://127.0.0.1:9/sms\"}}", 0, NULL);
    mv_reach *r = NULL;
    mv_err err = {0};
    REQUIRE(mv_reach_new(c, NULL, true, &r, &err) == MV_OK);
    json_t *j = json_loads(
        "{\"templateCd\": \"t\", \"actions\": [], \"channels\": {\"sms\": true, \"chat\": "
        "{\"title\": \"x\"}}}",
        0, NULL);
    mv_template *t = NULL;
    REQUIRE(mv_template_parse(j, "t.json", &t, &err) == MV_OK);
    CHECK_CODE(mv_reach_check_template(r, t, &err), MV_INVALID_TEMPLATE, &err);
    CHECK(strstr(err.message, "\"chat\"") != NULL);
    CHECK_CODE(mv_reach_check_template(NULL, t, &err), MV_INVALID_TEMPLATE, &err);
    mv_template_release(t);
    json_decref(j);
    /* bad shapes fail at parse, naming the field */
    static const char *const bad[][2] = {
        {"{\"templateCd\": \"t\", \"actions\": [], \"channels\": {\"SMS\": true}}", "\"SMS\""},
        {"{\"templateCd\": \"t\", \"actions\": [], \"channels\": {\"sms\": {\"subject\": \"x\"}}}",
         "subject"},
        {"{\"templateCd\": \"t\", \"actions\": [], \"channels\": {\"sms\": {\"title\": "
         "\"{{#x}}\"}}}",
         "channels.sms.title"},
        {"{\"templateCd\": \"t\", \"actions\": [], \"critical\": \"yes\"}", "critical"},
        {"{\"templateCd\": \"t\", \"actions\": [], \"category\": \"a b\"}", "category"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = json_loads(bad[i][0], 0, NULL);
        mv_err_clear(&err);
        CHECK_CODE(mv_template_parse(j, "t.json", &t, &err), MV_INVALID_TEMPLATE, &err);
        if (!strstr(err.message, bad[i][1]))
            test_failf_(__FILE__, __LINE__, "\"%s\" does not name %s", err.message, bad[i][1]);
        json_decref(j);
    }
    json_decref(c);
    mv_reach_free(r);
}

int main(void) {
    return RUN_TESTS(
        a_channel_receiver_gets_each_delivery_once_with_the_documented_body_and_signature,
        a_create_commits_a_plan_that_two_workers_at_once_decide_once,
        a_scheduled_message_is_planned_at_its_send_and_a_cancelled_one_never,
        queued_payloads_are_compact_json_with_escaped_strings,
        a_receiver_answering_500_is_retried_with_the_same_delivery_id,
        preferences_turn_a_channel_off_for_one_category_but_not_for_a_critical_template,
        tenant_defaults_apply_in_their_tenant_only,
        a_template_without_channels_emails_as_before_and_role_messages_reach_only_the_inbox,
        a_reminder_is_delivered_on_the_receivers_channels_with_kind_reminder_once,
        a_template_naming_an_unconfigured_channel_is_refused_naming_it);
}
