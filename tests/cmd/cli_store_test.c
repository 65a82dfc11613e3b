/* cli_store_test.c — `missive migrate` and `missive gc` as a user runs them. */
#include <sys/wait.h>

#include "../message/fixture.h"

static int run(const char *args, char *out, size_t size) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s/missive %s 2>&1", build, args);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    return WEXITSTATUS(pclose(p));
}

TEST(migrate_creates_the_schema_then_says_nothing_to_do) {
    char args[700], out[1024];
    snprintf(args, sizeof args, "migrate --store sqlite:%s", test_tmp_path("cli.db"));
    CHECK_INT(run(args, out, sizeof out), 0);
    CHECK(strstr(out, "applied") != NULL);
    CHECK_INT(run(args, out, sizeof out), 0);
    CHECK(strstr(out, "nothing to do") != NULL);
    CHECK_INT(run("migrate --store bogus:", out, sizeof out), 1);
    CHECK(strstr(out, "sqlite:PATH") && strstr(out, "postgres://"));
    CHECK_INT(run("migrate", out, sizeof out), 2);
}

STORE_TEST(gc_removes_completed_reservations_older_than_the_retention) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "gc-cli.db"));
    mv_code rc;
    f.now = mv_now_ms() - 10000; /* completed ten seconds ago */
    json_decref(fixture_create(&f, "u1", "u2", "old-key", &rc));
    REQUIRE(rc == MV_OK);
    char args[700], out[1024];
    snprintf(args, sizeof args, "gc --store '%s'", f.url);
    CHECK_INT(run(args, out, sizeof out), 0);
    CHECK(strstr(out, "removed 0") != NULL); /* default retention: 24 h */
    snprintf(args, sizeof args, "gc --store '%s' --older-than-ms 5000", f.url);
    CHECK_INT(run(args, out, sizeof out), 0);
    CHECK(strstr(out, "removed 1 ") != NULL);
    CHECK_INT(fixture_rows(f.store, 'r'), 0);
    CHECK_INT(fixture_rows(f.store, 'm'), 1); /* the messages stay */
    fixture_close(&f);
}

TEST(gc_with_an_empty_retention_is_a_usage_error_not_a_retention_of_zero) {
    char args[700], out[1024];
    snprintf(args, sizeof args, "gc --store sqlite:%s --older-than-ms ''",
             test_tmp_path("gc-empty.db"));
    CHECK_INT(run(args, out, sizeof out), 2);
    CHECK(strstr(out, "usage") != NULL);
    snprintf(args, sizeof args,
             "gc --store sqlite:%s --older-than-ms=", test_tmp_path("gc-empty.db"));
    CHECK_INT(run(args, out, sizeof out), 2);
    CHECK(strstr(out, "removed") == NULL);
}

int main(void) {
    return RUN_TESTS(migrate_creates_the_schema_then_says_nothing_to_do,
                     gc_with_an_empty_retention_is_a_usage_error_not_a_retention_of_zero,
                     gc_removes_completed_reservations_older_than_the_retention);
}
