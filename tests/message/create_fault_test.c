/* create_fault_test.c — the store fails in the middle of an idempotent create (issue 12 item 2):
 * PostgreSQL is restarted (a private server of this test) and SQLite's file can no longer grow
 * (max_page_count, what a full disk does to it) while the prepare hook runs, so the messages
 * cannot be written. The create answers store_unavailable; its key is NOT failed: while the lease
 * lives a retry is pending, after it a retry takes the reservation over and succeeds, and no
 * reservation is ever marked failed. The one-transaction (declarative) path leaves nothing at all,
 * and a definitive failure there is recorded under its key like on the two-step path (issue 14
 * item 7). */
#include <pthread.h>

#include "message/fixture.h"
#include "support/pg_private.h"

static const char SQL_FAILED_REQUESTS[] =
    "SELECT COUNT(*) FROM message_requests WHERE state = 'failed'";
static const char SQL_PAGE_COUNT[] = "PRAGMA page_count";

typedef struct {
    const char *kind;
    pg_private pg; /* postgres: the server this test restarts */
    mv_store *store;
    bool armed;        /* the next prepare breaks the store */
    int64_t max_pages; /* sqlite: the file may not grow beyond this */
} fault;

static int64_t count_of(mv_store *store, const char *sql) {
    fixture_count_arg a = {sql, -1};
    mv_store_read(store, fixture_count_tx, &a, NULL);
    return a.n;
}

static mv_code limit_pages_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t *max = ctx;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)*max);
    return mv_db_exec(db, sql, err);
}

/* Breaks the store: postgres restarts under the open connections; sqlite stops growing. */
static void break_store(fault *f) {
    if (strcmp(f->kind, "postgres") == 0) {
        CHECK(pg_private_restart(&f->pg));
        return;
    }
    fixture_count_arg a = {SQL_PAGE_COUNT, -1};
    CHECK_INT(mv_store_read(f->store, fixture_count_tx, &a, NULL), MV_OK);
    f->max_pages = a.n;
    CHECK_INT(mv_store_write(f->store, limit_pages_tx, &f->max_pages, NULL), MV_OK);
}

static void heal_store(fault *f) {
    if (strcmp(f->kind, "sqlite") != 0) return;
    f->max_pages = 1073741823;
    CHECK_INT(mv_store_write(f->store, limit_pages_tx, &f->max_pages, NULL), MV_OK);
}

static mv_code breaking_prepare(void *ctx, const mv_prepare_input *in, json_t **items,
                                mv_err *err) {
    fault *f = ctx;
    if (f->armed) { /* the payment or prepare call is in flight when the store goes */
        f->armed = false;
        break_store(f);
    }
    return fixture_prepare(NULL, in, items, err);
}

static mv_code checkpoint_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, "CHECKPOINT", err);
}

/* The fixture on the store of this kind: a private server for postgres, one connection for
 * sqlite (so the page limit set on it applies to every write). */
static int open_faulty(fixture *fx, fault *f, const char *kind, const char *name) {
    memset(f, 0, sizeof *f);
    f->kind = kind;
    mv_service_options o = {.client_request_wait_zero = true, .client_request_poll_ms = 5};
    if (strcmp(kind, "postgres") == 0) {
        if (!pg_private_start(&f->pg)) return 0;
        if (!fixture_open_url(fx, f->pg.url, NULL, &o)) return 0;
        /* the test cluster commits asynchronously: flush the migrations, or an immediate stop
         * (a crash) may take the last ones with it */
        if (mv_store_write(fx->store, checkpoint_tx, NULL, NULL) != MV_OK) return 0;
    } else {
        mv_store_options so = {.pool_size = 1};
        if (!fixture_open_url(fx, test_store_url(kind, name), &so, &o)) return 0;
    }
    f->store = fx->store;
    return 1;
}

static void close_faulty(fixture *fx, fault *f) {
    fixture_close(fx);
    pg_private_remove(&f->pg);
}

/* An idempotent create whose payload (20 KB) needs new pages: a full file cannot take it. */
static json_t *create_big_replayed(fixture *fx, const char *key, bool *replayed, mv_code *rc,
                                   mv_err *err) {
    mv_user u = {.id = "u1"};
    static char big[20000];
    memset(big, 'x', sizeof big - 1);
    json_t *payload = json_pack("{s:s,s:s,s:s}", "name", "Widget", "toUser", "u2", "blob", big);
    json_t *id = json_string(key);
    mv_create_request req = {
        .template_cd = "svc-test", .user = &u, .payload = payload, .client_request_id = id};
    json_t *msgs = NULL;
    *rc = mv_message_create(fx->svc, &req, &msgs, replayed, err);
    json_decref(payload);
    json_decref(id);
    return msgs;
}

static json_t *create_big(fixture *fx, const char *key, mv_code *rc, mv_err *err) {
    return create_big_replayed(fx, key, NULL, rc, err);
}

STORE_TEST(a_store_failure_mid_create_leaves_the_key_to_its_lease_and_a_retry_takes_over) {
    fixture fx;
    fault f;
    REQUIRE(open_faulty(&fx, &f, kind, "fault_mid"));
    mv_service_set_prepare(fx.svc, "svc-test", breaking_prepare, &f);
    f.armed = true;
    mv_code rc;
    mv_err err = {0};
    json_t *m = create_big(&fx, "k-1", &rc, &err);
    CHECK_INT(rc, MV_STORE_UNAVAILABLE);
    CHECK_STR(mv_code_name(rc), "store_unavailable");
    CHECK(m == NULL);
    heal_store(&f);
    CHECK_INT(count_of(f.store, SQL_FAILED_REQUESTS), 0);
    /* within the lease: pending, not failed */
    m = create_big(&fx, "k-1", &rc, &err);
    CHECK_INT(rc, MV_CLIENT_REQUEST_PENDING);
    CHECK(m == NULL);
    /* after it: the retry takes the reservation over and creates the message, once */
    fx.now += 30001;
    m = create_big(&fx, "k-1", &rc, &err);
    CHECK_CODE(rc, MV_OK, &err);
    CHECK_INT(json_array_size(m), 1);
    json_decref(m);
    bool replayed = false;
    m = create_big_replayed(&fx, "k-1", &replayed, &rc, &err);
    CHECK_CODE(rc, MV_OK, &err);
    CHECK(replayed);
    json_decref(m);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    CHECK_INT(count_of(f.store, SQL_FAILED_REQUESTS), 0);
    close_faulty(&fx, &f);
}

static const char *DECLARATIVE =
    "{\"templateCd\": \"decl\", \"receiverContent\": {\"title\": \"Hi {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\", \"fanOut\": \"people\"}, \"actions\": []}";

static mv_code create_decl(fixture *fx, const char *payload_text, const char *key, mv_err *err) {
    mv_user u = {.id = "u1"};
    json_t *payload = json_loads(payload_text, 0, NULL);
    json_t *id = json_string(key);
    mv_create_request req = {
        .template_cd = "decl", .user = &u, .payload = payload, .client_request_id = id};
    json_t *msgs = NULL;
    mv_code rc = mv_message_create(fx->svc, &req, &msgs, NULL, err);
    json_decref(msgs);
    json_decref(payload);
    json_decref(id);
    return rc;
}

STORE_TEST(the_one_transaction_create_records_a_definitive_failure_but_not_a_store_failure) {
    fixture fx;
    fault f;
    REQUIRE(open_faulty(&fx, &f, kind, "fault_decl"));
    json_t *t = json_loads(DECLARATIVE, 0, NULL);
    mv_err err = {0};
    REQUIRE(mv_registry_register(fx.registry, t, "<decl>", &err) == MV_OK);
    json_decref(t);
    /* definitive: the payload has no array at fanOut — failed under its key, as the slow path */
    CHECK_CODE(create_decl(&fx, "{\"people\": 7}", "bad", &err), MV_PREPARE_FAILED, &err);
    CHECK_INT(count_of(f.store, SQL_FAILED_REQUESTS), 1);
    CHECK_CODE(create_decl(&fx, "{\"people\": 7}", "bad", &err), MV_CLIENT_REQUEST_FAILED, &err);
    CHECK_INT(fixture_rows(f.store, 'm'), 0);
    /* a store failure in the one transaction leaves nothing: the retry just works */
    static char payload[30000];
    snprintf(payload, sizeof payload, "{\"people\": [{\"to\": \"a\", \"name\": \"%0*d\"}]}", 20000,
             7);
    break_store(&f);
    mv_code rc = create_decl(&fx, payload, "good", &err);
    CHECK(rc == MV_STORE_UNAVAILABLE);
    CHECK_STR(mv_code_name(rc), "store_unavailable");
    heal_store(&f);
    CHECK_INT(fixture_rows(f.store, 'r'), 1); /* only "bad": "good" left no reservation */
    CHECK_CODE(create_decl(&fx, payload, "good", &err), MV_OK, &err);
    CHECK_INT(fixture_rows(f.store, 'm'), 1);
    CHECK_INT(count_of(f.store, SQL_FAILED_REQUESTS), 1);
    close_faulty(&fx, &f);
}

STORE_TEST(health_is_store_unavailable_while_the_store_cannot_take_writes) {
    fixture fx;
    fault f;
    REQUIRE(open_faulty(&fx, &f, kind, "fault_health"));
    mv_err err = {0};
    CHECK_CODE(mv_service_health(fx.svc, &err), MV_OK, &err);
    bool pg = strcmp(kind, "postgres") == 0;
    if (pg)
        CHECK(pg_private_stop_server(&f.pg)); /* down */
    else
        break_store(&f); /* the file cannot grow: a full disk */
    mv_code rc;
    json_t *m = create_big(&fx, "k-h", &rc, &err);
    CHECK_CODE(rc, MV_STORE_UNAVAILABLE, &err);
    json_decref(m);
    CHECK_CODE(mv_service_health(fx.svc, &err), MV_STORE_UNAVAILABLE, &err);
    CHECK_CODE(mv_service_health(fx.svc, &err), MV_STORE_UNAVAILABLE, &err);
    if (pg)
        CHECK(pg_private_start_server(&f.pg));
    else
        heal_store(&f);
    CHECK_CODE(mv_service_health(fx.svc, &err), MV_OK, &err);
    fx.now += 30001;
    m = create_big(&fx, "k-h", &rc, &err);
    CHECK_CODE(rc, MV_OK, &err);
    json_decref(m);
    CHECK_CODE(mv_service_health(fx.svc, &err), MV_OK, &err);
    close_faulty(&fx, &f);
}

int main(void) {
    return RUN_TESTS(
        a_store_failure_mid_create_leaves_the_key_to_its_lease_and_a_retry_takes_over,
        the_one_transaction_create_records_a_definitive_failure_but_not_a_store_failure,
        health_is_store_unavailable_while_the_store_cannot_take_writes);
}
