/* timer_list.c — the operator's view of timers: a page in due order (`missive timers list`) and
 * counts by kind and state (the missive_timers gauge).
 *
 * The page is a keyset seek into timers_by_due (due_at, timer_id) with the cursor of the last
 * row; the filters (tenant, state, kind) are checked on the rows the seek walks, bound as NULL
 * when absent so one statement serves every combination. A tenant's page never holds another
 * tenant's timer. */
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "durable/timer.h"
#include "store/db.h"

static const char SQL_LIST[] =
    "SELECT timer_id, tenant_id, kind, ref, due_at, state, claims, created_at, fired_at "
    "FROM timers WHERE (due_at, timer_id) > (?, ?) AND (CAST(? AS TEXT) IS NULL OR tenant_id = ?) "
    "AND (CAST(? AS TEXT) IS NULL OR state = ?) AND (CAST(? AS TEXT) IS NULL OR kind = ?) "
    "AND claims >= ? "
    "ORDER BY due_at, timer_id LIMIT ?";
static const char SQL_COUNT[] =
    "SELECT kind, state, COUNT(*) FROM timers GROUP BY kind, state ORDER BY kind, state";

static const char *const states[] = {"pending", "fired", "cancelled", "failed"};
static const char *const kinds[] = {"expiry", "reminder", "escalation", "snooze", "send", "saga"};

static bool one_of(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

typedef struct {
    const mv_timers_filter *f;
    int limit;
    int64_t after_due;
    char after_id[129];
    json_t *rows;
} list_tx;

static json_t *row_json(mv_stmt *st) {
    return json_pack(
        "{s:s,s:s,s:s,s:s,s:I,s:s,s:I,s:I,s:o}", "id", mv_stmt_text(st, 0), "tenantId",
        mv_stmt_text(st, 1), "kind", mv_stmt_text(st, 2), "ref", mv_stmt_text(st, 3), "dueAt",
        (json_int_t)mv_stmt_int64(st, 4), "state", mv_stmt_text(st, 5), "claims",
        (json_int_t)mv_stmt_int64(st, 6), "createdAt", (json_int_t)mv_stmt_int64(st, 7), "firedAt",
        mv_stmt_is_null(st, 8) ? json_null() : json_integer((json_int_t)mv_stmt_int64(st, 8)));
}

static mv_code list_fn(mv_db *db, void *ctx, mv_err *err) {
    list_tx *t = ctx;
    const mv_timers_filter *f = t->f;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_LIST, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "isssssssii", t->after_due, t->after_id, f->tenant_id, f->tenant_id, f->state,
                  f->state, f->kind, f->kind, (int64_t)f->min_claims, (int64_t)t->limit + 1);
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        json_t *row = row_json(st);
        if (!row || json_array_append_new(t->rows, row) != 0) {
            mv_stmt_done(st);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

static mv_code check_filter(const mv_timers_filter *f, mv_err *err) {
    if (f->limit < 0 || f->limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    if (f->state && !one_of(f->state, states, sizeof states / sizeof *states))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "state must be pending, fired, cancelled or failed");
    if (f->kind && !one_of(f->kind, kinds, sizeof kinds / sizeof *kinds))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "kind must be expiry, reminder, escalation, snooze, send or saga");
    if (f->min_claims < 0) return mv_err_set(err, MV_INVALID_ARGUMENT, "min claims must be >= 0");
    if (f->tenant_id && !mv_valid_token(f->tenant_id, 255))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "tenant must be a printable token");
    return MV_OK;
}

/* Cuts the page to limit; the cursor names its last row when more followed. */
static mv_code finish(json_t *rows, int limit, json_t **out, mv_err *err) {
    char *cursor = NULL;
    if (json_array_size(rows) > (size_t)limit) {
        while (json_array_size(rows) > (size_t)limit)
            json_array_remove(rows, json_array_size(rows) - 1);
        json_t *last = json_array_get(rows, json_array_size(rows) - 1);
        cursor = mv__keyset_cursor_encode(json_integer_value(json_object_get(last, "dueAt")),
                                          json_string_value(json_object_get(last, "id")));
        if (!cursor) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    *out = json_pack("{s:O,s:s?}", "timers", rows, "nextCursor", cursor);
    free(cursor);
    return *out ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

mv_code mv_timers_list(mv_store *store, const mv_timers_filter *filter, json_t **out, mv_err *err) {
    *out = NULL;
    mv_timers_filter none = {0};
    if (!filter) filter = &none;
    mv_code rc = check_filter(filter, err);
    if (rc != MV_OK) return rc;
    list_tx t = {.f = filter, .limit = filter->limit ? filter->limit : 100, .after_due = -1};
    if (filter->cursor &&
        !mv__keyset_cursor_decode(filter->cursor, &t.after_due, t.after_id, sizeof t.after_id))
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    if (!(t.rows = json_array())) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    rc = mv_store_read(store, list_fn, &t, err);
    if (rc == MV_OK) rc = finish(t.rows, t.limit, out, err);
    json_decref(t.rows);
    return rc;
}

static mv_code count_fn(mv_db *db, void *ctx, mv_err *err) {
    json_t *rows = ctx;
    json_array_clear(rows);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_COUNT, &st, err);
    if (rc) return rc;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1)
        json_array_append_new(rows, json_pack("{s:s,s:s,s:I}", "kind", mv_stmt_text(st, 0), "state",
                                              mv_stmt_text(st, 1), "count",
                                              (json_int_t)mv_stmt_int64(st, 2)));
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_timers_count(mv_store *store, json_t **out, mv_err *err) {
    *out = json_array();
    if (!*out) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv_store_read(store, count_fn, *out, err);
    if (rc != MV_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}
