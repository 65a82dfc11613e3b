/* timer.c — the timer engine of durable/timer.h: schedule, cancel, claim with a lease, fire once.
 *
 * Exactly once rests on two conditional updates. The claim moves a due pending timer's next_at to
 * the end of a lease and names this claim's token in lease_owner, only where next_at <= now still
 * holds (PostgreSQL re-checks that on the row it locked, so two daemons claiming together split the
 * due timers, and SKIP LOCKED keeps them from queueing on each other's rows). The fire's
 * `pending → fired` holds only under that token, in the transaction of the kind's local effect.
 * A lease that ends (the daemon died, or is too slow) makes the timer due again; a late fire of the
 * first claimant then finds the token replaced and its transaction changes nothing.
 *
 * The fires of one claim share one transaction (one commit for up to a batch, which is what lets
 * 10,000 timers due in the same second fire within it); when that transaction fails each timer is
 * fired again alone, so one bad timer costs only itself. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "durable/timer.h"
#include "store/listen.h"

#define TIMER_CHANNEL "missive_timers"
#define MAX_KINDS 16
#define GATHER_MS 20

static const char SQL_SCHEDULE[] =
    "INSERT INTO timers (timer_id, tenant_id, kind, ref, due_at, next_at, state, lease_owner,"
    " claims, created_at, fired_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', NULL, 0, ?, NULL) "
    "ON CONFLICT (timer_id) DO UPDATE SET kind = excluded.kind, ref = excluded.ref,"
    " due_at = excluded.due_at, next_at = excluded.next_at, state = 'pending', lease_owner = NULL,"
    " claims = 0, fired_at = NULL";
static const char SQL_CANCEL[] =
    "UPDATE timers SET state = 'cancelled', lease_owner = NULL, fired_at = ? "
    "WHERE timer_id = ? AND state = 'pending'";
/* The due timers are picked in a CTE that the UPDATE joins: PostgreSQL runs a locking CTE once,
 * whereas `timer_id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` may be planned as a semi join
 * that re-runs the subquery per row and so claims far more than n. The state is a literal so the
 * planners read the partial index. The UPDATE finds the CTE's rows by primary key: they are locked
 * by the CTE itself (FOR UPDATE SKIP LOCKED takes only rows nobody else holds; SQLite has one
 * writer), so nothing can change them in between and the UPDATE re-checks nothing: a condition on
 * the state or next_at there would have it walk the pending index for each batch. */
#define CLAIM_HEAD                                                                                 \
    "WITH due AS (SELECT timer_id FROM timers WHERE state = 'pending' AND next_at <= ? "           \
    "ORDER BY next_at, timer_id LIMIT ?"
#define CLAIM_TAIL                                                                                 \
    ") UPDATE timers SET lease_owner = ?, next_at = ?, claims = claims + 1 FROM due "              \
    "WHERE timers.timer_id = due.timer_id "                                                        \
    "RETURNING timers.timer_id, timers.tenant_id, timers.kind, timers.ref, timers.due_at, "        \
    "timers.claims"
/* PostgreSQL's claimants skip each other's rows; SQLite drops the clause (store/db.h). */
static const char SQL_CLAIM[] = CLAIM_HEAD " FOR UPDATE SKIP LOCKED" CLAIM_TAIL;
static const char SQL_FIRED[] =
    "UPDATE timers SET state = 'fired', fired_at = ?, lease_owner = NULL "
    "WHERE timer_id = ? AND lease_owner = ? AND state = 'pending'";
/* A claim's rows all carry next_at = its lease's end: the partial index finds exactly them. */
static const char SQL_FIRED_KIND[] =
    "UPDATE timers SET state = 'fired', fired_at = ?, lease_owner = NULL "
    "WHERE next_at = ? AND state = 'pending' AND lease_owner = ? AND kind = ?";
static const char SQL_GIVE_UP[] =
    "UPDATE timers SET state = 'failed', fired_at = ?, lease_owner = NULL "
    "WHERE timer_id = ? AND lease_owner = ? AND state = 'pending'";
static const char SQL_NEXT_AT[] = "SELECT MIN(next_at) FROM timers WHERE state = 'pending'";
/* The statements whose plans tests/durable/timer_test.c checks, with their binds ('i' an integer,
 * 's' a text): the claim, the fire of a claim's rows, the next due time. */
const char *const mv__timer_plan_sql[][2] = {
    {SQL_CLAIM, "iisi"}, {SQL_FIRED_KIND, "iiss"}, {SQL_NEXT_AT, ""}, {NULL, NULL}};

static const char SQL_PG_NOTIFY[] = "SELECT pg_notify('" TIMER_CHANNEL "', '')";

/* ---- scheduling inside the caller's transaction -------------------------------------------- */

static bool fits(const char *s, size_t max) { return s && *s && strlen(s) < max; }

mv_code mv__timer_schedule(mv_db *db, const char *id, const char *tenant, const char *kind,
                           const char *ref, int64_t due_at, int64_t now, mv_err *err) {
    if (!fits(id, MV__TIMER_ID_MAX) || !fits(kind, MV__TIMER_KIND_MAX) ||
        !fits(ref, MV__TIMER_REF_MAX) || !fits(tenant, MV__TIMER_TENANT_MAX) || due_at < 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "invalid timer");
    /* nobody reads its result: on PostgreSQL it rides with the transaction's next statement */
    mv_code rc = mv_db_execf_later(db, SQL_SCHEDULE, err, "ssssiii", id, tenant, kind, ref, due_at,
                                   due_at, now);
    /* A sleeping daemon wakes at most MV__TIMER_MAX_SLEEP_MS after its last look: only a timer
     * due before then needs to wake it. */
    if (rc == MV_OK && due_at < now + MV__TIMER_MAX_SLEEP_MS) /* SQLite: nothing to send */
        rc = mv_db_exec_after_commit(db, SQL_PG_NOTIFY, err);
    return rc;
}

mv_code mv__timer_cancel(mv_db *db, const char *id, int64_t now, bool *cancelled, mv_err *err) {
    int64_t n = 0;
    mv_code rc = mv_db_execf(db, SQL_CANCEL, &n, err, "is", now, id);
    if (cancelled) *cancelled = rc == MV_OK && n > 0;
    return rc;
}

/* ---- the engine ----------------------------------------------------------------------------- */

typedef struct {
    const char *kind;
    mv__timer_call_fn call;
    mv__timer_start_fn start; /* with finish: the asynchronous call */
    mv__timer_finish_fn finish;
    mv__timer_local_fn local;
    void *ctx;
} kind_entry;

static bool calls_out(const kind_entry *k) { return k->call || k->start; }

struct mv__timer_engine {
    mv_store *store;
    mv__timer_engine_options o;
    kind_entry kinds[MAX_KINDS];
    int nkinds;
    mv__listener *listener;
    pthread_t thread;
    bool started;
    atomic_bool stop;
};

mv_code mv__timer_engine_new(mv_store *store, const mv__timer_engine_options *opts,
                             mv__timer_engine **out, mv_err *err) {
    *out = NULL;
    mv__timer_engine *e = calloc(1, sizeof *e);
    if (!e) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    e->store = store;
    if (opts) e->o = *opts;
    if (e->o.lease_ms <= 0) e->o.lease_ms = 30000;
    if (e->o.batch <= 0) e->o.batch = 256;
    if (e->o.batch > 1000) e->o.batch = 1000;
    if (e->o.poll_ms <= 0) e->o.poll_ms = 250;
    *out = e;
    return MV_OK;
}

mv_code mv__timer_engine_register(mv__timer_engine *e, const char *kind, mv__timer_call_fn call,
                                  mv__timer_local_fn local, void *ctx, mv_err *err) {
    if (e->nkinds == MAX_KINDS || !fits(kind, MV__TIMER_KIND_MAX))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "cannot register timer kind");
    e->kinds[e->nkinds++] = (kind_entry){kind, call, NULL, NULL, local, ctx};
    return MV_OK;
}

mv_code mv__timer_engine_register_async(mv__timer_engine *e, const char *kind,
                                        mv__timer_start_fn start, mv__timer_finish_fn finish,
                                        mv__timer_local_fn local, void *ctx, mv_err *err) {
    if (!start || !finish) return mv_err_set(err, MV_INVALID_ARGUMENT, "start and finish needed");
    mv_code rc = mv__timer_engine_register(e, kind, NULL, local, ctx, err);
    if (rc == MV_OK) {
        e->kinds[e->nkinds - 1].start = start;
        e->kinds[e->nkinds - 1].finish = finish;
    }
    return rc;
}

static const kind_entry *find_kind(const mv__timer_engine *e, const char *kind) {
    for (int i = 0; i < e->nkinds; i++)
        if (strcmp(e->kinds[i].kind, kind) == 0) return &e->kinds[i];
    return NULL;
}

/* ---- one pass: claim, call, fire ------------------------------------------------------------ */

typedef struct {
    mv__timer t;
    const kind_entry *k;
    bool ready;    /* its call succeeded (or it has none): fire it */
    bool early;    /* a kind without a call: fired in the claim's own transaction */
    void *pending; /* its asynchronous call, until finished */
    bool fired; /* the fire's transaction committed its pending → fired (set anew on each run) */
    bool give_up;
} claimed;

typedef struct {
    const mv__timer_engine *e;
    char token[37];
    int64_t now;
    claimed *rows;
    int n;
} claim_tx;

static void copy_col(char *dst, size_t cap, mv_stmt *st, int col) {
    const char *s = mv_stmt_text(st, col);
    mv_strlcpy(dst, s ? s : "", cap);
}

static mv_code claim_fn(mv_db *db, void *ctx, mv_err *err) {
    claim_tx *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_CLAIM, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "iisi", c->now, (int64_t)c->e->o.batch, c->token, c->now + c->e->o.lease_ms);
    int r;
    c->n = 0;
    /* the CTE's LIMIT bounds the rows; a row past the buffer would stay leased unfired */
    while ((r = mv_stmt_step(st, err)) == 1 && c->n < c->e->o.batch) {
        claimed *row = &c->rows[c->n++];
        memset(row, 0, sizeof *row);
        copy_col(row->t.id, sizeof row->t.id, st, 0);
        copy_col(row->t.tenant, sizeof row->t.tenant, st, 1);
        copy_col(row->t.kind, sizeof row->t.kind, st, 2);
        copy_col(row->t.ref, sizeof row->t.ref, st, 3);
        row->t.due_at = mv_stmt_int64(st, 4);
        row->t.claims = (int)mv_stmt_int64(st, 5);
    }
    mv_stmt_done(st);
    return r < 0 ? (err && err->code ? err->code : MV_INTERNAL) : MV_OK;
}

typedef struct {
    claim_tx *c;
    int from, to; /* the rows this transaction fires */
} fire_tx;

static mv_code fire_one(mv_db *db, const claim_tx *c, claimed *row, mv_err *err) {
    int64_t n = 0;
    mv_code rc = mv_db_execf(db, row->give_up ? SQL_GIVE_UP : SQL_FIRED, &n, err, "iss", c->now,
                             row->t.id, c->token);
    if (rc != MV_OK || n == 0) return rc; /* re-armed, cancelled or taken over: not ours */
    row->fired = true;
    if (!row->give_up && row->k->local) rc = row->k->local(row->k->ctx, db, &row->t, c->now, err);
    return rc;
}

static mv_code fire_fn(mv_db *db, void *ctx, mv_err *err) {
    fire_tx *f = ctx;
    mv_code rc = MV_OK;
    for (int i = f->from; i < f->to; i++)
        if (!f->c->rows[i].early) f->c->rows[i].fired = false;
    for (int i = f->from; i < f->to && rc == MV_OK; i++)
        if (f->c->rows[i].ready && !f->c->rows[i].early)
            rc = fire_one(db, f->c, &f->c->rows[i], err);
    return rc;
}

/* The kind's entry and whether the timer is given up, for each claimed row. */
static void resolve_kinds(const mv__timer_engine *e, claim_tx *c) {
    for (int i = 0; i < c->n; i++) {
        c->rows[i].k = find_kind(e, c->rows[i].t.kind);
        c->rows[i].give_up = c->rows[i].t.claims > MV__TIMER_MAX_CLAIMS;
    }
}

/* The claim, and in the same transaction the fires of the timers whose kind has no call (and of
 * those given up): one commit for a batch of purely local timers. Any failure rolls the claim
 * back too, and the pass starts over the two-transaction way. */
static mv_code claim_fire_fn(mv_db *db, void *ctx, mv_err *err) {
    claim_tx *c = ctx;
    mv_code rc = claim_fn(db, c, err);
    if (rc != MV_OK) return rc;
    resolve_kinds(c->e, c);
    /* this claim's rows are this transaction's: one deferred statement per kind fires them all */
    const kind_entry *done[MAX_KINDS];
    int ndone = 0;
    for (int i = 0; i < c->n && rc == MV_OK; i++) {
        claimed *row = &c->rows[i];
        if (!row->give_up && (!row->k || calls_out(row->k))) continue;
        row->ready = row->early = true;
        if (row->give_up) {
            rc = fire_one(db, c, row, err);
            continue;
        }
        bool seen = false;
        for (int d = 0; d < ndone && !seen; d++)
            seen = done[d] == row->k;
        if (!seen) {
            done[ndone++] = row->k;
            rc = mv_db_execf_later(db, SQL_FIRED_KIND, err, "iiss", c->now,
                                   c->now + c->e->o.lease_ms, c->token, row->k->kind);
        }
        row->fired = true;
        if (rc == MV_OK && row->k->local) rc = row->k->local(row->k->ctx, db, &row->t, c->now, err);
    }
    return rc;
}

/* After the fire's commit: lag is measured from due to now, the commit included. */
static void report_fired(mv__timer_engine *e, const claim_tx *c, int from, int to,
                         mv__timer_pass *pass) {
    int64_t committed = mv_clock_now(e->o.clock);
    for (int i = from; i < to; i++) {
        const claimed *row = &c->rows[i];
        if (!row->fired) continue;
        if (row->give_up) {
            pass->failed++;
            pass->given_up++;
            continue;
        }
        pass->fired++;
        if (e->o.on_fired) e->o.on_fired(e->o.on_fired_ctx, &row->t, committed - row->t.due_at);
    }
}

/* The asynchronous calls of a claim still running. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running;
} call_wait;

static void call_ended(void *ctx) {
    call_wait *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->running--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Starts row's call; true when it has ended already (row->ready tells how). */
static bool start_call(claim_tx *c, claimed *row, call_wait *w) {
    mv_err ce = {0};
    if (row->give_up || !calls_out(row->k)) return row->ready = true;
    if (row->k->call) return row->ready = row->k->call(row->k->ctx, &row->t, c->now, &ce) == MV_OK;
    pthread_mutex_lock(&w->mu);
    w->running++; /* before the start: its end may come first */
    pthread_mutex_unlock(&w->mu);
    mv_code rc = row->k->start(row->k->ctx, &row->t, c->now, call_ended, w, &row->pending, &ce);
    if (rc == MV_OK && row->pending) return false;
    call_ended(w); /* it ended at once: no wake comes */
    row->ready = rc == MV_OK;
    return true;
}

/* Runs each timer's call — every asynchronous one started before any is waited for; those whose
 * call failed (or whose kind is unknown here) stay leased. */
static void run_calls(claim_tx *c, mv__timer_pass *pass) {
    call_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    for (int i = 0; i < c->n; i++) {
        claimed *row = &c->rows[i];
        if (row->early || (!row->k && !row->give_up)) continue;
        if (start_call(c, row, &w) && !row->ready) pass->failed++;
    }
    pthread_mutex_lock(&w.mu);
    while (w.running > 0)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < c->n; i++) {
        claimed *row = &c->rows[i];
        if (!row->pending || !row->k) continue; /* only a kind's start sets pending */
        mv_err ce = {0};
        row->ready = row->k->finish(row->k->ctx, row->pending, &ce) == MV_OK;
        row->pending = NULL;
        if (!row->ready) pass->failed++;
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
}

/* The fires after the calls: one transaction for all, or each alone when that one fails. */
static void fire_late(mv__timer_engine *e, claim_tx *c, mv__timer_pass *pass) {
    run_calls(c, pass);
    bool any = false;
    for (int i = 0; i < c->n && !any; i++)
        any = c->rows[i].ready && !c->rows[i].early;
    if (!any) return;
    fire_tx all = {c, 0, c->n};
    mv_err fe = {0};
    if (mv_store_write(e->store, fire_fn, &all, &fe) == MV_OK) {
        for (int i = 0; i < c->n; i++)
            if (!c->rows[i].early) report_fired(e, c, i, i + 1, pass);
        return;
    }
    for (int i = 0; i < c->n; i++) { /* alone, so one bad timer costs only itself */
        fire_tx one = {c, i, i + 1};
        mv_err oe = {0};
        if (!c->rows[i].ready || c->rows[i].early) continue;
        if (mv_store_write(e->store, fire_fn, &one, &oe) == MV_OK)
            report_fired(e, c, i, i + 1, pass);
        else
            pass->failed++;
    }
}

mv_code mv__timer_engine_run(mv__timer_engine *e, mv__timer_pass *pass, mv_err *err) {
    mv__timer_pass local = {0};
    if (!pass) pass = &local;
    memset(pass, 0, sizeof *pass);
    claim_tx c = {.e = e, .now = mv_clock_now(e->o.clock)};
    mv_code rc = mv_id_uuid(c.token, err);
    if (rc != MV_OK) return rc;
    if (!(c.rows = calloc((size_t)e->o.batch, sizeof *c.rows)))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    rc = mv_store_write(e->store, claim_fire_fn, &c, err);
    if (rc == MV_OK) {
        for (int i = 0; i < c.n; i++)
            if (c.rows[i].early) report_fired(e, &c, i, i + 1, pass);
    } else if (rc != MV_STORE_UNAVAILABLE) { /* a local fire failed: claim alone, fire each */
        rc = mv_store_write(e->store, claim_fn, &c, err);
        if (rc == MV_OK) resolve_kinds(e, &c);
    }
    pass->claimed = rc == MV_OK ? c.n : 0;
    if (rc == MV_OK && c.n > 0) fire_late(e, &c, pass);
    free(c.rows);
    return rc;
}

typedef struct {
    int64_t next;
} next_tx;

static mv_code next_fn(mv_db *db, void *ctx, mv_err *err) {
    next_tx *n = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_NEXT_AT, &st, err, "");
    if (rc != MV_OK) return rc;
    n->next = st && !mv_stmt_is_null(st, 0) ? mv_stmt_int64(st, 0) : INT64_MAX;
    mv_stmt_done(st);
    return MV_OK;
}

mv_code mv__timer_next_at(mv_store *store, int64_t *out, mv_err *err) {
    next_tx n = {INT64_MAX};
    mv_code rc = mv_store_read(store, next_fn, &n, err);
    *out = n.next;
    return rc;
}

/* ---- the loop ---------------------------------------------------------------------------------
 */

/* How long to sleep before the next look: until the next timer may be claimed, at most the poll
 * interval when the store cannot notify (SQLite: another process may schedule a nearer one) and
 * MV__TIMER_MAX_SLEEP_MS when it can (PostgreSQL: a daemon that schedules a nearer one notifies).
 */
static int sleep_ms(mv__timer_engine *e) {
    int cap = mv__store_notifies(e->store) ? MV__TIMER_MAX_SLEEP_MS : e->o.poll_ms;
    int64_t next;
    mv_err err = {0};
    if (mv__timer_next_at(e->store, &next, &err) != MV_OK) return e->o.poll_ms;
    int64_t wait = next == INT64_MAX ? cap : next - mv_clock_now(e->o.clock);
    if (wait < 0) wait = 0;
    return wait < cap ? (int)wait : cap;
}

/* Sleeps ms unless woken: a notification or mv__timer_engine_wake ends it early, a lost listen
 * connection does not — a pass right after a server restart would take (and reopen) a pooled
 * connection at the moment requests find theirs broken. */
static void wait_for(mv__timer_engine *e, int ms) {
    int64_t until = mv_now_ms() + ms;
    while (!atomic_load(&e->stop)) {
        int64_t left = until - mv_now_ms();
        if (left <= 0 || mv__listener_wait(e->listener, (int)left)) return;
    }
}

static void *loop_main(void *arg) {
    mv__timer_engine *e = arg;
    while (!atomic_load(&e->stop)) {
        mv__timer_pass pass;
        mv_err err = {0};
        mv_code rc = mv__timer_engine_run(e, &pass, &err);
        if (rc == MV_OK && pass.claimed == e->o.batch) continue; /* more are due */
        int ms = rc == MV_OK ? sleep_ms(e) : e->o.poll_ms;
        /* timers falling due one after another are gathered for a while, so a burst costs a
         * commit per batch rather than per timer */
        if (rc == MV_OK && pass.claimed > 0 && ms < GATHER_MS) ms = GATHER_MS;
        wait_for(e, ms);
    }
    return NULL;
}

mv_code mv__timer_engine_start(mv__timer_engine *e, mv_err *err) {
    if (e->started) return MV_OK;
    mv_code rc = mv__listener_new(e->store, TIMER_CHANNEL, &e->listener, err);
    if (rc != MV_OK) return rc;
    if (pthread_create(&e->thread, NULL, loop_main, e) != 0) {
        mv__listener_free(e->listener);
        e->listener = NULL;
        return mv_err_set(err, MV_INTERNAL, "cannot start the timer thread");
    }
    e->started = true;
    return MV_OK;
}

void mv__timer_engine_wake(mv__timer_engine *e) {
    if (e && e->listener) mv__listener_wake(e->listener);
}

void mv__timer_engine_free(mv__timer_engine *e) {
    if (!e) return;
    if (e->started) {
        atomic_store(&e->stop, true);
        mv__listener_wake(e->listener);
        pthread_join(e->thread, NULL);
    }
    mv__listener_free(e->listener);
    free(e);
}
