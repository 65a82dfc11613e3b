/* timers.c — the timer engine under a burst: PENDING pending timers of which DUE fall due within
 * the same second, fired by ENGINES engine loops (each its own store handle, as daemons sharing
 * the store) with a local effect each (one INSERT into fire_log in the fire's transaction). Prints
 * one JSON line: fire lag percentiles (fired − due, ms), whether every due timer fired exactly
 * once (fire_log rows = distinct ids = due), and the process CPU per fire over the burst.
 *
 * usage: timers STORE_URL PENDING DUE [ENGINES [BATCH]]   (a fresh store: sqlite:PATH or postgres://…) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "durable/timer.h"
#include "missive/base.h"
#include "store/db.h"

static const char SQL_LOG_TABLE[] = "CREATE TABLE IF NOT EXISTS fire_log (timer_id TEXT NOT NULL)";
static const char SQL_LOG[] = "INSERT INTO fire_log (timer_id) VALUES (?)";
static const char SQL_LOG_COUNT[] = "SELECT COUNT(*), COUNT(DISTINCT timer_id) FROM fire_log";

static atomic_int fired;
static int64_t *lags;
static int lag_cap;

static mv_code exec_fn(mv_db *db, void *ctx, mv_err *err) { return mv_db_exec(db, ctx, err); }

typedef struct {
    int from, to, due_from;
    int64_t due_at, far_at, now;
} seed_arg;

/* Timers [from, to): those at or above due_from are due within the burst's second. */
static mv_code seed_fn(mv_db *db, void *ctx, mv_err *err) {
    seed_arg *a = ctx;
    mv_code rc = MV_OK;
    for (int i = a->from; i < a->to && rc == MV_OK; i++) {
        char id[32];
        snprintf(id, sizeof id, "t%07d", i);
        bool due = i >= a->due_from;
        int64_t at = due ? a->due_at + (i % 1000) : a->far_at + i;
        rc = mv__timer_schedule(db, id, "default", "bench", id, at, a->now, err);
    }
    return rc;
}

static mv_code local_fn(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    (void)ctx;
    (void)now;
    return mv_db_execf_later(db, SQL_LOG, err, "s", t->id);
}

static void on_fired(void *ctx, const mv__timer *t, int64_t lag_ms) {
    (void)ctx;
    (void)t;
    int i = atomic_fetch_add(&fired, 1);
    if (i < lag_cap) lags[i] = lag_ms;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

typedef struct {
    int64_t a, b;
} pair;

static mv_code count_fn(mv_db *db, void *ctx, mv_err *err) {
    pair *p = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_LOG_COUNT, &st, err, "");
    if (rc == MV_OK && st) {
        p->a = mv_stmt_int64(st, 0);
        p->b = mv_stmt_int64(st, 1);
        mv_stmt_done(st);
    }
    return rc;
}

static int die(const char *what, const mv_err *err) {
    fprintf(stderr, "timers: %s: %s\n", what, err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fputs("usage: timers STORE_URL PENDING DUE [ENGINES [BATCH]]\n", stderr);
        return 2;
    }
    const char *url = argv[1];
    int pending = atoi(argv[2]), due = atoi(argv[3]), engines = argc > 4 ? atoi(argv[4]) : 2;
    int batch = argc > 5 ? atoi(argv[5]) : 0; /* 0: the engine's default */
    if (due > pending || due < 1 || engines < 1 || engines > 8) return 2;
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &s, &err) || mv_store_migrate(s, NULL, &err) ||
        mv_store_write(s, exec_fn, (void *)SQL_LOG_TABLE, &err))
        return die("store", &err);
    /* the far timers first, then the burst's, due in a whole second 7-8 s after the far ones are in
     */
    int64_t now = mv_now_ms(), due_at = 0;
    for (int from = 0; from < pending; from += 5000) {
        int to = from + 5000 < pending ? from + 5000 : pending;
        if (from < pending - due && to > pending - due) to = pending - due;
        if (from == pending - due) due_at = (mv_now_ms() / 1000 + 8) * 1000;
        seed_arg a = {from, to, pending - due, due_at, now + 86400000, mv_now_ms()};
        if (to > from && mv_store_write(s, seed_fn, &a, &err)) return die("seed", &err);
        if (to < from + 5000 && to != pending) from = to - 5000; /* the loop adds 5000 back */
    }
    if (mv_now_ms() > due_at - 500) {
        fputs("timers: seeding the burst took too long to measure its lag\n", stderr);
        return 1;
    }
    lag_cap = due;
    lags = calloc((size_t)due, sizeof *lags);
    mv_store *stores[8] = {0};
    mv__timer_engine *e[8] = {0};
    for (int i = 0; i < engines; i++) {
        mv__timer_engine_options o = {.on_fired = on_fired, .batch = batch};
        if (mv_store_open(url, NULL, &stores[i], &err) ||
            mv__timer_engine_new(stores[i], &o, &e[i], &err) ||
            mv__timer_engine_register(e[i], "bench", NULL, local_fn, NULL, &err) ||
            mv__timer_engine_start(e[i], &err))
            return die("engine", &err);
    }
    while (mv_now_ms() < due_at - 200)
        mv_sleep_ms(10);
    double cpu0 = cpu_s();
    int64_t deadline = due_at + 30000;
    while (atomic_load(&fired) < due && mv_now_ms() < deadline)
        mv_sleep_ms(5);
    double cpu = cpu_s() - cpu0;
    int n = atomic_load(&fired);
    for (int i = 0; i < engines; i++) {
        mv__timer_engine_free(e[i]);
        mv_store_close(stores[i]);
    }
    pair c = {0, 0};
    if (mv_store_read(s, count_fn, &c, &err)) return die("count", &err);
    int k = n < lag_cap ? n : lag_cap;
    qsort(lags, (size_t)k, sizeof *lags, cmp64);
    int64_t p50 = k ? lags[k / 2] : -1, p99 = k ? lags[(k * 99) / 100 - (k >= 100)] : -1,
            max = k ? lags[k - 1] : -1;
    printf("{\"pending\": %d, \"due\": %d, \"engines\": %d, \"fired\": %d, \"log_rows\": %lld, "
           "\"log_distinct\": %lld, \"once\": %s, \"p50_ms\": %lld, \"p99_ms\": %lld, "
           "\"max_ms\": %lld, \"cpu_us_per_fire\": %.1f}\n",
           pending, due, engines, n, (long long)c.a, (long long)c.b,
           c.a == due && c.b == due && n == due ? "true" : "false", (long long)p50, (long long)p99,
           (long long)max, n ? cpu * 1e6 / n : 0.0);
    free(lags);
    mv_store_close(s);
    return c.a == due && c.b == due ? 0 : 1;
}
