/* cli_durable_test.c — `missive reconcile`, `missive approvals decide` and `missive saga resolve`
 * run in-process against a SQLite file, their stdout captured. */
#include <fcntl.h>

#include "cmd/cli.h"
#include "durable/fixture.h"
#include "store/db.h"

/* Runs fn(argc, argv) with stdout captured into out; returns the exit status. */
static int capture(int (*fn)(int, char **), char **argv, char *out, size_t size) {
    int argc = 0;
    while (argv[argc])
        argc++;
    const char *path = test_tmp_path("stdout.txt");
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    close(fd);
    int status = fn(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, size - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    return status;
}

static const char SQL_PUT_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version) VALUES ('saga_cli', 'checkout', 'manual-review', '{}', '', "
    "'[]', 1, 1, 1, 1)";
/* its step, a row of saga_steps as every saga's steps are since migration 10 */
static const char SQL_PUT_STEP[] =
    "INSERT INTO saga_steps (saga_id, idx, name, state, effect_id, compensation_effect_id, "
    "compensation_args, result, attempts, error_code, next_attempt_at, created_at, updated_at) "
    "VALUES ('saga_cli', 0, 'charge', 'ambiguous', 'eff_charge', 'eff_refund', 'null', NULL, 0, "
    "'execution_unknown', NULL, 1, 1)";

static mv_code put_saga(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = mv_db_execf(db, SQL_PUT_SAGA, NULL, err, "");
    return rc ? rc : mv_db_execf(db, SQL_PUT_STEP, NULL, err, "");
}

STORE_TEST(reconcile_prints_one_json_line_per_finding_with_its_kind) {
    char url[600], out[8192];
    mv_store *s = fixture_store(kind, "cli1.db", url, sizeof url);
    REQUIRE(s);
    int64_t now = 1000;
    mv_clock clock = mv_manual_clock(&now);
    mv_journal_options jo = {.clock = &clock};
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, &jo, &j, &err) == MV_OK);
    mv_effect_intent in = {.effect_id = "eff_a", .capability = "db.write"};
    REQUIRE(mv_journal_intent(j, &in, &err) == MV_OK);
    REQUIRE(mv_store_write(s, put_saga, NULL, &err) == MV_OK);
    mv_journal_free(j);
    mv_store_close(s);

    char *all[] = {"reconcile", "--store", url, NULL};
    CHECK_INT(capture(cli_reconcile, all, out, sizeof out), 0);
    CHECK(strstr(out, "{\"kind\":\"effect\",\"effectId\":\"eff_a\",\"capability\":\"db.write\","
                      "\"state\":\"incomplete\",\"updatedAt\":1000}\n") != NULL);
    CHECK(strstr(out, "{\"kind\":\"saga\",\"sagaId\":\"saga_cli\",\"state\":\"manual-review\","
                      "\"step\":\"charge\",\"effectId\":\"eff_charge\","
                      "\"reason\":\"ambiguous-execution\"}\n") != NULL);
    char *sagas[] = {"reconcile", "--store", url, "--kind", "sagas", NULL};
    CHECK_INT(capture(cli_reconcile, sagas, out, sizeof out), 0);
    CHECK(strstr(out, "\"kind\":\"effect\"") == NULL);
    CHECK(strstr(out, "\"kind\":\"saga\"") != NULL);
    char *fresh[] = {"reconcile",  "--store",        url, "--kind", "effects",
                     "--stale-ms", "99999999999999", NULL};
    CHECK_INT(capture(cli_reconcile, fresh, out, sizeof out), 0);
    CHECK_STR(out, ""); /* nothing updated that long ago */
    char *bad[] = {"reconcile", "--store", url, "--kind", "bogus", NULL};
    CHECK_INT(capture(cli_reconcile, bad, out, sizeof out), 2);
    char *missing[] = {"reconcile", "--store", "sqlite:/nonexistent/dir/x.db", NULL};
    CHECK_INT(capture(cli_reconcile, missing, out, sizeof out), 1);
}

STORE_TEST(approvals_decide_records_the_decision_and_rejects_a_second_one) {
    char url[600], out[4096];
    mv_store *s = fixture_store(kind, "cli2.db", url, sizeof url);
    REQUIRE(s);
    unsigned char secret[32] = "0123456789abcdef0123456789abcdef";
    mv_approvals_options o = {.secret = secret, .secret_len = 32};
    mv_approvals *a;
    mv_err err = {0};
    REQUIRE(mv_approvals_new(s, &o, &a, &err) == MV_OK);
    mv_approval_request req = {.effect_id = "e1",
                               .capability = "refunds.large",
                               .target = "msg_1",
                               .tenant_id = "default",
                               .principal_id = "user_1"};
    REQUIRE(mv_approval_authorize(a, &req, &err) == MV_APPROVAL_REQUIRED);
    char id[64];
    snprintf(id, sizeof id, "%s", err.approval_id);
    char *argv[] = {"approvals", "decide",  "--store", url,     id,  "approved",
                    "--tenant",  "default", "--by",    "ops_1", NULL};
    CHECK_INT(capture(cli_approvals, argv, out, sizeof out), 0);
    CHECK(strstr(out, "\"state\":\"approved\"") != NULL);
    CHECK(strstr(out, "\"decidedBy\":\"ops_1\"") != NULL);
    CHECK_INT(capture(cli_approvals, argv, out, sizeof out), 1);
    char *other[] = {"approvals", "decide",  "--store", url,     id,  "maybe",
                     "--tenant",  "default", "--by",    "ops_1", NULL};
    CHECK_INT(capture(cli_approvals, other, out, sizeof out), 1);
    char *usage[] = {"approvals", "decide", "--store", url, NULL};
    CHECK_INT(capture(cli_approvals, usage, out, sizeof out), 2);
    mv_approval_record rec;
    CHECK_CODE(mv_approval_get(a, id, "default", &rec, &err), MV_OK, &err);
    CHECK_STR(rec.state, "approved");
    mv_approvals_free(a);
    mv_store_close(s);
}

STORE_TEST(saga_resolve_records_the_outcome_using_the_stored_retry_limit) {
    char url[600], out[4096];
    mv_store *s = fixture_store(kind, "cli3.db", url, sizeof url);
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, put_saga, NULL, &err) == MV_OK);
    mv_store_close(s);
    char *wrong[] = {"saga",     "resolve", "--store",   url,         "--saga",
                     "saga_cli", "--kind",  "execution", "--step",    "charge",
                     "--effect", "other",   "--outcome", "committed", NULL};
    CHECK_INT(capture(cli_saga, wrong, out, sizeof out), 1);
    char *ok[] = {"saga",      "resolve",   "--store",  url,
                  "--saga",    "saga_cli",  "--kind",   "execution",
                  "--step",    "charge",    "--effect", "eff_charge",
                  "--outcome", "committed", "--result", "{\"charged\":true}",
                  NULL};
    CHECK_INT(capture(cli_saga, ok, out, sizeof out), 0);
    CHECK(strstr(out, "\"state\":\"running\"") != NULL);
    CHECK(strstr(out, "\"result\":{\"charged\":true}") != NULL);
    char *config[] = {"saga",     "resolve", "--config",  "x.json",    "--saga",
                      "s",        "--kind",  "execution", "--step",    "a",
                      "--effect", "e",       "--outcome", "committed", NULL};
    CHECK_INT(capture(cli_saga, config, out, sizeof out), 1); /* no such config file */
}

int main(void) {
    return RUN_TESTS(reconcile_prints_one_json_line_per_finding_with_its_kind,
                     approvals_decide_records_the_decision_and_rejects_a_second_one,
                     saga_resolve_records_the_outcome_using_the_stored_retry_limit);
}
