/* admin.c — the operator's read side of messages: every message of a tenant page by page
 * (GET /admin/messages) and one message's timeline (GET /admin/messages/{id}/timeline).
 *
 * The list seeks (created_at, id) below the cursor within the tenant, one statement for every
 * filter combination (an absent filter binds NULL). A text search cannot be answered by an index
 * (the title lives in the stored content), so it is applied to the rows the seek returns, a batch
 * at a time, and at most MV_ADMIN_SCAN_ROWS rows are examined per page: a page may come back
 * short with a cursor that continues after the last row examined, so a request costs the same
 * whatever the table holds.
 *
 * The timeline is assembled from what the store keeps: the message row (creation, the current
 * action attempt, cancellation, archiving), its change-log rows (what retention kept; the log is
 * read from the message's creation time onwards by its time index) and the approval its action
 * waits for, if any. Entries are sorted by time, ties in the order they were found. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/keyset_cursor.h"
#include "base/timeline.h"
#include "missive/operations.h"
#include "store/db.h"

#define SCAN_BATCH 200
#define TIMELINE_CHANGES 500 /* the most change-log rows one timeline shows */

static const char SQL_ADMIN_PAGE[] =
    "SELECT id, template_cd, type, from_user, to_user, to_roles, action_state, action_cd, "
    "receiver_content, created_at, updated_at FROM messages WHERE tenant_id = ? "
    "AND (created_at, id) < (?, ?) "
    "AND (CAST(? AS TEXT) IS NULL OR action_state = ?) "
    "AND (CAST(? AS TEXT) IS NULL OR template_cd = ?) "
    "AND (CAST(? AS TEXT) IS NULL OR from_user = ?) "
    "AND (CAST(? AS TEXT) IS NULL OR to_user = ?) "
    "ORDER BY created_at DESC, id DESC LIMIT ?";

static const char SQL_TIMELINE_MESSAGE[] =
    "SELECT template_cd, action_state, from_user, action_cd, action_attempt_id, "
    "action_claimed_by, action_claimed_at, action_failure_message, action_approval_id, "
    "archived_by, archived_at, created_at, updated_at, action_failure_code, action_failed_at "
    "FROM messages WHERE id = ? AND tenant_id = ?";
static const char SQL_TIMELINE_CHANGES[] =
    "SELECT kind, viewer_id, created_at FROM stream_events WHERE created_at >= ? "
    "AND message_id = ? AND tenant_id = ? ORDER BY created_at, id LIMIT ?";
static const char SQL_TIMELINE_APPROVAL[] =
    "SELECT state, decided_by, created_at, updated_at FROM approvals "
    "WHERE approval_id = ? AND tenant_id = ?";

static const char *const STATES[] = {"scheduled", "active",   "processing",
                                     "retryable", "archived", "cancelled"};

static bool known_state(const char *s) {
    for (size_t i = 0; i < sizeof STATES / sizeof *STATES; i++)
        if (strcmp(s, STATES[i]) == 0) return true;
    return false;
}

static mv_code check_query(const mv_message_admin_query *q, mv_err *err) {
    if (!q->tenant_id || !mv_valid_token(q->tenant_id, 255))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "tenant must be a printable token");
    if (q->state && !known_state(q->state))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "state must be scheduled, active, processing, retryable, archived or "
                          "cancelled");
    if (q->template_cd && !mv_valid_template_cd(q->template_cd))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "templateCd is not a valid template code");
    if (q->sender && !mv_valid_token(q->sender, 255))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "sender must be 1 to 255 printable characters without spaces");
    if (q->recipient && !mv_valid_token(q->recipient, 255))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "recipient must be 1 to 255 printable characters without spaces");
    if (q->text && (!*q->text || strlen(q->text) > 100))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "q must be 1 to 100 bytes");
    if (q->limit < 1 || q->limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    return MV_OK;
}

typedef struct {
    const mv_message_admin_query *q;
    int64_t after_created;
    char after_id[129];
    int batch;
    json_t *rows; /* the batch, every row the seek returned */
} page_tx;

static json_t *row_json(mv_stmt *st) {
    const char *roles_text = mv_stmt_text(st, 5), *content_text = mv_stmt_text(st, 8);
    json_t *roles = roles_text ? json_loads(roles_text, 0, NULL) : NULL;
    json_t *content = content_text ? json_loads(content_text, 0, NULL) : NULL;
    const char *title = json_string_value(json_object_get(content, "title"));
    json_t *row = json_pack(
        "{s:s,s:s,s:s,s:s?,s:s?,s:o,s:s,s:s?,s:s,s:I,s:I}", "id", mv_stmt_text(st, 0), "templateCd",
        mv_stmt_text(st, 1), "type", mv_stmt_text(st, 2), "fromUser", mv_stmt_text(st, 3), "toUser",
        mv_stmt_text(st, 4), "toRoles", json_is_array(roles) ? json_incref(roles) : json_array(),
        "actionState", mv_stmt_text(st, 6), "actionCd", mv_stmt_text(st, 7), "title",
        title ? title : "", "createdAt", (json_int_t)mv_stmt_int64(st, 9), "updatedAt",
        (json_int_t)mv_stmt_int64(st, 10));
    json_decref(roles);
    json_decref(content);
    return row;
}

static mv_code page_fn(mv_db *db, void *ctx, mv_err *err) {
    page_tx *t = ctx;
    const mv_message_admin_query *q = t->q;
    mv_stmt *st;
    json_array_clear(t->rows);
    mv_code rc = mv_db_prepare(db, SQL_ADMIN_PAGE, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "sisssssssssi", q->tenant_id, t->after_created, t->after_id, q->state,
                  q->state, q->template_cd, q->template_cd, q->sender, q->sender, q->recipient,
                  q->recipient, (int64_t)t->batch);
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

mv_code mv_message_admin_list(mv_store *store, const mv_message_admin_query *q, json_t **messages,
                              char **next_cursor, mv_err *err) {
    *messages = NULL;
    *next_cursor = NULL;
    mv_code rc = check_query(q, err);
    if (rc != MV_OK) return rc;
    page_tx t = {.q = q, .batch = q->text ? SCAN_BATCH : q->limit + 1};
    if (!mv__keyset_cursor_decode(q->cursor, &t.after_created, t.after_id, sizeof t.after_id))
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    json_t *out = json_array();
    if (!out || !(t.rows = json_array())) {
        json_decref(out);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    int scanned = 0;
    bool more = true; /* rows may follow the last one examined */
    int64_t last_created = 0;
    const char *last_id = NULL;
    char last_buf[129] = "";
    while (rc == MV_OK && more && (int)json_array_size(out) < q->limit + (q->text ? 0 : 1) &&
           scanned < MV_ADMIN_SCAN_ROWS) {
        if ((rc = mv_store_read(store, page_fn, &t, err)) != MV_OK) break;
        size_t n = json_array_size(t.rows), i;
        more = n == (size_t)t.batch;
        for (i = 0; i < n && (int)json_array_size(out) < q->limit + (q->text ? 0 : 1) &&
                    scanned < MV_ADMIN_SCAN_ROWS;
             i++, scanned++) {
            json_t *row = json_array_get(t.rows, i);
            last_created = json_integer_value(json_object_get(row, "createdAt"));
            snprintf(last_buf, sizeof last_buf, "%s",
                     json_string_value(json_object_get(row, "id")));
            last_id = last_buf;
            if (q->text && !strcasestr(json_string_value(json_object_get(row, "title")), q->text))
                continue;
            json_array_append(out, row);
        }
        if (i < n) more = true;
        t.after_created = last_created;
        snprintf(t.after_id, sizeof t.after_id, "%s", last_buf);
    }
    json_decref(t.rows);
    if (rc == MV_OK && !q->text) {
        /* the plain page read one row more than it shows: that row says a next page exists */
        rc = mv__list_finish(out, q->limit, "id", next_cursor, err);
    } else if (rc == MV_OK && more && last_id) {
        *next_cursor = mv__keyset_cursor_encode(last_created, last_id);
        if (!*next_cursor) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (rc != MV_OK) {
        json_decref(out);
        free(*next_cursor);
        *next_cursor = NULL;
        return rc;
    }
    *messages = out;
    return MV_OK;
}

/* ---- timeline ------------------------------------------------------------------------------- */

typedef struct {
    const char *tenant, *id;
    json_t *head;    /* templateCd, actionState */
    json_t *entries; /* unsorted */
    bool found;
} timeline_tx;

static const char *outcome_of(const char *state) {
    if (strcmp(state, "processing") == 0) return "inProgress";
    if (strcmp(state, "retryable") == 0) return "failed";
    if (strcmp(state, "archived") == 0) return "succeeded";
    return state;
}

static mv_code timeline_fn(mv_db *db, void *ctx, mv_err *err) {
    timeline_tx *t = ctx;
    json_array_clear(t->entries);
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_TIMELINE_MESSAGE, &st, err, "ss", t->id, t->tenant);
    if (rc) return rc;
    if (!st) return MV_OK;
    t->found = true;
    const char *state = mv_stmt_text(st, 1), *action = mv_stmt_text(st, 3),
               *attempt = mv_stmt_text(st, 4);
    int64_t created = mv_stmt_int64(st, 11), updated = mv_stmt_int64(st, 12);
    char approval[129] = "";
    snprintf(approval, sizeof approval, "%s", mv_stmt_text(st, 8) ? mv_stmt_text(st, 8) : "");
    json_decref(t->head);
    t->head = json_pack("{s:s,s:s}", "templateCd", mv_stmt_text(st, 0), "actionState", state);
    mv__timeline_add(t->entries, created, "created", mv_stmt_text(st, 2), NULL, NULL, NULL, NULL);
    if (attempt && !mv_stmt_is_null(st, 6))
        mv__timeline_add(t->entries, mv_stmt_int64(st, 6), "actionStarted", mv_stmt_text(st, 5),
                         attempt, action, NULL, NULL);
    /* the last failure, whether the message is still retryable or a later attempt succeeded */
    if (!mv_stmt_is_null(st, 14) || (attempt && strcmp(state, "retryable") == 0))
        mv__timeline_add(t->entries, mv_stmt_is_null(st, 14) ? updated : mv_stmt_int64(st, 14),
                         "actionFailed", NULL, NULL, action,
                         mv_stmt_text(st, 13) ? mv_stmt_text(st, 13) : "failed",
                         mv_stmt_text(st, 7));
    if (attempt && strcmp(state, "archived") == 0 && action)
        mv__timeline_add(t->entries, mv_stmt_is_null(st, 10) ? updated : mv_stmt_int64(st, 10),
                         "actionSucceeded", mv_stmt_text(st, 5), attempt, action, outcome_of(state),
                         NULL);
    if (strcmp(state, "cancelled") == 0)
        mv__timeline_add(t->entries, updated, "cancelled", NULL, NULL, NULL, state, NULL);
    if (!mv_stmt_is_null(st, 10))
        mv__timeline_add(t->entries, mv_stmt_int64(st, 10), "archived", mv_stmt_text(st, 9), NULL,
                         NULL, NULL, NULL);
    mv_stmt_done(st);
    if ((rc = mv_db_prepare(db, SQL_TIMELINE_CHANGES, &st, err))) return rc;
    mv_stmt_bindf(st, "issi", created, t->id, t->tenant, (int64_t)TIMELINE_CHANGES);
    int r;
    bool first_created = true;
    while ((r = mv_stmt_step(st, err)) == 1) {
        const char *kind = mv_stmt_text(st, 0);
        int64_t at = mv_stmt_int64(st, 2);
        if (strcmp(kind, "created") == 0) {
            /* the first is the creation itself; a later one is a scheduled or escalated
             * message reaching its recipients */
            if (!first_created)
                mv__timeline_add(t->entries, at, "delivered", NULL, NULL, NULL, NULL, NULL);
            first_created = false;
        } else if (strcmp(kind, "updated") == 0) {
            mv__timeline_add(t->entries, at, "updated", NULL, NULL, NULL, NULL, NULL);
        } else {
            mv__timeline_add(t->entries, at, strcmp(kind, "viewer") == 0 ? "viewer" : "reminded",
                             mv_stmt_text(st, 1), NULL, NULL, NULL, NULL);
        }
    }
    mv_stmt_done(st);
    if (r < 0) return err ? err->code : MV_INTERNAL;
    if (!approval[0]) return MV_OK;
    if ((rc = mv_db_row(db, SQL_TIMELINE_APPROVAL, &st, err, "ss", approval, t->tenant))) return rc;
    if (!st) return MV_OK;
    const char *astate = mv_stmt_text(st, 0);
    mv__timeline_add(t->entries, mv_stmt_int64(st, 2), "approvalRequested", NULL, NULL, action,
                     "pending", NULL);
    if (strcmp(astate, "pending") != 0)
        mv__timeline_add(t->entries, mv_stmt_int64(st, 3), "approvalDecided", mv_stmt_text(st, 1),
                         NULL, action, astate, NULL);
    mv_stmt_done(st);
    return MV_OK;
}

mv_code mv_message_timeline(mv_store *store, const char *tenant_id, const char *message_id,
                            json_t **out, mv_err *err) {
    *out = NULL;
    if (!tenant_id || !message_id || !mv_valid_message_id(message_id))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "message id must be 24 hex characters");
    timeline_tx t = {.tenant = tenant_id, .id = message_id, .entries = json_array()};
    if (!t.entries) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv_store_read(store, timeline_fn, &t, err);
    if (rc == MV_OK && !t.found)
        rc = mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message %s not found", message_id);
    json_t *sorted = rc == MV_OK ? mv__timeline_sorted(t.entries) : NULL;
    if (rc == MV_OK && !sorted) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) {
        json_object_set_new(t.head, "messageId", json_string(message_id));
        json_object_set_new(t.head, "entries", sorted);
        *out = t.head;
        t.head = NULL;
    }
    json_decref(t.head);
    json_decref(t.entries);
    return rc;
}
