/* store.c — the generic half of the SQL layer: URL dispatch, a connection pool, per-connection
 * statement caches, the transaction protocol and schema migrations.
 *
 * Invariants: a connection is used by one thread at a time (checked out of the pool for the
 * length of one transaction); on SQLite, write transactions of one store are serialised by a
 * mutex (one writer per process, BEGIN IMMEDIATE between processes), so writers queue in memory
 * instead of spinning on SQLITE_BUSY. With group commit (the default, both stores) every write
 * is a job of the engine in group_commit.c: writers queue their callbacks and a leading thread
 * commits a batch of them (SQLite: one at a time; PostgreSQL: a few at once, pg_batch.c) — a
 * synchronous writer that finds a lead free, or the store's writer threads for asynchronous
 * writes (mv__store_write_async) — and readers keep the other connections of the pool. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/callctx.h"
#include "missive/base.h"
#include "store/driver.h"
#include "store/group_commit.h"
#include "store/listen.h"

/* PostgreSQL: rerunnable batches running at once, each on a connection of its own, and the most
 * jobs of one (a create queues four statements, and the pipeline flushes early at 256 queued
 * results, pg.c: 32 creates stay one round trip). */
#define PG_LEADERS 4
#define PG_BATCH_MAX 32

struct mv_store {
    const mv_driver *drv;
    mv_store_kind kind;
    char *url;
    mv_store_options opts;
    bool memory;
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    mv_db **free_list; /* connections not in use (NULL slots are not yet connected) */
    int nfree, pool_size;
    pthread_mutex_t write_mu; /* SQLite: one writer at a time */
    /* Group commit (group_commit.c): NULL when off ("groupCommit": false, or no memory). On
     * PostgreSQL gc batches the rerunnable writes and gc_plain runs the other asynchronous ones,
     * each alone (pg_batch.c). */
    mv_gc *gc, *gc_plain;
    atomic_uint_fast64_t async_writes; /* mv__store_async_writes */
    /* The last write transaction failed because the store could not take it (a full disk, an
     * I/O error, a lost server) and none has committed since: health checks then probe. */
    atomic_bool write_failing;
    pthread_mutex_t hook_mu;      /* guards the hook, so removing it waits for a call in flight */
    void (*on_commit)(void *ctx); /* listen.h: called after every committed write */
    void *on_commit_ctx;
    atomic_uint_fast64_t round_trips; /* of finished transactions (mv__store_round_trips) */
};

/* Remembers how the last write ended (see write_failing). */
static void note_write(mv_store *s, mv_code rc) {
    if (rc == MV_OK)
        atomic_store(&s->write_failing, false);
    else if (rc == MV_STORE_UNAVAILABLE)
        atomic_store(&s->write_failing, true);
}

static mv_code store_acquire(mv_store *s, mv_db **out, mv_err *err);
static void store_release(mv_store *s, mv_db *db);

mv_store_kind mv_store_kind_of(const mv_store *store) { return store->kind; }
bool mv_store_is_memory(const mv_store *store) { return store->memory; }
mv_store_kind mv_db_kind(const mv_db *db) { return db->store->kind; }
const char *mv__store_url(const mv_store *store) { return store->url; }
bool mv__store_notifies(const mv_store *store) { return store->drv->after_commit != NULL; }
void mv__store_on_commit(mv_store *store, void (*fn)(void *ctx), void *ctx) {
    pthread_mutex_lock(&store->hook_mu);
    store->on_commit_ctx = ctx;
    store->on_commit = fn;
    pthread_mutex_unlock(&store->hook_mu);
}

static void committed(mv_store *s) {
    pthread_mutex_lock(&s->hook_mu);
    if (s->on_commit) s->on_commit(s->on_commit_ctx);
    pthread_mutex_unlock(&s->hook_mu);
}

mv_code mv_store_open(const char *url, const mv_store_options *opts, mv_store **out, mv_err *err) {
    *out = NULL;
    mv_store_options o = opts ? *opts : (mv_store_options){0};
    const mv_driver *drv;
    mv_store_kind kind;
    bool memory = false;
    if (!url) url = "";
    if (strncmp(url, "sqlite:", 7) == 0) {
        drv = &mv_sqlite_driver;
        kind = MV_STORE_SQLITE;
        memory = strcmp(url + 7, ":memory:") == 0;
        if (!url[7])
            return mv_err_set(err, MV_INVALID_ARGUMENT, "store URL \"sqlite:\" needs a path");
        if (memory && !o.allow_memory)
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "store URL \"sqlite::memory:\" is for tests only");
    } else if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0) {
        drv = &mv_pg_driver;
        kind = MV_STORE_POSTGRES;
    } else {
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "unsupported store URL \"%s\": expected sqlite:PATH, sqlite::memory: or "
                          "postgres://…",
                          url);
    }
    if (o.pool_size <= 0) o.pool_size = 8;
    if (memory) o.pool_size = 1; /* every :memory: connection is its own database */
    if (!o.synchronous) o.synchronous = "FULL";
    if (strcmp(o.synchronous, "FULL") && strcmp(o.synchronous, "NORMAL") &&
        strcmp(o.synchronous, "OFF"))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "synchronous must be FULL, NORMAL or OFF, not \"%s\"", o.synchronous);
    if (o.busy_timeout_ms <= 0) o.busy_timeout_ms = MV_DEFAULT_BUSY_TIMEOUT_MS;
    if (o.statement_timeout_ms <= 0) o.statement_timeout_ms = MV_DEFAULT_STATEMENT_TIMEOUT_MS;

    mv_store *s = calloc(1, sizeof *s);
    if (!s) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    s->drv = drv;
    s->kind = kind;
    s->memory = memory;
    s->url = strdup(url);
    s->opts = o;
    s->opts.synchronous = NULL; /* not kept: the caller's string may go away */
    s->pool_size = o.pool_size;
    s->free_list = calloc((size_t)o.pool_size, sizeof *s->free_list);
    pthread_mutex_init(&s->pool_mu, NULL);
    pthread_cond_init(&s->pool_cv, NULL);
    pthread_mutex_init(&s->write_mu, NULL);
    pthread_mutex_init(&s->hook_mu, NULL);
    if (!s->url || !s->free_list) {
        mv_store_close(s);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    s->nfree = o.pool_size; /* all slots free, none connected yet */
    if (!o.no_group_commit && kind == MV_STORE_SQLITE) {
        s->gc = mv__gc_new(s, 1, MV_GC_MAX);
    } else if (!o.no_group_commit) {
        s->gc = mv__gc_new(s, PG_LEADERS, PG_BATCH_MAX);
        s->gc_plain = mv__gc_new(s, o.pool_size, 1);
        if (!s->gc_plain) mv__gc_free(s->gc), s->gc = NULL;
    }
    static const char *sync_names[] = {"FULL", "NORMAL", "OFF"};
    for (int i = 0; i < 3; i++)
        if (opts && opts->synchronous && strcmp(opts->synchronous, sync_names[i]) == 0)
            s->opts.synchronous = sync_names[i];
    if (!s->opts.synchronous) s->opts.synchronous = "FULL";

    /* Connect once now so a bad URL or unreachable server fails at open, not later. */
    mv_db *db;
    mv_code rc;
    if ((rc = store_acquire(s, &db, err)) != MV_OK) {
        mv_store_close(s);
        return rc;
    }
    store_release(s, db);
    *out = s;
    return MV_OK;
}

static void db_free(mv_db *db) {
    if (!db) return;
    for (int b = 0; b < MV_STMT_CACHE_BUCKETS; b++) {
        mv_stmt *st = db->cache[b];
        while (st) {
            mv_stmt *next = st->next;
            for (int i = 0; i < st->nparams; i++)
                free(st->params[i].s);
            db->drv->finalize(st->drv_stmt);
            free(st->params);
            free(st);
            st = next;
        }
    }
    db->drv->disconnect(db->conn);
    free(db);
}

void mv_store_close(mv_store *store) {
    if (!store) return;
    mv__gc_free(store->gc); /* runs what is still queued first */
    mv__gc_free(store->gc_plain);
    for (int i = 0; store->free_list && i < store->nfree; i++)
        db_free(store->free_list[i]);
    free(store->free_list);
    free(store->url);
    pthread_mutex_destroy(&store->pool_mu);
    pthread_cond_destroy(&store->pool_cv);
    pthread_mutex_destroy(&store->write_mu);
    pthread_mutex_destroy(&store->hook_mu);
    free(store);
}

static mv_code store_acquire(mv_store *s, mv_db **out, mv_err *err) {
    pthread_mutex_lock(&s->pool_mu);
    while (s->nfree == 0)
        pthread_cond_wait(&s->pool_cv, &s->pool_mu);
    mv_db *db = s->free_list[--s->nfree];
    pthread_mutex_unlock(&s->pool_mu);
    if (db && s->drv->is_broken && s->drv->is_broken(db->conn)) {
        db_free(db);
        db = NULL;
    }
    if (!db) {
        db = calloc(1, sizeof *db);
        mv_code rc = db ? s->drv->connect(s->url, &s->opts, &db->conn, err)
                        : mv_err_set(err, MV_NO_MEMORY, "out of memory");
        if (rc != MV_OK) {
            free(db);
            pthread_mutex_lock(&s->pool_mu);
            s->free_list[s->nfree++] = NULL;
            pthread_cond_signal(&s->pool_cv);
            pthread_mutex_unlock(&s->pool_mu);
            return rc;
        }
        db->store = s;
        db->drv = s->drv;
    }
    *out = db;
    return MV_OK;
}

static void store_release(mv_store *s, mv_db *db) {
    pthread_mutex_lock(&s->pool_mu);
    s->free_list[s->nfree++] = db;
    pthread_cond_signal(&s->pool_cv);
    pthread_mutex_unlock(&s->pool_mu);
}

uint64_t mv__store_round_trips(mv_store *store) { return atomic_load(&store->round_trips); }

static const char SQL_TX_BEGIN_READ[] = "BEGIN";
static const char SQL_TX_BEGIN_WRITE[] = "BEGIN IMMEDIATE";
static const char SQL_TX_COMMIT[] = "COMMIT";

static mv_code run_tx(mv_store *s, bool write, mv_tx_fn fn, void *ctx, mv_err *err) {
    mv_db *db;
    mv_code rc = store_acquire(s, &db, err);
    if (rc != MV_OK) return rc;
    uint64_t trips = s->drv->round_trips ? s->drv->round_trips(db->conn) : 0;
    bool lock = write && s->kind == MV_STORE_SQLITE;
    if (lock) pthread_mutex_lock(&s->write_mu);
    /* SQLite: BEGIN and COMMIT from the statement cache, as the group commit's (not parsed per
     * transaction by sqlite3_exec: every read, an action's load on its I/O thread included) */
    bool cached = s->kind == MV_STORE_SQLITE;
    rc = cached ? mv_db_execf(db, write ? SQL_TX_BEGIN_WRITE : SQL_TX_BEGIN_READ, NULL, err, "")
                : s->drv->begin(db->conn, write, err);
    if (rc == MV_OK) {
        rc = fn(db, ctx, err);
        if (rc == MV_OK) {
            rc = cached ? mv_db_execf(db, SQL_TX_COMMIT, NULL, err, "")
                        : s->drv->exec(db->conn, "COMMIT", err);
            if (rc != MV_OK) s->drv->exec(db->conn, "ROLLBACK", NULL);
        } else {
            s->drv->exec(db->conn, "ROLLBACK", NULL);
        }
    }
    if (lock) pthread_mutex_unlock(&s->write_mu);
    if (s->drv->round_trips)
        atomic_fetch_add(&s->round_trips, s->drv->round_trips(db->conn) - trips);
    store_release(s, db);
    if (write) note_write(s, rc);
    if (write && rc == MV_OK) committed(s);
    return rc;
}

/* ---- writes: the group-commit engine (group_commit.c) ----------------------------------- */

bool mv__store_writes_async(const mv_store *store) { return store->gc != NULL; }
bool mv__store_reads_locally(const mv_store *store) { return store->kind == MV_STORE_SQLITE; }
uint64_t mv__store_async_writes(mv_store *store) {
    return (uint64_t)atomic_load_explicit(&store->async_writes, memory_order_relaxed);
}

static void write_async(mv_store *store, mv_tx_fn fn, void *ctx, bool rerunnable,
                        mv__write_done done, void *done_ctx) {
    atomic_fetch_add_explicit(&store->async_writes, 1, memory_order_relaxed);
    mv_gc *g = store->gc_plain && !rerunnable ? store->gc_plain : store->gc;
    if (!g || !mv__gc_write_async(g, fn, ctx, rerunnable, done, done_ctx)) {
        /* no group commit (or no memory for the job, or no thread): on this thread */
        mv_err err = {0};
        mv_code rc = rerunnable ? mv__store_write_rerunnable(store, fn, ctx, &err)
                                : mv_store_write(store, fn, ctx, &err);
        done(rc, rc == MV_OK ? NULL : &err, done_ctx);
    }
}

void mv__store_write_async(mv_store *store, mv_tx_fn fn, void *ctx, mv__write_done done,
                           void *done_ctx) {
    write_async(store, fn, ctx, false, done, done_ctx);
}

void mv__store_write_async_rerunnable(mv_store *store, mv_tx_fn fn, void *ctx, mv__write_done done,
                                      void *done_ctx) {
    write_async(store, fn, ctx, true, done, done_ctx);
}

mv_code mv_store_write(mv_store *store, mv_tx_fn fn, void *ctx, mv_err *err) {
    /* PostgreSQL runs a plain write as a transaction of its own (pg_batch.c): handed to an
     * engine it would only move to another thread, so it stays on the caller's. */
    if (store->gc && !store->gc_plain) return mv__gc_write(store->gc, fn, ctx, false, err);
    return run_tx(store, true, fn, ctx, err);
}

mv_code mv__store_write_rerunnable(mv_store *store, mv_tx_fn fn, void *ctx, mv_err *err) {
    if (store->gc) return mv__gc_write(store->gc, fn, ctx, true, err);
    return run_tx(store, true, fn, ctx, err);
}

mv_code mv_store_read(mv_store *store, mv_tx_fn fn, void *ctx, mv_err *err) {
    return run_tx(store, false, fn, ctx, err);
}

mv_code mv__store_acquire(mv_store *s, mv_db **out, mv_err *err) {
    return store_acquire(s, out, err);
}

void mv__store_release(mv_store *s, mv_db *db, uint64_t trips_before) {
    if (s->drv->round_trips)
        atomic_fetch_add(&s->round_trips, s->drv->round_trips(db->conn) - trips_before);
    store_release(s, db);
}

void mv__store_wrote(mv_store *s, mv_code rc) { note_write(s, rc); }
void mv__store_committed(mv_store *s) { committed(s); }

void mv__store_write_lock(mv_store *s, bool lock) {
    if (lock)
        pthread_mutex_lock(&s->write_mu);
    else
        pthread_mutex_unlock(&s->write_mu);
}

mv_code mv__store_write_alone(mv_store *s, mv_tx_fn fn, void *ctx, mv_err *err) {
    return run_tx(s, true, fn, ctx, err);
}

/* ---- statements ------------------------------------------------------------------------- */

static size_t bucket_of(const char *sql) {
    uintptr_t p = (uintptr_t)sql;
    return (size_t)((p >> 4) ^ (p >> 12)) % MV_STMT_CACHE_BUCKETS;
}

mv_code mv_db_prepare(mv_db *db, const char *sql, mv_stmt **out, mv_err *err) {
    size_t b = bucket_of(sql);
    for (mv_stmt *st = db->cache[b]; st; st = st->next) {
        if (st->sql == sql) {
            *out = st;
            return MV_OK;
        }
    }
    mv_stmt *st = calloc(1, sizeof *st);
    if (!st) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = db->drv->prepare(db->conn, sql, &st->drv_stmt, err);
    if (rc != MV_OK) {
        free(st);
        return rc;
    }
    st->db = db;
    st->sql = sql;
    st->next = db->cache[b];
    db->cache[b] = st;
    *out = st;
    return MV_OK;
}

static mv_param *param_slot(mv_stmt *st, int idx) {
    if (idx < 1 || idx > MV_STMT_MAX_PARAMS) abort(); /* a programming error, never input */
    if (idx > st->cap) {
        int cap = st->cap ? st->cap : 16;
        while (cap < idx)
            cap *= 2;
        if (cap > MV_STMT_MAX_PARAMS) cap = MV_STMT_MAX_PARAMS;
        mv_param *grown = realloc(st->params, (size_t)cap * sizeof *grown);
        if (!grown) abort(); /* as for a bound text: binding has no error path */
        memset(grown + st->cap, 0, (size_t)(cap - st->cap) * sizeof *grown);
        st->params = grown;
        st->cap = cap;
    }
    if (st->started) { /* the driver may still point at the value being replaced */
        st->db->drv->reset(st->drv_stmt);
        st->started = false;
    }
    mv_param *p = &st->params[idx - 1];
    free(p->s);
    p->s = NULL;
    if (idx > st->nparams) {
        for (int i = st->nparams; i < idx - 1; i++)
            st->params[i].type = MV_PARAM_NULL;
        st->nparams = idx;
    }
    return p;
}

void mv_stmt_bind_text(mv_stmt *st, int idx, const char *s) {
    mv_param *p = param_slot(st, idx);
    if (!s) {
        p->type = MV_PARAM_NULL;
        return;
    }
    p->s = strdup(s);
    if (!p->s) abort();
    p->type = MV_PARAM_TEXT;
}

void mv_stmt_bind_int64(mv_stmt *st, int idx, int64_t v) {
    mv_param *p = param_slot(st, idx);
    p->type = MV_PARAM_INT;
    p->i = v;
}

void mv_stmt_bind_null(mv_stmt *st, int idx) { param_slot(st, idx)->type = MV_PARAM_NULL; }

static void bind_va(mv_stmt *st, const char *fmt, va_list ap) {
    for (int i = 0; fmt[i]; i++) {
        switch (fmt[i]) {
        case 's': mv_stmt_bind_text(st, i + 1, va_arg(ap, const char *)); break;
        case 'i': mv_stmt_bind_int64(st, i + 1, va_arg(ap, int64_t)); break;
        case 'b': mv_stmt_bind_int64(st, i + 1, va_arg(ap, int) ? 1 : 0); break;
        case 'n': mv_stmt_bind_null(st, i + 1); break;
        default: abort();
        }
    }
}

void mv_stmt_bindf(mv_stmt *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    bind_va(st, fmt, ap);
    va_end(ap);
}

int mv_stmt_step(mv_stmt *st, mv_err *err) {
    bool first = !st->started;
    st->started = true;
    return st->db->drv->step(st->db->conn, st->drv_stmt, first, st->params, st->nparams,
                             &st->changes, err);
}

const char *mv_stmt_text(mv_stmt *st, int col) { return st->db->drv->text(st->drv_stmt, col); }
int64_t mv_stmt_int64(mv_stmt *st, int col) { return st->db->drv->int64(st->drv_stmt, col); }
bool mv_stmt_is_null(mv_stmt *st, int col) { return st->db->drv->is_null(st->drv_stmt, col); }
int mv_stmt_column_count(mv_stmt *st) { return st->db->drv->column_count(st->drv_stmt); }
int64_t mv_stmt_changes(mv_stmt *st) { return st->changes; }

void mv_stmt_done(mv_stmt *st) {
    if (!st) return;
    st->db->drv->reset(st->drv_stmt);
    for (int i = 0; i < st->nparams; i++) {
        free(st->params[i].s);
        st->params[i].s = NULL;
        st->params[i].type = MV_PARAM_NULL;
    }
    st->nparams = 0;
    st->started = false;
    st->changes = 0;
}

/* mv_db_prepare + bind: the common start of mv_db_execf and mv_db_row. */
static mv_code prepare_bound(mv_db *db, const char *sql, mv_stmt **st, mv_err *err, const char *fmt,
                             va_list ap) {
    mv_code rc = mv_db_prepare(db, sql, st, err);
    if (rc == MV_OK) bind_va(*st, fmt, ap);
    return rc;
}

mv_code mv_db_execf(mv_db *db, const char *sql, int64_t *changes, mv_err *err, const char *fmt,
                    ...) {
    mv_stmt *st;
    va_list ap;
    va_start(ap, fmt);
    mv_code rc = prepare_bound(db, sql, &st, err, fmt, ap);
    va_end(ap);
    if (rc != MV_OK) return rc;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
    }
    if (changes) *changes = mv_stmt_changes(st);
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_db_row(mv_db *db, const char *sql, mv_stmt **out, mv_err *err, const char *fmt, ...) {
    *out = NULL;
    mv_stmt *st;
    va_list ap;
    va_start(ap, fmt);
    mv_code rc = prepare_bound(db, sql, &st, err, fmt, ap);
    va_end(ap);
    if (rc != MV_OK) return rc;
    int r = mv_stmt_step(st, err);
    if (r == 1) {
        *out = st;
        return MV_OK;
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

/* Queues a bound statement (or, without a driver queue, runs it now) and returns it to the cache.
 */
static mv_code exec_later(mv_stmt *st, mv_code on_unique, mv_err *err) {
    mv_db *db = st->db;
    mv_code rc = MV_OK;
    if (db->drv->send) {
        rc = db->drv->send(db->conn, st->drv_stmt, st->params, st->nparams, on_unique, err);
    } else {
        int r;
        while ((r = mv_stmt_step(st, err)) == 1) {
        }
        if (r < 0) {
            rc = err ? err->code : MV_INTERNAL;
            if (on_unique != MV_OK && db->drv->unique_violation &&
                db->drv->unique_violation(db->conn)) {
                rc = on_unique;
                if (err) err->code = on_unique;
            }
        }
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_stmt_exec_later(mv_stmt *st, mv_err *err) { return exec_later(st, MV_OK, err); }

mv_code mv_db_execf_later(mv_db *db, const char *sql, mv_err *err, const char *fmt, ...) {
    mv_stmt *st;
    va_list ap;
    va_start(ap, fmt);
    mv_code rc = prepare_bound(db, sql, &st, err, fmt, ap);
    va_end(ap);
    return rc != MV_OK ? rc : exec_later(st, MV_OK, err);
}

mv_code mv_db_execf_later_unique(mv_db *db, const char *sql, mv_code on_unique, mv_err *err,
                                 const char *fmt, ...) {
    mv_stmt *st;
    va_list ap;
    va_start(ap, fmt);
    mv_code rc = prepare_bound(db, sql, &st, err, fmt, ap);
    va_end(ap);
    return rc != MV_OK ? rc : exec_later(st, on_unique, err);
}

mv_code mv_db_exec_after_commit(mv_db *db, const char *sql, mv_err *err) {
    /* without a driver queue (SQLite) there is no channel between connections: nothing to wake */
    return db->drv->after_commit ? db->drv->after_commit(db->conn, sql, err) : MV_OK;
}

mv_code mv_db_exec(mv_db *db, const char *sql, mv_err *err) {
    return db->drv->exec(db->conn, sql, err);
}

/* ---- migrations ------------------------------------------------------------------------- */

/* ---- backup and restore ------------------------------------------------------------------ */

static mv_code copy(mv_store *store, const char *path, bool restore, mv_err *err) {
    const mv_driver *drv = store->drv;
    if (!(restore ? drv->restore != NULL : drv->backup != NULL))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          restore ? "a PostgreSQL store is restored with PostgreSQL's own tools: "
                                    "pg_restore (or psql) from a pg_dump"
                                  : "a PostgreSQL store is backed up with PostgreSQL's own tools: "
                                    "pg_dump (pg_dump --format=custom DBNAME > FILE)");
    mv_db *db;
    mv_code rc = store_acquire(store, &db, err);
    if (rc != MV_OK) return rc;
    rc = restore ? drv->restore(db->conn, path, mv_store_latest_version(), err)
                 : drv->backup(db->conn, path, err);
    store_release(store, db);
    return rc;
}

mv_code mv_store_backup(mv_store *store, const char *path, mv_err *err) {
    return copy(store, path, false, err);
}

mv_code mv_store_restore(mv_store *store, const char *path, mv_err *err) {
    return copy(store, path, true, err);
}

int mv_store_latest_version(void) {
    int v = 0;
    for (int i = 0; mv_migrations[i]; i++)
        v = mv_migrations[i]->version;
    return v;
}

static const char SQL_CREATE_SCHEMA_VERSION[] =
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
    "applied_at BIGINT NOT NULL)";
static const char SQL_MAX_VERSION[] = "SELECT COALESCE(MAX(version), 0) FROM schema_version";
static const char SQL_RECORD_VERSION[] =
    "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)";
static const char SQL_PG_MIGRATION_LOCK[] = "SELECT pg_advisory_xact_lock(7052463)";
static const char SQL_PG_NO_TIMEOUT[] = "SET LOCAL statement_timeout = 0";

static mv_code read_version(mv_db *db, int *version, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_MAX_VERSION, &st, err, "");
    *version = st ? (int)mv_stmt_int64(st, 0) : 0;
    mv_stmt_done(st);
    return rc;
}

typedef struct {
    const mv_migration *m;
    bool applied;
} migrate_step;

static mv_code migrate_one(mv_db *db, void *ctx, mv_err *err) {
    migrate_step *step = ctx;
    mv_code rc;
    /* A migration may rebuild a big table, and waiting for another process's migration is
     * normal: neither may be cut short by the statement timeout. */
    if (db->store->kind == MV_STORE_POSTGRES &&
        ((rc = mv_db_exec(db, SQL_PG_NO_TIMEOUT, err)) != MV_OK ||
         (rc = mv_db_execf(db, SQL_PG_MIGRATION_LOCK, NULL, err, "")) != MV_OK))
        return rc;
    if ((rc = mv_db_exec(db, SQL_CREATE_SCHEMA_VERSION, err)) != MV_OK) return rc;
    int version;
    if ((rc = read_version(db, &version, err)) != MV_OK) return rc;
    if (version > mv_store_latest_version())
        return mv_err_set(err, MV_SCHEMA_TOO_NEW,
                          "the store's schema is version %d but this missive knows only up to %d; "
                          "upgrade missive",
                          version, mv_store_latest_version());
    if (version >= step->m->version) return MV_OK;
    const char *sql =
        db->store->kind == MV_STORE_POSTGRES ? step->m->postgres_sql : step->m->sqlite_sql;
    if ((rc = mv_db_exec(db, sql, err)) != MV_OK) {
        mv_err_prefix(err, "migration %d (%s)", step->m->version, step->m->name);
        return rc;
    }
    step->applied = true;
    return mv_db_execf(db, SQL_RECORD_VERSION, NULL, err, "isi", (int64_t)step->m->version,
                       step->m->name, mv_now_ms());
}

mv_code mv_store_migrate(mv_store *store, int *applied, mv_err *err) {
    int n = 0;
    if (applied) *applied = 0;
    mv_code rc = MV_OK;
    if (!mv_migrations[0]) {
        static const mv_migration none = {0, "schema_version", "SELECT 1", "SELECT 1"};
        migrate_step step = {&none, false};
        return mv_store_write(store, migrate_one, &step, err);
    }
    for (int i = 0; mv_migrations[i]; i++) {
        migrate_step step = {mv_migrations[i], false};
        if ((rc = mv_store_write(store, migrate_one, &step, err)) != MV_OK) return rc;
        if (step.applied) n++;
    }
    if (applied) *applied = n;
    return MV_OK;
}

static const char SQL_PG_HAS_SCHEMA_VERSION[] =
    "SELECT CASE WHEN to_regclass('schema_version') IS NULL THEN 0 ELSE 1 END";

/* On PostgreSQL, reading the version creates nothing: a CREATE TABLE IF NOT EXISTS racing with a
 * migration in another process (which holds the migration lock) fails with a duplicate key. */
static mv_code version_tx(mv_db *db, void *ctx, mv_err *err) {
    mv_code rc;
    if (db->store->kind == MV_STORE_POSTGRES) {
        mv_stmt *st;
        if ((rc = mv_db_prepare(db, SQL_PG_HAS_SCHEMA_VERSION, &st, err)) != MV_OK) return rc;
        int r = mv_stmt_step(st, err);
        bool exists = r == 1 && mv_stmt_int64(st, 0) == 1;
        mv_stmt_done(st);
        if (r < 0) return err ? err->code : MV_INTERNAL;
        return exists ? read_version(db, ctx, err) : MV_OK;
    }
    rc = mv_db_exec(db, SQL_CREATE_SCHEMA_VERSION, err);
    return rc != MV_OK ? rc : read_version(db, ctx, err);
}

mv_code mv_store_schema_version(mv_store *store, int *version, mv_err *err) {
    *version = 0;
    return mv_store_write(store, version_tx, version, err);
}

mv_code mv_store_check_schema(mv_store *store, mv_err *err) {
    int v;
    mv_code rc = mv_store_schema_version(store, &v, err);
    if (rc != MV_OK) return rc;
    if (v > mv_store_latest_version())
        return mv_err_set(err, MV_SCHEMA_TOO_NEW,
                          "the store's schema is version %d but this missive knows only up to %d",
                          v, mv_store_latest_version());
    if (v < mv_store_latest_version())
        return mv_err_set(err, MV_STORE_UNAVAILABLE,
                          "the store's schema is version %d; run `missive migrate` (latest is %d)",
                          v, mv_store_latest_version());
    return MV_OK;
}

static const char SQL_PING[] = "SELECT 1";

static mv_code ping_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_PING, NULL, err, "");
}

mv_code mv_store_ping(mv_store *store, mv_err *err) {
    return mv_store_read(store, ping_tx, NULL, err);
}

bool mv_store_write_failing(const mv_store *store) {
    return atomic_load(&((mv_store *)store)->write_failing);
}

/* The probe writes a row that needs fresh pages (SQLite: 64 KiB) and removes it again: it commits
 * only when the store can really take a write of that size. */
static const char SQL_PROBE_SQLITE[] =
    "INSERT INTO store_probe (id, filler) VALUES (1, zeroblob(65536))";
static const char SQL_PROBE_PG[] = "INSERT INTO store_probe (id, filler) VALUES (1, NULL)";
static const char SQL_PROBE_CLEAR[] = "DELETE FROM store_probe";

static mv_code probe_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = mv_db_execf(db, SQL_PROBE_CLEAR, NULL, err, "");
    if (rc == MV_OK)
        rc = mv_db_execf(db, db->store->kind == MV_STORE_SQLITE ? SQL_PROBE_SQLITE : SQL_PROBE_PG,
                         NULL, err, "");
    return rc == MV_OK ? mv_db_execf(db, SQL_PROBE_CLEAR, NULL, err, "") : rc;
}

mv_code mv_store_probe_write(mv_store *store, mv_err *err) {
    mv_code rc = mv_store_write(store, probe_tx, NULL, err);
    if (rc != MV_OK && rc != MV_STORE_UNAVAILABLE) /* e.g. SQLite's "database or disk is full" */
        rc = mv_err_set(err, MV_STORE_UNAVAILABLE, "the store cannot take a write: %s",
                        err ? err->message : "");
    return rc;
}
