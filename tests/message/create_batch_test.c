/* create_batch_test.c — the one-shot create under PostgreSQL's group commit (store/pg_batch.c):
 * 32 threads racing one clientRequestId make exactly one message, which all 32 get back; and
 * among concurrent creates with fresh keys, a create that fails — its key already used with
 * another payload — fails alone with its own error while every other one commits its message,
 * its reservation and its change-log row. On both stores. */
#include <pthread.h>

#include "fixture.h"

static const char *DECL_TEMPLATE =
    "{\"templateCd\": \"cb\", \"receiverContent\": {\"title\": \"Hi {{name}}\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\", \"toRoles\": [], \"fanOut\": null}, \"actions\": []}";

static const char SQL_COUNT_CHANGES[] = "SELECT COUNT(*) FROM stream_events";

static int64_t change_rows(mv_store *s) {
    fixture_count_arg a = {SQL_COUNT_CHANGES, -1};
    mv_store_read(s, fixture_count_tx, &a, NULL);
    return a.n;
}

static int open_cb(fixture *f, const char *kind, const char *name) {
    mv_store_options so = {.pool_size = 8};
    if (!fixture_open_url(f, test_store_url(kind, name), &so, NULL)) return 0;
    json_t *t = json_loads(DECL_TEMPLATE, 0, NULL);
    mv_err err = {0};
    mv_code rc = mv_registry_register(f->registry, t, "<cb>", &err);
    json_decref(t);
    return rc == MV_OK;
}

typedef struct {
    fixture *f;
    pthread_barrier_t *go;
    char key[32];
    const char *name; /* the payload's name: another one for a used key is a mismatch */
    mv_code rc;
    bool replayed;
    char id[25];
} creator;

static void *create_one(void *arg) {
    creator *c = arg;
    mv_user u = {.id = "sender"};
    json_t *payload = json_pack("{s:s,s:s}", "to", "receiver", "name", c->name);
    json_t *k = json_string(c->key);
    mv_create_request req = {
        .template_cd = "cb", .user = &u, .payload = payload, .client_request_id = k};
    pthread_barrier_wait(c->go);
    json_t *m = NULL;
    mv_err err = {0};
    c->rc = mv_message_create(c->f->svc, &req, &m, &c->replayed, &err);
    if (c->rc != MV_OK && c->rc != MV_CLIENT_REQUEST_MISMATCH)
        fprintf(stderr, "create %s: %s\n", c->key, err.message);
    if (json_array_size(m)) mv_strlcpy(c->id, mv_json_str(json_array_get(m, 0), "id"), 25);
    json_decref(m);
    json_decref(k);
    json_decref(payload);
    return NULL;
}

#define RACERS 32

STORE_TEST(thirty_two_threads_racing_one_client_request_id_make_exactly_one_message) {
    fixture f;
    REQUIRE(open_cb(&f, kind, "cb_race"));
    for (int round = 0; round < 3; round++) {
        static creator c[RACERS];
        pthread_t th[RACERS];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
            c[i] = (creator){.f = &f, .go = &go, .name = "N"};
            snprintf(c[i].key, sizeof c[i].key, "race-%d", round);
            pthread_create(&th[i], NULL, create_one, &c[i]);
        }
        int ok = 0, fresh = 0, same = 0;
        for (int i = 0; i < RACERS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < RACERS; i++) {
            ok += c[i].rc == MV_OK;
            fresh += c[i].rc == MV_OK && !c[i].replayed;
            same += strcmp(c[i].id, c[0].id) == 0 && c[i].id[0];
        }
        pthread_barrier_destroy(&go);
        CHECK_INT(ok, RACERS);
        CHECK_INT(fresh, 1);
        CHECK_INT(same, RACERS);
        CHECK_INT(fixture_rows(f.store, 'm'), round + 1);
        CHECK_INT(fixture_rows(f.store, 'r'), round + 1);
    }
    CHECK_INT(change_rows(f.store), 3);
    fixture_close(&f);
}

STORE_TEST(a_create_that_fails_among_concurrent_ones_fails_alone) {
    fixture f;
    REQUIRE(open_cb(&f, kind, "cb_fail"));
    static creator used;
    pthread_barrier_t one;
    pthread_barrier_init(&one, NULL, 1);
    used = (creator){.f = &f, .go = &one, .key = "used", .name = "first"};
    create_one(&used);
    pthread_barrier_destroy(&one);
    REQUIRE(used.rc == MV_OK);
    int rounds = 4, created = 1;
    for (int round = 0; round < rounds; round++) {
        static creator c[RACERS];
        pthread_t th[RACERS];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
            bool bad = i % 8 == 3; /* the used key with another payload */
            c[i] = (creator){.f = &f, .go = &go, .name = bad ? "second" : "N"};
            if (bad)
                snprintf(c[i].key, sizeof c[i].key, "used");
            else
                snprintf(c[i].key, sizeof c[i].key, "k-%d-%d", round, i);
            pthread_create(&th[i], NULL, create_one, &c[i]);
        }
        for (int i = 0; i < RACERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < RACERS; i++) {
            bool bad = i % 8 == 3;
            CHECK_INT(c[i].rc, bad ? MV_CLIENT_REQUEST_MISMATCH : MV_OK);
            if (!bad) CHECK(!c[i].replayed && c[i].id[0]);
            created += !bad;
        }
    }
    CHECK_INT(fixture_rows(f.store, 'm'), created);
    CHECK_INT(fixture_rows(f.store, 'r'), created);
    CHECK_INT(change_rows(f.store), created);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(thirty_two_threads_racing_one_client_request_id_make_exactly_one_message,
                     a_create_that_fails_among_concurrent_ones_fails_alone);
}
