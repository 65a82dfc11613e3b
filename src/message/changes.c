/* changes.c — the durable change log (`stream_events`) behind live streams.
 *
 * Every transaction that changes a message calls mv__change_add_tx(), so the row commits or rolls
 * back with the change itself: a reader of the log never sees a change that did not happen and
 * never misses one that did. Readers page through the log by event id and resume from the last one
 * they got, which is only safe if event ids become visible in increasing order: a reader that has
 * passed id N must never later find a smaller one.
 *
 * SQLite guarantees that by itself (one writer at a time, across processes): the row id is the
 * event id. PostgreSQL does not — two transactions commit in any order, whatever order they drew
 * their ids in. Writers used to take one transaction-scoped advisory lock before the insert so
 * that ids were drawn and committed in the same order; but that lock was held through the commit's
 * WAL flush, so no two writes of the whole database could share a flush (measured: 92–96 % of 32
 * backends waiting on it, creates at 0.07× a plain INSERT's rate).
 *
 * So on PostgreSQL the event id is not the row id but `seq`, assigned after commit:
 * - Writers insert with seq NULL and take no lock. Nor do they NOTIFY: PostgreSQL serialises the
 *   commits of notifying transactions (a database-wide lock on the notification queue, held from
 *   before the commit record to the end of the commit — measured, `Lock:object` replaced
 *   `Lock:advisory` and creates stayed at 0.04× the INSERT rate). A commit in this process wakes
 *   this process's reader directly (mv__store_on_commit).
 * - A *sequencer* step numbers committed rows that have none, in id order, continuing above every
 *   seq ever handed out (and above what retention removed). It is one short transaction that first
 *   takes a transaction-scoped advisory lock with pg_advisory_xact_lock: one sequencer at a
 *   time across every daemon; one that finds the lock taken waits for it on the server (the
 *   holder's short transaction commits first) and then numbers what is left. When it numbered
 *   rows it sends the NOTIFY that wakes the readers of every other process. Readers run it — the
 * stream hub on its turns (with no stream open, only after this process wrote changes),
 * mv_changes_read, mv_changes_latest and retention — whenever a cheap check (the seq index's NULL
 * entries) says there is something to number. A process that writes changes but runs no stream hub
 * (a library user, the CLI) wakes nobody: a daemon with streams open finds its changes on its timer
 * (every 500 ms where commits notify).
 * - Readers page by seq. Sequencer transactions commit one after another (the lock is released
 *   only after the commit is visible), and each hands out numbers above all earlier ones, so the
 *   visible seqs always form a prefix of what will ever exist: a reader that saw N will never see
 *   a new seq at or below N.
 * - Causal order: if change B was written after change A committed, B's id is larger (drawn later)
 *   and a sequencer that sees B committed sees A committed too, so A gets the smaller seq (in the
 *   same batch, by id order; else in an earlier one).
 * - A rolled-back change never gets a seq (it is never visible to a sequencer). A transaction
 *   that stays open holds back only its own change: it is numbered when it commits, after changes
 *   that committed before it.
 * - The sequencer commits with synchronous_commit on whatever the database's setting: a number a
 *   reader has seen must survive a crash, or it could be handed to another change and a client
 *   resuming after it would skip that change.
 *
 * Why not a transaction-id watermark (record pg_current_xact_id() per row and return only rows of
 * transactions older than the oldest one still running): the watermark stops at the oldest open
 * transaction of the whole cluster (any application's), and xid order is first-write order, not
 * commit order, so a change written after another committed can carry the smaller xid — the
 * per-message causal order would be lost, and an integer event id could not express the
 * (xid, id) position. The sequencer costs one extra small UPDATE per batch of changes instead. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"
#include "store/changes_sql.h"
#include "store/listen.h"

#define CHANGE_CHANNEL "missive_changes"

/* The most rows one sequencer transaction numbers; a larger backlog takes several. */
#define SEQUENCE_BATCH 5000

static const char SQL_PG_NOTIFY[] = "SELECT pg_notify('" CHANGE_CHANNEL "', '')";
static const char SQL_INSERT_CHANGE[] =
    "INSERT INTO stream_events (tenant_id, message_id, kind, viewer_id, created_at) "
    "VALUES (?, ?, ?, ?, ?)";

/* The statements that differ between the dialects (the event id column) are the store's:
 * store/changes_sql.h. */
static const char SQL_PRUNED[] = "SELECT upto FROM stream_events_pruned WHERE one = 1";
static const char SQL_GC_MARK[] =
    "UPDATE stream_events_pruned SET upto = ? WHERE one = 1 AND upto < ?";

/* The sequencer (PostgreSQL). The lock key differs from the writers' lock of schema versions
 * before 9, which no longer exists. set_config(…, true) is SET LOCAL: this commit is durable before
 * it is visible even where the database runs with synchronous_commit off. */
static const char SQL_PG_SEQUENCER_LOCK[] =
    "SELECT set_config('synchronous_commit', 'on', true), pg_advisory_xact_lock(7052465)";
/* Numbers the oldest unsequenced committed rows (at most ?) in id order, above every seq handed
 * out before: the highest one still in the log, or the highest retention removed. The statement's
 * snapshot is taken after the lock, so it sees every earlier sequencer's commit. The rows to number
 * are found by `seq IS NULL` once, in todo, and updated by their primary key: nobody else sets seq
 * (the lock) and retention removes only numbered rows, so the update needs no second `seq IS NULL`
 * — which, with the fresh table's statistics estimating one or two such rows, the planner used to
 * rescan the whole backlog once per row to update (a nested loop: quadratic, 1.4 s for 1,500 rows
 * and 7 s for 5,000 measured in the 32-client create benchmark, a core busy while writers fell
 * further behind). */
static const char SQL_PG_SEQUENCE[] =
    "WITH base AS (SELECT GREATEST((SELECT COALESCE(MAX(seq), 0) FROM stream_events),"
    " (SELECT upto FROM stream_events_pruned WHERE one = 1)) AS b),"
    " todo AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM"
    " (SELECT id FROM stream_events WHERE seq IS NULL ORDER BY id LIMIT ?) AS t)"
    " UPDATE stream_events AS e SET seq = base.b + todo.n FROM base, todo"
    " WHERE e.id = todo.id";

static const char *const KIND_NAMES[] = {"created", "updated", "viewer", "reminded"};

static atomic_uint_fast64_t changes_written;

uint64_t mv__changes_written(void) { return atomic_load(&changes_written); }

mv_code mv__change_add_tx(mv_db *db, const char *tenant, const char *message_id,
                          mv_change_kind kind, const char *viewer_id, int64_t now, mv_err *err) {
    atomic_fetch_add(&changes_written, 1);
    return mv_db_execf_later(db, SQL_INSERT_CHANGE, err, "ssssi", tenant ? tenant : "default",
                             message_id ? message_id : "", KIND_NAMES[kind],
                             kind >= MV_CHANGE_VIEWER ? viewer_id : NULL, now);
}

static const char SQL_INSERT_CHANGE2[] =
    "INSERT INTO stream_events (tenant_id, message_id, kind, viewer_id, created_at) "
    "VALUES (?, ?, ?, NULL, ?), (?, ?, ?, NULL, ?)";

mv_code mv__change_add2_tx(mv_db *db, const char *tenant, const char *id1, mv_change_kind kind1,
                           const char *id2, mv_change_kind kind2, int64_t now, mv_err *err) {
    atomic_fetch_add(&changes_written, 2);
    tenant = tenant ? tenant : "default";
    return mv_db_execf_later(db, SQL_INSERT_CHANGE2, err, "sssisssi", tenant, id1 ? id1 : "",
                             KIND_NAMES[kind1], now, tenant, id2 ? id2 : "", KIND_NAMES[kind2],
                             now);
}

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct {
    int64_t after;
    mv_change *out;
    int max, n;
    int64_t latest, pruned;
    bool unsequenced; /* PostgreSQL: committed rows without an event id exist */
} read_arg;

static mv_change_kind kind_of(const char *s) {
    for (int k = 0; k < 4; k++)
        if (s && strcmp(s, KIND_NAMES[k]) == 0) return (mv_change_kind)k;
    return MV_CHANGE_UPDATED;
}

/* ---- the sequencer (PostgreSQL) ------------------------------------------------------------ */

static mv_code latest_tx(mv_db *db, void *ctx, mv_err *err);

typedef struct {
    int64_t numbered;
    read_arg *out; /* the newest id and the watermark, read after numbering */
} sequence_arg;

/* The lock is waited for on the server: a holder's transaction is a few statements and one
 * flush, and its commit is visible before the lock is released, so the statements after the lock
 * see every earlier sequencer's numbers (and every row that committed before the holder's
 * snapshot or since). Nothing else is locked before it, and the holder locks only unsequenced
 * rows of the log, so the wait cannot be part of a deadlock. */
static mv_code sequence_tx(mv_db *db, void *ctx, mv_err *err) {
    sequence_arg *a = ctx;
    mv_code rc = mv_db_execf(db, SQL_PG_SEQUENCER_LOCK, NULL, err, "");
    if (rc == MV_OK &&
        (rc = mv_db_execf(db, SQL_PG_SEQUENCE, &a->numbered, err, "i", (int64_t)SEQUENCE_BATCH)) ==
            MV_OK &&
        a->numbered > 0)
        /* Wakes the readers of every other process (delivered after this commit). */
        rc = mv_db_execf(db, SQL_PG_NOTIFY, NULL, err, "");
    return rc == MV_OK ? latest_tx(db, a->out, err) : rc;
}

/* Numbers every committed unsequenced row, batch after batch, and leaves the newest id in *out.
 * Only called when a read found such rows: its commit wakes this process's waiter, which must not
 * turn into a loop of empty transactions. */
static mv_code sequence(mv_store *store, read_arg *out, mv_err *err) {
    for (;;) {
        sequence_arg a = {.out = out};
        mv_code rc = mv_store_write(store, sequence_tx, &a, err);
        if (rc != MV_OK || a.numbered < SEQUENCE_BATCH) return rc;
    }
}

static mv_code read_tx(mv_db *db, void *ctx, mv_err *err) {
    read_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, mv__changes_sql(db, MV__CHANGES_READ), &st, err);
    if (rc != MV_OK) return rc;
    mv_stmt_bindf(st, "ii", a->after, (int64_t)(a->max - a->n));
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
    if (r < 0) return err ? err->code : MV_INTERNAL;
    /* In the page's snapshot: a retention that removed rows the page would have had shows here. */
    if ((rc = mv_db_row(db, SQL_PRUNED, &st, err, "")) != MV_OK) return rc;
    if (st && mv_stmt_int64(st, 0) > a->pruned) a->pruned = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    a->unsequenced = false;
    const char *unsequenced = mv__changes_sql(db, MV__CHANGES_UNSEQUENCED);
    if (!unsequenced || a->n == a->max) return MV_OK;
    /* A short page: are there committed changes the sequencer has not numbered yet? */
    if ((rc = mv_db_row(db, unsequenced, &st, err, "")) == MV_OK && st)
        a->unsequenced = mv_stmt_int64(st, 0) == 1;
    mv_stmt_done(st);
    return rc;
}

mv_code mv__changes_read_page(mv_store *store, int64_t after, mv_change *out, int max, int *n,
                              int64_t *pruned, mv_err *err) {
    *n = 0;
    if (pruned) *pruned = 0;
    if (max <= 0) return MV_OK;
    read_arg a = {.after = after, .out = out, .max = max};
    mv_code rc = mv_store_read(store, read_tx, &a, err);
    if (rc == MV_OK && a.unsequenced) {
        /* Number them, then read on from where the page ended: what was read so far stays
         * valid, since new numbers are above every earlier one. */
        read_arg latest = {0};
        if ((rc = sequence(store, &latest, err)) == MV_OK) {
            if (a.n > 0) a.after = a.out[a.n - 1].id;
            rc = mv_store_read(store, read_tx, &a, err);
        }
    }
    *n = rc == MV_OK ? a.n : 0;
    if (pruned) *pruned = a.pruned;
    return rc;
}

mv_code mv_changes_read(mv_store *store, int64_t after, mv_change *out, int max, int *n,
                        mv_err *err) {
    return mv__changes_read_page(store, after, out, max, n, NULL, err);
}

static mv_code latest_tx(mv_db *db, void *ctx, mv_err *err) {
    read_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, mv__changes_sql(db, MV__CHANGES_LATEST), &st, err, "");
    if (st) {
        a->latest = mv_stmt_int64(st, 0);
        a->pruned = mv_stmt_int64(st, 1);
        a->unsequenced = mv_stmt_int64(st, 2) == 1;
        /* Retention may have removed everything: the newest id handed out is then the mark. */
        if (a->latest < a->pruned) a->latest = a->pruned;
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_changes_latest(mv_store *store, int64_t *latest, int64_t *pruned, mv_err *err) {
    read_arg a = {0};
    mv_code rc = mv_store_read(store, latest_tx, &a, err);
    if (rc == MV_OK && a.unsequenced) rc = sequence(store, &a, err);
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
    mv_code rc =
        mv_db_row(db, mv__changes_sql(db, MV__CHANGES_GC_MAX), &st, err, "i", a->older_than);
    int64_t upto = st ? mv_stmt_int64(st, 0) : 0;
    mv_stmt_done(st);
    if (rc != MV_OK || upto == 0) return rc;
    /* Event ids grow with time, so "up to the newest expired id" removes the expired prefix; the
     * watermark tells resuming clients what they can no longer get (and keeps the sequencer's
     * numbers above it when the log is empty). */
    if ((rc = mv_db_execf(db, mv__changes_sql(db, MV__CHANGES_GC_DELETE), &a->removed, err, "i",
                          upto)) != MV_OK)
        return rc;
    return mv_db_execf(db, SQL_GC_MARK, NULL, err, "ii", upto, upto);
}

mv_code mv_changes_gc(mv_store *store, int64_t older_than, int64_t *removed, mv_err *err) {
    gc_arg a = {older_than, 0};
    /* Expired rows nobody has numbered yet (no reader ran since they committed) are numbered
     * first, so they are removed with the rest and counted in the watermark. */
    mv_code rc = mv_changes_latest(store, NULL, NULL, err);
    if (rc == MV_OK) rc = mv_store_write(store, gc_tx, &a, err);
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
