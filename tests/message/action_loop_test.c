/* action_loop_test.c — webhook action handlers waiting on the outgoing-call loop instead of a
 * thread: many slow handlers at once from one thread (mv_action_start / mv_action_finish), the
 * lease kept alive by the loop's timer for a handler slower than the lease, a timeout that is
 * retryable with the same key, a shutdown that leaves the attempt retryable (MV_DRAINING), and a
 * server killed with SIGKILL mid-handler whose action another completes after the lease. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "fixture.h"
#include "support/http_sink.h"
#include "support/victim.h"

static const char *LOOP_TEMPLATE =
    "{\"templateCd\": \"looped\", \"type\": \"request\","
    " \"receiverContent\": {\"title\": \"Book {{listing}}\"},"
    " \"prepare\": {\"toUser\": \"{{hostId}}\"},"
    " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept\", \"variant\": \"primary\","
    "   \"receiver\": true, \"handler\": {\"webhook\": \"%s/hooks/accept\"},"
    "   \"senderNotification\": \"accepted\"}]}";

static const mv_clock REAL_CLOCK = {0};

static int register_looped(mv_registry *registry, http_sink *sink) {
    char buf[2048];
    snprintf(buf, sizeof buf, LOOP_TEMPLATE, http_sink_url(sink));
    json_t *t = json_loads(buf, 0, NULL);
    mv_err err = {0};
    int ok = mv_registry_register(registry, t, "<looped>", &err) == MV_OK;
    if (!ok) fprintf(stderr, "%s\n", err.message);
    json_decref(t);
    return ok;
}

/* A fixture whose service runs webhook handlers on loop, on real time. */
static int open_looped(fixture *f, const char *kind, const char *name, http_sink *sink,
                       mv_loop *loop, const mv_webhook_config *wh, int64_t lease_ms) {
    mv_service_options o = {
        .webhook = wh, .action_lease_ms = lease_ms, .loop = loop, .clock = &REAL_CLOCK};
    if (!fixture_open_opts(f, kind, name, &o)) return 0;
    return register_looped(f->registry, sink);
}

static char *create_looped(mv_service *svc) {
    mv_user u = {.id = "guest"};
    json_t *payload = json_pack("{s:s,s:s}", "hostId", "host", "listing", "Flat");
    mv_create_request req = {.template_cd = "looped", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_create(svc, &req, &m, NULL, &err);
    char *id = m ? strdup(first_id(m)) : NULL;
    json_decref(m);
    json_decref(payload);
    return id;
}

static const mv_user HOST = {.id = "host"};

static mv_code press(mv_service *svc, const char *id, mv_err *err) {
    mv_action_request req = {.message_id = id, .action_cd = "accept", .user = &HOST};
    json_t *r = NULL;
    mv_code rc = mv_action_handle(svc, &req, &r, err);
    json_decref(r);
    return rc;
}

static const char *action_state(fixture *f, const char *id) {
    static char state[32];
    json_t *m = NULL;
    mv_message_get(f->svc, id, NULL, &m, NULL);
    snprintf(state, sizeof state, "%s", m ? mv_json_str(m, "actionState") : "?");
    json_decref(m);
    return state;
}

/* ---- many at once ---- */

typedef struct woken {
    atomic_int n;
} woken;

static void count_wake(void *ctx) { atomic_fetch_add(&((woken *)ctx)->n, 1); }

STORE_TEST(forty_slow_handlers_started_from_one_thread_finish_in_about_one_delay) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_default(sink, &(http_sink_response){.body = "{\"done\": true}", .delay_ms = 800});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config wh = {.timeout_ms = 10000};
    fixture f;
    REQUIRE(open_looped(&f, kind, "many.db", sink, loop, &wh, 0));
    enum { N = 40 };
    char *ids[N];
    mv_action_request reqs[N];
    mv_action_pending *pending[N];
    for (int i = 0; i < N; i++) {
        ids[i] = create_looped(f.svc);
        REQUIRE(ids[i]);
        reqs[i] = (mv_action_request){.message_id = ids[i], .action_cd = "accept", .user = &HOST};
    }
    woken w = {0};
    int64_t t0 = mv_now_ms();
    for (int i = 0; i < N; i++) {
        json_t *r = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_action_start(f.svc, &reqs[i], count_wake, &w, &pending[i], &r, &err), MV_OK,
                   &err);
        CHECK(pending[i] != NULL); /* the call waits on the loop, not on this thread */
        CHECK(r == NULL);
    }
    CHECK(mv_now_ms() - t0 < 800 + 700); /* the starts did not wait for the handlers */
    for (int i = 0; i < 400 && atomic_load(&w.n) < N; i++)
        mv_sleep_ms(10);
    CHECK_INT(atomic_load(&w.n), N);
    CHECK(mv_now_ms() - t0 < 3000); /* one after another: 32 s */
    for (int i = 0; i < N; i++) {
        json_t *r = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_action_finish(pending[i], &r, &err), MV_OK, &err);
        CHECK(json_is_true(json_object_get(r, "done")));
        json_decref(r);
        CHECK_STR(action_state(&f, ids[i]), "archived");
        free(ids[i]);
    }
    CHECK_INT(http_sink_count(sink), N);
    CHECK_INT(fixture_rows(f.store, 'm'), 2 * N); /* each message and its one notification */
    fixture_close(&f);
    mv_loop_free(loop);
    http_sink_stop(sink);
}

/* ---- lease ---- */

typedef struct presser {
    mv_service *svc;
    const char *id;
    mv_code rc;
    mv_err err;
} presser;

static void *press_thread(void *arg) {
    presser *p = arg;
    p->rc = press(p->svc, p->id, &p->err);
    return NULL;
}

STORE_TEST(the_loop_timer_keeps_the_lease_of_a_handler_slower_than_the_lease) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.delay_ms = 1600});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config wh = {.timeout_ms = 10000};
    fixture f;
    REQUIRE(open_looped(&f, kind, "lease.db", sink, loop, &wh, 500));
    char *id = create_looped(f.svc);
    REQUIRE(id);
    presser p = {.svc = f.svc, .id = id};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, press_thread, &p) == 0);
    REQUIRE(http_sink_wait(sink, 1, 5000));
    /* three leases later the claim is still held: no takeover, no second call */
    for (int i = 0; i < 3; i++) {
        mv_sleep_ms(350);
        mv_err err = {0};
        CHECK_CODE(press(f.svc, id, &err), MV_ACTION_CONFLICT, &err);
    }
    pthread_join(t, NULL);
    CHECK_CODE(p.rc, MV_OK, &p.err);
    CHECK_INT(http_sink_count(sink), 1);
    CHECK_STR(action_state(&f, id), "archived");
    free(id);
    fixture_close(&f);
    mv_loop_free(loop);
    http_sink_stop(sink);
}

STORE_TEST(sixteen_threads_pressing_at_once_on_the_loop_run_the_handler_once) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_default(sink, &(http_sink_response){.delay_ms = 300});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config wh = {.timeout_ms = 10000};
    fixture f;
    REQUIRE(open_looped(&f, kind, "race.db", sink, loop, &wh, 0));
    char *id = create_looped(f.svc);
    REQUIRE(id);
    enum { T = 16 };
    presser p[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        p[i] = (presser){.svc = f.svc, .id = id};
        pthread_create(&t[i], NULL, press_thread, &p[i]);
    }
    int ok = 0, conflict = 0, archived = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        ok += p[i].rc == MV_OK;
        conflict += p[i].rc == MV_ACTION_CONFLICT;
        archived += p[i].rc == MV_MESSAGE_ARCHIVED;
    }
    CHECK_INT(ok, 1);
    CHECK_INT(ok + conflict + archived, T);
    CHECK_INT(http_sink_count(sink), 1);
    CHECK_STR(action_state(&f, id), "archived");
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    free(id);
    fixture_close(&f);
    mv_loop_free(loop);
    http_sink_stop(sink);
}

STORE_TEST(a_handler_slower_than_its_timeout_is_retryable_and_the_retry_sends_the_same_key) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.delay_ms = 3000});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config wh = {.timeout_ms = 300};
    fixture f;
    REQUIRE(open_looped(&f, kind, "timeout.db", sink, loop, &wh, 0));
    char *id = create_looped(f.svc);
    mv_err err = {0};
    CHECK_CODE(press(f.svc, id, &err), MV_ACTION_RETRYABLE, &err);
    char attempt[64];
    mv_strlcpy(attempt, err.attempt_id, sizeof attempt);
    json_t *m = NULL;
    mv_message_get(f.svc, id, NULL, &m, NULL);
    CHECK_STR(mv_json_str(m, "actionState"), "retryable");
    CHECK_STR(mv_json_str(json_object_get(m, "lastFailure"), "message"), "timed out");
    json_decref(m);
    CHECK_CODE(press(f.svc, id, &err), MV_OK, &err);
    http_sink_request a, b;
    REQUIRE(http_sink_get(sink, 0, &a) && http_sink_get(sink, 1, &b));
    CHECK_STR(http_sink_header(&a, "Idempotency-Key"), attempt);
    CHECK_STR(http_sink_header(&b, "Idempotency-Key"), attempt);
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    free(id);
    fixture_close(&f);
    mv_loop_free(loop);
    http_sink_stop(sink);
}

STORE_TEST(a_loop_shutting_down_leaves_the_attempt_retryable_with_the_same_key) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.delay_ms = 5000});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config wh = {.timeout_ms = 10000};
    fixture f;
    REQUIRE(open_looped(&f, kind, "drain.db", sink, loop, &wh, 0));
    char *id = create_looped(f.svc);
    presser p = {.svc = f.svc, .id = id};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, press_thread, &p) == 0);
    REQUIRE(http_sink_wait(sink, 1, 5000));
    int64_t t0 = mv_now_ms();
    mv_loop_stop_after(loop, 0);
    pthread_join(t, NULL);
    CHECK(mv_now_ms() - t0 < 2000);
    CHECK_CODE(p.rc, MV_DRAINING, &p.err);
    CHECK(p.err.attempt_id[0] != '\0');
    CHECK(!strstr(p.err.message, "http")); /* the client's words name no URL */
    json_t *m = NULL;
    mv_message_get(f.svc, id, NULL, &m, NULL);
    CHECK_STR(mv_json_str(m, "actionState"), "retryable");
    CHECK_STR(mv_json_str(json_object_get(m, "lastFailure"), "message"),
              "the server is shutting down; retry elsewhere");
    json_decref(m);
    mv_loop_free(loop);
    /* the same service without its loop (the next daemon) retries the same attempt */
    fixture_close(&f);
    fixture g;
    mv_service_options o = {.webhook = &wh, .clock = &REAL_CLOCK};
    REQUIRE(fixture_open_url(&g, f.url, NULL, &o));
    REQUIRE(register_looped(g.registry, sink));
    mv_err err = {0};
    CHECK_CODE(press(g.svc, id, &err), MV_OK, &err);
    http_sink_request a, b;
    REQUIRE(http_sink_get(sink, 0, &a) && http_sink_get(sink, 1, &b));
    CHECK_STR(http_sink_header(&a, "Idempotency-Key"), p.err.attempt_id);
    CHECK_STR(http_sink_header(&b, "Idempotency-Key"), p.err.attempt_id);
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    free(id);
    fixture_close(&g);
    http_sink_stop(sink);
}

/* The victim: a second server in its own process on the test's store (lines: store URL, sink
 * URL, message id); the test kills it while the handler is running. */
static void loop_victim(char **lines, int n, void *arg) {
    const mv_webhook_config *wh = arg;
    if (n != 3) _exit(2);
    mv_loop *cl = NULL;
    mv_store *store = NULL;
    if (mv_loop_new(NULL, &cl, NULL) != MV_OK) _exit(3);
    if (mv_store_open(lines[0], NULL, &store, NULL) != MV_OK) _exit(4);
    mv_registry *registry = mv_registry_new();
    char tpl[2048];
    snprintf(tpl, sizeof tpl, LOOP_TEMPLATE, lines[1]);
    json_t *t = json_loads(tpl, 0, NULL);
    if (!t || mv_registry_register(registry, t, "<looped>", NULL) != MV_OK) _exit(5);
    mv_service_options o = {
        .store = store, .registry = registry, .webhook = wh, .action_lease_ms = 600, .loop = cl};
    mv_service *svc = NULL;
    if (mv_service_new(&o, &svc, NULL) != MV_OK) _exit(6);
    mv_err e = {0};
    press(svc, lines[2], &e);
}

STORE_TEST(a_server_on_the_loop_killed_mid_handler_is_completed_by_another_after_the_lease) {
    mv_webhook_config wh = {.timeout_ms = 20000};
    victim victim;
    REQUIRE(victim_fork(&victim, loop_victim, &wh));
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.status = 200, .delay_ms = 20000});
    fixture f;
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    REQUIRE(open_looped(&f, kind, "kill.db", sink, loop, &wh, 600));
    char *id = create_looped(f.svc);
    REQUIRE(id);
    REQUIRE(victim_send(&victim, (const char *[]){f.url, http_sink_url(sink), id}, 3));
    /* the victim opens its own store and loop first: slow under a sanitizer beside other tests */
    REQUIRE(victim_reached(&victim, sink, 60000));
    mv_sleep_ms(700); /* the victim's timer has extended the lease meanwhile */
    mv_err err = {0};
    CHECK_CODE(press(f.svc, id, &err), MV_ACTION_CONFLICT, &err);
    CHECK(victim_kill(&victim));
    mv_sleep_ms(700);
    CHECK_CODE(press(f.svc, id, &err), MV_OK, &err);
    http_sink_request a, b;
    REQUIRE(http_sink_get(sink, 0, &a) && http_sink_get(sink, 1, &b));
    CHECK_STR(http_sink_header(&a, "Idempotency-Key"), http_sink_header(&b, "Idempotency-Key"));
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    CHECK_STR(action_state(&f, id), "archived");
    CHECK_INT(fixture_rows(f.store, 'm'), 2); /* the message and exactly one notification */
    free(id);
    fixture_close(&f);
    mv_loop_free(loop);
    http_sink_stop(sink);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        forty_slow_handlers_started_from_one_thread_finish_in_about_one_delay,
        the_loop_timer_keeps_the_lease_of_a_handler_slower_than_the_lease,
        sixteen_threads_pressing_at_once_on_the_loop_run_the_handler_once,
        a_handler_slower_than_its_timeout_is_retryable_and_the_retry_sends_the_same_key,
        a_loop_shutting_down_leaves_the_attempt_retryable_with_the_same_key,
        a_server_on_the_loop_killed_mid_handler_is_completed_by_another_after_the_lease);
}
