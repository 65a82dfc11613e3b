/* store_test.c — the SQL layer on SQLite files: migrations, transactions, concurrent writers and
 * compare-and-set under contention (real threads). */
#include <pthread.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "missive/store.h"
#include "store/db.h"
#include "test.h"

static mv_store *open_fresh(const char *name) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path(name));
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &s, &err) != MV_OK) {
        fprintf(stderr, "open: %s\n", err.message);
        return NULL;
    }
    return s;
}

TEST(migrate_creates_schema_and_is_idempotent_after_reopen) {
    const char *path = test_tmp_path("m.db");
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    mv_store *s;
    mv_err err = {0};
    int applied = -1, v = -1;
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, mv_store_latest_version());
    mv_store_close(s);
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    CHECK_CODE(mv_store_migrate(s, &applied, &err), MV_OK, &err);
    CHECK_INT(applied, 0);
    CHECK_CODE(mv_store_schema_version(s, &v, &err), MV_OK, &err);
    CHECK_INT(v, mv_store_latest_version());
    CHECK_CODE(mv_store_check_schema(s, &err), MV_OK, &err);
    mv_store_close(s);
}

static const char SQL_FAKE_FUTURE[] =
    "INSERT INTO schema_version (version, name, applied_at) VALUES (9999, 'future', 0)";

static mv_code add_future(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_FAKE_FUTURE, NULL, err, "");
}

TEST(store_with_newer_schema_is_refused) {
    mv_store *s = open_fresh("future.db");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_migrate(s, NULL, &err) == MV_OK);
    REQUIRE(mv_store_write(s, add_future, NULL, &err) == MV_OK);
    CHECK_CODE(mv_store_migrate(s, NULL, &err), MV_SCHEMA_TOO_NEW, &err);
    CHECK(strstr(err.message, "9999") != NULL);
    CHECK_CODE(mv_store_check_schema(s, &err), MV_SCHEMA_TOO_NEW, &err);
    mv_store_close(s);
}

TEST(unknown_scheme_names_the_accepted_ones) {
    mv_store *s = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_store_open("bogus:", NULL, &s, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "sqlite:") && strstr(err.message, "postgres://"));
    CHECK(s == NULL);
    CHECK_CODE(mv_store_open("sqlite::memory:", NULL, &s, &err), MV_INVALID_ARGUMENT, &err);
    mv_store_options o = {.allow_memory = true};
    CHECK_CODE(mv_store_open("sqlite::memory:", &o, &s, &err), MV_OK, &err);
    CHECK(s && mv_store_is_memory(s));
    mv_store_close(s);
}

static const char SQL_CREATE_T[] =
    "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, owner TEXT, version INTEGER NOT NULL)";
static const char SQL_INSERT_T[] = "INSERT INTO t (id, owner, version) VALUES (?, ?, 0)";
static const char SQL_COUNT_T[] = "SELECT COUNT(*), COALESCE(SUM(version), 0) FROM t";
static const char SQL_CAS_T[] =
    "UPDATE t SET owner = ?, version = version + 1 WHERE id = ? AND version = ?";

static mv_code create_t(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, SQL_CREATE_T, err);
}

static mv_code insert_then_fail(mv_db *db, void *ctx, mv_err *err) {
    mv_code rc = mv_db_execf(db, SQL_INSERT_T, NULL, err, "is", *(int64_t *)ctx, "x");
    if (rc != MV_OK) return rc;
    return mv_err_set(err, MV_INTERNAL, "deliberate failure");
}

static mv_code insert_one(mv_db *db, void *ctx, mv_err *err) {
    return mv_db_execf(db, SQL_INSERT_T, NULL, err, "is", *(int64_t *)ctx, "x");
}

typedef struct {
    int64_t count, sum;
} counts;

static mv_code count_t(mv_db *db, void *ctx, mv_err *err) {
    counts *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_COUNT_T, &st, err);
    if (rc) return rc;
    if (mv_stmt_step(st, err) == 1) {
        c->count = mv_stmt_int64(st, 0);
        c->sum = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return MV_OK;
}

TEST(failed_transaction_rolls_back_everything) {
    mv_store *s = open_fresh("rb.db");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    int64_t id = 1;
    CHECK_CODE(mv_store_write(s, insert_then_fail, &id, &err), MV_INTERNAL, &err);
    CHECK_STR(err.message, "deliberate failure");
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 0);
    CHECK_CODE(mv_store_write(s, insert_one, &id, &err), MV_OK, &err);
    CHECK_CODE(mv_store_write(s, insert_one, &id, &err), MV_INTERNAL, &err); /* duplicate key */
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 1);
    mv_store_close(s);
}

typedef struct {
    mv_store *store;
    int base;
    int wins;
    int failures;
} worker;

static void *insert_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 200; i++) {
        int64_t id = w->base + i;
        mv_err err = {0};
        if (mv_store_write(w->store, insert_one, &id, &err) != MV_OK) w->failures++;
    }
    return NULL;
}

TEST(threads_writing_concurrently_lose_nothing) {
    mv_store *s = open_fresh("conc.db");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){s, i * 1000, 0, 0};
        pthread_create(&th[i], NULL, insert_worker, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_INT(w[i].failures, 0);
    counts c = {0};
    CHECK_CODE(mv_store_read(s, count_t, &c, &err), MV_OK, &err);
    CHECK_INT(c.count, 800);
    mv_store_close(s);
}

typedef struct {
    int64_t version;
    int64_t changed;
} cas_arg;

static mv_code cas_once(mv_db *db, void *ctx, mv_err *err) {
    cas_arg *a = ctx;
    return mv_db_execf(db, SQL_CAS_T, &a->changed, err, "sii", "me", (int64_t)1, a->version);
}

static void *cas_worker(void *arg) {
    worker *w = arg;
    cas_arg a = {0, 0};
    mv_err err = {0};
    if (mv_store_write(w->store, cas_once, &a, &err) == MV_OK && a.changed == 1) w->wins++;
    return NULL;
}

TEST(compare_and_set_is_won_exactly_once_under_contention) {
    mv_store *s = open_fresh("cas.db");
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    int64_t id = 1;
    REQUIRE(mv_store_write(s, insert_one, &id, &err) == MV_OK);
    pthread_t th[16];
    worker w[16];
    for (int i = 0; i < 16; i++) {
        w[i] = (worker){s, 0, 0, 0};
        pthread_create(&th[i], NULL, cas_worker, &w[i]);
    }
    int wins = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        wins += w[i].wins;
    }
    CHECK_INT(wins, 1);
    counts c = {0};
    mv_store_read(s, count_t, &c, &err);
    CHECK_INT(c.sum, 1);
    mv_store_close(s);
}

TEST(two_processes_writing_the_same_file_lose_nothing) {
    const char *path = test_tmp_path("procs.db");
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    mv_store *s;
    mv_err err = {0};
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    REQUIRE(mv_store_write(s, create_t, NULL, &err) == MV_OK);
    mv_store_close(s);
    pid_t pids[2];
    for (int p = 0; p < 2; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            mv_store *cs;
            if (mv_store_open(url, NULL, &cs, NULL) != MV_OK) _exit(1);
            worker w = {cs, 10000 * (p + 1), 0, 0};
            insert_worker(&w);
            mv_store_close(cs);
            _exit(w.failures ? 1 : 0);
        }
    }
    for (int p = 0; p < 2; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    REQUIRE(mv_store_open(url, NULL, &s, &err) == MV_OK);
    counts c = {0};
    mv_store_read(s, count_t, &c, &err);
    CHECK_INT(c.count, 400);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(migrate_creates_schema_and_is_idempotent_after_reopen,
                     store_with_newer_schema_is_refused, unknown_scheme_names_the_accepted_ones,
                     failed_transaction_rolls_back_everything,
                     threads_writing_concurrently_lose_nothing,
                     compare_and_set_is_won_exactly_once_under_contention,
                     two_processes_writing_the_same_file_lose_nothing);
}
