/* changes.c — the durable change log (`stream_events`) behind live streams.
 *
 * Every transaction that changes a message calls mv__change_add_tx() as its last statement, so the
 * row commits or rolls back with the change itself: a reader of the log never sees a change that
 * did not happen and never misses one that did. Readers resume by id, which is only safe if ids
 * become visible in id order. SQLite guarantees that (one writer at a time, across processes).
 * PostgreSQL does not — two transactions may commit in the opposite order of their sequence
 * values — so every writer first takes one transaction-scoped advisory lock: ids are then drawn
 * and committed in the same order. The lock is held from the change-log insert to the commit
 * only, which is why the insert comes last. The same transaction sends a NOTIFY, which
 * PostgreSQL delivers after the commit, to wake the streams of every daemon. */
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"
#include "store/listen.h"

#define CHANGE_CHANNEL "missive_changes"

static const char SQL_PG_ORDER_LOCK[] = "SELECT pg_advisory_xact_lock(7052464)";
static const char SQL_PG_NOTIFY[] = "SELECT pg_notify('" CHANGE_CHANNEL "', '')";
static const char SQL_INSERT_CHANGE[] =
    "INSERT INTO stream_events (tenant_id, message_id, kind, viewer_id, created_at) "
    "VALUES (?, ?, ?, ?, ?)";
static const char SQL_READ_CHANGES[] =
    "SELECT id, tenant_id, message_id, kind, viewer_id, created_at FROM stream_events "
    "WHERE id > ? ORDER BY id LIMIT ?";
static const char SQL_LATEST_CHANGE[] = "SELECT (SELECT COALESCE(MAX(id), 0) FROM stream_events), "
                                        "(SELECT upto FROM stream_events_pruned WHERE one = 1)";
static const char SQL_GC_MAX[] =
    "SELECT COALESCE(MAX(id), 0) FROM stream_events WHERE created_at <= ?";
static const char SQL_GC_CHANGES[] = "DELETE FROM stream_events WHERE id <= ?";
static const char SQL_GC_MARK[] =
    "UPDATE stream_events_pruned SET upto = ? WHERE one = 1 AND upto < ?";

static const char *const KIND_NAMES[] = {"created", "updated", "viewer"};

mv_code mv__change_add_tx(mv_db *db, const char *tenant, const char *message_id,
                          mv_change_kind kind, const char *viewer_id, int64_t now, mv_err *err) {
    mv_code rc;
    if (mv_db_kind(db) == MV_STORE_POSTGRES) {
        if ((rc = mv_db_execf(db, SQL_PG_ORDER_LOCK, NULL, err, "")) != MV_OK) return rc;
        if ((rc = mv_db_exec_after_commit(db, SQL_PG_NOTIFY, err)) != MV_OK) return rc;
    }
    return mv_db_execf_later(db, SQL_INSERT_CHANGE, err, "ssssi", tenant ? tenant : "default",
                             message_id ? message_id : "", KIND_NAMES[kind],
                             kind == MV_CHANGE_VIEWER ? viewer_id : NULL, now);
}

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct {
    int64_t after;
    mv_change *out;
    int max, n;
    int64_t latest, pruned;
} read_arg;

static mv_change_kind kind_of(const char *s) {
    for (int k = 0; k < 3; k++)
        if (s && strcmp(s, KIND_NAMES[k]) == 0) return (mv_change_kind)k;
    return MV_CHANGE_UPDATED;
}

static mv_code read_tx(mv_db *db, void *ctx, mv_err *err) {
    read_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_READ_CHANGES, &st, err);
    if (rc != MV_OK) return rc;
    mv_stmt_bindf(st, "ii", a->after, (int64_t)a->max);
    int r = 0;
    while (a->n < a->max && (r = mv_stmt_step(st, err)) == 1) {
        mv_change *c = &a->out[a->n++];
        memset(c, 0, sizeof *c);
        c->id = mv_stmt_int64(st, 0);
        mv_strlcpy(c->tenant, mv_stmt_text(st, 1), sizeof c->tenant);
        mv_strlcpy(c->message_id, mv_stmt_text(st, 2), sizeof c->message_id);
        c->kind = kind_of(mv_stmt_text(st, 3));
        mv_strlcpy(c->viewer_id, mv_stmt_text(st, 4), sizeof c->viewer_id);
        c->created_at = mv_stmt_int64(st, 5);
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_changes_read(mv_store *store, int64_t after, mv_change *out, int max, int *n,
                        mv_err *err) {
    *n = 0;
    if (max <= 0) return MV_OK;
    read_arg a = {.after = after, .out = out, .max = max};
    mv_code rc = mv_store_read(store, read_tx, &a, err);
    *n = rc == MV_OK ? a.n : 0;
    return rc;
}

static mv_code latest_tx(mv_db *db, void *ctx, mv_err *err) {
    read_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_LATEST_CHANGE, &st, err, "");
    if (st) {
        a->latest = mv_stmt_int64(st, 0);
        a->pruned = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_changes_latest(mv_store *store, int64_t *latest, int64_t *pruned, mv_err *err) {
    read_arg a = {0};
    mv_code rc = mv_store_read(store, latest_tx, &a, err);
    if (latest) *latest = a.latest;
    if (pruned) *pruned = a.pruned;
    return rc;
}

typedef struct {
    int64_t older_than, removed;
} gc_arg;

static mv_code gc_tx(mv_db *db, void *ctx, mv_err *err) {
    gc_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GC_MAX, &st, err, "i", a->older_than);
    int64_t upto = st ? mv_stmt_int64(st, 0) : 0;
    mv_stmt_done(st);
    if (rc != MV_OK || upto == 0) return rc;
    /* Ids are monotonic in time per writer order, so "up to the newest expired id" removes exactly
     * the expired prefix; the watermark tells resuming clients what they can no longer get. */
    if ((rc = mv_db_execf(db, SQL_GC_CHANGES, &a->removed, err, "i", upto)) != MV_OK) return rc;
    return mv_db_execf(db, SQL_GC_MARK, NULL, err, "ii", upto, upto);
}

mv_code mv_changes_gc(mv_store *store, int64_t older_than, int64_t *removed, mv_err *err) {
    gc_arg a = {older_than, 0};
    mv_code rc = mv_store_write(store, gc_tx, &a, err);
    if (removed) *removed = rc == MV_OK ? a.removed : 0;
    return rc;
}

/* ---- waiting ----------------------------------------------------------------------------- */

struct mv_change_waiter {
    mv_store *store;
    mv__listener *l;
};

static void wake_on_commit(void *ctx) { mv__listener_wake(ctx); }

mv_code mv_change_waiter_new(mv_store *store, mv_change_waiter **out, mv_err *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv__listener_new(store, CHANGE_CHANNEL, &(*out)->l, err);
    if (rc != MV_OK) {
        free(*out);
        *out = NULL;
        return rc;
    }
    (*out)->store = store;
    mv__store_on_commit(store, wake_on_commit, (*out)->l); /* this process's writes: at once */
    return MV_OK;
}

void mv_change_waiter_wake(mv_change_waiter *w) { mv__listener_wake(w->l); }

bool mv_change_waiter_wait(mv_change_waiter *w, int timeout_ms) {
    return mv__listener_wait(w->l, timeout_ms);
}

void mv_change_waiter_free(mv_change_waiter *w) {
    if (!w) return;
    mv__store_on_commit(w->store, NULL, NULL);
    mv__listener_free(w->l);
    free(w);
}
