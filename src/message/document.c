/* document.c — the one place that knows how a message row maps to the message JSON of the API
 * (docs/http-api.md, "Messages"). Structured fields (roles, contents, payload…) are stored as JSON
 * text; times are integer milliseconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "deliver/outbox_text.h"
#include "message/inbox_internal.h"

static json_t *json_or(const char *text, json_t *fallback) {
    if (!text) return fallback;
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!v) return fallback;
    json_decref(fallback);
    return v;
}

static json_t *text_or_null(mv_stmt *st, int col) {
    const char *s = mv_stmt_text(st, col);
    return s ? json_string(s) : json_null();
}

static json_t *int_or_null(mv_stmt *st, int col) {
    return mv_stmt_is_null(st, col) ? json_null() : json_integer(mv_stmt_int64(st, col));
}

json_t *mv__doc_from_row(mv_stmt *st) {
    json_t *d = json_object();
    json_object_set_new(d, "id", text_or_null(st, 0));
    json_object_set_new(d, "type", text_or_null(st, 1));
    json_object_set_new(d, "templateCd", text_or_null(st, 2));
    json_object_set_new(d, "fromUser", text_or_null(st, 3));
    json_object_set_new(d, "toUser", text_or_null(st, 4));
    json_object_set_new(d, "toRoles", json_or(mv_stmt_text(st, 5), json_array()));
    json_object_set_new(d, "senderContent", json_or(mv_stmt_text(st, 6), json_object()));
    json_object_set_new(d, "receiverContent", json_or(mv_stmt_text(st, 7), json_object()));
    json_object_set_new(d, "documents", json_or(mv_stmt_text(st, 8), json_array()));
    json_object_set_new(d, "paymentSession", text_or_null(st, 9));
    json_object_set_new(d, "paymentCd", text_or_null(st, 10));
    json_object_set_new(d, "payload", json_or(mv_stmt_text(st, 11), json_object()));
    json_object_set_new(d, "display", json_or(mv_stmt_text(st, 12), json_object()));
    json_object_set_new(d, "clientRequestId", text_or_null(st, 13));
    /* 14 client_request_owner_id, 15 item index: internal */
    json_object_set_new(d, "actionState", text_or_null(st, 16));
    json_object_set_new(d, "actionCd", text_or_null(st, 17));
    json_object_set_new(d, "actionAttemptId", text_or_null(st, 18));
    /* 19 claimed_by, 20 claimed_at, 21 lease, 22 failure message, 23 approval id: internal */
    json_object_set_new(d, "archivedBy", text_or_null(st, 24));
    json_object_set_new(d, "archivedAt", int_or_null(st, 25));
    json_object_set_new(d, "createdAt", int_or_null(st, 26));
    json_object_set_new(d, "updatedAt", int_or_null(st, 27));
    json_object_set_new(d, "expiresAt", int_or_null(st, 30));
    json_object_set_new(d, "escalatedAt", int_or_null(st, 31));
    json_object_set_new(d, "sendAt", int_or_null(st, 32));
    /* lastFailure: what the handler said, only while the attempt is retryable */
    const char *state = mv_stmt_text(st, 16);
    if (state && strcmp(state, "retryable") == 0 && !mv_stmt_is_null(st, 22)) {
        const char *code = mv_stmt_text(st, 28);
        json_object_set_new(d, "lastFailure",
                            json_pack("{s:s,s:s,s:o,s:o}", "code", code ? code : "handler_failed",
                                      "message", mv_stmt_text(st, 22), "at", int_or_null(st, 29),
                                      "actionAttemptId", text_or_null(st, 18)));
    } else {
        json_object_set_new(d, "lastFailure", json_null());
    }
    json_object_set_new(d, "viewer",
                        json_pack("{s:n,s:n,s:n,s:n,s:n}", "seenAt", "readAt", "dismissedAt",
                                  "snoozedUntil", "remindedAt"));
    return d;
}

/* ---- the same document written from the row -----------------------------------------------
 * mv__doc_write_row appends the bytes mv_json_write(mv__doc_from_row(st) + viewer) would, without
 * building the document: text columns through the writer's escaper, JSON columns copied as stored
 * (mv_json_write_stored) — a list or a read costs no parse and no allocation per field. What
 * mv__doc_from_row drops (a text that is not UTF-8, which json_string refuses, leaves its key out)
 * is dropped here too; tests/message/doc_text_test compares the two on awkward rows. */

typedef struct {
    mv_strbuf *b;
    bool first;
} doc_out;

/* ,"key": — one append (keys are ASCII literals); returns where the field started, to take it
 * back */
static size_t put_key_n(doc_out *o, const char *key, size_t n) {
    size_t mark = o->b->len;
    char buf[40];
    buf[0] = ',';
    buf[1] = '"';
    memcpy(buf + 2, key, n);
    buf[n + 2] = '"';
    buf[n + 3] = ':';
    mv_strbuf_add(o->b, buf + o->first, n + 4 - o->first);
    return mark;
}
#define put_key(o, key) put_key_n((o), (key), sizeof(key) - 1)

static void field_done(doc_out *o, size_t mark, bool ok) {
    if (ok || o->b->oom) {
        o->first = false;
        return;
    }
    o->b->len = mark; /* json_object_set_new of NULL: the key is left out */
    if (o->b->data && !o->b->count_only) o->b->data[mark] = '\0';
}

static bool write_text_or_null(mv_strbuf *b, const char *s) {
    return s ? mv_json_write_string(b, s, strlen(s)) : mv_strbuf_add(b, "null", 4);
}

static bool write_int_or_null(mv_strbuf *b, mv_stmt *st, int col) {
    if (!st || mv_stmt_is_null(st, col)) return mv_strbuf_add(b, "null", 4);
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", (long long)mv_stmt_int64(st, col));
    return mv_strbuf_add(b, num, (size_t)n);
}

static void put_text_n(doc_out *o, const char *key, size_t n, mv_stmt *st, int col) {
    size_t mark = put_key_n(o, key, n);
    field_done(o, mark, write_text_or_null(o->b, mv_stmt_text(st, col)));
}

static void put_int_n(doc_out *o, const char *key, size_t n, mv_stmt *st, int col) {
    size_t mark = put_key_n(o, key, n);
    field_done(o, mark, write_int_or_null(o->b, st, col));
}

static void put_stored_n(doc_out *o, const char *key, size_t n, mv_stmt *st, int col,
                         const char *fallback) {
    size_t mark = put_key_n(o, key, n);
    field_done(o, mark, mv_json_write_stored(o->b, mv_stmt_text(st, col), fallback));
}
#define put_text(o, key, st, col) put_text_n((o), (key), sizeof(key) - 1, (st), (col))
#define put_int(o, key, st, col) put_int_n((o), (key), sizeof(key) - 1, (st), (col))
#define put_stored(o, key, st, col, fb) put_stored_n((o), (key), sizeof(key) - 1, (st), (col), (fb))

bool mv__doc_write_row(mv_strbuf *b, mv_stmt *st, mv_stmt *viewer, int viewer_col) {
    doc_out o = {b, true};
    mv_strbuf_add(b, "{", 1);
    put_text(&o, "id", st, 0);
    put_text(&o, "type", st, 1);
    put_text(&o, "templateCd", st, 2);
    put_text(&o, "fromUser", st, 3);
    put_text(&o, "toUser", st, 4);
    put_stored(&o, "toRoles", st, 5, "[]");
    put_stored(&o, "senderContent", st, 6, "{}");
    put_stored(&o, "receiverContent", st, 7, "{}");
    put_stored(&o, "documents", st, 8, "[]");
    put_text(&o, "paymentSession", st, 9);
    put_text(&o, "paymentCd", st, 10);
    put_stored(&o, "payload", st, 11, "{}");
    put_stored(&o, "display", st, 12, "{}");
    put_text(&o, "clientRequestId", st, 13);
    put_text(&o, "actionState", st, 16);
    put_text(&o, "actionCd", st, 17);
    put_text(&o, "actionAttemptId", st, 18);
    put_text(&o, "archivedBy", st, 24);
    put_int(&o, "archivedAt", st, 25);
    put_int(&o, "createdAt", st, 26);
    put_int(&o, "updatedAt", st, 27);
    put_int(&o, "expiresAt", st, 30);
    put_int(&o, "escalatedAt", st, 31);
    put_int(&o, "sendAt", st, 32);
    size_t mark = put_key(&o, "lastFailure");
    const char *state = mv_stmt_text(st, 16);
    bool ok = true;
    if (state && strcmp(state, "retryable") == 0 && !mv_stmt_is_null(st, 22)) {
        /* json_pack("{s:s,s:s,s:o,s:o}"): any part that cannot be made drops the whole field */
        const char *code = mv_stmt_text(st, 28), *message = mv_stmt_text(st, 22);
        if (!code) code = "handler_failed";
        ok = mv_strbuf_adds(b, "{\"code\":") && mv_json_write_string(b, code, strlen(code)) &&
             mv_strbuf_adds(b, ",\"message\":") &&
             mv_json_write_string(b, message, strlen(message)) && mv_strbuf_adds(b, ",\"at\":") &&
             write_int_or_null(b, st, 29) && mv_strbuf_adds(b, ",\"actionAttemptId\":") &&
             write_text_or_null(b, mv_stmt_text(st, 18)) && mv_strbuf_add(b, "}", 1);
    } else {
        ok = mv_strbuf_add(b, "null", 4);
    }
    field_done(&o, mark, ok);
    mark = put_key(&o, "viewer");
    ok = mv_strbuf_adds(b, "{\"seenAt\":") && write_int_or_null(b, viewer, viewer_col) &&
         mv_strbuf_adds(b, ",\"readAt\":") && write_int_or_null(b, viewer, viewer_col + 1) &&
         mv_strbuf_adds(b, ",\"dismissedAt\":") && write_int_or_null(b, viewer, viewer_col + 2) &&
         mv_strbuf_adds(b, ",\"snoozedUntil\":") && write_int_or_null(b, viewer, viewer_col + 3) &&
         mv_strbuf_adds(b, ",\"remindedAt\":") && write_int_or_null(b, viewer, viewer_col + 4) &&
         mv_strbuf_add(b, "}", 1);
    field_done(&o, mark, ok);
    return mv_strbuf_add(b, "}", 1);
}

json_t *mv__doc_audience_from_row(mv_stmt *st) {
    json_t *d = json_object();
    json_object_set_new(d, "fromUser", text_or_null(st, 3));
    json_object_set_new(d, "toUser", text_or_null(st, 4));
    json_object_set_new(d, "toRoles", json_or(mv_stmt_text(st, 5), json_array()));
    json_object_set_new(d, "actionState", text_or_null(st, 16)); /* a scheduled send's */
    return d;
}

/* The document's fields in the API's order, set one by one (json_pack parsed its format on every
 * create). bare: the fields a create always sets afterwards (doc_begin/doc_end in create.c) hold
 * null until then instead of defaults made only to be replaced. */
static json_t *doc_build(const char *type, const char *template_cd, int64_t now, bool bare) {
    char id[25];
    mv_id_message(id);
    json_t *d = json_object(), *sender = NULL, *receiver = NULL;
    if (!d) return NULL;
    if (!bare) {
        sender = json_pack("{s:s,s:s,s:s}", "title", "", "short", "", "long", "");
        receiver = json_incref(sender); /* one object for both, as before */
    }
    json_t *viewer = json_object();
    if (viewer) {
        json_object_set_new_nocheck(viewer, "seenAt", json_null());
        json_object_set_new_nocheck(viewer, "readAt", json_null());
        json_object_set_new_nocheck(viewer, "dismissedAt", json_null());
        json_object_set_new_nocheck(viewer, "snoozedUntil", json_null());
        json_object_set_new_nocheck(viewer, "remindedAt", json_null());
    }
    struct {
        const char *key;
        json_t *v;
    } f[] = {
        {"id", json_string(id)},
        {"type", json_string(type)},
        {"templateCd", json_string(template_cd)},
        {"fromUser", json_null()},
        {"toUser", json_null()},
        {"toRoles", bare ? json_null() : json_array()},
        {"senderContent", bare ? json_null() : sender},
        {"receiverContent", bare ? json_null() : receiver},
        {"documents", bare ? json_null() : json_array()},
        {"paymentSession", json_null()},
        {"paymentCd", bare ? json_null() : json_string("")},
        {"payload", bare ? json_null() : json_object()},
        {"display", json_object()},
        {"clientRequestId", json_null()},
        {"actionState", json_string("active")},
        {"actionCd", json_null()},
        {"actionAttemptId", json_null()},
        {"archivedBy", json_null()},
        {"archivedAt", json_null()},
        {"createdAt", json_integer((json_int_t)now)},
        {"updatedAt", json_integer((json_int_t)now)},
        {"expiresAt", json_null()},
        {"escalatedAt", json_null()},
        {"sendAt", json_null()},
        {"lastFailure", json_null()},
        {"viewer", viewer},
    };
    bool ok = true;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) /* json_pack: any part missing, no doc */
        if (!f[i].v || json_object_set_new_nocheck(d, f[i].key, f[i].v) != 0) ok = false;
    if (!ok) {
        json_decref(d);
        return NULL;
    }
    return d;
}

json_t *mv__doc_new(const char *type, const char *template_cd, int64_t now) {
    return doc_build(type, template_cd, now, false);
}

json_t *mv__doc_new_bare(const char *type, const char *template_cd, int64_t now) {
    return doc_build(type, template_cd, now, true);
}

/* A scheduled message (schedule.c) is stored hidden (archived 2) until its sendAt. */
#define INSERT_MESSAGE(state, archived)                                                            \
    "INSERT INTO messages (id, type, template_cd, from_user, to_user, to_roles, sender_content, "  \
    "receiver_content, documents, payment_session, payment_cd, payload, display, "                 \
    "client_request_id, client_request_owner_id, client_request_item_index, action_state, "        \
    "archived, created_at, updated_at, tenant_id, expires_at, send_at, deliver_at, deliver_data) " \
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, " state ", " archived                 \
    ", ?, ?, ?, ?, ?, ?, ?)"
static const char SQL_INSERT_MESSAGE[] = INSERT_MESSAGE("'active'", "0");
static const char SQL_INSERT_SCHEDULED[] = INSERT_MESSAGE("'scheduled'", "2");
static const char SQL_INSERT_ROLE[] =
    "INSERT INTO message_roles (message_id, role, archived, created_at, tenant_id) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING";

mv_code mv__doc_insert(mv_db *db, const json_t *doc, const char *tenant, const char *owner_id,
                       int64_t item_index, mv_err *err) {
    return mv__doc_insert_planned(db, doc, tenant, owner_id, item_index, NULL, 0, err);
}

mv_code mv__doc_insert_planned(mv_db *db, const json_t *doc, const char *tenant,
                               const char *owner_id, int64_t item_index, const char *plan,
                               int64_t plan_at, mv_err *err) {
    mv_stmt *st;
    const json_t *send_at = json_object_get(doc, "sendAt");
    bool scheduled = json_is_integer(send_at);
    mv_code rc = mv_db_prepare(db, scheduled ? SQL_INSERT_SCHEDULED : SQL_INSERT_MESSAGE, &st, err);
    if (rc != MV_OK) return rc;
    const char *json_fields[] = {"toRoles",   "senderContent", "receiverContent",
                                 "documents", "payload",       "display"};
    /* the six texts one after another in one buffer, each ended by a NUL (the binds copy them) */
    mv_strbuf b = {0};
    size_t at[6];
    bool has[6];
    for (int i = 0; i < 6; i++) {
        json_t *v = json_object_get(doc, json_fields[i]);
        at[i] = b.len;
        has[i] = v && !json_is_null(v) && mv_json_write(&b, v) && mv_strbuf_add(&b, "", 1);
        if (!has[i] && !b.oom) b.len = at[i];
    }
    if (b.oom) {
        free(b.data);
        mv_stmt_done(st);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory writing a message");
    }
    const char *texts[6];
    for (int i = 0; i < 6; i++)
        texts[i] = has[i] ? b.data + at[i] : NULL;
    int64_t created = json_integer_value(json_object_get(doc, "createdAt"));
    mv_stmt_bindf(st, "ssssssssssssss", mv_json_str(doc, "id"), mv_json_str(doc, "type"),
                  mv_json_str(doc, "templateCd"), mv_json_str(doc, "fromUser"),
                  mv_json_str(doc, "toUser"), texts[0] ? texts[0] : "[]",
                  texts[1] ? texts[1] : "{}", texts[2] ? texts[2] : "{}",
                  texts[3] ? texts[3] : "[]", mv_json_str(doc, "paymentSession"),
                  mv_json_str(doc, "paymentCd") ? mv_json_str(doc, "paymentCd") : "",
                  texts[4] ? texts[4] : "{}", texts[5], mv_json_str(doc, "clientRequestId"));
    mv_stmt_bind_text(st, 15, owner_id);
    if (item_index >= 0)
        mv_stmt_bind_int64(st, 16, item_index);
    else
        mv_stmt_bind_null(st, 16);
    mv_stmt_bind_int64(st, 17, created);
    mv_stmt_bind_int64(st, 18, json_integer_value(json_object_get(doc, "updatedAt")));
    mv_stmt_bind_text(st, 19, tenant ? tenant : MV_DEFAULT_TENANT);
    const json_t *expires = json_object_get(doc, "expiresAt");
    if (json_is_integer(expires))
        mv_stmt_bind_int64(st, 20, json_integer_value(expires));
    else
        mv_stmt_bind_null(st, 20);
    if (scheduled)
        mv_stmt_bind_int64(st, 21, json_integer_value(send_at));
    else
        mv_stmt_bind_null(st, 21);
    if (plan) {
        mv_stmt_bind_int64(st, 22, plan_at);
        mv_stmt_bind_text(st, 23, plan);
    } else {
        mv_stmt_bind_null(st, 22);
        mv_stmt_bind_null(st, 23);
    }
    rc = mv_stmt_exec_later(st, err); /* deferred: store/db.h */
    free(b.data);
    if (rc != MV_OK) return rc;
    if (json_is_integer(expires) &&
        (rc =
             mv__expiry_schedule_tx(db, tenant ? tenant : MV_DEFAULT_TENANT, mv_json_str(doc, "id"),
                                    json_integer_value(expires), created, err)) != MV_OK)
        return rc;

    size_t i;
    json_t *role;
    json_array_foreach(json_object_get(doc, "toRoles"), i, role) {
        if (!json_is_string(role)) continue;
        rc = mv_db_execf_later(db, SQL_INSERT_ROLE, err, "ssiis", mv_json_str(doc, "id"),
                               json_string_value(role), (int64_t)(scheduled ? 2 : 0), created,
                               tenant ? tenant : MV_DEFAULT_TENANT);
        if (rc != MV_OK) return rc;
    }
    if (scheduled)
        return mv__schedule_inserted_tx(db, tenant ? tenant : MV_DEFAULT_TENANT, doc, err);
    return mv__tally_created_tx(db, tenant ? tenant : MV_DEFAULT_TENANT, doc, err);
}

static const char SQL_LOAD_MESSAGE[] = "SELECT " MESSAGE_COLUMNS " FROM messages WHERE id = ?";
static const char SQL_LOAD_TENANT_MESSAGE[] =
    "SELECT " MESSAGE_COLUMNS " FROM messages WHERE id = ? AND tenant_id = ?";

mv_code mv__doc_load(mv_db *db, const char *id, const char *tenant, json_t **doc, mv_err *err) {
    mv_stmt *st;
    mv_code rc = tenant ? mv_db_row(db, SQL_LOAD_TENANT_MESSAGE, &st, err, "ss", id, tenant)
                        : mv_db_row(db, SQL_LOAD_MESSAGE, &st, err, "s", id);
    *doc = st ? mv__doc_from_row(st) : NULL;
    mv_stmt_done(st);
    return rc;
}

/* The email row through a jansson tree: what a row that cannot be written as text (a missing
 * field, a string that is not UTF-8) becomes, so its error is mv_outbox_add_tx's. */
static mv_code enqueue_email_tree(mv_db *db, const char *id, const char *to, const char *title,
                                  size_t n, const char *body, int64_t due, mv_err *err) {
    json_t *row = json_pack("{s:s,s:s,s:s%,s:s}", "messageId", id, "toUser", to, "title", title, n,
                            "body", body);
    mv_code rc = mv_outbox_add_tx(db, MV_OUTBOX_EMAIL, row, due, err);
    json_decref(row);
    return rc;
}

mv_code mv__doc_enqueue_email(mv_service *svc, mv_db *db, const json_t *doc, mv_err *err) {
    if (!svc->o.email) return MV_OK;
    const json_t *content = json_object_get(doc, "receiverContent");
    const char *to = mv_json_str(doc, "toUser"), *title = mv_json_str(content, "title");
    if (!mv_email_should_send(to, title, svc->email_exclusions)) return MV_OK;
    while (*title && strchr(" \t\r\n", *title))
        title++;
    size_t n = strlen(title);
    while (n && strchr(" \t\r\n", title[n - 1]))
        n--;
    const char *id = mv_json_str(doc, "id");
    const char *body = mv_email_body(mv_json_str(content, "long"), mv_json_str(content, "short"));
    int64_t due = mv__schedule_due(svc, doc);
    /* {"messageId", "toUser", "title", "body"} written straight into one buffer, as a channel's
     * row is (channels.c) */
    mv_strbuf b = {0};
    bool ok = id && to && *to && body && mv_strbuf_adds(&b, "{\"messageId\":") &&
              mv_json_write_string(&b, id, strlen(id)) && mv_strbuf_adds(&b, ",\"toUser\":") &&
              mv_json_write_string(&b, to, strlen(to)) && mv_strbuf_adds(&b, ",\"title\":") &&
              mv_json_write_string(&b, title, n) && mv_strbuf_adds(&b, ",\"body\":") &&
              mv_json_write_string(&b, body, strlen(body)) && mv_strbuf_adds(&b, "}");
    char *row = mv_strbuf_take(&b, NULL);
    mv_code rc = ok ? mv__outbox_add_text_tx(db, MV_OUTBOX_EMAIL, row, due, err)
                    : enqueue_email_tree(db, id, to, title, n, body, due, err);
    free(row);
    return rc;
}
