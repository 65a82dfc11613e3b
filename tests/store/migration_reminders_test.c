/* migration_reminders_test.c — schema version 19 on a store that version 17 left with history:
 * the change log keeps its rows and ids, and a new change is numbered above every id ever handed
 * out (the retained rows and those retention removed), so a client resuming after an old id never
 * misses one; the 'reminded' kind and the new columns are accepted afterwards. */
#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "support/stores.h"

static const char SQL_EVENT[] =
    "INSERT INTO stream_events (tenant_id, message_id, kind, viewer_id, created_at) "
    "VALUES ('default', 'm1', 'updated', NULL, 1)";

typedef struct {
    int64_t max_id, n, new_id;
    bool pg;
} probe;

static mv_code history_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = MV_OK;
    for (int i = 0; rc == MV_OK && i < 5; i++)
        rc = mv_db_exec(db, SQL_EVENT, err);
    /* retention removed the newest three: ids 1 and 2 remain, 5 was the highest handed out */
    if (rc == MV_OK) rc = mv_db_exec(db, "DELETE FROM stream_events WHERE id > 2", err);
    if (rc == MV_OK) rc = mv_db_exec(db, "UPDATE stream_events_pruned SET upto = 5", err);
    return rc;
}

static mv_code after_tx(mv_db *db, void *ctx, mv_err *err) {
    probe *p = ctx;
    mv_code rc = mv_db_exec(db,
                            "INSERT INTO stream_events (tenant_id, message_id, kind, viewer_id, "
                            "created_at) VALUES ('default', 'm1', 'reminded', 'bob', 2)",
                            err);
    mv_stmt *st = NULL;
    if (rc == MV_OK)
        rc = mv_db_row(db, "SELECT COUNT(*), MAX(id) FROM stream_events", &st, err, "");
    if (st) {
        p->n = mv_stmt_int64(st, 0);
        p->new_id = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    if (rc == MV_OK)
        rc = mv_db_exec(db,
                        "UPDATE message_viewers SET reminded_at = 1; "
                        "UPDATE messages SET escalated_at = 1",
                        err);
    return rc;
}

STORE_TEST(version_19_keeps_the_change_log_and_numbers_new_changes_above_every_old_id) {
    const char *url = test_store_url(kind, "mig19");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(test_store_migrate_to(s, 17, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, history_tx, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_OK, &err);
    int v = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK(v >= 19);
    probe p = {0};
    CHECK_CODE(mv_store_write(s, after_tx, &p, &err), MV_OK, &err);
    CHECK_INT(p.n, 3);
    CHECK(p.new_id > 5);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(version_19_keeps_the_change_log_and_numbers_new_changes_above_every_old_id);
}
