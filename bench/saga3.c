/* saga3.c — sagas per second through the library on any store: a saga of three no-op steps (each
 * a journaled effect with a compensation argument), run to completion by N threads for S seconds
 * on one store. On SQLite (sqlite:PATH, synchronous=FULL) every save is durable and concurrent
 * saves group-commit; on PostgreSQL (postgresql://…) every save is its own transaction on one of
 * POOL pooled connections, as durable as the server's fsync/synchronous_commit make it.
 * Every saga must end "completed"; anything else is an error and fails the run.
 *
 * usage: saga3 STORE_URL [SECONDS] [THREADS] [POOL]     (prints one JSON line; POOL default 8) */
#include <pthread.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "missive/durable.h"

static mv_saga_engine *engine;
static atomic_bool stop_flag;
static atomic_long errors;
static char first_error[512];
static pthread_mutex_t error_mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static mv_code noop_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)call, (void)ctx, (void)err;
    *result = json_pack("{s:b}", "ok", 1);
    return MV_OK;
}

static mv_code noop_compensate(const json_t *args, const mv_saga_compensation_call *call,
                               void *ctx, mv_err *err) {
    (void)args, (void)call, (void)ctx, (void)err;
    return MV_OK;
}

static mv_code run3(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input, (void)def_ctx;
    static const char *const steps[] = {"reserve", "charge", "confirm"};
    for (int i = 0; i < 3; i++) {
        json_t *args = json_pack("{s:i}", "step", i);
        mv_code rc = mv_saga_step(ctx, steps[i], args, noop_step, NULL, NULL, err);
        json_decref(args);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static const mv_saga_compensator COMPENSATORS[] = {
    {"reserve", noop_compensate, NULL}, {"charge", noop_compensate, NULL},
    {"confirm", noop_compensate, NULL}};
static const mv_saga_definition SAGA3 = {.name = "bench-saga3",
                                         .run = run3,
                                         .compensators = COMPENSATORS,
                                         .ncompensators = 3};

typedef struct {
    int index;
    long ops;
    double *lat;
    size_t n, cap;
} worker;

static void fail(const char *fmt, const char *a, const char *b) {
    atomic_fetch_add(&errors, 1);
    pthread_mutex_lock(&error_mu);
    if (!first_error[0]) snprintf(first_error, sizeof first_error, fmt, a, b);
    pthread_mutex_unlock(&error_mu);
}

static void *run_worker(void *arg) {
    worker *w = arg;
    json_t *input = json_pack("{s:s}", "order", "bench");
    for (long i = 0; !atomic_load_explicit(&stop_flag, memory_order_relaxed); i++) {
        char id[96];
        snprintf(id, sizeof id, "bench-%d-%d-%ld", (int)getpid(), w->index, i);
        json_t *rec = NULL;
        mv_err err = {0};
        double t0 = now_s();
        mv_code rc = mv_saga_execute(engine, &SAGA3, id, input, NULL, &rec, &err);
        double dt = now_s() - t0;
        const char *state = rec ? json_string_value(json_object_get(rec, "state")) : NULL;
        if (rc != MV_OK) fail("saga %s: %.400s", id, err.message); /* first_error holds it */
        else if (!state || strcmp(state, "completed") != 0)
            fail("saga %s ended %s", id, state ? state : "(no record)");
        else {
            if (w->n == w->cap) {
                w->cap = w->cap ? w->cap * 2 : 4096;
                w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
                if (!w->lat) abort();
            }
            w->lat[w->n++] = dt;
            w->ops++;
        }
        json_decref(rec);
    }
    json_decref(input);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: saga3 STORE_URL [SECONDS] [THREADS] [POOL]\n", stderr);
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 5;
    int threads = argc > 3 ? atoi(argv[3]) : 32;
    int pool = argc > 4 ? atoi(argv[4]) : 8;
    if (seconds <= 0 || threads < 1 || pool < 1 || pool > 1024) return 2;
    mv_store *store = NULL;
    mv_err err = {0};
    mv_store_options so = {.pool_size = pool};
    if (mv_store_open(argv[1], &so, &store, &err) != MV_OK ||
        mv_store_migrate(store, NULL, &err) != MV_OK ||
        mv_saga_engine_new(store, NULL, &engine, &err) != MV_OK) {
        fprintf(stderr, "saga3: %s\n", err.message);
        mv_store_close(store);
        return 1;
    }
    worker *ws = calloc((size_t)threads, sizeof *ws);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    double t0 = now_s();
    for (int i = 0; i < threads; i++) {
        ws[i].index = i;
        pthread_create(&tids[i], NULL, run_worker, &ws[i]);
    }
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop_flag, true);
    long ops = 0;
    size_t n = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        ops += ws[i].ops;
        n += ws[i].n;
    }
    double elapsed = now_s() - t0;
    double *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        if (ws[i].n) memcpy(all + k, ws[i].lat, ws[i].n * sizeof *all);
        k += ws[i].n;
        free(ws[i].lat);
    }
    qsort(all, n, sizeof *all, cmp_double);
    long e = atomic_load(&errors);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* this process's CPU: the library's side of every saga */
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    printf("{\"bench\": \"saga3\", \"threads\": %d, \"seconds\": %.2f, \"ops\": %ld, "
           "\"errors\": %ld, \"rate\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
           "\"cpu_us_per_op\": %.0f",
           threads, elapsed, ops, e, (double)ops / elapsed, n ? all[n / 2] * 1e3 : 0,
           n ? all[(size_t)(0.99 * (double)(n - 1))] * 1e3 : 0, ops ? cpu * 1e6 / (double)ops : 0);
    if (e) {
        printf(", \"first_error\": \"");
        for (const char *p = first_error; *p; p++)
            printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        printf("\"");
    }
    printf("}\n");
    free(all);
    free(ws);
    free(tids);
    mv_saga_engine_free(engine);
    mv_store_close(store);
    return e || !ops ? 1 : 0;
}
