/* list_test.c — the operator lists (durable/saga_list.c, approval_list.c) on both stores: pages
 * newest first with a cursor until the last, filters, bad input refused, approvals never crossing
 * a tenant, saga counts by state; and the query plans: every list statement seeks its own index
 * to the cursor and reads no more than the page (EXPLAIN on SQLite and PostgreSQL, and on
 * PostgreSQL the rows the index scan actually returned for a deep page). */
#include <stdlib.h>

#include "durable/list_cursor.h"
#include "missive/operations.h"
#include "store/db.h"
#include "support/stores.h"

/* ---- rows written directly: lists read what any writer left ------------------------------- */

static const char SQL_ADD_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version, tenant_id) VALUES (?, ?, ?, 'null', 'fp', '[]', 3, ?, ?, 1, "
    "?)";
static const char SQL_ADD_APPROVAL[] =
    "INSERT INTO approvals (approval_id, effect_id, capability, target, digest, tenant_id, "
    "principal_id, token_hash, state, decided_by, created_at, updated_at, expires_at, version) "
    "VALUES (?, 'e', 'refunds.large', 'm1', NULL, ?, ?, 'h', ?, NULL, ?, ?, ?, 1)";

typedef struct {
    int n;         /* sagas to add: saga-0000 …, created_at = 1000 + i */
    int approvals; /* approvals to add */
} seed_arg;

/* "refund" is the rare definition (i % 10 == 9), as a real mix would have one */
static const char *definition_of(int i) { return i % 10 == 9 ? "refund" : "checkout"; }
static const char *const STATES[] = {"running", "completed", "manual-review"};

static mv_code seed_tx(mv_db *db, void *ctx, mv_err *err) {
    seed_arg *a = ctx;
    for (int i = 0; i < a->n; i++) {
        char id[32];
        snprintf(id, sizeof id, "saga-%04d", i);
        mv_code rc = mv_db_execf(db, SQL_ADD_SAGA, NULL, err, "sssiis", id, definition_of(i),
                                 STATES[i % 3], (int64_t)(1000 + i / 2), (int64_t)(5000 + i), "t1");
        if (rc) return rc;
        /* another tenant's sagas interleave with t1's: no t1 list may show them */
        snprintf(id, sizeof id, "other-%04d", i);
        rc = mv_db_execf(db, SQL_ADD_SAGA, NULL, err, "sssiis", id, definition_of(i), STATES[i % 3],
                         (int64_t)(1000 + i / 2), (int64_t)(5000 + i), "t2");
        if (rc) return rc;
    }
    for (int i = 0; i < a->approvals; i++) {
        char id[40];
        snprintf(id, sizeof id, "00000000-0000-4000-8000-%012d", i);
        /* tenant t1: principals ana (even) and bob (odd); tenant t2: one of eve's; the last of
         * t1 is pending but already expired */
        bool t2 = i == a->approvals - 1, expired = i == a->approvals - 2;
        mv_code rc = mv_db_execf(db, SQL_ADD_APPROVAL, NULL, err, "ssssiii", id, t2 ? "t2" : "t1",
                                 t2      ? "eve"
                                 : i % 2 ? "bob"
                                         : "ana",
                                 "pending", (int64_t)(100 + i), (int64_t)(100 + i),
                                 (int64_t)(expired ? 50 : 1000000));
        if (rc) return rc;
    }
    return MV_OK;
}

static mv_store *seeded(const char *kind, const char *name, int sagas, int approvals) {
    mv_store *s = test_store_fresh(kind, name);
    if (!s) return NULL;
    seed_arg a = {sagas, approvals};
    mv_err err = {0};
    if (mv_store_write(s, seed_tx, &a, &err) != MV_OK) {
        fprintf(stderr, "seed: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

/* Walks every page of q; returns the ids in order (a new array) and the number of pages. */
static json_t *walk_sagas(mv_store *s, mv_saga_list_query q, int *pages) {
    json_t *all = json_array();
    char *cursor = NULL;
    *pages = 0;
    do {
        q.cursor = cursor;
        json_t *page = NULL;
        char *next = NULL;
        mv_err err = {0};
        if (mv_saga_list(s, &q, &page, &next, &err) != MV_OK) {
            fprintf(stderr, "list: %s\n", err.message);
            free(cursor);
            return all;
        }
        (*pages)++;
        size_t i;
        json_t *row;
        json_array_foreach(page, i, row) json_array_append(all, json_object_get(row, "sagaId"));
        json_decref(page);
        free(cursor);
        cursor = next;
    } while (cursor && *pages < 1000);
    return all;
}

STORE_TEST(saga_pages_are_newest_first_and_end_with_a_null_cursor) {
    mv_store *s = seeded(kind, "sagalist", 30, 0);
    REQUIRE(s);
    int pages = 0;
    json_t *ids = walk_sagas(s, (mv_saga_list_query){.tenant_id = "t1", .limit = 7}, &pages);
    CHECK_INT(json_array_size(ids), 30);
    CHECK_INT(pages, 5);
    /* created_at = 1000 + i/2: pairs share a time and are ordered by id, descending */
    CHECK_STR(json_string_value(json_array_get(ids, 0)), "saga-0029");
    CHECK_STR(json_string_value(json_array_get(ids, 1)), "saga-0028");
    CHECK_STR(json_string_value(json_array_get(ids, 29)), "saga-0000");
    json_decref(ids);

    ids = walk_sagas(
        s, (mv_saga_list_query){.tenant_id = "t1", .state = "manual-review", .limit = 3}, &pages);
    CHECK_INT(json_array_size(ids), 10); /* i % 3 == 2 */
    CHECK_STR(json_string_value(json_array_get(ids, 0)), "saga-0029");
    json_decref(ids);
    ids = walk_sagas(s, (mv_saga_list_query){.tenant_id = "t1", .definition = "refund", .limit = 2},
                     &pages);
    CHECK_INT(json_array_size(ids), 3); /* 9, 19, 29 */
    CHECK_INT(pages, 2);
    CHECK_STR(json_string_value(json_array_get(ids, 2)), "saga-0009");
    json_decref(ids);
    ids =
        walk_sagas(s,
                   (mv_saga_list_query){
                       .tenant_id = "t1", .definition = "checkout", .state = "running", .limit = 2},
                   &pages);
    CHECK_INT(json_array_size(ids), 9); /* i % 3 == 0 and not 9: 0 3 6 12 15 18 21 24 27 */
    CHECK_STR(json_string_value(json_array_get(ids, 0)), "saga-0027");
    json_decref(ids);

    /* an item carries the summary, and an exact last page still ends with a null cursor */
    json_t *page = NULL;
    char *next = NULL;
    mv_err err = {0};
    mv_saga_list_query q = {
        .tenant_id = "t1", .state = "completed", .definition = "checkout", .limit = 9};
    CHECK_CODE(mv_saga_list(s, &q, &page, &next, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page), 9); /* i % 3 == 1 but 19: 1 4 7 10 13 16 22 25 28 */
    CHECK(next == NULL);
    json_t *first = json_array_get(page, 0);
    CHECK_STR(mv_json_str(first, "sagaId"), "saga-0028");
    CHECK_STR(mv_json_str(first, "definition"), "checkout");
    CHECK_STR(mv_json_str(first, "state"), "completed");
    CHECK_INT(json_integer_value(json_object_get(first, "createdAt")), 1014);
    CHECK_INT(json_integer_value(json_object_get(first, "updatedAt")), 5028);
    json_decref(page);
    mv_store_close(s);
}

STORE_TEST(bad_saga_list_input_is_refused_and_changes_nothing) {
    mv_store *s = seeded(kind, "sagalistbad", 3, 0);
    REQUIRE(s);
    json_t *page = NULL;
    char *next = NULL;
    mv_err err = {0};
    mv_saga_list_query q = {.tenant_id = "t1", .state = "paused", .limit = 5};
    CHECK_CODE(mv_saga_list(s, &q, &page, &next, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "state must be"));
    q = (mv_saga_list_query){.tenant_id = "t1", .definition = "has space", .limit = 5};
    CHECK_CODE(mv_saga_list(s, &q, &page, &next, &err), MV_INVALID_ARGUMENT, &err);
    q = (mv_saga_list_query){.tenant_id = "t1", .limit = 0};
    CHECK_CODE(mv_saga_list(s, &q, &page, &next, &err), MV_INVALID_ARGUMENT, &err);
    q = (mv_saga_list_query){.limit = 5};
    CHECK_CODE(mv_saga_list(s, &q, &page, &next, &err), MV_INVALID_ARGUMENT, &err);
    const char *bad[] = {"", "!!!", "MTIz", "LTE6eA", "MTIzOiBh"}; /* "123", "-1:x", "123: a" */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        q = (mv_saga_list_query){.tenant_id = "t1", .limit = 5, .cursor = bad[i]};
        CHECK_CODE(mv_saga_list(s, &q, &page, &next, &err), MV_INVALID_PAGINATION, &err);
        CHECK(page == NULL && next == NULL);
    }
    mv_store_close(s);
}

STORE_TEST(saga_counts_follow_the_states) {
    mv_store *s = seeded(kind, "sagacounts", 10, 0);
    REQUIRE(s);
    int64_t counts[MV_SAGA_STATE_COUNT];
    mv_err err = {0};
    CHECK_CODE(mv_saga_counts(s, counts, &err), MV_OK, &err);
    /* all tenants (an operator's figure): twice each */
    CHECK_INT(counts[0], 8); /* running: 0 3 6 9 */
    CHECK_INT(counts[1], 0);
    CHECK_INT(counts[2], 6); /* completed: 1 4 7 */
    CHECK_INT(counts[3], 0);
    CHECK_INT(counts[4], 6); /* manual-review: 2 5 8 */
    CHECK_STR(mv_saga_state_names[4], "manual-review");
    mv_store_close(s);
}

static json_t *approvals_of(mv_store *s, const char *tenant, const char *principal,
                            const char *state, int64_t now, int limit, char **next) {
    mv_approval_list_query q = {
        .tenant_id = tenant, .principal_id = principal, .state = state, .now = now, .limit = limit};
    json_t *page = NULL;
    mv_err err = {0};
    if (mv_approval_list(s, &q, &page, next, &err) != MV_OK)
        fprintf(stderr, "approval list: %s\n", err.message);
    return page;
}

STORE_TEST(approval_pages_stay_in_the_tenant_and_a_principal_sees_only_theirs) {
    mv_store *s = seeded(kind, "approvallist", 0, 9); /* t1: 0..7 (6 expired), t2: 8 */
    REQUIRE(s);
    char *next = NULL;
    json_t *page = approvals_of(s, "t1", NULL, NULL, 500, 100, &next);
    REQUIRE(page);
    CHECK_INT(json_array_size(page), 7); /* 0..6: 7 expired, it is no longer pending */
    CHECK(next == NULL);
    size_t i;
    json_t *a;
    json_array_foreach(page, i, a) {
        CHECK_STR(mv_json_str(a, "tenantId"), "t1");
        CHECK_STR(mv_json_str(a, "state"), "pending");
        CHECK(!json_object_get(a, "tokenHash"));
    }
    CHECK_STR(mv_json_str(json_array_get(page, 0), "approvalId"),
              "00000000-0000-4000-8000-000000000006");
    json_decref(page);
    /* bob (odd i) sees 5, 3, 1 (7 expired) */
    page = approvals_of(s, "t1", "bob", "pending", 500, 2, &next);
    CHECK_INT(json_array_size(page), 2);
    CHECK(next != NULL);
    json_decref(page);
    mv_approval_list_query q = {
        .tenant_id = "t1", .principal_id = "bob", .now = 500, .limit = 2, .cursor = next};
    mv_err err = {0};
    char *next2 = NULL;
    CHECK_CODE(mv_approval_list(s, &q, &page, &next2, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page), 1);
    CHECK_STR(mv_json_str(json_array_get(page, 0), "approvalId"),
              "00000000-0000-4000-8000-000000000001");
    CHECK(next2 == NULL);
    free(next);
    json_decref(page);
    /* eve's approval lives in t2: nobody of t1 sees it, and t2's lists show only it */
    page = approvals_of(s, "t1", "eve", "pending", 500, 100, &next);
    CHECK_INT(json_array_size(page), 0);
    json_decref(page);
    page = approvals_of(s, "t2", NULL, "pending", 500, 100, &next);
    CHECK_INT(json_array_size(page), 1);
    json_decref(page);
    page = approvals_of(s, "t1", NULL, "approved", 500, 100, &next);
    CHECK_INT(json_array_size(page), 0);
    json_decref(page);
    /* bad input */
    q = (mv_approval_list_query){.tenant_id = "t1", .state = "maybe", .limit = 5};
    CHECK_CODE(mv_approval_list(s, &q, &page, &next, &err), MV_INVALID_ARGUMENT, &err);
    q = (mv_approval_list_query){.tenant_id = NULL, .limit = 5};
    CHECK_CODE(mv_approval_list(s, &q, &page, &next, &err), MV_INVALID_ARGUMENT, &err);
    q = (mv_approval_list_query){.tenant_id = "t1", .limit = 5, .cursor = "%%%"};
    CHECK_CODE(mv_approval_list(s, &q, &page, &next, &err), MV_INVALID_PAGINATION, &err);
    mv_store_close(s);
}

/* ---- query plans -------------------------------------------------------------------------- */

typedef struct {
    const char *sql;  /* a list statement */
    bool analyze;     /* PostgreSQL: EXPLAIN ANALYZE (the rows actually read) */
    const char *bind; /* "s"/"i" per parameter, values below */
    const char *texts[5];
    int64_t ints[4];
    char plan[8192];
} plan_arg;

static mv_code plan_fn(mv_db *db, void *ctx, mv_err *err) {
    plan_arg *a = ctx;
    bool pg = mv_db_kind(db) == MV_STORE_POSTGRES;
    /* the statement cache keys on the SQL pointer: every EXPLAIN gets a buffer of its own */
    static char bufs[16][2048];
    static int used_bufs;
    char *sql = bufs[used_bufs++ % 16];
    snprintf(sql, sizeof bufs[0], "%s %s",
             pg ? (a->analyze ? "EXPLAIN (ANALYZE, COSTS OFF)" : "EXPLAIN (COSTS OFF)")
                : "EXPLAIN QUERY PLAN",
             a->sql);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql, &st, err);
    if (rc) return rc;
    int ti = 0, ii = 0;
    for (int p = 0; a->bind[p]; p++) {
        if (a->bind[p] == 's')
            mv_stmt_bind_text(st, p + 1, a->texts[ti++]);
        else
            mv_stmt_bind_int64(st, p + 1, a->ints[ii++]);
    }
    size_t used = 0;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        const char *line = mv_stmt_text(st, pg ? 0 : 3);
        used += (size_t)snprintf(a->plan + used, sizeof a->plan - used, "%s\n", line ? line : "");
        if (used >= sizeof a->plan) break;
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

static const char SQL_ANALYZE[] = "ANALYZE";
static mv_code analyze_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_ANALYZE, err);
}

/* The plan seeks index to the cursor and needs no sort: SQLite names the index with the row-value
 * bound; PostgreSQL shows an index scan of it whose Index Cond holds the row comparison. */
static bool seeks(const char *kind, const char *plan, const char *index, const char *key) {
    bool ok;
    if (strcmp(kind, "sqlite") == 0) {
        char using[128], bound[64];
        snprintf(using, sizeof using, "USING INDEX %s (", index);
        snprintf(bound, sizeof bound, "(created_at,%s)<(?,?)", key);
        ok = strstr(plan, using) && strstr(plan, bound) && !strstr(plan, "TEMP B-TREE");
    } else {
        char scan[128];
        snprintf(scan, sizeof scan, "Index Scan using %s", index);
        ok = strstr(plan, scan) && strstr(plan, "ROW(created_at,") && !strstr(plan, "Sort");
    }
    if (!ok || getenv("SHOW_PLAN")) fprintf(stderr, "plan (%s, %s):\n%s", kind, index, plan);
    return ok;
}

STORE_TEST(every_list_statement_seeks_its_index_and_reads_one_page) {
    mv_store *s = seeded(kind, "listplan", 3000, 3000);
    REQUIRE(s);
    mv_err err = {0};
    if (strcmp(kind, "postgres") == 0) REQUIRE(mv_store_write(s, analyze_tx, NULL, &err) == MV_OK);
    const struct {
        const char *sql, *index, *key, *bind;
        const char *texts[5];
    } cases[] = {
        {mv__saga_list_sql(false, false), "sagas_list_all", "saga_id", "sisi", {"t1", "saga-2000"}},
        {mv__saga_list_sql(true, false),
         "sagas_list_by_state",
         "saga_id",
         "ssisi",
         {"t1", "running", "saga-2000"}},
        {mv__saga_list_sql(false, true),
         "sagas_list_by_definition",
         "saga_id",
         "ssisi",
         {"t1", "refund", "saga-2000"}},
        {mv__saga_list_sql(true, true),
         "sagas_list_by_definition_state",
         "saga_id",
         "sssisi",
         {"t1", "checkout", "running", "saga-2000"}},
        {mv__approval_list_sql(false),
         "approvals_list_by_tenant",
         "approval_id",
         "ssiisi",
         {"t1", "pending", "00000000-0000-4000-8000-000000002000"}},
        {mv__approval_list_sql(true),
         "approvals_list_by_principal",
         "approval_id",
         "sssiisi",
         {"t1", "ana", "pending", "00000000-0000-4000-8000-000000002000"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        plan_arg a = {.sql = cases[c].sql, .bind = cases[c].bind};
        memcpy(a.texts, cases[c].texts, sizeof a.texts);
        /* a deep page: the cursor two thirds down, 50 rows (+1) */
        bool approvals = strstr(cases[c].index, "approvals") != NULL;
        if (approvals) {
            a.ints[0] = 500;  /* now */
            a.ints[1] = 2100; /* cursor created_at */
            a.ints[2] = 51;
        } else {
            a.ints[0] = 2000; /* created_at = 1000 + i/2 */
            a.ints[1] = 51;
        }
        CHECK_CODE(mv_store_read(s, plan_fn, &a, &err), MV_OK, &err);
        CHECK(seeks(kind, a.plan, cases[c].index, cases[c].key));
        if (strcmp(kind, "postgres") == 0) {
            /* the cost follows the page: the index scan returned at most limit + 1 rows, though
             * thousands of rows lie before the cursor */
            a.analyze = true;
            a.plan[0] = '\0';
            CHECK_CODE(mv_store_read(s, plan_fn, &a, &err), MV_OK, &err);
            const char *scan = strstr(a.plan, "Index Scan using");
            const char *rows = scan ? strstr(scan, "rows=") : NULL;
            const char *removed = scan ? strstr(scan, "Rows Removed by Filter: ") : NULL;
            CHECK(rows != NULL);
            if (rows) {
                long n =
                    strtol(rows + 5, NULL, 10) + (removed ? strtol(removed + 24, NULL, 10) : 0);
                if (n > 2 * 51) fprintf(stderr, "plan:\n%s", a.plan);
                CHECK(n <= 2 * 51 && n >= 1);
            }
        }
    }
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(saga_pages_are_newest_first_and_end_with_a_null_cursor,
                     bad_saga_list_input_is_refused_and_changes_nothing,
                     saga_counts_follow_the_states,
                     approval_pages_stay_in_the_tenant_and_a_principal_sees_only_theirs,
                     every_list_statement_seeks_its_index_and_reads_one_page);
}
