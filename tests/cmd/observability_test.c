/* observability_test.c — what an operator sees of a real missived: the log lines of a failing
 * handler (each line parsed as JSON, the warn line's fields checked: ids, redacted URL, status,
 * duration, the request's traceparent, which the handler also received), log.level dropping the
 * lines below it, lastFailure over HTTP, and `promtool check metrics` clean on /metrics after a
 * mixed workload (creates, a failing and a succeeding action, a saga, an approval decided), with
 * the figures that workload must have moved. */
#include <signal.h>
#include <sys/stat.h>

#include "missive/base.h"
#include "missive/version.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "test.h"

static const char APPROVAL_SECRET[] = "an-approval-secret-of-at-least-32-bytes!";
static const char TRACEPARENT[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

typedef struct {
    http_sink *sink;
    pid_t pid;
    int port;
    char dir[600], log[700];
} rig;

static int rig_start(rig *r, const char *name, const char *level) {
    memset(r, 0, sizeof *r);
    if (!(r->sink = http_sink_start())) return 0;
    http_sink_set_default(r->sink, &(http_sink_response){.status = 200, .body = "{\"ok\": true}"});
    const char *sink = http_sink_url(r->sink);
    char path[800], config[800];
    mv_strlcpy(r->dir, test_tmp_path(name), sizeof r->dir);
    snprintf(path, sizeof path, "%s/templates", r->dir);
    if (mkdir(r->dir, 0700) || mkdir(path, 0700)) return 0;
    /* the handler URL carries credentials and a query string: neither may reach the log */
    snprintf(path, sizeof path, "%s/templates/booking.json", r->dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"booking\", \"receiverContent\": {\"title\": \"Book\"},"
            " \"prepare\": {\"toUser\": \"{{hostId}}\"},"
            " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept\","
            "   \"variant\": \"primary\", \"receiver\": true,"
            "   \"handler\": {\"webhook\": \"http://hook:pw@%s/hooks/accept?sig=abc\"}},"
            "  {\"actionCd\": \"refund\", \"name\": \"Refund\", \"variant\": \"primary\","
            "   \"receiver\": true, \"approval\": {\"capability\": \"refunds.large\"},"
            "   \"handler\": {\"webhook\": \"%s/refund\"}}]}",
            sink + 7, sink))
        return 0;
    snprintf(path, sizeof path, "%s/sagas", r->dir);
    if (mkdir(path, 0700)) return 0;
    snprintf(path, sizeof path, "%s/sagas/ship.json", r->dir);
    if (!test_write_file(
            path,
            "{\"name\": \"ship\", \"steps\": [{\"name\": \"pack\", \"run\":"
            " {\"webhook\": \"%s/pack\"}, \"compensate\": {\"webhook\": \"%s/unpack\"}}]}",
            sink, sink))
        return 0;
    snprintf(config, sizeof config, "%s/missived.json", r->dir);
    if (!test_write_file(config,
                         "{\"store\": \"sqlite:%s/m.db\", \"templates\": \"%s/templates\","
                         " \"sagas\": \"%s/sagas\", \"auth\": {\"mode\": \"headers\"},"
                         " \"approvals\": {\"secretEnv\": \"MISSIVE_TEST_APPROVAL_SECRET\"},"
                         " \"log\": {\"level\": \"%s\"}}",
                         r->dir, r->dir, r->dir, level))
        return 0;
    setenv("MISSIVE_TEST_APPROVAL_SECRET", APPROVAL_SECRET, 1);
    r->port = test_free_port();
    snprintf(r->log, sizeof r->log, "%s/daemon.log", r->dir);
    r->pid = test_daemon_start(config, r->port, NULL, r->log);
    return r->pid > 0;
}

static void rig_stop(rig *r) {
    CHECK_INT(test_daemon_stop(r->pid), 0);
    http_sink_stop(r->sink);
}

static char *create_booking(rig *r) {
    test_reply c = test_http(r->port, "POST", "/messages/new/booking", "X-User-Id: guest",
                             "{\"hostId\": \"host\"}");
    const char *id = mv_json_str(json_array_get(json_object_get(c.json, "messages"), 0), "id");
    char *out = id ? strdup(id) : NULL;
    test_reply_free(&c);
    return out;
}

/* Every line of the log, parsed (a line that is not a JSON object fails the test). */
static json_t *log_lines(const char *path) {
    json_t *lines = json_array();
    FILE *f = fopen(path, "r");
    char buf[8192];
    while (f && fgets(buf, sizeof buf, f)) {
        json_t *line = json_loads(buf, 0, NULL);
        CHECK(json_is_object(line));
        if (line) json_array_append_new(lines, line);
    }
    if (f) fclose(f);
    return lines;
}

static json_t *find_line(json_t *lines, const char *msg) {
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) if (strcmp(mv_json_str(l, "msg"), msg) == 0) return l;
    return NULL;
}

TEST(a_failing_handler_logs_one_warn_line_with_ids_redacted_url_status_and_trace) {
    rig r;
    REQUIRE(rig_start(&r, "obs-log", "info"));
    char *id = create_booking(&r);
    REQUIRE(id);
    http_sink_push(
        r.sink, &(http_sink_response){
                    .status = 500,
                    .body = "{\"error\": {\"code\": \"host_busy\", \"message\": \"try later\"}}"});
    char path[256], headers[256];
    snprintf(path, sizeof path, "/messages/%s/action/accept", id);
    snprintf(headers, sizeof headers, "X-User-Id: host\ntraceparent: %s", TRACEPARENT);
    test_reply a = test_http(r.port, "POST", path, headers, "{}");
    CHECK_INT(a.status, 409);
    CHECK_STR(test_reply_code(&a), "action_retryable");
    const char *attempt = mv_json_str(json_object_get(a.json, "error"), "actionAttemptId");
    REQUIRE(attempt);
    char attempt_id[64];
    mv_strlcpy(attempt_id, attempt, sizeof attempt_id);
    test_reply_free(&a);

    /* the handler received the trace context */
    http_sink_request q;
    REQUIRE(http_sink_get(r.sink, 0, &q));
    CHECK_STR(http_sink_header(&q, "traceparent"), TRACEPARENT);
    http_sink_request_free(&q);

    /* lastFailure over HTTP: the handler's words */
    snprintf(path, sizeof path, "/messages/%s", id);
    test_reply m = test_http(r.port, "GET", path, "X-User-Id: host", NULL);
    json_t *lf = json_object_get(m.json, "lastFailure");
    CHECK_STR(mv_json_str(lf, "code"), "host_busy");
    CHECK_STR(mv_json_str(lf, "message"), "try later");
    CHECK_STR(mv_json_str(lf, "actionAttemptId"), attempt_id);
    test_reply_free(&m);
    char url[256];
    snprintf(url, sizeof url, "%s/hooks/accept", http_sink_url(r.sink));
    rig_stop(&r);

    json_t *lines = log_lines(r.log);
    json_t *warn = find_line(lines, "webhook failed");
    REQUIRE(warn);
    CHECK_STR(mv_json_str(warn, "level"), "warn");
    CHECK_STR(mv_json_str(warn, "kind"), "handler");
    CHECK_STR(mv_json_str(warn, "messageId"), id);
    CHECK_STR(mv_json_str(warn, "actionAttemptId"), attempt_id);
    CHECK_STR(mv_json_str(warn, "url"), url); /* no credentials, no query string */
    CHECK_INT(json_integer_value(json_object_get(warn, "status")), 500);
    CHECK_STR(mv_json_str(warn, "outcome"), "ambiguous");
    CHECK(json_is_number(json_object_get(warn, "durationMs")));
    CHECK(json_number_value(json_object_get(warn, "durationMs")) >= 0);
    CHECK_STR(mv_json_str(warn, "traceparent"), TRACEPARENT);
    CHECK(json_integer_value(json_object_get(warn, "ts")) > 0);
    /* the request line of the action carries the trace too; no line shows the secret parts */
    size_t i;
    json_t *l;
    int traced_requests = 0, warns = 0;
    json_array_foreach(lines, i, l) {
        char *text = json_dumps(l, JSON_COMPACT);
        CHECK(!strstr(text, "hook:pw") && !strstr(text, "sig=abc"));
        free(text);
        if (strcmp(mv_json_str(l, "msg"), "request") == 0 && mv_json_str(l, "traceparent"))
            traced_requests += strcmp(mv_json_str(l, "traceparent"), TRACEPARENT) == 0;
        warns += strcmp(mv_json_str(l, "level"), "warn") == 0;
    }
    CHECK_INT(traced_requests, 1);
    CHECK_INT(warns, 1); /* one warn line for the one failed call */
    json_decref(lines);
    free(id);
}

TEST(a_malformed_traceparent_is_neither_logged_nor_forwarded) {
    rig r;
    REQUIRE(rig_start(&r, "obs-badtrace", "info"));
    char *id = create_booking(&r);
    REQUIRE(id);
    char path[256];
    snprintf(path, sizeof path, "/messages/%s/action/accept", id);
    test_reply a = test_http(r.port, "POST", path,
                             "X-User-Id: host\ntraceparent: 00-00000000000000000000000000000000-"
                             "00f067aa0ba902b7-01",
                             "{}");
    CHECK_INT(a.status, 200);
    test_reply_free(&a);
    http_sink_request q;
    REQUIRE(http_sink_get(r.sink, 0, &q));
    CHECK(http_sink_header(&q, "traceparent") == NULL);
    http_sink_request_free(&q);
    rig_stop(&r);
    json_t *lines = log_lines(r.log);
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) CHECK(json_object_get(l, "traceparent") == NULL);
    json_decref(lines);
    free(id);
}

TEST(log_level_warn_drops_request_lines_and_keeps_the_failures) {
    rig r;
    REQUIRE(rig_start(&r, "obs-level", "warn"));
    char *id = create_booking(&r);
    REQUIRE(id);
    http_sink_push(r.sink, &(http_sink_response){.status = 502});
    char path[256];
    snprintf(path, sizeof path, "/messages/%s/action/accept", id);
    test_reply a = test_http(r.port, "POST", path, "X-User-Id: host", "{}");
    CHECK_INT(a.status, 409);
    test_reply_free(&a);
    rig_stop(&r);
    json_t *lines = log_lines(r.log);
    CHECK(find_line(lines, "request") == NULL);
    CHECK(find_line(lines, "listening") == NULL);
    json_t *warn = find_line(lines, "webhook failed");
    REQUIRE(warn);
    CHECK_INT(json_integer_value(json_object_get(warn, "status")), 502);
    json_decref(lines);
    free(id);
}

/* The value of one sample line ("name{labels} value") in an exposition, or -1. */
static double sample(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

TEST(promtool_finds_the_metrics_clean_after_a_mixed_workload) {
    rig r;
    REQUIRE(rig_start(&r, "obs-metrics", "info"));
    /* before any work, every declared counter is already there at zero */
    test_reply before = test_http(r.port, "GET", "/metrics", NULL, NULL);
    test_reply_free(&before);

    char *id1 = create_booking(&r), *id2 = create_booking(&r);
    REQUIRE(id1 && id2);
    char path[256];
    http_sink_push(r.sink, &(http_sink_response){.status = 500});
    snprintf(path, sizeof path, "/messages/%s/action/accept", id1);
    test_reply a = test_http(r.port, "POST", path, "X-User-Id: host", "{}");
    CHECK_INT(a.status, 409);
    test_reply_free(&a);
    a = test_http(r.port, "POST", path, "X-User-Id: host", "{}");
    CHECK_INT(a.status, 200);
    test_reply_free(&a);
    const char *admin = "X-User-Id: ops\nX-User-Permissions: is.admin";
    a = test_http(r.port, "POST", "/sagas/ship", admin, "{\"sagaId\": \"s1\", \"input\": {}}");
    CHECK_STR(mv_json_str(a.json, "state"), "completed");
    test_reply_free(&a);
    snprintf(path, sizeof path, "/messages/%s/action/refund", id2);
    a = test_http(r.port, "POST", path, "X-User-Id: host", "{}");
    CHECK_INT(a.status, 202);
    char decision[256];
    snprintf(decision, sizeof decision, "/approvals/%s/decision",
             mv_json_str(a.json, "approvalId") ? mv_json_str(a.json, "approvalId") : "");
    test_reply_free(&a);
    a = test_http(r.port, "POST", decision, "X-User-Id: boss\nX-User-Permissions: approvals.decide",
                  "{\"decision\": \"denied\"}");
    CHECK_INT(a.status, 200);
    test_reply_free(&a);
    a = test_http(r.port, "GET", "/nowhere", NULL, NULL);
    test_reply_free(&a);

    /* scrape the raw text (test_http parses JSON only) with curl, then promtool */
    char file[800], cmd[2048];
    snprintf(file, sizeof file, "%s/metrics.txt", r.dir);
    snprintf(cmd, sizeof cmd, "curl -sf http://127.0.0.1:%d/metrics > %s", r.port, file);
    REQUIRE(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s > %s.out 2>&1", file, file);
    int rc = system(cmd);
    CHECK_INT(rc, 0);
    char out[800];
    snprintf(out, sizeof out, "%s.out", file);
    FILE *f = fopen(out, "r");
    char complaint[512] = "";
    if (f) {
        if (!fgets(complaint, sizeof complaint, f)) complaint[0] = '\0';
        fclose(f);
    }
    if (complaint[0]) fprintf(stderr, "promtool: %s", complaint);
    CHECK_STR(complaint, ""); /* not even a lint warning */

    FILE *m = fopen(file, "r");
    REQUIRE(m);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, m);
    fclose(m);
    text[n] = '\0';
    CHECK(sample(text, "missive_build_info{version=\"" MV_VERSION_STRING "\"}") == 1);
    CHECK(sample(text, "missive_webhook_requests_total{kind=\"handler\",outcome=\"ambiguous\"}") ==
          1);
    CHECK(sample(text, "missive_webhook_requests_total{kind=\"handler\",outcome=\"ok\"}") == 1);
    CHECK(sample(text, "missive_webhook_requests_total{kind=\"saga_step\",outcome=\"ok\"}") == 1);
    CHECK(sample(text, "missive_webhook_requests_total{kind=\"payment\",outcome=\"not_sent\"}") ==
          0);
    CHECK(sample(text, "missive_webhook_duration_seconds_count{kind=\"handler\"}") == 2);
    CHECK(sample(text, "missive_webhook_duration_seconds_bucket{kind=\"handler\",le=\"+Inf\"}") ==
          2);
    CHECK(sample(text, "missive_sagas{state=\"completed\"}") == 1);
    CHECK(sample(text, "missive_sagas{state=\"manual-review\"}") == 0);
    CHECK(sample(text, "missive_approvals_total{decision=\"denied\"}") == 1);
    CHECK(sample(text, "missive_approvals_total{decision=\"approved\"}") == 0);
    CHECK(sample(text, "missive_stream_connections") == 0);
    CHECK(sample(text, "process_resident_memory_bytes") > 1e6);
    CHECK(sample(text, "process_open_fds") > 3);
    CHECK(sample(text, "process_start_time_seconds") > 1.6e9);
    CHECK(sample(text, "process_cpu_seconds_total") >= 0);
    /* every family has HELP and TYPE */
    int helps = 0, types = 0;
    for (const char *p = text; (p = strstr(p, "# HELP ")); p++)
        helps++;
    for (const char *p = text; (p = strstr(p, "# TYPE ")); p++)
        types++;
    CHECK(types >= 14);
    CHECK_INT(helps, types);
    rig_stop(&r);
    free(id1);
    free(id2);
}

int main(void) {
    return RUN_TESTS(a_failing_handler_logs_one_warn_line_with_ids_redacted_url_status_and_trace,
                     a_malformed_traceparent_is_neither_logged_nor_forwarded,
                     log_level_warn_drops_request_lines_and_keeps_the_failures,
                     promtool_finds_the_metrics_clean_after_a_mixed_workload);
}
