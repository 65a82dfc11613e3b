/* create_loop_test.c — creates whose prepare webhook and webhook payment provider wait on the
 * outgoing-call loop (mv_message_create_start) instead of a thread: fifty slow prepares started
 * from one thread finish in about one call; a refused session call expires the earlier sessions in
 * order and fails the key with the same error and the same calls as the synchronous create; a
 * failing expire is payment_compensation_failed through the hook; a replay calls nothing; and a
 * payment refund handler on the loop pressed by sixteen threads refunds once. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "fixture.h"
#include "support/far_side.h"
#include "support/http_sink.h"

static const char *PAID_TEMPLATE =
    "{\"templateCd\": \"paid\", \"paymentCd\": \"deposit\","
    " \"receiverContent\": {\"title\": \"Pay {{n}}\"}, \"prepare\": {\"webhook\": \"%s/prepare\"},"
    " \"actions\": [{\"actionCd\": \"refund\", \"name\": \"Refund\", \"variant\": \"danger\","
    "   \"receiver\": true, \"handler\": {\"payment\": \"refund\"}}]}";

static const mv_clock REAL_CLOCK = {0};

typedef struct rig {
    http_sink *sink;
    mv_loop *loop;
    mv_payment_provider *pay;
    far_side fs;
    fixture f;
    int hooks; /* payment compensation failures reported */
    char hook_session[64];
} rig;

static void hook(void *ctx, const mv_payment_failure *ev) {
    rig *r = ctx;
    r->hooks++;
    mv_strlcpy(r->hook_session, ev->session_id, sizeof r->hook_session);
}

static int rig_open(rig *r, const char *kind, const char *name) {
    memset(r, 0, sizeof *r);
    mv_err err = {0};
    if (!(r->sink = http_sink_start()) || mv_loop_new(NULL, &r->loop, &err) != MV_OK) return 0;
    r->fs.to = "shop";
    http_sink_set_handler(r->sink, far_side_answer, &r->fs);
    char url[256];
    snprintf(url, sizeof url, "%s/pay", http_sink_url(r->sink));
    r->pay = mv_payment_webhook_new(url, NULL);
    mv_service_options o = {.payment = r->pay,
                            .loop = r->loop,
                            .clock = &REAL_CLOCK,
                            .on_payment_compensation_failure = hook,
                            .hook_ctx = r};
    if (!fixture_open_opts(&r->f, kind, name, &o)) return 0;
    char buf[1024];
    snprintf(buf, sizeof buf, PAID_TEMPLATE, http_sink_url(r->sink));
    json_t *t = json_loads(buf, 0, NULL);
    mv_code rc = mv_registry_register(r->f.registry, t, "<paid>", &err);
    json_decref(t);
    return rc == MV_OK;
}

static void rig_close(rig *r) {
    fixture_close(&r->f);
    mv_loop_free(r->loop);
    mv_payment_webhook_free(r->pay);
    http_sink_stop(r->sink);
}

/* ---- rounds on threads of their own, as a server's write pool would run them ---- */

typedef struct round {
    void (*fn)(void *);
    void *arg;
} round;

static void *run_round(void *p) {
    round rd = *(round *)p;
    free(p);
    rd.fn(rd.arg);
    return NULL;
}

static void submit(void *ctx, void (*fn)(void *), void *arg) {
    (void)ctx;
    round *rd = malloc(sizeof *rd);
    *rd = (round){fn, arg};
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &a, run_round, rd);
    pthread_attr_destroy(&a);
}

/* One create's outcome, now or from its last round. */
typedef struct outcome {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, started, replayed;
    mv_code rc;
    json_t *messages;
    mv_err err;
    json_t *payload, *key;
    mv_user user;
    mv_create_request req;
} outcome;

static void finished(void *ctx, mv_code rc, json_t *messages, const mv_err *err) {
    outcome *o = ctx;
    pthread_mutex_lock(&o->mu);
    o->rc = rc;
    o->messages = messages;
    mv_err_copy(&o->err, err);
    o->done = true;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

/* Starts a create of "paid" by u1 (payload: {"items": ITEMS or absent}, key may be NULL). */
static void start(rig *r, outcome *o, const char *items, const char *key) {
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->payload = json_object();
    if (items) json_object_set_new(o->payload, "items", json_loads(items, 0, NULL));
    o->key = key ? json_string(key) : NULL;
    o->user = (mv_user){.id = "u1"};
    o->req = (mv_create_request){.template_cd = "paid",
                                 .user = &o->user,
                                 .payload = o->payload,
                                 .client_request_id = o->key};
    mv_create_async env = {submit, NULL, finished, o};
    json_t *m = NULL;
    mv_err err = {0};
    bool started = false, replayed = false;
    mv_code rc = mv_message_create_start(r->f.svc, &o->req, &env, &started, &m, &replayed, &err);
    o->started = started;
    if (!started) {
        o->replayed = replayed;
        finished(o, rc, m, &err);
    }
}

static void wait_done(outcome *o) {
    pthread_mutex_lock(&o->mu);
    while (!o->done)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
}

static void outcome_free(outcome *o) {
    json_decref(o->messages);
    json_decref(o->payload);
    json_decref(o->key);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
}

/* "path op sessionId" of every request the sink got since `from`, one per line. */
static void calls_since(http_sink *sink, int from, char *out, size_t size) {
    out[0] = '\0';
    http_sink_request q;
    for (int i = from; http_sink_get(sink, i, &q); i++) {
        json_t *b = json_loads(q.body, 0, NULL);
        const char *op = mv_json_str(b, "op"), *sid = mv_json_str(b, "sessionId");
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s %s %s\n", q.path, op ? op : "-", sid ? sid : "-");
        json_decref(b);
        http_sink_request_free(&q);
    }
}

static const char *THREE_ITEMS = "[{\"toUser\": \"a\", \"templateData\": {\"n\": 1}},"
                                 " {\"toUser\": \"b\", \"templateData\": {\"n\": 2}},"
                                 " {\"toUser\": \"c\", \"priceArgs\": {\"fail\": true}}]";

STORE_TEST(fifty_slow_prepares_started_from_one_thread_finish_in_about_one_call) {
    enum { N = 50 };
    rig r;
    REQUIRE(rig_open(&r, kind, "loop-many.db"));
    r.fs.delay_ms = 300;
    static outcome o[N];
    int64_t t0 = mv_now_ms();
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "many-%d", i);
        start(&r, &o[i], NULL, key);
    }
    int64_t started_ms = mv_now_ms() - t0;
    int ok = 0, started = 0;
    for (int i = 0; i < N; i++) {
        wait_done(&o[i]);
        started += o[i].started;
        if (o[i].rc == MV_OK && json_array_size(o[i].messages) == 1 &&
            mv_json_str(json_array_get(o[i].messages, 0), "paymentSession"))
            ok++;
    }
    int64_t took = mv_now_ms() - t0;
    printf("%d creates with a 300 ms prepare on the loop: started in %lld ms, done in %lld ms\n", N,
           (long long)started_ms, (long long)took);
    CHECK_INT(started, N);
    CHECK_INT(ok, N);
    CHECK(started_ms < 300 * 3); /* the starts did not wait for the calls */
    CHECK(took < 300 * 8);       /* one after another: 15 s */
    CHECK_INT(fixture_rows(r.f.store, 'm'), N);
    CHECK_INT(http_sink_count(r.sink), 2 * N); /* a prepare and a session each */
    for (int i = 0; i < N; i++)
        outcome_free(&o[i]);
    rig_close(&r);
}

STORE_TEST(a_refused_session_expires_the_earlier_ones_in_order_and_fails_the_key_like_a_thread) {
    rig r;
    REQUIRE(rig_open(&r, kind, "loop-refused.db"));
    outcome o;
    start(&r, &o, THREE_ITEMS, "refused-1");
    wait_done(&o);
    CHECK(o.started);
    CHECK_INT(o.rc, MV_PAYMENT_FAILED);
    CHECK(o.messages == NULL);
    char async_calls[2048], sync_calls[2048];
    calls_since(r.sink, 0, async_calls, sizeof async_calls);
    CHECK_STR(async_calls, "/prepare - -\n/pay create -\n/pay create -\n/pay create -\n"
                           "/pay expire s-1\n/pay expire s-2\n");
    CHECK_INT(fixture_rows(r.f.store, 'm'), 0);
    /* the key is failed: a retry replays the failure without calling anything */
    int before = http_sink_count(r.sink);
    outcome again;
    start(&r, &again, THREE_ITEMS, "refused-1");
    CHECK(!again.started);
    CHECK_INT(again.rc, MV_CLIENT_REQUEST_FAILED);
    CHECK_STR(again.err.message, "clientRequestId \"refused-1\" previously failed: payment "
                                 "session creation failed");
    CHECK_INT(http_sink_count(r.sink), before);
    /* the synchronous create of the same request: the same calls, the same error */
    mv_user u = {.id = "u1"};
    json_t *payload = json_pack("{s:o}", "items", json_loads(THREE_ITEMS, 0, NULL));
    json_t *key = json_string("refused-2");
    mv_create_request req = {
        .template_cd = "paid", .user = &u, .payload = payload, .client_request_id = key};
    json_t *m = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(r.f.svc, &req, &m, NULL, &err), MV_PAYMENT_FAILED, &err);
    CHECK_STR(err.message, o.err.message);
    calls_since(r.sink, before, sync_calls, sizeof sync_calls);
    CHECK_STR(sync_calls, "/prepare - -\n/pay create -\n/pay create -\n/pay create -\n"
                          "/pay expire s-3\n/pay expire s-4\n");
    json_decref(payload);
    json_decref(key);
    outcome_free(&o);
    outcome_free(&again);
    rig_close(&r);
}

STORE_TEST(a_failing_expire_is_compensation_failed_with_the_session_both_errors_and_the_hook) {
    rig r;
    REQUIRE(rig_open(&r, kind, "loop-expire.db"));
    atomic_store(&r.fs.fail_expire, 1);
    outcome o;
    start(&r, &o, THREE_ITEMS, "expire-1");
    wait_done(&o);
    CHECK(o.started);
    CHECK_INT(o.rc, MV_PAYMENT_COMPENSATION_FAILED);
    CHECK_STR(o.err.session_id, "s-1");
    CHECK_STR(o.err.operation, "expire");
    CHECK(strstr(o.err.message, "session \"s-1\" during expire") != NULL);
    CHECK(strstr(o.err.message, "500") != NULL); /* the expire's failure */
    CHECK(strstr(o.err.cause, "400") != NULL);   /* what made compensation necessary */
    CHECK_INT(r.hooks, 1);                       /* the first failure only */
    CHECK_STR(r.hook_session, "s-1");
    CHECK_INT(http_sink_count(r.sink), 6); /* both sessions were still expired */
    outcome_free(&o);
    rig_close(&r);
}

STORE_TEST(a_replay_after_success_returns_the_same_messages_without_calling_out) {
    rig r;
    REQUIRE(rig_open(&r, kind, "loop-replay.db"));
    const char *two = "[{\"toUser\": \"a\"}, {\"toUser\": \"b\"}]";
    outcome o, again;
    start(&r, &o, two, "replay-1");
    wait_done(&o);
    CHECK(o.started);
    CHECK_CODE(o.rc, MV_OK, &o.err);
    CHECK_INT(json_array_size(o.messages), 2);
    CHECK_INT(http_sink_count(r.sink), 3);
    start(&r, &again, two, "replay-1");
    CHECK(!again.started);
    CHECK(again.replayed);
    CHECK_CODE(again.rc, MV_OK, &again.err);
    CHECK_INT(json_array_size(again.messages), 2);
    for (size_t i = 0; i < 2; i++) {
        CHECK_STR(mv_json_str(json_array_get(again.messages, i), "id"),
                  mv_json_str(json_array_get(o.messages, i), "id"));
        CHECK_STR(mv_json_str(json_array_get(again.messages, i), "paymentSession"),
                  mv_json_str(json_array_get(o.messages, i), "paymentSession"));
    }
    CHECK_INT(http_sink_count(r.sink), 3);
    outcome_free(&o);
    outcome_free(&again);
    rig_close(&r);
}

/* ---- the refund handler on the loop ---- */

typedef struct presser {
    rig *r;
    const char *id;
    atomic_int *ok;
} presser;

static void *press_refund(void *p) {
    presser *pr = p;
    mv_user shop = {.id = "shop"};
    mv_action_request ar = {.message_id = pr->id, .action_cd = "refund", .user = &shop};
    json_t *result = NULL;
    mv_err err = {0};
    if (mv_action_handle(pr->r->f.svc, &ar, &result, &err) == MV_OK &&
        strcmp(mv_json_str(result, "operation"), "refund") == 0)
        atomic_fetch_add(pr->ok, 1);
    json_decref(result);
    return NULL;
}

STORE_TEST(sixteen_threads_pressing_a_refund_on_the_loop_refund_once) {
    enum { T = 16 };
    rig r;
    REQUIRE(rig_open(&r, kind, "loop-refund.db"));
    outcome o;
    start(&r, &o, "{\"toUser\": \"shop\"}", NULL);
    wait_done(&o);
    REQUIRE(o.rc == MV_OK && json_array_size(o.messages) == 1);
    const char *id = mv_json_str(json_array_get(o.messages, 0), "id");
    int before = http_sink_count(r.sink);
    atomic_int ok = 0;
    presser pr = {&r, id, &ok};
    pthread_t t[T];
    for (int i = 0; i < T; i++)
        pthread_create(&t[i], NULL, press_refund, &pr);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(atomic_load(&ok), 1);
    CHECK_INT(http_sink_count(r.sink), before + 1);
    http_sink_request q;
    REQUIRE(http_sink_get(r.sink, before, &q));
    json_t *b = json_loads(q.body, 0, NULL);
    CHECK_STR(mv_json_str(b, "op"), "refund");
    CHECK_STR(mv_json_str(b, "sessionId"), "s-1");
    json_decref(b);
    http_sink_request_free(&q);
    json_t *m = NULL;
    mv_message_get(r.f.svc, id, NULL, &m, NULL);
    CHECK_STR(mv_json_str(m, "actionState"), "archived");
    json_decref(m);
    outcome_free(&o);
    rig_close(&r);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        fifty_slow_prepares_started_from_one_thread_finish_in_about_one_call,
        a_refused_session_expires_the_earlier_ones_in_order_and_fails_the_key_like_a_thread,
        a_failing_expire_is_compensation_failed_with_the_session_both_errors_and_the_hook,
        a_replay_after_success_returns_the_same_messages_without_calling_out,
        sixteen_threads_pressing_a_refund_on_the_loop_refund_once);
}
