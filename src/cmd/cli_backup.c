/* cli_backup.c — `missive backup --store URL --to FILE` and `missive restore --from FILE --store
 * URL [--force]`.
 *
 * A backup of a SQLite store is taken while daemons keep writing (the store's online backup: a
 * snapshot, so every message in it is whole) and is itself a SQLite store, so it can be opened,
 * checked or restored like one. A PostgreSQL store is PostgreSQL's to back up: both commands say
 * so (pg_dump, pg_restore) and exit 1. A restore refuses a store that already holds anything
 * unless --force is given, and afterwards migrates the restored store to this binary's schema. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "missive/store.h"
#include "store/db.h"

/* What "holds anything" means for a restore: a row in any table a daemon writes. */
static const char SQL_ROWS_HELD[] =
    "SELECT (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM message_requests) + "
    "(SELECT COUNT(*) FROM sagas) + (SELECT COUNT(*) FROM approvals) + "
    "(SELECT COUNT(*) FROM outbox) + (SELECT COUNT(*) FROM effects)";

/* A sqlite: URL naming a file that does not exist: opening it would create an empty store. */
static bool missing_sqlite_file(const char *url) {
    const char *path = strncmp(url, "sqlite:", 7) == 0 ? url + 7 : NULL;
    return path && strcmp(path, ":memory:") != 0 && access(path, F_OK) != 0;
}

typedef struct count_query {
    const char *sql;
    int64_t n;
} count_query;

static mv_code count_fn(mv_db *db, void *ctx, mv_err *err) {
    count_query *q = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, q->sql, &st, err, "");
    if (st) q->n = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return rc;
}

static mv_code count_rows(mv_store *store, const char *sql, int64_t *n, mv_err *err) {
    count_query q = {sql, 0};
    mv_code rc = mv_store_read(store, count_fn, &q, err);
    *n = q.n;
    return rc;
}

static int fail(const char *cmd, mv_store *store, const mv_err *err) {
    fprintf(stderr, "missive %s: %s\n", cmd, err->message);
    mv_store_close(store);
    return 1;
}

int cli_backup(int argc, char **argv) {
    static const char *const FLAGS[] = {"--store", "--to", NULL};
    const char *url = cli_flag(argc, argv, "--store"), *to = cli_flag(argc, argv, "--to");
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !url || !to) {
        fprintf(stderr, "usage: missive backup --store URL --to FILE\n");
        return 2;
    }
    mv_err err = {0};
    mv_store *store = NULL;
    if (missing_sqlite_file(url)) {
        fprintf(stderr, "missive backup: there is no store at %s\n", url);
        return 1;
    }
    int version = 0;
    if (mv_store_open(url, NULL, &store, &err) != MV_OK ||
        mv_store_schema_version(store, &version, &err) != MV_OK)
        return fail("backup", store, &err);
    if (version == 0) {
        mv_err_set(&err, MV_INVALID_ARGUMENT, "%s is not a missive store (never migrated)", url);
        return fail("backup", store, &err);
    }
    if (mv_store_backup(store, to, &err) != MV_OK) return fail("backup", store, &err);
    mv_store_close(store);
    printf("backed up %s to %s (schema version %d)\n", url, to, version);
    return 0;
}

int cli_restore(int argc, char **argv) {
    static const char *const FLAGS[] = {"--from", "--store", NULL}, *const BARE[] = {"--force",
                                                                                     NULL};
    const char *url = cli_flag(argc, argv, "--store"), *from = cli_flag(argc, argv, "--from");
    bool force = cli_has(argc, argv, "--force");
    if (!cli_flags_ok(argc, argv, FLAGS, BARE) || !url || !from) {
        fprintf(stderr, "usage: missive restore --from FILE --store URL [--force]\n");
        return 2;
    }
    mv_err err = {0};
    mv_store *store = NULL;
    int version = 0, applied = 0;
    int64_t held = 0;
    if (access(from, R_OK) != 0) {
        fprintf(stderr, "missive restore: cannot read %s\n", from);
        return 1;
    }
    if (mv_store_open(url, NULL, &store, &err) != MV_OK) return fail("restore", store, &err);
    /* PostgreSQL refuses in mv_store_restore itself, before anything is counted */
    bool sqlite = mv_store_kind_of(store) == MV_STORE_SQLITE;
    if (sqlite && (mv_store_schema_version(store, &version, &err) != MV_OK ||
                   (version > 0 && count_rows(store, SQL_ROWS_HELD, &held, &err) != MV_OK)))
        return fail("restore", store, &err);
    if (held > 0 && !force) {
        fprintf(stderr,
                "missive restore: %s is not empty (%lld rows); restoring replaces everything in "
                "it: stop the daemons using it and add --force\n",
                url, (long long)held);
        mv_store_close(store);
        return 1;
    }
    if (mv_store_restore(store, from, &err) != MV_OK ||
        mv_store_migrate(store, &applied, &err) != MV_OK ||
        mv_store_schema_version(store, &version, &err) != MV_OK)
        return fail("restore", store, &err);
    mv_store_close(store);
    printf("restored %s into %s (schema version %d%s)\n", from, url, version,
           applied ? ", migrated" : "");
    return 0;
}
