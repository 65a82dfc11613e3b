/* outbox_drain.c — how fast the outbox drains a backlog of channel deliveries, against what the
 * receiver itself can take. First the receiver's own limit: N signed POSTs sent straight through
 * the outgoing-call loop, 64 at a time, no store. Then N webhook rows are queued in the store (in
 * transactions of 500, as creates would leave them) and the outbox worker, as the daemon runs it
 * (its batches on the same loop), delivers them; the clock stops when none is pending.
 *
 * Both keep their connections to the receiver alive, as the outbox does.
 *
 * usage: outbox_drain STORE_URL RECEIVER_URL [N]   (prints one JSON line; the store is fresh) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "deliver/transport.h"
#include "missive/deliver.h"
#include "missive/store.h"
#include "store/db.h"

#define IN_FLIGHT 64

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct direct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_flight, done, failed;
} direct;

static void posted(void *ctx, mv_code rc, mv_webhook_response *res, const mv_err *err) {
    (void)err;
    direct *d = ctx;
    pthread_mutex_lock(&d->mu);
    d->in_flight--;
    d->done++;
    d->failed += rc != MV_OK || !res || res->status / 100 != 2;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    mv_webhook_response_free(res);
}

/* The receiver's own rate: n POSTs, IN_FLIGHT at a time. */
static double receiver_rate(mv_loop *loop, const mv_webhook_config *wh, const char *url, int n,
                            int *failed) {
    direct d = {.in_flight = 0};
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    json_t *body = json_pack("{s:s,s:s}", "channel", "sms", "kind", "message");
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&d.mu);
        while (d.in_flight >= IN_FLIGHT)
            pthread_cond_wait(&d.cv, &d.mu);
        d.in_flight++;
        pthread_mutex_unlock(&d.mu);
        char key[32];
        snprintf(key, sizeof key, "direct-%d", i);
        if (mv__webhook_post_async_reusing(loop, wh, url, body, key, posted, &d, NULL) != MV_OK) {
            pthread_mutex_lock(&d.mu);
            d.in_flight--;
            d.done++;
            d.failed++;
            pthread_mutex_unlock(&d.mu);
        }
    }
    pthread_mutex_lock(&d.mu);
    while (d.done < n)
        pthread_cond_wait(&d.cv, &d.mu);
    pthread_mutex_unlock(&d.mu);
    double secs = now_s() - t0;
    json_decref(body);
    *failed = d.failed;
    return n / secs;
}

typedef struct queue_arg {
    const char *url;
    int from, to;
} queue_arg;

static mv_code queue_tx(mv_db *db, void *ctx, mv_err *err) {
    queue_arg *a = ctx;
    for (int i = a->from; i < a->to; i++) {
        char key[40];
        snprintf(key, sizeof key, "delivery-%d", i);
        json_t *row = json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:s}},s:s}", "url", a->url, "body",
                                "channel", "sms", "deliveryId", key, "kind", "message", "content",
                                "title", "A message", "idempotencyKey", key);
        mv_code rc = mv_outbox_add_tx(db, MV_OUTBOX_WEBHOOK, row, 0, err);
        json_decref(row);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: outbox_drain STORE_URL RECEIVER_URL [N]\n");
        return 2;
    }
    const char *url = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 10000;
    mv_err err = {0};
    mv_store *store = NULL;
    mv_loop *loop = NULL;
    static const char SECRET[] = "outbox-drain-bench-secret";
    mv_webhook_config wh = {.secret = SECRET, .secret_len = sizeof SECRET - 1};
    if (mv_store_open(argv[1], NULL, &store, &err) != MV_OK ||
        mv_store_migrate(store, NULL, &err) != MV_OK || mv_loop_new(NULL, &loop, &err) != MV_OK) {
        fprintf(stderr, "outbox_drain: %s\n", err.message);
        return 1;
    }
    int direct_failed = 0;
    double limit = receiver_rate(loop, &wh, url, n, &direct_failed);
    for (int i = 0; i < n; i += 500) {
        queue_arg a = {url, i, i + 500 < n ? i + 500 : n};
        if (mv_store_write(store, queue_tx, &a, &err) != MV_OK) {
            fprintf(stderr, "outbox_drain: queue: %s\n", err.message);
            return 1;
        }
    }
    mv_outbox_config oc = {.webhook = &wh, .loop = loop};
    mv_outbox_worker *w = NULL;
    double t0 = now_s();
    clock_t c0 = clock();
    if (mv_outbox_worker_start(store, &oc, 50, &w, &err) != MV_OK) {
        fprintf(stderr, "outbox_drain: worker: %s\n", err.message);
        return 1;
    }
    int64_t pending = n, failed = 0;
    while (pending > 0 && now_s() - t0 < 600) {
        usleep(20 * 1000);
        if (mv_outbox_depth(store, &pending, &failed, &err) != MV_OK) break;
    }
    double secs = now_s() - t0;
    double cpu_us = (double)(clock() - c0) * 1e6 / CLOCKS_PER_SEC;
    mv_outbox_worker_stop(w);
    printf("{\"bench\": \"outbox-drain\", \"deliveries\": %d, \"seconds\": %.2f, \"rate\": %.1f, "
           "\"receiver_rate\": %.1f, \"receiver_failed\": %d, \"left\": %lld, \"failed\": %lld, "
           "\"cpu_us_per_delivery\": %.0f}\n",
           n, secs, n / secs, limit, direct_failed, (long long)pending, (long long)failed,
           cpu_us / n);
    mv_loop_free(loop);
    mv_store_close(store);
    return pending == 0 && failed == 0 && direct_failed == 0 ? 0 : 1;
}
