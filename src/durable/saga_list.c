/* saga_list.c — the operator's view of sagas: one page at a time (GET /sagas) and counts by state
 * (metrics).
 *
 * Each filter combination (none, state, definition, both) has its own statement and its own
 * index, ordered as the page (created_at DESC, saga_id DESC), and the cursor is a row-value seek
 * into it: a page reads limit + 1 index entries whatever the depth. SAGA_PAGE is the one place
 * that scopes every list to a tenant (the first column of every list index). */
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "durable/durable_internal.h"
#include "durable/list_cursor.h"
#include "missive/operations.h"
#include "store/db.h"

#define SAGA_PAGE(filter)                                                                          \
    "SELECT saga_id, definition, state, created_at, updated_at, wake_at FROM sagas WHERE "         \
    "tenant_id = ? "                                                                               \
    "AND " filter "(created_at, saga_id) < (?, ?) ORDER BY created_at DESC, saga_id DESC LIMIT ?"

static const char SQL_LIST_SAGAS[] = SAGA_PAGE("");
static const char SQL_LIST_SAGAS_BY_STATE[] = SAGA_PAGE("state = ? AND ");
static const char SQL_LIST_SAGAS_BY_DEFINITION[] = SAGA_PAGE("definition = ? AND ");
static const char SQL_LIST_SAGAS_BY_DEFINITION_STATE[] =
    SAGA_PAGE("definition = ? AND state = ? AND ");
static const char SQL_COUNT_SAGAS[] = "SELECT COUNT(*) FROM sagas WHERE state = ?";

const char *const mv_saga_state_names[MV_SAGA_STATE_COUNT] = {
    "running", "compensating", "completed", "compensated", "manual-review", "waiting"};

/* The statement for a query (exposed for the plan tests). */
const char *mv__saga_list_sql(bool by_state, bool by_definition) {
    if (by_state && by_definition) return SQL_LIST_SAGAS_BY_DEFINITION_STATE;
    if (by_definition) return SQL_LIST_SAGAS_BY_DEFINITION;
    return by_state ? SQL_LIST_SAGAS_BY_STATE : SQL_LIST_SAGAS;
}

static bool known_state(const char *s) {
    for (int i = 0; i < MV_SAGA_STATE_COUNT; i++)
        if (strcmp(s, mv_saga_state_names[i]) == 0) return true;
    return false;
}

typedef struct {
    const mv_saga_list_query *q;
    int64_t after_created;
    char after_id[129];
    json_t *rows;
} list_tx;

static mv_code list_fn(mv_db *db, void *ctx, mv_err *err) {
    list_tx *t = ctx;
    const mv_saga_list_query *q = t->q;
    mv_stmt *st;
    mv_code rc =
        mv_db_prepare(db, mv__saga_list_sql(q->state != NULL, q->definition != NULL), &st, err);
    if (rc) return rc;
    int i = 1;
    mv_stmt_bind_text(st, i++, q->tenant_id);
    if (q->definition) mv_stmt_bind_text(st, i++, q->definition);
    if (q->state) mv_stmt_bind_text(st, i++, q->state);
    mv_stmt_bind_int64(st, i++, t->after_created);
    mv_stmt_bind_text(st, i++, t->after_id);
    mv_stmt_bind_int64(st, i, q->limit + 1); /* one more tells whether a next page exists */
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        json_t *row = json_pack("{s:s,s:s,s:s,s:I,s:I}", "sagaId", mv_stmt_text(st, 0),
                                "definition", mv_stmt_text(st, 1), "state", mv_stmt_text(st, 2),
                                "createdAt", (json_int_t)mv_stmt_int64(st, 3), "updatedAt",
                                (json_int_t)mv_stmt_int64(st, 4));
        /* a waiting saga's wakeAt, as GET /sagas/{id} shows it */
        if (row && !mv_stmt_is_null(st, 5) && mv_stmt_text(st, 2) &&
            strcmp(mv_stmt_text(st, 2), "waiting") == 0)
            json_object_set_new(row, "wakeAt", json_integer(mv_stmt_int64(st, 5)));
        json_array_append_new(t->rows, row);
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_saga_list(mv_store *store, const mv_saga_list_query *q, json_t **sagas,
                     char **next_cursor, mv_err *err) {
    *sagas = NULL;
    *next_cursor = NULL;
    if (!q->tenant_id || !*q->tenant_id)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "a saga list needs a tenant");
    if (q->state && !known_state(q->state))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "state must be running, waiting, compensating, completed, compensated "
                          "or manual-review");
    if (q->definition && !mv_valid_token(q->definition, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "definition must be a printable token of at most 128 characters");
    if (q->limit < 1 || q->limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    list_tx t = {.q = q, .rows = json_array()};
    if (!t.rows) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (!mv__keyset_cursor_decode(q->cursor, &t.after_created, t.after_id, sizeof t.after_id)) {
        json_decref(t.rows);
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    }
    mv_code rc = mv_store_read(store, list_fn, &t, err);
    if (rc == MV_OK) rc = mv__list_finish(t.rows, q->limit, "sagaId", next_cursor, err);
    if (rc != MV_OK) {
        json_decref(t.rows);
        return rc;
    }
    *sagas = t.rows;
    return MV_OK;
}

static mv_code counts_fn(mv_db *db, void *ctx, mv_err *err) {
    int64_t *counts = ctx;
    for (int i = 0; i < MV_SAGA_STATE_COUNT; i++) {
        mv_stmt *st;
        mv_code rc = mv_db_row(db, SQL_COUNT_SAGAS, &st, err, "s", mv_saga_state_names[i]);
        if (rc) return rc;
        counts[i] = st ? mv_stmt_int64(st, 0) : 0;
        mv_stmt_done(st);
    }
    return MV_OK;
}

mv_code mv_saga_counts(mv_store *store, int64_t counts[MV_SAGA_STATE_COUNT], mv_err *err) {
    memset(counts, 0, sizeof(int64_t) * MV_SAGA_STATE_COUNT);
    return mv_store_read(store, counts_fn, counts, err);
}
