/* request_test.c — the error body shape (fields, Retry-After, masking of internal errors) and
 * the JSON log line. */
#include <fcntl.h>

#include "http/request.h"
#include "missive/base.h"
#include "test.h"

typedef struct out {
    mv_arena *arena;
    mv_http_response res;
    json_t *body;
} out;

static void error_to(out *o, const mv_err *err) {
    o->arena = mv_arena_new();
    mv_http_response_init(&o->res, o->arena);
    mv_http_error(&o->res, err);
    o->body = NULL;
    mv_json_parse(o->res.body, o->res.body_len, &o->body, NULL);
}

static void out_free(out *o) {
    json_decref(o->body);
    mv_arena_free(o->arena);
}

static json_t *err_obj(out *o) { return json_object_get(o->body, "error"); }

TEST(error_body_has_code_message_and_the_fields_the_error_carries) {
    mv_err err = {0};
    mv_err_set(&err, MV_ACTION_NEEDS_REVIEW, "saga needs review");
    mv_strlcpy(err.attempt_id, "att-1", sizeof err.attempt_id);
    mv_strlcpy(err.saga_id, "saga-1", sizeof err.saga_id);
    out o;
    error_to(&o, &err);
    CHECK_INT(o.res.status, 409);
    CHECK_STR(mv_http_response_header(&o.res, "Content-Type"), "application/json");
    CHECK_STR(json_string_value(json_object_get(err_obj(&o), "code")), "action_needs_review");
    /* the contract's words, not the message (which may name a step's URL) */
    CHECK_STR(json_string_value(json_object_get(err_obj(&o), "message")),
              "the action's saga needs review by an operator");
    CHECK_STR(json_string_value(json_object_get(err_obj(&o), "actionAttemptId")), "att-1");
    CHECK_STR(json_string_value(json_object_get(err_obj(&o), "sagaId")), "saga-1");
    CHECK(json_object_get(err_obj(&o), "approvalId") == NULL);
    CHECK(json_object_get(err_obj(&o), "expiresAt") == NULL);
    CHECK_INT(json_object_size(o.body), 1);
    CHECK(mv_http_response_header(&o.res, "Retry-After") == NULL);
    out_free(&o);
}

TEST(approval_fields_include_token_and_expiry_as_integer_ms) {
    mv_err err = {0};
    mv_err_set(&err, MV_APPROVAL_PENDING, "waiting");
    mv_strlcpy(err.approval_id, "0b0e8f7e-7d43-4a43-9d0c-2f3f8c1b5a10", sizeof err.approval_id);
    mv_strlcpy(err.resume_token, "v1.abc.def", sizeof err.resume_token);
    mv_strlcpy(err.session_id, "sess-9", sizeof err.session_id);
    err.expires_at = 1700000000123;
    out o;
    error_to(&o, &err);
    json_t *e = err_obj(&o);
    CHECK_STR(json_string_value(json_object_get(e, "approvalId")),
              "0b0e8f7e-7d43-4a43-9d0c-2f3f8c1b5a10");
    CHECK_STR(json_string_value(json_object_get(e, "resumeToken")), "v1.abc.def");
    CHECK_STR(json_string_value(json_object_get(e, "sessionId")), "sess-9");
    CHECK(json_is_integer(json_object_get(e, "expiresAt")));
    CHECK(json_integer_value(json_object_get(e, "expiresAt")) == 1700000000123LL);
    out_free(&o);
}

TEST(client_request_pending_adds_retry_after_of_at_least_one_second) {
    mv_err err = {0};
    mv_err_set(&err, MV_CLIENT_REQUEST_PENDING, "still running");
    out o;
    error_to(&o, &err);
    CHECK_INT(o.res.status, 409);
    CHECK_STR(mv_http_response_header(&o.res, "Retry-After"), "1");
    out_free(&o);
    err.retry_after_s = 7;
    error_to(&o, &err);
    CHECK_STR(mv_http_response_header(&o.res, "Retry-After"), "7");
    out_free(&o);
}

TEST(internal_errors_are_masked_and_keep_the_real_message_for_the_log) {
    mv_code codes[] = {MV_INTERNAL, MV_NO_MEMORY, MV_IO, MV_SCHEMA_TOO_NEW};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        mv_err err = {0};
        mv_err_set(&err, codes[i], "SELECT * FROM messages failed at /var/lib/missive.db");
        mv_strlcpy(err.attempt_id, "att-1", sizeof err.attempt_id);
        out o;
        error_to(&o, &err);
        CHECK_INT(o.res.status, 500);
        CHECK_STR(o.res.body, "{\"error\":{\"code\":\"internal\",\"message\":\"internal error\"}}");
        CHECK(o.res.detail && strstr(o.res.detail, "SELECT") != NULL);
        out_free(&o);
    }
}

TEST(every_code_maps_to_its_table_status) {
    struct {
        mv_code code;
        int status;
        const char *name;
    } cases[] = {
        {MV_INVALID_ARGUMENT, 400, "invalid_argument"},
        {MV_UNAUTHENTICATED, 401, "unauthenticated"},
        {MV_FORBIDDEN, 403, "forbidden"},
        {MV_MESSAGE_NOT_FOUND, 404, "message_not_found"},
        {MV_MESSAGE_ARCHIVED, 410, "message_archived"},
        {MV_PAYLOAD_TOO_LARGE, 413, "payload_too_large"},
        {MV_CLIENT_REQUEST_MISMATCH, 422, "client_request_mismatch"},
        {MV_PAYMENT_COMPENSATION_FAILED, 500, "payment_compensation_failed"},
        {MV_PREPARE_FAILED, 502, "prepare_failed"},
        {MV_STORE_UNAVAILABLE, 503, "store_unavailable"},
        {MV_DRAINING, 503, "draining"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mv_err err = {0};
        mv_err_set(&err, cases[i].code, "m");
        out o;
        error_to(&o, &err);
        CHECK_INT(o.res.status, cases[i].status);
        CHECK_STR(json_string_value(json_object_get(err_obj(&o), "code")), cases[i].name);
        out_free(&o);
    }
}

TEST(non_utf8_error_messages_still_give_valid_json) {
    mv_err err = {0};
    mv_err_set(&err, MV_INVALID_ARGUMENT, "bad value \xff\xfe here");
    out o;
    error_to(&o, &err);
    REQUIRE(o.body != NULL);
    CHECK_STR(json_string_value(json_object_get(err_obj(&o), "message")), "bad value ?? here");
    out_free(&o);
}

TEST(log_lines_are_single_json_objects) {
    const char *path = test_tmp_path("log.txt");
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    int old = mv_log_set_fd(fd);
    mv_log("info", "request", json_pack("{s:s,s:i}", "route", "/x", "status", 200));
    mv_log("warn", "second", NULL);
    mv_log_set_fd(old);
    close(fd);
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *v = NULL;
        CHECK_CODE(mv_json_parse(line, strlen(line), &v, NULL), MV_OK, (mv_err *)NULL);
        CHECK(json_is_integer(json_object_get(v, "ts")));
        if (n == 0) {
            CHECK_STR(mv_json_str(v, "level"), "info");
            CHECK_STR(mv_json_str(v, "msg"), "request");
            CHECK_STR(mv_json_str(v, "route"), "/x");
        } else {
            CHECK_STR(mv_json_str(v, "level"), "warn");
        }
        json_decref(v);
        n++;
    }
    fclose(f);
    CHECK_INT(n, 2);
}

/* Reads the file's lines, each without its "ts" value (which differs between two calls). */
static int read_lines_without_ts(const char *path, char lines[][512], int max) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    char line[512];
    while (n < max && fgets(line, sizeof line, f)) {
        char *comma = strchr(line, ',');
        snprintf(lines[n++], 512, "%s", comma ? comma : line);
    }
    fclose(f);
    return n;
}

TEST(the_direct_log_line_writes_the_same_bytes_as_a_logged_json_object) {
    static const char *const strings[] = {"plain",
                                          "quote \" backslash \\ slash /",
                                          "ctl \x01\x1f\b\f\n\r\t end",
                                          "caf\xc3\xa9 \xe2\x82\xac",
                                          "see https://user:secret@example.com/path?token=x#f here",
                                          "bad \xff utf-8",
                                          "",
                                          "\x7f"};
    static const double reals[] = {0.0, 1.5, 0.001, 1234.567, 1e12, 1.5e-7, 123456789.123, -2.25};
    const char *pa = test_tmp_path("log-a.txt"), *pb = test_tmp_path("log-b.txt");
    int fa = open(pa, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    int fb = open(pb, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    REQUIRE(fa >= 0 && fb >= 0);
    size_t ns = sizeof strings / sizeof *strings, nr = sizeof reals / sizeof *reals;
    for (size_t i = 0; i < ns; i++) {
        double d = reals[i % nr];
        int old = mv_log_set_fd(fa);
        json_t *o = json_object();
        json_object_set_new(o, "method", json_string("POST"));
        json_object_set_new(o, "detail",
                            json_string(strings[i])); /* NULL (left out) if not UTF-8 */
        json_object_set_new(o, "status", json_integer(-201 + (int)i * 100));
        json_object_set_new(o, "durationMs", json_real(d));
        mv_log("info", strings[i][0] == 's' ? strings[i] : "request", o);
        mv_log_set_fd(fb);
        mv_log_field f[] = {{"method", MV_LOG_STR, "POST"},
                            {"detail", MV_LOG_STR, strings[i]},
                            {"status", MV_LOG_INT, .i = -201 + (int)i * 100},
                            {"durationMs", MV_LOG_REAL, .d = d},
                            {"absent", MV_LOG_STR, NULL}};
        mv_log_fields("info", strings[i][0] == 's' ? strings[i] : "request", f, 5);
        mv_log_set_fd(old);
    }
    close(fa);
    close(fb);
    static char la[16][512], lb[16][512];
    int na = read_lines_without_ts(pa, la, 16), nb = read_lines_without_ts(pb, lb, 16);
    CHECK_INT(na, (int)ns);
    CHECK_INT(nb, (int)ns);
    for (int i = 0; i < na && i < nb; i++)
        CHECK_STR(lb[i], la[i]);
}

TEST(json_responses_small_and_large_are_the_bytes_jansson_writes) {
    /* small bodies are copied out of the thread's buffer, large ones (over 64 KiB) adopted */
    static const size_t sizes[] = {0, 10, 1000, 70000, 300000, 10};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char *text = malloc(sizes[i] + 1);
        REQUIRE(text);
        memset(text, 'x', sizes[i]);
        text[sizes[i]] = '\0';
        json_t *body = json_pack("{s:s,s:[i,n,b]}", "text", text, "more", (int)i, 1);
        char *expect = json_dumps(body, JSON_COMPACT);
        mv_arena *a = mv_arena_new();
        mv_http_response res;
        mv_http_response_init(&res, a);
        mv_http_json(&res, 201, body); /* steals body */
        CHECK_INT(res.status, 201);
        CHECK_INT((long long)res.body_len, (long long)strlen(expect));
        CHECK(res.body && memcmp(res.body, expect, res.body_len) == 0);
        CHECK_STR(mv_http_response_header(&res, "Content-Type"), "application/json");
        mv_arena_free(a);
        free(expect);
        free(text);
    }
}

static int cleanups_run;

static void count_cleanup(void *p) {
    (void)p;
    cleanups_run++;
}

TEST(a_reset_arena_runs_its_cleanups_and_serves_new_allocations) {
    mv_arena *a = mv_arena_new();
    REQUIRE(a);
    for (int round = 0; round < 3; round++) {
        cleanups_run = 0;
        char *small = mv_arena_strdup(a, "kept block");
        char *big = mv_arena_alloc(a, 100000); /* an oversized block: freed by the reset */
        REQUIRE(small && big);
        memset(big, 'x', 100000);
        CHECK(mv_arena_defer(a, count_cleanup, NULL));
        CHECK(mv_arena_json(a, json_string("released on reset")) != NULL);
        CHECK_STR(small, "kept block");
        mv_arena_reset(a);
        CHECK_INT(cleanups_run, 1);
        char *z = mv_arena_alloc(a, 64); /* zeroed, as from a new arena */
        REQUIRE(z);
        CHECK(z[0] == 0 && z[63] == 0);
    }
    mv_arena_free(a);
}

int main(void) {
    return RUN_TESTS(error_body_has_code_message_and_the_fields_the_error_carries,
                     approval_fields_include_token_and_expiry_as_integer_ms,
                     client_request_pending_adds_retry_after_of_at_least_one_second,
                     the_direct_log_line_writes_the_same_bytes_as_a_logged_json_object,
                     json_responses_small_and_large_are_the_bytes_jansson_writes,
                     internal_errors_are_masked_and_keep_the_real_message_for_the_log,
                     every_code_maps_to_its_table_status,
                     non_utf8_error_messages_still_give_valid_json,
                     log_lines_are_single_json_objects,
                     a_reset_arena_runs_its_cleanups_and_serves_new_allocations);
}
