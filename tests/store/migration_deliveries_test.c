/* migration_deliveries_test.c — schema version 26 on a store that version 25 left with messages:
 * they keep their columns and have no plan, a new message may carry one (deliver_at,
 * deliver_data), and the due plans are found through their partial index. */
#include <string.h>

#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "support/stores.h"

#define INSERT_MESSAGE(id, plan)                                                                   \
    "INSERT INTO messages (id, type, template_cd, to_roles, sender_content, receiver_content, "    \
    "documents, payment_cd, payload, action_state, archived, created_at, updated_at" plan          \
    ") VALUES ('" id "', 'request', 't', '[]', '{}', '{}', '[]', '', '{}', 'active', 0, 10, 10"

static mv_code exec_tx(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_exec(db, (const char *)ctx, err);
}

typedef struct probe {
    int64_t messages, planned, due_at;
    char data[32], plan_query[400];
    bool pg;
} probe;

static mv_code read_tx(mv_db *db, void *ctx, mv_err *err) {
    probe *p = ctx;
    mv_stmt *st = NULL;
    mv_code rc = mv_db_row(db,
                           "SELECT COUNT(*), SUM(CASE WHEN deliver_at IS NOT NULL THEN 1 ELSE 0 "
                           "END) FROM messages",
                           &st, err, "");
    if (st) p->messages = mv_stmt_int64(st, 0), p->planned = mv_stmt_int64(st, 1);
    mv_stmt_done(st);
    if (rc == MV_OK)
        rc = mv_db_row(db, "SELECT deliver_at, deliver_data FROM messages WHERE id = 'm2'", &st,
                       err, "");
    if (st) {
        p->due_at = mv_stmt_int64(st, 0);
        const char *d = mv_stmt_text(st, 1);
        mv_strlcpy(p->data, d ? d : "", sizeof p->data);
    }
    mv_stmt_done(st);
    if (rc != MV_OK || p->pg) return rc;
    rc = mv_db_row(db,
                   "EXPLAIN QUERY PLAN SELECT id, tenant_id, deliver_data FROM messages WHERE "
                   "deliver_at IS NOT NULL AND deliver_at <= 1000 ORDER BY deliver_at LIMIT 10",
                   &st, err, "");
    if (st) {
        const char *d = mv_stmt_text(st, 3);
        mv_strlcpy(p->plan_query, d ? d : "", sizeof p->plan_query);
    }
    mv_stmt_done(st);
    return rc;
}

STORE_TEST(version_26_gives_messages_a_plan_found_through_its_partial_index) {
    const char *url = test_store_url(kind, "mig26");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(test_store_migrate_to(s, 25, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, exec_tx, INSERT_MESSAGE("m1", "") ")", &err), MV_OK, &err);
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_OK, &err);
    int v = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK(v >= 26);
    CHECK_CODE(mv_store_write(s, exec_tx,
                              INSERT_MESSAGE("m2", ", deliver_at, deliver_data") ", 20, '{}')",
                              &err),
               MV_OK, &err);
    probe p = {.pg = !strcmp(kind, "postgres")};
    CHECK_CODE(mv_store_read(s, read_tx, &p, &err), MV_OK, &err);
    CHECK_INT(p.messages, 2);
    CHECK_INT(p.planned, 1); /* the message from before has none */
    CHECK_INT(p.due_at, 20);
    CHECK_STR(p.data, "{}");
    if (!p.pg) CHECK(strstr(p.plan_query, "messages_deliveries_due") != NULL);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(version_26_gives_messages_a_plan_found_through_its_partial_index);
}
