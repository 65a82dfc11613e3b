/* snooze_test.c — per-viewer snooze (message/snooze.c) on both stores, with a manual clock: a
 * snoozed message leaves that viewer's list and counts (snoozed=true lists it) and nobody else's,
 * and its `snooze` timer returns it at `until` with a viewer change-log row for that viewer only;
 * unsnooze returns it at once and its timer fires nothing; snoozing again moves `until`; a bad
 * `until`, the sender, a stranger and another tenant are refused, changing nothing; snoozes and
 * marks racing on real threads leave the maintained counts equal to counting the messages. */
#include <pthread.h>
#include <stdlib.h>

#include "durable/timer.h"
#include "message/fixture.h"
#include "message/timers.h"
#include "missive/inbox.h"

typedef struct {
    fixture f;
    mv__timer_engine *e;
} sz_fixture;

static bool open_sz(sz_fixture *x, const char *kind, const char *name) {
    memset(x, 0, sizeof *x);
    if (!fixture_open(&x->f, kind, name)) return false;
    mv_err err = {0};
    mv__timer_engine_options o = {.clock = &x->f.clock, .lease_ms = 10000};
    return mv__timer_engine_new(x->f.store, &o, &x->e, &err) == MV_OK &&
           mv__service_register_timers(x->f.svc, x->e, &err) == MV_OK;
}

static void close_sz(sz_fixture *x) {
    mv__timer_engine_free(x->e);
    fixture_close(&x->f);
}

/* ana sends to bob and to the role "team" (carl and dana); returns the message's id (static). */
static const char *send(sz_fixture *x, const char *tenant) {
    static char id[25];
    mv_user ana = {.id = "ana", .tenant = tenant};
    json_t *payload =
        json_pack("{s:s,s:s,s:[s]}", "name", "Boat", "toUser", "bob", "toRoles", "team");
    mv_create_request req = {.template_cd = "svc-test", .user = &ana, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    id[0] = 0;
    if (mv_message_create(x->f.svc, &req, &msgs, NULL, &err) == MV_OK)
        mv_strlcpy(id, mv_json_str(json_array_get(msgs, 0), "id"), sizeof id);
    else
        fprintf(stderr, "create: %s\n", err.message);
    json_decref(payload);
    json_decref(msgs);
    return id;
}

static const char *TEAM[] = {"team"};

static mv_user user(const char *id) {
    bool member = strcmp(id, "carl") == 0 || strcmp(id, "dana") == 0;
    return (mv_user){.id = id, .roles = member ? TEAM : NULL, .nroles = member ? 1 : 0};
}

static int64_t count_of(sz_fixture *x, const char *who, mv_flag snoozed) {
    mv_user u = user(who);
    mv_inbox_filter f = {.snoozed = snoozed};
    mv_inbox_counts c = {-1, -1, -1};
    mv_err err = {0};
    if (mv_message_counts(x->f.svc, &u, snoozed == MV_FLAG_UNSET ? NULL : &f, false, &c, &err) !=
        MV_OK)
        fprintf(stderr, "count: %s\n", err.message);
    return c.count;
}

/* How many of who's listed messages (with the snoozed filter) are id. */
static int listed(sz_fixture *x, const char *who, mv_flag snoozed, const char *id) {
    mv_user u = user(who);
    mv_inbox_filter f = {.snoozed = snoozed};
    mv_list_request r = {.user = &u, .filter = &f};
    json_t *page = NULL;
    char *cursor = NULL;
    mv_err err = {0};
    if (mv_message_list(x->f.svc, &r, &page, &cursor, &err) != MV_OK) return -1;
    free(cursor);
    int n = 0;
    size_t i;
    json_t *m;
    json_array_foreach(page, i, m) n += strcmp(mv_json_str(m, "id"), id) == 0;
    json_decref(page);
    return n;
}

static json_t *viewer_of(sz_fixture *x, const char *who, const char *id) {
    mv_user u = user(who);
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_get(x->f.svc, id, &u, &m, &err);
    json_t *v = json_incref(json_object_get(m, "viewer"));
    json_decref(m);
    return v;
}

static mv__timer_pass fire(sz_fixture *x) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(x->e, &p, &err) != MV_OK) fprintf(stderr, "run: %s\n", err.message);
    return p;
}

/* Viewer changes of message id after change `after`, for viewer who. */
static int viewer_changes(sz_fixture *x, int64_t after, const char *id, const char *who) {
    mv_change ch[32];
    int n = 0, hits = 0;
    mv_err err = {0};
    if (mv_changes_read(x->f.store, after, ch, 32, &n, &err) != MV_OK) return -1;
    for (int i = 0; i < n; i++)
        hits += ch[i].kind == MV_CHANGE_VIEWER && strcmp(ch[i].message_id, id) == 0 &&
                strcmp(ch[i].viewer_id, who) == 0;
    return hits;
}

STORE_TEST(a_snoozed_message_leaves_only_that_viewers_inbox_and_its_timer_returns_it_at_until) {
    sz_fixture x;
    REQUIRE(open_sz(&x, kind, "sz_return"));
    const char *id = send(&x, NULL);
    REQUIRE(id[0]);
    CHECK_INT(count_of(&x, "carl", MV_FLAG_UNSET), 1);
    CHECK_INT(count_of(&x, "dana", MV_FLAG_UNSET), 1);
    int64_t before = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(x.f.store, &before, NULL, &err), MV_OK, &err);
    mv_user carl = user("carl");
    json_t *m = NULL;
    int64_t until = x.f.now + 3600000;
    CHECK_CODE(mv_message_snooze(x.f.svc, id, &carl, until, &m, &err), MV_OK, &err);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "viewer"), "snoozedUntil")),
              until);
    json_decref(m);
    /* carl: out of the inbox and the counts (tallied and filtered), listed under snoozed=true */
    CHECK_INT(count_of(&x, "carl", MV_FLAG_UNSET), 0);
    CHECK_INT(count_of(&x, "carl", MV_FLAG_FALSE), 0);
    CHECK_INT(count_of(&x, "carl", MV_FLAG_TRUE), 1);
    CHECK_INT(listed(&x, "carl", MV_FLAG_UNSET, id), 0);
    CHECK_INT(listed(&x, "carl", MV_FLAG_TRUE, id), 1);
    /* dana and bob: unchanged */
    CHECK_INT(count_of(&x, "dana", MV_FLAG_UNSET), 1);
    CHECK_INT(listed(&x, "dana", MV_FLAG_UNSET, id), 1);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 1);
    json_t *v = viewer_of(&x, "dana", id);
    CHECK(json_is_null(json_object_get(v, "snoozedUntil")));
    json_decref(v);
    CHECK_INT(viewer_changes(&x, before, id, "carl"), 1);
    CHECK_CODE(mv_changes_latest(x.f.store, &before, NULL, &err), MV_OK, &err);
    x.f.now = until - 1;
    CHECK_INT(fire(&x).claimed, 0);
    CHECK_INT(count_of(&x, "carl", MV_FLAG_UNSET), 0);
    x.f.now = until;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_INT(count_of(&x, "carl", MV_FLAG_UNSET), 1);
    CHECK_INT(count_of(&x, "carl", MV_FLAG_TRUE), 0);
    CHECK_INT(listed(&x, "carl", MV_FLAG_UNSET, id), 1);
    v = viewer_of(&x, "carl", id);
    CHECK(json_is_null(json_object_get(v, "snoozedUntil")));
    json_decref(v);
    CHECK_INT(viewer_changes(&x, before, id, "carl"), 1);
    CHECK_INT(viewer_changes(&x, before, id, "dana"), 0);
    CHECK_INT(count_of(&x, "dana", MV_FLAG_UNSET), 1);
    x.f.now += 100000; /* fired once */
    CHECK_INT(fire(&x).claimed, 0);
    close_sz(&x);
}

STORE_TEST(unsnooze_returns_it_at_once_and_snoozing_again_moves_until) {
    sz_fixture x;
    REQUIRE(open_sz(&x, kind, "sz_unsnooze"));
    const char *id = send(&x, NULL);
    REQUIRE(id[0]);
    mv_user bob = user("bob");
    mv_err err = {0};
    CHECK_CODE(mv_message_snooze(x.f.svc, id, &bob, x.f.now + 1000, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_message_snooze(x.f.svc, id, &bob, x.f.now + 5000, NULL, &err), MV_OK, &err);
    x.f.now += 1000; /* the first until passed: the snooze was moved */
    CHECK_INT(fire(&x).claimed, 0);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 0);
    json_t *m = NULL;
    CHECK_CODE(mv_message_unsnooze(x.f.svc, id, &bob, &m, &err), MV_OK, &err);
    CHECK(json_is_null(json_object_get(json_object_get(m, "viewer"), "snoozedUntil")));
    json_decref(m);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 1);
    CHECK_CODE(mv_message_unsnooze(x.f.svc, id, &bob, NULL, &err), MV_OK, &err); /* a no-op */
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 1);
    x.f.now += 10000; /* the cancelled timer fires nothing */
    CHECK_INT(fire(&x).claimed, 0);
    /* a dismissed and snoozed message counts once, and returns still dismissed */
    CHECK_CODE(mv_message_mark(x.f.svc, id, &bob, MV_MARK_READ, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_message_snooze(x.f.svc, id, &bob, x.f.now + 1000, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_message_mark(x.f.svc, id, &bob, MV_MARK_DISMISS, NULL, &err), MV_OK, &err);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 0);
    x.f.now += 1000;
    CHECK_INT(fire(&x).fired, 1);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 0);
    CHECK_CODE(mv_message_mark(x.f.svc, id, &bob, MV_MARK_UNDISMISS, NULL, &err), MV_OK, &err);
    mv_inbox_counts c;
    CHECK_CODE(mv_message_counts(x.f.svc, &bob, NULL, false, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    CHECK_INT(c.unread, 0);
    close_sz(&x);
}

STORE_TEST(a_bad_until_the_sender_a_stranger_and_another_tenant_are_refused_changing_nothing) {
    sz_fixture x;
    REQUIRE(open_sz(&x, kind, "sz_refuse"));
    const char *id = send(&x, NULL);
    REQUIRE(id[0]);
    char own[25];
    mv_strlcpy(own, id, sizeof own);
    mv_user bob = user("bob"), ana = user("ana"), eve = user("eve");
    mv_user bob_acme = {.id = "bob", .tenant = "acme"};
    mv_err err = {0};
    int64_t bad[] = {x.f.now, x.f.now - 1, x.f.now + MV_MAX_DELAY_MS + 1, 0};
    for (int i = 0; i < 4; i++) {
        CHECK_CODE(mv_message_snooze(x.f.svc, own, &bob, bad[i], NULL, &err), MV_INVALID_ARGUMENT,
                   &err);
        CHECK(strstr(err.message, "until") != NULL);
    }
    CHECK_CODE(mv_message_snooze(x.f.svc, own, &ana, x.f.now + 1000, NULL, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(mv_message_snooze(x.f.svc, own, &eve, x.f.now + 1000, NULL, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(mv_message_snooze(x.f.svc, own, &bob_acme, x.f.now + 1000, NULL, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(mv_message_unsnooze(x.f.svc, own, &eve, NULL, &err), MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(
        mv_message_snooze(x.f.svc, "000000000000000000000000", &bob, x.f.now + 1000, NULL, &err),
        MV_MESSAGE_NOT_FOUND, &err);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_UNSET), 1);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_TRUE), 0);
    CHECK_INT(count_of(&x, "ana", MV_FLAG_UNSET), 1);
    json_t *page = NULL;
    mv_timers_filter all = {0};
    CHECK_CODE(mv_timers_list(x.f.store, &all, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(page, "timers")), 0);
    json_decref(page);
    close_sz(&x);
}

#define RACE_N 12

typedef struct {
    sz_fixture *x;
    char (*ids)[25];
    bool snoozer;
    int failures;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    mv_user bob = user("bob");
    mv_mark marks[] = {MV_MARK_READ, MV_MARK_DISMISS, MV_MARK_UNREAD, MV_MARK_UNDISMISS};
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < RACE_N; i++) {
            mv_err err = {0};
            if (r->snoozer) {
                r->failures += mv_message_snooze(r->x->f.svc, r->ids[i], &bob,
                                                 r->x->f.now + 1000 + round, NULL, &err) != MV_OK;
                if (round < 2)
                    r->failures +=
                        mv_message_unsnooze(r->x->f.svc, r->ids[i], &bob, NULL, &err) != MV_OK;
            } else {
                for (int k = 0; k < 4; k++)
                    r->failures += mv_message_mark(r->x->f.svc, r->ids[i], &bob, marks[k], NULL,
                                                   &err) != MV_OK;
            }
        }
    return NULL;
}

/* The maintained (tallied) count and counting the messages (an explicit filter) agree. */
static int64_t agreed_count(sz_fixture *x, const char *who) {
    mv_user u = user(who);
    mv_inbox_filter explicit_default = {.dismissed = MV_FLAG_FALSE, .snoozed = MV_FLAG_FALSE};
    mv_inbox_counts c = {-1, -1, -1}, q = {-2, -2, -2};
    mv_err err = {0};
    CHECK_CODE(mv_message_counts(x->f.svc, &u, NULL, false, &c, &err), MV_OK, &err);
    CHECK_CODE(mv_message_counts(x->f.svc, &u, &explicit_default, false, &q, &err), MV_OK, &err);
    CHECK_INT(c.count, q.count);
    CHECK_INT(c.unseen, q.unseen);
    CHECK_INT(c.unread, q.unread);
    return c.count == q.count ? c.count : -1;
}

STORE_TEST(snoozes_and_marks_racing_on_threads_keep_the_counts_equal_to_the_messages) {
    sz_fixture x;
    REQUIRE(open_sz(&x, kind, "sz_race"));
    char ids[RACE_N][25];
    for (int i = 0; i < RACE_N; i++) {
        mv_strlcpy(ids[i], send(&x, NULL), sizeof ids[i]);
        REQUIRE(ids[i][0]);
    }
    racer r[2] = {{&x, ids, true, 0}, {&x, ids, false, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&t[i], NULL, race, &r[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(r[0].failures + r[1].failures, 0);
    CHECK_INT(agreed_count(&x, "bob"), 0); /* every message ends snoozed */
    CHECK_INT(count_of(&x, "bob", MV_FLAG_TRUE), RACE_N);
    CHECK_INT(agreed_count(&x, "carl"), RACE_N); /* the role's members are untouched */
    x.f.now += 1002;
    CHECK_INT(fire(&x).fired, RACE_N);
    CHECK_INT(agreed_count(&x, "bob"), RACE_N);
    CHECK_INT(count_of(&x, "bob", MV_FLAG_TRUE), 0);
    close_sz(&x);
}

int main(void) {
    return RUN_TESTS(
        a_snoozed_message_leaves_only_that_viewers_inbox_and_its_timer_returns_it_at_until,
        unsnooze_returns_it_at_once_and_snoozing_again_moves_until,
        a_bad_until_the_sender_a_stranger_and_another_tenant_are_refused_changing_nothing,
        snoozes_and_marks_racing_on_threads_keep_the_counts_equal_to_the_messages);
}
