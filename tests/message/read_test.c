/* read_test.c — visibility, list ordering and pagination (skip and cursor), count, get and
 * getActions (SEMANTICS §1.6, §2.2, §2.5). */
#include "fixture.h"

static json_t *create_to(fixture *f, const char *from, const char *to, const char *role) {
    mv_user u = {.id = from};
    json_t *payload = json_pack("{s:s}", "name", "W");
    if (to) json_object_set_new(payload, "toUser", json_string(to));
    if (role) json_object_set_new(payload, "toRoles", json_pack("[s]", role));
    mv_create_request req = {.template_cd = "svc-test", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_create(f->svc, &req, &m, NULL, &err);
    json_decref(payload);
    json_t *one = json_incref(json_array_get(m, 0));
    json_decref(m);
    return one;
}

static json_t *list(fixture *f, const mv_user *u, json_t *limit, json_t *skip, const char *cursor,
                    char **next, mv_code *rc) {
    mv_list_request req = {.user = u, .limit = limit, .skip = skip, .cursor = cursor};
    json_t *out = NULL;
    mv_err err = {0};
    *rc = mv_message_list(f->svc, &req, &out, next, &err);
    json_decref(limit);
    json_decref(skip);
    return out;
}

STORE_TEST(visibility_covers_sender_recipient_and_roles_without_duplicates) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "vis.db"));
    json_decref(create_to(&f, "me", "other", NULL)); /* I sent it */
    f.now++;
    json_decref(create_to(&f, "other", "me", NULL)); /* sent to me */
    f.now++;
    json_decref(create_to(&f, "other", NULL, "ops")); /* to my role */
    f.now++;
    json_decref(create_to(&f, "other", "me", "ops")); /* both: must appear once */
    f.now++;
    json_decref(create_to(&f, "other", "else", "hr")); /* hidden */
    const char *roles[] = {"ops"};
    mv_user me = {.id = "me", .roles = roles, .nroles = 1};
    mv_code rc;
    json_t *page = list(&f, &me, NULL, NULL, NULL, NULL, &rc);
    CHECK_INT(rc, MV_OK);
    CHECK_INT(json_array_size(page), 4);
    int64_t n = 0;
    mv_err err = {0};
    CHECK_CODE(mv_message_count(f.svc, &me, &n, &err), MV_OK, &err);
    CHECK_INT(n, 4);
    mv_user stranger = {.id = "nobody"};
    CHECK_CODE(mv_message_count(f.svc, &stranger, &n, &err), MV_OK, &err);
    CHECK_INT(n, 0);
    json_decref(page);
    fixture_close(&f);
}

/* A message from "other" to the given roles (a JSON array). */
static json_t *create_to_roles(fixture *f, json_t *roles) {
    mv_user u = {.id = "other"};
    json_t *payload = json_pack("{s:s,s:o}", "name", "W", "toRoles", roles);
    mv_create_request req = {.template_cd = "svc-test", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_create(f->svc, &req, &m, NULL, &err);
    json_decref(payload);
    if (rc != MV_OK) fprintf(stderr, "create_to_roles: %s\n", err.message);
    json_t *one = json_incref(json_array_get(m, 0));
    json_decref(m);
    return one;
}

STORE_TEST(a_user_with_64_roles_sees_every_message_once_across_pages_and_counts) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "roles64.db"));
    static char names[64][24];
    const char *roles[64];
    for (int i = 0; i < 64; i++) {
        snprintf(names[i], sizeof names[i], "group-%02d", i);
        roles[i] = names[i];
    }
    /* one message to each of roles 0, 15, 16, 31, 40 and 63 (every slice), one to roles 3 and 50
     * (two slices: must appear once), one I sent, one to me, and one I must not see */
    const int single[] = {0, 15, 16, 31, 40, 63};
    char want[10][25];
    int nwant = 0;
    for (int i = 0; i < 6; i++, f.now++) {
        json_t *m = create_to_roles(&f, json_pack("[s]", roles[single[i]]));
        REQUIRE(m);
        mv_strlcpy(want[nwant++], mv_json_str(m, "id"), 25);
        json_decref(m);
    }
    json_t *m = create_to_roles(&f, json_pack("[s,s]", roles[3], roles[50]));
    REQUIRE(m);
    mv_strlcpy(want[nwant++], mv_json_str(m, "id"), 25);
    json_decref(m);
    f.now++;
    m = create_to(&f, "me", "other", NULL);
    mv_strlcpy(want[nwant++], mv_json_str(m, "id"), 25);
    json_decref(m);
    f.now++;
    m = create_to(&f, "other", "me", NULL);
    mv_strlcpy(want[nwant++], mv_json_str(m, "id"), 25);
    json_decref(m);
    f.now++;
    json_decref(create_to_roles(&f, json_pack("[s]", "group-99")));
    mv_user me = {.id = "me", .roles = roles, .nroles = 64};
    /* pages of 2 with the cursor: newest first, each message exactly once */
    char *cursor = NULL, *next = NULL;
    int seen = 0;
    mv_code rc;
    for (int page_no = 0; page_no < 10; page_no++) {
        json_t *page = list(&f, &me, json_integer(2), NULL, cursor, &next, &rc);
        CHECK_INT(rc, MV_OK);
        for (size_t i = 0; i < json_array_size(page); i++, seen++)
            if (seen < nwant)
                CHECK_STR(mv_json_str(json_array_get(page, i), "id"), want[nwant - 1 - seen]);
        json_decref(page);
        free(cursor);
        cursor = next;
        next = NULL;
        if (!cursor) break;
    }
    CHECK_INT(seen, nwant);
    free(cursor);
    /* skip lands on the same message as the cursor does */
    json_t *page = list(&f, &me, json_integer(3), json_integer(4), NULL, NULL, &rc);
    CHECK_INT(rc, MV_OK);
    CHECK_INT(json_array_size(page), 3);
    CHECK_STR(mv_json_str(json_array_get(page, 0), "id"), want[nwant - 1 - 4]);
    json_decref(page);
    page = list(&f, &me, json_integer(3), json_integer(100), NULL, NULL, &rc);
    CHECK_INT(json_array_size(page), 0);
    json_decref(page);
    int64_t n = 0;
    mv_err err = {0};
    CHECK_CODE(mv_message_count(f.svc, &me, &n, &err), MV_OK, &err);
    CHECK_INT(n, nwant);
    fixture_close(&f);
}

STORE_TEST(a_message_to_256_roles_is_created_and_257_roles_are_refused) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "roles256.db"));
    json_t *roles = json_array();
    for (int i = 0; i < 256; i++) {
        char r[24];
        snprintf(r, sizeof r, "team-%03d", i);
        json_array_append_new(roles, json_string(r));
    }
    json_t *m = create_to_roles(&f, json_deep_copy(roles));
    REQUIRE(m);
    const char *last[] = {"team-255"};
    mv_user member = {.id = "member", .roles = last, .nroles = 1};
    json_t *got = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_get(f.svc, mv_json_str(m, "id"), &member, &got, &err), MV_OK, &err);
    json_decref(got);
    int64_t n = 0;
    CHECK_CODE(mv_message_count(f.svc, &member, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    json_decref(m);
    json_array_append_new(roles, json_string("team-256"));
    int64_t before = fixture_rows(f.store, 'm');
    CHECK(create_to_roles(&f, roles) == NULL);
    CHECK_INT(fixture_rows(f.store, 'm'), before);
    /* a user may hold 256 roles, not 257 */
    static char names[257][24];
    const char *mine[257];
    for (int i = 0; i < 257; i++) {
        snprintf(names[i], sizeof names[i], "team-%03d", 300 + i);
        mine[i] = names[i];
    }
    names[255][5] = '2', names[255][6] = '5', names[255][7] = '5'; /* "team-255" */
    mv_user many = {.id = "many", .roles = mine, .nroles = 256};
    CHECK_CODE(mv_message_count(f.svc, &many, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    mv_code rc;
    json_t *page = list(&f, &many, NULL, NULL, NULL, NULL, &rc);
    CHECK_INT(rc, MV_OK);
    CHECK_INT(json_array_size(page), 1);
    json_decref(page);
    many.nroles = 257;
    CHECK_CODE(mv_message_count(f.svc, &many, &n, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "at most 256 roles per user");
    fixture_close(&f);
}

STORE_TEST(forty_admin_roles_are_copied_onto_a_message_without_roles) {
    static char names[40][24];
    const char *admin[40];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "admin-%02d", i);
        admin[i] = names[i];
    }
    mv_service_options o = {.admin_roles = admin, .nadmin_roles = 40};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "admin40.db", &o));
    json_t *m = create_to(&f, "other", NULL, NULL);
    REQUIRE(m);
    CHECK_INT(json_array_size(json_object_get(m, "toRoles")), 40);
    const char *mine[] = {"admin-39"};
    mv_user u = {.id = "u", .roles = mine, .nroles = 1};
    int64_t n = 0;
    mv_err err = {0};
    CHECK_CODE(mv_message_count(f.svc, &u, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    json_decref(m);
    fixture_close(&f);
}

STORE_TEST(equal_created_at_pages_are_ordered_by_id_descending) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "ties.db"));
    json_t *a = create_to(&f, "u1", "u2", NULL);
    json_t *b = create_to(&f, "u1", "u2", NULL);
    json_t *c = create_to(&f, "u1", "u2", NULL);
    mv_user u = {.id = "u1"};
    mv_code rc;
    char *next = NULL;
    json_t *p1 = list(&f, &u, json_integer(2), NULL, NULL, &next, &rc);
    REQUIRE(json_array_size(p1) == 2 && next);
    CHECK_STR(mv_json_str(json_array_get(p1, 0), "id"), mv_json_str(c, "id"));
    CHECK_STR(mv_json_str(json_array_get(p1, 1), "id"), mv_json_str(b, "id"));
    char *next2 = NULL;
    json_t *p2 = list(&f, &u, json_integer(2), NULL, next, &next2, &rc);
    REQUIRE(json_array_size(p2) == 1);
    CHECK_STR(mv_json_str(json_array_get(p2, 0), "id"), mv_json_str(a, "id"));
    CHECK(next2 == NULL);
    json_t *s = list(&f, &u, json_integer(2), json_integer(2), NULL, NULL, &rc);
    CHECK_INT(json_array_size(s), 1);
    json_decref(s);
    free(next);
    json_decref(p1);
    json_decref(p2);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    fixture_close(&f);
}

STORE_TEST(limits_are_clamped_and_non_integers_rejected) {
    mv_service_options o = {.default_list_limit = 2, .max_list_limit = 2};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "clamp.db", &o));
    for (int i = 0; i < 3; i++)
        json_decref(create_to(&f, "u1", "u2", NULL));
    mv_user u = {.id = "u1"};
    mv_code rc;
    json_t *p;
    p = list(&f, &u, json_integer(0), NULL, NULL, NULL, &rc);
    CHECK_INT(json_array_size(p), 1);
    json_decref(p);
    p = list(&f, &u, json_integer(-10), NULL, NULL, NULL, &rc);
    CHECK_INT(json_array_size(p), 1);
    json_decref(p);
    p = list(&f, &u, json_integer(100), NULL, NULL, NULL, &rc);
    CHECK_INT(json_array_size(p), 2);
    json_decref(p);
    p = list(&f, &u, json_integer(2), json_integer(-10), NULL, NULL, &rc);
    CHECK_INT(json_array_size(p), 2);
    json_decref(p);
    p = list(&f, &u, json_real(1.5), NULL, NULL, NULL, &rc);
    CHECK_INT(rc, MV_INVALID_PAGINATION);
    CHECK(p == NULL);
    p = list(&f, &u, NULL, json_real(1.5), NULL, NULL, &rc);
    CHECK_INT(rc, MV_INVALID_PAGINATION);
    p = list(&f, &u, json_string("10"), NULL, NULL, NULL, &rc);
    CHECK_INT(rc, MV_INVALID_PAGINATION);
    p = list(&f, &u, NULL, NULL, "not-a-cursor!", NULL, &rc);
    CHECK_INT(rc, MV_INVALID_PAGINATION);
    fixture_close(&f);
}

TEST(service_limits_are_validated_with_the_reference_messages) {
    mv_store *s = NULL;
    mv_registry *r = mv_registry_new();
    mv_store_options so = {.allow_memory = true};
    REQUIRE(mv_store_open("sqlite::memory:", &so, &s, NULL) == MV_OK);
    mv_service *svc = NULL;
    mv_err err = {0};
    mv_service_options o = {.store = s, .registry = r, .max_list_limit = -1};
    CHECK_CODE(mv_service_new(&o, &svc, &err), MV_INVALID_PAGINATION, &err);
    CHECK_STR(err.message, "maxListLimit must be at least 1");
    o = (mv_service_options){
        .store = s, .registry = r, .default_list_limit = 11, .max_list_limit = 10};
    CHECK_CODE(mv_service_new(&o, &svc, &err), MV_INVALID_PAGINATION, &err);
    CHECK_STR(err.message, "defaultListLimit must be less than or equal to maxListLimit");
    mv_registry_free(r);
    mv_store_close(s);
}

STORE_TEST(get_returns_only_visible_messages) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "get.db"));
    json_t *m = create_to(&f, "u1", "u2", NULL);
    mv_user u2 = {.id = "u2"}, u3 = {.id = "u3"};
    json_t *got = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_get(f.svc, mv_json_str(m, "id"), &u2, &got, &err), MV_OK, &err);
    json_decref(got);
    CHECK_CODE(mv_message_get(f.svc, mv_json_str(m, "id"), &u3, &got, &err), MV_MESSAGE_NOT_FOUND,
               &err);
    CHECK_CODE(mv_message_get(f.svc, "507f1f77bcf86cd799439011", &u2, &got, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    json_decref(m);
    fixture_close(&f);
}

STORE_TEST(get_actions_follows_the_reference_order) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "getactions.db"));
    json_t *m = create_to(&f, "u1", "u2", NULL);
    const char *id = mv_json_str(m, "id");
    mv_user u2 = {.id = "u2"}, u3 = {.id = "u3"}, blank = {.id = "  "}, admin = {.id = "admin1"};
    json_t *out = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_actions(f.svc, id, MV_RECEIVER, &u2, false, &out, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(out, "uiTemplate"), "default-message");
    json_t *acts = json_object_get(out, "actions");
    REQUIRE(json_array_size(acts) == 2);
    CHECK_STR(mv_json_str(json_array_get(acts, 0), "actionCd"), "approve");
    CHECK_STR(mv_json_str(json_array_get(acts, 0), "name"), "Approve W");
    json_decref(out);
    CHECK_CODE(mv_message_actions(f.svc, id, MV_RECEIVER, &u3, false, &out, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    CHECK_CODE(mv_message_actions(f.svc, id, MV_RECEIVER, &blank, false, &out, &err),
               MV_INVALID_USER, &err);
    CHECK_CODE(mv_message_actions(f.svc, id, MV_RECEIVER, &admin, true, &out, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(out, "actions")), 0);
    json_decref(out);
    CHECK_CODE(mv_message_actions(f.svc, id, MV_SENDER, &u2, false, &out, &err),
               MV_MESSAGE_NOT_FOUND, &err);
    mv_user u1 = {.id = "u1"};
    CHECK_CODE(mv_message_actions(f.svc, id, MV_SENDER, &u1, false, &out, &err), MV_OK, &err);
    CHECK_INT(json_array_size(json_object_get(out, "actions")), 1);
    json_decref(out);
    json_t *params = json_pack("{s:s,s:{s:s,s:s}}", "toUser", "u2", "receiverContent", "title",
                               "Hi", "long", "there");
    json_t *n;
    REQUIRE(mv_notification_create(f.svc, params, &n, &err) == MV_OK);
    CHECK_CODE(mv_message_actions(f.svc, mv_json_str(n, "id"), MV_RECEIVER, &u2, false, &out, &err),
               MV_OK, &err);
    CHECK_STR(mv_json_str(out, "uiTemplate"), "notification");
    CHECK_INT(json_array_size(json_object_get(out, "actions")), 0);
    json_decref(out);
    json_decref(n);
    json_decref(params);
    json_decref(m);
    fixture_close(&f);
}

STORE_TEST(null_recipient_never_matches_the_user_named_null) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "nullid.db"));
    json_t *m = create_to(&f, "u1", NULL, NULL);
    mv_user nul = {.id = "null"};
    json_t *out = NULL;
    mv_err err = {0};
    CHECK_CODE(
        mv_message_actions(f.svc, mv_json_str(m, "id"), MV_RECEIVER, &nul, false, &out, &err),
        MV_MESSAGE_NOT_FOUND, &err);
    json_decref(m);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(visibility_covers_sender_recipient_and_roles_without_duplicates,
                     a_user_with_64_roles_sees_every_message_once_across_pages_and_counts,
                     a_message_to_256_roles_is_created_and_257_roles_are_refused,
                     forty_admin_roles_are_copied_onto_a_message_without_roles,
                     equal_created_at_pages_are_ordered_by_id_descending,
                     limits_are_clamped_and_non_integers_rejected,
                     service_limits_are_validated_with_the_reference_messages,
                     get_returns_only_visible_messages, get_actions_follows_the_reference_order,
                     null_recipient_never_matches_the_user_named_null);
}
