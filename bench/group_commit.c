/* group_commit.c — the store's write path through the library, without HTTP: THREADS threads
 * each submit writes back to back for SECONDS on one store (sqlite:PATH with synchronous=FULL, or
 * postgresql://…), and every write must succeed.
 *
 *   write   a 1-row INSERT job per mv_store_write (the group-commit engine alone)
 *   async   the same job per mv__store_write_async, each thread waiting for its done
 *   create  mv_message_create of the benchmark's one-receiver note (the whole create)
 *
 * Prints one JSON line: rate, latency percentiles, the process CPU per write and, on Linux, the
 * bytes the process wrote to storage per write (/proc/self/io write_bytes: WAL, checkpoints).
 *
 * usage: group_commit STORE_URL MODE [SECONDS] [THREADS] [PENDING_TIMERS]
 *   (a fresh store; PENDING_TIMERS far-future timers are scheduled first, default 0) */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "durable/timer.h"
#include "missive/base.h"
#include "missive/message.h"
#include "store/db.h"
#include "store/write_async.h"

static const char SQL_TABLE[] =
    "CREATE TABLE IF NOT EXISTS bench_rows (id BIGINT PRIMARY KEY, body TEXT NOT NULL)";
static const char SQL_INSERT[] = "INSERT INTO bench_rows (id, body) VALUES (?, ?)";
static const char BODY[] = "{\"title\": \"a benchmark row of about the size of a message\"}";

static const char TEMPLATE[] =
    "{\"templateCd\": \"bench-note\", \"type\": \"request\", \"description\": \"bench\","
    " \"senderContent\": {\"title\": \"Note {{n}} to {{to}}\", \"short\": \"\", \"long\": \"\"},"
    " \"receiverContent\": {\"title\": \"Note {{n}}\", \"short\": \"{{text}}\", \"long\": \"\"},"
    " \"uiTemplate\": \"note\", \"prepare\": {\"toUser\": \"{{to}}\", \"toRoles\": [],"
    " \"fanOut\": null}, \"actions\": [{\"actionCd\": \"ack\", \"name\": \"Ack\","
    " \"variant\": \"primary\", \"receiver\": true, \"handler\": null}]}";

static mv_store *store;
static mv_service *svc;
static const char *mode;
static atomic_bool stop_flag;
static atomic_long errors;
static char first_error[600];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long long write_bytes(void) {
    FILE *f = fopen("/proc/self/io", "r");
    long long v = -1;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "write_bytes: %lld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

static mv_code exec_fn(mv_db *db, void *ctx, mv_err *err) { return mv_db_exec(db, ctx, err); }

static mv_code insert_fn(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf_later(db, SQL_INSERT, err, "is", *(int64_t *)ctx, BODY);
}

typedef struct {
    int from, to;
} timers_arg;

static mv_code timers_fn(mv_db *db, void *ctx, mv_err *err) {
    timers_arg *a = ctx;
    int64_t far = mv_now_ms() + 365LL * 86400000;
    mv_code rc = MV_OK;
    for (int i = a->from; i < a->to && rc == MV_OK; i++) {
        char id[32];
        snprintf(id, sizeof id, "bench-%08d", i);
        rc = mv__timer_schedule(db, id, "default", "bench", id, far + i, far - 1000, err);
    }
    return rc;
}

typedef struct {
    sem_t done;
    mv_code rc;
} waiter;

static void async_done(mv_code rc, const mv_err *err, void *ctx) {
    (void)err;
    waiter *w = ctx;
    w->rc = rc;
    sem_post(&w->done);
}

typedef struct {
    int index;
    double *lat;
    size_t n, cap;
} worker;

static void note_error(const mv_err *err) {
    if (atomic_fetch_add(&errors, 1) == 0)
        snprintf(first_error, sizeof first_error, "%s", err ? err->message : "?");
}

static void *run_worker(void *arg) {
    worker *w = arg;
    waiter wt;
    sem_init(&wt.done, 0, 0);
    char me[32], to[32];
    snprintf(me, sizeof me, "bench-sender-%d", w->index);
    snprintf(to, sizeof to, "bench-receiver-%d", w->index % 8);
    mv_user user = {.id = me};
    for (int64_t i = 0; !atomic_load(&stop_flag); i++) {
        int64_t id = (int64_t)w->index * 100000000 + i;
        mv_err err = {0};
        mv_code rc;
        double t = now_s();
        if (strcmp(mode, "write") == 0) {
            rc = mv_store_write(store, insert_fn, &id, &err);
        } else if (strcmp(mode, "async") == 0) {
            mv__store_write_async(store, insert_fn, &id, async_done, &wt);
            while (sem_wait(&wt.done) != 0) {
            }
            rc = wt.rc;
        } else {
            json_t *payload = json_pack("{s:s,s:I,s:s}", "to", to, "n", (json_int_t)i, "text",
                                        "a benchmark note");
            mv_create_request req = {
                .template_cd = "bench-note", .user = &user, .payload = payload};
            json_t *messages = NULL;
            rc = mv_message_create(svc, &req, &messages, NULL, &err);
            json_decref(messages);
            json_decref(payload);
        }
        if (rc != MV_OK) {
            note_error(&err);
            continue;
        }
        if (w->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 4096;
            w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
        }
        w->lat[w->n++] = now_s() - t;
    }
    sem_destroy(&wt.done);
    return NULL;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: group_commit STORE_URL write|async|create [SECONDS] [THREADS] [PENDING]\n",
              stderr);
        return 2;
    }
    mode = argv[2];
    double seconds = argc > 3 ? atof(argv[3]) : 5;
    int threads = argc > 4 ? atoi(argv[4]) : 32, pending = argc > 5 ? atoi(argv[5]) : 0;
    if (threads < 1 || threads > 1024) threads = 32;
    mv_err err = {0};
    mv_store_options so = {.pool_size = threads < 8 ? 8 : threads};
    if (mv_store_open(argv[1], &so, &store, &err) != MV_OK ||
        mv_store_migrate(store, NULL, &err) != MV_OK ||
        mv_store_write(store, exec_fn, (void *)SQL_TABLE, &err) != MV_OK) {
        fprintf(stderr, "group_commit: %s\n", err.message);
        return 1;
    }
    for (int from = 0; from < pending; from += 10000) {
        timers_arg a = {from, from + 10000 < pending ? from + 10000 : pending};
        if (mv_store_write(store, timers_fn, &a, &err) != MV_OK) {
            fprintf(stderr, "group_commit: timers: %s\n", err.message);
            return 1;
        }
    }
    mv_registry *reg = mv_registry_new();
    json_t *tpl = json_loads(TEMPLATE, 0, NULL);
    mv_service_options o = {.store = store, .registry = reg};
    if (!tpl || mv_registry_register(reg, tpl, "<bench>", &err) != MV_OK ||
        mv_service_new(&o, &svc, &err) != MV_OK) {
        fprintf(stderr, "group_commit: service: %s\n", err.message);
        return 1;
    }
    json_decref(tpl);
    worker *ws = calloc((size_t)threads, sizeof *ws);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    long long b0 = write_bytes();
    double c0 = cpu_s(), t0 = now_s();
    for (int i = 0; i < threads; i++) {
        ws[i].index = i;
        pthread_create(&th[i], NULL, run_worker, &ws[i]);
    }
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop_flag, true);
    size_t n = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        n += ws[i].n;
    }
    double elapsed = now_s() - t0, cpu = cpu_s() - c0;
    long long b1 = write_bytes();
    double *lat = malloc((n ? n : 1) * sizeof *lat);
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(lat + k, ws[i].lat, ws[i].n * sizeof *lat);
        k += ws[i].n;
        free(ws[i].lat);
    }
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("{\"bench\": \"group-commit-%s\", \"threads\": %d, \"pending_timers\": %d, "
           "\"seconds\": %.2f, \"ops\": %zu, \"errors\": %ld, \"rate\": %.1f, \"p50_ms\": %.3f, "
           "\"p99_ms\": %.3f, \"cpu_us_per_op\": %.0f, \"bytes_per_op\": %.0f}\n",
           mode, threads, pending, elapsed, n, atomic_load(&errors), (double)n / elapsed,
           n ? lat[n / 2] * 1e3 : 0, n ? lat[(size_t)(0.99 * (double)(n - 1))] * 1e3 : 0,
           n ? cpu * 1e6 / (double)n : 0,
           n && b0 >= 0 && b1 >= 0 ? (double)(b1 - b0) / (double)n : -1);
    if (atomic_load(&errors)) fprintf(stderr, "group_commit: first error: %s\n", first_error);
    free(lat);
    free(ws);
    free(th);
    mv_service_free(svc);
    mv_registry_free(reg);
    mv_store_close(store);
    return n && !atomic_load(&errors) ? 0 : 1;
}
