/* approval_test.c — approvals (SEMANTICS §5 durable scenarios 1–4): tokens bound to tenant,
 * principal, capability, target and digest; single use under real concurrency (threads, and two
 * store handles on one file); forged and expired tokens; clock overflow; the journal around an
 * approval-gated effect; consuming inside the caller's transaction. */
#include <pthread.h>

#include "durable/fixture.h"
#include "store/db.h"

static const char DIGEST[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const unsigned char SECRET[32] = "0123456789abcdef0123456789abcdef";

static mv_approval_request charge(const char *tenant, const char *token) {
    static int n;
    static char ids[64][40];
    char *id = ids[n++ % 64];
    snprintf(id, 40, "effect_%d", n);
    return (mv_approval_request){.effect_id = id,
                                 .capability = "payments.charge",
                                 .target = "provider:stripe",
                                 .digest = DIGEST,
                                 .tenant_id = tenant,
                                 .principal_id = "user_1",
                                 .resume_token = token};
}

static mv_approvals *open_approvals(mv_store *s, const mv_clock *clock, int64_t ttl) {
    mv_approvals_options o = {.secret = SECRET, .secret_len = 32, .clock = clock, .ttl_ms = ttl};
    mv_approvals *a = NULL;
    mv_err err = {0};
    if (mv_approvals_new(s, &o, &a, &err)) fprintf(stderr, "approvals: %s\n", err.message);
    return a;
}

typedef struct {
    mv_approvals *a;
    const char *token;
    pthread_barrier_t *b;
    mv_code rc;
} resumer;

static void *resume_thread(void *arg) {
    resumer *r = arg;
    mv_approval_request req = charge("tenant_1", r->token);
    mv_err err = {0};
    pthread_barrier_wait(r->b);
    r->rc = mv_approval_authorize(r->a, &req, &err);
    return NULL;
}

STORE_TEST(tokens_are_tenant_and_operation_bound_and_single_use) {
    char url[600];
    mv_store *s = fixture_store(kind, "a1.db", url, sizeof url);
    REQUIRE(s);
    mv_approvals *a = open_approvals(s, NULL, 0);
    REQUIRE(a);
    mv_err err = {0};
    mv_approval_request req = charge("tenant_1", NULL);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_REQUIRED, &err);
    CHECK_STR(err.message, "capability approval is required");
    CHECK(mv_valid_uuid(err.approval_id));
    CHECK(strncmp(err.resume_token, "v1.", 3) == 0);
    CHECK(err.expires_at > mv_now_ms());
    char id[64], token[512];
    snprintf(id, sizeof id, "%s", err.approval_id);
    snprintf(token, sizeof token, "%s", err.resume_token);

    req = charge("tenant_1", token);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_PENDING, &err);
    CHECK_STR(err.message, "capability approval is still pending");
    mv_approval_record rec;
    CHECK_CODE(mv_approval_get(a, id, "tenant_1", &rec, &err), MV_OK, &err);
    CHECK_STR(rec.state, "pending");
    json_t *j = mv_approval_to_json(&rec);
    char *text = json_dumps(j, JSON_COMPACT);
    CHECK(text && !strstr(text, token) && !strstr(text, "token") && !strstr(text, "Token"));
    free(text);
    json_decref(j);

    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "approved", "admin_1", &err), MV_OK, &err);
    req = charge("tenant_2", token);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_BINDING, &err);
    CHECK_STR(err.message, "approval resume token is bound to another tenant or principal");
    req = charge("tenant_1", token);
    req.target = "provider:other";
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_BINDING, &err);

    /* two resumes at once, through two store handles on the same file: exactly one wins */
    mv_store *s2 = NULL;
    REQUIRE(mv_store_open(url, NULL, &s2, &err) == MV_OK);
    mv_approvals *a2 = open_approvals(s2, NULL, 0);
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 2);
    resumer r1 = {.a = a, .token = token, .b = &b}, r2 = {.a = a2, .token = token, .b = &b};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, resume_thread, &r1);
    pthread_create(&t2, NULL, resume_thread, &r2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_barrier_destroy(&b);
    CHECK((r1.rc == MV_OK && r2.rc == MV_APPROVAL_TOKEN_REPLAY) ||
          (r2.rc == MV_OK && r1.rc == MV_APPROVAL_TOKEN_REPLAY));
    req = charge("tenant_1", token);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_TOKEN_REPLAY, &err);
    CHECK_STR(err.message, "approval resume token has already been consumed");
    CHECK_CODE(mv_approval_get(a, id, NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(rec.state, "consumed");
    CHECK_STR(rec.decided_by, "admin_1");

    req = charge("tenant_1", NULL);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_REQUIRED, &err);
    snprintf(id, sizeof id, "%s", err.approval_id);
    snprintf(token, sizeof token, "%s", err.resume_token);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "denied", "admin_1", &err), MV_OK, &err);
    req = charge("tenant_1", token);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_DENIED, &err);
    CHECK_STR(err.message, "capability approval was denied");
    mv_approvals_free(a2);
    mv_store_close(s2);
    mv_approvals_free(a);
    mv_store_close(s);
}

STORE_TEST(forged_token_is_invalid_and_expired_token_is_expired) {
    mv_store *s = fixture_store(kind, "a2.db", NULL, 0);
    REQUIRE(s);
    int64_t now = 1000;
    mv_clock clock = mv_manual_clock(&now);
    mv_approvals *a = open_approvals(s, &clock, 10);
    REQUIRE(a);
    mv_err err = {0};
    mv_approval_request req = charge("tenant_1", NULL);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_REQUIRED, &err);
    CHECK_INT(err.expires_at, 1010);
    char id[64], token[512];
    snprintf(id, sizeof id, "%s", err.approval_id);
    snprintf(token, sizeof token, "%s", err.resume_token);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "approved", "admin", &err), MV_OK, &err);
    char forged[512];
    snprintf(forged, sizeof forged, "%s", token);
    size_t n = strlen(forged);
    forged[n - 1] = forged[n - 1] == 'A' ? 'B' : 'A';
    req = charge("tenant_1", forged);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_TOKEN_INVALID, &err);
    CHECK_STR(err.message, "approval resume token is invalid");
    const char *garbage[] = {"", "v1", "v2.a.b", "v1.a.b.c", "v1..", "v1.e30.!!!"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        req = charge("tenant_1", garbage[i]);
        CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_TOKEN_INVALID, &err);
    }
    /* a token signed with another secret is invalid too */
    unsigned char other[32];
    memset(other, 7, sizeof other);
    mv_approvals_options oo = {.secret = other, .secret_len = 32, .clock = &clock};
    mv_approvals *b;
    REQUIRE(mv_approvals_new(s, &oo, &b, &err) == MV_OK);
    req = charge("tenant_1", token);
    CHECK_CODE(mv_approval_authorize(b, &req, &err), MV_APPROVAL_TOKEN_INVALID, &err);
    mv_approvals_free(b);
    now = 1011;
    req = charge("tenant_1", token);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_APPROVAL_TOKEN_EXPIRED, &err);
    CHECK_STR(err.message, "approval resume token has expired");
    /* a decision after expiry is rejected */
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "denied", "admin", &err),
               MV_APPROVAL_DECISION_REJECTED, &err);
    CHECK_STR(err.message, "approval decision rejected");
    mv_approvals_free(a);
    mv_store_close(s);
}

STORE_TEST(max_safe_clock_rejects_bad_ids_and_overflowing_expiry) {
    mv_store *s = fixture_store(kind, "a3.db", NULL, 0);
    REQUIRE(s);
    int64_t now = INT64_C(9007199254740991);
    mv_clock clock = mv_manual_clock(&now);
    mv_approvals *a = open_approvals(s, &clock, 0);
    REQUIRE(a);
    mv_err err = {0};
    mv_approval_record rec;
    CHECK_CODE(mv_approval_get(a, "\n", NULL, &rec, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "bounded printable token") != NULL);
    mv_approval_request req = charge("tenant_1", NULL);
    CHECK_CODE(mv_approval_authorize(a, &req, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "approval expiry") != NULL);
    mv_approvals_free(a);
    mv_store_close(s);
}

STORE_TEST(short_secret_and_memory_store_are_refused) {
    mv_store *s = fixture_store(kind, "a4.db", NULL, 0);
    REQUIRE(s);
    mv_approvals_options o = {.secret = SECRET, .secret_len = 31};
    mv_approvals *a = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_approvals_new(s, &o, &a, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "approval secret must contain at least 32 random bytes");
    CHECK(a == NULL);
    mv_store_close(s);
    mv_store_options so = {.allow_memory = true};
    REQUIRE(mv_store_open("sqlite::memory:", &so, &s, &err) == MV_OK);
    o.secret_len = 32;
    CHECK_CODE(mv_approvals_new(s, &o, &a, &err), MV_INVALID_ARGUMENT, &err);
    mv_store_close(s);
}

STORE_TEST(decisions_only_by_the_same_tenant_while_pending_and_get_hides_other_tenants) {
    mv_store *s = fixture_store(kind, "a5.db", NULL, 0);
    REQUIRE(s);
    mv_approvals *a = open_approvals(s, NULL, 0);
    REQUIRE(a);
    mv_err err = {0};
    mv_approval_request req = charge("tenant_1", NULL);
    REQUIRE(mv_approval_authorize(a, &req, &err) == MV_APPROVAL_REQUIRED);
    char id[64];
    snprintf(id, sizeof id, "%s", err.approval_id);
    mv_approval_record rec;
    CHECK_CODE(mv_approval_get(a, id, "tenant_2", &rec, &err), MV_APPROVAL_NOT_FOUND, &err);
    CHECK_CODE(mv_approval_get(a, "00000000-0000-4000-8000-000000000000", "tenant_1", &rec, &err),
               MV_APPROVAL_NOT_FOUND, &err);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_2", "approved", "x", &err),
               MV_APPROVAL_DECISION_REJECTED, &err);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "maybe", "x", &err), MV_INVALID_ARGUMENT,
               &err);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "denied", "x", &err), MV_OK, &err);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "approved", "x", &err),
               MV_APPROVAL_DECISION_REJECTED, &err);
    CHECK_CODE(mv_approval_get(a, id, "tenant_1", &rec, &err), MV_OK, &err);
    CHECK_STR(rec.state, "denied");
    CHECK_STR(rec.decided_by, "x");
    mv_approvals_free(a);
    mv_store_close(s);
}

/* ---- scenario 4: an approval-gated effect journaled (the HTTP flow, as library calls) ---- */

static mv_code count_exec(const mv_effect_context *c, void *ctx, json_t **result, mv_err *err) {
    (void)c;
    (void)result;
    (void)err;
    (*(int *)ctx)++;
    return MV_OK;
}

STORE_TEST(approval_gated_effect_journals_failed_then_committed) {
    mv_store *s = fixture_store(kind, "a6.db", NULL, 0);
    REQUIRE(s);
    mv_approvals *a = open_approvals(s, NULL, 0);
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(a && mv_journal_new(s, NULL, &j, &err) == MV_OK);
    mv_approval_gate gate = {.approvals = a};
    mv_effect_scope scope = {0};
    mv_effect_input in = {.effect_id = "first",
                          .capability = "payments.charge",
                          .target = "provider:stripe",
                          .digest = DIGEST,
                          .tenant_id = "tenant_1",
                          .principal_id = "user_1",
                          .admit = mv_approval_gate_admit,
                          .admit_ctx = &gate,
                          .transitions = mv_journal_transitions(j)};
    int runs = 0;
    CHECK_CODE(mv_effect_run(&scope, &in, count_exec, &runs, NULL, &err), MV_APPROVAL_REQUIRED,
               &err);
    CHECK_INT(runs, 0);
    char id[64], token[512];
    snprintf(id, sizeof id, "%s", err.approval_id);
    snprintf(token, sizeof token, "%s", err.resume_token);
    CHECK_CODE(mv_approval_decide(a, id, "tenant_1", "approved", "admin", &err), MV_OK, &err);
    gate.resume_token = token;
    in.effect_id = "second";
    CHECK_CODE(mv_effect_run(&scope, &in, count_exec, &runs, NULL, &err), MV_OK, &err);
    CHECK_INT(runs, 1);
    mv_effect_record r1, r2;
    CHECK_CODE(mv_journal_get(j, "first", &r1, &err), MV_OK, &err);
    CHECK_CODE(mv_journal_get(j, "second", &r2, &err), MV_OK, &err);
    CHECK_STR(mv_effect_state_name(r1.state), "failed");
    CHECK_STR(mv_effect_state_name(r2.state), "committed");
    CHECK_STR(r1.error_code, "admission_failed");
    mv_journal_free(j);
    mv_approvals_free(a);
    mv_store_close(s);
}

/* ---- consuming inside the caller's transaction ------------------------------------------ */

static const char SQL_CLAIM[] = "INSERT INTO claims (id) VALUES (?)";
static const char SQL_CREATE_CLAIMS[] = "CREATE TABLE IF NOT EXISTS claims (id TEXT PRIMARY KEY)";
static const char SQL_COUNT_CLAIMS[] = "SELECT COUNT(*) FROM claims";

typedef struct {
    mv_approvals *a;
    mv_approval_request req;
    bool fail_after;
} claim_ctx;

static mv_code consume_and_claim(mv_db *db, void *ctx, mv_err *err) {
    claim_ctx *c = ctx;
    mv_code rc = mv_approval_consume_tx(c->a, db, &c->req, err);
    if (rc) return rc;
    if ((rc = mv_db_execf(db, SQL_CLAIM, NULL, err, "s", "claim_1"))) return rc;
    if (c->fail_after) return mv_err_set(err, MV_ACTION_CONFLICT, "claim lost");
    return MV_OK;
}

static mv_code count_claims(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_COUNT_CLAIMS, &st, err);
    if (rc) return rc;
    if (mv_stmt_step(st, err) == 1) *(int64_t *)ctx = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return MV_OK;
}

static mv_code create_claims(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE_CLAIMS, err);
}

STORE_TEST(consume_inside_the_callers_transaction_rolls_back_with_it) {
    mv_store *s = fixture_store(kind, "a7.db", NULL, 0);
    REQUIRE(s);
    mv_approvals *a = open_approvals(s, NULL, 0);
    REQUIRE(a);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_claims, NULL, &err) == MV_OK);
    mv_approval_request req = charge("tenant_1", NULL);
    REQUIRE(mv_approval_authorize(a, &req, &err) == MV_APPROVAL_REQUIRED);
    char id[64], token[512];
    snprintf(id, sizeof id, "%s", err.approval_id);
    snprintf(token, sizeof token, "%s", err.resume_token);
    REQUIRE(mv_approval_decide(a, id, "tenant_1", "approved", "admin", &err) == MV_OK);
    claim_ctx c = {.a = a, .req = charge("tenant_1", token), .fail_after = true};
    CHECK_CODE(mv_store_write(s, consume_and_claim, &c, &err), MV_ACTION_CONFLICT, &err);
    mv_approval_record rec;
    CHECK_CODE(mv_approval_get(a, id, NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(rec.state, "approved"); /* rolled back with the failed claim */
    c.fail_after = false;
    CHECK_CODE(mv_store_write(s, consume_and_claim, &c, &err), MV_OK, &err);
    CHECK_CODE(mv_approval_get(a, id, NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(rec.state, "consumed");
    int64_t n = 0;
    CHECK_CODE(mv_store_read(s, count_claims, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    CHECK_CODE(mv_store_write(s, consume_and_claim, &c, &err), MV_APPROVAL_TOKEN_REPLAY, &err);
    mv_approvals_free(a);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(tokens_are_tenant_and_operation_bound_and_single_use,
                     forged_token_is_invalid_and_expired_token_is_expired,
                     max_safe_clock_rejects_bad_ids_and_overflowing_expiry,
                     short_secret_and_memory_store_are_refused,
                     decisions_only_by_the_same_tenant_while_pending_and_get_hides_other_tenants,
                     approval_gated_effect_journals_failed_then_committed,
                     consume_inside_the_callers_transaction_rolls_back_with_it);
}
