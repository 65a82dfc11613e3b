/* loop_test.c — the outgoing-call loop against http_sink: many slow calls wait at once on one
 * thread, the request is mv_webhook_post's (key, signature), timeouts and the transfer bound
 * hold, shutdown completes every accepted call exactly once, and timers repeat and cancel. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "missive/deliver.h"
#include "support/http_sink.h"
#include "test.h"

static const char SECRET[] = "a-webhook-secret-of-some-length";

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Counts completions; each records its outcome. */
typedef struct tally {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, ok, draining, timed_out, twice;
    mv_webhook_outcome last_outcome;
    long last_status;
    char last_body[256];
} tally;

typedef struct slot {
    tally *t;
    atomic_int calls;
} slot;

static void on_done(void *ctx, mv_code rc, mv_webhook_response *res, const mv_err *err) {
    slot *s = ctx;
    tally *t = s->t;
    (void)err;
    pthread_mutex_lock(&t->mu);
    if (atomic_fetch_add(&s->calls, 1) > 0) t->twice++;
    t->done++;
    if (rc == MV_OK) t->ok++;
    if (rc == MV_DRAINING) t->draining++;
    if (res->failure && strcmp(res->failure, "timed out") == 0) t->timed_out++;
    t->last_outcome = res->outcome;
    t->last_status = res->status;
    snprintf(t->last_body, sizeof t->last_body, "%s", res->body ? res->body : "");
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    mv_webhook_response_free(res);
}

static void tally_init(tally *t) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
}

static bool tally_wait(tally *t, int n, int timeout_ms) {
    int64_t until = mono_ms() + timeout_ms;
    pthread_mutex_lock(&t->mu);
    while (t->done < n && mono_ms() < until) {
        pthread_mutex_unlock(&t->mu);
        struct timespec d = {0, 5 * 1000000L};
        nanosleep(&d, NULL);
        pthread_mutex_lock(&t->mu);
    }
    bool ok = t->done >= n;
    pthread_mutex_unlock(&t->mu);
    return ok;
}

static void tally_destroy(tally *t) {
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

static int threads_of_this_process(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

TEST(a_hundred_slow_calls_wait_together_on_one_thread) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_set_default(
        s, &(http_sink_response){.status = 200, .body = "{\"ok\":1}", .delay_ms = 600});
    mv_loop *loop = NULL;
    mv_err err = {0};
    REQUIRE(mv_loop_new(NULL, &loop, &err) == MV_OK);
    int threads_before = threads_of_this_process();
    tally t;
    tally_init(&t);
    enum { N = 100 };
    slot *slots = calloc(N, sizeof *slots);
    char url[256];
    snprintf(url, sizeof url, "%s/slow", http_sink_url(s));
    json_t *body = json_pack("{s:i}", "n", 1);
    int64_t t0 = mono_ms();
    for (int i = 0; i < N; i++) {
        slots[i].t = &t;
        CHECK(mv_webhook_post_async(loop, NULL, url, body, "k", on_done, &slots[i], &err) == MV_OK);
    }
    /* the caller's thread is free at once; the loop added no thread per call */
    CHECK(mono_ms() - t0 < 500);
    CHECK(tally_wait(&t, N, 10000));
    int64_t took = mono_ms() - t0;
    CHECK_INT(t.ok, N);
    CHECK_INT(t.twice, 0);
    CHECK(took < 3000); /* one after another would be 60 s */
    CHECK_STR(t.last_body, "{\"ok\":1}");
    CHECK_INT(mv_loop_pending(loop), 0);
    /* the sink runs a thread per connection; only the loop is measured here, so compare after
     * the sink's threads are gone */
    http_sink_stop(s);
    CHECK(threads_of_this_process() <= threads_before);
    json_decref(body);
    free(slots);
    mv_loop_free(loop);
    tally_destroy(&t);
}

TEST(a_call_on_the_loop_is_the_same_signed_request_with_its_key) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config cfg = {.secret = SECRET, .secret_len = strlen(SECRET)};
    tally t;
    tally_init(&t);
    slot one = {.t = &t};
    json_t *body = json_pack("{s:s}", "a", "b");
    char url[256];
    snprintf(url, sizeof url, "%s/hook", http_sink_url(s));
    CHECK(mv_webhook_post_async(loop, &cfg, url, body, "attempt-7", on_done, &one, NULL) == MV_OK);
    CHECK(tally_wait(&t, 1, 5000));
    CHECK_INT(t.ok, 1);
    http_sink_request r;
    REQUIRE(http_sink_get(s, 0, &r));
    CHECK_STR(r.method, "POST");
    CHECK_STR(r.path, "/hook");
    CHECK_STR(r.body, "{\"a\":\"b\"}");
    CHECK_STR(http_sink_header(&r, "Idempotency-Key"), "attempt-7");
    CHECK_STR(http_sink_header(&r, "webhook-id"), "attempt-7");
    char sig[72];
    mv_webhook_signature(SECRET, strlen(SECRET), r.body, r.body_len, sig);
    CHECK_STR(http_sink_header(&r, "X-Missive-Signature"), sig);
    http_sink_request_free(&r);
    /* a bad URL is refused at once, and the completion never runs */
    mv_err err = {0};
    CHECK(mv_webhook_post_async(loop, &cfg, "ftp://x/", body, NULL, on_done, &one, &err) ==
          MV_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "http://") != NULL);
    json_decref(body);
    mv_loop_free(loop);
    CHECK_INT(t.done, 1);
    http_sink_stop(s);
    tally_destroy(&t);
}

TEST(a_call_slower_than_its_timeout_fails_as_timed_out_and_ambiguous) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.delay_ms = 3000});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    mv_webhook_config cfg = {.timeout_ms = 300};
    tally t;
    tally_init(&t);
    slot one = {.t = &t};
    int64_t t0 = mono_ms();
    CHECK(mv_webhook_post_async(loop, &cfg, http_sink_url(s), NULL, NULL, on_done, &one, NULL) ==
          MV_OK);
    CHECK(tally_wait(&t, 1, 5000));
    CHECK(mono_ms() - t0 < 2000);
    CHECK_INT(t.timed_out, 1);
    CHECK_INT(t.last_outcome, MV_WEBHOOK_AMBIGUOUS);
    mv_loop_free(loop);
    http_sink_stop(s);
    tally_destroy(&t);
}

TEST(at_most_max_transfers_are_on_the_wire_and_the_rest_wait_their_turn) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_set_default(s, &(http_sink_response){.delay_ms = 300});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(&(mv_loop_options){.max_transfers = 2}, &loop, NULL) == MV_OK);
    tally t;
    tally_init(&t);
    slot slots[6] = {0};
    int64_t t0 = mono_ms();
    for (int i = 0; i < 6; i++) {
        slots[i].t = &t;
        CHECK(mv_webhook_post_async(loop, NULL, http_sink_url(s), NULL, NULL, on_done, &slots[i],
                                    NULL) == MV_OK);
    }
    CHECK(http_sink_wait(s, 2, 2000));
    mv_sleep_ms(100);
    CHECK_INT(http_sink_count(s), 2); /* the third waits for a slot */
    CHECK(tally_wait(&t, 6, 5000));
    CHECK(mono_ms() - t0 >= 850); /* three rounds of 300 ms */
    CHECK_INT(t.ok, 6);
    mv_loop_free(loop);
    http_sink_stop(s);
    tally_destroy(&t);
}

TEST(shutdown_completes_every_accepted_call_once_as_draining_and_refuses_new_ones) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_set_default(s, &(http_sink_response){.delay_ms = 5000});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(&(mv_loop_options){.max_transfers = 3}, &loop, NULL) == MV_OK);
    tally t;
    tally_init(&t);
    slot slots[5] = {0};
    for (int i = 0; i < 5; i++) { /* three on the wire, two waiting */
        slots[i].t = &t;
        CHECK(mv_webhook_post_async(loop, NULL, http_sink_url(s), NULL, NULL, on_done, &slots[i],
                                    NULL) == MV_OK);
    }
    CHECK(http_sink_wait(s, 3, 2000));
    int64_t t0 = mono_ms();
    mv_loop_stop_after(loop, 200);
    CHECK(tally_wait(&t, 5, 3000));
    CHECK(mono_ms() - t0 < 1500);
    CHECK_INT(t.draining, 5);
    CHECK_INT(t.twice, 0);
    mv_err err = {0};
    slot late = {.t = &t};
    CHECK(mv_webhook_post_async(loop, NULL, http_sink_url(s), NULL, NULL, on_done, &late, &err) ==
          MV_DRAINING);
    mv_loop_free(loop);
    CHECK_INT(t.done, 5);
    /* free alone also abandons what is pending */
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    slot last = {.t = &t};
    CHECK(mv_webhook_post_async(loop, NULL, http_sink_url(s), NULL, NULL, on_done, &last, NULL) ==
          MV_OK);
    CHECK(http_sink_wait(s, 4, 2000));
    mv_loop_free(loop);
    CHECK_INT(t.done, 6);
    CHECK_INT(t.draining, 6);
    CHECK_INT(t.last_outcome, MV_WEBHOOK_AMBIGUOUS); /* it had gone out */
    http_sink_stop(s);
    tally_destroy(&t);
}

typedef struct ticker {
    atomic_int runs;
    int stop_after;
} ticker;

static bool tick(void *ctx) {
    ticker *k = ctx;
    int n = atomic_fetch_add(&k->runs, 1) + 1;
    return k->stop_after == 0 || n < k->stop_after;
}

TEST(timers_repeat_until_cancelled_or_until_they_say_stop) {
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    ticker a = {0}, b = {.stop_after = 2};
    mv_loop_timer *ta = mv_loop_every(loop, 50, tick, &a);
    mv_loop_timer *tb = mv_loop_every(loop, 20, tick, &b);
    REQUIRE(ta && tb);
    mv_sleep_ms(400);
    mv_loop_timer_cancel(ta);
    int after_cancel = atomic_load(&a.runs);
    CHECK(after_cancel >= 3 && after_cancel <= 9);
    mv_sleep_ms(150);
    CHECK_INT(atomic_load(&a.runs), after_cancel);
    CHECK_INT(atomic_load(&b.runs), 2);
    mv_loop_timer_cancel(tb);
    mv_loop_free(loop);
}

int main(void) {
    return RUN_TESTS(a_hundred_slow_calls_wait_together_on_one_thread,
                     a_call_on_the_loop_is_the_same_signed_request_with_its_key,
                     a_call_slower_than_its_timeout_fails_as_timed_out_and_ambiguous,
                     at_most_max_transfers_are_on_the_wire_and_the_rest_wait_their_turn,
                     shutdown_completes_every_accepted_call_once_as_draining_and_refuses_new_ones,
                     timers_repeat_until_cancelled_or_until_they_say_stop);
}
