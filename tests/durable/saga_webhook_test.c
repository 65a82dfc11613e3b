/* saga_webhook_test.c — webhook saga definitions against a real HTTP far side (http_sink): the
 * step and compensation calls (bodies, Idempotency-Keys, signatures, order), the outcome mapping
 * (2xx committed, 4xx / refused compensate, 5xx manual review), compensation retries after the
 * backoff on a manual clock, and definition validation. */
#include "durable/fixture.h"
#include "missive/saga_webhook.h"
#include "support/http_sink.h"

typedef struct env {
    mv_store *store;
    int64_t now;
    mv_clock clock;
    mv_saga_engine *engine;
    http_sink *sink;
    mv_webhook_config wh;
    mv_saga_book *book;
} env;

static const char SECRET[] = "saga-webhook-test-secret";

static int env_open(env *e, const char *name) {
    memset(e, 0, sizeof *e);
    e->store = fixture_store("sqlite", name, NULL, 0);
    e->now = 1000000;
    e->clock = mv_manual_clock(&e->now);
    mv_saga_engine_options o = {.clock = &e->clock};
    e->sink = http_sink_start();
    e->wh = (mv_webhook_config){.secret = SECRET, .secret_len = strlen(SECRET)};
    e->book = mv_saga_book_new(&e->wh);
    return e->store && e->sink && e->book &&
           mv_saga_engine_new(e->store, &o, &e->engine, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_saga_book_free(e->book);
    http_sink_stop(e->sink);
    mv_saga_engine_free(e->engine);
    mv_store_close(e->store);
}

/* Adds the three-step "checkout" definition (reserve, charge, ship) pointing at the sink. */
static mv_code add_checkout(env *e, const char *retry, mv_err *err) {
    char text[2048];
    const char *u = http_sink_url(e->sink);
    snprintf(text, sizeof text,
             "{\"name\": \"checkout\", \"capability\": \"orders.checkout\"%s%s,"
             " \"steps\": ["
             "  {\"name\": \"reserve\", \"run\": {\"webhook\": \"%s/reserve\"},"
             "   \"compensate\": {\"webhook\": \"%s/release\"}},"
             "  {\"name\": \"charge\", \"run\": {\"webhook\": \"%s/charge\"},"
             "   \"compensate\": {\"webhook\": \"%s/refund\"}},"
             "  {\"name\": \"ship\", \"run\": {\"webhook\": \"%s/ship\"},"
             "   \"compensate\": {\"webhook\": \"%s/unship\"}}]}",
             retry ? ", \"retry\": " : "", retry ? retry : "", u, u, u, u, u, u);
    json_t *j = NULL;
    mv_code rc = mv_json_parse(text, strlen(text), &j, err);
    if (rc == MV_OK) rc = mv_saga_book_add_json(e->book, j, "checkout.json", err);
    json_decref(j);
    return rc;
}

static json_t *step_of(const json_t *record, size_t i) {
    return json_array_get(json_object_get(record, "steps"), i);
}

/* Request i of the sink: its path, parsed body (caller decrefs) and Idempotency-Key copy. */
typedef struct seen {
    char path[64];
    char key[64];
    char signature[80];
    char expected_signature[80];
    json_t *body;
} seen;

static bool get_seen(env *e, int i, seen *out) {
    memset(out, 0, sizeof *out);
    http_sink_request r;
    if (!http_sink_get(e->sink, i, &r)) return false;
    snprintf(out->path, sizeof out->path, "%s", r.path);
    const char *k = http_sink_header(&r, "Idempotency-Key");
    const char *s = http_sink_header(&r, "X-Missive-Signature");
    snprintf(out->key, sizeof out->key, "%s", k ? k : "");
    snprintf(out->signature, sizeof out->signature, "%s", s ? s : "");
    mv_webhook_signature(SECRET, strlen(SECRET), r.body, r.body_len, out->expected_signature);
    mv_json_parse(r.body, r.body_len, &out->body, NULL);
    http_sink_request_free(&r);
    return true;
}

TEST(a_three_step_saga_posts_each_step_with_earlier_results_and_completes) {
    env e;
    REQUIRE(env_open(&e, "wh_complete.db"));
    mv_err err = {0};
    REQUIRE(add_checkout(&e, NULL, &err) == MV_OK);
    http_sink_push(e.sink, &(http_sink_response){.path = "/reserve", .body = "{\"hold\": \"h1\"}"});
    http_sink_push(e.sink, &(http_sink_response){
                               .path = "/charge", .status = 201, .body = "{\"payment\": 42}"});
    http_sink_push(e.sink, &(http_sink_response){.path = "/ship", .status = 204});
    const mv_saga_definition *def = mv_saga_book_find(e.book, "checkout");
    REQUIRE(def);
    CHECK(mv_saga_book_find(e.book, "other") == NULL);
    json_t *input = json_pack("{s:s,s:i}", "order", "o-1", "amount", 42);
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_execute(e.engine, def, "saga-1", input, NULL, &rec, &err), MV_OK, &err);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    CHECK_STR(mv_json_str(rec, "definition"), "checkout");
    CHECK_INT(http_sink_count(e.sink), 3);
    const char *paths[] = {"/reserve", "/charge", "/ship"};
    const char *results[] = {"{}", "{\"reserve\":{\"hold\":\"h1\"}}",
                             "{\"charge\":{\"payment\":42},\"reserve\":{\"hold\":\"h1\"}}"};
    for (int i = 0; i < 3; i++) {
        seen s;
        REQUIRE(get_seen(&e, i, &s));
        CHECK_STR(s.path, paths[i]);
        json_t *step = step_of(rec, (size_t)i);
        CHECK_STR(s.key, mv_json_str(step, "effectId"));
        CHECK_STR(mv_json_str(s.body, "effectId"), mv_json_str(step, "effectId"));
        CHECK_STR(mv_json_str(s.body, "sagaId"), "saga-1");
        CHECK_STR(mv_json_str(s.body, "step"), mv_json_str(step, "name"));
        CHECK(json_equal(json_object_get(s.body, "input"), input));
        char *got = mv_json_canonical(json_object_get(s.body, "results"));
        CHECK_STR(got, results[i]);
        free(got);
        CHECK_STR(s.signature, s.expected_signature);
        CHECK_STR(mv_json_str(step, "state"), "committed");
        json_decref(s.body);
    }
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(step_of(rec, 1), "result"), "payment")),
        42);
    CHECK(json_is_null(json_object_get(step_of(rec, 2), "result"))); /* 204: no body */
    json_decref(rec);
    /* the same id again is a new saga to execute: refused, nothing posted */
    CHECK_CODE(mv_saga_execute(e.engine, def, "saga-1", input, NULL, NULL, &err), MV_SAGA_EXISTS,
               &err);
    CHECK_INT(http_sink_count(e.sink), 3);
    json_decref(input);
    env_close(&e);
}

TEST(a_rejected_third_step_compensates_the_second_then_the_first) {
    env e;
    REQUIRE(env_open(&e, "wh_reject.db"));
    mv_err err = {0};
    REQUIRE(add_checkout(&e, NULL, &err) == MV_OK);
    http_sink_push(e.sink, &(http_sink_response){.path = "/reserve", .body = "{\"hold\": \"h1\"}"});
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .body = "{\"payment\": 7}"});
    http_sink_push(
        e.sink,
        &(http_sink_response){.path = "/ship", .status = 422, .body = "{\"error\": \"no stock\"}"});
    json_t *input = json_pack("{s:s}", "order", "o-2");
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_execute(e.engine, mv_saga_book_find(e.book, "checkout"), "saga-2", input,
                               NULL, &rec, &err),
               MV_SAGA_STEP_FAILED, &err);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    CHECK_STR(mv_json_str(step_of(rec, 2), "state"), "failed");
    CHECK_STR(mv_json_str(step_of(rec, 2), "errorCode"), "step_rejected");
    CHECK_STR(mv_json_str(step_of(rec, 1), "state"), "compensated");
    CHECK_STR(mv_json_str(step_of(rec, 0), "state"), "compensated");
    CHECK_INT(http_sink_count(e.sink), 5);
    seen refund, release;
    REQUIRE(get_seen(&e, 3, &refund));
    REQUIRE(get_seen(&e, 4, &release));
    CHECK_STR(refund.path, "/refund");
    CHECK_STR(release.path, "/release");
    CHECK_STR(refund.key, mv_json_str(step_of(rec, 1), "compensationEffectId"));
    CHECK_STR(release.key, mv_json_str(step_of(rec, 0), "compensationEffectId"));
    CHECK_STR(mv_json_str(refund.body, "compensationEffectId"), refund.key);
    CHECK_STR(mv_json_str(refund.body, "sagaId"), "saga-2");
    CHECK_STR(mv_json_str(refund.body, "step"), "charge");
    CHECK(json_equal(json_object_get(refund.body, "input"), input));
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(refund.body, "result"), "payment")), 7);
    CHECK_INT(json_integer_value(json_object_get(refund.body, "attempt")), 1);
    CHECK_STR(mv_json_str(json_object_get(release.body, "result"), "hold"), "h1");
    CHECK_STR(release.signature, release.expected_signature);
    json_decref(refund.body);
    json_decref(release.body);
    json_decref(rec);
    json_decref(input);
    env_close(&e);
}

TEST(a_step_answering_500_sends_the_saga_to_manual_review_without_compensating) {
    env e;
    REQUIRE(env_open(&e, "wh_500.db"));
    mv_err err = {0};
    REQUIRE(add_checkout(&e, NULL, &err) == MV_OK);
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 500});
    json_t *rec = NULL, *input = json_object();
    mv_code rc = mv_saga_execute(e.engine, mv_saga_book_find(e.book, "checkout"), "saga-3", input,
                                 NULL, &rec, &err);
    json_decref(input);
    CHECK(rc != MV_OK && rc != MV_SAGA_STEP_FAILED);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "manual-review");
    CHECK_STR(mv_json_str(step_of(rec, 0), "state"), "committed");
    CHECK_STR(mv_json_str(step_of(rec, 1), "state"), "ambiguous");
    CHECK_INT(json_array_size(json_object_get(rec, "steps")), 2);
    CHECK_INT(http_sink_count(e.sink), 2); /* reserve, charge; no release */
    json_decref(rec);
    /* compensating now refuses: the charge may have happened */
    CHECK_CODE(mv_saga_compensate(e.engine, mv_saga_book_find(e.book, "checkout"), "saga-3", NULL,
                                  NULL, &err),
               MV_SAGA_AMBIGUOUS_STEP, &err);
    CHECK_INT(http_sink_count(e.sink), 2);
    env_close(&e);
}

TEST(a_refused_connection_counts_as_not_committed) {
    env e;
    REQUIRE(env_open(&e, "wh_refused.db"));
    http_sink *gone = http_sink_start();
    REQUIRE(gone);
    char url[128];
    snprintf(url, sizeof url, "%s/pay", http_sink_url(gone));
    http_sink_stop(gone); /* the port now refuses */
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\": \"pay\", \"steps\": ["
             " {\"name\": \"hold\", \"run\": {\"webhook\": \"%s/hold\"},"
             "  \"compensate\": {\"webhook\": \"%s/unhold\"}},"
             " {\"name\": \"pay\", \"run\": {\"webhook\": \"%s\"},"
             "  \"compensate\": {\"webhook\": \"%s\"}}]}",
             http_sink_url(e.sink), http_sink_url(e.sink), url, url);
    json_t *j = NULL;
    mv_err err = {0};
    REQUIRE(mv_json_parse(text, strlen(text), &j, &err) == MV_OK);
    CHECK_CODE(mv_saga_book_add_json(e.book, j, "pay.json", &err), MV_OK, &err);
    json_decref(j);
    json_t *rec = NULL;
    CHECK_CODE(mv_saga_execute(e.engine, mv_saga_book_find(e.book, "pay"), "saga-4", json_null(),
                               NULL, &rec, &err),
               MV_SAGA_STEP_FAILED, &err);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    CHECK_STR(mv_json_str(step_of(rec, 1), "errorCode"), "step_not_sent");
    CHECK_INT(http_sink_count(e.sink), 2); /* hold, unhold */
    seen s;
    REQUIRE(get_seen(&e, 1, &s));
    CHECK_STR(s.path, "/unhold");
    json_decref(s.body);
    json_decref(rec);
    env_close(&e);
}

TEST(a_failing_compensation_is_retried_after_the_backoff_with_the_same_effect_id) {
    env e;
    REQUIRE(env_open(&e, "wh_retry.db"));
    mv_err err = {0};
    REQUIRE(add_checkout(&e,
                         "{\"maxAttempts\": 3, \"backoffMs\": {\"initial\": 1000, "
                         "\"max\": 1500}}",
                         &err) == MV_OK);
    const mv_saga_definition *def = mv_saga_book_find(e.book, "checkout");
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 402});
    http_sink_push(e.sink, &(http_sink_response){.path = "/release", .status = 503});
    json_t *rec = NULL, *input = json_object();
    CHECK_CODE(mv_saga_execute(e.engine, def, "saga-5", input, NULL, &rec, &err),
               MV_SAGA_STEP_FAILED, &err);
    json_decref(input);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "compensating");
    CHECK_STR(mv_json_str(step_of(rec, 0), "state"), "compensation-failed");
    CHECK_INT(json_integer_value(json_object_get(step_of(rec, 0), "nextAttemptAt")), e.now + 1000);
    json_decref(rec);
    CHECK_INT(http_sink_count(e.sink), 3); /* reserve, charge, release */
    /* not due yet: nothing is sent */
    e.now += 999;
    CHECK_CODE(mv_saga_compensate(e.engine, def, "saga-5", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "compensating");
    json_decref(rec);
    CHECK_INT(http_sink_count(e.sink), 3);
    e.now += 1;
    CHECK_CODE(mv_saga_compensate(e.engine, def, "saga-5", NULL, &rec, &err), MV_OK, &err);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "compensated");
    CHECK_INT(json_integer_value(json_object_get(step_of(rec, 0), "attempts")), 2);
    CHECK_INT(http_sink_count(e.sink), 4);
    seen first, second;
    REQUIRE(get_seen(&e, 2, &first));
    REQUIRE(get_seen(&e, 3, &second));
    CHECK_STR(second.path, "/release");
    CHECK_STR(first.key, second.key);
    CHECK_STR(second.key, mv_json_str(step_of(rec, 0), "compensationEffectId"));
    CHECK_INT(json_integer_value(json_object_get(first.body, "attempt")), 1);
    CHECK_INT(json_integer_value(json_object_get(second.body, "attempt")), 2);
    json_decref(first.body);
    json_decref(second.body);
    json_decref(rec);
    env_close(&e);
}

TEST(backoff_doubles_from_initial_and_stops_at_max) {
    env e;
    REQUIRE(env_open(&e, "wh_backoff.db"));
    mv_err err = {0};
    REQUIRE(add_checkout(&e, "{\"backoffMs\": {\"initial\": 300, \"max\": 1000}}", &err) == MV_OK);
    const mv_saga_definition *def = mv_saga_book_find(e.book, "checkout");
    CHECK_INT(def->max_attempts, 3);
    REQUIRE(def->backoff);
    CHECK_INT(def->backoff(1, def->ctx), 300);
    CHECK_INT(def->backoff(2, def->ctx), 600);
    CHECK_INT(def->backoff(3, def->ctx), 1000);
    CHECK_INT(def->backoff(60, def->ctx), 1000);
    CHECK_STR(def->capability, "orders.checkout");
    env_close(&e);
    REQUIRE(env_open(&e, "wh_backoff2.db"));
    REQUIRE(add_checkout(&e, NULL, &err) == MV_OK);
    def = mv_saga_book_find(e.book, "checkout");
    CHECK_INT(def->backoff(1, def->ctx), 100);
    CHECK_INT(def->backoff(4, def->ctx), 800);
    CHECK_INT(def->backoff(11, def->ctx), 60000);
    CHECK_INT(def->backoff(1000, def->ctx), 60000);
    env_close(&e);
}

/* The error of adding text as "bad.json" (MV_OK when it was accepted). */
static mv_code add_text(mv_saga_book *book, const char *text, mv_err *err) {
    json_t *j = NULL;
    mv_code rc = mv_json_parse(text, strlen(text), &j, err);
    if (rc == MV_OK) rc = mv_saga_book_add_json(book, j, "bad.json", err);
    json_decref(j);
    return rc;
}

#define STEP(n)                                                                                    \
    "{\"name\": \"" n "\", \"run\": {\"webhook\": \"http://h/r\"}, "                               \
    "\"compensate\": {\"webhook\": \"http://h/c\"}}"

TEST(definitions_are_validated_naming_the_file_and_the_key) {
    mv_saga_book *book = mv_saga_book_new(NULL);
    REQUIRE(book);
    mv_err err = {0};
    static const struct {
        const char *text, *message;
    } bad[] = {
        {"{\"name\": \"a\", \"steps\": [" STEP("s") "], \"extra\": 1}",
         "bad.json: unknown key \"extra\""},
        {"{\"name\": \"a\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": \"http://h/r\"}, "
         "\"compensate\": {\"webhook\": \"http://h/c\"}, \"timeout\": 5}]}",
         "bad.json: unknown key \"steps[0].timeout\""},
        {"{\"name\": \"a\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": \"http://h/r\", "
         "\"method\": \"PUT\"}, \"compensate\": {\"webhook\": \"http://h/c\"}}]}",
         "bad.json: unknown key \"steps[0].run.method\""},
        {"{\"name\": \"a\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": \"ftp://h/r\"}, "
         "\"compensate\": {\"webhook\": \"http://h/c\"}}]}",
         "bad.json: steps[0].run.webhook must be an http:// or https:// URL, got \"ftp://h/r\""},
        {"{\"name\": \"a\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": "
         "\"http://h/r\"}}]}",
         "bad.json: steps[0].compensate must be an object {\"webhook\": URL}"},
        {"{\"name\": \"a\", \"steps\": [" STEP("s") ", " STEP("t") ", " STEP("s") "]}",
         "bad.json: steps[2].name \"s\" is used by steps[0] as well"},
        {"{\"name\": \"a\", \"steps\": []}", "bad.json: steps must be a non-empty array"},
        {"{\"steps\": [" STEP("s") "]}",
         "bad.json: name must be a string of 1 to 128 printable characters without spaces"},
        {"{\"name\": \"a\", \"capability\": \"Orders!\", \"steps\": [" STEP("s") "]}",
         "bad.json: capability must be a capability id such as \"orders.checkout\" (lowercase "
         "letters and digits, parts joined by '.' or '-')"},
        {"{\"name\": \"a\", \"retry\": {\"maxAttempts\": 0}, \"steps\": [" STEP("s") "]}",
         "bad.json: retry.maxAttempts must be an integer between 1 and 1000"},
        {"{\"name\": \"a\", \"retry\": {\"backoffMs\": {\"initial\": -1}}, \"steps\": [" STEP(
             "s") "]}",
         "bad.json: retry.backoffMs.initial must be a non-negative integer"},
        {"{\"name\": \"a\", \"retry\": {\"backoffMs\": {\"initial\": 500, \"max\": 100}}, "
         "\"steps\": [" STEP("s") "]}",
         "bad.json: retry.backoffMs.max must be at least retry.backoffMs.initial"},
        {"{\"name\": \"a\", \"retry\": {\"backoff\": 5}, \"steps\": [" STEP("s") "]}",
         "bad.json: unknown key \"retry.backoff\""},
        {"{\"name\": \"a\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": \"http://h/r\"}, "
         "\"compensate\": {\"webhook\": \"http://h/c\"}, \"idempotent\": \"yes\"}]}",
         "bad.json: steps[0].idempotent must be true or false"},
        {"{\"name\": \"a\", \"steps\": [" STEP(
             "s") ", {\"name\": \"t\", \"run\": {\"webhook\": "
                  "\"http://h/r\"}, \"compensate\": {\"webhook\": \"http://h/c\"}, \"idempotent\": "
                  "1}]}",
         "bad.json: steps[1].idempotent must be true or false"},
        {"{\"name\": \"a\", \"retry\": {\"maxAttempts\": 1001}, \"steps\": [" STEP("s") "]}",
         "bad.json: retry.maxAttempts must be an integer between 1 and 1000"},
        {"{\"name\": \"a\", \"retry\": {\"maxAttempts\": 2.5}, \"steps\": [" STEP("s") "]}",
         "bad.json: retry.maxAttempts must be an integer between 1 and 1000"},
        {"[]", "bad.json: a saga definition must be a JSON object"},
#define DELAYED(v)                                                                                 \
    "{\"name\": \"a\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": \"http://h/r\"}, "     \
    "\"compensate\": {\"webhook\": \"http://h/c\"}, \"delayMs\": " v "}]}"
        {DELAYED("-1"), "bad.json: steps[0].delayMs must be an integer from 0 to 31536000000 "
                        "(milliseconds, at most 365 days)"},
        {DELAYED("31536000001"), "bad.json: steps[0].delayMs must be an integer from 0 to "
                                 "31536000000 (milliseconds, at most 365 days)"},
        {DELAYED("1.5"), "bad.json: steps[0].delayMs must be an integer from 0 to 31536000000 "
                         "(milliseconds, at most 365 days)"},
        {DELAYED("\"1h\""), "bad.json: steps[0].delayMs must be an integer from 0 to "
                            "31536000000 (milliseconds, at most 365 days)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mv_err_clear(&err);
        CHECK_CODE(add_text(book, bad[i].text, &err), MV_INVALID_CONFIG, &err);
        CHECK_STR(err.message, bad[i].message);
    }
    CHECK(mv_saga_book_find(book, "a") == NULL);
    CHECK_CODE(add_text(book,
                        "{\"name\": \"b\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": "
                        "\"http://h/r\"}, \"compensate\": {\"webhook\": \"http://h/c\"}, "
                        "\"idempotent\": false}]}",
                        &err),
               MV_OK, &err);
    CHECK_CODE(add_text(book, "{\"name\": \"a\", \"steps\": [" STEP("s") "]}", &err), MV_OK, &err);
    CHECK_CODE(
        add_text(book,
                 "{\"name\": \"later\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": "
                 "\"http://h/r\"}, \"compensate\": {\"webhook\": \"http://h/c\"}, "
                 "\"delayMs\": 31536000000}]}",
                 &err),
        MV_OK, &err);
    CHECK_CODE(add_text(book, "{\"name\": \"a\", \"steps\": [" STEP("t") "]}", &err),
               MV_INVALID_CONFIG, &err);
    CHECK_STR(err.message, "bad.json: saga definition \"a\" is already defined");
    const mv_saga_definition *def = mv_saga_book_find(book, "a");
    REQUIRE(def);
    CHECK_INT(def->ncompensators, 1);
    CHECK(def->capability == NULL);
    mv_saga_book_free(book);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(a_directory_loads_every_json_file_and_reports_every_bad_one) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmp_path("sagas"));
    mkdir(dir, 0700);
    char path[700];
    snprintf(path, sizeof path, "%s/a.json", dir);
    write_file(path, "{\"name\": \"one\", \"steps\": [" STEP("s") "]}");
    snprintf(path, sizeof path, "%s/b.json", dir);
    write_file(path, "{\"name\": \"two\", \"steps\": [" STEP("s") "], \"x\": 1}");
    snprintf(path, sizeof path, "%s/c.json", dir);
    write_file(path, "{\"name\": ");
    snprintf(path, sizeof path, "%s/d.json", dir);
    write_file(path, "{\"name\": \"one\", \"steps\": [" STEP("s") "]}");
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    write_file(path, "ignored");
    mv_saga_book *book = mv_saga_book_new(NULL);
    mv_err err = {0};
    CHECK_CODE(mv_saga_book_load_dir(book, dir, &err), MV_INVALID_CONFIG, &err);
    CHECK(strstr(err.message, "b.json: unknown key \"x\"") != NULL);
    CHECK(strstr(err.message, "c.json") != NULL);
    CHECK(strstr(err.message, "d.json: saga definition \"one\" is already defined") != NULL);
    CHECK(strstr(err.message, "a.json") == NULL);
    CHECK(mv_saga_book_find(book, "one") != NULL);
    CHECK(mv_saga_book_find(book, "two") == NULL);
    mv_saga_book_free(book);
    book = mv_saga_book_new(NULL);
    CHECK_CODE(mv_saga_book_load_file(book, "examples/sagas/checkout.json", &err), MV_OK, &err);
    CHECK(mv_saga_book_find(book, "checkout") != NULL);
    CHECK_CODE(mv_saga_book_load_dir(book, "/nonexistent/sagas", &err), MV_IO, &err);
    mv_saga_book_free(book);
}

int main(void) {
    return RUN_TESTS(a_three_step_saga_posts_each_step_with_earlier_results_and_completes,
                     a_rejected_third_step_compensates_the_second_then_the_first,
                     a_step_answering_500_sends_the_saga_to_manual_review_without_compensating,
                     a_refused_connection_counts_as_not_committed,
                     a_failing_compensation_is_retried_after_the_backoff_with_the_same_effect_id,
                     backoff_doubles_from_initial_and_stops_at_max,
                     definitions_are_validated_naming_the_file_and_the_key,
                     a_directory_loads_every_json_file_and_reports_every_bad_one);
}
