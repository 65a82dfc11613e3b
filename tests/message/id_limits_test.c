/* id_limits_test.c — the one length limit for user ids, roles and tenants (MV_MAX_ID_BYTES) in
 * the library, on each store: one byte over it is MV_INVALID_ARGUMENT naming the field, on every
 * entry point (create and its items, notifications, list, count, get, marks, actions, the
 * service's adminRoles) and nothing is stored; at the limit everything is stored and found —
 * on PostgreSQL too, whose index entries are what the limit keeps small. */
#include "message/fixture.h"
#include "missive/inbox.h"

#define MAX_ROLES 256 /* roles per message, as documented */

/* A prepare that takes the item's ids from the payload as they are (toUser, fromUser, toRoles). */
static mv_code ids_prepare(void *ctx, const mv_prepare_input *in, json_t **items, mv_err *err) {
    (void)ctx;
    (void)err;
    json_t *item = json_pack("{s:O}", "payload", in->payload);
    static const char *const keys[] = {"toUser", "fromUser", "toRoles"};
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(in->payload, keys[i]))
            json_object_set(item, keys[i], json_object_get(in->payload, keys[i]));
    *items = item;
    return MV_OK;
}

static int open_ids(fixture *f, const char *kind, const char *name) {
    if (!fixture_open(f, kind, name)) return 0;
    json_t *t = json_loads("{\"templateCd\": \"ids\", \"receiverContent\": {\"title\": \"hi\"},"
                           " \"actions\": [{\"actionCd\": \"ok\", \"name\": \"OK\","
                           " \"variant\": \"primary\", \"receiver\": true}]}",
                           0, NULL);
    mv_err err = {0};
    mv_code rc = mv_registry_register(f->registry, t, "<ids>", &err);
    json_decref(t);
    mv_service_set_prepare(f->svc, "ids", ids_prepare, NULL);
    return rc == MV_OK;
}

/* n bytes, not all alike (a repeated byte would compress into a small index entry) */
static char *id_of(size_t n, char tag) {
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('!' + (i * 7919 + (size_t)tag * 31) % 94);
    s[0] = tag;
    s[n] = '\0';
    return s;
}

/* Creates one "ids" message as from, with the payload (freed here) and key (may be NULL). */
static mv_code create_ids(fixture *f, const mv_user *from, json_t *payload, const char *key,
                          mv_err *err) {
    json_t *id = key ? json_string(key) : NULL, *m = NULL;
    mv_create_request req = {
        .template_cd = "ids", .user = from, .payload = payload, .client_request_id = id};
    mv_err_clear(err);
    mv_code rc = mv_message_create(f->svc, &req, &m, NULL, err);
    json_decref(m);
    json_decref(payload);
    json_decref(id);
    return rc;
}

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

#define CHECK_INVALID(call, field)                                                                 \
    do {                                                                                           \
        mv_err_clear(&err);                                                                        \
        CHECK_CODE((call), MV_INVALID_ARGUMENT, &err);                                             \
        CHECK(starts_with(err.message, field " must be at most 255 bytes (it has 256)"));          \
        if (!starts_with(err.message, field " must")) fprintf(stderr, "  got: %s\n", err.message); \
    } while (0)

STORE_TEST(an_id_one_byte_over_the_limit_is_invalid_naming_the_field_and_nothing_is_stored) {
    fixture f;
    REQUIRE(open_ids(&f, kind, "ids_over"));
    char *over = id_of(MV_MAX_ID_BYTES + 1, 'o');
    mv_user ana = {.id = "ana"};
    mv_err err = {0};
    CHECK_INVALID(create_ids(&f, &ana, json_pack("{s:s}", "toUser", over), NULL, &err), "toUser");
    CHECK(strstr(err.message, "(message 0 of template \"ids\")") != NULL);
    CHECK_INVALID(
        create_ids(&f, &ana, json_pack("{s:s,s:s}", "toUser", "bob", "fromUser", over), NULL, &err),
        "fromUser");
    CHECK_INVALID(create_ids(&f, &ana, json_pack("{s:[s,s,s,s]}", "toRoles", "a", "b", "c", over),
                             NULL, &err),
                  "toRoles[3]");
    /* the caller itself: its id, a role, its tenant */
    const char *roles[] = {"hosts", over};
    mv_user long_id = {.id = over}, long_role = {.id = "ana", .roles = roles, .nroles = 2},
            long_tenant = {.id = "ana", .tenant = over};
    CHECK_INVALID(create_ids(&f, &long_id, json_pack("{s:s}", "toUser", "bob"), NULL, &err),
                  "user.id");
    CHECK_INVALID(create_ids(&f, &long_role, json_pack("{s:s}", "toUser", "bob"), NULL, &err),
                  "user.roles[1]");
    CHECK_INVALID(create_ids(&f, &long_tenant, json_pack("{s:s}", "toUser", "bob"), NULL, &err),
                  "user.tenant");
    mv_user payer = {.id = over};
    json_t *payload = json_pack("{s:s}", "toUser", "bob"), *m = NULL;
    mv_create_request paid = {
        .template_cd = "ids", .user = &ana, .payer = &payer, .payload = payload};
    CHECK_INVALID(mv_message_create(f.svc, &paid, &m, NULL, &err), "payer.id");
    json_decref(payload);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    CHECK_INT(fixture_rows(f.store, 'r'), 0);
    /* with a key the item's failure is definitive: recorded and replayed, no message stored */
    CHECK_INVALID(create_ids(&f, &ana, json_pack("{s:s}", "toUser", over), "k-1", &err), "toUser");
    CHECK_CODE(create_ids(&f, &ana, json_pack("{s:s}", "toUser", over), "k-1", &err),
               MV_CLIENT_REQUEST_FAILED, &err);
    CHECK(strstr(err.message, "toUser must be at most 255 bytes") != NULL);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);

    /* reads and marks refuse the same callers before looking at the store */
    json_t *limit = json_integer(10), *msgs = NULL;
    mv_list_request lr = {.user = &long_role, .limit = limit};
    char *next = NULL;
    CHECK_INVALID(mv_message_list(f.svc, &lr, &msgs, &next, &err), "user.roles[1]");
    json_decref(limit);
    int64_t count = -1;
    CHECK_INVALID(mv_message_count(f.svc, &long_tenant, &count, &err), "user.tenant");
    CHECK_INVALID(mv_message_get(f.svc, "0123456789abcdef01234567", &long_id, &msgs, &err),
                  "user.id");
    char *text = NULL;
    size_t len = 0;
    CHECK_INVALID(
        mv_message_get_text(f.svc, "0123456789abcdef01234567", &long_role, &text, &len, &err),
        "user.roles[1]");
    CHECK_INVALID(
        mv_message_mark(f.svc, "0123456789abcdef01234567", &long_id, MV_MARK_READ, &msgs, &err),
        "user.id");
    mv_action_request ar = {
        .message_id = "0123456789abcdef01234567", .action_cd = "ok", .user = &long_tenant};
    CHECK_INVALID(mv_action_handle(f.svc, &ar, &msgs, &err), "user.tenant");

    /* notifications: their recipients and tenant */
    static const char *const fields[] = {"toUser", "fromUser", "toRoles[1]", "tenantId"};
    for (size_t i = 0; i < 4; i++) {
        json_t *p = json_pack("{s:{s:s},s:s}", "receiverContent", "title", "t", "toUser", "bob");
        if (i == 0) json_object_set_new(p, "toUser", json_string(over));
        if (i == 1) json_object_set_new(p, "fromUser", json_string(over));
        if (i == 2) json_object_set_new(p, "toRoles", json_pack("[s,s]", "hosts", over));
        if (i == 3) json_object_set_new(p, "tenantId", json_string(over));
        json_t *n = NULL;
        mv_err_clear(&err);
        CHECK_CODE(mv_notification_create(f.svc, p, &n, &err), MV_INVALID_ARGUMENT, &err);
        CHECK(starts_with(err.message, fields[i]));
        json_decref(p);
    }
    CHECK_INT(fixture_rows(f.store, 'm'), 0);

    /* a service whose adminRoles holds one */
    const char *admin[] = {"admins", over};
    mv_service_options o = {
        .store = f.store, .registry = f.registry, .admin_roles = admin, .nadmin_roles = 2};
    mv_service *svc = NULL;
    CHECK_INVALID(mv_service_new(&o, &svc, &err), "adminRoles[1]");
    CHECK(svc == NULL);
    free(over);
    fixture_close(&f);
}

STORE_TEST(ids_at_the_limit_are_stored_and_found_on_both_stores) {
    fixture f;
    REQUIRE(open_ids(&f, kind, "ids_at"));
    char *from = id_of(MV_MAX_ID_BYTES, 'f'), *to = id_of(MV_MAX_ID_BYTES, 't'),
         *tenant = id_of(MV_MAX_ID_BYTES, 'n');
    for (char *p = tenant; *p; p++) /* a tenant is a token: no spaces */
        if (*p == ' ') *p = '_';
    /* a message from and to the longest user ids, to 256 roles of 255 bytes (its role set, 66 kB,
     * keys the inbox counters: by its digest) */
    json_t *roles = json_array();
    char *role[MAX_ROLES];
    for (int i = 0; i < MAX_ROLES; i++) {
        role[i] = id_of(MV_MAX_ID_BYTES, (char)('A' + i % 26));
        for (int d = 0, v = i; d < 4; d++, v /= 10) /* distinct: its number in 4 digits */
            role[i][4 - d] = (char)('0' + v % 10);
        json_array_append_new(roles, json_string(role[i]));
    }
    mv_user sender = {.id = from, .tenant = tenant};
    mv_err err = {0};
    json_t *payload = json_pack("{s:s,s:O}", "toUser", to, "toRoles", roles);
    CHECK_CODE(create_ids(&f, &sender, payload, "k-longest", &err), MV_OK, &err);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    /* each finds it: the sender, the recipient, a member of the last role, all in that tenant */
    const char *last_role[] = {role[MAX_ROLES - 1]};
    mv_user who[3] = {{.id = from, .tenant = tenant},
                      {.id = to, .tenant = tenant},
                      {.id = "member", .roles = last_role, .nroles = 1, .tenant = tenant}};
    for (int w = 0; w < 3; w++) {
        json_t *limit = json_integer(10), *msgs = NULL;
        mv_list_request lr = {.user = &who[w], .limit = limit};
        char *next = NULL;
        CHECK_CODE(mv_message_list(f.svc, &lr, &msgs, &next, &err), MV_OK, &err);
        CHECK_INT(json_array_size(msgs), 1);
        int64_t count = -1;
        CHECK_CODE(mv_message_count(f.svc, &who[w], &count, &err), MV_OK, &err);
        CHECK_INT(count, 1);
        json_t *got = NULL;
        if (w == 1) {
            CHECK_CODE(mv_message_mark(f.svc, mv_json_str(json_array_get(msgs, 0), "id"), &who[w],
                                       MV_MARK_READ, &got, &err),
                       MV_OK, &err);
            json_decref(got);
        }
        json_decref(msgs);
        json_decref(limit);
        free(next);
    }
    /* the same key again replays (its reservation row holds the longest owner) */
    CHECK_CODE(create_ids(&f, &sender, json_pack("{s:s,s:O}", "toUser", to, "toRoles", roles),
                          "k-longest", &err),
               MV_OK, &err);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    json_decref(roles);
    for (int i = 0; i < MAX_ROLES; i++)
        free(role[i]);
    free(from);
    free(to);
    free(tenant);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(
        an_id_one_byte_over_the_limit_is_invalid_naming_the_field_and_nothing_is_stored,
        ids_at_the_limit_are_stored_and_found_on_both_stores);
}
