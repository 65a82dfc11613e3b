/* migration_request_ids_test.c — schema version 24 on a store that version 23 left with client
 * requests: each reservation gets the id range of the messages it created (none for a
 * zero-item or pending one), messages_by_client_request is gone, and a replay afterwards serves
 * exactly the reservation's messages in item order, not another key's message whose id lies
 * inside the range nor another tenant's message with the same key. */
#include "message/request.h"
#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "support/stores.h"

static const char SQL_MESSAGE[] =
    "INSERT INTO messages (id, tenant_id, type, template_cd, from_user, to_user, to_roles, "
    "sender_content, receiver_content, documents, payment_cd, payload, action_state, archived, "
    "client_request_id, client_request_owner_id, client_request_item_index, created_at, "
    "updated_at) VALUES (?, ?, 'info', 'tpl', 'u1', 'u2', '[]', '{}', '{}', '[]', '', '{}', "
    "'active', 0, ?, ?, ?, 1, 1)";
static const char SQL_REQUEST[] =
    "INSERT INTO message_requests (tenant_id, client_request_owner_id, template_cd, "
    "client_request_id, state, fingerprint, item_count, lease_owner_id, lease_expires_at, "
    "completed_at, created_at, updated_at) VALUES (?, 'u1', 'tpl', ?, ?, 'fp', ?, 'lease', ?, ?, "
    "1, 1)";

typedef struct {
    const char *id, *tenant, *crid;
    int item; /* -1: no key */
} msg;

/* k1: items 1 and 0 (ids a3, a1); a2 between them has another key, b1 is tenant b's k1. */
static const msg MSGS[] = {
    {"a1", "default", "k1", 0},  {"a2", "default", "k9", 0}, {"a3", "default", "k1", 1},
    {"a4", "default", NULL, -1}, {"b1", "b", "k1", 0},
};

static mv_code history_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = MV_OK;
    for (size_t i = 0; rc == MV_OK && i < sizeof MSGS / sizeof MSGS[0]; i++) {
        const msg *m = &MSGS[i];
        mv_stmt *st;
        if ((rc = mv_db_prepare(db, SQL_MESSAGE, &st, err)) != MV_OK) break;
        mv_stmt_bindf(st, "sss", m->id, m->tenant, m->crid);
        mv_stmt_bind_text(st, 4, m->crid ? "u1" : NULL);
        if (m->item < 0)
            mv_stmt_bind_null(st, 5);
        else
            mv_stmt_bind_int64(st, 5, m->item);
        if (mv_stmt_step(st, err) < 0) rc = err->code;
        mv_stmt_done(st);
    }
    /* completed k1 (2 items), k9 (1), tenant b's k1 (1), a zero-item k0 and a pending kp */
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_REQUEST, NULL, err, "sssini", "default", "k1", "completed",
                         (int64_t)2, (int64_t)1);
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_REQUEST, NULL, err, "sssini", "default", "k9", "completed",
                         (int64_t)1, (int64_t)1);
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_REQUEST, NULL, err, "sssini", "b", "k1", "completed", (int64_t)1,
                         (int64_t)1);
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_REQUEST, NULL, err, "sssini", "default", "k0", "completed",
                         (int64_t)0, (int64_t)1);
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_REQUEST, NULL, err, "sssnin", "default", "kp", "pending",
                         (int64_t)5000);
    return rc;
}

typedef struct {
    char range[5][32]; /* k1, k9, b's k1, k0, kp: "first..last" ("-" for NULL) */
    int64_t old_index;
    json_t *replay, *replay_b, *replay_k0;
} probe;

static const char *const RANGE_KEYS[5][2] = {
    {"default", "k1"}, {"default", "k9"}, {"b", "k1"}, {"default", "k0"}, {"default", "kp"}};

static mv_code replay(mv_db *db, const char *tenant, const char *id, json_t **out, mv_err *err) {
    request_scope s = {.tenant = tenant, .owner = "u1", .template_cd = "tpl", .id = id};
    mv_strlcpy(s.fingerprint, "fp", sizeof s.fingerprint);
    return mv__request_replay_tx(db, &s, out, NULL, 10, err);
}

static mv_code after_tx(mv_db *db, void *ctx, mv_err *err) {
    probe *p = ctx;
    mv_code rc = MV_OK;
    for (int i = 0; rc == MV_OK && i < 5; i++) {
        mv_stmt *st = NULL;
        rc = mv_db_row(db,
                       "SELECT first_message_id, last_message_id FROM message_requests "
                       "WHERE tenant_id = ? AND client_request_id = ?",
                       &st, err, "ss", RANGE_KEYS[i][0], RANGE_KEYS[i][1]);
        if (st)
            snprintf(p->range[i], sizeof p->range[i], "%s..%s",
                     mv_stmt_is_null(st, 0) ? "-" : mv_stmt_text(st, 0),
                     mv_stmt_is_null(st, 1) ? "-" : mv_stmt_text(st, 1));
        mv_stmt_done(st);
    }
    mv_stmt *st = NULL;
    const char *sql = mv_db_kind(db) == MV_STORE_POSTGRES
                          ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname = "
                            "'messages_by_client_request'"
                          : "SELECT COUNT(*) FROM sqlite_master WHERE name = "
                            "'messages_by_client_request'";
    if (rc == MV_OK) rc = mv_db_row(db, sql, &st, err, "");
    if (st) p->old_index = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    if (rc == MV_OK) rc = replay(db, "default", "k1", &p->replay, err);
    if (rc == MV_OK) rc = replay(db, "b", "k1", &p->replay_b, err);
    if (rc == MV_OK) rc = replay(db, "default", "k0", &p->replay_k0, err);
    return rc;
}

static const char *id_at(const json_t *docs, size_t i) {
    return mv_json_str(json_array_get(docs, i), "id");
}

STORE_TEST(version_24_gives_every_reservation_its_message_range_and_replays_exactly_its_own) {
    const char *url = test_store_url(kind, "mig24");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(test_store_migrate_to(s, 23, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, history_tx, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_OK, &err);
    int v = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK(v >= 24);
    probe p = {.old_index = -1};
    CHECK_CODE(mv_store_write(s, after_tx, &p, &err), MV_OK, &err);
    CHECK_STR(p.range[0], "a1..a3");
    CHECK_STR(p.range[1], "a2..a2");
    CHECK_STR(p.range[2], "b1..b1");
    CHECK_STR(p.range[3], "-..-");
    CHECK_STR(p.range[4], "-..-");
    CHECK_INT(p.old_index, 0);
    CHECK(p.replay && json_array_size(p.replay) == 2); /* a2 is in the range, not in the key */
    CHECK_STR(id_at(p.replay, 0), "a1");
    CHECK_STR(id_at(p.replay, 1), "a3");
    CHECK(p.replay_b && json_array_size(p.replay_b) == 1);
    CHECK_STR(id_at(p.replay_b, 0), "b1");
    CHECK(p.replay_k0 && json_array_size(p.replay_k0) == 0);
    json_decref(p.replay);
    json_decref(p.replay_b);
    json_decref(p.replay_k0);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(
        version_24_gives_every_reservation_its_message_range_and_replays_exactly_its_own);
}
