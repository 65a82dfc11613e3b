/* stores.h — run the same store-level test on every available store.
 *
 * SQLite is always available. PostgreSQL is available when MISSIVE_TEST_PG holds a libpq URI of
 * a server the tests may create and drop databases on (`eval $(scripts/pg-test-cluster start)`
 * starts a private one); otherwise the first call prints "SKIP postgres: MISSIVE_TEST_PG not set".
 * MISSIVE_TEST_STORES=sqlite (or =postgres) narrows a run to one kind while debugging.
 *
 *   #include "support/stores.h"               // includes test.h
 *
 *   STORE_TEST(second_claim_is_conflict) {      // runs once per kind; `kind` names the store
 *       mv_store *s = test_store_fresh(kind, "claim");
 *       REQUIRE(s);
 *       ...
 *       mv_store_close(s);
 *   }
 *   int main(void) { return RUN_TESTS(second_claim_is_conflict); }
 *
 * Each kind counts as one test in the totals and failures name it: "FAIL name [postgres] (…)".
 * POSTGRES_TEST(name) is the same for behaviour only PostgreSQL has; it runs (and counts) only
 * when MISSIVE_TEST_PG is set.
 *
 * Isolation: every fresh store is its own database — a new file under the test's temporary
 * directory for SQLite, a new database `mt_<pid>_<n>_<name>` on the MISSIVE_TEST_PG server for
 * PostgreSQL (CREATE DATABASE … STRATEGY FILE_COPY, ~20 ms with the test cluster's fsync=off).
 * Whole databases rather than schemas, so database-wide things (advisory locks, LISTEN/NOTIFY,
 * pg_stat views) behave as in production. They are dropped when the process that created them
 * exits (atexit; forked children never drop their parent's); databases left by a crashed run are
 * dropped by the next run once their process is gone. */
#ifndef MISSIVE_TEST_STORES_H
#define MISSIVE_TEST_STORES_H

#include "missive/store.h"

/* Fills kinds with the store kinds to test ("sqlite", then "postgres" when configured) and
 * returns how many. */
int test_store_kinds(const char *kinds[2]);

/* A new, empty, never-migrated database of that kind; returns its store URL (valid until the
 * process exits). For tests that fork processes, start daemons or test migrations. NULL (and a
 * message on stderr) when the database could not be created. name: a short label, [a-z0-9_]. */
const char *test_store_url(const char *kind, const char *name);

/* Opens a new database of that kind and migrates it to the latest schema: an empty store.
 * opts may be NULL. NULL (and a message on stderr) on failure. Close with mv_store_close(). */
mv_store *test_store_fresh(const char *kind, const char *name);
mv_store *test_store_fresh_with(const char *kind, const char *name, const mv_store_options *opts);

/* Migrates a never-migrated store (test_store_url) to schema version `version` exactly, the way
 * mv_store_migrate does: the store a release with that schema left, to test the migrations
 * after it on (schema_version rows included). */
mv_code test_store_migrate_to(mv_store *store, int version, mv_err *err);

#ifndef MV_TEST_STORES_IMPL /* stores.c itself does not use the test runner */
#include "test.h"

/* Runs body once per kind, counting each run as one test (the runner counts the last one). */
static inline void test_each_store_(void (*body)(const char *kind)) {
    const char *kinds[2];
    int n = test_store_kinds(kinds);
    const char *base = test_current_name_;
    static char label[256];
    for (int i = 0; i < n; i++) {
        snprintf(label, sizeof label, "%s [%s]", base, kinds[i]);
        test_current_name_ = label;
        body(kinds[i]);
        if (i < n - 1) {
            if (test_current_failed_)
                test_failed_++;
            else
                test_passed_++;
            test_current_failed_ = 0;
        }
    }
    test_current_name_ = base;
}

/* Runs body when PostgreSQL is configured; otherwise the test is not counted at all. */
static inline void test_postgres_only_(void (*body)(const char *kind)) {
    const char *kinds[2];
    int n = test_store_kinds(kinds);
    if (n > 0 && strcmp(kinds[n - 1], "postgres") == 0)
        body("postgres");
    else
        test_passed_--; /* the runner adds one back */
}

#define STORE_TEST(name)                                                                           \
    static void name##_on_store_(const char *kind);                                                \
    TEST(name) { test_each_store_(name##_on_store_); }                                             \
    static void name##_on_store_(const char *kind)

/* A test of PostgreSQL-only behaviour (lost connections, statement timeouts); `kind` is
 * "postgres". Not run, and not counted, without MISSIVE_TEST_PG. */
#define POSTGRES_TEST(name)                                                                        \
    static void name##_on_store_(const char *kind);                                                \
    TEST(name) { test_postgres_only_(name##_on_store_); }                                          \
    static void name##_on_store_(const char *kind)
#endif

#endif
