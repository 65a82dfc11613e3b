/* fixture.h — a message service on a fresh store of a given kind (see tests/support/stores.h)
 * with the reference's `svc-test` template, for the message tests. Header-only so each test
 * binary stays self-contained. */
#ifndef MISSIVE_TEST_MESSAGE_FIXTURE_H
#define MISSIVE_TEST_MESSAGE_FIXTURE_H

#include "missive/message.h"
#include "store/db.h"
#include "support/stores.h"

static const char SQL_FIXTURE_COUNT_MESSAGES[] = "SELECT COUNT(*) FROM messages";
static const char SQL_FIXTURE_COUNT_REQUESTS[] = "SELECT COUNT(*) FROM message_requests";

typedef struct {
    const char *sql;
    int64_t n;
} fixture_count_arg;

static inline mv_code fixture_count_tx(mv_db *db, void *ctx, mv_err *err) {
    fixture_count_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, a->sql, &st, err);
    if (rc) return rc;
    if (mv_stmt_step(st, err) == 1) a->n = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return MV_OK;
}

/* Rows in messages (which = 'm') or message_requests ('r'). */
static inline int64_t fixture_rows(mv_store *store, char which) {
    fixture_count_arg a = {which == 'm' ? SQL_FIXTURE_COUNT_MESSAGES : SQL_FIXTURE_COUNT_REQUESTS,
                           -1};
    mv_store_read(store, fixture_count_tx, &a, NULL);
    return a.n;
}

static const char *SVC_TEST_TEMPLATE =
    "{\"templateCd\": \"svc-test\", \"type\": \"request\","
    " \"senderContent\": {\"title\": \"Send Title\", \"long\": \"Send Long\", \"short\": \"Send "
    "Short\"},"
    " \"receiverContent\": {\"title\": \"Recv Title\", \"long\": \"Recv Long {{name}}\", "
    "\"short\": \"Recv Short\"},"
    " \"uiTemplate\": \"default-message\","
    " \"actions\": [{\"actionCd\": \"approve\", \"name\": \"Approve {{name}}\", \"variant\": "
    "\"success\","
    "   \"receiver\": true, \"senderNotification\": {\"title\": \"Approved {{name}}\", \"long\": "
    "\"Result {{result}}\"}},"
    "  {\"actionCd\": \"reject\", \"name\": \"Reject\", \"variant\": \"danger\", \"receiver\": "
    "true},"
    "  {\"actionCd\": \"withdraw\", \"name\": \"Withdraw\", \"variant\": \"dark\", \"sender\": "
    "true}]}";

typedef struct fixture {
    mv_store *store;
    mv_registry *registry;
    mv_service *svc;
    int64_t now;
    mv_clock clock;
    char url[600];
} fixture;

/* prepareMessage of the reference fixture: templateData {name}, fromUser, toUser, payload. */
static inline mv_code fixture_prepare(void *ctx, const mv_prepare_input *in, json_t **items,
                                      mv_err *err) {
    (void)ctx;
    (void)err;
    const json_t *p = in->payload;
    json_t *item = json_pack("{s:{s:O},s:s,s:O}", "templateData", "name",
                             json_object_get(p, "name") ? json_object_get(p, "name") : json_null(),
                             "fromUser", in->user->id, "payload", p);
    json_t *to = json_object_get(p, "toUser");
    json_object_set(item, "toUser", to ? to : json_null());
    if (json_object_get(p, "toRoles"))
        json_object_set(item, "toRoles", json_object_get(p, "toRoles"));
    *items = item;
    return MV_OK;
}

/* Opens the fixture on the store at url (migrated here) with store options so (may be NULL). */
static inline int fixture_open_url(fixture *f, const char *url, const mv_store_options *so,
                                   mv_service_options *opts) {
    memset(f, 0, sizeof *f);
    if (!url) return 0;
    snprintf(f->url, sizeof f->url, "%s", url);
    mv_err err = {0};
    if (mv_store_open(f->url, so, &f->store, &err) != MV_OK ||
        mv_store_migrate(f->store, NULL, &err) != MV_OK) {
        fprintf(stderr, "fixture: %s\n", err.message);
        return 0;
    }
    f->registry = mv_registry_new();
    json_t *t = json_loads(SVC_TEST_TEMPLATE, 0, NULL);
    if (mv_registry_register(f->registry, t, "<svc-test>", &err) != MV_OK) {
        fprintf(stderr, "fixture template: %s\n", err.message);
        json_decref(t);
        return 0;
    }
    json_decref(t);
    f->now = 1700000000000LL;
    f->clock = mv_manual_clock(&f->now);
    mv_service_options o = opts ? *opts : (mv_service_options){0};
    o.store = f->store;
    o.registry = f->registry;
    if (!o.clock) o.clock = &f->clock;
    if (mv_service_new(&o, &f->svc, &err) != MV_OK) {
        fprintf(stderr, "fixture service: %s\n", err.message);
        return 0;
    }
    mv_service_set_prepare(f->svc, "svc-test", fixture_prepare, NULL);
    return 1;
}

/* Opens the fixture on a fresh store of that kind ("sqlite" or "postgres"); name labels it. */
static inline int fixture_open_opts(fixture *f, const char *kind, const char *name,
                                    mv_service_options *opts) {
    return fixture_open_url(f, test_store_url(kind, name), NULL, opts);
}

static inline int fixture_open(fixture *f, const char *kind, const char *name) {
    return fixture_open_opts(f, kind, name, NULL);
}

static inline void fixture_close(fixture *f) {
    mv_service_free(f->svc);
    mv_registry_free(f->registry);
    mv_store_close(f->store);
}

/* Creates one svc-test message from `from` to `to` (JSON payload extras may be NULL). */
static inline json_t *fixture_create(fixture *f, const char *from, const char *to, const char *crid,
                                     mv_code *rc_out) {
    mv_user u = {.id = from};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Widget", "toUser", to);
    json_t *id = crid ? json_string(crid) : NULL;
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = id};
    json_t *msgs = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_create(f->svc, &req, &msgs, NULL, &err);
    if (rc_out) *rc_out = rc;
    json_decref(payload);
    json_decref(id);
    return msgs;
}

static inline const char *first_id(const json_t *msgs) {
    return mv_json_str(json_array_get(msgs, 0), "id");
}

#endif
