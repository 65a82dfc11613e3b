/* group_commit_test.c — SQLite group commit: concurrent writers share transactions, yet a failing
 * callback rolls back only its own work and every successful one is durable when it returns. */
#include <pthread.h>

#include "missive/store.h"
#include "store/db.h"
#include "test.h"

static const char SQL_CREATE[] = "CREATE TABLE IF NOT EXISTS g (id INTEGER PRIMARY KEY, v TEXT)";
static const char SQL_INSERT[] = "INSERT INTO g (id, v) VALUES (?, 'x')";
static const char SQL_COUNT[] = "SELECT COUNT(*) FROM g";

static mv_code create_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE, err);
}

/* Inserts id and id+100000; odd ids then fail deliberately, after writing. */
static mv_code insert_pair_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t id = *(int64_t *)ctx;
    mv_code rc = mv_db_execf(db, SQL_INSERT, NULL, err, "i", id);
    if (rc == MV_OK) rc = mv_db_execf(db, SQL_INSERT, NULL, err, "i", id + 100000);
    if (rc == MV_OK && id % 2) rc = mv_err_set(err, MV_INVALID_ARGUMENT, "odd %lld", (long long)id);
    return rc;
}

static mv_code count_tx(mv_db *db, void *ctx, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_COUNT, &st, err);
    if (rc) return rc;
    if (mv_stmt_step(st, err) == 1) *(int64_t *)ctx = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return MV_OK;
}

typedef struct {
    mv_store *store;
    int base;
    int ok, odd_errors, wrong;
} worker;

static void *writer(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 100; i++) {
        int64_t id = w->base + i;
        mv_err err = {0};
        mv_code rc = mv_store_write(w->store, insert_pair_tx, &id, &err);
        if (rc == MV_OK)
            w->ok++;
        else if (rc == MV_INVALID_ARGUMENT && strstr(err.message, "odd"))
            w->odd_errors++;
        else
            w->wrong++;
    }
    return NULL;
}

TEST(failing_callbacks_in_a_group_roll_back_only_their_own_writes) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path("group.db"));
    mv_store *s;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    pthread_t th[16];
    worker w[16];
    for (int i = 0; i < 16; i++) {
        w[i] = (worker){s, i * 1000, 0, 0, 0};
        pthread_create(&th[i], NULL, writer, &w[i]);
    }
    int ok = 0, odd = 0, wrong = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok;
        odd += w[i].odd_errors;
        wrong += w[i].wrong;
    }
    CHECK_INT(ok, 800);
    CHECK_INT(odd, 800);
    CHECK_INT(wrong, 0);
    int64_t n = 0;
    CHECK_CODE(mv_store_read(s, count_tx, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1600); /* both rows of every even id, none of any odd id */
    mv_store_close(s);
    /* what was acknowledged is on disk: a fresh connection sees it */
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    n = 0;
    mv_store_read(s, count_tx, &n, &err);
    CHECK_INT(n, 1600);
    mv_store_close(s);
}

/* ---- a callback whose failure ends the whole shared transaction ---- */

static const char SQL_EXISTS[] = "SELECT COUNT(*) FROM g WHERE id = ?";

/* Inserts id; every 7th then rolls the whole transaction back, as SQLite itself does on a full
 * disk or an I/O error, and fails. */
static mv_code insert_or_abort_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t id = *(int64_t *)ctx;
    mv_code rc = mv_db_execf(db, SQL_INSERT, NULL, err, "i", id);
    if (rc == MV_OK && id % 7 == 0) {
        mv_db_exec(db, "ROLLBACK", NULL);
        rc = mv_err_set(err, MV_STORE_UNAVAILABLE, "simulated abort");
    }
    return rc;
}

typedef struct {
    mv_store *store;
    int base;
    mv_code rcs[60];
} abort_worker;

static void *abort_writer(void *arg) {
    abort_worker *w = arg;
    for (int i = 0; i < 60; i++) {
        int64_t id = w->base + i;
        w->rcs[i] = mv_store_write(w->store, insert_or_abort_tx, &id, NULL);
    }
    return NULL;
}

typedef struct {
    int64_t id, n;
} exists_arg;

static mv_code exists_tx(mv_db *db, void *ctx, mv_err *err) {
    exists_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_EXISTS, &st, err, "i", a->id);
    a->n = st ? mv_stmt_int64(st, 0) : -1;
    mv_stmt_done(st);
    return rc;
}

TEST(a_job_that_aborts_the_shared_transaction_takes_nobody_elses_success_with_it) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path("group-abort.db"));
    mv_store *s;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_tx, NULL, &err) == MV_OK);
    pthread_t th[12];
    abort_worker w[12];
    for (int i = 0; i < 12; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].store = s;
        w[i].base = 1 + i * 1000;
        pthread_create(&th[i], NULL, abort_writer, &w[i]);
    }
    for (int i = 0; i < 12; i++)
        pthread_join(th[i], NULL);
    /* the invariant: a write is durable exactly when its caller was told it succeeded */
    int mismatches = 0, ok = 0;
    for (int i = 0; i < 12; i++)
        for (int k = 0; k < 60; k++) {
            exists_arg a = {w[i].base + k, -1};
            mv_store_read(s, exists_tx, &a, &err);
            mismatches += (w[i].rcs[k] == MV_OK) != (a.n == 1);
            ok += w[i].rcs[k] == MV_OK;
        }
    CHECK_INT(mismatches, 0);
    CHECK(ok > 0);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(failing_callbacks_in_a_group_roll_back_only_their_own_writes,
                     a_job_that_aborts_the_shared_transaction_takes_nobody_elses_success_with_it);
}
