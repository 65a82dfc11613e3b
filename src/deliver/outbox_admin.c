/* outbox_admin.c — a tenant's outbox deliveries for operators (GET /admin/outbox).
 *
 * The outbox has no tenant column: a row belongs to the tenant of the message it delivers
 * (payload "messageId" for an email, "body"."messageId" for a channel webhook). So the page is
 * mv_outbox_list's (`missive outbox list`), read a batch at a time, each row kept when its message
 * is the tenant's and its channel matches; at most MV_ADMIN_SCAN_ROWS rows are examined per page,
 * and a short page carries the cursor after the last row examined. Rows are shown without their
 * payload: addresses, bodies and webhook URLs are not an operator page's business. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "missive/deliver.h"
#include "missive/operations.h"
#include "store/db.h"

#define SCAN_BATCH 200

static const char SQL_MESSAGE_TENANT[] = "SELECT 1 FROM messages WHERE id = ? AND tenant_id = ?";

static const char *message_of(const json_t *row) {
    const json_t *p = json_object_get(row, "payload");
    const char *id = json_string_value(json_object_get(p, "messageId"));
    return id ? id : json_string_value(json_object_get(json_object_get(p, "body"), "messageId"));
}

static const char *channel_of(const json_t *row) {
    const char *kind = json_string_value(json_object_get(row, "kind"));
    if (kind && strcmp(kind, "email") == 0) return "email";
    const char *ch = json_string_value(json_object_get(json_object_get(row, "payload"), "channel"));
    return ch ? ch : "webhook";
}

static const char *recipient_of(const json_t *row) {
    const json_t *p = json_object_get(row, "payload");
    const char *to = json_string_value(json_object_get(p, "toUser"));
    if (!to) to = json_string_value(json_object_get(p, "contactOf"));
    return to;
}

typedef struct {
    const char *tenant;
    json_t *batch; /* rows of mv_outbox_list */
    bool *ours;    /* per row: its message is the tenant's */
} tenant_tx;

static mv_code tenant_fn(mv_db *db, void *ctx, mv_err *err) {
    tenant_tx *t = ctx;
    size_t i;
    json_t *row;
    json_array_foreach(t->batch, i, row) {
        const char *mid = message_of(row);
        t->ours[i] = false;
        if (!mid) continue;
        mv_stmt *st;
        mv_code rc = mv_db_row(db, SQL_MESSAGE_TENANT, &st, err, "ss", mid, t->tenant);
        if (rc) return rc;
        t->ours[i] = st != NULL;
        mv_stmt_done(st);
    }
    return MV_OK;
}

static json_t *public_row(const json_t *row) {
    return json_pack("{s:O,s:O,s:s,s:O,s:O,s:O,s:O,s:O,s:s?,s:s?,s:O?}", "id",
                     json_object_get(row, "id"), "kind", json_object_get(row, "kind"), "channel",
                     channel_of(row), "state", json_object_get(row, "state"), "attempts",
                     json_object_get(row, "attempts"), "nextAttemptAt",
                     json_object_get(row, "nextAttemptAt"), "createdAt",
                     json_object_get(row, "createdAt"), "updatedAt",
                     json_object_get(row, "updatedAt"), "messageId", message_of(row), "recipient",
                     recipient_of(row), "failureStage", json_object_get(row, "failureStage"));
}

mv_code mv_outbox_admin_list(mv_store *store, const mv_outbox_admin_query *q, json_t **rows,
                             char **next_cursor, mv_err *err) {
    *rows = NULL;
    *next_cursor = NULL;
    if (!q->tenant_id || !mv_valid_token(q->tenant_id, 255))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "tenant must be a printable token");
    if (q->channel && !mv_valid_token(q->channel, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "channel must be 1 to 128 printable characters without spaces");
    if (q->limit < 1 || q->limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    int64_t probe_t;
    char probe_id[129];
    if (!mv__keyset_cursor_decode(q->cursor, &probe_t, probe_id, sizeof probe_id))
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    mv_outbox_list_query lq = {.state = q->state,
                               .kind = !q->channel                        ? NULL
                                       : strcmp(q->channel, "email") == 0 ? "email"
                                                                          : "webhook",
                               .limit = SCAN_BATCH,
                               .cursor = q->cursor};
    json_t *out = json_array();
    bool *ours = calloc(SCAN_BATCH, sizeof *ours);
    char *cursor = q->cursor ? strdup(q->cursor) : NULL;
    mv_code rc = out && ours && (cursor || !q->cursor)
                     ? MV_OK
                     : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    int scanned = 0;
    bool more = true;
    char *resume = NULL; /* the cursor after the last row examined, when the scan stopped early */
    while (rc == MV_OK && more && (int)json_array_size(out) < q->limit &&
           scanned < MV_ADMIN_SCAN_ROWS) {
        json_t *batch = NULL;
        char *next = NULL;
        lq.cursor = cursor;
        if ((rc = mv_outbox_list(store, &lq, &batch, &next, err)) != MV_OK) break;
        tenant_tx t = {.tenant = q->tenant_id, .batch = batch, .ours = ours};
        rc = mv_store_read(store, tenant_fn, &t, err);
        size_t n = json_array_size(batch), i;
        for (i = 0; rc == MV_OK && i < n && (int)json_array_size(out) < q->limit &&
                    scanned < MV_ADMIN_SCAN_ROWS;
             i++, scanned++) {
            json_t *row = json_array_get(batch, i);
            if (!ours[i] || (q->channel && strcmp(channel_of(row), q->channel) != 0)) continue;
            json_t *pub = public_row(row);
            if (!pub || json_array_append_new(out, pub) != 0)
                rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        free(resume);
        resume = NULL;
        if (rc == MV_OK &&
            i < n) { /* stopped inside the batch: continue after the last row examined */
            json_t *last = json_array_get(batch, i - 1);
            resume =
                mv__keyset_cursor_encode(json_integer_value(json_object_get(last, "createdAt")),
                                         json_string_value(json_object_get(last, "id")));
            if (!resume) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
            more = true;
            free(next);
        } else {
            more = next != NULL;
            free(cursor);
            cursor = next;
        }
        json_decref(batch);
        if (resume) break;
    }
    if (rc == MV_OK && more) {
        if (resume) {
            *next_cursor = resume;
            resume = NULL;
        } else if (cursor && !(*next_cursor = strdup(cursor))) {
            rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
    }
    free(resume);
    free(cursor);
    free(ours);
    if (rc != MV_OK) {
        json_decref(out);
        free(*next_cursor);
        *next_cursor = NULL;
        return rc;
    }
    *rows = out;
    return MV_OK;
}
