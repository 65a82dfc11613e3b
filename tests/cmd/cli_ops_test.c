/* cli_ops_test.c — the operator commands as real processes ($BUILD/missive through popen, cwd =
 * repository root) on a SQLite file: `missive reconcile` over every kind, `missive saga resolve
 * --config` with the saga's own definition, and `missive outbox run --config` delivering due rows
 * to http_sink with the configured signing secret. */
#include <sys/wait.h>

#include "durable/fixture.h"
#include "missive/deliver.h"
#include "store/db.h"
#include "support/http_sink.h"

/* Runs "missive <args>" with env prefix (may be ""), stdout into out, stderr into err_out;
 * returns the exit status. */
static int missive(const char *env, const char *args, char *out, size_t size, char *err_out,
                   size_t err_size) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    const char *err_path = test_tmp_path("stderr.txt");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s/missive %s 2>%s", env, build, args, err_path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    FILE *f = fopen(err_path, "r");
    n = f ? fread(err_out, 1, err_size - 1, f) : 0;
    err_out[n] = '\0';
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *line = s; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (strstr(buf, needle)) n++;
        line = end ? end + 1 : NULL;
    }
    return n;
}

typedef struct seed_ctx {
    int64_t now;
} seed_ctx;

static const char SQL_PUT_MESSAGE[] =
    "INSERT INTO messages (id, type, template_cd, to_roles, sender_content, receiver_content, "
    "documents, payment_cd, payload, action_state, archived, action_cd, action_attempt_id, "
    "action_lease_expires_at, created_at, updated_at) "
    "VALUES (?, 'request', 'booking', '[]', '{}', '{}', '[]', '', '{}', ?, 0, 'accept', ?, ?, 1, "
    "?)";
static const char SQL_PUT_REQUEST[] =
    "INSERT INTO message_requests (client_request_owner_id, template_cd, client_request_id, "
    "state, fingerprint, lease_owner_id, lease_expires_at, created_at, updated_at) "
    "VALUES ('u1', 'booking', 'req-1', 'pending', 'fp', 'dead-owner', ?, 1, 1)";
static const char SQL_PUT_FAILED_OUTBOX[] =
    "INSERT INTO outbox (id, kind, payload, state, attempts, next_attempt_at, last_error, "
    "failure_stage, created_at, updated_at) VALUES ('11111111-1111-4111-8111-111111111111', "
    "'webhook', '{\"url\":\"http://127.0.0.1:1/x\",\"body\":{}}', 'failed', 5, 1, 'refused', "
    "'webhook', 1, 2)";
static const char SQL_PUT_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version) VALUES (?, ?, 'manual-review', '{}', '', "
    "'[]', 1, 1, 1, 1)";
/* its step, a row of saga_steps as every saga's steps are since migration 10 */
static const char SQL_PUT_STEP[] =
    "INSERT INTO saga_steps (saga_id, idx, name, state, effect_id, compensation_effect_id, "
    "compensation_args, result, attempts, error_code, next_attempt_at, created_at, updated_at) "
    "VALUES (?, 0, 'charge', 'ambiguous', 'eff_charge', 'eff_refund', 'null', NULL, 0, "
    "'execution_unknown', NULL, 1, 1)";

static mv_code seed_fn(mv_db *db, void *ctx, mv_err *err) {
    seed_ctx *s = ctx;
    mv_code rc;
    if ((rc = mv_db_execf(db, SQL_PUT_MESSAGE, NULL, err, "sssii", "aaaaaaaaaaaaaaaaaaaaaaaa",
                          "processing", "att-expired", s->now - 5000, s->now - 35000)) ||
        (rc = mv_db_execf(db, SQL_PUT_MESSAGE, NULL, err, "sssii", "bbbbbbbbbbbbbbbbbbbbbbbb",
                          "processing", "att-live", s->now + 600000, s->now)) ||
        (rc = mv_db_execf(db, SQL_PUT_MESSAGE, NULL, err, "sssni", "cccccccccccccccccccccccc",
                          "retryable", "att-retry", 1000)) ||
        (rc = mv_db_execf(db, SQL_PUT_REQUEST, NULL, err, "i", s->now - 1000)) ||
        (rc = mv_db_execf(db, SQL_PUT_FAILED_OUTBOX, NULL, err, "")) ||
        (rc = mv_db_execf(db, SQL_PUT_SAGA, NULL, err, "ss", "saga_cli", "checkout")) ||
        (rc = mv_db_execf(db, SQL_PUT_STEP, NULL, err, "s", "saga_cli")) ||
        (rc = mv_db_execf(db, SQL_PUT_SAGA, NULL, err, "ss", "saga_ghost", "ghost")) ||
        (rc = mv_db_execf(db, SQL_PUT_STEP, NULL, err, "s", "saga_ghost")))
        return rc;
    return MV_OK;
}

/* A migrated SQLite file with one finding of every kind (and things that are not findings). */
static bool seed_store(const char *name, char *url, size_t url_size) {
    mv_store *s = fixture_store("sqlite", name, url, url_size);
    if (!s) return false;
    int64_t t = 1000;
    mv_clock clock = mv_manual_clock(&t);
    mv_journal_options jo = {.clock = &clock};
    mv_journal *j = NULL;
    mv_err err = {0};
    mv_effect_intent in = {.effect_id = "eff_a", .capability = "db.write"};
    seed_ctx sc = {.now = mv_now_ms()};
    bool ok = mv_journal_new(s, &jo, &j, &err) == MV_OK &&
              mv_journal_intent(j, &in, &err) == MV_OK &&
              mv_store_write(s, seed_fn, &sc, &err) == MV_OK;
    if (!ok) fprintf(stderr, "seed: %s\n", err.message);
    mv_journal_free(j);
    mv_store_close(s);
    return ok;
}

TEST(reconcile_prints_every_kind_and_narrows_to_one) {
    char url[600], out[16384], err[4096], args[1024];
    REQUIRE(seed_store("ops_reconcile.db", url, sizeof url));
    snprintf(args, sizeof args, "reconcile --store %s", url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK_INT(count_lines(out, "\"kind\":\"effect\""), 1);
    CHECK_INT(count_lines(out, "\"kind\":\"saga\""), 2);
    CHECK_INT(count_lines(out, "\"kind\":\"action\""), 2);
    CHECK_INT(count_lines(out, "\"kind\":\"request\""), 1);
    CHECK_INT(count_lines(out, "\"kind\":\"outbox\""), 1);
    CHECK_INT(count_lines(out, "\"kind\":"), 7); /* every line is a finding */
    CHECK(strstr(out, "{\"kind\":\"action\",\"messageId\":\"aaaaaaaaaaaaaaaaaaaaaaaa\"") != NULL);
    CHECK_INT(count_lines(out, "\"actionAttemptId\":\"att-expired\""), 1);
    CHECK_INT(count_lines(out, "\"reason\":\"lease-expired\""), 2); /* the action, the request */
    CHECK_INT(count_lines(out, "\"reason\":\"stale-retryable\""), 1);
    CHECK(strstr(out, "bbbbbbbbbbbbbbbbbbbbbbbb") == NULL); /* a live lease */
    CHECK(strstr(out, "{\"kind\":\"request\",\"tenantId\":\"default\",\"ownerId\":\"u1\","
                      "\"templateCd\":\"booking\",\"clientRequestId\":\"req-1\"") != NULL);
    CHECK(strstr(out, "{\"kind\":\"outbox\",\"id\":\"11111111-1111-4111-8111-111111111111\","
                      "\"outboxKind\":\"webhook\",\"state\":\"failed\",\"attempts\":5,"
                      "\"lastError\":\"refused\",\"failureStage\":\"webhook\",\"updatedAt\":2,"
                      "\"reason\":\"failed\"}") != NULL);

    snprintf(args, sizeof args, "reconcile --store %s --kind actions", url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK_INT(count_lines(out, "\"kind\":\"action\""), 2);
    CHECK_INT(count_lines(out, "\"kind\":"), 2);
    /* a retryable attempt is stale only after --stale-ms */
    snprintf(args, sizeof args, "reconcile --store %s --kind actions --stale-ms 99999999999999",
             url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK_INT(count_lines(out, "\"kind\":\"action\""), 1);
    CHECK_INT(count_lines(out, "stale-retryable"), 0);
    snprintf(args, sizeof args, "reconcile --store %s --kind requests", url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK_INT(count_lines(out, "\"kind\":"), 1);
    snprintf(args, sizeof args, "reconcile --store %s --kind outbox", url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK_INT(count_lines(out, "\"kind\":\"outbox\""), 1);

    snprintf(args, sizeof args, "reconcile --store %s --kind nothing", url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    CHECK(strstr(err, "effects sagas actions requests outbox") != NULL);
    snprintf(args, sizeof args, "reconcile --store %s --stale-ms soon", url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    CHECK_INT(missive("", "reconcile --store sqlite:/nonexistent/dir/x.db", out, sizeof out, err,
                      sizeof err),
              1);
}

/* A config directory: config.json naming the store and (when sagas) a sagas/ directory holding
 * the example checkout definition. Returns the config path. */
static const char *make_config(const char *name, const char *url, bool sagas, const char *extra) {
    static char config[700];
    char dir[600], path[800];
    snprintf(dir, sizeof dir, "%s", test_tmp_path(name));
    mkdir(dir, 0700);
    if (sagas) {
        snprintf(path, sizeof path, "%s/sagas", dir);
        mkdir(path, 0700);
        json_t *def = NULL;
        if (mv_json_load_file("examples/sagas/checkout.json", &def, NULL) == MV_OK) {
            snprintf(path, sizeof path, "%s/sagas/checkout.json", dir);
            json_dump_file(def, path, 0);
        }
        json_decref(def);
    }
    snprintf(config, sizeof config, "%s/config.json", dir);
    char text[2048];
    snprintf(text, sizeof text, "{\"store\": \"%s\"%s%s}", url,
             sagas ? ", \"sagas\": \"sagas/\"" : "", extra ? extra : "");
    write_file(config, text);
    return config;
}

TEST(saga_resolve_with_the_config_uses_the_definition_the_saga_names) {
    char url[600], out[8192], err[4096], args[2048];
    REQUIRE(seed_store("ops_resolve.db", url, sizeof url));
    const char *config = make_config("resolve-cfg", url, true, NULL);
    snprintf(args, sizeof args,
             "saga resolve --config %s --saga saga_cli --kind execution --step charge "
             "--effect eff_charge --outcome committed --result '{\"charged\":true}'",
             config);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "\"sagaId\":\"saga_cli\"") != NULL);
    CHECK(strstr(out, "\"state\":\"running\"") != NULL);
    CHECK(strstr(out, "\"result\":{\"charged\":true}") != NULL);
    /* resolving again: the step no longer awaits a resolution */
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "not awaiting") != NULL);
    /* a saga whose definition the directory does not hold */
    snprintf(args, sizeof args,
             "saga resolve --config %s --saga saga_ghost --kind execution --step charge "
             "--effect eff_charge --outcome not-committed --error-code declined",
             config);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "\"ghost\"") != NULL);
    CHECK_STR(out, "");
    /* a config without sagas */
    const char *plain = make_config("resolve-cfg2", url, false, NULL);
    snprintf(args, sizeof args,
             "saga resolve --config %s --saga saga_ghost --kind execution --step charge "
             "--effect eff_charge --outcome committed",
             plain);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "no \"sagas\" directory") != NULL);
    /* --store still works (the stored retry limit decides) */
    snprintf(args, sizeof args,
             "saga resolve --store %s --saga saga_ghost --kind execution --step charge "
             "--effect eff_charge --outcome not-committed",
             url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "\"state\":\"compensating\"") != NULL);
    /* exactly one of --config and --store */
    snprintf(args, sizeof args,
             "saga resolve --config %s --store %s --saga s --kind execution --step a --effect e "
             "--outcome committed",
             config, url);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
}

typedef struct rows_ctx {
    const char *base;
} rows_ctx;

static mv_code add_rows(mv_db *db, void *ctx, mv_err *err) {
    rows_ctx *c = ctx;
    const char *paths[] = {"/ok1", "/ok2", "/fail"};
    int64_t now = mv_now_ms() - 1;
    for (int i = 0; i < 3; i++) {
        char url[256];
        snprintf(url, sizeof url, "%s%s", c->base, paths[i]);
        json_t *p = json_pack("{s:s, s:{s:i}, s:s}", "url", url, "body", "n", i, "idempotencyKey",
                              paths[i] + 1);
        mv_code rc = mv_outbox_add_tx(db, MV_OUTBOX_WEBHOOK, p, now, err);
        json_decref(p);
        if (rc) return rc;
    }
    return MV_OK;
}

TEST(outbox_run_delivers_due_rows_with_the_configured_secret_and_reports_failures) {
    char url[600], out[4096], err[4096], args[1024];
    mv_store *s = fixture_store("sqlite", "ops_outbox.db", url, sizeof url);
    REQUIRE(s);
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.path = "/fail", .status = 500});
    rows_ctx rc = {.base = http_sink_url(sink)};
    mv_err e = {0};
    REQUIRE(mv_store_write(s, add_rows, &rc, &e) == MV_OK);
    mv_store_close(s);
    const char *config =
        make_config("outbox-cfg", url, false, ", \"webhookSecretEnv\": \"OPS_TEST_SECRET\"");
    snprintf(args, sizeof args, "outbox run --config %s", config);
    CHECK_INT(missive("OPS_TEST_SECRET=s3cret", args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "delivered 2 outbox rows\n");
    CHECK(strstr(err, "\"stage\":\"webhook\"") != NULL);
    CHECK(strstr(err, "\"final\":false") != NULL);
    CHECK_INT(http_sink_count(sink), 3);
    for (int i = 0; i < 3; i++) {
        http_sink_request r;
        if (!http_sink_get(sink, i, &r)) continue;
        char expected[72];
        mv_webhook_signature("s3cret", 6, r.body, r.body_len, expected);
        CHECK_STR(http_sink_header(&r, "X-Missive-Signature"), expected);
        CHECK_STR(http_sink_header(&r, "Idempotency-Key"), r.path + 1);
        http_sink_request_free(&r);
    }
    /* nothing due any more: the failed row waits for its backoff */
    CHECK_INT(missive("OPS_TEST_SECRET=s3cret", args, out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "delivered 0 outbox rows\n");
    CHECK_INT(http_sink_count(sink), 3);
    /* the secret's variable must be set */
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 1);
    CHECK(strstr(err, "OPS_TEST_SECRET") != NULL);
    CHECK_INT(missive("", "outbox run", out, sizeof out, err, sizeof err), 2);
    CHECK_INT(missive("", "outbox drain --config x.json", out, sizeof out, err, sizeof err), 2);
    http_sink_stop(sink);
}

TEST(a_misspelled_flag_is_a_usage_error_before_anything_is_changed) {
    char args[1200], out[4096], err[4096];
    const char *db = test_tmp_path("typo.db");
    /* --reslt: without the check the saga would be resolved with no result */
    snprintf(args, sizeof args,
             "saga resolve --store sqlite:%s --saga s1 --kind execution --step a --effect e "
             "--outcome succeeded --reslt '{\"x\": 1}'",
             db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    CHECK(strstr(err, "--reslt") != NULL);
    snprintf(args, sizeof args, "gc --store sqlite:%s --older-than 5000", db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    CHECK(strstr(err, "--older-than") != NULL);
    snprintf(args, sizeof args, "reconcile --store sqlite:%s --knd actions", db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    snprintf(args, sizeof args,
             "approvals decide --store sqlite:%s 00000000-0000-4000-8000-000000000000 approved "
             "--tenant t --by u --dry-run",
             db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    CHECK_INT(missive("", "outbox run --config x.json --once", out, sizeof out, err, sizeof err),
              2);
    snprintf(args, sizeof args, "migrate --store sqlite:%s --verbose", db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 2);
    /* flags still work in both forms */
    snprintf(args, sizeof args, "migrate --store=sqlite:%s", db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "reconcile --store sqlite:%s --kind=actions --stale-ms 5", db);
    CHECK_INT(missive("", args, out, sizeof out, err, sizeof err), 0);
}

int main(void) {
    return RUN_TESTS(a_misspelled_flag_is_a_usage_error_before_anything_is_changed,
                     reconcile_prints_every_kind_and_narrows_to_one,
                     saga_resolve_with_the_config_uses_the_definition_the_saga_names,
                     outbox_run_delivers_due_rows_with_the_configured_secret_and_reports_failures);
}
