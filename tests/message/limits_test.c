/* limits_test.c — bounded work and memory in the message service (DESIGN "Security rules", issue
 * 12 item 7), on each store: a message whose payload plus rendered content passes
 * max_message_bytes is refused (payload_too_large) and nothing is stored; a list page ends early,
 * with a cursor, rather than pass max_page_bytes, always holds at least one message, and walking
 * the cursors returns every message exactly once. */
#include "message/fixture.h"

static const char *SHOUT_TEMPLATE =
    "{\"templateCd\": \"shout\", \"receiverContent\": {\"title\": \"t\", \"short\": \"{{text}}\","
    " \"long\": \"{{text}}\"}, \"prepare\": {\"toUser\": \"{{to}}\"}, \"actions\": []}";

static int open_limits(fixture *f, const char *kind, const char *name, int64_t message_bytes,
                       int64_t page_bytes) {
    mv_service_options o = {.max_message_bytes = message_bytes, .max_page_bytes = page_bytes};
    if (!fixture_open_opts(f, kind, name, &o)) return 0;
    json_t *t = json_loads(SHOUT_TEMPLATE, 0, NULL);
    mv_err err = {0};
    mv_code rc = mv_registry_register(f->registry, t, "<shout>", &err);
    json_decref(t);
    return rc == MV_OK;
}

/* A message to "victim" whose text is n bytes (stored three times: payload, short, long). */
static mv_code shout(fixture *f, size_t n, const char *key, mv_err *err) {
    char *text = malloc(n + 1);
    memset(text, 'a', n);
    text[n] = '\0';
    json_t *payload = json_pack("{s:s,s:s}", "to", "victim", "text", text);
    free(text);
    mv_user u = {.id = "mallory"};
    json_t *id = key ? json_string(key) : NULL;
    mv_create_request req = {
        .template_cd = "shout", .user = &u, .payload = payload, .client_request_id = id};
    json_t *m = NULL;
    f->now += 1; /* distinct creation times keep the order obvious */
    mv_code rc = mv_message_create(f->svc, &req, &m, NULL, err);
    json_decref(m);
    json_decref(payload);
    json_decref(id);
    return rc;
}

STORE_TEST(a_message_larger_than_max_message_bytes_is_payload_too_large_and_not_stored) {
    fixture f;
    REQUIRE(open_limits(&f, kind, "msg_bytes", 30000, 0));
    mv_err err = {0};
    CHECK_CODE(shout(&f, 9000, NULL, &err), MV_OK, &err);                 /* 3 × 9000 fits */
    CHECK_CODE(shout(&f, 11000, NULL, &err), MV_PAYLOAD_TOO_LARGE, &err); /* 3 × 11000 does not */
    CHECK_STR(mv_code_name(err.code), "payload_too_large");
    CHECK_INT(mv_code_http_status(err.code), 413);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    /* with a key it is a definitive failure: recorded, replayed, never stored */
    CHECK_CODE(shout(&f, 11000, "big-1", &err), MV_PAYLOAD_TOO_LARGE, &err);
    CHECK_CODE(shout(&f, 11000, "big-1", &err), MV_CLIENT_REQUEST_FAILED, &err);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    fixture_close(&f);
}

/* Lists victim's inbox page by page; returns the number of messages, checks each page's size. */
static int walk(fixture *f, int64_t page_bytes, int *pages, int *max_on_page) {
    mv_user victim = {.id = "victim"};
    char *cursor = NULL;
    int total = 0;
    *pages = 0;
    *max_on_page = 0;
    char seen[64][25];
    for (;;) {
        json_t *limit = json_integer(100), *msgs = NULL;
        mv_list_request lr = {.user = &victim, .limit = limit, .cursor = cursor};
        char *next = NULL;
        mv_err err = {0};
        mv_code rc = mv_message_list(f->svc, &lr, &msgs, &next, &err);
        json_decref(limit);
        free(cursor);
        CHECK_CODE(rc, MV_OK, &err);
        if (rc != MV_OK) return -1;
        size_t n = json_array_size(msgs);
        size_t bytes = json_dumpb(msgs, NULL, 0, JSON_COMPACT);
        if (n > 1) CHECK(bytes <= (size_t)page_bytes); /* one message alone may pass it */
        CHECK(n >= 1 || !next);
        for (size_t i = 0; i < n && total < 64; i++) {
            const char *id = mv_json_str(json_array_get(msgs, i), "id");
            for (int k = 0; k < total; k++)
                CHECK(strcmp(seen[k], id) != 0); /* exactly once */
            mv_strlcpy(seen[total++], id, 25);
        }
        (*pages)++;
        if ((int)n > *max_on_page) *max_on_page = (int)n;
        json_decref(msgs);
        if (!next) break;
        cursor = next;
    }
    return total;
}

STORE_TEST(a_page_ends_early_rather_than_pass_max_page_bytes_and_the_cursor_walks_all) {
    fixture f;
    REQUIRE(open_limits(&f, kind, "page_bytes", 0, 200000));
    mv_err err = {0};
    for (int i = 0; i < 10; i++)
        CHECK_CODE(shout(&f, 20000, NULL, &err), MV_OK, &err);
    int pages, most;
    CHECK_INT(walk(&f, 200000, &pages, &most), 10);
    CHECK_INT(most, 3); /* 3 × ~60 KB fit in 200 KB, a fourth does not */
    CHECK_INT(pages, 4);
    fixture_close(&f);
}

STORE_TEST(a_message_larger_than_a_page_still_comes_alone_on_its_page) {
    fixture f;
    REQUIRE(open_limits(&f, kind, "page_single", 0, 50000));
    mv_err err = {0};
    CHECK_CODE(shout(&f, 30000, NULL, &err), MV_OK, &err); /* ~90 KB: more than a page */
    CHECK_CODE(shout(&f, 100, NULL, &err), MV_OK, &err);
    CHECK_CODE(shout(&f, 30000, NULL, &err), MV_OK, &err);
    int pages, most;
    CHECK_INT(walk(&f, 50000, &pages, &most), 3);
    CHECK_INT(pages, 3);
    CHECK_INT(most, 1);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(a_message_larger_than_max_message_bytes_is_payload_too_large_and_not_stored,
                     a_page_ends_early_rather_than_pass_max_page_bytes_and_the_cursor_walks_all,
                     a_message_larger_than_a_page_still_comes_alone_on_its_page);
}
