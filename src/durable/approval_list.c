/* approval_list.c — approvals one page at a time (GET /approvals): every approval of a tenant in
 * one state (approvers and admins), or only one principal's (everyone else sees their own).
 *
 * The tenant is part of every statement and leads both indexes, so no page can hold another
 * tenant's row and a page reads limit + 1 index entries at any depth (row-value seek on
 * (created_at, approval_id), as the saga list). "pending" means pending and not yet expired: an
 * approval past its expiry can no longer be decided, so it is not waiting for anyone. */
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "durable/durable_internal.h"
#include "durable/list_cursor.h"
#include "missive/operations.h"
#include "store/db.h"

#define APPROVAL_PAGE(filter)                                                                      \
    "SELECT approval_id, capability, target, tenant_id, principal_id, state, decided_by, "         \
    "created_at, expires_at FROM approvals WHERE tenant_id = ? AND " filter "state = ? "           \
    "AND (state <> 'pending' OR expires_at > ?) AND (created_at, approval_id) < (?, ?) "           \
    "ORDER BY created_at DESC, approval_id DESC LIMIT ?"

static const char SQL_LIST_APPROVALS[] = APPROVAL_PAGE("");
static const char SQL_LIST_APPROVALS_OF_PRINCIPAL[] = APPROVAL_PAGE("principal_id = ? AND ");

const char *mv__approval_list_sql(bool by_principal) {
    return by_principal ? SQL_LIST_APPROVALS_OF_PRINCIPAL : SQL_LIST_APPROVALS;
}

static const char *const STATES[] = {"pending", "approved", "denied", "consumed", "expired"};

typedef struct {
    const mv_approval_list_query *q;
    const char *state;
    int64_t after_created;
    char after_id[129];
    json_t *rows;
} list_tx;

static void col(mv_stmt *st, int i, char *out, size_t size) {
    const char *s = mv_stmt_text(st, i);
    mv_strlcpy(out, s ? s : "", size);
}

static mv_code list_fn(mv_db *db, void *ctx, mv_err *err) {
    list_tx *t = ctx;
    const mv_approval_list_query *q = t->q;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, mv__approval_list_sql(q->principal_id != NULL), &st, err);
    if (rc) return rc;
    int i = 1;
    mv_stmt_bind_text(st, i++, q->tenant_id);
    if (q->principal_id) mv_stmt_bind_text(st, i++, q->principal_id);
    mv_stmt_bind_text(st, i++, t->state);
    mv_stmt_bind_int64(st, i++, q->now);
    mv_stmt_bind_int64(st, i++, t->after_created);
    mv_stmt_bind_text(st, i++, t->after_id);
    mv_stmt_bind_int64(st, i, q->limit + 1);
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        mv_approval_record rec;
        memset(&rec, 0, sizeof rec);
        col(st, 0, rec.approval_id, sizeof rec.approval_id);
        col(st, 1, rec.capability, sizeof rec.capability);
        col(st, 2, rec.target, sizeof rec.target);
        col(st, 3, rec.tenant_id, sizeof rec.tenant_id);
        col(st, 4, rec.principal_id, sizeof rec.principal_id);
        col(st, 5, rec.state, sizeof rec.state);
        col(st, 6, rec.decided_by, sizeof rec.decided_by);
        rec.created_at = mv_stmt_int64(st, 7);
        rec.expires_at = mv_stmt_int64(st, 8);
        json_array_append_new(t->rows, mv_approval_to_json(&rec));
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_approval_list(mv_store *store, const mv_approval_list_query *q, json_t **approvals,
                         char **next_cursor, mv_err *err) {
    *approvals = NULL;
    *next_cursor = NULL;
    const char *state = NULL;
    for (size_t i = 0; i < sizeof STATES / sizeof STATES[0]; i++)
        if (strcmp(q->state ? q->state : "pending", STATES[i]) == 0) state = STATES[i];
    if (!state)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "state must be pending, approved, denied, consumed or expired");
    if (!q->tenant_id || !*q->tenant_id)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "an approval list needs a tenant");
    if (q->limit < 1 || q->limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    list_tx t = {.q = q, .state = state, .rows = json_array()};
    if (!t.rows) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (!mv__keyset_cursor_decode(q->cursor, &t.after_created, t.after_id, sizeof t.after_id)) {
        json_decref(t.rows);
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    }
    mv_code rc = mv_store_read(store, list_fn, &t, err);
    if (rc == MV_OK) rc = mv__list_finish(t.rows, q->limit, "approvalId", next_cursor, err);
    if (rc != MV_OK) {
        json_decref(t.rows);
        return rc;
    }
    *approvals = t.rows;
    return MV_OK;
}
