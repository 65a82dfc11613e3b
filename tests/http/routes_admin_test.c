/* routes_admin_test.c — the operator's views (GET /admin/…) through the router, on both stores:
 * only admins get them (403 for anyone else), each tenant's admin sees only its tenant's messages,
 * deliveries, timers and sagas (another tenant's message or saga is 404), filters and the title
 * search select the right rows, pages follow their cursors, bad queries are 400 naming the
 * parameter, and the timelines list every recorded change in time order without anything
 * internal (payloads, webhook URLs, sealed values). */
#include "http/auth.h"
#include "http/routes_admin.h"
#include "missive/durable.h"
#include "store/db.h"
#include "support/http_call.h"
#include "support/stores.h"

typedef struct env {
    mv_store *store;
    mv_saga_engine *engine;
    mv_auth *auth;
    mv_router *router;
    mv_list_routes routes;
} env;

static const char SQL_ADD_MESSAGE[] =
    "INSERT INTO messages (id, type, template_cd, from_user, to_user, to_roles, sender_content, "
    "receiver_content, documents, payment_cd, payload, action_state, archived, action_cd, "
    "action_attempt_id, action_claimed_by, action_claimed_at, archived_by, archived_at, "
    "created_at, updated_at, tenant_id) VALUES (?, 'message', ?, ?, ?, '[]', '{}', ?, '[]', '', "
    "'{}', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
static const char SQL_ADD_CHANGE[] = "INSERT INTO stream_events (tenant_id, message_id, kind, "
                                     "viewer_id, created_at) VALUES (?, ?, ?, ?, ?)";
static const char SQL_ADD_OUTBOX[] =
    "INSERT INTO outbox (id, kind, payload, state, attempts, next_attempt_at, failure_stage, "
    "last_error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?)";
static const char SQL_ADD_TIMER[] =
    "INSERT INTO timers (timer_id, tenant_id, kind, ref, due_at, next_at, state, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, 1)";
static const char SQL_ADD_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version, tenant_id) "
    "VALUES (?, 'checkout', ?, '\"enc:v1:secret\"', 'fp', '[]', 3, ?, ?, 1, ?)";
static const char SQL_ADD_STEP[] =
    "INSERT INTO saga_steps (saga_id, idx, name, state, effect_id, compensation_effect_id, "
    "compensation_args, result, attempts, error_code, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, 'enc:v1:args', 'enc:v1:result', ?, ?, ?, ?)";
static const char SQL_ADD_EFFECT[] =
    "INSERT INTO effects (effect_id, capability, tenant_id, state, error_code, created_at, "
    "updated_at, version) VALUES (?, 'saga.step', 't1', ?, ?, ?, ?, 1)";

#define M(n) "00000000000000000000000" #n

static mv_code fill_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    const struct {
        const char *id, *tpl, *from, *to, *title, *state, *action, *attempt, *tenant;
        int archived;
        int64_t at;
    } m[] = {
        {M(1), "booking", "ana", "bob", "Ana wants Flat 3B", "active", NULL, NULL, "t1", 0, 100},
        {M(2), "booking", "cid", "bob", "Cid wants the Loft", "archived", "accept",
         "a2a2a2a2-0000-4000-8000-000000000002", "t1", 1, 200},
        {M(3), "invoice", "ana", "dan", "Invoice for Flat 3B", "retryable", "pay",
         "a3a3a3a3-0000-4000-8000-000000000003", "t1", 0, 300},
        {M(4), "booking", "ana", "bob", "Ana again", "cancelled", NULL, NULL, "t1", 0, 400},
        {M(5), "booking", "eve", "bob", "Eve wants Flat 3B", "active", NULL, NULL, "t2", 0, 500},
    };
    mv_code rc = MV_OK;
    for (size_t i = 0; rc == MV_OK && i < sizeof m / sizeof m[0]; i++) {
        char content[128];
        snprintf(content, sizeof content, "{\"title\":\"%s\",\"short\":\"s\",\"long\":\"l\"}",
                 m[i].title);
        mv_stmt *st;
        if ((rc = mv_db_prepare(db, SQL_ADD_MESSAGE, &st, err))) return rc;
        mv_stmt_bindf(st, "sssss", m[i].id, m[i].tpl, m[i].from, m[i].to, content);
        mv_stmt_bind_text(st, 6, m[i].state);
        mv_stmt_bind_int64(st, 7, m[i].archived);
        mv_stmt_bind_text(st, 8, m[i].action);
        mv_stmt_bind_text(st, 9, m[i].attempt);
        mv_stmt_bind_text(st, 10, m[i].attempt ? m[i].to : NULL);
        if (m[i].attempt)
            mv_stmt_bind_int64(st, 11, m[i].at + 20);
        else
            mv_stmt_bind_null(st, 11);
        mv_stmt_bind_text(st, 12, m[i].archived ? m[i].to : NULL);
        if (m[i].archived)
            mv_stmt_bind_int64(st, 13, m[i].at + 30);
        else
            mv_stmt_bind_null(st, 13);
        mv_stmt_bind_int64(st, 14, m[i].at);
        mv_stmt_bind_int64(st, 15, m[i].at + 40);
        mv_stmt_bind_text(st, 16, m[i].tenant);
        int r = mv_stmt_step(st, err);
        mv_stmt_done(st);
        if (r < 0) return err ? err->code : MV_INTERNAL;
    }
    /* m2's change log: created, bob read it, the action archived it; and m5's in t2 */
    const struct {
        const char *tenant, *id, *kind, *viewer;
        int64_t at;
    } ch[] = {{"t1", M(2), "created", NULL, 200},
              {"t1", M(2), "viewer", "bob", 210},
              {"t1", M(2), "updated", NULL, 230},
              {"t2", M(5), "created", NULL, 500}};
    for (size_t i = 0; rc == MV_OK && i < sizeof ch / sizeof ch[0]; i++)
        rc = mv_db_execf(db, SQL_ADD_CHANGE, NULL, err, "ssssi", ch[i].tenant, ch[i].id, ch[i].kind,
                         ch[i].viewer, ch[i].at);
    /* deliveries: two of t1's messages (an email and a channel webhook), one of t2's */
    const struct {
        const char *id, *kind, *payload, *state, *stage;
        int64_t at;
    } ob[] = {
        {"o1", "email",
         "{\"messageId\":\"" M(1) "\",\"toUser\":\"bob\",\"title\":\"t\",\"body\":"
                                  "\"secret body\"}",
         "sent", NULL, 110},
        {"o2", "webhook",
         "{\"url\":\"https://hooks.internal/sms\",\"channel\":\"sms\",\"contactOf\":\"dan\","
         "\"body\":{\"messageId\":\"" M(3) "\"}}",
         "failed", "webhook", 310},
        {"o3", "email",
         "{\"messageId\":\"" M(5) "\",\"toUser\":\"bob\",\"title\":\"t\",\"body\":"
                                  "\"b\"}",
         "sent", NULL, 510},
    };
    for (size_t i = 0; rc == MV_OK && i < sizeof ob / sizeof ob[0]; i++)
        rc = mv_db_execf(db, SQL_ADD_OUTBOX, NULL, err, "ssssissii", ob[i].id, ob[i].kind,
                         ob[i].payload, ob[i].state, (int64_t)(ob[i].stage ? 5 : 1), ob[i].stage,
                         ob[i].stage ? "connect to hooks.internal:443 failed" : NULL, ob[i].at,
                         ob[i].at);
    const struct {
        const char *id, *tenant, *kind, *ref, *state;
        int64_t due;
    } tm[] = {{"k1", "t1", "expiry", M(1), "pending", 1000},
              {"k2", "t1", "reminder", M(3), "fired", 2000},
              {"k3", "t2", "expiry", M(5), "pending", 1500}};
    for (size_t i = 0; rc == MV_OK && i < sizeof tm / sizeof tm[0]; i++)
        rc = mv_db_execf(db, SQL_ADD_TIMER, NULL, err, "ssssiis", tm[i].id, tm[i].tenant,
                         tm[i].kind, tm[i].ref, tm[i].due, tm[i].due, tm[i].state);
    /* saga s1 (t1): reserve committed, charge failed twice then compensated reserve */
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_ADD_SAGA, NULL, err, "ssiis", "s1", "compensated", (int64_t)1000,
                         (int64_t)1900, "t1");
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_ADD_SAGA, NULL, err, "ssiis", "s2", "running", (int64_t)1000,
                         (int64_t)1000, "t2");
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_ADD_STEP, NULL, err, "sissssisii", "s1", (int64_t)0, "reserve",
                         "compensated", "e1", "e3", (int64_t)1, (const char *)NULL, (int64_t)1100,
                         (int64_t)1800);
    if (rc == MV_OK)
        rc = mv_db_execf(db, SQL_ADD_STEP, NULL, err, "sissssisii", "s1", (int64_t)1, "charge",
                         "failed", "e2", (const char *)NULL, (int64_t)2, "card_declined",
                         (int64_t)1300, (int64_t)1500);
    const struct {
        const char *id, *state, *code;
        int64_t at;
    } ef[] = {{"e1", "committed", NULL, 1200},
              {"e2", "failed", "card_declined", 1400},
              {"e3", "committed", NULL, 1700}};
    for (size_t i = 0; rc == MV_OK && i < sizeof ef / sizeof ef[0]; i++)
        rc = mv_db_execf(db, SQL_ADD_EFFECT, NULL, err, "sssii", ef[i].id, ef[i].state, ef[i].code,
                         ef[i].at - 50, ef[i].at);
    return rc;
}

static int env_open(env *e, const char *kind, const char *name, bool sagas) {
    memset(e, 0, sizeof *e);
    if (!(e->store = test_store_fresh(kind, name))) return 0;
    if (sagas && mv_saga_engine_new(e->store, NULL, &e->engine, NULL) != MV_OK) return 0;
    mv_err err = {0};
    if (mv_store_write(e->store, fill_tx, NULL, &err) != MV_OK) {
        fprintf(stderr, "fill: %s\n", err.message);
        return 0;
    }
    mv_auth_options auth = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&auth, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_list_routes){
        .store = e->store, .engine = e->engine, .default_limit = 50, .max_limit = 100};
    return mv_admin_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    mv_saga_engine_free(e->engine);
    mv_store_close(e->store);
}

/* who: "user@tenant[:perm1,perm2]". */
static void run(env *e, call *c, const char *target, const char *who) {
    call_init(c, "GET", target);
    char user[64] = "", tenant[64] = "", perms[128] = "";
    sscanf(who, "%63[^@]@%63[^:]:%127s", user, tenant, perms);
    call_header(c, "X-User-Id", user);
    call_header(c, "X-Tenant-Id", tenant);
    if (perms[0]) call_header(c, "X-User-Permissions", perms);
    call_run(c, e->router);
}

static const char *ids_of(const call *c, const char *key, const char *id_key) {
    static char out[1024];
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(c->body, key), i, v) {
        if (i) strcat(out, ",");
        const char *id = mv_json_str(v, id_key);
        size_t n = strlen(id ? id : "");
        strncat(out, n > 2 ? id + n - 2 : id ? id : "?", sizeof out - strlen(out) - 1);
    }
    return out;
}

/* "event/actor/outcome" of each timeline entry, ";"-joined. */
static const char *events_of(const call *c) {
    static char out[2048];
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(c->body, "entries"), i, v) {
        char one[160];
        snprintf(one, sizeof one, "%s%s/%s/%s", i ? ";" : "", mv_json_str(v, "event"),
                 mv_json_str(v, "actor") ? mv_json_str(v, "actor") : "-",
                 mv_json_str(v, "outcome") ? mv_json_str(v, "outcome") : "-");
        strncat(out, one, sizeof out - strlen(out) - 1);
    }
    return out;
}

#define ADMIN1 "root@t1:is.admin"
#define ADMIN2 "root@t2:is.admin"

STORE_TEST(admins_list_and_search_their_tenants_messages) {
    env e;
    REQUIRE(env_open(&e, kind, "adminmsg", true));
    call c;
    run(&e, &c, "/admin/messages", ADMIN1);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(ids_of(&c, "messages", "id"), "04,03,02,01"); /* newest first, t1 only */
    json_t *first = json_array_get(json_object_get(c.body, "messages"), 0);
    CHECK_STR(mv_json_str(first, "title"), "Ana again");
    CHECK_STR(mv_json_str(first, "actionState"), "cancelled");
    CHECK(json_is_null(json_object_get(c.body, "nextCursor")));
    call_free(&c);
    const struct {
        const char *target, *want;
    } cases[] = {
        {"/admin/messages?state=active", "01"},
        {"/admin/messages?templateCd=booking", "04,02,01"},
        {"/admin/messages?sender=ana", "04,03,01"},
        {"/admin/messages?recipient=bob&sender=ana", "04,01"},
        {"/admin/messages?q=flat%203b", "03,01"}, /* case-insensitive, in the title */
        {"/admin/messages?q=flat&templateCd=invoice", "03"},
        {"/admin/messages?q=nowhere", ""},
        {"/admin/messages?sender=eve", ""}, /* eve's message is t2's */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(&e, &c, cases[i].target, ADMIN1);
        CHECK_INT(c.res.status, 200);
        CHECK_STR(ids_of(&c, "messages", "id"), cases[i].want);
        call_free(&c);
    }
    /* pages: 2 + 2, with and without a search */
    const char *paged[] = {"/admin/messages?limit=2", "/admin/messages?limit=1&q=a"};
    const char *want[][4] = {{"04,03", "02,01", NULL}, {"04", "03", "02", "01"}};
    for (int p = 0; p < 2; p++) {
        char target[512];
        snprintf(target, sizeof target, "%s", paged[p]);
        for (int k = 0; k < 4 && want[p][k]; k++) {
            run(&e, &c, target, ADMIN1);
            CHECK_INT(c.res.status, 200);
            CHECK_STR(ids_of(&c, "messages", "id"), want[p][k]);
            const char *next = mv_json_str(c.body, "nextCursor");
            if (next) snprintf(target, sizeof target, "%s&cursor=%s", paged[p], next);
            if (p == 0 && k == 1) CHECK(!next);
            call_free(&c);
        }
    }
    run(&e, &c, "/admin/messages", ADMIN2);
    CHECK_STR(ids_of(&c, "messages", "id"), "05");
    call_free(&c);
    env_close(&e);
}

STORE_TEST(only_admins_reach_the_admin_routes) {
    env e;
    REQUIRE(env_open(&e, kind, "adminauth", true));
    const char *targets[] = {"/admin/messages", "/admin/outbox", "/admin/timers",
                             "/admin/messages/" M(2) "/timeline", "/admin/sagas/s1/timeline"};
    const char *who[] = {"bob@t1", "ana@t1:approvals.decide", "root@t1:admin"};
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
        for (size_t k = 0; k < sizeof who / sizeof *who; k++) {
            call c;
            run(&e, &c, targets[i], who[k]);
            CHECK_INT(c.res.status, 403);
            CHECK_STR(call_error_code(&c), "forbidden");
            CHECK(!strstr(c.res.body, "Flat") && !strstr(c.res.body, "checkout"));
            call_free(&c);
        }
    call c;
    call_init(&c, "GET", "/admin/messages"); /* no identity at all */
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 401);
    call_free(&c);
    env_close(&e);
}

STORE_TEST(outbox_and_timers_are_the_tenants_own_without_payloads) {
    env e;
    REQUIRE(env_open(&e, kind, "adminbox", true));
    call c;
    run(&e, &c, "/admin/outbox", ADMIN1);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(ids_of(&c, "outbox", "id"), "o2,o1");
    json_t *o2 = json_array_get(json_object_get(c.body, "outbox"), 0);
    CHECK_STR(mv_json_str(o2, "channel"), "sms");
    CHECK_STR(mv_json_str(o2, "recipient"), "dan");
    CHECK_STR(mv_json_str(o2, "messageId"), M(3));
    CHECK_STR(mv_json_str(o2, "failureStage"), "webhook");
    CHECK_INT(json_integer_value(json_object_get(o2, "attempts")), 5);
    /* nothing internal: no URL, no body, no transport error text */
    CHECK(!strstr(c.res.body, "hooks.internal") && !strstr(c.res.body, "secret body") &&
          !strstr(c.res.body, "payload") && !strstr(c.res.body, "443"));
    call_free(&c);
    const struct {
        const char *target, *who, *want;
    } cases[] = {
        {"/admin/outbox?channel=email", ADMIN1, "o1"},
        {"/admin/outbox?channel=sms", ADMIN1, "o2"},
        {"/admin/outbox?channel=push", ADMIN1, ""},
        {"/admin/outbox?state=failed", ADMIN1, "o2"},
        {"/admin/outbox?state=sent&channel=email", ADMIN1, "o1"},
        {"/admin/outbox", ADMIN2, "o3"},
        {"/admin/outbox", "root@t3:is.admin", ""},
        {"/admin/timers", ADMIN1, "k1,k2"}, /* due order */
        {"/admin/timers?kind=reminder", ADMIN1, "k2"},
        {"/admin/timers?state=pending", ADMIN1, "k1"},
        {"/admin/timers", ADMIN2, "k3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(&e, &c, cases[i].target, cases[i].who);
        CHECK_INT(c.res.status, 200);
        const char *key = strstr(cases[i].target, "timers") ? "timers" : "outbox";
        CHECK_STR(ids_of(&c, key, "id"), cases[i].want);
        CHECK(json_object_get(c.body, "nextCursor") != NULL);
        CHECK(!strstr(c.res.body, "tenantId"));
        call_free(&c);
    }
    /* the outbox page by page */
    run(&e, &c, "/admin/outbox?limit=1", ADMIN1);
    CHECK_STR(ids_of(&c, "outbox", "id"), "o2");
    char target[512];
    snprintf(target, sizeof target, "/admin/outbox?limit=1&cursor=%s",
             mv_json_str(c.body, "nextCursor"));
    call_free(&c);
    run(&e, &c, target, ADMIN1);
    CHECK_STR(ids_of(&c, "outbox", "id"), "o1");
    call_free(&c);
    env_close(&e);
}

STORE_TEST(message_and_saga_timelines_in_time_order) {
    env e;
    REQUIRE(env_open(&e, kind, "admintl", true));
    call c;
    run(&e, &c, "/admin/messages/" M(2) "/timeline", ADMIN1);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(mv_json_str(c.body, "messageId"), M(2));
    CHECK_STR(mv_json_str(c.body, "actionState"), "archived");
    /* equal times keep the order they were found in: the row's events before the log's */
    CHECK_STR(events_of(&c), "created/cid/-;viewer/bob/-;actionStarted/bob/-;"
                             "actionSucceeded/bob/succeeded;archived/bob/-;updated/-/-");
    json_t *started = json_array_get(json_object_get(c.body, "entries"), 2);
    CHECK_STR(mv_json_str(started, "attempt"), "a2a2a2a2-0000-4000-8000-000000000002");
    CHECK_STR(mv_json_str(started, "step"), "accept");
    CHECK_INT(json_integer_value(json_object_get(started, "at")), 220);
    call_free(&c);
    run(&e, &c, "/admin/messages/" M(3) "/timeline", ADMIN1);
    CHECK_STR(events_of(&c), "created/ana/-;actionStarted/dan/-;actionFailed/-/failed");
    call_free(&c);
    /* another tenant's message is not found, as an unknown one */
    run(&e, &c, "/admin/messages/" M(5) "/timeline", ADMIN1);
    CHECK_INT(c.res.status, 404);
    CHECK_STR(call_error_code(&c), "message_not_found");
    call_free(&c);
    run(&e, &c, "/admin/messages/" M(5) "/timeline", ADMIN2);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(events_of(&c), "created/eve/-");
    call_free(&c);
    /* the saga: each step's start, effect and end, the compensation, the end */
    run(&e, &c, "/admin/sagas/s1/timeline", ADMIN1);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(mv_json_str(c.body, "state"), "compensated");
    CHECK_STR(events_of(&c), "sagaStarted/-/-;stepStarted/-/-;effect/-/committed;"
                             "stepStarted/-/-;effect/-/failed;stepFinished/-/failed;"
                             "compensation/-/committed;stepFinished/-/compensated;"
                             "sagaFinished/-/compensated");
    json_t *failed = json_array_get(json_object_get(c.body, "entries"), 4);
    CHECK_STR(mv_json_str(failed, "step"), "charge");
    CHECK_INT(json_integer_value(json_object_get(failed, "attempt")), 2);
    CHECK_STR(mv_json_str(failed, "detail"), "card_declined");
    CHECK(!strstr(c.res.body, "enc:v1")); /* sealed values are never shown */
    call_free(&c);
    run(&e, &c, "/admin/sagas/s2/timeline", ADMIN1);
    CHECK_INT(c.res.status, 404);
    CHECK_STR(call_error_code(&c), "saga_not_found");
    call_free(&c);
    env_close(&e);
    /* without sagas configured the saga timeline does not exist */
    REQUIRE(env_open(&e, kind, "admintl2", false));
    run(&e, &c, "/admin/sagas/s1/timeline", ADMIN1);
    CHECK_INT(c.res.status, 404);
    CHECK_STR(call_error_code(&c), "not_found");
    call_free(&c);
    env_close(&e);
}

STORE_TEST(bad_admin_queries_are_400_and_say_which_parameter) {
    env e;
    REQUIRE(env_open(&e, kind, "adminbad", true));
    const struct {
        const char *target, *code, *word;
    } cases[] = {
        {"/admin/messages?state=done", "invalid_argument", "state"},
        {"/admin/messages?templateCd=a%20b", "invalid_argument", "templateCd"},
        {"/admin/messages?sender=a%20b", "invalid_argument", "sender"},
        {"/admin/messages?recipient=", "invalid_argument", "recipient"},
        {"/admin/messages?q=", "invalid_argument", "q"},
        {"/admin/messages?q=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "invalid_argument", "q"},
        {"/admin/messages?limit=ten", "invalid_pagination", "limit"},
        {"/admin/messages?cursor=bm9wZQ", "invalid_pagination", "cursor"},
        {"/admin/messages?tenant=t2", "invalid_argument", "tenant"},
        {"/admin/messages?state=active&state=archived", "invalid_argument", "state"},
        {"/admin/outbox?state=lost", "invalid_argument", "state"},
        {"/admin/outbox?channel=a%20b", "invalid_argument", "channel"},
        {"/admin/outbox?cursor=", "invalid_pagination", "cursor"},
        {"/admin/timers?kind=alarm", "invalid_argument", "kind"},
        {"/admin/timers?state=late", "invalid_argument", "state"},
        {"/admin/timers?limit=1.5", "invalid_pagination", "limit"},
        {"/admin/messages/nothex/timeline", "invalid_argument", "message id"},
        {"/admin/messages/" M(2) "/timeline?x=1", "invalid_argument", "x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        call c;
        run(&e, &c, cases[i].target, ADMIN1);
        CHECK_INT(c.res.status, 400);
        CHECK_STR(call_error_code(&c), cases[i].code);
        const char *m = call_error_message(&c);
        CHECK(m && strstr(m, cases[i].word));
        if (c.res.status != 400) fprintf(stderr, "  case %s\n", cases[i].target);
        call_free(&c);
    }
    call c;
    run(&e, &c, "/admin/messages?limit=100000", ADMIN1); /* clamped, not refused */
    CHECK_INT(c.res.status, 200);
    CHECK_INT(json_array_size(json_object_get(c.body, "messages")), 4);
    call_free(&c);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(admins_list_and_search_their_tenants_messages,
                     only_admins_reach_the_admin_routes,
                     outbox_and_timers_are_the_tenants_own_without_payloads,
                     message_and_saga_timelines_in_time_order,
                     bad_admin_queries_are_400_and_say_which_parameter);
}
