/* jwks.c — the JWKS cache: one refcounted key set swapped under a mutex, one refresher thread.
 *
 * Invariant: `current` only ever moves from one good set to a newer good set; a failed fetch
 * changes nothing but the log. The thread sleeps on a monotonic condition variable until the
 * next periodic refresh or an unknown-kid request, fetches without holding the lock (so
 * verifications continue meanwhile), then bumps `generation` so a waiting request knows its
 * refresh is done, and calls the waiters (requests parked without a thread) whose fetch that was.
 * Kid refreshes are single-flight: one fetch at a time, at most one per kid interval, and every
 * request that meets an unknown kid meanwhile waits for that same fetch. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono.h"
#include "deliver/transport.h"
#include "http/jwks.h"
#include "http/request.h"

struct mv_jwks_source {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mv_jwks *current;
    char *url;
    mv_webhook_config http;
    int64_t refresh_ms, kid_interval_ms;
    int64_t last_fetch, last_kid_refresh; /* monotonic ms; last_kid_refresh < 0: never */
    unsigned long started, generation;    /* fetch attempts begun / completed (sequential) */
    unsigned long kid_target;             /* the fetch an unknown-kid refresh waits for */
    mv_jwks_waiter *waiters;              /* parked until their generation is done */
    bool want, stop, thread_started;
    pthread_t thread;
};

static void wait_until(mv_jwks_source *s, int64_t deadline_ms) {
    struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

static mv_code load_file(const char *path, mv_jwks **out, mv_err *err) {
    json_t *doc = NULL;
    mv_code rc = mv_json_load_file(path, &doc, err);
    if (rc == MV_OK) rc = mv_jwks_parse(doc, out, err);
    if (rc != MV_OK && rc != MV_IO) mv_err_prefix(err, "%s", path);
    json_decref(doc);
    return rc;
}

/* One GET of the URL; a new set or NULL (the reason is logged, URL redacted by the client). */
static mv_jwks *fetch(mv_jwks_source *s) {
    mv_webhook_response res = {0};
    mv_err err = {0};
    mv_jwks *set = NULL;
    mv_code rc = mv_webhook_get(&s->http, s->url, &res, &err);
    if (rc == MV_OK && !res.json)
        rc = mv_err_set(&err, MV_INVALID_ARGUMENT, "the JWKS answer is not JSON");
    if (rc == MV_OK) rc = mv_jwks_parse(res.json, &set, &err);
    mv_webhook_response_free(&res);
    if (rc != MV_OK) {
        char shown[512];
        mv_url_redacted(s->url, shown, sizeof shown);
        char *q = strpbrk(shown, "?#");
        if (q) *q = '\0';
        mv_log("warn", "jwks refresh failed; keeping the last good keys",
               json_pack("{s:s,s:s}", "url", shown, "error", err.message));
    }
    return set;
}

/* Calls (without the lock) the waiters whose fetch is done; s->mu is held on entry and exit. */
static void wake_waiters(mv_jwks_source *s) {
    mv_jwks_waiter *due = NULL, **p = &s->waiters;
    while (*p) {
        mv_jwks_waiter *w = *p;
        if (w->generation <= s->generation) {
            *p = w->next;
            w->next = due;
            due = w;
        } else {
            p = &w->next;
        }
    }
    if (!due) return;
    pthread_mutex_unlock(&s->mu);
    while (due) {
        mv_jwks_waiter *w = due;
        due = w->next; /* read before fn: the record may be gone once it ran */
        w->fn(w->ctx);
    }
    pthread_mutex_lock(&s->mu);
}

static void *refresher(void *arg) {
    mv_jwks_source *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        int64_t every =
            s->current ? s->refresh_ms
                       : (s->kid_interval_ms < s->refresh_ms ? s->kid_interval_ms : s->refresh_ms);
        int64_t deadline = s->last_fetch + every;
        while (!s->stop && !s->want && mv__mono_ms() < deadline)
            wait_until(s, deadline);
        if (s->stop) break;
        s->want = false;
        s->started++;
        pthread_mutex_unlock(&s->mu);
        mv_jwks *set = fetch(s);
        pthread_mutex_lock(&s->mu);
        if (set) {
            mv_jwks_release(s->current);
            s->current = set;
        }
        s->last_fetch = mv__mono_ms();
        s->generation++;
        pthread_cond_broadcast(&s->cv);
        if (!s->stop) wake_waiters(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

mv_code mv_jwks_source_open(const mv_jwks_source_options *o, mv_jwks_source **out, mv_err *err) {
    *out = NULL;
    if (!o->file == !o->url)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "a JWKS source needs exactly one of a file and a URL");
    mv_jwks_source *s = calloc(1, sizeof *s);
    if (!s) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->refresh_ms = (o->refresh_s > 0 ? o->refresh_s : 300) * (int64_t)1000;
    s->kid_interval_ms = o->kid_interval_ms > 0 ? o->kid_interval_ms : 10000;
    s->last_kid_refresh = -1;
    if (o->http) s->http = *o->http;
    s->http.secret = NULL; /* a key set request carries no webhook signature */
    s->http.secret_len = 0;
    s->http.secrets = NULL;
    s->http.nsecrets = 0;
    mv_code rc;
    if (o->file) {
        rc = load_file(o->file, &s->current, err);
    } else if (!(s->url = strdup(o->url))) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    } else {
        s->current = fetch(s);
        s->last_fetch = mv__mono_ms();
        s->started = s->generation = 1;
        rc = pthread_create(&s->thread, NULL, refresher, s) == 0
                 ? MV_OK
                 : mv_err_set(err, MV_INTERNAL, "cannot start the JWKS refresher thread");
        s->thread_started = rc == MV_OK;
    }
    if (rc != MV_OK) {
        mv_jwks_source_close(s);
        return rc;
    }
    *out = s;
    return MV_OK;
}

void mv_jwks_source_close(mv_jwks_source *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    mv_jwks_release(s->current);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->url);
    free(s);
}

mv_jwks *mv_jwks_source_get(mv_jwks_source *s) {
    pthread_mutex_lock(&s->mu);
    mv_jwks *set = mv_jwks_retain(s->current);
    pthread_mutex_unlock(&s->mu);
    return set;
}

/* Starts an unknown-kid refresh unless one ran within the kid interval; returns the generation
 * to wait for, 0 when there is none. s->mu held. */
static unsigned long kid_refresh_locked(mv_jwks_source *s, int64_t now) {
    if (s->url && (s->last_kid_refresh < 0 || now - s->last_kid_refresh >= s->kid_interval_ms)) {
        s->last_kid_refresh = now;
        /* a fetch already running may have begun before the rotation: wait for the next one */
        s->kid_target = s->started + 1;
        s->want = true;
        pthread_cond_broadcast(&s->cv);
    }
    /* every request that meets an unknown kid while that refresh runs waits for it too, so a
     * burst of tokens signed with a new key right after a rotation all verify */
    return s->generation < s->kid_target ? s->kid_target : 0;
}

mv_jwks *mv_jwks_source_refresh(mv_jwks_source *s) {
    pthread_mutex_lock(&s->mu);
    int64_t now = mv__mono_ms();
    unsigned long target = kid_refresh_locked(s, now);
    int timeout = s->http.timeout_ms > 0 ? s->http.timeout_ms : 10000;
    int64_t deadline = now + 2 * (int64_t)timeout + 1000;
    while (!s->stop && s->generation < target && mv__mono_ms() < deadline)
        wait_until(s, deadline);
    mv_jwks *set = mv_jwks_retain(s->current);
    pthread_mutex_unlock(&s->mu);
    return set;
}

unsigned long mv_jwks_source_request(mv_jwks_source *s) {
    pthread_mutex_lock(&s->mu);
    unsigned long target = kid_refresh_locked(s, mv__mono_ms());
    pthread_mutex_unlock(&s->mu);
    return target;
}

bool mv_jwks_source_when(mv_jwks_source *s, mv_jwks_waiter *w) {
    pthread_mutex_lock(&s->mu);
    bool queued = !s->stop && s->generation < w->generation;
    if (queued) {
        w->next = s->waiters;
        s->waiters = w;
    }
    pthread_mutex_unlock(&s->mu);
    return queued;
}

unsigned long mv_jwks_source_fetches(mv_jwks_source *s) {
    pthread_mutex_lock(&s->mu);
    unsigned long g = s->generation;
    pthread_mutex_unlock(&s->mu);
    return g;
}
