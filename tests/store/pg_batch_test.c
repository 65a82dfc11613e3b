/* pg_batch_test.c — rerunnable writes (db.h: mv__store_write_rerunnable), which PostgreSQL
 * group-commits (store/pg_batch.c): concurrent writers share transactions, yet a writer whose
 * statement or callback fails fails alone, with its own error, and every other one commits; a
 * write is durable exactly when its caller was told it succeeded; a connection killed in the
 * middle of a batch loses nothing silently (each writer gets an error or its commit, and its
 * retry then finds its row exactly once); and on PostgreSQL the writers really did share round
 * trips. SQLite runs the same callbacks through its own group commit. */
#include <pthread.h>
#include <stdatomic.h>

#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "store/listen.h"
#include "support/stores.h"
#include "test.h"

static const char SQL_CREATE[] =
    "CREATE TABLE b (id INTEGER PRIMARY KEY, v INTEGER NOT NULL CHECK (v >= 0))";
static const char SQL_INSERT[] = "INSERT INTO b (id, v) VALUES (?, ?)";
static const char SQL_INSERT_ONCE[] = "INSERT INTO b (id, v) VALUES (?, ?) ON CONFLICT DO NOTHING";
static const char SQL_EXISTS[] = "SELECT COUNT(*) FROM b WHERE id = ?";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM b";
static const char SQL_BACKEND_PID[] = "SELECT pg_backend_pid()";
static const char SQL_TERMINATE[] = "SELECT pg_terminate_backend(?, 5000)";

static mv_code create_t(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE, err);
}

static mv_store *fresh(const char *kind, const char *name) {
    mv_store_options o = {.pool_size = 8};
    mv_store *s = test_store_fresh_with(kind, name, &o);
    mv_err err = {0};
    if (s && mv_store_write(s, create_t, NULL, &err) != MV_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

typedef struct {
    int64_t id, n;
} exists_arg;

static mv_code exists_t(mv_db *db, void *ctx, mv_err *err) {
    exists_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, a->id ? SQL_EXISTS : SQL_COUNT, &st, err, a->id ? "i" : "", a->id);
    a->n = st ? mv_stmt_int64(st, 0) : -1;
    mv_stmt_done(st);
    return rc;
}

static int64_t rows_with(mv_store *s, int64_t id) {
    exists_arg a = {id, -1};
    mv_err err = {0};
    CHECK_CODE(mv_store_read(s, exists_t, &a, &err), MV_OK, &err);
    return a.n;
}

/* ---- failures inside a batch -------------------------------------------------------------- */

static atomic_int runs;

/* Two deferred rows, id and id + 100000. Every 5th id's second row breaks the CHECK constraint
 * (a statement that fails on the server, reported only at the commit); every other 7th id's
 * callback fails after queuing its rows. */
static mv_code pair_t(mv_db *db, void *ctx, mv_err *err) {
    int64_t id = *(int64_t *)ctx;
    atomic_fetch_add(&runs, 1);
    mv_code rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", id, (int64_t)1);
    if (rc == MV_OK)
        rc = mv_db_execf_later(db, SQL_INSERT, err, "ii", id + 100000,
                               (int64_t)(id % 5 == 0 ? -1 : 1));
    if (rc == MV_OK && id % 7 == 0 && id % 5 != 0)
        rc = mv_err_set(err, MV_INVALID_ARGUMENT, "seventh %lld", (long long)id);
    return rc;
}

#define WRITERS 16
#define WRITES 40

typedef struct {
    mv_store *store;
    int base;
    mv_code rcs[WRITES];
    char msgs[WRITES][64];
} writer;

static void *write_pairs(void *arg) {
    writer *w = arg;
    for (int i = 0; i < WRITES; i++) {
        int64_t id = w->base + i;
        mv_err err = {0};
        w->rcs[i] = mv__store_write_rerunnable(w->store, pair_t, &id, &err);
        mv_strlcpy(w->msgs[i], err.message, sizeof w->msgs[i]);
    }
    return NULL;
}

STORE_TEST(a_failing_write_among_concurrent_ones_fails_alone_with_its_own_error) {
    mv_store *s = fresh(kind, "pb_fail");
    REQUIRE(s);
    atomic_store(&runs, 0);
    uint64_t trips0 = mv__store_round_trips(s);
    static writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].store = s;
        w[i].base = 1 + i * 1000;
        pthread_create(&th[i], NULL, write_pairs, &w[i]);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    int wrong = 0, ok = 0;
    for (int i = 0; i < WRITERS; i++)
        for (int k = 0; k < WRITES; k++) {
            int64_t id = w[i].base + k;
            mv_code want = id % 7 == 0 && id % 5 != 0 ? MV_INVALID_ARGUMENT
                           : id % 5 == 0              ? MV_INTERNAL /* the CHECK constraint */
                                                      : MV_OK;
            bool own = want != MV_INVALID_ARGUMENT || strstr(w[i].msgs[k], "seventh");
            if (w[i].rcs[k] != want || !own) {
                if (wrong++ < 5)
                    fprintf(stderr, "id %lld: got %s (%s), want %s\n", (long long)id,
                            mv_code_name(w[i].rcs[k]), w[i].msgs[k], mv_code_name(want));
            }
            ok += w[i].rcs[k] == MV_OK;
            /* durable exactly when told so: both rows or none */
            int64_t n = rows_with(s, id) + rows_with(s, id + 100000);
            if (n != (w[i].rcs[k] == MV_OK ? 2 : 0) && wrong++ < 5)
                fprintf(stderr, "id %lld: %lld rows after %s\n", (long long)id, (long long)n,
                        mv_code_name(w[i].rcs[k]));
        }
    CHECK_INT(wrong, 0);
    CHECK(ok > WRITERS * WRITES / 2);
    CHECK_INT(rows_with(s, 0), 2 * ok);
    CHECK(atomic_load(&runs) >= WRITERS * WRITES);
    printf("%s: %d writes, %d callback runs, %llu round trips\n", kind, WRITERS * WRITES,
           atomic_load(&runs), (unsigned long long)(mv__store_round_trips(s) - trips0));
    mv_store_close(s);
}

/* Writes that all succeed: on PostgreSQL they share transactions, hence round trips. */
static mv_code one_t(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf_later(db, SQL_INSERT, err, "ii", *(int64_t *)ctx, (int64_t)1);
}

static void *write_ones(void *arg) {
    writer *w = arg;
    for (int i = 0; i < WRITES; i++) {
        int64_t id = w->base + i;
        w->rcs[i] = mv__store_write_rerunnable(w->store, one_t, &id, NULL);
    }
    return NULL;
}

POSTGRES_TEST(concurrent_rerunnable_writes_share_transactions_on_postgres) {
    mv_store *s = fresh(kind, "pb_share");
    REQUIRE(s);
    uint64_t trips0 = mv__store_round_trips(s);
    static writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].store = s;
        w[i].base = 1 + i * 1000;
        pthread_create(&th[i], NULL, write_ones, &w[i]);
    }
    int failed = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < WRITES; k++)
            failed += w[i].rcs[k] != MV_OK;
    }
    uint64_t trips = mv__store_round_trips(s) - trips0;
    printf("%d writes in %llu round trips\n", WRITERS * WRITES, (unsigned long long)trips);
    CHECK_INT(failed, 0);
    CHECK_INT(rows_with(s, 0), WRITERS * WRITES);
    /* at most 4 batches run at once, so 16 writers must have queued and shared */
    CHECK(trips < (uint64_t)(WRITERS * WRITES));
    mv_store_close(s);
}

/* Without batching ("groupCommit": false) every write is its own transaction. */
POSTGRES_TEST(without_group_commit_each_rerunnable_write_is_its_own_round_trip) {
    mv_store_options o = {.pool_size = 8, .no_group_commit = true};
    mv_store *s = test_store_fresh_with(kind, "pb_off", &o);
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    uint64_t trips0 = mv__store_round_trips(s);
    static writer w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].store = s;
        w[i].base = 1 + i * 1000;
        pthread_create(&th[i], NULL, write_ones, &w[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_INT((int64_t)(mv__store_round_trips(s) - trips0), 4 * WRITES);
    CHECK_INT(rows_with(s, 0), 4 * WRITES);
    mv_store_close(s);
}

/* ---- a connection killed mid-batch -------------------------------------------------------- */

typedef struct {
    mv_store *killer; /* a second store: the terminating connection */
    int64_t id;
    bool kill; /* this writer's first run kills its own backend */
    atomic_bool killed;
} kill_arg;

static mv_code terminate_t(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_TERMINATE, &st, err, "i", *(int64_t *)ctx);
    mv_stmt_done(st);
    return rc;
}

/* Inserts its row once (a retry finds it instead of failing); the killing writer first reads its
 * backend's pid — flushing the earlier writers' rows of its batch — then has that backend
 * terminated, so the rest of the batch and its COMMIT meet a dead connection. */
static mv_code maybe_kill_t(mv_db *db, void *ctx, mv_err *err) {
    kill_arg *k = ctx;
    if (k->kill && !atomic_exchange(&k->killed, true)) {
        mv_stmt *st;
        mv_code rc = mv_db_row(db, SQL_BACKEND_PID, &st, err, "");
        int64_t pid = st ? mv_stmt_int64(st, 0) : 0;
        mv_stmt_done(st);
        if (rc != MV_OK) return rc;
        mv_err kerr = {0};
        if ((rc = mv_store_write(k->killer, terminate_t, &pid, &kerr)) != MV_OK)
            return mv_err_copy(err, &kerr);
    }
    return mv_db_execf_later(db, SQL_INSERT_ONCE, err, "ii", k->id, (int64_t)1);
}

#define KILL_WRITERS 12

typedef struct {
    mv_store *store;
    kill_arg arg;
    pthread_barrier_t *go;
    mv_code first, retried;
} kill_writer;

static void *kill_write(void *p) {
    kill_writer *w = p;
    pthread_barrier_wait(w->go);
    w->first = mv__store_write_rerunnable(w->store, maybe_kill_t, &w->arg, NULL);
    return NULL;
}

POSTGRES_TEST(a_connection_killed_mid_batch_loses_no_write_silently) {
    mv_store *s = fresh(kind, "pb_kill");
    REQUIRE(s);
    mv_store *killer = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(mv__store_url(s), NULL, &killer, &err) == MV_OK);
    int errors = 0, silent = 0, rounds = 6;
    for (int r = 0; r < rounds; r++) {
        static kill_writer w[KILL_WRITERS];
        pthread_t th[KILL_WRITERS];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, KILL_WRITERS);
        for (int i = 0; i < KILL_WRITERS; i++) {
            memset(&w[i], 0, sizeof w[i]);
            w[i].store = s;
            w[i].go = &go;
            w[i].arg.killer = killer;
            w[i].arg.id = 1 + r * 100 + i;
            w[i].arg.kill = i == KILL_WRITERS / 2;
            pthread_create(&th[i], NULL, kill_write, &w[i]);
        }
        for (int i = 0; i < KILL_WRITERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&go);
        for (int i = 0; i < KILL_WRITERS; i++) {
            mv_code rc = w[i].first;
            /* a success is a row; a failure is store_unavailable, never another error */
            if (rc == MV_OK && rows_with(s, w[i].arg.id) != 1) silent++;
            if (rc != MV_OK) {
                errors++;
                CHECK_INT(rc, MV_STORE_UNAVAILABLE);
                /* the caller's retry (its key) finds or writes the row, exactly once */
                CHECK_INT(mv__store_write_rerunnable(s, maybe_kill_t, &w[i].arg, NULL), MV_OK);
            }
            CHECK_INT(rows_with(s, w[i].arg.id), 1);
        }
    }
    printf("%d rounds of %d writers, one killing its backend: %d writes failed\n", rounds,
           KILL_WRITERS, errors);
    CHECK_INT(silent, 0);
    CHECK(errors >= 1); /* at least the killer's own batch saw the dead connection */
    CHECK_INT(rows_with(s, 0), rounds * KILL_WRITERS);
    /* the pool recovers */
    int64_t id = 99999;
    CHECK_INT(mv__store_write_rerunnable(s, one_t, &id, NULL), MV_OK);
    mv_store_close(killer);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(a_failing_write_among_concurrent_ones_fails_alone_with_its_own_error,
                     concurrent_rerunnable_writes_share_transactions_on_postgres,
                     without_group_commit_each_rerunnable_write_is_its_own_round_trip,
                     a_connection_killed_mid_batch_loses_no_write_silently);
}
