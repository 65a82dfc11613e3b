/* schedule_test.c — scheduled send (message/schedule.c) on both stores, with a manual clock: a
 * message created with sendAt is its sender's only (scheduled=true lists it) until its `send`
 * timer makes it active with a message.created change-log row, the counts moving then; cancel
 * before sendAt hides it everywhere and its timer fires nothing, after it is 409; a bad sendAt is
 * refused storing nothing; an idempotent create replays the same scheduled answer; its email is
 * due at sendAt, and a cancelled one's is skipped, never sent. */
#include <stdlib.h>

#include "missive/deliver.h"
#include "support/smtp_sink.h"

#include "durable/timer.h"
#include "message/fixture.h"
#include "message/timers.h"
#include "missive/inbox.h"

typedef struct {
    fixture f;
    mv__timer_engine *e;
} sc_fixture;

static bool open_sc_opts(sc_fixture *x, const char *kind, const char *name,
                         mv_service_options *o_svc) {
    memset(x, 0, sizeof *x);
    if (!fixture_open_opts(&x->f, kind, name, o_svc)) return false;
    mv_err err = {0};
    mv__timer_engine_options o = {.clock = &x->f.clock, .lease_ms = 10000};
    return mv__timer_engine_new(x->f.store, &o, &x->e, &err) == MV_OK &&
           mv__service_register_timers(x->f.svc, x->e, &err) == MV_OK;
}

static bool open_sc(sc_fixture *x, const char *kind, const char *name) {
    mv_service_options o = {0};
    return open_sc_opts(x, kind, name, &o);
}

static void close_sc(sc_fixture *x) {
    mv__timer_engine_free(x->e);
    fixture_close(&x->f);
}

static const char *TEAM[] = {"team"};

static mv_user user(const char *id) {
    bool member = strcmp(id, "carl") == 0;
    return (mv_user){.id = id, .roles = member ? TEAM : NULL, .nroles = member ? 1 : 0};
}

/* ana sends to bob and the role "team" (carl) at send_at (json, may be NULL); the create's code,
 * *out its first message. */
static mv_code send_at(sc_fixture *x, json_t *at, const char *crid, json_t **out, mv_err *err) {
    mv_user ana = user("ana");
    json_t *payload =
        json_pack("{s:s,s:s,s:[s]}", "name", "Boat", "toUser", "bob", "toRoles", "team");
    if (at) json_object_set_new(payload, "sendAt", at);
    json_t *cr = crid ? json_string(crid) : NULL;
    mv_create_request req = {
        .template_cd = "svc-test", .user = &ana, .payload = payload, .client_request_id = cr};
    json_t *msgs = NULL;
    mv_code rc = mv_message_create(x->f.svc, &req, &msgs, NULL, err);
    *out = json_incref(json_array_get(msgs, 0));
    json_decref(msgs);
    json_decref(payload);
    json_decref(cr);
    return rc;
}

static int64_t count_of(sc_fixture *x, const char *who) {
    mv_user u = user(who);
    mv_inbox_counts c = {-1, -1, -1};
    mv_err err = {0};
    if (mv_message_counts(x->f.svc, &u, NULL, false, &c, &err) != MV_OK)
        fprintf(stderr, "count: %s\n", err.message);
    return c.count;
}

/* How many messages who lists (scheduled: the scheduled list; archived: the archive). */
static int listed(sc_fixture *x, const char *who, bool scheduled, bool archived) {
    mv_user u = user(who);
    mv_list_request r = {.user = &u, .scheduled = scheduled, .archived = archived};
    json_t *page = NULL;
    char *cursor = NULL;
    mv_err err = {0};
    if (mv_message_list(x->f.svc, &r, &page, &cursor, &err) != MV_OK) return -1;
    free(cursor);
    int n = (int)json_array_size(page);
    json_decref(page);
    return n;
}

static mv_code get_code(sc_fixture *x, const char *who, const char *id) {
    mv_user u = user(who);
    json_t *m = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_get(x->f.svc, id, &u, &m, &err);
    json_decref(m);
    return rc;
}

static mv__timer_pass fire(sc_fixture *x) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(x->e, &p, &err) != MV_OK) fprintf(stderr, "run: %s\n", err.message);
    return p;
}

static int created_changes(sc_fixture *x, int64_t after, const char *id) {
    mv_change ch[32];
    int n = 0, hits = 0;
    mv_err err = {0};
    if (mv_changes_read(x->f.store, after, ch, 32, &n, &err) != MV_OK) return -1;
    for (int i = 0; i < n; i++)
        hits += ch[i].kind == MV_CHANGE_CREATED && strcmp(ch[i].message_id, id) == 0;
    return hits;
}

static mv_code press(sc_fixture *x, const char *who, const char *id) {
    mv_user u = user(who);
    mv_action_request req = {.message_id = id, .action_cd = "approve", .user = &u};
    json_t *result = NULL;
    mv_err err = {0};
    mv_code rc = mv_action_handle(x->f.svc, &req, &result, &err);
    json_decref(result);
    return rc;
}

STORE_TEST(a_scheduled_message_is_its_senders_only_until_its_timer_sends_it_with_a_created_row) {
    sc_fixture x;
    REQUIRE(open_sc(&x, kind, "sc_send"));
    int64_t before = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(x.f.store, &before, NULL, &err), MV_OK, &err);
    int64_t at = x.f.now + 60000;
    json_t *m = NULL;
    CHECK_CODE(send_at(&x, json_integer(at), NULL, &m, &err), MV_OK, &err);
    REQUIRE(m);
    const char *id = mv_json_str(m, "id");
    CHECK_STR(mv_json_str(m, "actionState"), "scheduled");
    CHECK_INT(json_integer_value(json_object_get(m, "sendAt")), at);
    /* receivers: no list, no count, 404, no press; no change-log row yet */
    CHECK_INT(count_of(&x, "bob"), 0);
    CHECK_INT(count_of(&x, "carl"), 0);
    CHECK_INT(count_of(&x, "ana"), 0);
    CHECK_INT(listed(&x, "bob", false, false), 0);
    CHECK_INT(listed(&x, "carl", false, false), 0);
    CHECK_INT(listed(&x, "bob", true, false), 0);
    CHECK_INT(listed(&x, "carl", true, false), 0);
    CHECK_INT(listed(&x, "bob", false, true), 0);
    CHECK_INT(get_code(&x, "bob", id), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(get_code(&x, "carl", id), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(press(&x, "bob", id), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(press(&x, "ana", id), MV_ACTION_CONFLICT); /* not sent yet */
    CHECK_INT(created_changes(&x, before, id), 0);
    /* the sender: by id and in the scheduled list, not in the inbox */
    CHECK_INT(get_code(&x, "ana", id), MV_OK);
    CHECK_INT(listed(&x, "ana", true, false), 1);
    CHECK_INT(listed(&x, "ana", false, false), 0);
    x.f.now = at - 1;
    CHECK_INT(fire(&x).fired, 0);
    CHECK_INT(count_of(&x, "bob"), 0);
    x.f.now = at;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_INT(created_changes(&x, before, id), 1);
    CHECK_INT(count_of(&x, "bob"), 1);
    CHECK_INT(count_of(&x, "carl"), 1);
    CHECK_INT(count_of(&x, "ana"), 1);
    CHECK_INT(listed(&x, "bob", false, false), 1);
    CHECK_INT(listed(&x, "carl", false, false), 1);
    CHECK_INT(listed(&x, "ana", true, false), 0);
    CHECK_INT(get_code(&x, "bob", id), MV_OK);
    json_t *g = NULL;
    mv_user bob = user("bob");
    CHECK_CODE(mv_message_get(x.f.svc, id, &bob, &g, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(g, "actionState"), "active");
    CHECK_INT(json_integer_value(json_object_get(g, "sendAt")), at);
    json_decref(g);
    /* sent: cancel is too late */
    mv_user ana = user("ana");
    json_t *c = NULL;
    CHECK_CODE(mv_message_cancel(x.f.svc, id, &ana, &c, &err), MV_MESSAGE_ALREADY_SENT, &err);
    x.f.now += 100000;
    CHECK_INT(fire(&x).claimed, 0); /* fired once */
    json_decref(m);
    close_sc(&x);
}

STORE_TEST(cancel_before_send_at_hides_it_everywhere_and_its_timer_sends_nothing) {
    sc_fixture x;
    REQUIRE(open_sc(&x, kind, "sc_cancel"));
    mv_err err = {0};
    int64_t at = x.f.now + 60000;
    json_t *m = NULL;
    CHECK_CODE(send_at(&x, json_integer(at), NULL, &m, &err), MV_OK, &err);
    REQUIRE(m);
    const char *id = mv_json_str(m, "id");
    mv_user ana = user("ana"), bob = user("bob");
    json_t *c = NULL;
    /* a receiver or a stranger cannot cancel: 404 */
    CHECK_CODE(mv_message_cancel(x.f.svc, id, &bob, &c, &err), MV_MESSAGE_NOT_FOUND, &err);
    mv_user other = {.id = "ana", .tenant = "other"};
    CHECK_CODE(mv_message_cancel(x.f.svc, id, &other, &c, &err), MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(mv_message_cancel(x.f.svc, id, &ana, &c, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(c, "actionState"), "cancelled");
    json_decref(c);
    c = NULL;
    CHECK_CODE(mv_message_cancel(x.f.svc, id, &ana, &c, &err), MV_OK, &err); /* the same again */
    CHECK_STR(mv_json_str(c, "actionState"), "cancelled");
    json_decref(c);
    CHECK_INT(listed(&x, "ana", true, false), 0);
    CHECK_INT(listed(&x, "ana", false, false), 0);
    CHECK_INT(listed(&x, "ana", false, true), 0);
    CHECK_INT(listed(&x, "bob", false, true), 0);
    CHECK_INT(get_code(&x, "bob", id), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(press(&x, "ana", id), MV_MESSAGE_ARCHIVED);
    x.f.now = at + 1000;
    fire(&x);
    CHECK_INT(count_of(&x, "bob"), 0);
    CHECK_INT(listed(&x, "bob", false, false), 0);
    CHECK_INT(get_code(&x, "bob", id), MV_MESSAGE_NOT_FOUND);
    json_decref(m);
    close_sc(&x);
}

STORE_TEST(a_bad_send_at_is_refused_storing_nothing_and_an_idempotent_create_replays_it) {
    sc_fixture x;
    REQUIRE(open_sc(&x, kind, "sc_bad"));
    mv_err err = {0};
    json_t *m = NULL;
    json_t *bad[] = {json_integer(x.f.now), json_integer(x.f.now + MV_MAX_DELAY_MS + 1),
                     json_string("tomorrow"), json_real(1.5)};
    for (size_t i = 0; i < 4; i++) {
        err = (mv_err){0};
        CHECK_CODE(send_at(&x, bad[i], NULL, &m, &err), MV_INVALID_ARGUMENT, &err);
        CHECK(strstr(err.message, "sendAt") != NULL);
        json_decref(m);
        m = NULL;
    }
    CHECK_INT(listed(&x, "ana", true, false), 0);
    CHECK_INT(listed(&x, "ana", false, false), 0);
    int64_t at = x.f.now + 5000;
    json_t *again = NULL;
    CHECK_CODE(send_at(&x, json_integer(at), "sched-1", &m, &err), MV_OK, &err);
    CHECK_CODE(send_at(&x, json_integer(at), "sched-1", &again, &err), MV_OK, &err);
    REQUIRE(m && again);
    CHECK_STR(mv_json_str(again, "id"), mv_json_str(m, "id"));
    CHECK_STR(mv_json_str(again, "actionState"), "scheduled");
    CHECK_INT(json_integer_value(json_object_get(again, "sendAt")), at);
    CHECK_INT(listed(&x, "ana", true, false), 1);
    json_decref(m);
    json_decref(again);
    close_sc(&x);
}

static int outbox_rows(sc_fixture *x, const char *state) {
    mv_outbox_list_query q = {.state = state, .kind = "email", .limit = 100};
    json_t *rows = NULL;
    char *next = NULL;
    mv_err err = {0};
    if (mv_outbox_list(x->f.store, &q, &rows, &next, &err) != MV_OK) return -1;
    int n = (int)json_array_size(rows);
    json_decref(rows);
    free(next);
    return n;
}

STORE_TEST(its_email_goes_out_at_send_at_and_a_cancelled_ones_never) {
    smtp_sink *smtp = smtp_sink_start();
    REQUIRE(smtp);
    sc_fixture x;
    mv_service_options o = {.email = true};
    REQUIRE(open_sc_opts(&x, kind, "sc_email", &o));
    mv_err err = {0};
    json_t *map = json_pack("{s:s}", "bob", "bob@example.com");
    mv_directory *dir = NULL;
    REQUIRE(mv_directory_open_map(map, &dir, &err) == MV_OK);
    mv_email_config email = {.smtp = {.url = smtp_sink_url(smtp), .from = "noreply@example.com"},
                             .directory = dir};
    mv_outbox_config oc = {.email = &email, .clock = &x.f.clock};
    int64_t at = x.f.now + 60000;
    json_t *m = NULL, *gone = NULL, *c = NULL;
    CHECK_CODE(send_at(&x, json_integer(at), NULL, &m, &err), MV_OK, &err);
    CHECK_CODE(send_at(&x, json_integer(at + 60000), NULL, &gone, &err), MV_OK, &err);
    REQUIRE(m && gone);
    mv_user ana = user("ana");
    CHECK_CODE(mv_message_cancel(x.f.svc, mv_json_str(gone, "id"), &ana, &c, &err), MV_OK, &err);
    CHECK_INT(outbox_rows(&x, "pending"), 1);
    CHECK_INT(outbox_rows(&x, "skipped"), 1);
    int delivered = -1;
    CHECK_CODE(mv_outbox_run_due(x.f.store, &oc, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0); /* not before sendAt */
    x.f.now = at;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_CODE(mv_outbox_run_due(x.f.store, &oc, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    x.f.now = at + 120000;
    fire(&x);
    CHECK_CODE(mv_outbox_run_due(x.f.store, &oc, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    CHECK_INT(smtp_sink_accepted(smtp), 1);
    CHECK_INT(outbox_rows(&x, "skipped"), 1);
    json_decref(c);
    json_decref(m);
    json_decref(gone);
    mv_directory_close(dir);
    json_decref(map);
    close_sc(&x);
    smtp_sink_stop(smtp);
}

static const char *LATER_TEMPLATE =
    "{\"templateCd\": \"later\", \"receiverContent\": {\"title\": \"Later {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{toUser}}\"}, \"actions\": [],"
    " \"expiry\": {\"afterMs\": 1000}}";

STORE_TEST(expiry_counts_from_send_at_and_another_tenant_never_sees_it) {
    sc_fixture x;
    REQUIRE(open_sc(&x, kind, "sc_expiry"));
    mv_err err = {0};
    json_t *t = json_loads(LATER_TEMPLATE, 0, NULL);
    REQUIRE(mv_registry_register(x.f.registry, t, "<later>", &err) == MV_OK);
    json_decref(t);
    int64_t at = x.f.now + 60000;
    mv_user ana = user("ana");
    json_t *payload =
        json_pack("{s:s,s:s,s:I}", "name", "Boat", "toUser", "bob", "sendAt", (json_int_t)at);
    mv_create_request req = {.template_cd = "later", .user = &ana, .payload = payload};
    json_t *msgs = NULL;
    CHECK_CODE(mv_message_create(x.f.svc, &req, &msgs, NULL, &err), MV_OK, &err);
    json_decref(payload);
    json_t *m = json_array_get(msgs, 0);
    REQUIRE(m);
    const char *id = mv_json_str(m, "id");
    CHECK_INT(json_integer_value(json_object_get(m, "expiresAt")), at + 1000);
    /* another tenant: not its sender, not listed, not cancellable */
    mv_user other = {.id = "ana", .tenant = "other"};
    json_t *g = NULL;
    CHECK_CODE(mv_message_get(x.f.svc, id, &other, &g, &err), MV_MESSAGE_NOT_FOUND, &err);
    mv_list_request lr = {.user = &other, .scheduled = true};
    json_t *page = NULL;
    char *cursor = NULL;
    CHECK_CODE(mv_message_list(x.f.svc, &lr, &page, &cursor, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page), 0);
    json_decref(page);
    free(cursor);
    x.f.now = at;
    CHECK_INT(fire(&x).fired, 1);
    mv_user bob = user("bob");
    x.f.now = at + 999;
    fire(&x);
    CHECK_CODE(mv_message_get(x.f.svc, id, &bob, &g, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(g, "actionState"), "active");
    json_decref(g);
    x.f.now = at + 1000;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_CODE(mv_message_get(x.f.svc, id, &bob, &g, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(g, "actionState"), "archived");
    CHECK_STR(mv_json_str(g, "archivedBy"), MV_EXPIRY_PRINCIPAL);
    json_decref(g);
    json_decref(msgs);
    close_sc(&x);
}

static const char *NUDGE_TEMPLATE =
    "{\"templateCd\": \"nudge\", \"receiverContent\": {\"title\": \"Nudge {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{toUser}}\"}, \"actions\": [],"
    " \"reminders\": [{\"afterMs\": 1000, \"title\": \"Still {{name}}\"}]}";

/* Reminders count from the send, not from the create: nothing is due a second after the create,
 * the reminder is due a second after sendAt. */
STORE_TEST(reminders_count_from_send_at) {
    sc_fixture x;
    REQUIRE(open_sc(&x, kind, "sc_remind"));
    mv_err err = {0};
    json_t *t = json_loads(NUDGE_TEMPLATE, 0, NULL);
    REQUIRE(mv_registry_register(x.f.registry, t, "<nudge>", &err) == MV_OK);
    json_decref(t);
    int64_t start = x.f.now, at = start + 60000;
    mv_user ana = user("ana");
    json_t *payload =
        json_pack("{s:s,s:s,s:I}", "name", "Boat", "toUser", "bob", "sendAt", (json_int_t)at);
    mv_create_request req = {.template_cd = "nudge", .user = &ana, .payload = payload};
    json_t *msgs = NULL;
    CHECK_CODE(mv_message_create(x.f.svc, &req, &msgs, NULL, &err), MV_OK, &err);
    json_decref(payload);
    const char *id = mv_json_str(json_array_get(msgs, 0), "id");
    REQUIRE(id);
    x.f.now = start + 1000;
    CHECK_INT(fire(&x).fired, 0); /* no reminder counted from the create */
    x.f.now = at;
    CHECK_INT(fire(&x).fired, 1); /* the send */
    x.f.now = at + 999;
    CHECK_INT(fire(&x).fired, 0);
    x.f.now = at + 1000;
    CHECK_INT(fire(&x).fired, 1); /* the reminder */
    mv_user bob = user("bob");
    json_t *g = NULL;
    CHECK_CODE(mv_message_get(x.f.svc, id, &bob, &g, &err), MV_OK, &err);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(g, "viewer"), "remindedAt")),
              at + 1000);
    json_decref(g);
    json_decref(msgs);
    close_sc(&x);
}

int main(void) {
    return RUN_TESTS(
        reminders_count_from_send_at,
        a_scheduled_message_is_its_senders_only_until_its_timer_sends_it_with_a_created_row,
        cancel_before_send_at_hides_it_everywhere_and_its_timer_sends_nothing,
        a_bad_send_at_is_refused_storing_nothing_and_an_idempotent_create_replays_it,
        its_email_goes_out_at_send_at_and_a_cancelled_ones_never,
        expiry_counts_from_send_at_and_another_tenant_never_sees_it);
}
