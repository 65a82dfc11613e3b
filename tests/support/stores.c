/* stores.c — fresh SQLite files and fresh PostgreSQL databases for store-level tests (see
 * stores.h for the why). PostgreSQL databases are created over a short-lived maintenance
 * connection to MISSIVE_TEST_PG and reached through a URL rebuilt from that URI's parameters
 * with the database name replaced, so any libpq URI or key=value string works there. */
#define MV_TEST_STORES_IMPL

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "store/db.h"
#include "store/driver.h"
#include "support/stores.h"

typedef struct created_db {
    char *name; /* PostgreSQL database; NULL for SQLite entries */
    char *url;
    pid_t owner;
    struct created_db *next;
} created_db;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static created_db *created;
static unsigned counter;
static bool exit_hook_set, stale_swept;

static const char *pg_server(void) {
    const char *s = getenv("MISSIVE_TEST_PG");
    return s && *s ? s : NULL;
}

int test_store_kinds(const char *kinds[2]) {
    static bool skip_said;
    const char *only = getenv("MISSIVE_TEST_STORES");
    int n = 0;
    if (!only || strstr(only, "sqlite")) kinds[n++] = "sqlite";
    if (!only || strstr(only, "postgres")) {
        if (pg_server()) {
            kinds[n++] = "postgres";
        } else if (!skip_said) {
            skip_said = true;
            printf("SKIP postgres: MISSIVE_TEST_PG not set\n");
            fflush(stdout);
        }
    }
    return n;
}

static void ignore_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static PGconn *maintenance_connect(void) {
    PGconn *c = PQconnectdb(pg_server());
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "test stores: cannot connect to MISSIVE_TEST_PG: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, ignore_notice, NULL);
    return c;
}

static bool run(PGconn *c, const char *sql, bool quiet) {
    PGresult *r = PQexec(c, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok && !quiet) fprintf(stderr, "test stores: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

static void remove_stores_at_exit(void) {
    pthread_mutex_lock(&mu);
    PGconn *c = NULL;
    bool unreachable = false;
    for (created_db *d = created; d; d = d->next) {
        if (d->owner != getpid()) continue;
        if (!d->name) { /* SQLite: the file and its WAL companions */
            static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
            for (int i = 0; i < 4; i++) {
                char path[700];
                snprintf(path, sizeof path, "%s%s", d->url + strlen("sqlite:"), suffixes[i]);
                unlink(path);
            }
            continue;
        }
        if (!c && !unreachable && !(c = maintenance_connect())) unreachable = true;
        if (!c) continue;
        char sql[160];
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", d->name);
        run(c, sql, false);
    }
    PQfinish(c);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/missive-test-%d", (int)getpid());
    rmdir(dir); /* only when nothing else was left there */
    while (created) {
        created_db *next = created->next;
        free(created->name);
        free(created->url);
        free(created);
        created = next;
    }
    pthread_mutex_unlock(&mu);
}

/* Drops databases of earlier runs whose process is gone (a crash skips atexit). A database still
 * in use cannot be dropped without FORCE, so a live run elsewhere is never disturbed. */
static void sweep_stale(PGconn *c) {
    PGresult *r = PQexec(c, "SELECT datname FROM pg_database WHERE datname LIKE 'mt\\_%'");
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        for (int i = 0; i < PQntuples(r); i++) {
            const char *name = PQgetvalue(r, i, 0);
            long pid = strtol(name + 3, NULL, 10);
            if (pid <= 0 || pid == (long)getpid()) continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
            char sql[160];
            snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\"", name);
            run(c, sql, true);
        }
    }
    PQclear(r);
}

/* Appends "key=value" for each set parameter except dbname, percent-encoding the value. */
static void append_params(char *url, size_t size, PQconninfoOption *opts) {
    char sep = '?';
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val || strcmp(o->keyword, "dbname") == 0) continue;
        size_t n = strlen(url);
        n += (size_t)snprintf(url + n, size - n, "%c%s=", sep, o->keyword);
        sep = '&';
        for (const char *v = o->val; *v && n + 4 < size; v++) {
            unsigned char ch = (unsigned char)*v;
            if (isalnum(ch) || strchr("-._~/", ch))
                url[n++] = (char)ch;
            else
                n += (size_t)snprintf(url + n, size - n, "%%%02X", ch);
        }
        url[n] = '\0';
    }
}

static char *pg_fresh_url(const char *label, char *dbname, size_t dbsize) {
    PGconn *c = maintenance_connect();
    if (!c) return NULL;
    if (!stale_swept) {
        stale_swept = true;
        sweep_stale(c);
    }
    unsigned n = ++counter;
    snprintf(dbname, dbsize, "mt_%d_%u_", (int)getpid(), n);
    size_t len = strlen(dbname);
    for (const char *p = label; *p && len < 60; p++)
        dbname[len++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    dbname[len] = '\0';
    char sql[200];
    snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\" TEMPLATE template0 STRATEGY FILE_COPY",
             dbname);
    bool ok = run(c, sql, true);
    if (!ok) { /* servers before 15 have no STRATEGY */
        snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\" TEMPLATE template0", dbname);
        ok = run(c, sql, false);
    }
    char *url = NULL;
    if (ok) {
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(pg_server(), &perr);
        if (opts) {
            char buf[2048];
            snprintf(buf, sizeof buf, "postgresql:///%s", dbname);
            append_params(buf, sizeof buf, opts);
            url = strdup(buf);
            PQconninfoFree(opts);
        } else {
            fprintf(stderr, "test stores: MISSIVE_TEST_PG: %s", perr ? perr : "invalid\n");
            PQfreemem(perr);
        }
    }
    PQfinish(c);
    return url;
}

static char *sqlite_fresh_url(const char *label) {
    char dir[64], buf[600];
    snprintf(dir, sizeof dir, "/tmp/missive-test-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(buf, sizeof buf, "sqlite:%s/%u-", dir, ++counter);
    size_t len = strlen(buf);
    for (const char *p = label; *p && len < 200; p++)
        buf[len++] = isalnum((unsigned char)*p) ? *p : '_';
    snprintf(buf + len, sizeof buf - len, ".db");
    unlink(buf + strlen("sqlite:"));
    return strdup(buf);
}

const char *test_store_url(const char *kind, const char *name) {
    pthread_mutex_lock(&mu);
    created_db *d = calloc(1, sizeof *d);
    char dbname[64] = "";
    if (d && strcmp(kind, "sqlite") == 0) {
        d->url = sqlite_fresh_url(name);
    } else if (d && strcmp(kind, "postgres") == 0 && pg_server()) {
        d->url = pg_fresh_url(name, dbname, sizeof dbname);
        if (d->url) d->name = strdup(dbname);
    } else {
        fprintf(stderr, "test stores: no store of kind \"%s\" is configured\n", kind);
    }
    const char *url = d ? d->url : NULL;
    if (url) {
        d->owner = getpid();
        d->next = created;
        created = d;
        if (!exit_hook_set) {
            exit_hook_set = true;
            atexit(remove_stores_at_exit);
        }
    } else {
        free(d);
    }
    pthread_mutex_unlock(&mu);
    return url;
}

mv_store *test_store_fresh_with(const char *kind, const char *name, const mv_store_options *opts) {
    const char *url = test_store_url(kind, name);
    if (!url) return NULL;
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(url, opts, &s, &err) != MV_OK || mv_store_migrate(s, NULL, &err) != MV_OK) {
        fprintf(stderr, "test stores: %s: %s\n", url, err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

mv_store *test_store_fresh(const char *kind, const char *name) {
    return test_store_fresh_with(kind, name, NULL);
}

static const char SQL_SCHEMA_VERSION_TABLE[] =
    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
    "applied_at BIGINT NOT NULL)";
static const char SQL_RECORD_VERSION[] =
    "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, 1)";

static mv_code migrate_to_tx(mv_db *db, void *ctx, mv_err *err) {
    int version = *(const int *)ctx;
    bool pg = mv_db_kind(db) == MV_STORE_POSTGRES;
    mv_code rc = mv_db_exec(db, SQL_SCHEMA_VERSION_TABLE, err);
    for (int i = 0; rc == MV_OK && mv_migrations[i] && mv_migrations[i]->version <= version; i++) {
        const mv_migration *m = mv_migrations[i];
        if ((rc = mv_db_exec(db, pg ? m->postgres_sql : m->sqlite_sql, err)) == MV_OK)
            rc = mv_db_execf(db, SQL_RECORD_VERSION, NULL, err, "is", (int64_t)m->version, m->name);
    }
    return rc;
}

mv_code test_store_migrate_to(mv_store *store, int version, mv_err *err) {
    return mv_store_write(store, migrate_to_tx, &version, err);
}
