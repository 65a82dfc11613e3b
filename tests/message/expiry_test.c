/* expiry_test.c — message expiry (message/timers.c) on both stores, with a manual clock: the
 * template's afterMs and the create's expiresAt; an expired active message archived by
 * system:expiry (actionCd null) with the sender notified once and a change-log row; the expiry's
 * action run once through the claim as system:expiry with trigger "expiry" (a press: "user"); a
 * press after expiry is 410; a message acted on before expiry is left alone; two engines racing on
 * the same due expiries run each action once; bad expiresAt values are refused and change
 * nothing; a template whose expiry.actionCd is not a receiver action does not load. */
#include <pthread.h>
#include <stdatomic.h>

#include "durable/timer.h"
#include "message/fixture.h"
#include "message/timers.h"
#include "missive/inbox.h"

static const char *EXP_TEMPLATES[] = {
    "{\"templateCd\": \"offer\", \"senderContent\": {\"title\": \"Offer {{name}}\"},"
    " \"receiverContent\": {\"title\": \"Offer {{name}}\"}, \"prepare\": {\"toUser\": "
    "\"{{toUser}}\"},"
    " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept\", \"variant\": \"success\","
    " \"receiver\": true}, {\"actionCd\": \"decline\", \"name\": \"Decline\", \"variant\": "
    "\"danger\", \"receiver\": true}],"
    " \"expiry\": {\"afterMs\": 60000, \"actionCd\": \"decline\","
    " \"senderNotification\": {\"title\": \"Expired: {{name}}\"}}}",
    "{\"templateCd\": \"note\", \"senderContent\": {\"title\": \"Note {{name}}\"},"
    " \"receiverContent\": {\"title\": \"Note {{name}}\"}, \"prepare\": {\"toUser\": "
    "\"{{toUser}}\"},"
    " \"actions\": [{\"actionCd\": \"ok\", \"name\": \"OK\", \"variant\": \"success\","
    " \"receiver\": true}],"
    " \"expiry\": {\"afterMs\": 1000, \"senderNotification\": {\"title\": \"Gone: {{name}}\"}}}",
    "{\"templateCd\": \"ask\", \"receiverContent\": {\"title\": \"Ask {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{toUser}}\"},"
    " \"actions\": [{\"actionCd\": \"no\", \"name\": \"No\", \"variant\": \"danger\","
    " \"receiver\": true}], \"expiry\": {\"afterMs\": 1000, \"actionCd\": \"no\"}}",
};

typedef struct {
    atomic_int calls;
    char trigger[32], user[64];
} handler_log;

static mv_code decline(void *ctx, const mv_action_input *in, json_t **result, mv_err *err) {
    (void)err;
    handler_log *h = ctx;
    atomic_fetch_add(&h->calls, 1);
    mv_strlcpy(h->trigger, in->trigger ? in->trigger : "(null)", sizeof h->trigger);
    mv_strlcpy(h->user, in->user->id, sizeof h->user);
    *result = json_null();
    return MV_OK;
}

typedef struct {
    fixture f;
    handler_log h;
    mv__timer_engine *e;
} exp_fixture;

static bool open_exp(exp_fixture *x, const char *kind, const char *name) {
    memset(x, 0, sizeof *x);
    if (!fixture_open(&x->f, kind, name)) return false;
    mv_err err = {0};
    for (size_t i = 0; i < sizeof EXP_TEMPLATES / sizeof *EXP_TEMPLATES; i++) {
        json_t *t = json_loads(EXP_TEMPLATES[i], 0, NULL);
        mv_code rc = mv_registry_register(x->f.registry, t, "<exp>", &err);
        json_decref(t);
        if (rc != MV_OK) {
            fprintf(stderr, "template: %s\n", err.message);
            return false;
        }
    }
    mv_service_set_handler(x->f.svc, "offer", "decline", decline, &x->h);
    mv__timer_engine_options o = {.clock = &x->f.clock, .lease_ms = 10000};
    return mv__timer_engine_new(x->f.store, &o, &x->e, &err) == MV_OK &&
           mv__service_register_timers(x->f.svc, x->e, &err) == MV_OK;
}

static void close_exp(exp_fixture *x) {
    mv__timer_engine_free(x->e);
    fixture_close(&x->f);
}

static json_t *create(exp_fixture *x, const char *tpl, const char *extra, mv_code *rc) {
    mv_user u = {.id = "ana"};
    char body[512];
    snprintf(body, sizeof body, "{\"name\": \"Boat\", \"toUser\": \"bob\"%s%s}", extra ? ", " : "",
             extra ? extra : "");
    json_t *payload = json_loads(body, 0, NULL);
    mv_create_request req = {.template_cd = tpl, .user = &u, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    *rc = mv_message_create(x->f.svc, &req, &msgs, NULL, &err);
    json_decref(payload);
    return msgs;
}

static mv__timer_pass fire(exp_fixture *x) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(x->e, &p, &err) != MV_OK) fprintf(stderr, "run: %s\n", err.message);
    return p;
}

static json_t *get(exp_fixture *x, const char *id) {
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_get(x->f.svc, id, NULL, &m, &err);
    return m;
}

/* Messages ana (the sender) received: her notifications. */
static int64_t notifications_of(exp_fixture *x, const char *user, const char *title) {
    mv_user u = {.id = user};
    json_t *limit = json_integer(100);
    mv_list_request r = {.user = &u, .limit = limit};
    json_t *page = NULL;
    char *cursor = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_list(x->f.svc, &r, &page, &cursor, &err);
    json_decref(limit);
    free(cursor);
    if (rc != MV_OK) return -1;
    int64_t n = 0;
    size_t i;
    json_t *m;
    json_array_foreach(page, i, m) {
        const char *t = mv_json_str(json_object_get(m, "receiverContent"), "title");
        if (strcmp(mv_json_str(m, "templateCd"), MV_GENERIC_NOTIFICATION_TEMPLATE_CD) == 0 &&
            strcmp(mv_json_str(m, "toUser"), user) == 0 && t && strcmp(t, title) == 0)
            n++;
    }
    json_decref(page);
    return n;
}

STORE_TEST(an_expired_message_without_an_expiry_action_is_archived_once_by_system_expiry) {
    exp_fixture x;
    REQUIRE(open_exp(&x, kind, "exp_archive"));
    mv_code rc;
    json_t *msgs = create(&x, "note", NULL, &rc);
    REQUIRE(rc == MV_OK);
    const char *id = first_id(msgs);
    json_t *m = json_array_get(msgs, 0);
    CHECK_INT(json_integer_value(json_object_get(m, "expiresAt")), x.f.now + 1000);
    json_t *stored = get(&x, id);
    CHECK_INT(json_integer_value(json_object_get(stored, "expiresAt")), x.f.now + 1000);
    json_decref(stored);
    int64_t latest = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(x.f.store, &latest, NULL, &err), MV_OK, &err);
    x.f.now += 999;
    CHECK_INT(fire(&x).claimed, 0);
    x.f.now += 1;
    CHECK_INT(fire(&x).fired, 1);
    stored = get(&x, id);
    CHECK_STR(mv_json_str(stored, "actionState"), "archived");
    CHECK_STR(mv_json_str(stored, "archivedBy"), "system:expiry");
    CHECK(json_is_null(json_object_get(stored, "actionCd")));
    json_decref(stored);
    CHECK_INT(notifications_of(&x, "ana", "Gone: Boat"), 1);
    mv_change ch[8];
    int n = 0;
    CHECK_CODE(mv_changes_read(x.f.store, latest, ch, 8, &n, &err), MV_OK, &err);
    int updated = 0;
    for (int i = 0; i < n; i++)
        if (ch[i].kind == MV_CHANGE_UPDATED && strcmp(ch[i].message_id, id) == 0) updated++;
    CHECK_INT(updated, 1);
    x.f.now += 100000; /* nothing fires twice */
    CHECK_INT(fire(&x).claimed, 0);
    CHECK_INT(notifications_of(&x, "ana", "Gone: Boat"), 1);
    mv_user bob = {.id = "bob"};
    mv_action_request press = {.message_id = id, .action_cd = "ok", .user = &bob};
    json_t *result = NULL;
    CHECK_CODE(mv_action_handle(x.f.svc, &press, &result, &err), MV_MESSAGE_ARCHIVED, &err);
    json_decref(result);
    json_decref(msgs);
    close_exp(&x);
}

STORE_TEST(the_expiry_action_runs_once_through_the_claim_as_system_expiry_with_trigger_expiry) {
    exp_fixture x;
    REQUIRE(open_exp(&x, kind, "exp_action"));
    mv_code rc;
    json_t *msgs = create(&x, "offer", NULL, &rc);
    REQUIRE(rc == MV_OK);
    const char *id = first_id(msgs);
    x.f.now += 60000;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_INT(atomic_load(&x.h.calls), 1);
    CHECK_STR(x.h.trigger, "expiry");
    CHECK_STR(x.h.user, "system:expiry");
    json_t *stored = get(&x, id);
    CHECK_STR(mv_json_str(stored, "actionState"), "archived");
    CHECK_STR(mv_json_str(stored, "actionCd"), "decline");
    CHECK_STR(mv_json_str(stored, "archivedBy"), "system:expiry");
    json_decref(stored);
    CHECK_INT(notifications_of(&x, "ana", "Expired: Boat"), 1);
    x.f.now += 100000;
    CHECK_INT(fire(&x).claimed, 0);
    CHECK_INT(atomic_load(&x.h.calls), 1);
    /* a press is the user's: trigger "user" */
    json_t *other = create(&x, "offer", NULL, &rc);
    REQUIRE(rc == MV_OK);
    mv_user bob = {.id = "bob"};
    mv_action_request press = {.message_id = first_id(other), .action_cd = "decline", .user = &bob};
    json_t *result = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_action_handle(x.f.svc, &press, &result, &err), MV_OK, &err);
    json_decref(result);
    CHECK_STR(x.h.trigger, "user");
    CHECK_STR(x.h.user, "bob");
    /* its expiry then finds it archived by bob: no action, no expiry notification */
    x.f.now += 60000;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_INT(atomic_load(&x.h.calls), 2);
    CHECK_INT(notifications_of(&x, "ana", "Expired: Boat"), 1);
    stored = get(&x, first_id(other));
    CHECK_STR(mv_json_str(stored, "archivedBy"), "bob");
    json_decref(stored);
    json_decref(other);
    json_decref(msgs);
    close_exp(&x);
}

STORE_TEST(a_create_expires_at_overrides_the_template_and_a_bad_one_is_refused_creating_nothing) {
    exp_fixture x;
    REQUIRE(open_exp(&x, kind, "exp_body"));
    mv_code rc;
    char extra[128];
    snprintf(extra, sizeof extra, "\"expiresAt\": %lld", (long long)(x.f.now + 5000));
    json_t *msgs = create(&x, "offer", extra, &rc);
    REQUIRE(rc == MV_OK);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(msgs, 0), "expiresAt")),
              x.f.now + 5000);
    json_decref(msgs);
    int64_t before = fixture_rows(x.f.store, 'm');
    const char *bad[] = {"\"expiresAt\": 1", "\"expiresAt\": \"tomorrow\"", "\"expiresAt\": 1.5",
                         NULL, NULL};
    char now_v[64], far_v[64];
    snprintf(now_v, sizeof now_v, "\"expiresAt\": %lld", (long long)x.f.now);
    snprintf(far_v, sizeof far_v, "\"expiresAt\": %lld",
             (long long)(x.f.now + MV_MAX_DELAY_MS + 1));
    bad[3] = now_v;
    const char *all[] = {bad[0], bad[1], bad[2], now_v, far_v};
    for (int i = 0; i < 5; i++) {
        json_t *m = create(&x, "offer", all[i], &rc);
        CHECK_INT(rc, MV_INVALID_ARGUMENT);
        json_decref(m);
    }
    CHECK_INT(fixture_rows(x.f.store, 'm'), before);
    json_t *none = NULL;
    mv_timers_filter f = {.kind = "expiry"};
    mv_err err = {0};
    CHECK_CODE(mv_timers_list(x.f.store, &f, &none, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(none, "timers")), 1); /* only the good create's */
    json_decref(none);
    /* the body's time, not the template's afterMs */
    x.f.now += 5000;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_INT(atomic_load(&x.h.calls), 1);
    close_exp(&x);
}

typedef struct {
    exp_fixture *x;
    atomic_int fired;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    mv__timer_engine_options o = {.clock = &r->x->f.clock, .lease_ms = 10000, .batch = 7};
    mv__timer_engine *e = NULL;
    mv_err err = {0};
    if (mv__timer_engine_new(r->x->f.store, &o, &e, &err) != MV_OK ||
        mv__service_register_timers(r->x->f.svc, e, &err) != MV_OK)
        return NULL;
    for (int idle = 0; idle < 3;) {
        mv__timer_pass p = {0};
        mv__timer_engine_run(e, &p, &err);
        atomic_fetch_add(&r->fired, p.fired);
        idle = p.claimed ? 0 : idle + 1;
    }
    mv__timer_engine_free(e);
    return NULL;
}

STORE_TEST(three_engines_racing_on_due_expiries_run_each_expiry_action_once) {
    exp_fixture x;
    REQUIRE(open_exp(&x, kind, "exp_race"));
    enum { N = 60 };
    for (int i = 0; i < N; i++) {
        mv_code rc;
        json_decref(create(&x, i % 2 ? "offer" : "note", NULL, &rc));
        REQUIRE(rc == MV_OK);
    }
    x.f.now += 60000;
    racer r = {&x, 0};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(pthread_create(&th[i], NULL, race, &r) == 0);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(atomic_load(&r.fired), N);
    CHECK_INT(atomic_load(&x.h.calls), N / 2);
    CHECK_INT(notifications_of(&x, "ana", "Expired: Boat"), N / 2);
    CHECK_INT(notifications_of(&x, "ana", "Gone: Boat"), N / 2);
    close_exp(&x);
}

/* An action without a handler is claimed and archived by one statement (claim.c): archivedBy is
 * the presser's id — it was the address of the id's text, bound as an integer. */
STORE_TEST(an_expiry_action_without_a_handler_and_a_press_of_one_record_who_archived) {
    exp_fixture x;
    REQUIRE(open_exp(&x, kind, "exp_plain"));
    mv_code rc;
    json_t *a = create(&x, "ask", NULL, &rc), *b = create(&x, "ask", NULL, &rc);
    REQUIRE(rc == MV_OK);
    mv_user bob = {.id = "bob"};
    mv_action_request press = {.message_id = first_id(b), .action_cd = "no", .user = &bob};
    json_t *result = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_action_handle(x.f.svc, &press, &result, &err), MV_OK, &err);
    json_decref(result);
    x.f.now += 1000;
    CHECK_INT(fire(&x).fired, 2);
    json_t *m = get(&x, first_id(a));
    CHECK_STR(mv_json_str(m, "archivedBy"), "system:expiry");
    CHECK_STR(mv_json_str(m, "actionCd"), "no");
    json_decref(m);
    m = get(&x, first_id(b));
    CHECK_STR(mv_json_str(m, "archivedBy"), "bob");
    json_decref(m);
    json_decref(a);
    json_decref(b);
    close_exp(&x);
}

/* The timer carries its message's tenant; the fire and its notification stay in that tenant. */
STORE_TEST(an_expiry_acts_in_its_messages_tenant_and_another_tenant_sees_none_of_it) {
    exp_fixture x;
    REQUIRE(open_exp(&x, kind, "exp_tenant"));
    mv_user ana_acme = {.id = "ana", .tenant = "acme"}, ana = {.id = "ana"};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Boat", "toUser", "bob");
    mv_create_request req = {.template_cd = "note", .user = &ana_acme, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(x.f.svc, &req, &msgs, NULL, &err), MV_OK, &err);
    json_decref(payload);
    json_t *page = NULL;
    mv_timers_filter other = {.tenant_id = "default"}, own = {.tenant_id = "acme"};
    CHECK_CODE(mv_timers_list(x.f.store, &other, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(page, "timers")), 0);
    json_decref(page);
    CHECK_CODE(mv_timers_list(x.f.store, &own, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(page, "timers")), 1);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(page, "timers"), 0), "tenantId"), "acme");
    json_decref(page);
    x.f.now += 1000;
    CHECK_INT(fire(&x).fired, 1);
    json_t *m = NULL;
    CHECK_CODE(mv_message_get(x.f.svc, first_id(msgs), &ana_acme, &m, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(m, "archivedBy"), "system:expiry");
    json_decref(m);
    CHECK_CODE(mv_message_get(x.f.svc, first_id(msgs), &ana, &m, &err), MV_MESSAGE_NOT_FOUND, &err);
    CHECK_INT(notifications_of(&x, "ana", "Gone: Boat"), 0); /* not in her default tenant */
    int64_t n = 0;
    CHECK_CODE(mv_message_count(x.f.svc, &ana_acme, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1); /* the notification, in acme */
    json_decref(msgs);
    close_exp(&x);
}

TEST(a_template_whose_expiry_action_is_not_a_receiver_action_does_not_load) {
    const char *bad[] = {
        "{\"templateCd\": \"x\", \"actions\": [{\"actionCd\": \"w\", \"name\": \"W\", \"variant\": "
        "\"dark\", \"sender\": true}], \"expiry\": {\"afterMs\": 5, \"actionCd\": \"w\"}}",
        "{\"templateCd\": \"x\", \"actions\": [], \"expiry\": {\"actionCd\": \"nope\"}}",
        "{\"templateCd\": \"x\", \"actions\": [], \"expiry\": {\"afterMs\": 0}}",
        "{\"templateCd\": \"x\", \"actions\": [], \"expiry\": {\"after\": 5}}",
    };
    const char *words[] = {"expiry.actionCd \"w\"", "expiry.actionCd \"nope\"", "expiry.afterMs",
                           "expiry has unknown key"};
    for (int i = 0; i < 4; i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        mv_template *t = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_template_parse(j, "x.json", &t, &err), MV_INVALID_TEMPLATE, &err);
        CHECK(strstr(err.message, words[i]) != NULL);
        CHECK(strstr(err.message, "x.json") != NULL);
        json_decref(j);
    }
}

int main(void) {
    return RUN_TESTS(
        an_expired_message_without_an_expiry_action_is_archived_once_by_system_expiry,
        the_expiry_action_runs_once_through_the_claim_as_system_expiry_with_trigger_expiry,
        a_create_expires_at_overrides_the_template_and_a_bad_one_is_refused_creating_nothing,
        three_engines_racing_on_due_expiries_run_each_expiry_action_once,
        an_expiry_action_without_a_handler_and_a_press_of_one_record_who_archived,
        an_expiry_acts_in_its_messages_tenant_and_another_tenant_sees_none_of_it,
        a_template_whose_expiry_action_is_not_a_receiver_action_does_not_load);
}
