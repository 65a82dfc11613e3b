/* metrics_test.c — Prometheus text for counters, gauges and histograms, label escaping, the
 * collector, and counting from several threads at once. */
#include <pthread.h>

#include "http/metrics.h"
#include "test.h"

TEST(counters_and_gauges_render_with_help_type_and_labels) {
    mv_metrics *m = mv_metrics_new();
    mv_metrics_describe(m, "missive_actions_total", "counter", "Actions by outcome.");
    const char *ok[] = {"outcome", "ok", NULL};
    const char *fail[] = {"outcome", "retryable", NULL};
    mv_metrics_counter_add(m, "missive_actions_total", ok, 2);
    mv_metrics_counter_add(m, "missive_actions_total", ok, 1);
    mv_metrics_counter_add(m, "missive_actions_total", fail, 1);
    mv_metrics_counter_add(m, "missive_actions_total", fail, -5); /* ignored: counters only grow */
    mv_metrics_gauge_set(m, "missive_outbox_depth", NULL, 7);
    mv_metrics_gauge_set(m, "missive_outbox_depth", NULL, 4);
    char *t = mv_metrics_render(m);
    CHECK(strstr(t, "# HELP missive_actions_total Actions by outcome.\n"
                    "# TYPE missive_actions_total counter\n"
                    "missive_actions_total{outcome=\"ok\"} 3\n"
                    "missive_actions_total{outcome=\"retryable\"} 1\n") != NULL);
    CHECK(strstr(t, "# TYPE missive_outbox_depth gauge\nmissive_outbox_depth 4\n") != NULL);
    free(t);
    mv_metrics_free(m);
}

TEST(label_values_are_escaped) {
    mv_metrics *m = mv_metrics_new();
    const char *l[] = {"route", "a\"b\\c\nd", NULL};
    mv_metrics_counter_add(m, "x_total", l, 1);
    char *t = mv_metrics_render(m);
    CHECK(strstr(t, "x_total{route=\"a\\\"b\\\\c\\nd\"} 1\n") != NULL);
    free(t);
    mv_metrics_free(m);
}

TEST(long_label_sets_are_escaped_and_found_again_like_short_ones) {
    /* label strings of every length around the update's 512-byte buffer, escapes included */
    mv_metrics *m = mv_metrics_new();
    for (size_t len = 490; len < 530; len++) {
        char value[600], name[32];
        for (size_t i = 0; i < len; i++)
            value[i] = i % 50 == 7 ? '"' : i % 50 == 9 ? '\\' : 'v';
        value[len] = '\0';
        const char *l[] = {"a", "x", "route", value, NULL};
        snprintf(name, sizeof name, "len_%zu_total", len);
        mv_metrics_counter_add(m, name, l, 1);
        mv_metrics_counter_add(m, name, l, 2);
        char *t = mv_metrics_render(m);
        char expect[1400];
        size_t n = (size_t)snprintf(expect, sizeof expect, "%s{a=\"x\",route=\"", name);
        for (size_t i = 0; i < len; i++) {
            if (value[i] == '"' || value[i] == '\\') expect[n++] = '\\';
            expect[n++] = value[i];
        }
        snprintf(expect + n, sizeof expect - n, "\"} 3\n");
        CHECK(strstr(t, expect) != NULL);
        free(t);
    }
    mv_metrics_free(m);
}

TEST(histogram_buckets_are_cumulative_with_sum_and_count) {
    mv_metrics *m = mv_metrics_new();
    const char *l[] = {"route", "/r", NULL};
    mv_metrics_observe(m, "d_seconds", l, 0.003);
    mv_metrics_observe(m, "d_seconds", l, 0.2);
    mv_metrics_observe(m, "d_seconds", l, 20);
    char *t = mv_metrics_render(m);
    CHECK(strstr(t, "d_seconds_bucket{route=\"/r\",le=\"0.005\"} 1\n") != NULL);
    CHECK(strstr(t, "d_seconds_bucket{route=\"/r\",le=\"0.1\"} 1\n") != NULL);
    CHECK(strstr(t, "d_seconds_bucket{route=\"/r\",le=\"0.25\"} 2\n") != NULL);
    CHECK(strstr(t, "d_seconds_bucket{route=\"/r\",le=\"10\"} 2\n") != NULL);
    CHECK(strstr(t, "d_seconds_bucket{route=\"/r\",le=\"+Inf\"} 3\n") != NULL);
    CHECK(strstr(t, "d_seconds_sum{route=\"/r\"} 20.203") != NULL);
    CHECK(strstr(t, "d_seconds_count{route=\"/r\"} 3\n") != NULL);
    free(t);
    mv_metrics_free(m);
}

static void collect(mv_metrics *m, void *ctx) {
    int *calls = ctx;
    (*calls)++;
    const char *l[] = {"state", "pending", NULL};
    mv_metrics_gauge_set(m, "missive_reservations", l, *calls * 10);
}

TEST(collector_runs_before_each_rendering) {
    mv_metrics *m = mv_metrics_new();
    int calls = 0;
    mv_metrics_set_collector(m, collect, &calls);
    char *t = mv_metrics_render(m);
    CHECK(strstr(t, "missive_reservations{state=\"pending\"} 10\n") != NULL);
    free(t);
    t = mv_metrics_render(m);
    CHECK(strstr(t, "missive_reservations{state=\"pending\"} 20\n") != NULL);
    free(t);
    CHECK_INT(calls, 2);
    mv_metrics_free(m);
}

static void *count_many(void *arg) {
    mv_metrics *m = arg;
    const char *a[] = {"k", "a", NULL};
    const char *b[] = {"k", "b", NULL};
    for (int i = 0; i < 20000; i++) {
        mv_metrics_counter_add(m, "c_total", (i & 1) ? a : b, 1);
        mv_metrics_observe(m, "h_seconds", NULL, 0.001);
    }
    return NULL;
}

TEST(concurrent_updates_from_threads_are_all_counted) {
    mv_metrics *m = mv_metrics_new();
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, count_many, m);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    const char *a[] = {"k", "a", NULL};
    const char *b[] = {"k", "b", NULL};
    CHECK(mv_metrics_value(m, "c_total", a) == 40000);
    CHECK(mv_metrics_value(m, "c_total", b) == 40000);
    CHECK(mv_metrics_value(m, "h_seconds", NULL) == 80000);
    mv_metrics_free(m);
}

int main(void) {
    return RUN_TESTS(counters_and_gauges_render_with_help_type_and_labels, label_values_are_escaped,
                     long_label_sets_are_escaped_and_found_again_like_short_ones,
                     histogram_buckets_are_cumulative_with_sum_and_count,
                     collector_runs_before_each_rendering,
                     concurrent_updates_from_threads_are_all_counted);
}
