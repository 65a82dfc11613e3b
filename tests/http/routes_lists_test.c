/* routes_lists_test.c — GET /sagas and GET /approvals through the router (no socket), on both
 * stores: who sees what (an admin the tenant's sagas; approvers and admins the tenant's approvals;
 * anyone else only their own; a stranger and another tenant's approver an empty page, never
 * another's row), pages and cursors, and every bad query answered 400 before any store work.
 * Also the probes: /livez never asks the store, /readyz (= /healthz) is 503 while draining. */
#include "http/auth.h"
#include "http/ops.h"
#include "http/routes_lists.h"
#include "missive/durable.h"
#include "store/db.h"
#include "support/http_call.h"
#include "support/stores.h"

typedef struct env {
    mv_store *store;
    mv_approvals *approvals;
    mv_saga_engine *engine;
    mv_auth *auth;
    mv_router *router;
    mv_list_routes routes;
    int64_t now; /* the approvals' clock: one millisecond per approval, so the order is known */
    mv_clock clock;
    char ids[4][64]; /* approvals: ana@t1 ×2, bob@t1, eve@t2 */
} env;

static const char SQL_ADD_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version, tenant_id) "
    "VALUES (?, 'checkout', ?, 'null', 'fp', '[]', 3, ?, ?, 1, ?)";

static mv_code sagas_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    const char *states[] = {"running", "manual-review", "completed", "manual-review",
                            "manual-review"};
    for (int i = 0; i < 5; i++) { /* s0..s3 in t1; s4, the newest, in t2 */
        char id[16];
        snprintf(id, sizeof id, "s%d", i);
        mv_code rc = mv_db_execf(db, SQL_ADD_SAGA, NULL, err, "ssiis", id, states[i],
                                 (int64_t)(100 + i), (int64_t)(100 + i), i < 4 ? "t1" : "t2");
        if (rc) return rc;
    }
    return MV_OK;
}

/* A pending approval created the way an action creates one; its id goes to out. */
static int pending(env *e, const char *tenant, const char *principal, char out[64]) {
    char effect[37];
    mv_id_uuid(effect, NULL);
    e->now++;
    mv_approval_request r = {.effect_id = effect,
                             .capability = "refunds.large",
                             .target = "m1",
                             .tenant_id = tenant,
                             .principal_id = principal};
    mv_err err = {0};
    if (mv_approval_authorize(e->approvals, &r, &err) != MV_APPROVAL_REQUIRED) return 0;
    snprintf(out, 64, "%s", err.approval_id);
    return 1;
}

static int env_open(env *e, const char *kind, const char *name) {
    memset(e, 0, sizeof *e);
    if (!(e->store = test_store_fresh(kind, name))) return 0;
    e->now = mv_now_ms() - 60000; /* pending and not expired */
    e->clock = mv_manual_clock(&e->now);
    mv_approvals_options ao = {.secret = (const unsigned char *)"0123456789abcdef0123456789abcdef",
                               .secret_len = 32,
                               .clock = &e->clock};
    if (mv_approvals_new(e->store, &ao, &e->approvals, NULL) != MV_OK ||
        mv_saga_engine_new(e->store, NULL, &e->engine, NULL) != MV_OK)
        return 0;
    if (!pending(e, "t1", "ana", e->ids[0]) || !pending(e, "t1", "ana", e->ids[1]) ||
        !pending(e, "t1", "bob", e->ids[2]) || !pending(e, "t2", "eve", e->ids[3]))
        return 0;
    if (mv_store_write(e->store, sagas_tx, NULL, NULL) != MV_OK) return 0;
    mv_auth_options auth = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&auth, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_list_routes){.store = e->store,
                                 .engine = e->engine,
                                 .approvals = true,
                                 .default_limit = 50,
                                 .max_limit = 100};
    return mv_list_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    mv_saga_engine_free(e->engine);
    mv_approvals_free(e->approvals);
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

/* The ids of a list answer, comma-joined, in order. */
static const char *ids_of(const call *c, const char *key, const char *id_key) {
    static char out[1024];
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(c->body, key), i, v) {
        if (i) strcat(out, ",");
        strncat(out, mv_json_str(v, id_key), sizeof out - strlen(out) - 1);
    }
    return out;
}

STORE_TEST(approvers_list_the_tenants_pending_approvals_and_others_only_their_own) {
    env e;
    REQUIRE(env_open(&e, kind, "listroutes"));
    call c;
    char want[512];
    /* an approver of t1: every pending approval of t1, newest first, none of t2 */
    run(&e, &c, "/approvals", "carol@t1:approvals.decide");
    CHECK_INT(c.res.status, 200);
    snprintf(want, sizeof want, "%s,%s,%s", e.ids[2], e.ids[1], e.ids[0]);
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), want);
    CHECK(json_is_null(json_object_get(c.body, "nextCursor")));
    call_free(&c);
    /* an admin of t1 too, page by page */
    run(&e, &c, "/approvals?state=pending&limit=2", "root@t1:is.admin");
    CHECK_INT(c.res.status, 200);
    snprintf(want, sizeof want, "%s,%s", e.ids[2], e.ids[1]);
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), want);
    const char *cursor = mv_json_str(c.body, "nextCursor");
    REQUIRE(cursor);
    char target[512];
    snprintf(target, sizeof target, "/approvals?limit=2&cursor=%s", cursor);
    call_free(&c);
    run(&e, &c, target, "root@t1:is.admin");
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), e.ids[0]);
    call_free(&c);
    /* ana sees her two, bob his one */
    run(&e, &c, "/approvals", "ana@t1");
    snprintf(want, sizeof want, "%s,%s", e.ids[1], e.ids[0]);
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), want);
    call_free(&c);
    run(&e, &c, "/approvals", "bob@t1");
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), e.ids[2]);
    call_free(&c);
    /* a stranger of t1 and an approver of another tenant: empty, never another's approval */
    run(&e, &c, "/approvals", "mallory@t1");
    CHECK_INT(c.res.status, 200);
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), "");
    call_free(&c);
    run(&e, &c, "/approvals", "eve@t2:approvals.decide");
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), e.ids[3]);
    call_free(&c);
    run(&e, &c, "/approvals", "zed@t3:approvals.decide,is.admin");
    CHECK_INT(c.res.status, 200);
    CHECK_STR(ids_of(&c, "approvals", "approvalId"), "");
    call_free(&c);
    env_close(&e);
}

STORE_TEST(only_admins_list_sagas_filtered_by_state_and_definition) {
    env e;
    REQUIRE(env_open(&e, kind, "listsagas"));
    call c;
    run(&e, &c, "/sagas?state=manual-review", "root@t1:is.admin");
    CHECK_INT(c.res.status, 200);
    CHECK_STR(ids_of(&c, "sagas", "sagaId"), "s3,s1");
    /* each item is the saga's record, as GET /sagas/{id} shows it */
    json_t *first = json_array_get(json_object_get(c.body, "sagas"), 0);
    CHECK(json_is_array(json_object_get(first, "steps")));
    CHECK(json_object_get(first, "input") != NULL);
    CHECK_STR(mv_json_str(first, "definition"), "checkout");
    CHECK_INT(json_integer_value(json_object_get(first, "createdAt")), 103);
    CHECK(json_object_get(first, "version") == NULL); /* the public shape only */
    call_free(&c);
    run(&e, &c, "/sagas?definition=checkout&limit=3", "root@t1:is.admin");
    CHECK_STR(ids_of(&c, "sagas", "sagaId"), "s3,s2,s1");
    CHECK(json_is_string(json_object_get(c.body, "nextCursor")));
    call_free(&c);
    run(&e, &c, "/sagas?definition=other", "root@t1:is.admin");
    CHECK_STR(ids_of(&c, "sagas", "sagaId"), "");
    call_free(&c);
    /* each tenant's admin sees its own sagas only */
    run(&e, &c, "/sagas?state=manual-review", "root@t2:is.admin");
    CHECK_STR(ids_of(&c, "sagas", "sagaId"), "s4");
    call_free(&c);
    run(&e, &c, "/sagas", "root@t3:is.admin");
    CHECK_INT(c.res.status, 200);
    CHECK_STR(ids_of(&c, "sagas", "sagaId"), "");
    call_free(&c);
    run(&e, &c, "/sagas", "ana@t1:approvals.decide");
    CHECK_INT(c.res.status, 403);
    CHECK_STR(call_error_code(&c), "forbidden");
    CHECK(!json_object_get(c.body, "sagas"));
    call_free(&c);
    env_close(&e);
}

STORE_TEST(bad_list_queries_are_400_and_say_which_parameter) {
    env e;
    REQUIRE(env_open(&e, kind, "listbad"));
    const struct {
        const char *target, *code, *word;
    } cases[] = {
        {"/sagas?state=paused", "invalid_argument", "state"},
        {"/sagas?definition=a%20b", "invalid_argument", "definition"},
        {"/sagas?limit=ten", "invalid_pagination", "limit"},
        {"/sagas?limit=2.5", "invalid_pagination", "limit"},
        {"/sagas?cursor=bm9wZQ", "invalid_pagination", "cursor"},
        {"/sagas?sort=asc", "invalid_argument", "sort"},
        {"/approvals?state=maybe", "invalid_argument", "state"},
        {"/approvals?limit=Infinity", "invalid_pagination", "limit"},
        {"/approvals?tenant=t2", "invalid_argument", "tenant"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        call c;
        run(&e, &c, cases[i].target, "root@t1:is.admin");
        CHECK_INT(c.res.status, 400);
        CHECK_STR(call_error_code(&c), cases[i].code);
        const char *m = call_error_message(&c);
        CHECK(m && strstr(m, cases[i].word));
        call_free(&c);
    }
    /* a limit beyond the maximum is clamped, not refused */
    call c;
    run(&e, &c, "/sagas?limit=100000", "root@t1:is.admin");
    CHECK_INT(c.res.status, 200);
    CHECK_INT(json_array_size(json_object_get(c.body, "sagas")), 4);
    call_free(&c);
    env_close(&e);
}

/* ---- probes ------------------------------------------------------------------------------- */

static int health_calls;
static mv_code failing_store(void *ctx, mv_err *err) {
    (void)ctx;
    health_calls++;
    return mv_err_set(err, MV_STORE_UNAVAILABLE, "connect to /var/run/postgresql:5432 failed");
}
static mv_code working_store(void *ctx, mv_err *err) {
    (void)ctx;
    (void)err;
    health_calls++;
    return MV_OK;
}

TEST(livez_never_asks_the_store_and_readyz_fails_when_it_is_down_or_draining) {
    atomic_bool draining = false;
    mv_http_ops ops = {.health = failing_store, .draining = &draining};
    mv_router *r = mv_router_new(NULL);
    REQUIRE(mv_http_ops_routes(r, &ops, NULL) == MV_OK);
    call c;
    health_calls = 0;
    call_init(&c, "GET", "/livez");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    CHECK_INT(health_calls, 0);
    call_free(&c);
    const char *ready[] = {"/readyz", "/healthz"};
    for (int i = 0; i < 2; i++) {
        call_init(&c, "GET", ready[i]);
        call_run(&c, r);
        CHECK_INT(c.res.status, 503);
        CHECK_STR(call_error_code(&c), "store_unavailable");
        CHECK(!strstr(c.res.body, "5432") && !strstr(c.res.body, "/var/run")); /* log only */
        CHECK(c.res.detail && strstr(c.res.detail, "5432"));
        call_free(&c);
    }
    ops.health = working_store;
    call_init(&c, "GET", "/readyz");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    call_free(&c);
    atomic_store(&draining, true);
    health_calls = 0;
    for (int i = 0; i < 2; i++) {
        call_init(&c, "GET", ready[i]);
        call_run(&c, r);
        CHECK_INT(c.res.status, 503);
        CHECK_STR(call_error_code(&c), "draining");
        call_free(&c);
    }
    CHECK_INT(health_calls, 0);
    call_init(&c, "GET", "/livez"); /* alive while it drains */
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    call_free(&c);
    mv_router_free(r);
}

int main(void) {
    return RUN_TESTS(approvers_list_the_tenants_pending_approvals_and_others_only_their_own,
                     only_admins_list_sagas_filtered_by_state_and_definition,
                     bad_list_queries_are_400_and_say_which_parameter,
                     livez_never_asks_the_store_and_readyz_fails_when_it_is_down_or_draining);
}
