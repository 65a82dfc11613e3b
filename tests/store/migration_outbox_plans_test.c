/* migration_outbox_plans_test.c — schema version 26 on a store that version 25 left with outbox
 * rows: every row keeps its columns, `plan` rows are accepted (and an unknown kind still refused),
 * and the due plans are found through their partial index however many deliveries are pending. */
#include <string.h>

#include "deliver/outbox_text.h"
#include "missive/base.h"
#include "missive/deliver.h"
#include "missive/store.h"
#include "store/db.h"
#include "support/stores.h"

static mv_code rows_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    json_t *p = json_pack("{s:s, s:{s:i}}", "url", "http://x.test/h", "body", "n", 1);
    mv_code rc = mv_outbox_add_tx(db, MV_OUTBOX_WEBHOOK, p, 100, err);
    json_decref(p);
    if (rc == MV_OK)
        rc = mv_db_exec(db, "UPDATE outbox SET attempts = 2, last_error = 'boom', updated_at = 200",
                        err);
    return rc;
}

static mv_code plan_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv__outbox_add_plan_tx(db, "{\"messageId\":\"m1\"}", 50, err);
}

static mv_code exec_tx(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_exec(db, (const char *)ctx, err);
}

typedef struct probe {
    int64_t webhooks, plans, attempts, updated_at, index_rows;
    char last_error[16];
    bool pg;
    char plan_query[400];
} probe;

static mv_code read_tx(mv_db *db, void *ctx, mv_err *err) {
    probe *p = ctx;
    mv_stmt *st = NULL;
    mv_code rc = mv_db_row(db,
                           "SELECT SUM(CASE WHEN kind = 'webhook' THEN 1 ELSE 0 END), "
                           "SUM(CASE WHEN kind = 'plan' THEN 1 ELSE 0 END) FROM outbox",
                           &st, err, "");
    if (st) p->webhooks = mv_stmt_int64(st, 0), p->plans = mv_stmt_int64(st, 1);
    mv_stmt_done(st);
    if (rc == MV_OK)
        rc = mv_db_row(db,
                       "SELECT attempts, updated_at, last_error FROM outbox WHERE kind = 'webhook'",
                       &st, err, "");
    if (st) {
        p->attempts = mv_stmt_int64(st, 0);
        p->updated_at = mv_stmt_int64(st, 1);
        const char *e = mv_stmt_text(st, 2);
        mv_strlcpy(p->last_error, e ? e : "", sizeof p->last_error);
    }
    mv_stmt_done(st);
    if (rc != MV_OK || p->pg) return rc;
    /* the outbox's own query for due plans walks the partial index */
    rc = mv_db_row(db,
                   "EXPLAIN QUERY PLAN SELECT id, payload FROM outbox WHERE state = 'pending' AND "
                   "next_attempt_at <= 1000 AND kind = 'plan' ORDER BY next_attempt_at LIMIT 10",
                   &st, err, "");
    if (st) {
        const char *d = mv_stmt_text(st, 3);
        mv_strlcpy(p->plan_query, d ? d : "", sizeof p->plan_query);
    }
    mv_stmt_done(st);
    return rc;
}

STORE_TEST(version_26_keeps_the_outbox_rows_and_takes_plans_through_their_index) {
    const char *url = test_store_url(kind, "mig26");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(test_store_migrate_to(s, 25, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, rows_tx, NULL, &err), MV_OK, &err);
    CHECK(mv_store_write(s, plan_tx, NULL, &err) != MV_OK); /* version 25 refuses the kind */
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_OK, &err);
    int v = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK(v >= 26);
    CHECK_CODE(mv_store_write(s, plan_tx, NULL, &err), MV_OK, &err);
    CHECK(mv_store_write(s, exec_tx,
                         "INSERT INTO outbox (id, kind, payload, next_attempt_at, created_at, "
                         "updated_at) VALUES ('x', 'fax', '{}', 0, 0, 0)",
                         &err) != MV_OK);
    probe p = {.pg = !strcmp(kind, "postgres")};
    CHECK_CODE(mv_store_read(s, read_tx, &p, &err), MV_OK, &err);
    CHECK_INT(p.webhooks, 1);
    CHECK_INT(p.plans, 1);
    CHECK_INT(p.attempts, 2);
    CHECK_INT(p.updated_at, 200);
    CHECK_STR(p.last_error, "boom");
    if (!p.pg) CHECK(strstr(p.plan_query, "outbox_plans_due") != NULL);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(version_26_keeps_the_outbox_rows_and_takes_plans_through_their_index);
}
