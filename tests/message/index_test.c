/* index_test.c — the partial indexes of migration 11 on every store.
 *
 * The reconciliation scans and client-request retention read one partial index each (EXPLAIN
 * QUERY PLAN on SQLite; EXPLAIN with sequential scans disabled on PostgreSQL): a query edited so
 * that its WHERE clause no longer implies the index's predicate (a bound state, another state)
 * fails here instead of silently scanning the table. Rows of every state are found by the scans,
 * retention and the gauges on a fresh store and on a version-10 store migrated with rows in it;
 * retention detaches only the messages of the reservations it removes, not another tenant's
 * messages that carry the same key. */
#include "missive/base.h"
#include "missive/message.h"
#include "missive/reconcile.h"
#include "store/db.h"
#include "store/driver.h"
#include "support/stores.h"

/* The statements under test (message/reconcile.c, message/request.c). */
extern const char *const mv__reconcile_sql[]; /* expired actions, stale actions, expired requests */
extern const char *const mv__request_gc_sql[]; /* detach, delete, per-state counts, replay */

/* ---- plans --------------------------------------------------------------------------------- */

typedef struct {
    const char *sql;
    const char *bind;     /* per parameter: 'i' (bound 1) or 's' (bound "k") */
    const char *index[3]; /* every index the plan must read */
    bool ordered;         /* a keyset page: read in index order, never sorted */
    const char *sqlite;   /* SQLite (whose plans do not depend on statistics): also this */
} plan_case;

typedef struct {
    const plan_case *c;
    char plan[8192];
} plan_arg;

static const char SQL_PG_NO_SEQSCAN[] = "SET LOCAL enable_seqscan = off";

static mv_code plan_tx(mv_db *db, void *ctx, mv_err *err) {
    plan_arg *a = ctx;
    bool pg = mv_db_kind(db) == MV_STORE_POSTGRES;
    /* the statement cache keys on the SQL pointer: every EXPLAIN gets a buffer of its own */
    static char bufs[64][1024];
    static int used_bufs;
    if (used_bufs == 64) return mv_err_set(err, MV_INTERNAL, "index_test: out of plan buffers");
    char *sql = bufs[used_bufs++];
    int n = snprintf(sql, sizeof bufs[0], "%s %s",
                     pg ? "EXPLAIN (COSTS OFF)" : "EXPLAIN QUERY PLAN", a->c->sql);
    if (n >= (int)sizeof bufs[0]) return mv_err_set(err, MV_INTERNAL, "index_test: long SQL");
    mv_code rc;
    if (pg && (rc = mv_db_exec(db, SQL_PG_NO_SEQSCAN, err)) != MV_OK) return rc;
    mv_stmt *st;
    if ((rc = mv_db_prepare(db, sql, &st, err)) != MV_OK) return rc;
    for (int p = 0; a->c->bind[p]; p++) {
        if (a->c->bind[p] == 's')
            mv_stmt_bind_text(st, p + 1, "k");
        else
            mv_stmt_bind_int64(st, p + 1, 1);
    }
    size_t len = 0;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1 && len < sizeof a->plan) {
        const char *line = mv_stmt_text(st, pg ? 0 : 3);
        len += (size_t)snprintf(a->plan + len, sizeof a->plan - len, "%s\n", line ? line : "");
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

/* A whole-table read: SQLite's "SCAN <table>" without an index, PostgreSQL's Seq Scan. */
static bool scans_a_table(const char *plan) {
    if (strstr(plan, "Seq Scan")) return true;
    for (const char *p = plan; (p = strstr(p, "SCAN ")) != NULL; p += 5) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        if (!memmem(p, n, "USING", 5)) return true;
    }
    return false;
}

/* Checks every statement's plan on store s. */
static void check_plans(mv_store *s, const char *kind) {
    const plan_case cases[] = {
        {mv__reconcile_sql[0], "iisi", {"messages_processing_by_lease"}, true},
        {mv__reconcile_sql[1], "iisi", {"messages_retryable_by_update"}, true},
        {mv__reconcile_sql[2], "iissssi", {"message_requests_pending_by_lease"}, true},
        /* the messages to detach are read by each removed reservation's id range (migration
         * 24); which index PostgreSQL takes for that depends on its statistics of the moment
         * (any but a table scan will do) */
        {mv__request_gc_sql[0],
         "i",
         {"message_requests_completed_by_time"},
         false,
         "sqlite_autoindex_messages_1 (id>? AND id<?)"},
        {mv__request_gc_sql[1], "i", {"message_requests_completed_by_time"}, false},
        /* a replay reads its messages by their id range, not by an index of the key */
        {mv__request_gc_sql[3],
         "ssssss",
         {NULL},
         false,
         "sqlite_autoindex_messages_1 (id>? AND id<?)"},
        {mv__request_gc_sql[2],
         "",
         {"message_requests_pending_by_lease", "message_requests_completed_by_time",
          "message_requests_failed_by_time"},
         false},
    };
    bool pg = strcmp(kind, "postgres") == 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plan_arg a = {&cases[i], ""};
        mv_err err = {0};
        CHECK_CODE(mv_store_write(s, plan_tx, &a, &err), MV_OK, &err);
        bool ok = strlen(a.plan) > 0 && !scans_a_table(a.plan);
        for (int k = 0; k < 3 && cases[i].index[k]; k++)
            ok = ok && strstr(a.plan, cases[i].index[k]) != NULL;
        if (!pg && cases[i].sqlite) ok = ok && strstr(a.plan, cases[i].sqlite) != NULL;
        if (cases[i].ordered)
            ok = ok && !strstr(a.plan, pg ? "Sort" : "TEMP B-TREE") &&
                 strstr(a.plan, pg ? "ROW(" : ")>(?,"); /* the cursor is a seek */
        if (!ok || getenv("SHOW_PLAN"))
            fprintf(stderr, "plan of statement %zu (%s):\n%s", i, kind, a.plan);
        CHECK(ok);
    }
}

STORE_TEST(reconcile_and_retention_queries_read_their_partial_indexes) {
    mv_store *s = test_store_fresh(kind, "idx_plans");
    REQUIRE(s);
    check_plans(s, kind);
    mv_store_close(s);
}

/* ---- rows of every state ------------------------------------------------------------------- */

static const char SQL_PUT_MESSAGE[] =
    "INSERT INTO messages (id, tenant_id, type, template_cd, to_roles, sender_content, "
    "receiver_content, documents, payment_cd, payload, action_state, archived, action_cd, "
    "action_attempt_id, action_lease_expires_at, client_request_id, client_request_owner_id, "
    "client_request_item_index, created_at, updated_at) "
    "VALUES (?, ?, 'request', 'tpl', '[]', '{}', '{}', '[]', '', '{}', ?, ?, ?, ?, ?, ?, ?, ?, 1, "
    "?)";
static const char SQL_PUT_REQUEST[] =
    "INSERT INTO message_requests (tenant_id, client_request_owner_id, template_cd, "
    "client_request_id, state, fingerprint, item_count, lease_owner_id, lease_expires_at, "
    "completed_at, failed_at, created_at, updated_at) "
    "VALUES (?, 'u1', 'tpl', ?, ?, 'fp', ?, 'owner', ?, ?, ?, 1, 10)";
/* What a create's completion writes (migration 24): the reservation's range of message ids; the
 * default tenant's range also holds tenant b's message with the same key. */
static const char SQL_PUT_RANGES[] =
    "UPDATE message_requests SET first_message_id = 'm-old', last_message_id = "
    "CASE tenant_id WHEN 'b' THEN 'm-old-b' ELSE 'm-old-c' END WHERE client_request_id = 'k-old'";
static const char SQL_OWNER_OF[] = "SELECT client_request_owner_id FROM messages WHERE id = ?";

typedef struct {
    const char *id, *tenant, *state, *action_cd, *attempt;
    int64_t lease; /* -1 = NULL */
    const char *crid;
    int64_t updated;
} msg_row;

typedef struct {
    const char *tenant, *crid, *state;
    int64_t lease, completed, failed; /* -1 = NULL */
} req_row;

/* At now = 1000, stale_before = 400, retention before 500. */
static const msg_row MSGS[] = {
    {"m-active", "default", "active", NULL, NULL, -1, NULL, 1},
    {"m-expired", "default", "processing", "accept", "att-1", 500, NULL, 100}, /* finding */
    {"m-live", "default", "processing", "accept", "att-2", 5000, NULL, 100},
    {"m-retry", "default", "retryable", "accept", "att-3", -1, NULL, 300}, /* finding */
    {"m-fresh-retry", "default", "retryable", "accept", "att-4", -1, NULL, 900},
    {"m-archived", "default", "archived", "accept", "att-5", -1, NULL, 100},
    {"m-old", "default", "active", NULL, NULL, -1, "k-old", 1}, /* its reservation is removed */
    {"m-old-b", "b", "active", NULL, NULL, -1, "k-old", 1},     /* same key, tenant b: kept */
};

static const req_row REQS[] = {
    {"default", "k-pend", "pending", 100, -1, -1}, /* finding */
    {"default", "k-live", "pending", 5000, -1, -1},
    {"default", "k-old", "completed", -1, 100, -1}, /* removed by retention */
    {"b", "k-old", "completed", -1, 900, -1},
    {"default", "k-fail", "failed", -1, -1, 200},
};

static void bind_time(mv_stmt *st, int idx, int64_t v) {
    if (v < 0)
        mv_stmt_bind_null(st, idx);
    else
        mv_stmt_bind_int64(st, idx, v);
}

static mv_code put_rows_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = MV_OK;
    mv_stmt *st;
    for (size_t i = 0; rc == MV_OK && i < sizeof MSGS / sizeof MSGS[0]; i++) {
        const msg_row *m = &MSGS[i];
        if ((rc = mv_db_prepare(db, SQL_PUT_MESSAGE, &st, err)) != MV_OK) break;
        mv_stmt_bindf(st, "sssiss", m->id, m->tenant, m->state,
                      (int64_t)(strcmp(m->state, "archived") == 0), m->action_cd, m->attempt);
        bind_time(st, 7, m->lease);
        mv_stmt_bind_text(st, 8, m->crid);
        mv_stmt_bind_text(st, 9, m->crid ? "u1" : NULL);
        bind_time(st, 10, m->crid ? 0 : -1);
        mv_stmt_bind_int64(st, 11, m->updated);
        if (mv_stmt_step(st, err) < 0) rc = err->code;
        mv_stmt_done(st);
    }
    for (size_t i = 0; rc == MV_OK && i < sizeof REQS / sizeof REQS[0]; i++) {
        const req_row *q = &REQS[i];
        if ((rc = mv_db_prepare(db, SQL_PUT_REQUEST, &st, err)) != MV_OK) break;
        mv_stmt_bindf(st, "sss", q->tenant, q->crid, q->state);
        bind_time(st, 4, strcmp(q->state, "completed") == 0 ? 1 : -1);
        bind_time(st, 5, q->lease);
        bind_time(st, 6, q->completed);
        bind_time(st, 7, q->failed);
        if (mv_stmt_step(st, err) < 0) rc = err->code;
        mv_stmt_done(st);
    }
    return rc;
}

static mv_code put_ranges_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_PUT_RANGES, err);
}

typedef struct {
    const char *id;
    char owner[16]; /* "" = NULL */
} owner_arg;

static mv_code owner_tx(mv_db *db, void *ctx, mv_err *err) {
    owner_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_OWNER_OF, &st, err, "s", a->id);
    if (st) {
        const char *o = mv_stmt_text(st, 0);
        snprintf(a->owner, sizeof a->owner, "%s", o ? o : "");
    }
    mv_stmt_done(st);
    return rc;
}

static const char *owner_of(mv_store *s, owner_arg *a) {
    mv_err err = {0};
    snprintf(a->owner, sizeof a->owner, "?");
    CHECK_CODE(mv_store_read(s, owner_tx, a, &err), MV_OK, &err);
    return a->owner;
}

/* Checks what the scans, the gauges and retention find among MSGS and REQS in s. */
static void check_every_state(mv_store *s) {
    mv_err err = {0};
    mv_reconcile_scan scan = {.now = 1000, .stale_before = 400};
    mv_reconcile_results page = {0};
    CHECK_CODE(mv_reconcile_actions_page(s, &scan, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 2);
    CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "messageId"), "m-expired");
    CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "reason"), "lease-expired");
    CHECK_STR(mv_json_str(json_array_get(page.findings, 1), "messageId"), "m-retry");
    CHECK_STR(mv_json_str(json_array_get(page.findings, 1), "reason"), "stale-retryable");
    mv_reconcile_results_clear(&page);
    CHECK_CODE(mv_reconcile_requests_page(s, &scan, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 1);
    CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "clientRequestId"), "k-pend");
    mv_reconcile_results_clear(&page);

    int64_t counts[3] = {-1, -1, -1};
    CHECK_CODE(mv_requests_stats(s, counts, &err), MV_OK, &err);
    CHECK_INT(counts[0], 2); /* pending */
    CHECK_INT(counts[1], 2); /* completed */
    CHECK_INT(counts[2], 1); /* failed */

    int64_t removed = -1;
    CHECK_CODE(mv_requests_gc(s, 500, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 1);
    CHECK_CODE(mv_requests_stats(s, counts, &err), MV_OK, &err);
    CHECK_INT(counts[0], 2);
    CHECK_INT(counts[1], 1);
    CHECK_INT(counts[2], 1);
    owner_arg a = {"m-old", ""}, b = {"m-old-b", ""};
    CHECK_STR(owner_of(s, &a), "");   /* detached: the key is free again */
    CHECK_STR(owner_of(s, &b), "u1"); /* tenant b's reservation is still there */
    CHECK_CODE(mv_requests_gc(s, 500, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 0);
}

STORE_TEST(retention_detaches_only_the_removed_reservations_messages_not_another_tenants) {
    mv_store *s = test_store_fresh(kind, "idx_states");
    REQUIRE(s);
    mv_err err = {0};
    CHECK_CODE(mv_store_write(s, put_rows_tx, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, put_ranges_tx, NULL, &err), MV_OK, &err);
    check_every_state(s);
    mv_store_close(s);
}

/* ---- migration 11 on a version-10 store ---------------------------------------------------- */

STORE_TEST(migration_11_on_a_version_10_store_keeps_rows_of_every_state_findable) {
    const char *url = test_store_url(kind, "idx_migrate");
    REQUIRE(url);
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(test_store_migrate_to(s, 10, &err), MV_OK, &err); /* a release before 11 */
    int v = 0, applied = 0;
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, 10);
    CHECK_CODE(mv_store_write(s, put_rows_tx, NULL, &err), MV_OK, &err);
    int later = 0; /* 11 and whatever came after it */
    for (int i = 0; mv_migrations[i]; i++)
        later += mv_migrations[i]->version > 10;
    CHECK(later >= 1);
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, later);
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, mv_store_latest_version());
    check_plans(s, kind); /* the indexes migration 11 built over existing rows */
    check_every_state(s);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(reconcile_and_retention_queries_read_their_partial_indexes,
                     retention_detaches_only_the_removed_reservations_messages_not_another_tenants,
                     migration_11_on_a_version_10_store_keeps_rows_of_every_state_findable);
}
