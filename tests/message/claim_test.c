/* claim_test.c — handleAction exactly once: claims, conflicts, retries with the same attempt id,
 * lease takeover, archive + sender notification in one transaction (real threads). */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fixture.h"

typedef struct {
    int calls;
    int fail_first; /* fail this many calls */
    int sleep_ms;
    char attempts[8][64];
    fixture *f;
    int reset_to_active; /* the handler steals the claim back (conflict test) */
} handler_state;

static const char SQL_STEAL[] =
    "UPDATE messages SET action_state = 'active', action_attempt_id = NULL WHERE id = ?";

static mv_code steal_tx(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_STEAL, NULL, err, "s", (const char *)ctx);
}

static mv_code counting_handler(void *ctx, const mv_action_input *in, json_t **result,
                                mv_err *err) {
    handler_state *h = ctx;
    int n = __atomic_fetch_add(&h->calls, 1, __ATOMIC_SEQ_CST);
    if (n < 8) mv_strlcpy(h->attempts[n], in->attempt_id, 64);
    if (h->sleep_ms) mv_sleep_ms(h->sleep_ms);
    if (h->reset_to_active)
        mv_store_write(h->f->store, steal_tx, (void *)mv_json_str(in->message, "id"), NULL);
    if (n < h->fail_first) return mv_err_set(err, MV_UPSTREAM_FAILED, "handler failed");
    *result = json_pack("{s:s}", "approved", in->attempt_id);
    return MV_OK;
}

static mv_code press(fixture *f, const char *id, const char *action, const char *user,
                     json_t **result, mv_err *err) {
    mv_user u = {.id = user};
    mv_action_request req = {.message_id = id, .action_cd = action, .user = &u};
    json_t *r = NULL;
    mv_code rc = mv_action_handle(f->svc, &req, &r, err);
    if (result)
        *result = r;
    else
        json_decref(r);
    return rc;
}

STORE_TEST(approve_archives_and_notifies_the_sender_in_one_go) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "approve.db"));
    handler_state h = {0};
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    const char *id = first_id(msgs);
    json_t *result = NULL;
    mv_err err = {0};
    CHECK_CODE(press(&f, id, "approve", "u2", &result, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(result, "approved"), h.attempts[0]);
    json_t *m = NULL;
    CHECK_CODE(mv_message_get(f.svc, id, NULL, &m, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(m, "actionState"), "archived");
    CHECK_STR(mv_json_str(m, "archivedBy"), "u2");
    CHECK_STR(mv_json_str(m, "actionCd"), "approve");
    CHECK_STR(mv_json_str(m, "actionAttemptId"), h.attempts[0]);
    CHECK(json_integer_value(json_object_get(m, "archivedAt")) == f.now);
    /* the sender's inbox holds the notification, rendered with payload and result */
    mv_user u1 = {.id = "u1"};
    mv_list_request lr = {.user = &u1};
    json_t *inbox = NULL;
    CHECK_CODE(mv_message_list(f.svc, &lr, &inbox, NULL, &err), MV_OK, &err);
    REQUIRE(json_array_size(inbox) == 1);
    json_t *n = json_array_get(inbox, 0);
    CHECK_STR(mv_json_str(n, "templateCd"), "__generic-notification__");
    CHECK_STR(mv_json_str(n, "toUser"), "u1");
    CHECK_STR(mv_json_str(json_object_get(n, "receiverContent"), "title"), "Approved Widget");
    CHECK(strstr(mv_json_str(json_object_get(n, "receiverContent"), "long"), h.attempts[0]) !=
          NULL);
    /* archived: acting again is 410 and the handler is not called */
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_MESSAGE_ARCHIVED, &err);
    CHECK_INT(h.calls, 1);
    json_t *acts = NULL;
    mv_user u2 = {.id = "u2"};
    CHECK_CODE(mv_message_actions(f.svc, id, MV_RECEIVER, &u2, false, &acts, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(acts, "actions")), 0);
    json_decref(acts);
    json_decref(inbox);
    json_decref(m);
    json_decref(result);
    json_decref(msgs);
    fixture_close(&f);
}

STORE_TEST(an_action_without_a_handler_records_who_archived_it) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "nohandler.db"));
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    const char *id = first_id(msgs);
    json_t *result = NULL, *m = NULL;
    mv_err err = {0};
    CHECK_CODE(press(&f, id, "reject", "u2", &result, &err), MV_OK, &err);
    CHECK_CODE(mv_message_get(f.svc, id, NULL, &m, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(m, "actionState"), "archived");
    CHECK_STR(mv_json_str(m, "archivedBy"), "u2"); /* the claim and the archive are one write */
    CHECK_STR(mv_json_str(m, "actionCd"), "reject");
    json_decref(m);
    json_decref(result);
    json_decref(msgs);
    fixture_close(&f);
}

STORE_TEST(rules_are_checked_before_claiming) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "rules.db"));
    handler_state h = {0};
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    const char *id = first_id(msgs);
    mv_err err = {0};
    CHECK_CODE(press(&f, id, "unknown-action", "u2", NULL, &err), MV_ACTION_NOT_FOUND, &err);
    CHECK_STR(err.message, "action \"unknown-action\" not found in template \"svc-test\"");
    /* a stranger cannot see the message at all: not found, not "not allowed" (no oracle) */
    CHECK_CODE(press(&f, id, "approve", "u3", NULL, &err), MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(press(&f, id, "approve", "u1", NULL, &err), MV_ACTION_NOT_ALLOWED, &err);
    CHECK_STR(err.message, "not allowed");
    CHECK_CODE(press(&f, id, "approve", " ", NULL, &err), MV_INVALID_USER, &err);
    CHECK_CODE(press(&f, "507f1f77bcf86cd799439011", "approve", "u2", NULL, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    mv_user u2 = {.id = "u2"};
    mv_action_request req = {
        .message_id = id, .template_cd = "foreign-template", .action_cd = "approve", .user = &u2};
    json_t *r = NULL;
    CHECK_CODE(mv_action_handle(f.svc, &req, &r, &err), MV_ACTION_TEMPLATE_MISMATCH, &err);
    CHECK_STR(
        err.message,
        "message template \"svc-test\" does not match requested template \"foreign-template\"");
    CHECK_INT(h.calls, 0);
    mv_registry_remove(f.registry, "svc-test");
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_TEMPLATE_NOT_FOUND, &err);
    json_decref(msgs);
    fixture_close(&f);
}

typedef struct {
    fixture *f;
    const char *id;
    const char *action;
    mv_code rc;
} presser;

static void *press_thread(void *arg) {
    presser *p = arg;
    mv_err err = {0};
    p->rc = press(p->f, p->id, p->action, "u2", NULL, &err);
    return NULL;
}

STORE_TEST(sixteen_threads_pressing_the_same_action_run_the_handler_once) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "press16.db"));
    handler_state h = {.sleep_ms = 50};
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    presser p[16];
    pthread_t th[16];
    for (int i = 0; i < 16; i++) {
        p[i] = (presser){&f, first_id(msgs), "approve", MV_OK};
        pthread_create(&th[i], NULL, press_thread, &p[i]);
    }
    int ok = 0, conflict = 0, archived = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        ok += p[i].rc == MV_OK;
        conflict += p[i].rc == MV_ACTION_CONFLICT;
        archived += p[i].rc == MV_MESSAGE_ARCHIVED;
    }
    CHECK_INT(h.calls, 1);
    CHECK_INT(ok, 1);
    CHECK_INT(conflict + archived, 15);
    CHECK_INT(fixture_rows(f.store, 'm'), 2); /* the message and one notification */
    json_decref(msgs);
    fixture_close(&f);
}

STORE_TEST(two_different_actions_raced_one_wins) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "race2.db"));
    handler_state h = {.sleep_ms = 30};
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_service_set_handler(f.svc, "svc-test", "reject", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    presser a = {&f, first_id(msgs), "approve", MV_OK}, b = {&f, first_id(msgs), "reject", MV_OK};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, press_thread, &a);
    pthread_create(&tb, NULL, press_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_INT((a.rc == MV_OK) + (b.rc == MV_OK), 1);
    CHECK((a.rc == MV_ACTION_CONFLICT || a.rc == MV_MESSAGE_ARCHIVED) ||
          (b.rc == MV_ACTION_CONFLICT || b.rc == MV_MESSAGE_ARCHIVED));
    CHECK_INT(h.calls, 1);
    json_decref(msgs);
    fixture_close(&f);
}

STORE_TEST(failing_handler_leaves_the_message_retryable_and_the_retry_reuses_the_attempt) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "retry.db"));
    handler_state h = {.fail_first = 1};
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    const char *id = first_id(msgs);
    mv_err err = {0};
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_ACTION_RETRYABLE, &err);
    CHECK_STR(err.attempt_id, h.attempts[0]);
    CHECK(strstr(err.message, "failed before commit and may be retried") != NULL);
    json_t *m;
    mv_message_get(f.svc, id, NULL, &m, &err);
    CHECK_STR(mv_json_str(m, "actionState"), "retryable");
    json_decref(m);
    /* a different action cannot claim a retryable message */
    CHECK_CODE(press(&f, id, "reject", "u2", NULL, &err), MV_ACTION_CONFLICT, &err);
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_OK, &err);
    CHECK_INT(h.calls, 2);
    CHECK_STR(h.attempts[1], h.attempts[0]);
    json_decref(msgs);
    fixture_close(&f);
}

static const char SQL_STUCK[] =
    "UPDATE messages SET action_state = 'processing', action_cd = 'approve', "
    "action_attempt_id = 'attempt-1', action_lease_expires_at = ? WHERE id = ?";

typedef struct {
    const char *id;
    int64_t lease;
} stuck;

static mv_code stuck_tx(mv_db *db, void *ctx, mv_err *err) {
    stuck *s = ctx;
    return mv_db_execf(db, SQL_STUCK, NULL, err, "is", s->lease, s->id);
}

STORE_TEST(processing_with_a_live_lease_is_a_conflict_and_an_expired_lease_is_taken_over) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "lease.db"));
    handler_state h = {0};
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    const char *id = first_id(msgs);
    /* a claim whose handler never finished (a crashed server) */
    mv_err err = {0};
    stuck s = {id, f.now + 30000};
    REQUIRE(mv_store_write(f.store, stuck_tx, &s, &err) == MV_OK);
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_ACTION_CONFLICT, &err);
    CHECK(strstr(err.message, "already has an action in progress") != NULL);
    f.now += 30001;
    CHECK_CODE(press(&f, id, "reject", "u2", NULL, &err), MV_ACTION_CONFLICT, &err);
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_OK, &err);
    CHECK_STR(h.attempts[0], "attempt-1");
    json_decref(msgs);
    fixture_close(&f);
}

STORE_TEST(a_handler_that_loses_its_claim_cannot_archive) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "steal.db"));
    handler_state h = {.reset_to_active = 1};
    h.f = &f;
    mv_service_set_handler(f.svc, "svc-test", "approve", counting_handler, &h);
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    const char *id = first_id(msgs);
    mv_err err = {0};
    CHECK_CODE(press(&f, id, "approve", "u2", NULL, &err), MV_ACTION_CONFLICT, &err);
    json_t *m;
    mv_message_get(f.svc, id, NULL, &m, &err);
    CHECK_STR(mv_json_str(m, "actionState"), "active");
    json_decref(m);
    CHECK_INT(fixture_rows(f.store, 'm'), 1); /* no notification was inserted */
    json_decref(msgs);
    fixture_close(&f);
}

/* Without a loop, one keeper thread keeps the leases of every handler running in the process:
 * four C handlers of 900 ms with a 300 ms lease all finish (none taken over: a press of one of
 * them at 500 ms is still a conflict), and the process gains the four pressing threads and one
 * keeper, not a keeper each. */
static mv_code slow_handler(void *ctx, const mv_action_input *in, json_t **result, mv_err *err) {
    (void)in;
    (void)err;
    atomic_fetch_add((atomic_int *)ctx, 1);
    mv_sleep_ms(900);
    *result = json_pack("{s:b}", "slow", 1);
    return MV_OK;
}

static int threads_now(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

typedef struct slow_press {
    fixture *f;
    const char *id;
    mv_code rc;
} slow_press;

static void *press_slow(void *arg) {
    slow_press *p = arg;
    mv_user u = {.id = "u2"};
    mv_action_request req = {.message_id = p->id, .action_cd = "approve", .user = &u};
    json_t *r = NULL;
    mv_err err = {0};
    p->rc = mv_action_handle(p->f->svc, &req, &r, &err);
    json_decref(r);
    return NULL;
}

STORE_TEST(one_keeper_thread_keeps_the_leases_of_every_running_handler_without_a_loop) {
    enum { N = 4 };
    static const mv_clock real = {0};
    fixture f;
    mv_service_options o = {.action_lease_ms = 300, .clock = &real};
    REQUIRE(fixture_open_opts(&f, kind, "keeper.db", &o));
    atomic_int calls = 0;
    mv_service_set_handler(f.svc, "svc-test", "approve", slow_handler, &calls);
    json_t *msgs[N];
    slow_press ps[N];
    mv_code rc;
    for (int i = 0; i < N; i++) {
        REQUIRE((msgs[i] = fixture_create(&f, "u1", "u2", NULL, &rc)) != NULL);
        ps[i] = (slow_press){&f, first_id(msgs[i]), MV_INTERNAL};
    }
    int base = threads_now();
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], NULL, press_slow, &ps[i]);
    mv_sleep_ms(500); /* past the first lease: only an extension keeps the claims */
    int during = threads_now();
    slow_press again = {&f, ps[0].id, MV_OK};
    press_slow(&again);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(again.rc, MV_ACTION_CONFLICT);
    for (int i = 0; i < N; i++)
        CHECK_CODE(ps[i].rc, MV_OK, (mv_err *)NULL);
    CHECK_INT(atomic_load(&calls), N);
    CHECK(during <= base + N + 1); /* a keeper each would be base + 2N */
    printf("threads: %d idle, %d with %d handlers running\n", base, during, N);
    for (int i = 0; i < N; i++)
        json_decref(msgs[i]);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(approve_archives_and_notifies_the_sender_in_one_go,
                     an_action_without_a_handler_records_who_archived_it,
                     rules_are_checked_before_claiming,
                     sixteen_threads_pressing_the_same_action_run_the_handler_once,
                     two_different_actions_raced_one_wins,
                     failing_handler_leaves_the_message_retryable_and_the_retry_reuses_the_attempt,
                     processing_with_a_live_lease_is_a_conflict_and_an_expired_lease_is_taken_over,
                     a_handler_that_loses_its_claim_cannot_archive,
                     one_keeper_thread_keeps_the_leases_of_every_running_handler_without_a_loop);
}
