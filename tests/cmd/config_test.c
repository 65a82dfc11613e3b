/* config_test.c — loading the daemon config: the DESIGN example, defaults, unknown keys named by
 * path, relative paths, cross-key rules, secrets from the environment, overrides. */
#include <stdlib.h>

#include "cmd/config.h"
#include "test.h"

static const char *write_config(const char *name, const char *text) {
    const char *path = test_tmp_path(name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static const char SECRET32[] = "0123456789abcdef0123456789abcdef";

static const char EXAMPLE[] =
    "{\n"
    "  \"listen\": \"127.0.0.1:8080\",\n"
    "  \"store\": \"sqlite:missive.db\",\n"
    "  \"templates\": \"templates/\",\n"
    "  \"sagas\": \"sagas/\",\n"
    "  \"auth\": {\"mode\": \"headers\"},\n"
    "  \"adminRoles\": [\"admin\"],\n"
    "  \"adminPermissionKey\": \"is.admin\",\n"
    "  \"list\": {\"defaultLimit\": 50, \"maxLimit\": 100},\n"
    "  \"leases\": {\"clientRequestMs\": 30000, \"clientRequestWaitMs\": 5000, "
    "\"clientRequestPollMs\": 200, \"actionMs\": 30000},\n"
    "  \"webhookSecretEnv\": \"MISSIVE_WEBHOOK_SECRET\",\n"
    "  \"webhooks\": {\"connectTimeoutMs\": 2000, \"timeoutMs\": 10000, \"maxResponseBytes\": "
    "1048576},\n"
    "  \"shutdownTimeoutMs\": 30000,\n"
    "  \"payment\": {\"webhook\": \"http://127.0.0.1:9000/payments\"},\n"
    "  \"email\": {\"smtp\": \"smtp://127.0.0.1:2525\", \"from\": \"noreply@example.com\",\n"
    "            \"directory\": {\"webhook\": \"http://127.0.0.1:9000/users\"}, \"exclusions\": "
    "[\"welcome\"]},\n"
    "  \"approvals\": {\"secretEnv\": \"MISSIVE_APPROVAL_SECRET\", \"ttlMs\": 900000}\n"
    "}\n";

static void set_secrets(void) {
    setenv("MISSIVE_WEBHOOK_SECRET", "whsec", 1);
    setenv("MISSIVE_APPROVAL_SECRET", SECRET32, 1);
}

/* Loads text and expects failure with a message containing want. */
static void expect_error(const char *text, const char *want) {
    const char *path = write_config("bad.json", text);
    mv_config *cfg = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &cfg, &err), MV_INVALID_CONFIG, &err);
    CHECK(cfg == NULL);
    if (!strstr(err.message, want)) {
        char m[1024];
        snprintf(m, sizeof m, "message \"%s\" lacks \"%s\"", err.message, want);
        test_fail_(__FILE__, __LINE__, m);
    }
    CHECK(strstr(err.message, "bad.json") != NULL);
}

TEST(the_design_example_loads_with_every_value) {
    set_secrets();
    const char *path = write_config("example.json", EXAMPLE);
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    char want[600];
    CHECK_STR(c->listen, "127.0.0.1:8080");
    snprintf(want, sizeof want, "sqlite:%s/missive.db", dir);
    CHECK_STR(c->store, want);
    snprintf(want, sizeof want, "%s/templates/", dir);
    CHECK_STR(c->templates, want);
    snprintf(want, sizeof want, "%s/sagas/", dir);
    CHECK_STR(c->sagas, want);
    CHECK(!c->auth.jwt);
    CHECK_INT(c->n_admin_roles, 1);
    CHECK_STR(c->admin_roles[0], "admin");
    CHECK_STR(c->admin_permission_key, "is.admin");
    CHECK_INT(c->list.default_limit, 50);
    CHECK_INT(c->list.max_limit, 100);
    CHECK_INT(c->leases.client_request_wait_ms, 5000);
    CHECK_INT(c->leases.client_request_poll_ms, 200);
    CHECK_STR((char *)c->webhook_secret.bytes, "whsec");
    CHECK_INT(c->webhook_secret.len, 5);
    CHECK_INT(c->webhooks.max_response_bytes, 1048576);
    CHECK(c->payment.enabled);
    CHECK_STR(c->payment.webhook, "http://127.0.0.1:9000/payments");
    CHECK(c->email.enabled);
    CHECK_STR(c->email.from, "noreply@example.com");
    CHECK_STR(c->email.directory_webhook, "http://127.0.0.1:9000/users");
    CHECK_INT(c->email.n_exclusions, 1);
    CHECK(c->approvals.enabled);
    CHECK_INT(c->approvals.secret.len, 32);
    CHECK_INT(c->approvals.ttl_ms, 900000);
    mv_config_free(c);
}

TEST(an_empty_object_gives_the_documented_defaults) {
    const char *path = write_config("empty.json", "{}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_STR(c->listen, "127.0.0.1:8080");
    CHECK(strncmp(c->store, "sqlite:/", 8) == 0 && strstr(c->store, "/missive.db"));
    CHECK(c->templates == NULL && c->sagas == NULL);
    CHECK_STR(c->admin_permission_key, "is.admin");
    CHECK_INT(c->n_admin_roles, 0);
    CHECK_INT(c->list.default_limit, 50);
    CHECK_INT(c->leases.client_request_ms, 30000);
    CHECK_INT(c->leases.action_ms, 30000);
    CHECK_INT(c->webhooks.timeout_ms, 10000);
    CHECK_INT(c->webhooks.connect_timeout_ms, 2000);
    CHECK_INT(c->shutdown_timeout_ms, 30000);
    CHECK_INT(c->threads, 64);
    CHECK_INT(c->max_connections, 10000);
    CHECK_INT(c->max_connections_per_ip, 512);
    CHECK_INT(c->header_timeout_ms, 10000);
    CHECK(!c->payment.enabled && !c->email.enabled && !c->approvals.enabled);
    CHECK(c->webhook_secret.env == NULL);
    CHECK_INT(c->outbox.max_attempts, 10);
    mv_config_free(c);
}

TEST(unknown_keys_are_errors_naming_their_path) {
    expect_error("{\"auth\": {\"mode\": \"headers\", \"foo\": 1}}", "unknown key \"auth.foo\"");
    expect_error("{\"listne\": \"127.0.0.1:1\"}", "unknown key \"listne\"");
    setenv("MISSIVE_APPROVAL_SECRET", SECRET32, 1);
    expect_error("{\"email\": {\"smtp\": \"smtp://h\", \"from\": \"a@b\", \"directory\": "
                 "{\"file\": \"u.json\", \"bar\": 2}}}",
                 "unknown key \"email.directory.bar\"");
    expect_error("{\"leases\": {\"actionMS\": 40000}}", "unknown key \"leases.actionMS\"");
}

TEST(values_of_the_wrong_type_or_range_name_their_key) {
    expect_error("{\"threads\": \"8\"}", "\"threads\" must be an integer");
    expect_error("{\"maxConnectionsPerIp\": -1}", "\"maxConnectionsPerIp\" must be an integer");
    expect_error("{\"headerTimeoutMs\": 0}", "\"headerTimeoutMs\" must be an integer");
    expect_error("{\"list\": {\"maxLimit\": 0}}", "\"list.maxLimit\" must be an integer from 1");
    expect_error("{\"auth\": {\"mode\": \"basic\"}}",
                 "\"auth.mode\" must be \"headers\" or \"jwt\"");
    expect_error("{\"adminRoles\": \"admin\"}", "\"adminRoles\" must be an array");
    expect_error("{\"adminRoles\": [\"a\", 3]}", "\"adminRoles[1]\"");
    expect_error("{\"auth\": {\"trustProxyHeaders\": 1}}",
                 "\"auth.trustProxyHeaders\" must be true or false");
    expect_error("{\"list\": {\"defaultLimit\": 80, \"maxLimit\": 60}}", "must not exceed");
    expect_error("{\"storeOptions\": {\"synchronous\": \"EXTRA\"}}", "storeOptions.synchronous");
    expect_error("{\"store\": \"mysql://x\"}", "\"store\" must be");
    expect_error("[1]", "must be a JSON object");
    expect_error("{\"payment\": {}}", "\"payment.webhook\" is required");
    expect_error("{\"payment\": {\"webhook\": \"ftp://x\"}}", "\"payment.webhook\" must be a URL");
}

TEST(email_takes_exactly_one_of_smtp_and_webhook_and_from_only_with_smtp) {
    const char *path = write_config("email-webhook.json",
                                    "{\"email\": {\"webhook\": \"http://127.0.0.1:9/email\", "
                                    "\"directory\": {\"file\": \"users.json\"}}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK(c->email.enabled);
    CHECK_STR(c->email.webhook, "http://127.0.0.1:9/email");
    CHECK(c->email.smtp == NULL);
    mv_config_free(c);
    expect_error("{\"email\": {\"directory\": {\"file\": \"u.json\"}}}",
                 "\"email\" needs exactly one of \"smtp\" and \"webhook\"");
    expect_error("{\"email\": {\"smtp\": \"smtp://h\", \"from\": \"a@b\", \"webhook\": "
                 "\"http://h/e\", \"directory\": {\"file\": \"u.json\"}}}",
                 "exactly one of");
    expect_error("{\"email\": {\"webhook\": \"smtp://h\", \"directory\": {\"file\": \"u.json\"}}}",
                 "\"email.webhook\" must be a URL");
    expect_error("{\"email\": {\"smtp\": \"smtp://h\", \"directory\": {\"file\": \"u.json\"}}}",
                 "\"email.from\" must be an email address");
}

TEST(saga_encryption_takes_a_key_of_exactly_32_raw_bytes_from_the_environment) {
    setenv("MISSIVE_TEST_SAGA_KEY", SECRET32, 1);
    const char *path = write_config(
        "saga-key.json", "{\"sagaEncryption\": {\"keyEnv\": \"MISSIVE_TEST_SAGA_KEY\"}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_INT(c->saga_encryption.key.len, 32);
    CHECK(memcmp(c->saga_encryption.key.bytes, SECRET32, 32) == 0);
    mv_config_free(c);
    setenv("MISSIVE_TEST_SAGA_KEY", "0123456789abcdef0123456789abcde", 1);
    expect_error("{\"sagaEncryption\": {\"keyEnv\": \"MISSIVE_TEST_SAGA_KEY\"}}",
                 "must hold at least 32 bytes, it has 31");
    setenv("MISSIVE_TEST_SAGA_KEY", "0123456789abcdef0123456789abcdef0", 1);
    expect_error("{\"sagaEncryption\": {\"keyEnv\": \"MISSIVE_TEST_SAGA_KEY\"}}",
                 "exactly 32 raw bytes");
    unsetenv("MISSIVE_TEST_SAGA_KEY");
    expect_error("{\"sagaEncryption\": {\"keyEnv\": \"MISSIVE_TEST_SAGA_KEY\"}}", "is not set");
    expect_error("{\"sagaEncryption\": {}}", "\"sagaEncryption.keyEnv\" is required");
    expect_error("{\"sagaEncryption\": {\"key\": \"x\"}}", "unknown key \"sagaEncryption.key\"");
}

TEST(invalid_json_is_a_config_error_naming_line_and_column) {
    expect_error("{\n  \"listen\": ,\n}", "line 2");
}

TEST(relative_paths_resolve_against_the_config_directory) {
    setenv("MISSIVE_APPROVAL_SECRET", SECRET32, 1);
    const char *path = write_config(
        "rel.json", "{\"store\": \"sqlite:data/m.db\", \"templates\": \"t\", "
                    "\"sagas\": \"/abs/sagas\", \"email\": {\"smtp\": \"smtp://h:25\", "
                    "\"from\": \"a@b\", \"directory\": {\"file\": \"users.json\"}}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    char want[600];
    snprintf(want, sizeof want, "sqlite:%s/data/m.db", dir);
    CHECK_STR(c->store, want);
    snprintf(want, sizeof want, "%s/t", dir);
    CHECK_STR(c->templates, want);
    CHECK_STR(c->sagas, "/abs/sagas");
    snprintf(want, sizeof want, "%s/users.json", dir);
    CHECK_STR(c->email.directory_file, want);
    mv_config_free(c);
}

TEST(memory_and_absolute_and_postgres_stores_are_kept_as_given) {
    const char *stores[] = {"sqlite::memory:", "sqlite:/var/m.db", "postgres://u@h/db"};
    for (int i = 0; i < 3; i++) {
        char text[128];
        snprintf(text, sizeof text, "{\"store\": \"%s\"}", stores[i]);
        const char *path = write_config("s.json", text);
        mv_config *c = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
        if (c) CHECK_STR(c->store, stores[i]);
        mv_config_free(c);
    }
}

TEST(action_lease_must_exceed_the_webhook_timeout) {
    expect_error("{\"leases\": {\"actionMs\": 10000}}", "\"leases.actionMs\" (10000) must exceed");
    expect_error("{\"webhooks\": {\"timeoutMs\": 30000}}",
                 "must exceed \"webhooks.timeoutMs\" (30000)");
    const char *path = write_config("ok.json", "{\"leases\": {\"actionMs\": 10001}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    mv_config_free(c);
}

TEST(secrets_come_from_the_environment_and_must_be_set) {
    unsetenv("MISSING_SECRET_FOR_TEST");
    expect_error(
        "{\"webhookSecretEnv\": \"MISSING_SECRET_FOR_TEST\"}",
        "environment variable MISSING_SECRET_FOR_TEST (named by \"webhookSecretEnv\") is not set");
    expect_error("{\"approvals\": {\"secretEnv\": \"MISSING_SECRET_FOR_TEST\"}}",
                 "(named by \"approvals.secretEnv\") is not set");
    expect_error("{\"approvals\": {\"ttlMs\": 1000}}", "\"approvals.secretEnv\" is required");
    setenv("SHORT_SECRET_FOR_TEST", "only-31-bytes-long-secret-value", 1);
    expect_error("{\"approvals\": {\"secretEnv\": \"SHORT_SECRET_FOR_TEST\"}}",
                 "at least 32 bytes, it has 31");
    expect_error("{\"auth\": {\"mode\": \"jwt\"}}", "needs \"auth.secretEnv\"");
    expect_error("{\"auth\": {\"mode\": \"jwt\", \"secretEnv\": \"SHORT_SECRET_FOR_TEST\"}}",
                 "at least 32 bytes");
    setenv("JWT_SECRET_FOR_TEST", SECRET32, 1);
    const char *path = write_config(
        "jwt.json", "{\"auth\": {\"mode\": \"jwt\", \"secretEnv\": \"JWT_SECRET_FOR_TEST\"}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK(c->auth.jwt);
    CHECK_INT(c->auth.secret.len, 32);
    CHECK(memcmp(c->auth.secret.bytes, SECRET32, 32) == 0);
    mv_config_free(c);
}

TEST(headers_auth_is_refused_on_a_public_address_unless_proxy_headers_are_trusted) {
    expect_error("{\"listen\": \"0.0.0.0:8080\"}", "trustProxyHeaders");
    expect_error("{\"listen\": \"[::]:8080\", \"auth\": {\"mode\": \"headers\"}}",
                 "trustProxyHeaders");
    const char *ok[] = {"{\"listen\": \"0.0.0.0:8080\", \"auth\": {\"trustProxyHeaders\": true}}",
                        "{\"listen\": \"localhost:8080\"}", "{\"listen\": \"[::1]:8080\"}"};
    for (int i = 0; i < 3; i++) {
        const char *path = write_config("listen.json", ok[i]);
        mv_config *c = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
        mv_config_free(c);
    }
}

TEST(command_line_overrides_replace_listen_and_store_and_are_checked) {
    const char *path = write_config("ov.json", "{\"store\": \"sqlite:a.db\"}");
    mv_config_overrides ov = {.listen = "127.0.0.1:9999", .store = "sqlite:rel/b.db"};
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, &ov, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_STR(c->listen, "127.0.0.1:9999");
    CHECK_STR(c->store, "sqlite:rel/b.db"); /* relative to the working directory */
    mv_config_free(c);
    mv_config_overrides bad = {.listen = "0.0.0.0:1"};
    CHECK_CODE(mv_config_load(path, &bad, &c, &err), MV_INVALID_CONFIG, &err);
    CHECK(strstr(err.message, "trustProxyHeaders") != NULL);
}

TEST(group_commit_is_on_by_default_and_store_options_can_turn_it_off) {
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(write_config("gc-default.json", "{}"), NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK(!c->store_options.no_group_commit);
    mv_config_free(c);
    c = NULL;
    CHECK_CODE(
        mv_config_load(write_config("gc-off.json", "{\"storeOptions\": {\"groupCommit\": false}}"),
                       NULL, &c, &err),
        MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK(c->store_options.no_group_commit);
    mv_config_free(c);
    expect_error("{\"storeOptions\": {\"groupCommit\": 0}}",
                 "\"storeOptions.groupCommit\" must be true or false");
}

TEST(webhook_secret_env_may_list_several_variables_and_whsec_values_are_decoded) {
    /* "aGVsbG8gd29ybGQ=" is base64 of "hello world" */
    setenv("MV_TEST_WH_NEW", "whsec_aGVsbG8gd29ybGQ=", 1);
    setenv("MV_TEST_WH_OLD", "plain-old-secret", 1);
    const char *path = write_config("rot.json", "{\"webhookSecretEnv\": [\"MV_TEST_WH_NEW\", "
                                                "\"MV_TEST_WH_OLD\"]}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_INT(c->n_webhook_keys, 2);
    CHECK_INT(c->webhook_keys[0].len, 11);
    CHECK(memcmp(c->webhook_keys[0].bytes, "hello world", 11) == 0);
    CHECK_INT(c->webhook_keys[1].len, 16);
    CHECK(memcmp(c->webhook_keys[1].bytes, "plain-old-secret", 16) == 0);
    CHECK_INT(c->webhook_secret.len, 11); /* the first one also keys X-Missive-Signature */
    mv_config_free(c);

    path = write_config("one.json", "{\"webhookSecretEnv\": \"MV_TEST_WH_OLD\"}");
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_INT(c->n_webhook_keys, 1);
    CHECK_INT(c->webhook_keys[0].len, 16);
    mv_config_free(c);

    setenv("MV_TEST_WH_BAD", "whsec_not*base64", 1);
    expect_error("{\"webhookSecretEnv\": [\"MV_TEST_WH_OLD\", \"MV_TEST_WH_BAD\"]}",
                 "MV_TEST_WH_BAD (named by \"webhookSecretEnv\") starts with whsec_ but the rest "
                 "is not base64");
    unsetenv("MV_TEST_WH_UNSET");
    expect_error("{\"webhookSecretEnv\": [\"MV_TEST_WH_OLD\", \"MV_TEST_WH_UNSET\"]}",
                 "MV_TEST_WH_UNSET (named by \"webhookSecretEnv\") is not set");
    expect_error("{\"webhookSecretEnv\": []}", "\"webhookSecretEnv\" must name 1 to 16 variables");
    expect_error("{\"webhookSecretEnv\": [\"A\", 3]}",
                 "\"webhookSecretEnv[1]\" must be a non-empty string");
    expect_error("{\"webhookSecretEnv\": 7}", "\"webhookSecretEnv\" must be a non-empty string");
}

TEST(identity_keys_load_and_their_rules_name_the_key) {
    const char *path = write_config(
        "idp.json",
        "{\"auth\": {\"mode\": \"jwt\", \"algorithms\": [\"RS256\", \"EdDSA\"], "
        "\"jwksFile\": \"keys/jwks.json\", \"jwksRefreshS\": 60, \"issuer\": \"https://i\", "
        "\"audience\": \"api\", \"leewaySeconds\": 5, \"requireExp\": false, "
        "\"claims\": {\"user\": \"email\", "
        "\"roles\": \"realm_access.roles\", \"permissions\": \"perms\", \"tenant\": \"org.id\"}}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK(c->auth.jwt);
    CHECK_INT(c->auth.algorithms, (1u << 0) | (1u << 2));
    CHECK(c->auth.jwks_file && c->auth.jwks_file[0] == '/' &&
          strstr(c->auth.jwks_file, "/keys/jwks.json"));
    CHECK_INT(c->auth.jwks_refresh_s, 60);
    CHECK_STR(c->auth.issuer, "https://i");
    CHECK_STR(c->auth.audience, "api");
    CHECK_INT(c->auth.leeway_s, 5);
    CHECK(!c->auth.require_exp);
    CHECK_STR(c->auth.claim_roles, "realm_access.roles");
    CHECK_STR(c->auth.claim_tenant, "org.id");
    mv_config_free(c);
    path = write_config("idp2.json",
                        "{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://idp/certs\"}}");
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_INT(c->auth.jwks_refresh_s, 300);
    CHECK_INT(c->auth.leeway_s, 30);
    CHECK(c->auth.require_exp); /* by default a token must carry exp */
    CHECK_INT(c->auth.algorithms, 0);
    mv_config_free(c);

    expect_error(
        "{\"auth\": {\"mode\": \"jwt\", \"algorithms\": [\"HS512\"], \"jwksUrl\": \"https://x\"}}",
        "\"auth.algorithms[0]\" must be one of RS256, ES256, EdDSA, HS256");
    expect_error(
        "{\"auth\": {\"mode\": \"jwt\", \"algorithms\": [\"HS256\"], \"jwksUrl\": \"https://x\"}}",
        "lists HS256, which needs \"auth.secretEnv\"");
    setenv("MV_TEST_JWT", SECRET32, 1);
    expect_error("{\"auth\": {\"mode\": \"jwt\", \"algorithms\": [\"ES256\"], \"secretEnv\": "
                 "\"MV_TEST_JWT\"}}",
                 "need \"auth.jwksFile\" or \"auth.jwksUrl\"");
    expect_error("{\"auth\": {\"mode\": \"jwt\"}}", "auth mode \"jwt\" needs");
    expect_error("{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"ftp://x\"}}",
                 "\"auth.jwksUrl\" must be a URL starting with http:// or https://");
    expect_error("{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://x\", \"jwksFile\": \"f\"}}",
                 "not both");
    expect_error("{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://x\", \"claims\": "
                 "{\"group\": \"g\"}}}",
                 "unknown key \"auth.claims.group\"");
    expect_error(
        "{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://x\", \"leewaySeconds\": -1}}",
        "\"auth.leewaySeconds\" must be an integer from 0 to 3600");
    expect_error("{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://x\", \"requireExp\": 1}}",
                 "\"auth.requireExp\" must be");
}

/* The configuration recipes of docs/operations.md "Identity providers" load as written. */
TEST(the_identity_provider_recipes_in_the_docs_load) {
    FILE *f = fopen("docs/operations.md", "r");
    REQUIRE(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *section = strstr(text, "## Identity providers");
    REQUIRE(section);
    char *end = strstr(section + 3, "\n## ");
    if (end) *end = '\0';
    int loaded = 0;
    for (char *p = strstr(section, "```json\n"); p; p = strstr(p, "```json\n")) {
        p += 8;
        char *close = strstr(p, "```");
        REQUIRE(close);
        *close = '\0';
        char name[32];
        snprintf(name, sizeof name, "recipe-%d.json", loaded);
        const char *path = write_config(name, p);
        mv_config *c = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
        if (c) {
            CHECK(c->auth.jwt);
            CHECK(c->auth.jwks_url != NULL);
            CHECK(c->auth.issuer != NULL);
            CHECK(c->auth.claim_roles != NULL);
        }
        mv_config_free(c);
        loaded++;
        p = close + 3;
    }
    CHECK_INT(loaded, 3); /* Auth0, Keycloak, Cognito */
}

TEST(a_missing_file_is_an_io_error_naming_it) {
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load("/nonexistent/missive.json", NULL, &c, &err), MV_IO, &err);
    CHECK(strstr(err.message, "/nonexistent/missive.json") != NULL);
}

/* Loads text (expected valid) and returns ui.enabled. */
static bool ui_enabled(const char *text, const mv_config_overrides *ov) {
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(write_config("ui.json", text), ov, &c, &err), MV_OK, &err);
    bool on = c && c->ui.enabled;
    mv_config_free(c);
    return on;
}

TEST(ui_is_on_by_default_on_a_loopback_address_and_off_on_a_public_one) {
    CHECK(ui_enabled("{}", NULL));
    CHECK(ui_enabled("{\"listen\": \"[::1]:8080\"}", NULL));
    const char *pub = "{\"listen\": \"0.0.0.0:8080\", \"auth\": {\"trustProxyHeaders\": true}}";
    CHECK(!ui_enabled(pub, NULL));
    /* the default follows the final address, after --listen */
    mv_config_overrides ov = {.listen = "127.0.0.1:9"};
    CHECK(ui_enabled(pub, &ov));
    CHECK(ui_enabled("{\"listen\": \"0.0.0.0:8080\", \"auth\": {\"trustProxyHeaders\": true}, "
                     "\"ui\": {\"enabled\": true}}",
                     NULL));
    CHECK(!ui_enabled("{\"ui\": {\"enabled\": false}}", NULL));
    expect_error("{\"ui\": {\"enabled\": \"yes\"}}", "\"ui.enabled\" must be true or false");
    expect_error("{\"ui\": {\"path\": \"/srv\"}}", "unknown key \"ui.path\"");
    expect_error("{\"ui\": true}", "\"ui\" must be an object");
}

TEST(ui_oidc_names_issuer_and_client_and_needs_jwt_auth) {
    const char *path = write_config(
        "oidc.json",
        "{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://idp.example.com/jwks\"}, "
        "\"ui\": {\"oidc\": {\"issuer\": \"https://idp.example.com\", "
        "\"clientId\": \"missive-console\"}}}");
    mv_config *c = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &c, &err), MV_OK, &err);
    REQUIRE(c != NULL);
    CHECK_STR(c->ui.oidc_issuer, "https://idp.example.com");
    CHECK_STR(c->ui.oidc_client_id, "missive-console");
    mv_config_free(c);
    expect_error("{\"ui\": {\"oidc\": {\"issuer\": \"https://idp.example.com\", \"clientId\": "
                 "\"c\"}}}",
                 "\"ui.oidc\" needs \"auth.mode\": \"jwt\"");
    const char *jwt = "{\"auth\": {\"mode\": \"jwt\", \"jwksUrl\": \"https://i/jwks\"}, ";
    char text[512];
    snprintf(text, sizeof text, "%s\"ui\": {\"oidc\": {\"issuer\": \"https://i\"}}}", jwt);
    expect_error(text, "\"ui.oidc\" needs \"issuer\" and \"clientId\"");
    snprintf(text, sizeof text,
             "%s\"ui\": {\"oidc\": {\"issuer\": \"ftp://i\", \"clientId\": \"c\"}}}", jwt);
    expect_error(text, "\"ui.oidc.issuer\" must be a URL starting with https://");
    snprintf(
        text, sizeof text,
        "%s\"ui\": {\"oidc\": {\"issuer\": \"https://i; script-src *\", \"clientId\": \"c\"}}}",
        jwt);
    expect_error(text, "\"ui.oidc.issuer\" must be a URL without spaces");
    snprintf(text, sizeof text,
             "%s\"ui\": {\"oidc\": {\"issuer\": \"https://i\", \"secret\": \"x\"}}}", jwt);
    expect_error(text, "unknown key \"ui.oidc.secret\"");
}

TEST(stream_retention_and_cors_load_with_defaults_and_checks) {
    set_secrets();
    setenv("MISSIVE_STREAM_SECRET_T", SECRET32, 1);
    const char *path =
        write_config("live.json", "{\"stream\": {\"maxConnections\": 5, \"heartbeatMs\": 2000,"
                                  " \"secretEnv\": \"MISSIVE_STREAM_SECRET_T\"},"
                                  " \"retention\": {\"streamEventsMs\": 60000},"
                                  " \"cors\": {\"allowedOrigins\": [\"https://app.example.com\"],"
                                  " \"maxAgeS\": 60}}");
    mv_config *cfg = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_config_load(path, NULL, &cfg, &err), MV_OK, &err);
    if (cfg) {
        CHECK_INT(cfg->stream.max_connections, 5);
        CHECK_INT(cfg->stream.heartbeat_ms, 2000);
        CHECK_INT((int64_t)cfg->stream.secret.len, 32);
        CHECK_INT(cfg->retention.stream_events_ms, 60000);
        CHECK_INT((int64_t)cfg->cors.n_origins, 1);
        CHECK_STR(cfg->cors.origins[0], "https://app.example.com");
        CHECK_INT(cfg->cors.max_age_s, 60);
    }
    mv_config_free(cfg);
    path = write_config("live0.json", "{}");
    CHECK_CODE(mv_config_load(path, NULL, &cfg, &err), MV_OK, &err);
    if (cfg) {
        CHECK_INT(cfg->stream.max_connections, 20000);
        CHECK_INT(cfg->stream.heartbeat_ms, 15000);
        CHECK_INT(cfg->retention.stream_events_ms, 86400000);
        CHECK_INT((int64_t)cfg->cors.n_origins, 0);
    }
    mv_config_free(cfg);
    expect_error("{\"stream\": {\"maxConnection\": 5}}", "unknown key \"stream.maxConnection\"");
    expect_error("{\"cors\": {\"allowedOrigins\": [\"*\"]}}", "no wildcard");
    expect_error("{\"retention\": {\"streamEventsMs\": 0}}", "retention.streamEventsMs");
    expect_error("{\"stream\": {\"secretEnv\": \"MISSIVE_NOT_SET_ANYWHERE\"}}", "stream.secretEnv");
}

int main(void) {
    return RUN_TESTS(email_takes_exactly_one_of_smtp_and_webhook_and_from_only_with_smtp,
                     saga_encryption_takes_a_key_of_exactly_32_raw_bytes_from_the_environment,
                     the_design_example_loads_with_every_value,
                     stream_retention_and_cors_load_with_defaults_and_checks,
                     identity_keys_load_and_their_rules_name_the_key,
                     the_identity_provider_recipes_in_the_docs_load,
                     webhook_secret_env_may_list_several_variables_and_whsec_values_are_decoded,
                     an_empty_object_gives_the_documented_defaults,
                     ui_oidc_names_issuer_and_client_and_needs_jwt_auth,
                     unknown_keys_are_errors_naming_their_path,
                     values_of_the_wrong_type_or_range_name_their_key,
                     invalid_json_is_a_config_error_naming_line_and_column,
                     relative_paths_resolve_against_the_config_directory,
                     memory_and_absolute_and_postgres_stores_are_kept_as_given,
                     action_lease_must_exceed_the_webhook_timeout,
                     secrets_come_from_the_environment_and_must_be_set,
                     headers_auth_is_refused_on_a_public_address_unless_proxy_headers_are_trusted,
                     command_line_overrides_replace_listen_and_store_and_are_checked,
                     group_commit_is_on_by_default_and_store_options_can_turn_it_off,
                     a_missing_file_is_an_io_error_naming_it,
                     ui_is_on_by_default_on_a_loopback_address_and_off_on_a_public_one);
}
