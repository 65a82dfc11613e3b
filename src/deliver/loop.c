/* loop.c — outgoing calls without a thread each: one thread drives a CURLM (curl_multi_poll,
 * woken by curl_multi_wakeup when another thread submits), one more runs periodic jobs.
 *
 * Why: an action whose handler is a webhook used to hold a request thread (and a lease-keeper
 * thread) for the whole call, so slow receivers bounded how many actions could run at once by the
 * thread count. Here a call costs a struct and a socket while it waits. The request itself is
 * built by webhook.c on the submitting thread and classified by webhook.c on the loop's thread
 * (deliver/transport.h), so both clients send identical requests and agree on every outcome.
 *
 * Threads and ownership: submitters only append to `incoming` (under mu) and wake the loop; the
 * loop thread alone touches the multi handle and the list of calls on the wire. Completions run
 * on the loop thread and must not block. Shutdown abandons what is left (MV_DRAINING), so every
 * accepted call completes exactly once. The timer thread runs jobs that may block briefly
 * (store writes extending a lease) one at a time; a job never runs on the loop thread, so a slow
 * store never delays a transfer's I/O or its timeout. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono.h"
#include "deliver/transport.h"
#include "missive/deliver.h"

#define DEFAULT_MAX_TRANSFERS 1024
#define IDLE_POLL_MS 1000

typedef struct xfer {
    mv__webhook_call w; /* first: CURLOPT_PRIVATE points here */
    mv_webhook_done done;
    void *ctx;
    struct xfer *next, *prev;
} xfer;

struct mv_loop_timer {
    mv_loop *loop;
    bool (*fn)(void *ctx);
    void *ctx;
    int64_t period_ms, due_ms;
    bool repeating; /* false once fn returned false */
    bool running;   /* fn is running on the timer thread */
    struct mv_loop_timer *next;
};

struct mv_loop {
    CURLM *multi;
    int max_transfers;
    pthread_t thread, timer_thread;
    bool thread_started, timer_started;
    pthread_mutex_t mu;
    pthread_cond_t timer_cv; /* CLOCK_MONOTONIC; also signalled when pending reaches 0 */
    /* guarded by mu */
    xfer *in_head, *in_tail; /* submitted, not yet on the wire */
    int pending;             /* accepted and not yet completed */
    bool has_deadline, closing;
    int64_t deadline_ms;
    mv_loop_timer *timers;
    bool timers_stop;
    /* loop thread only */
    xfer *wire; /* on the wire (added to the multi handle) */
    int on_wire;
};

static struct timespec mono_at(int64_t ms) {
    return (struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
}

/* ---- transfers --------------------------------------------------------------------------- */

/* Concludes x (on the loop thread), runs its completion and frees it. */
static void complete(mv_loop *loop, xfer *x, CURLcode cc) {
    mv_webhook_response res;
    mv_err err = {0};
    mv_code rc = mv__webhook_call_conclude(&x->w, cc, &res, &err);
    mv__webhook_call_cleanup(&x->w);
    x->done(x->ctx, rc, &res, &err);
    free(x);
    pthread_mutex_lock(&loop->mu);
    if (--loop->pending == 0) pthread_cond_broadcast(&loop->timer_cv);
    pthread_mutex_unlock(&loop->mu);
}

static void wire_unlink(mv_loop *loop, xfer *x) {
    if (x->prev)
        x->prev->next = x->next;
    else
        loop->wire = x->next;
    if (x->next) x->next->prev = x->prev;
    x->next = x->prev = NULL;
    curl_multi_remove_handle(loop->multi, x->w.h);
    loop->on_wire--;
}

/* Abandons every call on the wire and every one waiting (shutdown). Called with mu held. */
static void abandon_all(mv_loop *loop) {
    xfer *waiting = loop->in_head;
    loop->in_head = loop->in_tail = NULL;
    pthread_mutex_unlock(&loop->mu);
    while (loop->wire) {
        xfer *x = loop->wire;
        wire_unlink(loop, x);
        x->w.aborted = true;
        complete(loop, x, CURLE_ABORTED_BY_CALLBACK);
    }
    while (waiting) {
        xfer *x = waiting;
        waiting = x->next;
        x->w.aborted = true;
        complete(loop, x, CURLE_ABORTED_BY_CALLBACK);
    }
    pthread_mutex_lock(&loop->mu);
}

static void *run_loop(void *arg) {
    mv_loop *loop = arg;
    pthread_mutex_lock(&loop->mu);
    for (;;) {
        bool past_deadline = loop->has_deadline && mv__mono_ms() >= loop->deadline_ms;
        if (loop->closing || past_deadline) abandon_all(loop);
        if (loop->closing && !loop->in_head && !loop->wire) break;
        /* admit waiting calls while there is room on the wire */
        while (loop->in_head && loop->on_wire < loop->max_transfers) {
            xfer *x = loop->in_head;
            loop->in_head = x->next;
            if (!loop->in_head) loop->in_tail = NULL;
            x->next = loop->wire;
            x->prev = NULL;
            if (loop->wire) loop->wire->prev = x;
            loop->wire = x;
            loop->on_wire++;
            x->w.started = true;
            clock_gettime(CLOCK_MONOTONIC, &x->w.t0); /* the duration counts from here */
            curl_multi_add_handle(loop->multi, x->w.h);
        }
        int64_t wait = IDLE_POLL_MS;
        if (loop->has_deadline && !past_deadline) {
            int64_t left = loop->deadline_ms - mv__mono_ms();
            if (left < wait) wait = left > 0 ? left : 0;
        }
        pthread_mutex_unlock(&loop->mu);

        int running = 0;
        curl_multi_perform(loop->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(loop->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            xfer *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            CURLcode cc = msg->data.result;
            wire_unlink(loop, x); /* msg is invalid from here on */
            complete(loop, x, cc);
        }
        curl_multi_poll(loop->multi, NULL, 0, (int)wait, NULL);
        pthread_mutex_lock(&loop->mu);
    }
    pthread_mutex_unlock(&loop->mu);
    return NULL;
}

static mv_code post_async(mv_loop *loop, const mv_webhook_config *cfg, const char *url,
                          const json_t *body, const char *idempotency_key, bool reuse,
                          mv_webhook_done done, void *ctx, mv_err *err);

mv_code mv_webhook_post_async(mv_loop *loop, const mv_webhook_config *cfg, const char *url,
                              const json_t *body, const char *idempotency_key, mv_webhook_done done,
                              void *ctx, mv_err *err) {
    return post_async(loop, cfg, url, body, idempotency_key, false, done, ctx, err);
}

mv_code mv__webhook_post_async_reusing(mv_loop *loop, const mv_webhook_config *cfg, const char *url,
                                       const json_t *body, const char *idempotency_key,
                                       mv_webhook_done done, void *ctx, mv_err *err) {
    return post_async(loop, cfg, url, body, idempotency_key, true, done, ctx, err);
}

static mv_code post_async(mv_loop *loop, const mv_webhook_config *cfg, const char *url,
                          const json_t *body, const char *idempotency_key, bool reuse,
                          mv_webhook_done done, void *ctx, mv_err *err) {
    char *text = body ? mv_json_compact(body) : strdup("null");
    xfer *x = calloc(1, sizeof *x);
    if (!text || !x) {
        free(text);
        free(x);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory serialising a webhook body");
    }
    mv_code rc = mv__webhook_call_setup(&x->w, cfg, url, text, strlen(text), idempotency_key, err);
    if (rc != MV_OK) {
        mv__webhook_call_cleanup(&x->w);
        free(x);
        return rc;
    }
    if (reuse) curl_easy_setopt(x->w.h, CURLOPT_FORBID_REUSE, 0L);
    x->done = done;
    x->ctx = ctx;
    pthread_mutex_lock(&loop->mu);
    if (loop->closing || (loop->has_deadline && mv__mono_ms() >= loop->deadline_ms)) {
        pthread_mutex_unlock(&loop->mu);
        mv__webhook_call_cleanup(&x->w);
        free(x);
        return mv_err_set(err, MV_DRAINING, "the server is shutting down");
    }
    if (loop->in_tail)
        loop->in_tail->next = x;
    else
        loop->in_head = x;
    loop->in_tail = x;
    loop->pending++;
    pthread_mutex_unlock(&loop->mu);
    curl_multi_wakeup(loop->multi);
    return MV_OK;
}

int mv_loop_pending(mv_loop *loop) {
    pthread_mutex_lock(&loop->mu);
    int n = loop->pending;
    pthread_mutex_unlock(&loop->mu);
    return n;
}

/* ---- timers ------------------------------------------------------------------------------ */

static void *run_timers(void *arg) {
    mv_loop *loop = arg;
    pthread_mutex_lock(&loop->mu);
    while (!loop->timers_stop) {
        mv_loop_timer *next = NULL;
        for (mv_loop_timer *t = loop->timers; t; t = t->next)
            if (t->repeating && (!next || t->due_ms < next->due_ms)) next = t;
        if (!next) {
            pthread_cond_wait(&loop->timer_cv, &loop->mu);
            continue;
        }
        int64_t now = mv__mono_ms();
        if (next->due_ms > now) {
            struct timespec at = mono_at(next->due_ms);
            pthread_cond_timedwait(&loop->timer_cv, &loop->mu, &at);
            continue;
        }
        next->running = true;
        pthread_mutex_unlock(&loop->mu);
        bool again = next->fn(next->ctx);
        pthread_mutex_lock(&loop->mu);
        next->running = false;
        next->due_ms = mv__mono_ms() + next->period_ms;
        if (!again) next->repeating = false;
        pthread_cond_broadcast(&loop->timer_cv); /* a cancel may be waiting for this run */
    }
    pthread_mutex_unlock(&loop->mu);
    return NULL;
}

mv_loop_timer *mv_loop_every(mv_loop *loop, int64_t period_ms, bool (*fn)(void *ctx), void *ctx) {
    mv_loop_timer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    *t = (mv_loop_timer){.loop = loop,
                         .fn = fn,
                         .ctx = ctx,
                         .period_ms = period_ms > 0 ? period_ms : 1,
                         .due_ms = mv__mono_ms() + (period_ms > 0 ? period_ms : 1),
                         .repeating = true};
    pthread_mutex_lock(&loop->mu);
    if (loop->timers_stop) {
        pthread_mutex_unlock(&loop->mu);
        free(t);
        return NULL;
    }
    t->next = loop->timers;
    loop->timers = t;
    pthread_cond_broadcast(&loop->timer_cv);
    pthread_mutex_unlock(&loop->mu);
    return t;
}

void mv_loop_timer_cancel(mv_loop_timer *timer) {
    if (!timer) return;
    mv_loop *loop = timer->loop;
    pthread_mutex_lock(&loop->mu);
    timer->repeating = false;
    while (timer->running)
        pthread_cond_wait(&loop->timer_cv, &loop->mu);
    for (mv_loop_timer **p = &loop->timers; *p; p = &(*p)->next)
        if (*p == timer) {
            *p = timer->next;
            break;
        }
    pthread_mutex_unlock(&loop->mu);
    free(timer);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

mv_code mv_loop_new(const mv_loop_options *opts, mv_loop **out, mv_err *err) {
    *out = NULL;
    if (!mv_curl_ready()) return mv_err_set(err, MV_INTERNAL, "libcurl failed to initialise");
    mv_loop *loop = calloc(1, sizeof *loop);
    if (!loop) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    loop->max_transfers =
        opts && opts->max_transfers > 0 ? opts->max_transfers : DEFAULT_MAX_TRANSFERS;
    pthread_mutex_init(&loop->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&loop->timer_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!(loop->multi = curl_multi_init())) {
        mv_loop_free(loop);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory creating the call loop");
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    loop->thread_started = pthread_create(&loop->thread, &attr, run_loop, loop) == 0;
    loop->timer_started =
        loop->thread_started && pthread_create(&loop->timer_thread, &attr, run_timers, loop) == 0;
    pthread_attr_destroy(&attr);
    if (!loop->timer_started) {
        mv_loop_free(loop);
        return mv_err_set(err, MV_INTERNAL, "cannot start the call loop's threads");
    }
    *out = loop;
    return MV_OK;
}

void mv_loop_stop_after(mv_loop *loop, int64_t ms) {
    if (!loop) return;
    pthread_mutex_lock(&loop->mu);
    int64_t at = mv__mono_ms() + (ms > 0 ? ms : 0);
    if (!loop->has_deadline || at < loop->deadline_ms) loop->deadline_ms = at;
    loop->has_deadline = true;
    pthread_mutex_unlock(&loop->mu);
    if (loop->multi) curl_multi_wakeup(loop->multi);
}

void mv_loop_stop(mv_loop *loop) {
    if (!loop) return;
    mv_loop_stop_after(loop, 0);
    pthread_mutex_lock(&loop->mu);
    while (loop->pending > 0)
        pthread_cond_wait(&loop->timer_cv, &loop->mu);
    pthread_mutex_unlock(&loop->mu);
}

void mv_loop_free(mv_loop *loop) {
    if (!loop) return;
    pthread_mutex_lock(&loop->mu);
    loop->closing = true;
    loop->timers_stop = true;
    pthread_cond_broadcast(&loop->timer_cv);
    pthread_mutex_unlock(&loop->mu);
    if (loop->thread_started) {
        curl_multi_wakeup(loop->multi);
        pthread_join(loop->thread, NULL);
    }
    if (loop->timer_started) pthread_join(loop->timer_thread, NULL);
    for (mv_loop_timer *t = loop->timers, *next; t; t = next) { /* owners that never cancelled */
        next = t->next;
        free(t);
    }
    if (loop->multi) curl_multi_cleanup(loop->multi);
    pthread_cond_destroy(&loop->timer_cv);
    pthread_mutex_destroy(&loop->mu);
    free(loop);
}
