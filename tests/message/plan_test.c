/* plan_test.c — the visibility queries read indexes, never a whole table: EXPLAIN QUERY PLAN on
 * SQLite must show no full scan of messages or message_roles. */
#include "fixture.h"
#include "message/service.h"

typedef struct {
    const char *sql;
    char plan[8192];
} plan_arg;

static mv_code explain_tx(mv_db *db, void *ctx, mv_err *err) {
    plan_arg *a = ctx;
    char *sql = malloc(strlen(a->sql) + 32);
    sprintf(sql, "EXPLAIN QUERY PLAN %s", a->sql);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql, &st, err);
    if (rc != MV_OK) {
        free(sql);
        return rc;
    }
    /* bind every parameter as NULL: the plan does not depend on the values */
    size_t used = 0;
    while (mv_stmt_step(st, err) == 1) {
        const char *detail = mv_stmt_text(st, 3);
        used +=
            (size_t)snprintf(a->plan + used, sizeof a->plan - used, "%s\n", detail ? detail : "");
        if (used >= sizeof a->plan) break;
    }
    mv_stmt_done(st);
    free(sql); /* the statement cache keys on the pointer; this one is never reused */
    return MV_OK;
}

static int has_full_scan(const char *plan) {
    /* "SCAN messages" / "SCAN message_roles" without "USING" on the same line is a table scan */
    const char *p = plan;
    while ((p = strstr(p, "SCAN ")) != NULL) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        if ((strstr(line, "messages") || strstr(line, "message_roles")) && !strstr(line, "USING"))
            return 1;
        p += n;
    }
    return 0;
}

TEST(list_and_count_queries_use_indexes_only) {
    fixture f;
    REQUIRE(fixture_open(&f, "sqlite", "plan.db"));
    const char *queries[] = {mv__message_list_sql(), mv__message_count_sql()};
    for (int i = 0; i < 2; i++) {
        plan_arg a = {queries[i], ""};
        mv_err err = {0};
        CHECK_CODE(mv_store_read(f.store, explain_tx, &a, &err), MV_OK, &err);
        CHECK(strlen(a.plan) > 0);
        if (has_full_scan(a.plan) || getenv("SHOW_PLAN")) fprintf(stderr, "plan:\n%s", a.plan);
        CHECK(!has_full_scan(a.plan));
        CHECK(strstr(a.plan, "messages_by_sender") != NULL);
        CHECK(strstr(a.plan, "messages_by_recipient") != NULL);
    }
    /* the cursor is a seek into the index, not a filter over everything newer */
    plan_arg a = {mv__message_list_sql(), ""};
    mv_err err = {0};
    CHECK_CODE(mv_store_read(f.store, explain_tx, &a, &err), MV_OK, &err);
    CHECK(strstr(a.plan, "messages_by_sender (tenant_id=? AND from_user=? AND archived=? AND "
                         "(created_at,id)<(?,?))"));
    CHECK(strstr(a.plan, "message_roles_by_role (tenant_id=? AND role=? AND archived=? AND "
                         "(created_at,message_id)<(?,?))"));
    fixture_close(&f);
}

int main(void) { return RUN_TESTS(list_and_count_queries_use_indexes_only); }
