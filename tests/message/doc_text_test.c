/* doc_text_test.c — a message written from its stored row (mv_message_list_text,
 * mv_message_get_text: no jansson document) is byte for byte what the document path writes
 * (mv_message_list / mv_message_get, then mv_json_write), on both stores: unicode, escapes,
 * reals, large payloads, per-viewer state, a retryable failure, and stored text the daemon did
 * not write itself (whitespace, other escapes, duplicate keys, text that does not parse). */
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "fixture.h"
#include "missive/inbox.h"

static char *write_json(const json_t *v) {
    mv_strbuf b = {0};
    if (!mv_json_write(&b, v)) {
        free(b.data);
        return NULL;
    }
    return mv_strbuf_take(&b, NULL);
}

static json_t *create_with(fixture *f, const char *from, const char *to, json_t *extra) {
    mv_user u = {.id = from};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Widget", "toUser", to);
    json_object_update(payload, extra);
    json_decref(extra);
    mv_create_request req = {.template_cd = "svc-test", .user = &u, .payload = payload};
    json_t *msgs = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_create(f->svc, &req, &msgs, NULL, &err);
    json_decref(payload);
    if (rc != MV_OK) fprintf(stderr, "create: %s\n", err.message);
    json_t *one = json_incref(json_array_get(msgs, 0));
    json_decref(msgs);
    return one;
}

typedef struct {
    const char *sql, *a, *b;
} update_arg;

static mv_code update_tx(mv_db *db, void *ctx, mv_err *err) {
    update_arg *u = ctx;
    return u->b ? mv_db_execf(db, u->sql, NULL, err, "ss", u->a, u->b)
                : mv_db_execf(db, u->sql, NULL, err, "s", u->a);
}

/* Runs sql with the parameters a (and b when not NULL). */
static mv_code update(fixture *f, const char *sql, const char *a, const char *b) {
    update_arg u = {sql, a, b};
    mv_err err = {0};
    mv_code rc = mv_store_write(f->store, update_tx, &u, &err);
    if (rc != MV_OK) fprintf(stderr, "update: %s\n", err.message);
    return rc;
}

static bool append_text(void *ctx, const char *json, size_t n) {
    mv_strbuf *b = ctx;
    if (b->len) mv_strbuf_add(b, ",", 1);
    return mv_strbuf_add(b, json, n);
}

/* The page through both paths: *same when the bytes are equal; returns the page length. */
static size_t compare_page(fixture *f, const mv_user *u, bool *same) {
    mv_list_request req = {.user = u};
    json_t *page = NULL;
    mv_err err = {0};
    char *next1 = NULL, *next2 = NULL;
    *same = false;
    if (mv_message_list(f->svc, &req, &page, &next1, &err) != MV_OK) return 0;
    mv_strbuf old = {0}, text = {0};
    size_t i;
    json_t *m;
    json_array_foreach(page, i, m) {
        char *s = write_json(m);
        if (old.len) mv_strbuf_add(&old, ",", 1);
        mv_strbuf_adds(&old, s ? s : "");
        free(s);
    }
    size_t n = json_array_size(page);
    json_decref(page);
    mv_code rc = mv_message_list_text(f->svc, &req, append_text, &text, &next2, &err);
    *same = rc == MV_OK && old.len == text.len &&
            (old.len == 0 || memcmp(old.data, text.data, old.len) == 0) &&
            ((!next1 && !next2) || (next1 && next2 && strcmp(next1, next2) == 0));
    if (!*same && old.data && text.data)
        fprintf(stderr, "document path: %s\ntext path:     %s\n", old.data, text.data);
    free(old.data);
    free(text.data);
    free(next1);
    free(next2);
    return n;
}

/* One message through both paths; true when both fail alike or write the same bytes. */
static bool compare_get(fixture *f, const char *id, const mv_user *u) {
    json_t *doc = NULL;
    char *text = NULL;
    size_t len = 0;
    mv_err e1 = {0}, e2 = {0};
    mv_code rc1 = mv_message_get(f->svc, id, u, &doc, &e1);
    mv_code rc2 = mv_message_get_text(f->svc, id, u, &text, &len, &e2);
    char *old = rc1 == MV_OK ? write_json(doc) : NULL;
    bool same = rc1 == rc2 &&
                (rc1 != MV_OK || (old && text && strlen(old) == len && strcmp(old, text) == 0));
    if (!same) fprintf(stderr, "get %s: %d %d\n%s\n%s\n", id, rc1, rc2, old, text);
    json_decref(doc);
    free(old);
    free(text);
    return same;
}

static const char SQL_SET_PAYLOAD[] = "UPDATE messages SET payload = ? WHERE id = ?";
static const char SQL_SET_DISPLAY[] = "UPDATE messages SET display = ? WHERE id = ?";
static const char SQL_SET_CONTENT[] = "UPDATE messages SET receiver_content = ? WHERE id = ?";
static const char SQL_SET_ROLES[] = "UPDATE messages SET to_roles = ? WHERE id = ?";
static const char SQL_SET_RETRYABLE[] =
    "UPDATE messages SET action_state = 'retryable', action_attempt_id = 'att-1', "
    "action_failure_message = ?, action_failure_code = NULL, action_failed_at = 1700000000123 "
    "WHERE id = ?";
static const char SQL_SET_ARCHIVED_BY[] =
    "UPDATE messages SET archived_by = ?, archived_at = 1700000000999 WHERE id = ?";

STORE_TEST(messages_written_from_their_rows_match_the_document_path_byte_for_byte) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "doctext"));
    const char *roles[] = {"ops"};
    mv_user me = {.id = "me", .roles = roles, .nroles = 1};
    /* what the daemon writes itself */
    json_t *made[8] = {0};
    made[0] = create_with(&f, "other", "me", json_pack("{s:s}", "note", "plain"));
    f.now++;
    made[1] = create_with(&f, "other", "me",
                          json_pack("{s:s,s:s,s:[f,f,f,f],s:I,s:b,s:n}", "name",
                                    "Zoë \"quoted\" \\ back\\slash \n\t\r\b\f \x01\x1f /slash/ ☃ 😀",
                                    "ctl", "\x7f del", "reals", 0.1, 1e300, -0.0, 123456789.0,
                                    "big", (json_int_t)9007199254740993LL, "yes", 1, "nothing"));
    f.now++;
    json_t *large = json_array();
    for (int i = 0; i < 3000; i++)
        json_array_append_new(large, json_pack("{s:i,s:s}", "i", i, "s", "éèê ✓ text"));
    made[2] = create_with(&f, "me", "other", json_pack("{s:o}", "large", large));
    f.now++;
    made[3] = create_with(&f, "other", "nobody", json_pack("{s:[s]}", "toRoles", "ops"));
    f.now++;
    made[4] = create_with(&f, "other", "me", json_pack("{s:{s:{s:[[],{}]}}}", "a", "b", "c"));
    f.now++;
    for (int i = 0; i < 5; i++)
        REQUIRE(made[i]);
    /* stored text someone else wrote: each takes the parse-and-write path, same bytes */
    const char *id = mv_json_str(made[4], "id");
    CHECK_INT(update(&f, SQL_SET_PAYLOAD, "{ \"a\" : [1, 2.50, 1e5, -0, \"\\u00e9\\/\"] }", id),
              MV_OK);
    CHECK_INT(update(&f, SQL_SET_DISPLAY, "{\"k\":1,\"k\":2}", id), MV_OK);
    CHECK_INT(update(&f, SQL_SET_CONTENT, "not json at all", id), MV_OK);
    id = mv_json_str(made[0], "id");
    CHECK_INT(update(&f, SQL_SET_PAYLOAD, "{\"n\":\"\\u0000\",\"x\":12345678901234567890}", id),
              MV_OK); /* json_loads refuses both: the {} fallback */
    CHECK_INT(update(&f, SQL_SET_RETRYABLE, "handler said \"no\" ✗", id), MV_OK);
    CHECK_INT(update(&f, SQL_SET_ARCHIVED_BY, "admin ☃", id), MV_OK);
    id = mv_json_str(made[3], "id");
    CHECK_INT(update(&f, SQL_SET_ROLES, "[\"ops\", 7, null]", id), MV_OK);
    /* per-viewer state: read one, dismiss-less seen another */
    mv_err err = {0};
    CHECK_CODE(mv_message_mark(f.svc, mv_json_str(made[1], "id"), &me, MV_MARK_READ, NULL, &err),
               MV_OK, &err);
    CHECK_CODE(mv_message_mark(f.svc, mv_json_str(made[2], "id"), &me, MV_MARK_SEEN, NULL, &err),
               MV_OK, &err);

    bool same = false;
    CHECK_INT(compare_page(&f, &me, &same), 5);
    CHECK(same);
    mv_user other = {.id = "other"};
    CHECK_INT(compare_page(&f, &other, &same), 5);
    CHECK(same);
    mv_user nobody = {.id = "stranger"};
    CHECK_INT(compare_page(&f, &nobody, &same), 0);
    CHECK(same);
    for (int i = 0; i < 5; i++) {
        CHECK(compare_get(&f, mv_json_str(made[i], "id"), &me));
        CHECK(compare_get(&f, mv_json_str(made[i], "id"), &other));
        CHECK(compare_get(&f, mv_json_str(made[i], "id"), &nobody)); /* not found, both */
        CHECK(compare_get(&f, mv_json_str(made[i], "id"), NULL));    /* no user: no check */
    }
    CHECK(compare_get(&f, "000000000000000000000000", &me));
    CHECK(compare_get(&f, "not-an-id", &me));
    /* the viewer's state is the viewer's own */
    char *text = NULL;
    CHECK_CODE(mv_message_get_text(f.svc, mv_json_str(made[1], "id"), &me, &text, NULL, &err),
               MV_OK, &err);
    char want[128];
    snprintf(want, sizeof want,
             "\"viewer\":{\"seenAt\":%lld,\"readAt\":%lld,\"dismissedAt\":null,"
             "\"snoozedUntil\":null,\"remindedAt\":null}",
             (long long)f.now, (long long)f.now);
    CHECK(text && strstr(text, want));
    free(text);
    text = NULL;
    CHECK_CODE(mv_message_get_text(f.svc, mv_json_str(made[1], "id"), &other, &text, NULL, &err),
               MV_OK, &err);
    CHECK(text && strstr(text, "\"viewer\":{\"seenAt\":null,\"readAt\":null,\"dismissedAt\":null,"
                               "\"snoozedUntil\":null,\"remindedAt\":null}"));
    free(text);
    for (int i = 0; i < 5; i++)
        json_decref(made[i]);
    fixture_close(&f);
}

/* SQLite keeps bytes that are not UTF-8 in a TEXT column: the document path leaves such a field
 * out (json_string refuses it), and so does the text path. */
TEST(a_text_field_that_is_not_utf8_is_left_out_on_both_paths) {
    fixture f;
    REQUIRE(fixture_open(&f, "sqlite", "doctext_utf8"));
    json_t *m = create_with(&f, "other", "me", json_pack("{s:s}", "note", "x"));
    REQUIRE(m);
    const char *id = mv_json_str(m, "id");
    CHECK_INT(update(&f, "UPDATE messages SET payment_cd = ? WHERE id = ?", "bad \xff\xfe", id),
              MV_OK);
    CHECK_INT(update(&f, SQL_SET_RETRYABLE, "bad \xc3", id), MV_OK);
    CHECK_INT(update(&f, SQL_SET_PAYLOAD, "{\"s\":\"\xe2\x82\"}", id), MV_OK);
    mv_user me = {.id = "me"};
    bool same = false;
    CHECK_INT(compare_page(&f, &me, &same), 1);
    CHECK(same);
    CHECK(compare_get(&f, id, &me));
    char *text = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_get_text(f.svc, id, &me, &text, NULL, &err), MV_OK, &err);
    CHECK(text && !strstr(text, "paymentCd") && !strstr(text, "lastFailure") &&
          strstr(text, "\"payload\":{}"));
    free(text);
    json_decref(m);
    fixture_close(&f);
}

/* A page of several fetch chunks (32 rows each, read in whatever order the store finds them) comes
 * out newest first, ties by id descending, on both paths. */
STORE_TEST(a_page_of_many_chunks_is_in_page_order_on_both_paths) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "doctext_order"));
    for (int i = 0; i < 75; i++) {
        json_decref(create_with(&f, "other", "me", json_pack("{s:i}", "i", i)));
        if (i % 3 == 0) f.now++; /* some share their createdAt: the id orders them */
    }
    mv_user me = {.id = "me"};
    json_t *limit = json_integer(100);
    mv_list_request req = {.user = &me, .limit = limit};
    mv_strbuf text = {0};
    mv_err err = {0};
    char *next = NULL;
    CHECK_CODE(mv_message_list_text(f.svc, &req, append_text, &text, &next, &err), MV_OK, &err);
    mv_strbuf whole = {0};
    mv_strbuf_adds(&whole, "[");
    mv_strbuf_add(&whole, text.data ? text.data : "", text.len);
    mv_strbuf_adds(&whole, "]");
    json_t *page = json_loads(whole.data, 0, NULL);
    free(text.data);
    free(whole.data);
    free(next);
    REQUIRE(page);
    CHECK_INT(json_array_size(page), 75);
    int ordered = 0;
    for (size_t i = 1; i < json_array_size(page); i++) {
        json_t *x = json_array_get(page, i - 1), *y = json_array_get(page, i);
        json_int_t cx = json_integer_value(json_object_get(x, "createdAt"));
        json_int_t cy = json_integer_value(json_object_get(y, "createdAt"));
        ordered += cx > cy || (cx == cy && strcmp(mv_json_str(x, "id"), mv_json_str(y, "id")) > 0);
    }
    CHECK_INT(ordered, 74);
    json_decref(page);
    bool same = false;
    CHECK_INT(compare_page(&f, &me, &same), 50); /* the default limit: two chunks */
    CHECK(same);
    json_decref(limit);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(messages_written_from_their_rows_match_the_document_path_byte_for_byte,
                     a_text_field_that_is_not_utf8_is_left_out_on_both_paths,
                     a_page_of_many_chunks_is_in_page_order_on_both_paths);
}
