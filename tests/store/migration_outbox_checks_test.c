/* migration_outbox_checks_test.c — schema version 25 on a store that version 23 left with
 * outbox rows: every row keeps every column, new rows and state changes are written as before,
 * the constraints still refuse an unknown kind or state, and on SQLite the rebuilt table's
 * constraints have no IN list (which cost a temporary b-tree per write) while its index is back. */
#include <string.h>

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
        rc = mv_db_exec(db,
                        "UPDATE outbox SET state = 'failed', attempts = 3, last_error = 'boom', "
                        "failure_stage = 'webhook', lease_owner = 'w1', lease_expires_at = 7, "
                        "updated_at = 200",
                        err);
    p = json_pack("{s:s, s:s, s:s, s:s}", "messageId", "m1", "toUser", "u1", "title", "Hi", "body",
                  "b");
    if (rc == MV_OK) rc = mv_outbox_add_tx(db, MV_OUTBOX_EMAIL, p, 300, err);
    json_decref(p);
    return rc;
}

typedef struct probe {
    int64_t n, failed, pending, attempts, lease_expires_at, updated_at, created_at;
    char last_error[16], stage[16], owner[8], payload[64];
    bool pg;
    char table_sql[1000];
    int64_t due_index;
} probe;

static void text(mv_stmt *st, int i, char *out, size_t n) {
    const char *s = mv_stmt_text(st, i);
    mv_strlcpy(out, s ? s : "", n);
}

static mv_code read_tx(mv_db *db, void *ctx, mv_err *err) {
    probe *p = ctx;
    mv_stmt *st = NULL;
    mv_code rc = mv_db_row(db,
                           "SELECT COUNT(*), SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), "
                           "SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END) FROM outbox",
                           &st, err, "");
    if (st)
        p->n = mv_stmt_int64(st, 0), p->failed = mv_stmt_int64(st, 1),
        p->pending = mv_stmt_int64(st, 2);
    mv_stmt_done(st);
    if (rc == MV_OK)
        rc = mv_db_row(db,
                       "SELECT attempts, lease_expires_at, updated_at, created_at, last_error, "
                       "failure_stage, lease_owner, payload FROM outbox WHERE kind = 'webhook'",
                       &st, err, "");
    if (st) {
        p->attempts = mv_stmt_int64(st, 0);
        p->lease_expires_at = mv_stmt_int64(st, 1);
        p->updated_at = mv_stmt_int64(st, 2);
        p->created_at = mv_stmt_int64(st, 3);
        text(st, 4, p->last_error, sizeof p->last_error);
        text(st, 5, p->stage, sizeof p->stage);
        text(st, 6, p->owner, sizeof p->owner);
        text(st, 7, p->payload, sizeof p->payload);
    }
    mv_stmt_done(st);
    if (rc != MV_OK || p->pg) return rc;
    rc = mv_db_row(db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'outbox'",
                   &st, err, "");
    if (st) text(st, 0, p->table_sql, sizeof p->table_sql);
    mv_stmt_done(st);
    if (rc == MV_OK)
        rc = mv_db_row(db,
                       "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND "
                       "name = 'outbox_due' AND tbl_name = 'outbox'",
                       &st, err, "");
    if (st) p->due_index = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return rc;
}

static mv_code bad_state_tx(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_exec(db, (const char *)ctx, err);
}

STORE_TEST(version_25_keeps_every_outbox_row_and_its_constraints_without_in_lists) {
    const char *url = test_store_url(kind, "mig25");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(test_store_migrate_to(s, 23, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, rows_tx, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_OK, &err);
    int v = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK(v >= 25);
    probe p = {.pg = !strcmp(kind, "postgres")};
    CHECK_CODE(mv_store_read(s, read_tx, &p, &err), MV_OK, &err);
    CHECK_INT(p.n, 2);
    CHECK_INT(p.failed, 1);
    CHECK_INT(p.pending, 1);
    CHECK_INT(p.attempts, 3);
    CHECK_INT(p.lease_expires_at, 7);
    CHECK_INT(p.updated_at, 200);
    CHECK_INT(p.created_at, 100);
    CHECK_STR(p.last_error, "boom");
    CHECK_STR(p.stage, "webhook");
    CHECK_STR(p.owner, "w1");
    CHECK(strstr(p.payload, "http://x.test/h") != NULL);
    if (!p.pg) {
        CHECK(strstr(p.table_sql, "state = 'failed'") != NULL);
        CHECK(strstr(p.table_sql, " IN ") == NULL && strstr(p.table_sql, " IN(") == NULL);
        CHECK_INT(p.due_index, 1);
    }
    /* still refused: an unknown state or kind; still accepted: a new row and its claim */
    CHECK(mv_store_write(s, bad_state_tx, "UPDATE outbox SET state = 'lost'", &err) != MV_OK);
    CHECK(mv_store_write(s, bad_state_tx,
                         "INSERT INTO outbox (id, kind, payload, next_attempt_at, created_at, "
                         "updated_at) VALUES ('x', 'fax', '{}', 0, 0, 0)",
                         &err) != MV_OK);
    CHECK_CODE(mv_store_write(s, bad_state_tx,
                              "UPDATE outbox SET state = 'delivering' WHERE state = 'pending'",
                              &err),
               MV_OK, &err);
    CHECK_CODE(mv_store_write(s, rows_tx, NULL, &err), MV_OK, &err);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(version_25_keeps_every_outbox_row_and_its_constraints_without_in_lists);
}
