/* reminders_test.c — reminders and escalation (message/reminders.c, escalation.c) on both stores,
 * with a manual clock: a reminder marks each unread receiver (viewer.remindedAt) and logs a
 * `reminded` change for that viewer alone, never for readers or the sender, each reminder once;
 * role messages remind their unread viewers; an archived message is neither reminded nor
 * escalated; an escalation adds its roles to toRoles so their members see, count and act on the
 * message, with escalatedAt set, a `created` change, and the old receivers' marks kept in the
 * counts; bad "reminders" and "escalation" keys keep a template from loading. */
#include "durable/timer.h"
#include "message/fixture.h"
#include "message/timers.h"
#include "missive/inbox.h"

static const char *TIME_TEMPLATES[] = {
    "{\"templateCd\": \"ask\", \"receiverContent\": {\"title\": \"Ask {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{toUser}}\"},"
    " \"actions\": [{\"actionCd\": \"ok\", \"name\": \"OK\", \"variant\": \"success\","
    " \"receiver\": true}],"
    " \"reminders\": [{\"afterMs\": 1000, \"title\": \"Reminder: {{name}}\"},"
    "                 {\"afterMs\": 5000, \"title\": \"Again: {{name}}\"}],"
    " \"escalation\": [{\"afterMs\": 10000, \"toRoles\": [\"managers\"]}]}",
    "{\"templateCd\": \"team\", \"receiverContent\": {\"title\": \"Team {{name}}\"},"
    " \"prepare\": {\"toRoles\": [\"ops\"]},"
    " \"actions\": [{\"actionCd\": \"ok\", \"name\": \"OK\", \"variant\": \"success\","
    " \"receiver\": true}],"
    " \"reminders\": [{\"afterMs\": 1000, \"title\": \"Reminder: {{name}}\"}]}",
};

static const char *MANAGERS[] = {"managers"};

typedef struct {
    fixture f;
    mv__timer_engine *e;
} time_fixture;

static bool open_time(time_fixture *x, const char *kind, const char *name) {
    memset(x, 0, sizeof *x);
    if (!fixture_open(&x->f, kind, name)) return false;
    mv_err err = {0};
    for (size_t i = 0; i < sizeof TIME_TEMPLATES / sizeof *TIME_TEMPLATES; i++) {
        json_t *t = json_loads(TIME_TEMPLATES[i], 0, NULL);
        mv_code rc = mv_registry_register(x->f.registry, t, "<time>", &err);
        json_decref(t);
        if (rc != MV_OK) {
            fprintf(stderr, "template: %s\n", err.message);
            return false;
        }
    }
    mv__timer_engine_options o = {.clock = &x->f.clock, .lease_ms = 10000};
    return mv__timer_engine_new(x->f.store, &o, &x->e, &err) == MV_OK &&
           mv__service_register_timers(x->f.svc, x->e, &err) == MV_OK;
}

static void close_time(time_fixture *x) {
    mv__timer_engine_free(x->e);
    fixture_close(&x->f);
}

static char *create(time_fixture *x, const char *tpl) {
    mv_user u = {.id = "ana"};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Boat", "toUser", "bob");
    mv_create_request req = {.template_cd = tpl, .user = &u, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_create(x->f.svc, &req, &msgs, NULL, &err);
    json_decref(payload);
    if (rc != MV_OK) fprintf(stderr, "create: %s\n", err.message);
    char *id = rc == MV_OK ? strdup(first_id(msgs)) : NULL;
    json_decref(msgs);
    return id;
}

static int fire(time_fixture *x) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(x->e, &p, &err) != MV_OK) fprintf(stderr, "run: %s\n", err.message);
    return p.fired;
}

/* The message as user sees it (NULL: not visible). */
static json_t *get_as(time_fixture *x, const char *id, const mv_user *u) {
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_get(x->f.svc, id, u, &m, &err);
    return m;
}

static int64_t reminded_at(time_fixture *x, const char *id, const mv_user *u) {
    json_t *m = get_as(x, id, u);
    const json_t *v = json_object_get(json_object_get(m, "viewer"), "remindedAt");
    int64_t at = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(m);
    return at;
}

/* How many changes of kind for message id (and viewer, when not NULL) came after `after`. */
static int changes_of(time_fixture *x, int64_t after, mv_change_kind kind, const char *id,
                      const char *viewer) {
    mv_change ch[64];
    int n = 0, hits = 0;
    mv_err err = {0};
    if (mv_changes_read(x->f.store, after, ch, 64, &n, &err) != MV_OK) return -1;
    for (int i = 0; i < n; i++)
        if (ch[i].kind == kind && strcmp(ch[i].message_id, id) == 0 &&
            (!viewer || strcmp(ch[i].viewer_id, viewer) == 0))
            hits++;
    return hits;
}

static int64_t latest(time_fixture *x) {
    int64_t l = 0;
    mv_err err = {0};
    mv_changes_latest(x->f.store, &l, NULL, &err);
    return l;
}

STORE_TEST(a_reminder_marks_the_unread_receiver_and_tells_only_that_viewer_once) {
    time_fixture x;
    REQUIRE(open_time(&x, kind, "rem_direct"));
    mv_user bob = {.id = "bob"}, ana = {.id = "ana"};
    char *id = create(&x, "ask");
    REQUIRE(id);
    CHECK_INT(reminded_at(&x, id, &bob), -1);
    int64_t before = latest(&x);
    x.f.now += 999;
    CHECK_INT(fire(&x), 0);
    x.f.now += 1;
    int64_t first = x.f.now;
    CHECK_INT(fire(&x), 1);
    CHECK_INT(reminded_at(&x, id, &bob), first);
    CHECK_INT(reminded_at(&x, id, &ana), -1); /* the sender is not reminded */
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, id, "bob"), 1);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, id, NULL), 1);
    x.f.now += 1000; /* nothing due: each reminder fires once */
    CHECK_INT(fire(&x), 0);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, id, NULL), 1);
    x.f.now += 3000; /* the second reminder */
    CHECK_INT(fire(&x), 1);
    CHECK_INT(reminded_at(&x, id, &bob), x.f.now);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, id, "bob"), 2);
    free(id);
    close_time(&x);
}

STORE_TEST(a_reader_is_not_reminded_and_an_archived_message_is_neither_reminded_nor_escalated) {
    time_fixture x;
    REQUIRE(open_time(&x, kind, "rem_read"));
    mv_user bob = {.id = "bob"}, mia = {.id = "mia", .roles = MANAGERS, .nroles = 1};
    char *read = create(&x, "ask"), *done = create(&x, "ask");
    REQUIRE(read && done);
    mv_err err = {0};
    json_t *m = NULL;
    CHECK_CODE(mv_message_mark(x.f.svc, read, &bob, MV_MARK_READ, &m, &err), MV_OK, &err);
    json_decref(m);
    json_t *result = NULL;
    mv_action_request press = {.message_id = done, .action_cd = "ok", .user = &bob};
    CHECK_CODE(mv_action_handle(x.f.svc, &press, &result, &err), MV_OK, &err);
    json_decref(result);
    int64_t before = latest(&x);
    x.f.now += 20000; /* every reminder and the escalation of both */
    CHECK_INT(fire(&x), 6);
    CHECK_INT(reminded_at(&x, read, &bob), -1);
    CHECK_INT(reminded_at(&x, done, &bob), -1);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, read, NULL), 0);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, done, NULL), 0);
    json_t *d = get_as(&x, done, NULL);
    CHECK(json_is_null(json_object_get(d, "escalatedAt")));
    CHECK_INT(json_array_size(json_object_get(d, "toRoles")), 0);
    json_decref(d);
    json_t *seen = get_as(&x, done, &mia);
    CHECK(seen == NULL); /* never escalated: the manager does not see it */
    json_decref(seen);
    /* the read one was active: escalated, and bob's read mark still counts after the move */
    mv_inbox_counts c = {0};
    CHECK_CODE(mv_message_counts(x.f.svc, &bob, NULL, false, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    CHECK_INT(c.unread, 0);
    free(read);
    free(done);
    close_time(&x);
}

STORE_TEST(a_role_message_reminds_its_unread_viewers_but_not_its_readers_or_sender) {
    time_fixture x;
    REQUIRE(open_time(&x, kind, "rem_roles"));
    const char *ops[] = {"ops"};
    mv_user carl = {.id = "carl", .roles = ops, .nroles = 1},
            dan = {.id = "dan", .roles = ops, .nroles = 1}, ana = {.id = "ana"};
    char *id = create(&x, "team");
    REQUIRE(id);
    mv_err err = {0};
    json_t *m = NULL;
    CHECK_CODE(mv_message_mark(x.f.svc, id, &carl, MV_MARK_SEEN, &m, &err), MV_OK, &err);
    json_decref(m);
    m = NULL;
    CHECK_CODE(mv_message_mark(x.f.svc, id, &dan, MV_MARK_READ, &m, &err), MV_OK, &err);
    json_decref(m);
    m = NULL;
    CHECK_CODE(mv_message_mark(x.f.svc, id, &ana, MV_MARK_SEEN, &m, &err), MV_OK, &err);
    json_decref(m);
    int64_t before = latest(&x);
    x.f.now += 1000;
    CHECK_INT(fire(&x), 1);
    CHECK_INT(reminded_at(&x, id, &carl), x.f.now);
    CHECK_INT(reminded_at(&x, id, &dan), -1);
    CHECK_INT(reminded_at(&x, id, &ana), -1);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, id, "carl"), 1);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_REMINDED, id, NULL), 1);
    free(id);
    close_time(&x);
}

STORE_TEST(an_escalation_adds_its_roles_so_their_members_see_count_and_act_on_the_message) {
    time_fixture x;
    REQUIRE(open_time(&x, kind, "esc_roles"));
    mv_user mia = {.id = "mia", .roles = MANAGERS, .nroles = 1};
    char *id = create(&x, "ask");
    REQUIRE(id);
    json_t *m = get_as(&x, id, &mia);
    CHECK(m == NULL);
    json_decref(m);
    mv_err err = {0};
    mv_inbox_counts c = {0};
    CHECK_CODE(mv_message_counts(x.f.svc, &mia, NULL, false, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 0);
    x.f.now += 9999;
    CHECK_INT(fire(&x), 2); /* the two reminders */
    int64_t before = latest(&x);
    x.f.now += 1;
    CHECK_INT(fire(&x), 1);
    m = get_as(&x, id, &mia);
    REQUIRE(m != NULL);
    CHECK_INT(json_integer_value(json_object_get(m, "escalatedAt")), x.f.now);
    CHECK_STR(mv_json_str(m, "toUser"), "bob");
    CHECK_STR(json_string_value(json_array_get(json_object_get(m, "toRoles"), 0)), "managers");
    json_decref(m);
    CHECK_INT(changes_of(&x, before, MV_CHANGE_CREATED, id, NULL), 1);
    CHECK_CODE(mv_message_counts(x.f.svc, &mia, NULL, false, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    CHECK_INT(c.unread, 1);
    mv_list_request r = {.user = &mia};
    json_t *page = NULL;
    char *cursor = NULL;
    CHECK_CODE(mv_message_list(x.f.svc, &r, &page, &cursor, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page), 1);
    json_decref(page);
    free(cursor);
    json_t *result = NULL;
    mv_action_request press = {.message_id = id, .action_cd = "ok", .user = &mia};
    CHECK_CODE(mv_action_handle(x.f.svc, &press, &result, &err), MV_OK, &err);
    json_decref(result);
    CHECK_CODE(mv_message_counts(x.f.svc, &mia, NULL, false, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 0);
    free(id);
    close_time(&x);
}

TEST(bad_reminders_and_escalation_keep_a_template_from_loading_naming_the_key) {
    const char *bad[] = {
        "{\"templateCd\": \"x\", \"actions\": [], \"reminders\": {\"afterMs\": 5}}",
        "{\"templateCd\": \"x\", \"actions\": [], \"reminders\": [{\"afterMs\": 0, \"title\": "
        "\"t\"}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"reminders\": [{\"afterMs\": 5}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"reminders\": [{\"afterMs\": 5, \"title\": "
        "\"t\", \"x\": 1}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"reminders\": [{\"afterMs\": 5, \"title\": "
        "\"{{#a}}\"}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"reminders\": [{\"afterMs\": 1, \"title\": "
        "\"a\"}, {\"afterMs\": "
        "2, \"title\": \"a\"}, {\"afterMs\": 3, \"title\": \"a\"}, {\"afterMs\": 4, \"title\": "
        "\"a\"}, {\"afterMs\": 5, \"title\": \"a\"}, {\"afterMs\": 6, \"title\": \"a\"}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"escalation\": [{\"afterMs\": 5, \"toRoles\": "
        "[]}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"escalation\": [{\"afterMs\": 5, \"toRoles\": "
        "[\"\"]}]}",
        "{\"templateCd\": \"x\", \"actions\": [], \"escalation\": [{\"afterMs\": 31536000001, "
        "\"toRoles\": "
        "[\"m\"]}]}",
    };
    const char *words[] = {
        "reminders must be an array",     "reminders[0].afterMs",  "reminders[0].title",
        "reminders[0] must be an object", "reminders[0].title",    "at most 5",
        "escalation[0].toRoles",          "escalation[0].toRoles", "escalation[0].afterMs"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        REQUIRE(j != NULL);
        mv_template *t = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_template_parse(j, "x.json", &t, &err), MV_INVALID_TEMPLATE, &err);
        if (!strstr(err.message, words[i])) fprintf(stderr, "%zu: %s\n", i, err.message);
        CHECK(strstr(err.message, words[i]) != NULL);
        CHECK(strstr(err.message, "x.json") != NULL);
        json_decref(j);
    }
}

int main(void) {
    return RUN_TESTS(
        a_reminder_marks_the_unread_receiver_and_tells_only_that_viewer_once,
        a_reader_is_not_reminded_and_an_archived_message_is_neither_reminded_nor_escalated,
        a_role_message_reminds_its_unread_viewers_but_not_its_readers_or_sender,
        an_escalation_adds_its_roles_so_their_members_see_count_and_act_on_the_message,
        bad_reminders_and_escalation_keep_a_template_from_loading_naming_the_key);
}
