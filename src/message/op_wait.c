/* op_wait.c — blocking calls that wait on their asynchronous operation (op_wait.h). */
#include "message/op_wait.h"
#include "base/mono.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/callctx.h"
#include "message/action_async.h"
#include "message/create_async.h"
#include "message/service.h"

void mv__waiter_init(mv__waiter *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &attr);
    pthread_condattr_destroy(&attr);
}

void mv__waiter_after(void *p, int64_t ms, void (*fn)(void *arg), void *arg) {
    mv__waiter *w = p;
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->arg = arg;
    w->at = mv__mono_ms() + (ms > 0 ? ms : 0);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void mv__waiter_submit(void *w, void (*fn)(void *arg), void *arg) {
    mv__waiter_after(w, 0, fn, arg);
}

void mv__waiter_finish(mv__waiter *w) {
    pthread_mutex_lock(&w->mu);
    w->finished = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void mv__waiter_run(mv__waiter *w) {
    pthread_mutex_lock(&w->mu);
    while (!w->finished) {
        if (!w->fn) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        int64_t now = mv__mono_ms();
        if (w->at > now) {
            struct timespec ts = {.tv_sec = (time_t)(w->at / 1000),
                                  .tv_nsec = (long)(w->at % 1000) * 1000000};
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
            continue;
        }
        void (*fn)(void *) = w->fn;
        void *arg = w->arg;
        w->fn = NULL;
        pthread_mutex_unlock(&w->mu);
        fn(arg);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* ---- mv_message_create, mv_message_create_start ------------------------------------------- */

typedef struct create_wait {
    mv__waiter w;
    mv_code rc;
    json_t *messages;
    bool replayed;
    mv_err *err;
} create_wait;

static void create_waited(void *ctx, mv_code rc, json_t *messages, bool replayed,
                          const mv_err *err) {
    create_wait *c = ctx;
    c->rc = rc;
    c->messages = messages;
    c->replayed = replayed;
    if (rc != MV_OK) mv_err_copy(c->err, err);
    mv__waiter_finish(&c->w);
}

mv_code mv_message_create(mv_service *svc, const mv_create_request *req, json_t **messages,
                          bool *replayed, mv_err *err) {
    create_wait c = {.err = err};
    mv__waiter_init(&c.w);
    mv__create_env env = {
        mv__waiter_submit, &c.w, mv__waiter_after, create_waited, &c, false, true};
    mv__create_begin(svc, req, &env);
    mv__waiter_run(&c.w);
    *messages = c.messages;
    if (replayed) *replayed = c.replayed;
    return c.rc;
}

/* mv_message_create_start's answer: here when done came before the start returned, else the
 * caller's env.done (a replay's answer then too). */
typedef struct create_started {
    pthread_mutex_t mu;
    mv_create_async env;
    bool returned, early;
    mv_code rc;
    json_t *messages;
    bool replayed;
    mv_err err;
} create_started;

static void started_done(void *ctx, mv_code rc, json_t *messages, bool replayed,
                         const mv_err *err) {
    create_started *s = ctx;
    pthread_mutex_lock(&s->mu);
    if (!s->returned) {
        s->early = true;
        s->rc = rc;
        s->messages = messages;
        s->replayed = replayed;
        if (rc != MV_OK) mv_err_copy(&s->err, err);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    pthread_mutex_unlock(&s->mu);
    mv_create_async env = s->env;
    pthread_mutex_destroy(&s->mu);
    free(s);
    env.done(env.done_ctx, rc, messages, err);
}

mv_code mv_message_create_start(mv_service *svc, const mv_create_request *req,
                                const mv_create_async *env, bool *started, json_t **messages,
                                bool *replayed, mv_err *err) {
    *started = false;
    *messages = NULL;
    if (replayed) *replayed = false;
    if (!svc->o.loop || !env || !env->submit || !env->done)
        return mv_message_create(svc, req, messages, replayed, err);
    create_started *s = calloc(1, sizeof *s);
    if (!s) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->env = *env;
    mv__create_env e = {env->submit, env->submit_ctx, NULL, started_done, s, false, true};
    mv__create_begin(svc, req, &e);
    pthread_mutex_lock(&s->mu);
    s->returned = true;
    bool early = s->early;
    pthread_mutex_unlock(&s->mu);
    if (!early) {
        *started = true;
        return MV_OK;
    }
    mv_code rc = s->rc;
    *messages = s->messages;
    if (replayed) *replayed = s->replayed;
    if (rc != MV_OK) mv_err_copy(err, &s->err);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return rc;
}

/* ---- mv_action_handle --------------------------------------------------------------------- */

typedef struct action_wait {
    mv__waiter w;
    mv_code rc;
    json_t *result;
    mv_err *err;
} action_wait;

static void action_waited(void *ctx, mv_code rc, json_t *result, const mv_err *err) {
    action_wait *a = ctx;
    a->rc = rc;
    a->result = result;
    if (rc != MV_OK) mv_err_copy(a->err, err);
    mv__waiter_finish(&a->w);
}

mv_code mv_action_handle(mv_service *svc, const mv_action_request *req, json_t **result,
                         mv_err *err) {
    action_wait a = {.err = err};
    mv__waiter_init(&a.w);
    mv__action_env env = {mv__waiter_submit, &a.w, action_waited, &a, true};
    mv__action_begin(svc, req, &env);
    mv__waiter_run(&a.w);
    *result = a.result;
    return a.rc;
}
