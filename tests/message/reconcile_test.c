/* reconcile_test.c — the action and client-request reconciliation scans on every store: which
 * rows are findings (expired processing leases, stale retryable attempts, expired pending
 * reservations) and which are not (live leases, fresh retries, archived, completed), keyset
 * paging across phases with limit 1, and cursor errors. */
#include "missive/base.h"
#include "missive/reconcile.h"
#include "store/db.h"
#include "support/stores.h"

static const char SQL_PUT_MESSAGE[] =
    "INSERT INTO messages (id, type, template_cd, to_roles, sender_content, receiver_content, "
    "documents, payment_cd, payload, action_state, archived, action_cd, action_attempt_id, "
    "action_lease_expires_at, created_at, updated_at) "
    "VALUES (?, 'request', 'tpl', '[]', '{}', '{}', '[]', '', '{}', ?, ?, ?, ?, ?, 1, ?)";
static const char SQL_PUT_REQUEST[] =
    "INSERT INTO message_requests (tenant_id, client_request_owner_id, template_cd, "
    "client_request_id, state, fingerprint, lease_owner_id, lease_expires_at, created_at, "
    "updated_at) VALUES (?, ?, 'tpl', ?, ?, 'fp', 'owner', ?, 1, ?)";

typedef struct {
    const char *id, *state, *action_cd, *attempt;
    int64_t lease; /* -1 = NULL */
    int64_t updated;
} msg_row;

typedef struct {
    const char *owner, *crid, *state;
    int64_t lease;      /* -1 = NULL */
    const char *tenant; /* NULL = "default" */
} req_row;

typedef struct {
    const msg_row *msgs;
    size_t nmsgs;
    const req_row *reqs;
    size_t nreqs;
} rows;

static mv_code put_rows(mv_db *db, void *ctx, mv_err *err) {
    rows *r = ctx;
    mv_code rc = MV_OK;
    for (size_t i = 0; rc == MV_OK && i < r->nmsgs; i++) {
        const msg_row *m = &r->msgs[i];
        mv_stmt *st;
        if ((rc = mv_db_prepare(db, SQL_PUT_MESSAGE, &st, err))) break;
        mv_stmt_bind_text(st, 1, m->id);
        mv_stmt_bind_text(st, 2, m->state);
        mv_stmt_bind_int64(st, 3, strcmp(m->state, "archived") == 0);
        mv_stmt_bind_text(st, 4, m->action_cd);
        mv_stmt_bind_text(st, 5, m->attempt);
        if (m->lease < 0)
            mv_stmt_bind_null(st, 6);
        else
            mv_stmt_bind_int64(st, 6, m->lease);
        mv_stmt_bind_int64(st, 7, m->updated);
        if (mv_stmt_step(st, err) < 0) rc = err->code;
        mv_stmt_done(st);
    }
    for (size_t i = 0; rc == MV_OK && i < r->nreqs; i++) {
        const req_row *q = &r->reqs[i];
        mv_stmt *st;
        if ((rc = mv_db_prepare(db, SQL_PUT_REQUEST, &st, err))) break;
        mv_stmt_bind_text(st, 1, q->tenant ? q->tenant : "default");
        mv_stmt_bind_text(st, 2, q->owner);
        mv_stmt_bind_text(st, 3, q->crid);
        mv_stmt_bind_text(st, 4, q->state);
        if (q->lease < 0)
            mv_stmt_bind_null(st, 5);
        else
            mv_stmt_bind_int64(st, 5, q->lease);
        mv_stmt_bind_int64(st, 6, 10);
        if (mv_stmt_step(st, err) < 0) rc = err->code;
        mv_stmt_done(st);
    }
    return rc;
}

#define HEX(c) c c c c c c c c c c c c c c c c c c c c c c c c

static const msg_row MSGS[] = {
    {HEX("a"), "processing", "accept", "att-a", 900, 100},  /* lease expired: finding 2 */
    {HEX("b"), "processing", "accept", "att-b", 500, 100},  /* lease expired: finding 1 */
    {HEX("c"), "processing", "accept", "att-c", 1000, 100}, /* lease ends now: not expired */
    {HEX("d"), "processing", "accept", "att-d", 5000, 100}, /* live lease */
    {HEX("e"), "retryable", "accept", "att-e", -1, 400},    /* stale: finding 3 */
    {HEX("f"), "retryable", "accept", "att-f", -1, 401},    /* newer than stale_before */
    {HEX("0"), "retryable", "decline", "att-0", -1, 400},   /* stale: finding 3 (id order) */
    {HEX("9"), "active", NULL, NULL, -1, 1},                /* nothing to do */
    {"aaaaaaaaaaaaaaaaaaaaaaab", "archived", "accept", "att-z", -1, 1},
};

static const req_row REQS[] = {
    {"u2", "k1", "pending", 100},  /* finding 2 (owner order) */
    {"u1", "k9", "pending", 100},  /* finding 1 */
    {"u1", "k2", "pending", 50},   /* finding 0 */
    {"u1", "k3", "pending", 1000}, /* lease ends now: not expired */
    {"u1", "k4", "completed", -1}, /* done */
    {"u1", "k5", "failed", -1},    /* done */
};

static void seed(mv_store *s) {
    rows r = {MSGS, sizeof MSGS / sizeof MSGS[0], REQS, sizeof REQS / sizeof REQS[0]};
    mv_err err = {0};
    CHECK_CODE(mv_store_write(s, put_rows, &r, &err), MV_OK, &err);
}

STORE_TEST(action_findings_are_expired_leases_then_stale_retryable_attempts) {
    mv_store *s = test_store_fresh(kind, "rec_actions");
    REQUIRE(s);
    seed(s);
    mv_reconcile_scan scan = {.now = 1000, .stale_before = 400};
    mv_reconcile_results page;
    mv_err err = {0};
    CHECK_CODE(mv_reconcile_actions_page(s, &scan, &page, &err), MV_OK, &err);
    REQUIRE(page.findings);
    CHECK_INT(json_array_size(page.findings), 4);
    CHECK(page.next_cursor == NULL);
    const char *order[] = {HEX("b"), HEX("a"), HEX("0"), HEX("e")};
    for (size_t i = 0; i < 4; i++)
        CHECK_STR(mv_json_str(json_array_get(page.findings, i), "messageId"), order[i]);
    json_t *first = json_array_get(page.findings, 0), *third = json_array_get(page.findings, 2);
    CHECK_STR(mv_json_str(first, "actionState"), "processing");
    CHECK_STR(mv_json_str(first, "reason"), "lease-expired");
    CHECK_STR(mv_json_str(first, "actionAttemptId"), "att-b");
    CHECK_STR(mv_json_str(first, "templateCd"), "tpl");
    CHECK_INT(json_integer_value(json_object_get(first, "leaseExpiresAt")), 500);
    CHECK_STR(mv_json_str(third, "actionState"), "retryable");
    CHECK_STR(mv_json_str(third, "reason"), "stale-retryable");
    CHECK_STR(mv_json_str(third, "actionCd"), "decline");
    CHECK(json_object_get(third, "leaseExpiresAt") == NULL);
    CHECK_INT(json_integer_value(json_object_get(third, "updatedAt")), 400);
    mv_reconcile_results_clear(&page);

    /* one at a time: the same four, in the same order, across both phases */
    char *cursor = NULL;
    int seen = 0;
    do {
        mv_reconcile_scan one = {.now = 1000, .stale_before = 400, .cursor = cursor, .limit = 1};
        mv_code rc = mv_reconcile_actions_page(s, &one, &page, &err);
        free(cursor);
        cursor = NULL;
        CHECK_CODE(rc, MV_OK, &err);
        if (rc) break;
        if (json_array_size(page.findings) == 1 && seen < 4)
            CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "messageId"), order[seen]);
        seen += (int)json_array_size(page.findings);
        cursor = page.next_cursor;
        page.next_cursor = NULL;
        mv_reconcile_results_clear(&page);
    } while (cursor && seen < 10);
    CHECK_INT(seen, 4);
    mv_store_close(s);
}

STORE_TEST(request_findings_are_pending_reservations_whose_lease_expired) {
    mv_store *s = test_store_fresh(kind, "rec_requests");
    REQUIRE(s);
    seed(s);
    mv_reconcile_scan scan = {.now = 1000, .limit = 2};
    mv_reconcile_results page;
    mv_err err = {0};
    CHECK_CODE(mv_reconcile_requests_page(s, &scan, &page, &err), MV_OK, &err);
    REQUIRE(page.findings);
    CHECK_INT(json_array_size(page.findings), 2);
    REQUIRE(page.next_cursor);
    json_t *f = json_array_get(page.findings, 0);
    CHECK_STR(mv_json_str(f, "tenantId"), "default");
    CHECK_STR(mv_json_str(f, "ownerId"), "u1");
    CHECK_STR(mv_json_str(f, "clientRequestId"), "k2");
    CHECK_STR(mv_json_str(f, "templateCd"), "tpl");
    CHECK_STR(mv_json_str(f, "state"), "pending");
    CHECK_STR(mv_json_str(f, "reason"), "lease-expired");
    CHECK_INT(json_integer_value(json_object_get(f, "leaseExpiresAt")), 50);
    CHECK_STR(mv_json_str(json_array_get(page.findings, 1), "clientRequestId"), "k9");
    char *cursor = page.next_cursor;
    page.next_cursor = NULL;
    mv_reconcile_results_clear(&page);
    scan.cursor = cursor;
    CHECK_CODE(mv_reconcile_requests_page(s, &scan, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 1);
    CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "ownerId"), "u2");
    CHECK(page.next_cursor == NULL);
    mv_reconcile_results_clear(&page);
    /* an action cursor is not a request cursor */
    free(cursor);
    mv_store_close(s);
}

/* Two tenants' reservations that agree on everything but the tenant are two findings, and a
 * page boundary between them skips neither. */
STORE_TEST(request_pages_of_one_find_the_same_reservation_in_two_tenants) {
    mv_store *s = test_store_fresh(kind, "rec_tenants");
    REQUIRE(s);
    static const req_row twins[] = {
        {"u1", "k1", "pending", 100, "t2"},
        {"u1", "k1", "pending", 100, "t1"},
        {"u1", "k1", "pending", 100, "t3"},
    };
    rows r = {NULL, 0, twins, 3};
    mv_err err = {0};
    CHECK_CODE(mv_store_write(s, put_rows, &r, &err), MV_OK, &err);
    const char *want[] = {"t1", "t2", "t3"};
    char *cursor = NULL;
    int seen = 0;
    do {
        mv_reconcile_scan one = {.now = 1000, .cursor = cursor, .limit = 1};
        mv_reconcile_results page;
        CHECK_CODE(mv_reconcile_requests_page(s, &one, &page, &err), MV_OK, &err);
        free(cursor);
        cursor = page.next_cursor;
        page.next_cursor = NULL;
        for (size_t i = 0; i < json_array_size(page.findings) && seen < 3; i++)
            CHECK_STR(mv_json_str(json_array_get(page.findings, i), "tenantId"), want[seen++]);
        mv_reconcile_results_clear(&page);
    } while (cursor && seen < 5);
    CHECK_INT(seen, 3);
    free(cursor);
    mv_store_close(s);
}

STORE_TEST(bad_limits_and_cursors_are_invalid_arguments) {
    mv_store *s = test_store_fresh(kind, "rec_bad");
    REQUIRE(s);
    mv_reconcile_results page = {0};
    mv_err err = {0};
    mv_reconcile_scan bad_limit = {.now = 1, .limit = 1001};
    CHECK_CODE(mv_reconcile_actions_page(s, &bad_limit, &page, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "reconciliation limit must be between 1 and 1000");
    const char *cursors[] = {"", "!!!", "W10", /* [] */ "WzUsMSwiYSJd" /* [5,1,"a"] */,
                             "WzAsMSwiYSJd" /* [0,1,"a"]: too few keys for requests */};
    for (size_t i = 0; i < sizeof cursors / sizeof cursors[0]; i++) {
        mv_reconcile_scan sc = {.now = 1, .cursor = cursors[i]};
        CHECK_CODE(mv_reconcile_requests_page(s, &sc, &page, &err), MV_INVALID_ARGUMENT, &err);
        CHECK_STR(err.message, "invalid reconciliation cursor");
        CHECK(page.findings == NULL);
    }
    mv_reconcile_scan ok = {.now = 1, .cursor = "WzAsMSwiYSJd"};
    CHECK_CODE(mv_reconcile_actions_page(s, &ok, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 0);
    mv_reconcile_results_clear(&page);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(action_findings_are_expired_leases_then_stale_retryable_attempts,
                     request_findings_are_pending_reservations_whose_lease_expired,
                     request_pages_of_one_find_the_same_reservation_in_two_tenants,
                     bad_limits_and_cursors_are_invalid_arguments);
}
