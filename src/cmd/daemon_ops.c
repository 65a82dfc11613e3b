/* daemon_ops.c — what makes a running missived observable and self-healing: its metric families,
 * the observer of every outgoing webhook (counters, latency histogram, one warn line per failed
 * call) and the recovery loop (sagas whose runner died, retention of old client requests).
 *
 * Every family is declared with HELP and TYPE when the daemon opens, and every labelled counter
 * the daemon knows in advance is created at zero, so a dashboard sees a series before its first
 * event and `promtool check metrics` is clean. Figures read from the store (sagas, outbox,
 * reservations) are collected at scrape time; process figures come from /proc. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/callctx.h"
#include "cmd/daemon.h"
#include "durable/durable_internal.h"
#include "durable/timer.h"
#include "http/request.h"
#include "http/work_pool.h"
#include "message/timers.h"
#include "missive/operations.h"
#include "missive/reach.h"
#include "missive/saga_webhook.h"
#if __has_include("missive/version.h")
#include "missive/version.h"
#endif
#ifndef MV_VERSION_STRING
#define MV_VERSION_STRING "0.0.0"
#endif

static const char *const WEBHOOK_KINDS[] = {"handler",   "prepare",           "payment",
                                            "saga_step", "saga_compensation", "outbox",
                                            "email",     "directory",         "webhook"};
#define NKINDS (sizeof WEBHOOK_KINDS / sizeof WEBHOOK_KINDS[0])

static const struct {
    const char *name, *type, *help;
} FAMILIES[] = {
    {"missive_build_info", "gauge", "Always 1; the version label names the running missive."},
    {"process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds."},
    {"process_resident_memory_bytes", "gauge", "Resident memory size, in bytes."},
    {"process_open_fds", "gauge", "Open file descriptors."},
    {"process_start_time_seconds", "gauge",
     "Start time of the process since the epoch, in seconds."},
    {"missive_webhook_requests_total", "counter",
     "Outgoing webhook calls by kind and outcome (ok, rejected, ambiguous, not_sent)."},
    {"missive_webhook_duration_seconds", "histogram", "Duration of outgoing webhook calls."},
    {"missive_sagas", "gauge", "Sagas in the store by state."},
    {"missive_approvals_total", "counter", "Approval decisions made through this daemon."},
    {"missive_stream_connections", "gauge", "Open live-update streams."},
    {"missive_stream_index_entries", "gauge",
     "Entries of the live-update streams' index: one per open stream and one per role of it."},
    {"missive_actions_total", "counter", "Action requests by outcome (ok or the error code)."},
    {"missive_outbox_rows", "gauge",
     "Outbox rows not yet delivered (pending) or given up (failed)."},
    {"missive_client_requests", "gauge", "Idempotent-create reservations by state."},
    {"missive_recovered_sagas_total", "counter",
     "Sagas this daemon's recovery loop drove on after their runner died, by action."},
    {"missive_timers", "gauge", "Timers in the store by kind and state."},
    {"missive_timer_lag_seconds", "histogram",
     "How late this daemon fired timers after they were due, by kind."},
};

static const char *const TIMER_KINDS[] = {"expiry", "reminder", "escalation",
                                          "snooze", "send",     "saga"};
#define NTIMER_KINDS (sizeof TIMER_KINDS / sizeof TIMER_KINDS[0])

/* ---- process figures ---------------------------------------------------------------------- */

static pthread_mutex_t cpu_mu = PTHREAD_MUTEX_INITIALIZER; /* concurrent scrapes add once */

static void collect_process(mv_metrics *m) {
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    double ticks = (double)sysconf(_SC_CLK_TCK);
    if (p && ticks > 0) {
        unsigned long long utime = 0, stime = 0, start = 0;
        long long rss = 0;
        /* fields 3.. after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime(14) stime(15) cutime cstime priority nice threads itrealvalue
         * starttime(22) vsize rss(24) */
        if (sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                   "%*d %*d %llu %*u %lld",
                   &utime, &stime, &start, &rss) == 4) {
            mv_metrics_counter_add(m, "process_cpu_seconds_total", NULL, 0);
            mv_metrics_gauge_set(m, "process_resident_memory_bytes", NULL,
                                 (double)rss * (double)sysconf(_SC_PAGESIZE));
            double cpu = (double)(utime + stime) / ticks;
            pthread_mutex_lock(&cpu_mu);
            double have = mv_metrics_value(m, "process_cpu_seconds_total", NULL);
            if (cpu > have)
                mv_metrics_counter_add(m, "process_cpu_seconds_total", NULL, cpu - have);
            pthread_mutex_unlock(&cpu_mu);
            FILE *s = fopen("/proc/stat", "r");
            char line[256];
            long long btime = -1;
            while (s && fgets(line, sizeof line, s))
                if (sscanf(line, "btime %lld", &btime) == 1) break;
            if (s) fclose(s);
            if (btime >= 0)
                mv_metrics_gauge_set(m, "process_start_time_seconds", NULL,
                                     (double)btime + (double)start / ticks);
        }
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int fds = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') fds++;
        closedir(d);
        mv_metrics_gauge_set(m, "process_open_fds", NULL, (double)(fds - 1)); /* minus d itself */
    }
}

/* missive_timers{kind,state}: every series the store has, and pending at zero for every kind. */
static void collect_timers(mv_metrics *m, mv_daemon *d) {
    json_t *counts = NULL;
    if (mv_timers_count(d->store, &counts, NULL) != MV_OK) return;
    for (size_t k = 0; k < NTIMER_KINDS; k++) {
        const char *l[] = {"kind", TIMER_KINDS[k], "state", "pending", NULL};
        mv_metrics_gauge_set(m, "missive_timers", l, 0);
    }
    size_t i;
    json_t *row;
    json_array_foreach(counts, i, row) {
        const char *l[] = {"kind", mv_json_str(row, "kind"), "state", mv_json_str(row, "state"),
                           NULL};
        mv_metrics_gauge_set(m, "missive_timers", l,
                             (double)json_integer_value(json_object_get(row, "count")));
    }
    json_decref(counts);
}

/* Gauges read when /metrics is scraped. */
static void collect(mv_metrics *m, void *ctx) {
    mv_daemon *d = ctx;
    collect_process(m);
    int64_t pending = 0, failed = 0;
    if (mv_outbox_depth(d->store, &pending, &failed, NULL) == MV_OK) {
        const char *p[] = {"state", "pending", NULL}, *f[] = {"state", "failed", NULL};
        mv_metrics_gauge_set(m, "missive_outbox_rows", p, (double)pending);
        mv_metrics_gauge_set(m, "missive_outbox_rows", f, (double)failed);
    }
    int64_t by_state[3] = {0};
    if (mv_requests_stats(d->store, by_state, NULL) == MV_OK) {
        const char *names[] = {"pending", "completed", "failed"};
        for (int i = 0; i < 3; i++) {
            const char *l[] = {"state", names[i], NULL};
            mv_metrics_gauge_set(m, "missive_client_requests", l, (double)by_state[i]);
        }
    }
    int64_t sagas[MV_SAGA_STATE_COUNT];
    if (mv_saga_counts(d->store, sagas, NULL) == MV_OK) {
        for (int i = 0; i < MV_SAGA_STATE_COUNT; i++) {
            const char *l[] = {"state", mv_saga_state_names[i], NULL};
            mv_metrics_gauge_set(m, "missive_sagas", l, (double)sagas[i]);
        }
    }
    if (d->streams)
        mv_metrics_gauge_set(m, "missive_stream_connections", NULL,
                             (double)mv_stream_hub_connections(d->streams));
    if (d->streams)
        mv_metrics_gauge_set(m, "missive_stream_index_entries", NULL,
                             (double)mv_stream_hub_index_entries(d->streams));
    collect_timers(m, d);
}

void mv_daemon_metrics_init(mv_daemon *d) {
    mv_metrics *m = d->metrics;
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
        mv_metrics_describe(m, FAMILIES[i].name, FAMILIES[i].type, FAMILIES[i].help);
    const char *version[] = {"version", MV_VERSION_STRING, NULL};
    mv_metrics_gauge_set(m, "missive_build_info", version, 1);
    for (size_t k = 0; k < NKINDS; k++) {
        for (int o = MV_WEBHOOK_OK; o <= MV_WEBHOOK_NOT_SENT; o++) {
            const char *l[] = {"kind", WEBHOOK_KINDS[k], "outcome",
                               mv_webhook_outcome_name((mv_webhook_outcome)o), NULL};
            mv_metrics_counter_add(m, "missive_webhook_requests_total", l, 0);
        }
        const char *l[] = {"kind", WEBHOOK_KINDS[k], NULL};
        mv_metrics_histogram_declare(m, "missive_webhook_duration_seconds", l);
    }
    for (int i = 0; i < 2; i++) {
        const char *l[] = {"decision", i == 0 ? "approved" : "denied", NULL};
        mv_metrics_counter_add(m, "missive_approvals_total", l, 0);
    }
    for (int i = 0; i < 2; i++) {
        const char *l[] = {"action", i == 0 ? "resume" : "compensate", NULL};
        mv_metrics_counter_add(m, "missive_recovered_sagas_total", l, 0);
    }
    mv_metrics_gauge_set(m, "missive_stream_connections", NULL, 0);
    mv_metrics_gauge_set(m, "missive_stream_index_entries", NULL, 0);
    for (size_t k = 0; k < NTIMER_KINDS; k++) {
        const char *l[] = {"kind", TIMER_KINDS[k], NULL};
        mv_metrics_histogram_declare(m, "missive_timer_lag_seconds", l);
    }
    collect(m, d); /* every gauge family gets its series before the first scrape */
    mv_metrics_set_collector(m, collect, d);
}

/* ---- the webhook observer ------------------------------------------------------------------ */

static void json_set_id(json_t *o, const char *key, const char *v) {
    if (v && *v) json_object_set_new(o, key, json_string(v));
}

void mv_daemon_on_webhook(void *ctx, const mv_webhook_call_info *call) {
    mv_daemon *d = ctx;
    const char *kind = "webhook";
    for (size_t k = 0; k < NKINDS; k++)
        if (strcmp(call->kind, WEBHOOK_KINDS[k]) == 0) kind = WEBHOOK_KINDS[k];
    const char *outcome = mv_webhook_outcome_name((mv_webhook_outcome)call->outcome);
    const char *l[] = {"kind", kind, "outcome", outcome, NULL};
    mv_metrics_counter_add(d->metrics, "missive_webhook_requests_total", l, 1);
    const char *h[] = {"kind", kind, NULL};
    mv_metrics_observe(d->metrics, "missive_webhook_duration_seconds", h, call->duration_s);
    if (call->outcome == MV_WEBHOOK_OK || !mv_log_enabled("warn")) return;
    json_t *f = json_pack("{s:s,s:s,s:s,s:s,s:i,s:f,s:s}", "kind", kind, "method", call->method,
                          "url", call->url, "outcome", outcome, "status", (int)call->status,
                          "durationMs", (double)(long long)(call->duration_s * 1e6) / 1e3,
                          "failure", call->failure ? call->failure : "");
    if (f) {
        json_set_id(f, "messageId", call->message_id);
        json_set_id(f, "actionAttemptId", call->attempt_id);
        json_set_id(f, "sagaId", call->saga_id);
        json_set_id(f, "traceparent", call->traceparent);
    }
    mv_log("warn", "webhook failed", f);
}

/* ---- the timer engine ------------------------------------------------------------------------ */

static void on_timer_fired(void *ctx, const mv__timer *t, int64_t lag_ms) {
    mv_daemon *d = ctx;
    const char *l[] = {"kind", t->kind, NULL};
    mv_metrics_observe(d->metrics, "missive_timer_lag_seconds", l,
                       (double)(lag_ms < 0 ? 0 : lag_ms) / 1000.0);
}

/* A woken saga's jobs (its saves between calls) run on the daemon's saga job threads. */
typedef struct {
    mv__job job;
    void (*fn)(void *);
    void *arg;
} saga_job;

static void saga_job_run(mv__job *job) {
    saga_job *j = (saga_job *)job;
    j->fn(j->arg);
    free(j);
}

static void saga_job_submit(void *ctx, void (*fn)(void *), void *arg) {
    saga_job *j;
    while (!(j = malloc(sizeof *j))) /* a saga's next job cannot be dropped: wait for memory */
        sched_yield();
    *j = (saga_job){.job = {.run = saga_job_run}, .fn = fn, .arg = arg};
    mv__work_pool_submit(ctx, &j->job);
}

mv_code mv_daemon_timers_start(mv_daemon *d, mv_err *err) {
    mv__timer_engine_options o = {.lease_ms = d->cfg->timers.lease_ms,
                                  .poll_ms = d->cfg->timers.poll_ms,
                                  .on_fired = on_timer_fired,
                                  .on_fired_ctx = d};
    mv_code rc = mv__timer_engine_new(d->store, &o, &d->timers, err);
    if (rc == MV_OK) rc = mv__service_register_timers(d->service, d->timers, err);
    if (rc == MV_OK && d->saga_engine) { /* delayed saga steps: their wake resumes the saga */
        mv_saga_async env = {.loop = d->loop,
                             .submit = saga_job_submit,
                             .submit_ctx = d->saga_jobs = mv__work_pool_new(2),
                             .stop = &d->saga_stop};
        rc = d->saga_jobs ? mv__saga_wake_register(d->timers, d->saga_engine,
                                                   mv_daemon_saga_finder(), d, &env, err)
                          : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (rc == MV_OK) rc = mv__timer_engine_start(d->timers, err);
    return rc;
}

/* ---- the recovery loop -------------------------------------------------------------------- */

struct mv_recovery_loop {
    mv_daemon *d;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static void on_recovered(void *ctx, const char *saga_id, const char *state, const char *action,
                         const mv_err *err) {
    mv_daemon *d = ctx;
    if (strcmp(action, "resume") == 0 || strcmp(action, "compensate") == 0) {
        const char *l[] = {"action", action, NULL};
        mv_metrics_counter_add(d->metrics, "missive_recovered_sagas_total", l, 1);
    }
    json_t *f = json_pack("{s:s,s:s,s:s}", "sagaId", saga_id, "state", state, "action", action);
    if (f && err) json_object_set_new(f, "error", json_string(err->message));
    mv_log(err ? "warn" : "info", err ? "saga recovery stopped" : "saga recovered", f);
}

/* One pass of everything the loop does; errors are logged and retried on the next pass. */
static void recovery_pass(mv_daemon *d) {
    const mv_config *cfg = d->cfg;
    mv_err err = {0};
    int64_t now = mv_now_ms();
    mv__callctx_reset();
    if (d->saga_engine &&
        mv_saga_recover(d->saga_engine, d->store, now, cfg->leases.action_ms, 100,
                        mv_daemon_saga_finder(), d, on_recovered, d, NULL, &err) != MV_OK)
        mv_log("warn", "saga recovery failed", json_pack("{s:s}", "error", err.message));
    mv__callctx_reset();
    int64_t removed = 0;
    if (now - cfg->retention.client_requests_ms >= 0 &&
        mv_requests_gc(d->store, now - cfg->retention.client_requests_ms, &removed, &err) != MV_OK)
        mv_log("warn", "client request retention failed", json_pack("{s:s}", "error", err.message));
    else if (removed > 0)
        mv_log("debug", "client requests removed",
               json_pack("{s:I}", "removed", (json_int_t)removed));
    /* The change log: on this loop's interval, so a resume from an id older than
     * retention.streamEventsMs gets `reset` within intervalMs of its expiry. */
    if (mv_changes_gc(d->store, now - cfg->retention.stream_events_ms, &removed, &err) != MV_OK)
        mv_log("warn", "change log retention failed", json_pack("{s:s}", "error", err.message));
    /* Spent action links past their expiry: a minute's margin for daemons whose clocks lag. */
    if (mv_links_gc(d->store, now - 60000, &removed, &err) != MV_OK)
        mv_log("warn", "link retention failed", json_pack("{s:s}", "error", err.message));
}

static void *recovery_main(void *arg) {
    mv_recovery_loop *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        pthread_mutex_unlock(&l->mu);
        recovery_pass(l->d);
        pthread_mutex_lock(&l->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ms = l->d->cfg->recovery_interval_ms;
        until.tv_sec += (time_t)(ms / 1000);
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

mv_code mv_recovery_loop_start(mv_daemon *d, mv_recovery_loop **out, mv_err *err) {
    *out = NULL;
    mv_recovery_loop *l = calloc(1, sizeof *l);
    if (!l) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    l->d = d;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, recovery_main, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        free(l);
        return mv_err_set(err, MV_INTERNAL, "cannot start the recovery thread");
    }
    *out = l;
    return MV_OK;
}

void mv_recovery_loop_stop(mv_recovery_loop *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}
