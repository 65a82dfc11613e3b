/* outbox_list.c — the operator's page of outbox rows (`missive outbox list`), newest first.
 *
 * Pages are cut by (created_at, id) with the keyset cursor every list uses, so a row queued while
 * an operator pages never appears twice and never opens a gap. Each filter combination has its
 * own statement. The outbox has no tenant (its rows are the daemon's deliveries), so the list is
 * the store's whole outbox; it is an operator's tool, not a route. No index orders the outbox by
 * creation (the worker's index is by state and due time), so a page sorts the rows that match:
 * cheap for the usual filters (pending, failed), a scan of every sent row without one. */
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "missive/deliver.h"
#include "store/db.h"

#define OUTBOX_PAGE(filter)                                                                        \
    "SELECT id, kind, payload, state, attempts, next_attempt_at, created_at, updated_at, "         \
    "last_error, failure_stage FROM outbox WHERE " filter "(created_at, id) < (?, ?) "             \
    "ORDER BY created_at DESC, id DESC LIMIT ?"

static const char SQL_LIST_OUTBOX[] = OUTBOX_PAGE("");
static const char SQL_LIST_OUTBOX_BY_STATE[] = OUTBOX_PAGE("state = ? AND ");
static const char SQL_LIST_OUTBOX_BY_KIND[] = OUTBOX_PAGE("kind = ? AND ");
static const char SQL_LIST_OUTBOX_BY_KIND_STATE[] = OUTBOX_PAGE("kind = ? AND state = ? AND ");

static const char *list_sql(bool by_state, bool by_kind) {
    if (by_state && by_kind) return SQL_LIST_OUTBOX_BY_KIND_STATE;
    if (by_kind) return SQL_LIST_OUTBOX_BY_KIND;
    return by_state ? SQL_LIST_OUTBOX_BY_STATE : SQL_LIST_OUTBOX;
}

static bool one_of(const char *s, const char *const *names) {
    for (size_t i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0) return true;
    return false;
}

typedef struct {
    const mv_outbox_list_query *q;
    int64_t after_created;
    char after_id[129];
    json_t *rows;
} list_tx;

static json_t *row_json(mv_stmt *st) {
    const char *payload = mv_stmt_text(st, 2);
    json_t *p = payload ? json_loads(payload, JSON_DECODE_ANY, NULL) : NULL;
    return json_pack("{s:s,s:s,s:s,s:i,s:I,s:I,s:I,s:s?,s:s?,s:o}", "id", mv_stmt_text(st, 0),
                     "kind", mv_stmt_text(st, 1), "state", mv_stmt_text(st, 3), "attempts",
                     (int)mv_stmt_int64(st, 4), "nextAttemptAt", (json_int_t)mv_stmt_int64(st, 5),
                     "createdAt", (json_int_t)mv_stmt_int64(st, 6), "updatedAt",
                     (json_int_t)mv_stmt_int64(st, 7), "lastError", mv_stmt_text(st, 8),
                     "failureStage", mv_stmt_text(st, 9), "payload", p ? p : json_null());
}

static mv_code list_fn(mv_db *db, void *ctx, mv_err *err) {
    list_tx *t = ctx;
    const mv_outbox_list_query *q = t->q;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, list_sql(q->state != NULL, q->kind != NULL), &st, err);
    if (rc) return rc;
    int i = 1;
    if (q->kind) mv_stmt_bind_text(st, i++, q->kind);
    if (q->state) mv_stmt_bind_text(st, i++, q->state);
    mv_stmt_bind_int64(st, i++, t->after_created);
    mv_stmt_bind_text(st, i++, t->after_id);
    mv_stmt_bind_int64(st, i, q->limit + 1); /* one more tells whether a next page exists */
    int r;
    while ((r = mv_stmt_step(st, err)) == 1)
        json_array_append_new(t->rows, row_json(st));
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

static mv_code check_query(const mv_outbox_list_query *q, mv_err *err) {
    static const char *const STATES[] = {"pending", "delivering", "sent",
                                         "skipped", "failed",     NULL};
    static const char *const KINDS[] = {"email", "webhook", NULL};
    if (q->state && !one_of(q->state, STATES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "state must be pending, delivering, sent, skipped or failed");
    if (q->kind && !one_of(q->kind, KINDS))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "kind must be email or webhook");
    if (q->limit < 1 || q->limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    return MV_OK;
}

mv_code mv_outbox_list(mv_store *store, const mv_outbox_list_query *q, json_t **rows,
                       char **next_cursor, mv_err *err) {
    *rows = NULL;
    *next_cursor = NULL;
    mv_code rc = check_query(q, err);
    if (rc != MV_OK) return rc;
    list_tx t = {.q = q, .rows = json_array()};
    if (!t.rows) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (!mv__keyset_cursor_decode(q->cursor, &t.after_created, t.after_id, sizeof t.after_id)) {
        json_decref(t.rows);
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    }
    rc = mv_store_read(store, list_fn, &t, err);
    if (rc == MV_OK && json_array_size(t.rows) > (size_t)q->limit) {
        json_array_remove(t.rows, (size_t)q->limit); /* the look-ahead row */
        json_t *last = json_array_get(t.rows, (size_t)q->limit - 1);
        *next_cursor = mv__keyset_cursor_encode(
            json_integer_value(json_object_get(last, "createdAt")), mv_json_str(last, "id"));
        if (!*next_cursor) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (rc != MV_OK) {
        json_decref(t.rows);
        return rc;
    }
    *rows = t.rows;
    return MV_OK;
}
