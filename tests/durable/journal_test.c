/* journal_test.c — the effect journal on SQLite files: states, validation, compare-and-set
 * (including real threads racing one transition), refusal of memory stores. */
#include <pthread.h>

#include "durable/fixture.h"
#include "store/db.h"

static const char DIGEST[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

TEST(journal_refuses_memory_store_unless_allowed) {
    mv_store_options so = {.allow_memory = true};
    mv_store *s = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open("sqlite::memory:", &so, &s, &err) == MV_OK);
    mv_journal *j = NULL;
    CHECK_CODE(mv_journal_new(s, NULL, &j, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "durable effect journal requires a durable store");
    CHECK(j == NULL);
    mv_journal_options o = {.allow_memory = true};
    CHECK_CODE(mv_journal_new(s, &o, &j, &err), MV_OK, &err);
    mv_journal_free(j);
    mv_store_close(s);
}

STORE_TEST(effect_moves_admission_executing_committed_with_versions) {
    mv_store *s = fixture_store(kind, "j1.db", NULL, 0);
    REQUIRE(s);
    int64_t now = 1000;
    mv_clock clock = mv_manual_clock(&now);
    mv_journal_options o = {.clock = &clock};
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, &o, &j, &err) == MV_OK);
    mv_effect_intent in = {.effect_id = "effect_1",
                           .capability = "payments.charge",
                           .target = "provider:stripe",
                           .digest = DIGEST,
                           .tenant_id = "tenant_1",
                           .principal_id = "user_1"};
    CHECK_CODE(mv_journal_intent(j, &in, &err), MV_OK, &err);
    mv_effect_record r;
    CHECK_CODE(mv_journal_get(j, "effect_1", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_ADMISSION);
    CHECK_INT(r.version, 1);
    CHECK_STR(r.tenant_id, "tenant_1");
    now = 1005;
    CHECK_CODE(mv_journal_executing(j, "effect_1", &err), MV_OK, &err);
    now = 1010;
    CHECK_CODE(mv_journal_committed(j, "effect_1", &err), MV_OK, &err);
    CHECK_CODE(mv_journal_get(j, "effect_1", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_COMMITTED);
    CHECK_INT(r.version, 3);
    CHECK_INT(r.created_at, 1000);
    CHECK_INT(r.updated_at, 1010);
    CHECK_STR(mv_effect_state_name(r.state), "committed");
    mv_journal_free(j);
    mv_store_close(s);
}

STORE_TEST(duplicate_intent_and_out_of_order_transitions_are_rejected) {
    mv_store *s = fixture_store(kind, "j2.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, NULL, &j, &err) == MV_OK);
    mv_effect_intent in = {.effect_id = "e2", .capability = "db.write"};
    CHECK_CODE(mv_journal_intent(j, &in, &err), MV_OK, &err);
    CHECK_CODE(mv_journal_intent(j, &in, &err), MV_EFFECT_TRANSITION, &err);
    CHECK_STR(err.message, "durable effect e2: create transition was rejected");
    CHECK_CODE(mv_journal_committed(j, "e2", &err), MV_EFFECT_TRANSITION, &err);
    CHECK_STR(err.message, "durable effect e2: executing->committed transition was rejected");
    CHECK_CODE(mv_journal_executing(j, "e2", &err), MV_OK, &err);
    CHECK_CODE(mv_journal_executing(j, "e2", &err), MV_EFFECT_TRANSITION, &err);
    CHECK_STR(err.message, "durable effect e2: admission->executing transition was rejected");
    CHECK_CODE(mv_journal_executing(j, "nope", &err), MV_EFFECT_TRANSITION, &err);
    CHECK_STR(err.message, "durable effect nope: missing transition was rejected");
    CHECK_CODE(mv_journal_failed(j, "e2", true, "Bad Code", &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "durable effect errorCode is invalid");
    CHECK_CODE(mv_journal_failed(j, "e2", true, "execution_failed", &err), MV_OK, &err);
    mv_effect_record r;
    CHECK_CODE(mv_journal_get(j, "e2", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_UNKNOWN);
    CHECK_STR(r.error_code, "execution_failed");
    mv_effect_intent f = {.effect_id = "e3", .capability = "db.write"};
    CHECK_CODE(mv_journal_intent(j, &f, &err), MV_OK, &err);
    CHECK_CODE(mv_journal_failed(j, "e3", false, "admission_failed", &err), MV_OK, &err);
    CHECK_CODE(mv_journal_get(j, "e3", &r, &err), MV_OK, &err);
    CHECK_INT(r.state, MV_EFFECT_FAILED);
    CHECK_CODE(mv_journal_get(j, "e4", &r, &err), MV_NOT_FOUND, &err);
    mv_journal_free(j);
    mv_store_close(s);
}

STORE_TEST(intent_validation_names_the_field_and_changes_nothing) {
    mv_store *s = fixture_store(kind, "j3.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, NULL, &j, &err) == MV_OK);
    char long_id[70];
    memset(long_id, 'x', 65);
    long_id[65] = '\0';
    struct {
        mv_effect_intent in;
        const char *msg;
    } cases[] = {
        {{.effect_id = long_id, .capability = "db.write"},
         "durable effect id must be a bounded printable token"},
        {{.effect_id = "a b", .capability = "db.write"},
         "durable effect id must be a bounded printable token"},
        {{.effect_id = "e", .capability = "Db.write"}, "durable effect capability is invalid"},
        {{.effect_id = "e", .capability = "a..b"}, "durable effect capability is invalid"},
        {{.effect_id = "e", .capability = "db.write", .target = "has space"},
         "durable effect target must be a bounded printable token"},
        {{.effect_id = "e", .capability = "db.write", .digest = "ABC"},
         "durable effect digest is invalid"},
        {{.effect_id = "e", .capability = "db.write", .tenant_id = "t"},
         "durable effect principalId must be a bounded printable token"},
        {{.effect_id = "e", .capability = "db.write", .principal_id = "p"},
         "durable effect tenantId must be a bounded printable token"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_CODE(mv_journal_intent(j, &cases[i].in, &err), MV_INVALID_ARGUMENT, &err);
        CHECK_STR(err.message, cases[i].msg);
    }
    mv_effect_record r;
    CHECK_CODE(mv_journal_get(j, "e", &r, &err), MV_NOT_FOUND, &err);
    mv_journal_free(j);
    mv_store_close(s);
}

static const char SQL_CORRUPT[] = "UPDATE effects SET tenant_id = 't' WHERE effect_id = 'e5'";
static mv_code corrupt_fn(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_CORRUPT, NULL, err, "");
}

STORE_TEST(stored_record_with_partial_identity_is_refused_on_read) {
    mv_store *s = fixture_store(kind, "j4.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, NULL, &j, &err) == MV_OK);
    mv_effect_intent in = {.effect_id = "e5", .capability = "db.write"};
    REQUIRE(mv_journal_intent(j, &in, &err) == MV_OK);
    REQUIRE(mv_store_write(s, corrupt_fn, NULL, &err) == MV_OK);
    mv_effect_record r;
    CHECK_CODE(mv_journal_get(j, "e5", &r, &err), MV_INTERNAL, &err);
    CHECK_STR(err.message, "durable effect e5: store returned an invalid record");
    CHECK_CODE(mv_journal_executing(j, "e5", &err), MV_INTERNAL, &err);
    mv_journal_free(j);
    mv_store_close(s);
}

typedef struct {
    mv_journal *j;
    pthread_barrier_t *barrier;
    const char *id;
    mv_code rc;
} racer;

static void *race_executing(void *arg) {
    racer *r = arg;
    mv_err err = {0};
    pthread_barrier_wait(r->barrier);
    r->rc = mv_journal_executing(r->j, r->id, &err);
    return NULL;
}

STORE_TEST(two_threads_racing_one_transition_exactly_one_wins) {
    mv_store *s = fixture_store(kind, "j5.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j;
    mv_err err = {0};
    REQUIRE(mv_journal_new(s, NULL, &j, &err) == MV_OK);
    for (int round = 0; round < 5; round++) {
        char id[32];
        snprintf(id, sizeof id, "race_%d", round);
        mv_effect_intent in = {.effect_id = id, .capability = "db.write"};
        REQUIRE(mv_journal_intent(j, &in, &err) == MV_OK);
        pthread_barrier_t b;
        pthread_barrier_init(&b, NULL, 2);
        racer r1 = {.j = j, .barrier = &b, .id = id}, r2 = {.j = j, .barrier = &b, .id = id};
        pthread_t t1, t2;
        pthread_create(&t1, NULL, race_executing, &r1);
        pthread_create(&t2, NULL, race_executing, &r2);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        pthread_barrier_destroy(&b);
        CHECK((r1.rc == MV_OK) != (r2.rc == MV_OK));
        CHECK(r1.rc == MV_EFFECT_TRANSITION || r2.rc == MV_EFFECT_TRANSITION);
        mv_effect_record rec;
        CHECK_CODE(mv_journal_get(j, id, &rec, &err), MV_OK, &err);
        CHECK_INT(rec.version, 2);
    }
    mv_journal_free(j);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(journal_refuses_memory_store_unless_allowed,
                     effect_moves_admission_executing_committed_with_versions,
                     duplicate_intent_and_out_of_order_transitions_are_rejected,
                     intent_validation_names_the_field_and_changes_nothing,
                     stored_record_with_partial_identity_is_refused_on_read,
                     two_threads_racing_one_transition_exactly_one_wins);
}
