/* create_test.c — createMessage, idempotent create, payments and compensation, notifications
 * (SEMANTICS §2.2, ported to SQLite files). */
#include <pthread.h>
#include <sys/wait.h>

#include "fixture.h"

STORE_TEST(unknown_template_is_not_found_and_reserves_nothing) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "unknown.db"));
    mv_user u = {.id = "u1"};
    json_t *id = json_string("req-1");
    mv_create_request req = {.template_cd = "unknown", .user = &u, .client_request_id = id};
    json_t *msgs;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(f.svc, &req, &msgs, NULL, &err), MV_TEMPLATE_NOT_FOUND, &err);
    CHECK_STR(err.message, "template \"unknown\" not found");
    CHECK_INT(fixture_rows(f.store, 'r'), 0);
    json_decref(id);
    fixture_close(&f);
}

STORE_TEST(create_renders_content_from_template_data_and_stores_it) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "create.db"));
    mv_code rc;
    json_t *msgs = fixture_create(&f, "u1", "u2", NULL, &rc);
    CHECK_INT(rc, MV_OK);
    REQUIRE(json_array_size(msgs) == 1);
    json_t *m = json_array_get(msgs, 0);
    CHECK_STR(mv_json_str(m, "templateCd"), "svc-test");
    CHECK_STR(mv_json_str(m, "type"), "request");
    CHECK_STR(mv_json_str(m, "fromUser"), "u1");
    CHECK_STR(mv_json_str(m, "toUser"), "u2");
    CHECK_STR(mv_json_str(json_object_get(m, "receiverContent"), "long"), "Recv Long Widget");
    CHECK_STR(mv_json_str(m, "actionState"), "active");
    CHECK(mv_valid_message_id(mv_json_str(m, "id")));
    json_t *stored;
    mv_err err = {0};
    CHECK_CODE(mv_message_get(f.svc, first_id(msgs), NULL, &stored, &err), MV_OK, &err);
    CHECK(json_equal(stored, m));
    json_decref(stored);
    json_decref(msgs);
    fixture_close(&f);
}

STORE_TEST(missing_user_is_invalid_user) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "nouser.db"));
    mv_user blank = {.id = "   "};
    mv_create_request req = {.template_cd = "svc-test", .user = &blank};
    json_t *msgs;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(f.svc, &req, &msgs, NULL, &err), MV_INVALID_USER, &err);
    CHECK_STR(err.message, "user._id must be a non-empty string or ObjectId");
    fixture_close(&f);
}

STORE_TEST(same_client_request_id_replays_and_is_scoped_by_user_and_template) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "idem.db"));
    mv_code rc;
    json_t *a = fixture_create(&f, "u1", "u2", "req-1", &rc);
    json_t *b = fixture_create(&f, "u1", "u2", "req-1", &rc);
    REQUIRE(a && b);
    CHECK_STR(first_id(a), first_id(b));
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    json_t *c = fixture_create(&f, "u3", "u2", "req-1", &rc);
    REQUIRE(c);
    CHECK(strcmp(first_id(a), first_id(c)) != 0);
    CHECK_STR(mv_json_str(json_array_get(c, 0), "fromUser"), "u3");
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    json_t *d = fixture_create(&f, "u1", "u2", " req-1 ", &rc);
    CHECK_STR(first_id(a), first_id(d));
    json_t *e = fixture_create(&f, "u1", "u2", "REQ-1", &rc);
    CHECK(strcmp(first_id(a), first_id(e)) != 0);
    CHECK_INT(fixture_rows(f.store, 'm'), 3);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    json_decref(e);
    fixture_close(&f);
}

STORE_TEST(replay_flag_is_set_only_for_replays) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "flag.db"));
    mv_user u = {.id = "u1"};
    json_t *payload = json_pack("{s:s,s:s}", "name", "W", "toUser", "u2");
    json_t *id = json_string("r");
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = id};
    json_t *m1, *m2;
    bool replayed = true;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(f.svc, &req, &m1, &replayed, &err), MV_OK, &err);
    CHECK(!replayed);
    CHECK_CODE(mv_message_create(f.svc, &req, &m2, &replayed, &err), MV_OK, &err);
    CHECK(replayed);
    CHECK(json_equal(m1, m2));
    json_decref(m1);
    json_decref(m2);
    json_decref(payload);
    json_decref(id);
    fixture_close(&f);
}

STORE_TEST(same_client_request_id_with_a_different_payload_is_a_mismatch) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "mismatch.db"));
    mv_code rc;
    json_t *a = fixture_create(&f, "u1", "u2", "req-1", &rc);
    json_t *b = fixture_create(&f, "u1", "u9", "req-1", &rc);
    CHECK_INT(rc, MV_CLIENT_REQUEST_MISMATCH);
    CHECK(b == NULL);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    json_decref(a);
    fixture_close(&f);
}

STORE_TEST(invalid_client_request_ids_have_the_reference_messages) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "badid.db"));
    char out[129];
    mv_err err = {0};
    json_t *v = json_string("");
    CHECK_CODE(mv_client_request_id_normalize(v, out, &err), MV_INVALID_CLIENT_REQUEST_ID, &err);
    CHECK_STR(err.message, "clientRequestId must be a non-empty string after trimming whitespace");
    json_decref(v);
    v = json_string("   ");
    CHECK_CODE(mv_client_request_id_normalize(v, out, &err), MV_INVALID_CLIENT_REQUEST_ID, &err);
    json_decref(v);
    v = json_integer(123);
    CHECK_CODE(mv_client_request_id_normalize(v, out, &err), MV_INVALID_CLIENT_REQUEST_ID, &err);
    CHECK_STR(err.message, "clientRequestId must be a string when provided");
    json_decref(v);
    v = json_null();
    CHECK_CODE(mv_client_request_id_normalize(v, out, &err), MV_INVALID_CLIENT_REQUEST_ID, &err);
    json_decref(v);
    char long_id[130];
    memset(long_id, 'x', 129);
    long_id[129] = 0;
    v = json_string(long_id);
    CHECK_CODE(mv_client_request_id_normalize(v, out, &err), MV_INVALID_CLIENT_REQUEST_ID, &err);
    CHECK_STR(err.message, "clientRequestId must be at most 128 characters");
    json_decref(v);
    long_id[128] = 0;
    v = json_string(long_id);
    CHECK_CODE(mv_client_request_id_normalize(v, out, &err), MV_OK, &err);
    json_decref(v);
    CHECK_INT(fixture_rows(f.store, 'r'), 0);
    fixture_close(&f);
}

static mv_code batch_prepare(void *ctx, const mv_prepare_input *in, json_t **items, mv_err *err) {
    (void)err;
    int *calls = ctx;
    if (calls) __atomic_fetch_add(calls, 1, __ATOMIC_SEQ_CST);
    *items = json_pack("[{s:s,s:{s:s}},{s:s,s:{s:s}}]", "toUser", "a", "templateData", "name", "A",
                       "toUser", "b", "templateData", "name", "B");
    (void)in;
    return MV_OK;
}

static mv_code null_prepare(void *ctx, const mv_prepare_input *in, json_t **items, mv_err *err) {
    (void)ctx;
    (void)in;
    (void)err;
    *items = NULL;
    return MV_OK;
}

STORE_TEST(batch_replay_returns_the_same_ids_in_order) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "batch.db"));
    mv_service_set_prepare(f.svc, "svc-test", batch_prepare, NULL);
    mv_code rc;
    json_t *a = fixture_create(&f, "u1", "x", "batch-1", &rc);
    json_t *b = fixture_create(&f, "u1", "x", "batch-1", &rc);
    REQUIRE(json_array_size(a) == 2 && json_array_size(b) == 2);
    CHECK_STR(mv_json_str(json_array_get(a, 0), "id"), mv_json_str(json_array_get(b, 0), "id"));
    CHECK_STR(mv_json_str(json_array_get(a, 1), "id"), mv_json_str(json_array_get(b, 1), "id"));
    CHECK_STR(mv_json_str(json_array_get(b, 0), "toUser"), "a");
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    json_decref(a);
    json_decref(b);
    fixture_close(&f);
}

STORE_TEST(zero_item_request_replays_empty_with_one_completed_reservation) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "empty.db"));
    mv_service_set_prepare(f.svc, "svc-test", null_prepare, NULL);
    mv_code rc;
    json_t *a = fixture_create(&f, "u1", "x", "idem-empty", &rc);
    json_t *b = fixture_create(&f, "u1", "x", "idem-empty", &rc);
    CHECK_INT(json_array_size(a), 0);
    CHECK_INT(json_array_size(b), 0);
    CHECK(a && b);
    CHECK_INT(fixture_rows(f.store, 'r'), 1);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    json_decref(a);
    json_decref(b);
    fixture_close(&f);
}

/* ---- concurrency: threads and processes agree on one set of messages ---- */

typedef struct {
    fixture *f;
    char ids[2][25];
    mv_code rc;
    const char *crid, *to; /* default "race-1", "x" */
} racer;

static void *race_create(void *arg) {
    racer *r = arg;
    json_t *m =
        fixture_create(r->f, "u1", r->to ? r->to : "x", r->crid ? r->crid : "race-1", &r->rc);
    for (size_t i = 0; i < 2 && i < json_array_size(m); i++)
        mv_strlcpy(r->ids[i], mv_json_str(json_array_get(m, i), "id"), 25);
    json_decref(m);
    return NULL;
}

typedef struct {
    int sessions, expires;
} pay_counts;

static mv_code pay_create(void *ctx, const char *payer, const char *code, const json_t *args,
                          const char *key, char **session, mv_err *err) {
    (void)payer;
    (void)code;
    (void)args;
    (void)err;
    pay_counts *c = ctx;
    int n = __atomic_add_fetch(&c->sessions, 1, __ATOMIC_SEQ_CST);
    char buf[64];
    snprintf(buf, sizeof buf, "session-%d-%.8s", n, key);
    *session = strdup(buf);
    return MV_OK;
}

static mv_code pay_expire(void *ctx, const char *session, mv_err *err) {
    (void)session;
    (void)err;
    pay_counts *c = ctx;
    __atomic_add_fetch(&c->expires, 1, __ATOMIC_SEQ_CST);
    return MV_OK;
}

STORE_TEST(sixteen_threads_with_one_client_request_id_create_one_set_and_one_payment) {
    pay_counts counts = {0, 0};
    mv_payment_provider pay = {pay_create, pay_expire, NULL, &counts};
    mv_service_options o = {.payment = &pay, .client_request_poll_ms = 5};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "race.db", &o));
    int prepares = 0;
    mv_service_set_prepare(f.svc, "svc-test", batch_prepare, &prepares);
    json_t *t = json_loads(SVC_TEST_TEMPLATE, 0, NULL);
    json_object_set_new(t, "paymentCd", json_string("deposit"));
    mv_err err = {0};
    REQUIRE(mv_registry_register(f.registry, t, "<svc-test-paid>", &err) == MV_OK);
    json_decref(t);
    racer r[16];
    pthread_t th[16];
    for (int i = 0; i < 16; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].f = &f;
        pthread_create(&th[i], NULL, race_create, &r[i]);
    }
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 16; i++) {
        CHECK_INT(r[i].rc, MV_OK);
        CHECK_STR(r[i].ids[0], r[0].ids[0]);
        CHECK_STR(r[i].ids[1], r[0].ids[1]);
    }
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    CHECK_INT(prepares, 1);
    CHECK_INT(counts.sessions, 2); /* one per item, never repeated */
    CHECK_INT(counts.expires, 0);
    fixture_close(&f);
}

STORE_TEST(two_processes_with_one_client_request_id_agree) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "procs.db"));
    char url[600];
    mv_strlcpy(url, f.url, sizeof url);
    fixture_close(&f);
    int fds[2][2];
    pid_t pids[2];
    for (int p = 0; p < 2; p++) {
        REQUIRE(pipe(fds[p]) == 0);
        pids[p] = fork();
        if (pids[p] == 0) {
            fixture cf;
            memset(&cf, 0, sizeof cf);
            mv_store_open(url, NULL, &cf.store, NULL);
            cf.registry = mv_registry_new();
            json_t *t = json_loads(SVC_TEST_TEMPLATE, 0, NULL);
            mv_registry_register(cf.registry, t, "<t>", NULL);
            json_decref(t);
            mv_service_options o = {
                .store = cf.store, .registry = cf.registry, .client_request_poll_ms = 5};
            mv_service_new(&o, &cf.svc, NULL);
            mv_service_set_prepare(cf.svc, "svc-test", fixture_prepare, NULL);
            mv_code rc;
            json_t *m = fixture_create(&cf, "u1", "u2", "proc-1", &rc);
            const char *id = rc == MV_OK ? first_id(m) : "error";
            if (write(fds[p][1], id, strlen(id)) < 0) _exit(2);
            _exit(rc == MV_OK ? 0 : 1);
        }
        close(fds[p][1]);
    }
    char got[2][32] = {{0}};
    for (int p = 0; p < 2; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(read(fds[p][0], got[p], 31) == 24);
        close(fds[p][0]);
    }
    CHECK_STR(got[0], got[1]);
    mv_store *s;
    REQUIRE(mv_store_open(url, NULL, &s, NULL) == MV_OK);
    CHECK_INT(fixture_rows(s, 'm'), 1);
    mv_store_close(s);
}

/* ---- reservations in odd states ---- */

static const char SQL_PUT_REQUEST[] =
    "INSERT INTO message_requests (client_request_owner_id, template_cd, client_request_id, state, "
    "fingerprint, item_count, lease_owner_id, lease_expires_at, failure_message, created_at, "
    "updated_at) VALUES ('u1', 'svc-test', ?, ?, ?, ?, 'someone', ?, ?, 0, 0)";

typedef struct {
    const char *id, *state, *fingerprint, *failure;
    int64_t count, lease;
} put_arg;

static mv_code put_request_tx(mv_db *db, void *ctx, mv_err *err) {
    put_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_PUT_REQUEST, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "sssiis", a->id, a->state, a->fingerprint, a->count, a->lease, a->failure);
    if (a->count < 0) mv_stmt_bind_null(st, 4);
    int r = mv_stmt_step(st, err);
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

static void fixture_fingerprint(char out[65], const char *to) {
    json_t *payload = json_pack("{s:s,s:s}", "name", "Widget", "toUser", to);
    mv_json_fingerprint(payload, out);
    json_decref(payload);
}

STORE_TEST(live_pending_reservation_with_no_wait_is_pending) {
    mv_service_options o = {.client_request_wait_zero = true};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "pending.db", &o));
    char fp[65];
    fixture_fingerprint(fp, "u2");
    put_arg a = {"p-1", "pending", fp, NULL, -1, f.now + 60000};
    mv_err err = {0};
    REQUIRE(mv_store_write(f.store, put_request_tx, &a, &err) == MV_OK);
    mv_code rc;
    json_t *m = fixture_create(&f, "u1", "u2", "p-1", &rc);
    CHECK_INT(rc, MV_CLIENT_REQUEST_PENDING);
    CHECK(m == NULL);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    /* after the lease expires, exactly this caller takes over */
    f.now += 60001;
    m = fixture_create(&f, "u1", "u2", "p-1", &rc);
    CHECK_INT(rc, MV_OK);
    CHECK_INT(json_array_size(m), 1);
    json_decref(m);
    fixture_close(&f);
}

static mv_code counting_prepare(void *ctx, const mv_prepare_input *in, json_t **items,
                                mv_err *err) {
    __atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
    mv_sleep_ms(20); /* hold the lease a little, so the others really wait */
    return fixture_prepare(NULL, in, items, err);
}

STORE_TEST(an_expired_lease_is_taken_over_by_exactly_one_of_several_callers) {
    mv_service_options o = {.client_request_poll_ms = 5};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "takeover.db", &o));
    int prepares = 0;
    mv_service_set_prepare(f.svc, "svc-test", counting_prepare, &prepares);
    char fp[65];
    fixture_fingerprint(fp, "u2");
    put_arg a = {"t-1", "pending", fp, NULL, -1, f.now - 1}; /* a crashed server's reservation */
    mv_err err = {0};
    REQUIRE(mv_store_write(f.store, put_request_tx, &a, &err) == MV_OK);
    racer r[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].f = &f;
        r[i].crid = "t-1";
        r[i].to = "u2";
        pthread_create(&th[i], NULL, race_create, &r[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(prepares, 1);
    for (int i = 0; i < 8; i++) {
        CHECK_INT(r[i].rc, MV_OK);
        CHECK_STR(r[i].ids[0], r[0].ids[0]);
    }
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    fixture_close(&f);
}

static const char *DECLARATIVE_TEMPLATE =
    "{\"templateCd\": \"decl\", \"receiverContent\": {\"title\": \"Hi {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\", \"fanOut\": \"people\"}, \"actions\": []}";

typedef struct {
    fixture *f;
    const char *payload;
    char first_id[25];
    size_t n;
    mv_code rc;
    const char *key; /* NULL: "decl-1" */
} decl_racer;

static void *decl_create(void *arg) {
    decl_racer *r = arg;
    mv_user u = {.id = "u1"};
    json_t *payload = json_loads(r->payload, 0, NULL);
    json_t *key = json_string(r->key ? r->key : "decl-1");
    mv_create_request req = {
        .template_cd = "decl", .user = &u, .payload = payload, .client_request_id = key};
    json_t *m = NULL;
    mv_err err = {0};
    r->rc = mv_message_create(r->f->svc, &req, &m, NULL, &err);
    r->n = json_array_size(m);
    if (r->n) mv_strlcpy(r->first_id, mv_json_str(json_array_get(m, 0), "id"), 25);
    json_decref(m);
    json_decref(key);
    json_decref(payload);
    return NULL;
}

STORE_TEST(a_declarative_create_is_one_transaction_that_concurrent_duplicates_replay) {
    mv_service_options o = {.client_request_poll_ms = 5};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "decl.db", &o));
    json_t *t = json_loads(DECLARATIVE_TEMPLATE, 0, NULL);
    mv_err err = {0};
    REQUIRE(mv_registry_register(f.registry, t, "<decl>", &err) == MV_OK);
    json_decref(t);
    /* a payload the prepare cannot use is a definitive failure: recorded under its key in the
     * same transaction, as the two-step path records it, so a retry does not run it again */
    decl_racer bad = {&f, "{\"people\": 7}", "", 0, MV_OK, "decl-bad"};
    decl_create(&bad);
    CHECK_INT(bad.rc, MV_PREPARE_FAILED);
    CHECK_INT(fixture_rows(f.store, 'r'), 1);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    decl_create(&bad);
    CHECK_INT(bad.rc, MV_CLIENT_REQUEST_FAILED);
    decl_racer r[12];
    pthread_t th[12];
    const char *good =
        "{\"people\": [{\"to\": \"a\", \"name\": \"A\"}, {\"to\": \"b\", \"name\": \"B\"}]}";
    for (int i = 0; i < 12; i++) {
        r[i] = (decl_racer){&f, good, "", 0, MV_OK};
        pthread_create(&th[i], NULL, decl_create, &r[i]);
    }
    for (int i = 0; i < 12; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 12; i++) {
        CHECK_INT(r[i].rc, MV_OK);
        CHECK_INT(r[i].n, 2);
        CHECK_STR(r[i].first_id, r[0].first_id);
    }
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    CHECK_INT(fixture_rows(f.store, 'r'), 2);
    fixture_close(&f);
}

STORE_TEST(failed_reservation_replays_as_failed) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "failed.db"));
    char fp[65];
    fixture_fingerprint(fp, "u2");
    put_arg a = {"f-1", "failed", fp, "boom", -1, 0};
    mv_err err = {0};
    REQUIRE(mv_store_write(f.store, put_request_tx, &a, &err) == MV_OK);
    mv_code rc;
    json_t *m = fixture_create(&f, "u1", "u2", "f-1", &rc);
    CHECK_INT(rc, MV_CLIENT_REQUEST_FAILED);
    CHECK(m == NULL);
    fixture_close(&f);
}

STORE_TEST(completed_reservation_missing_messages_is_inconsistent) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "incons.db"));
    char fp[65];
    fixture_fingerprint(fp, "u2");
    put_arg a = {"c-1", "completed", fp, NULL, 2, 0};
    mv_err err = {0};
    REQUIRE(mv_store_write(f.store, put_request_tx, &a, &err) == MV_OK);
    mv_user u = {.id = "u1"};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Widget", "toUser", "u2");
    json_t *id = json_string("c-1");
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = id};
    json_t *m;
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_CLIENT_REQUEST_INCONSISTENT,
               &err);
    CHECK(strstr(err.message, "expects item indexes 0..1 but found []") != NULL);
    json_decref(payload);
    json_decref(id);
    fixture_close(&f);
}

/* ---- payments ---- */

typedef struct {
    int mode; /* 0 ok, 1 null session, 2 throw */
    int fail_expire;
    char expired[4][64];
    int nexpired, created;
    int hook_calls;
    char hook_session[64];
} pay_script;

static mv_code script_create(void *ctx, const char *payer, const char *code, const json_t *args,
                             const char *key, char **session, mv_err *err) {
    (void)payer;
    (void)code;
    (void)args;
    (void)key;
    pay_script *p = ctx;
    p->created++;
    if (p->mode == 2) return mv_err_set(err, MV_PAYMENT_FAILED, "provider unavailable");
    if (p->mode == 1) return MV_OK;
    char b[32];
    snprintf(b, sizeof b, "session-%d", p->created);
    *session = strdup(b);
    return MV_OK;
}

static mv_code script_expire(void *ctx, const char *session, mv_err *err) {
    pay_script *p = ctx;
    if (p->nexpired < 4) mv_strlcpy(p->expired[p->nexpired++], session, 64);
    if (p->fail_expire) return mv_err_set(err, MV_PAYMENT_FAILED, "expire failed");
    return MV_OK;
}

static void script_hook(void *ctx, const mv_payment_failure *ev) {
    pay_script *p = ctx;
    p->hook_calls++;
    mv_strlcpy(p->hook_session, ev->session_id, 64);
}

static mv_code second_item_bad_prepare(void *ctx, const mv_prepare_input *in, json_t **items,
                                       mv_err *err) {
    (void)ctx;
    (void)in;
    (void)err;
    /* the second item has 257 roles: building it fails after the first item's session opened */
    json_t *roles = json_array();
    for (int i = 0; i < 257; i++)
        json_array_append_new(roles, json_sprintf("r%d", i));
    *items = json_pack("[{s:s},{s:s,s:o}]", "toUser", "a", "toUser", "b", "toRoles", roles);
    return MV_OK;
}

static fixture *paid_fixture(fixture *f, const char *kind, const char *name, pay_script *p,
                             mv_payment_provider *pay) {
    *pay = (mv_payment_provider){script_create, script_expire, NULL, p};
    mv_service_options o = {
        .payment = pay, .on_payment_compensation_failure = script_hook, .hook_ctx = p};
    if (!fixture_open_opts(f, kind, name, &o)) return NULL;
    json_t *t = json_loads(SVC_TEST_TEMPLATE, 0, NULL);
    json_object_set_new(t, "paymentCd", json_string("deposit"));
    mv_registry_register(f->registry, t, "<paid>", NULL);
    json_decref(t);
    return f;
}

STORE_TEST(null_payment_session_fails_the_request_and_records_it) {
    pay_script p = {.mode = 1};
    mv_payment_provider pay;
    fixture f;
    REQUIRE(paid_fixture(&f, kind, "paynull.db", &p, &pay));
    mv_code rc;
    json_t *m = fixture_create(&f, "u1", "u2", "pay-1", &rc);
    CHECK_INT(rc, MV_PAYMENT_FAILED);
    CHECK(m == NULL);
    CHECK_INT(p.nexpired, 0);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    m = fixture_create(&f, "u1", "u2", "pay-1", &rc);
    CHECK_INT(rc, MV_CLIENT_REQUEST_FAILED);
    fixture_close(&f);
}

STORE_TEST(throwing_payment_provider_fails_with_its_message) {
    pay_script p = {.mode = 2};
    mv_payment_provider pay;
    fixture f;
    REQUIRE(paid_fixture(&f, kind, "paythrow.db", &p, &pay));
    mv_user u = {.id = "u1"};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Widget", "toUser", "u2");
    json_t *id = json_string("pay-2");
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = id};
    json_t *m;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_PAYMENT_FAILED, &err);
    CHECK_STR(err.message, "provider unavailable");
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_CLIENT_REQUEST_FAILED, &err);
    /* the replay says the contract's words: a provider's text may name its URL */
    CHECK_STR(err.message,
              "clientRequestId \"pay-2\" previously failed: payment session creation failed");
    json_decref(payload);
    json_decref(id);
    fixture_close(&f);
}

STORE_TEST(a_failing_batch_expires_every_session_opened_including_earlier_items) {
    pay_script p = {0};
    mv_payment_provider pay;
    fixture f;
    REQUIRE(paid_fixture(&f, kind, "paybatch.db", &p, &pay));
    mv_service_set_prepare(f.svc, "svc-test", second_item_bad_prepare, NULL);
    mv_code rc;
    json_t *m = fixture_create(&f, "u1", "x", "pay-3", &rc);
    CHECK_INT(rc, MV_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK_INT(p.nexpired, 1);
    CHECK_STR(p.expired[0], "session-1");
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    fixture_close(&f);
}

STORE_TEST(a_failing_expire_reports_through_the_hook_and_names_the_session) {
    pay_script p = {.fail_expire = 1};
    mv_payment_provider pay;
    fixture f;
    REQUIRE(paid_fixture(&f, kind, "payexp.db", &p, &pay));
    mv_service_set_prepare(f.svc, "svc-test", second_item_bad_prepare, NULL);
    mv_user u = {.id = "u1"};
    json_t *payload = json_object();
    json_t *id = json_string("payment-compensation-failure");
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = id};
    json_t *m;
    mv_err err = {0};
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_PAYMENT_COMPENSATION_FAILED,
               &err);
    CHECK_STR(err.session_id, "session-1");
    CHECK_STR(err.operation, "expire");
    CHECK(strstr(err.message, "session \"session-1\" during expire") != NULL);
    CHECK(strstr(err.cause, "at most 256 toRoles") != NULL);
    CHECK_INT(p.hook_calls, 1);
    CHECK_STR(p.hook_session, "session-1");
    json_decref(payload);
    json_decref(id);
    fixture_close(&f);
}

STORE_TEST(create_notification_makes_a_generic_notification) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "notify.db"));
    json_t *params = json_pack("{s:s,s:{s:s,s:s}}", "toUser", "u2", "receiverContent", "title",
                               "Hello", "long", "World");
    json_t *m;
    mv_err err = {0};
    CHECK_CODE(mv_notification_create(f.svc, params, &m, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(m, "type"), "notification");
    CHECK_STR(mv_json_str(m, "templateCd"), "__generic-notification__");
    CHECK_STR(mv_json_str(m, "toUser"), "u2");
    CHECK_STR(mv_json_str(json_object_get(m, "receiverContent"), "short"), "");
    CHECK(json_is_null(json_object_get(m, "fromUser")));
    json_decref(m);
    json_decref(params);
    fixture_close(&f);
}

STORE_TEST(gc_removes_completed_reservations_past_retention) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "gc.db"));
    mv_code rc;
    json_decref(fixture_create(&f, "u1", "u2", "gc-1", &rc));
    int64_t removed = -1;
    mv_err err = {0};
    CHECK_CODE(mv_requests_gc(f.store, f.now - 1, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 0);
    CHECK_CODE(mv_requests_gc(f.store, f.now, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 1);
    CHECK_INT(fixture_rows(f.store, 'r'), 0);
    fixture_close(&f);
}

STORE_TEST(a_key_removed_by_gc_creates_fresh_messages_on_both_create_paths) {
    mv_service_options o = {.client_request_poll_ms = 5};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "gc-reuse.db", &o));
    json_t *t = json_loads(DECLARATIVE_TEMPLATE, 0, NULL);
    mv_err err = {0};
    REQUIRE(mv_registry_register(f.registry, t, "<decl>", &err) == MV_OK);
    json_decref(t);
    mv_code rc;
    /* the prepare-hook path */
    json_t *first = fixture_create(&f, "u1", "u2", "gc-k1", &rc);
    CHECK_INT(rc, MV_OK);
    /* the one-transaction declarative path */
    const char *good = "{\"people\": [{\"to\": \"a\", \"name\": \"A\"}]}";
    decl_racer d1 = {&f, good, "", 0, MV_OK};
    decl_create(&d1);
    CHECK_INT(d1.rc, MV_OK);
    int64_t removed = -1;
    CHECK_CODE(mv_requests_gc(f.store, f.now, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 2);
    json_t *second = fixture_create(&f, "u1", "u2", "gc-k1", &rc);
    CHECK_INT(rc, MV_OK);
    CHECK_INT(json_array_size(second), 1);
    CHECK(strcmp(first_id(first), first_id(second)) != 0);
    CHECK_STR(mv_json_str(json_array_get(second, 0), "clientRequestId"), "gc-k1");
    decl_racer d2 = {&f, good, "", 0, MV_OK};
    decl_create(&d2);
    CHECK_INT(d2.rc, MV_OK);
    CHECK_INT(d2.n, 1);
    CHECK(strcmp(d1.first_id, d2.first_id) != 0);
    /* the new use is a request like any other: it replays its own messages, not the old ones */
    bool replayed = false;
    mv_user u = {.id = "u1"};
    json_t *payload = json_pack("{s:s,s:s}", "name", "Widget", "toUser", "u2");
    json_t *key = json_string("gc-k1");
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = key};
    json_t *again = NULL;
    CHECK_CODE(mv_message_create(f.svc, &req, &again, &replayed, &err), MV_OK, &err);
    CHECK(replayed);
    CHECK_STR(first_id(again), first_id(second));
    /* the old messages are still there, with their key as history */
    CHECK_INT(fixture_rows(f.store, 'm'), 4);
    json_decref(again);
    json_decref(key);
    json_decref(payload);
    json_decref(first);
    json_decref(second);
    fixture_close(&f);
}

STORE_TEST(qualifying_messages_queue_one_email_and_rolled_back_creates_queue_none) {
    pay_script p = {.mode = 1}; /* payments fail: the paid template rolls back */
    mv_payment_provider pay = {script_create, script_expire, NULL, &p};
    json_t *exclusions = json_pack("[s]", " recv title ");
    mv_service_options o = {.email = true, .email_exclusions = exclusions, .payment = &pay};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "email.db", &o));
    mv_code rc;
    /* receiver title "Recv Title" is excluded (trimmed, case-insensitive) */
    json_decref(fixture_create(&f, "u1", "u2", NULL, &rc));
    int64_t pending = -1, failed = -1;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_depth(f.store, &pending, &failed, &err), MV_OK, &err);
    CHECK_INT(pending, 0);
    json_t *params = json_pack("{s:s,s:{s:s,s:s,s:s}}", "toUser", "u2", "receiverContent", "title",
                               " Hello ", "long", "World, longer", "short", "W");
    json_t *n = NULL;
    CHECK_CODE(mv_notification_create(f.svc, params, &n, &err), MV_OK, &err);
    CHECK_CODE(mv_outbox_depth(f.store, &pending, &failed, &err), MV_OK, &err);
    CHECK_INT(pending, 1);
    /* a create that fails (payment) rolls back its email row with it */
    json_t *t = json_loads(SVC_TEST_TEMPLATE, 0, NULL);
    json_object_set_new(t, "paymentCd", json_string("deposit"));
    json_object_set_new(json_object_get(t, "receiverContent"), "title", json_string("Pay me"));
    mv_registry_register(f.registry, t, "<paid>", NULL);
    json_decref(t);
    json_decref(fixture_create(&f, "u1", "u2", NULL, &rc));
    CHECK_INT(rc, MV_PAYMENT_FAILED);
    CHECK_CODE(mv_outbox_depth(f.store, &pending, &failed, &err), MV_OK, &err);
    CHECK_INT(pending, 1);
    json_decref(n);
    json_decref(params);
    json_decref(exclusions);
    fixture_close(&f);
}

/* A C prepare that counts its calls: a create refused for a missing field never reaches it. */
static mv_code required_prepare(void *ctx, const mv_prepare_input *in, json_t **items,
                                mv_err *err) {
    (void)err;
    (*(int *)ctx)++;
    *items = json_pack("{s:s,s:O}", "toUser", "host", "payload", in->payload);
    return MV_OK;
}

static mv_code create_required(fixture *f, const char *template_cd, const char *body,
                               const char *crid, mv_err *err) {
    mv_user u = {.id = "guest"};
    json_t *payload = json_loads(body, 0, NULL), *id = crid ? json_string(crid) : NULL, *m = NULL;
    mv_create_request req = {
        .template_cd = template_cd, .user = &u, .payload = payload, .client_request_id = id};
    mv_code rc = mv_message_create(f->svc, &req, &m, NULL, err);
    json_decref(m);
    json_decref(payload);
    json_decref(id);
    return rc;
}

STORE_TEST(a_create_missing_a_required_field_is_invalid_naming_it_and_reserves_nothing) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "required.db"));
    static const char *const tpl[] = {
        "{\"templateCd\": \"stay\", \"receiverContent\": {\"title\": \"{{guest.name}} wants "
        "{{listing}}\"}, \"prepare\": {\"toUser\": \"{{hostId}}\"},"
        " \"required\": [\"listing\", \"hostId\", \"guest.name\"], \"actions\": []}",
        "{\"templateCd\": \"stay-hook\", \"required\": [\"listing\", \"items.0.sku\"],"
        " \"actions\": []}"};
    mv_err err = {0};
    for (int i = 0; i < 2; i++) {
        json_t *t = json_loads(tpl[i], 0, NULL);
        CHECK_CODE(mv_registry_register(f.registry, t, "<stay>", &err), MV_OK, &err);
        json_decref(t);
    }
    int calls = 0;
    mv_service_set_prepare(f.svc, "stay-hook", required_prepare, &calls);
    static const struct {
        const char *template_cd, *body, *missing;
    } cases[] = {
        {"stay", "{\"hostId\": \"bob\", \"guest\": {\"name\": \"Ana\"}}", "listing"},
        {"stay", "{\"listing\": null, \"hostId\": \"bob\", \"guest\": {\"name\": \"Ana\"}}",
         "listing"},
        {"stay", "{\"listing\": \"Flat\", \"hostId\": \"bob\", \"guest\": {}}", "guest.name"},
        {"stay", "{\"listing\": \"Flat\", \"hostId\": \"bob\", \"guest\": \"Ana\"}", "guest.name"},
        {"stay", "{\"listing\": \"Flat\", \"guest\": {\"name\": null}}", "hostId"},
        {"stay-hook", "{\"listing\": \"Flat\", \"items\": []}", "items.0.sku"},
        {"stay-hook", "{\"items\": [{\"sku\": 1}]}", "listing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int keyed = 0; keyed < 2; keyed++) { /* without and with a client request id */
            mv_err_clear(&err);
            CHECK_CODE(create_required(&f, cases[i].template_cd, cases[i].body,
                                       keyed ? "stay-1" : NULL, &err),
                       MV_INVALID_ARGUMENT, &err);
            char want[256];
            snprintf(want, sizeof want, "\"%s\" is required by template \"%s\"", cases[i].missing,
                     cases[i].template_cd);
            CHECK(strstr(err.message, want) != NULL);
        }
    }
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    CHECK_INT(fixture_rows(f.store, 'r'), 0);
    CHECK_INT(calls, 0);
    /* given everything (an empty string and 0 count as given), both create */
    CHECK_CODE(create_required(&f, "stay",
                               "{\"listing\": \"\", \"hostId\": \"bob\", \"guest\": {\"name\": 0}}",
                               "stay-1", &err),
               MV_OK, &err);
    CHECK_CODE(create_required(&f, "stay-hook",
                               "{\"listing\": \"Flat\", \"items\": [{\"sku\": 1}]}", NULL, &err),
               MV_OK, &err);
    CHECK_INT(calls, 1);
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    CHECK_INT(fixture_rows(f.store, 'r'), 1);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(unknown_template_is_not_found_and_reserves_nothing,
                     create_renders_content_from_template_data_and_stores_it,
                     missing_user_is_invalid_user,
                     same_client_request_id_replays_and_is_scoped_by_user_and_template,
                     replay_flag_is_set_only_for_replays,
                     same_client_request_id_with_a_different_payload_is_a_mismatch,
                     invalid_client_request_ids_have_the_reference_messages,
                     batch_replay_returns_the_same_ids_in_order,
                     zero_item_request_replays_empty_with_one_completed_reservation,
                     sixteen_threads_with_one_client_request_id_create_one_set_and_one_payment,
                     two_processes_with_one_client_request_id_agree,
                     live_pending_reservation_with_no_wait_is_pending,
                     an_expired_lease_is_taken_over_by_exactly_one_of_several_callers,
                     a_declarative_create_is_one_transaction_that_concurrent_duplicates_replay,
                     failed_reservation_replays_as_failed,
                     completed_reservation_missing_messages_is_inconsistent,
                     null_payment_session_fails_the_request_and_records_it,
                     throwing_payment_provider_fails_with_its_message,
                     a_failing_batch_expires_every_session_opened_including_earlier_items,
                     a_failing_expire_reports_through_the_hook_and_names_the_session,
                     create_notification_makes_a_generic_notification,
                     gc_removes_completed_reservations_past_retention,
                     a_key_removed_by_gc_creates_fresh_messages_on_both_create_paths,
                     qualifying_messages_queue_one_email_and_rolled_back_creates_queue_none,
                     a_create_missing_a_required_field_is_invalid_naming_it_and_reserves_nothing);
}
