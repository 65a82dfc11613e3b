/* cli_timers_test.c — `missive timers list` and `missive reconcile --kind timers` as real
 * processes ($BUILD/missive through popen) on both stores: the list in due order, text and
 * --json, filtered by tenant and state, paged by cursor; bad flags are usage errors; reconcile
 * reports a pending timer whose lease ran out (claimed twice) and one given up, nothing else. */
#include <sys/wait.h>

#include "durable/fixture.h"
#include "durable/timer.h"
#include "store/db.h"

static int missive(const char *args, char *out, size_t size) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/missive %s 2>/dev/null", build, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define T0 INT64_C(1800000000000)

typedef struct {
    const char *id, *tenant;
    int64_t due;
} put;

static mv_code put_fn(mv_db *db, void *ctx, mv_err *err) {
    mv_code rc = MV_OK;
    for (const put *p = ctx; rc == MV_OK && p->id; p++)
        rc = mv__timer_schedule(db, p->id, p->tenant, "expiry", p->id, p->due, T0, err);
    return rc;
}

/* The call fails for e-stuck and e-dead, as a handler that is down would. */
static mv_code fail_call(void *ctx, const mv__timer *t, int64_t now, mv_err *err) {
    (void)ctx;
    (void)now;
    bool down = strcmp(t->id, "e-stuck") == 0 || strcmp(t->id, "e-dead") == 0;
    return down ? mv_err_set(err, MV_IO, "down") : MV_OK;
}

STORE_TEST(timers_list_and_reconcile_show_the_stores_timers_to_an_operator) {
    char url[600];
    mv_store *s = fixture_store(kind, "cli_timers", url, sizeof url);
    REQUIRE(s);
    put p[] = {{"e-late", "acme", T0 + 30},  {"e-first", "acme", T0 + 10},
               {"e-other", "beta", T0 + 20}, {"e-stuck", "acme", T0 + 100000},
               {"e-dead", "beta", T0 + 6},   {NULL, NULL, 0}};
    mv_err err = {0};
    REQUIRE(mv_store_write(s, put_fn, p, &err) == MV_OK);
    int64_t now = T0 + 6;
    mv_clock clock = mv_manual_clock(&now);
    mv__timer_engine_options o = {.clock = &clock, .lease_ms = 1000};
    mv__timer_engine *e = NULL;
    REQUIRE(mv__timer_engine_new(s, &o, &e, &err) == MV_OK);
    REQUIRE(mv__timer_engine_register(e, "expiry", fail_call, NULL, NULL, &err) == MV_OK);
    mv__timer_pass pass;
    /* e-dead fails until it is given up; the others due meanwhile fire */
    for (int i = 0; i <= MV__TIMER_MAX_CLAIMS; i++, now += 1000)
        REQUIRE(mv__timer_engine_run(e, &pass, &err) == MV_OK);
    /* e-stuck fails twice: pending, its lease ran out once */
    now = T0 + 100000;
    REQUIRE(mv__timer_engine_run(e, &pass, &err) == MV_OK);
    now += 1000;
    REQUIRE(mv__timer_engine_run(e, &pass, &err) == MV_OK);
    mv__timer_engine_free(e);
    mv_store_close(s);

    char out[16384], args[1024];
    snprintf(args, sizeof args, "timers list --store '%s' --json --tenant acme --limit 2", url);
    CHECK_INT(missive(args, out, sizeof out), 0);
    json_t *page = json_loads(out, 0, NULL);
    json_t *rows = json_object_get(page, "timers");
    REQUIRE(json_array_size(rows) == 2);
    CHECK_STR(mv_json_str(json_array_get(rows, 0), "id"), "e-first");
    CHECK_STR(mv_json_str(json_array_get(rows, 0), "state"), "fired");
    CHECK_STR(mv_json_str(json_array_get(rows, 1), "id"), "e-late");
    const char *cursor = mv_json_str(page, "nextCursor");
    REQUIRE(cursor);
    snprintf(args, sizeof args, "timers list --store '%s' --json --tenant acme --cursor '%s'", url,
             cursor);
    json_decref(page);
    CHECK_INT(missive(args, out, sizeof out), 0);
    page = json_loads(out, 0, NULL);
    rows = json_object_get(page, "timers");
    CHECK_INT(json_array_size(rows), 1);
    CHECK_STR(mv_json_str(json_array_get(rows, 0), "id"), "e-stuck");
    CHECK_STR(mv_json_str(json_array_get(rows, 0), "state"), "pending");
    json_decref(page);
    snprintf(args, sizeof args, "timers list --store '%s' --state failed", url);
    CHECK_INT(missive(args, out, sizeof out), 0);
    CHECK(strstr(out, "e-dead") != NULL);
    CHECK(strstr(out, "e-first") == NULL);
    CHECK(strstr(out, "ID") != NULL);
    snprintf(args, sizeof args, "timers list --store '%s' --state sleeping", url);
    CHECK_INT(missive(args, out, sizeof out), 1);
    snprintf(args, sizeof args, "timers list --store '%s' --limit 0", url);
    CHECK_INT(missive(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "timers list --store '%s' --bogus", url);
    CHECK_INT(missive(args, out, sizeof out), 2);

    snprintf(args, sizeof args, "reconcile --store '%s' --kind timers", url);
    CHECK_INT(missive(args, out, sizeof out), 0);
    int lines = 0, stuck = 0, dead = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *f = json_loads(line, 0, NULL);
        lines++;
        CHECK_STR(mv_json_str(f, "kind"), "timer");
        if (strcmp(mv_json_str(f, "id"), "e-stuck") == 0)
            stuck += strcmp(mv_json_str(f, "reason"), "lease_expired") == 0;
        if (strcmp(mv_json_str(f, "id"), "e-dead") == 0)
            dead += strcmp(mv_json_str(f, "reason"), "failed") == 0;
        json_decref(f);
    }
    CHECK_INT(lines, 2);
    CHECK_INT(stuck, 1);
    CHECK_INT(dead, 1);
}

int main(void) {
    return RUN_TESTS(timers_list_and_reconcile_show_the_stores_timers_to_an_operator);
}
