/* saga_store.c — a saga's saves (one compare-and-set transaction with its step rows and journal
 * rows) and the runner lease. */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "durable/timer.h"
#include "store/db.h"
#include "store/saga_sql.h"

/* The statements are the store layer's (store/saga_sql.h). One runner at a time: resume and
 * compensate take the saga's runner lease first, so a second caller (another thread, process or
 * daemon) answers saga_concurrency at once instead of racing the first through a step that is
 * still running. Every save extends the lease; a crashed runner's lease simply expires. */

/* One saga_steps row a save writes: the whole row when it is new, its mutable columns otherwise. */
typedef struct {
    bool insert;
    int64_t idx, attempts, next_at;
    bool has_attempts, has_next;
    const char *name, *state, *effect_id, *comp_id, *error_code;
    char *args, *result; /* stored texts (owned; args only for an insert, result NULL: none) */
} step_row;

typedef struct {
    const char *id, *state, *release;
    int64_t updated_at, version, lease_until;
    const char *tenant; /* wake: the saga enters waiting; its timer is armed for wake_at */
    int64_t wake_at;
    bool has_wake_at, wake;
    bool pending; /* pending: rows[0] and notes[0] are a pending step commit */
    step_row *rows;
    size_t nrows;
    const journal_note *notes[2];
    size_t nnotes;
} cas_tx;

static mv_code note_fn(mv_db *db, const journal_note *n, int64_t now, mv_err *err) {
    if (n->insert) {
        mv_effect_intent in = {
            .effect_id = n->effect_id, .capability = n->capability, .target = n->target};
        return mv__journal_insert_executing_tx(db, &in, now, err);
    }
    /* a step saved before steps were journaled has no row: nothing to move (missing_ok) */
    if (n->from_mask & MV__EFFECT_MASK(MV_EFFECT_EXECUTING))
        return mv__journal_move_from_tx(db, n->effect_id, MV_EFFECT_EXECUTING, n->from_mask, n->to,
                                        n->error_code, now, true, err);
    return mv__journal_move_tx(db, n->effect_id, n->from_mask, n->to, n->error_code, now, true,
                               err);
}

/* Binds a step row from *i on, in the order of mv__sql_saga_insert_step or _update_step. */
static void bind_row(mv_stmt *st, int *i, const char *saga_id, const step_row *r, int64_t now) {
    if (r->insert) {
        mv_stmt_bind_text(st, (*i)++, saga_id);
        mv_stmt_bind_int64(st, (*i)++, r->idx);
        mv_stmt_bind_text(st, (*i)++, r->name);
        mv_stmt_bind_text(st, (*i)++, r->state);
        mv_stmt_bind_text(st, (*i)++, r->effect_id);
        mv_stmt_bind_text(st, (*i)++, r->comp_id);
        mv_stmt_bind_text(st, (*i)++, r->args);
    } else {
        mv_stmt_bind_text(st, (*i)++, r->state);
    }
    mv_stmt_bind_text(st, (*i)++, r->result);
    if (r->has_attempts)
        mv_stmt_bind_int64(st, (*i)++, r->attempts);
    else
        mv_stmt_bind_null(st, (*i)++);
    mv_stmt_bind_text(st, (*i)++, r->error_code);
    if (r->has_next)
        mv_stmt_bind_int64(st, (*i)++, r->next_at);
    else
        mv_stmt_bind_null(st, (*i)++);
    if (r->insert) mv_stmt_bind_int64(st, (*i)++, now);
    mv_stmt_bind_int64(st, (*i)++, now);
    if (!r->insert) {
        mv_stmt_bind_text(st, (*i)++, saga_id);
        mv_stmt_bind_int64(st, (*i)++, r->idx);
    }
}

static mv_code no_row(const char *saga_id, const step_row *r, mv_err *err) {
    return mv_err_set(err, MV_INTERNAL, "saga %s: step %s has no row to update", saga_id,
                      r->name ? r->name : "?");
}

static mv_code write_row(mv_db *db, const char *saga_id, const step_row *r, int64_t now,
                         mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, r->insert ? mv__sql_saga_insert_step : mv__sql_saga_update_step,
                               &st, err);
    if (rc) return rc;
    int i = 1;
    bind_row(st, &i, saga_id, r, now);
    int step = mv_stmt_step(st, err);
    int64_t changes = mv_stmt_changes(st);
    mv_stmt_done(st);
    if (step < 0) return err && err->code ? err->code : MV_INTERNAL;
    return changes == 1 ? MV_OK : no_row(saga_id, r, err);
}

static void bind_cas(mv_stmt *st, int *i, const cas_tx *t) {
    mv_stmt_bind_text(st, (*i)++, t->state);
    mv_stmt_bind_int64(st, (*i)++, t->updated_at);
    mv_stmt_bind_int64(st, (*i)++, t->version + 1);
    if (t->has_wake_at)
        mv_stmt_bind_int64(st, (*i)++, t->wake_at);
    else
        mv_stmt_bind_null(st, (*i)++);
    mv_stmt_bind_text(st, (*i)++, t->release);
    mv_stmt_bind_text(st, (*i)++, t->release);
    mv_stmt_bind_int64(st, (*i)++, t->lease_until);
    mv_stmt_bind_text(st, (*i)++, t->id);
    mv_stmt_bind_int64(st, (*i)++, t->version);
}

/* The shape of t's save when it is one of a running saga's (store/saga_sql.h), else -1. */
static int save_shape(const cas_tx *t) {
    bool start = t->nrows >= 1 && t->rows[t->nrows - 1].insert && t->nnotes >= 1 &&
                 t->notes[t->nnotes - 1]->insert;
    if (t->wake) return -1;
    if (!t->pending && t->nrows == 1 && t->nnotes == 1 && start) return MV__SAGA_SAVE_START;
    if (t->pending && t->nrows == 2 && t->nnotes == 2 && start) return MV__SAGA_SAVE_COMMIT_START;
    if (t->pending && t->nrows == 1 && t->nnotes == 1 && !t->rows[0].insert)
        return MV__SAGA_SAVE_COMMIT;
    if (!t->pending && t->nnotes == 0 && t->nrows == 1 && !t->rows[0].insert)
        return MV__SAGA_SAVE_STEP;
    if (!t->pending && t->nnotes == 1 && t->nrows == 1 && !t->rows[0].insert &&
        !t->notes[0]->insert && (t->notes[0]->from_mask & MV__EFFECT_MASK(MV_EFFECT_EXECUTING)))
        return MV__SAGA_SAVE_STEP_MOVE;
    if (!t->pending && t->nnotes == 0 && t->nrows == 0) return MV__SAGA_SAVE_STATE;
    return -1;
}

/* The store's one-statement form of t's save (blind or precise), or NULL. */
static const char *save_sql(mv_db *db, const cas_tx *t, bool blind) {
    int shape = save_shape(t);
    return shape < 0 ? NULL : mv__saga_save_sql(db, (mv__saga_save_shape)shape, blind);
}

/* Binds the parameters of a one-statement save (store/saga_sql.h); *r is the index of the row of
 * the step started (when one is). */
static void bind_one(mv_stmt *st, const cas_tx *t, const journal_note **commit,
                     const journal_note **start, size_t *r) {
    int i = 1;
    size_t n = 0;
    *r = 0;
    bind_cas(st, &i, t);
    if (t->pending) {
        bind_row(st, &i, t->id, &t->rows[(*r)++], t->updated_at);
        *commit = t->notes[n++];
        mv_stmt_bind_int64(st, i++, t->updated_at);
        mv_stmt_bind_text(st, i++, (*commit)->effect_id);
    }
    if (*r < t->nrows) {
        bind_row(st, &i, t->id, &t->rows[*r], t->updated_at);
        if (!t->rows[*r].insert) { /* MV__SAGA_SAVE_STEP: the row, and its effect's move */
            if (n < t->nnotes) {
                *commit = t->notes[n];
                mv_stmt_bind_text(st, i++, mv_effect_state_name((*commit)->to));
                mv_stmt_bind_int64(st, i++, t->updated_at);
                mv_stmt_bind_text(st, i++, (*commit)->error_code);
                mv_stmt_bind_text(st, i++, (*commit)->effect_id);
            }
            return;
        }
        *start = t->notes[n];
        mv_stmt_bind_text(st, i++, (*start)->effect_id);
        mv_stmt_bind_text(st, i++, (*start)->capability);
        mv_stmt_bind_text(st, i++, (*start)->target);
        mv_stmt_bind_int64(st, i++, t->updated_at);
        mv_stmt_bind_int64(st, i++, t->updated_at);
    }
}

/* The hot save in one round trip: the blind statement, its answer read with the COMMIT's. */
static mv_code cas_blind(mv_db *db, void *ctx, mv_err *err) {
    cas_tx *t = ctx;
    const char *sql = save_sql(db, t, true);
    if (!sql) return mv_err_set(err, MV_INTERNAL, "saga %s: no one-statement save", t->id);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql, &st, err);
    if (rc) return rc;
    const journal_note *commit = NULL, *start = NULL;
    size_t r;
    bind_one(st, t, &commit, &start, &r);
    return mv_stmt_exec_later(st, err);
}

static mv_code cas_one(mv_db *db, cas_tx *t, const char *sql, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql, &st, err);
    if (rc) return rc;
    size_t r;
    const journal_note *commit = NULL, *start = NULL;
    bind_one(st, t, &commit, &start, &r);
    int64_t count[5] = {0};
    int step = mv_stmt_step(st, err);
    for (int k = 0; step == 1 && k < 5; k++)
        count[k] = mv_stmt_int64(st, k);
    mv_stmt_done(st);
    if (step != 1) return step < 0 && err && err->code ? err->code : MV_INTERNAL;
    if (count[0] != 1)
        return mv_err_set(err, MV_SAGA_CONCURRENCY, "saga %s: concurrent transition rejected",
                          t->id);
    if (count[1] != 1) return no_row(t->id, &t->rows[0], err);
    if (count[2] != 1 && /* not executing: the full transition says why (or finds no row) */
        (rc = mv__journal_move_tx(db, commit->effect_id, commit->from_mask, commit->to,
                                  commit->error_code, t->updated_at, true, err)))
        return rc;
    if (count[3] != 1) return no_row(t->id, &t->rows[r], err);
    if (count[4] != 1)
        return mv_err_set(err, MV_EFFECT_TRANSITION,
                          "durable effect %s: create transition was rejected", start->effect_id);
    return MV_OK;
}

static mv_code cas_fn(mv_db *db, void *ctx, mv_err *err) {
    cas_tx *t = ctx;
    const char *one = save_sql(db, t, false);
    if (one) return cas_one(db, t, one, err);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, mv__sql_saga_cas, &st, err);
    if (rc) return rc;
    int i = 1;
    bind_cas(st, &i, t);
    int step = mv_stmt_step(st, err);
    int64_t changes = mv_stmt_changes(st);
    mv_stmt_done(st);
    if (step < 0) return err && err->code ? err->code : MV_INTERNAL;
    if (changes != 1)
        return mv_err_set(err, MV_SAGA_CONCURRENCY, "saga %s: concurrent transition rejected",
                          t->id);
    for (size_t i = 0; i < t->nrows; i++)
        if ((rc = write_row(db, t->id, &t->rows[i], t->updated_at, err))) return rc;
    for (size_t i = 0; i < t->nnotes; i++)
        if ((rc = note_fn(db, t->notes[i], t->updated_at, err))) return rc;
    if (t->wake) {
        char timer_id[MV__TIMER_ID_MAX];
        mv__saga_timer_id(t->id, timer_id);
        return mv__timer_schedule(db, timer_id, t->tenant ? t->tenant : "default",
                                  MV__SAGA_WAKE_KIND, t->id, t->wake_at, t->updated_at, err);
    }
    return MV_OK;
}

mv_code mv__saga_concurrency(const char *id, mv_err *err) {
    mv_err_set(err, MV_SAGA_CONCURRENCY, "saga %s: concurrent transition rejected", id);
    if (err) mv_strlcpy(err->saga_id, id, sizeof err->saga_id);
    return MV_SAGA_CONCURRENCY;
}

/* The row of step `idx` as stored (values sealed when encryption is on). */
static mv_code fill_row(const mv_saga_engine *e, const char *saga_id, const mv__saga_step *step,
                        int64_t idx, bool insert, step_row *r, mv_err *err) {
    memset(r, 0, sizeof *r);
    r->insert = insert;
    r->idx = idx;
    r->name = step->name;
    r->state = mv_saga_step_state_name(step->state);
    r->effect_id = step->effect_id;
    r->comp_id = step->comp_id;
    r->error_code = step->error_code[0] ? step->error_code : NULL;
    r->has_attempts = true;
    r->attempts = step->attempts;
    r->has_next = step->has_next;
    r->next_at = step->next_at;
    if (step->result && !(r->result = mv__saga_seal_value(e, saga_id, step->result)))
        return mv_err_set(err, MV_INTERNAL, "saga %s: cannot encrypt a value", saga_id);
    if (insert) {
        json_t *null = step->args ? NULL : json_null();
        r->args = mv__saga_seal_value(e, saga_id, step->args ? step->args : null);
        if (!r->args)
            return mv_err_set(err, MV_INTERNAL, "saga %s: cannot encrypt a value", saga_id);
    }
    return MV_OK;
}

static bool ends_run(const mv__saga_record *rec) {
    return rec->end_run || rec->state == MV_SAGA_COMPLETED || rec->state == MV_SAGA_COMPENSATED ||
           rec->state == MV_SAGA_MANUAL_REVIEW || rec->state == MV_SAGA_WAITING;
}

/* Writes t: on a store with one-statement saves (PostgreSQL), a running saga's save is sent blind
 * first; when it fails for any reason but a lost connection, the transaction rolled back and the
 * save runs again reading its results, which tells a moved version from a taken effect id as
 * before. The blind write only queues one statement from t and changes nothing else, so it may be
 * run again: concurrent sagas' saves share commits (store/pg_batch.c), and one that fails in a
 * batch is run again alone and fails there as it would have alone. */
static mv_code cas_write(mv_saga_engine *e, cas_tx *t, mv_err *err) {
    mv_code rc = MV_INTERNAL;
    if (mv__saga_save_has_sql(e->store) && save_shape(t) >= 0) {
        mv_err blind = {0};
        rc = mv__store_write_rerunnable(e->store, cas_blind, t, &blind);
        if (rc == MV_STORE_UNAVAILABLE) mv_err_copy(err, &blind);
    }
    if (rc != MV_OK && rc != MV_STORE_UNAVAILABLE) rc = mv_store_write(e->store, cas_fn, t, err);
    if (rc == MV_SAGA_CONCURRENCY) mv__saga_concurrency(t->id, err);
    return rc;
}

/* Saves next (owned) over *rec with a compare-and-set on *rec's version, in one transaction with:
 * step `index` of next (-1: none; insert: a new row), a committed step still pending in next
 * (next->pending), and note (may be NULL) in the journal. A save that ends the run (completed,
 * compensated, manual review, waiting, or next->end_run) drops the runner lease in the same
 * statement. On success *rec becomes next (version + 1); on failure *rec is marked stale. */
mv_code mv__saga_save_noted(mv_saga_engine *e, mv__saga_record **rec, mv__saga_record *next,
                            int index, bool insert, const journal_note *note, mv_err *err) {
    const char *id = (*rec)->id;
    int64_t version = (*rec)->version;
    int pidx = next->pending;
    bool ends = ends_run(next);
    step_row rows[2];
    size_t nrows = 0;
    mv_code rc = MV_OK;
    if (index >= (int)next->nsteps || pidx >= (int)next->nsteps) {
        mv__saga_record_free(next);
        return mv_err_set(err, MV_INTERNAL, "saga %s: no step %d to save", id,
                          index > pidx ? index : pidx);
    }
    if (pidx >= 0 && pidx != index)
        rc = fill_row(e, id, &next->steps[pidx], pidx, false, &rows[nrows++], err);
    if (rc == MV_OK && index >= 0)
        rc = fill_row(e, id, &next->steps[index], index, insert, &rows[nrows++], err);
    journal_note commit = {.effect_id = pidx >= 0 ? next->steps[pidx].effect_id : NULL,
                           .from_mask = MV__EFFECT_MASK(MV_EFFECT_EXECUTING),
                           .to = MV_EFFECT_COMMITTED};
    if (rc == MV_OK) {
        cas_tx t = {.id = id,
                    .state = mv_saga_state_name(next->state),
                    .release = ends && next->runner[0] ? next->runner : NULL,
                    .updated_at = next->updated_at,
                    .version = version,
                    .rows = rows,
                    .nrows = nrows};
        if (commit.effect_id) t.notes[t.nnotes++] = &commit;
        t.pending = pidx >= 0 && pidx != index;
        if (note) t.notes[t.nnotes++] = note;
        if (next->has_wake_at) {
            t.has_wake_at = true;
            t.wake_at = next->wake_at;
            t.wake = saga_is(next, MV_SAGA_WAITING);
            t.tenant = next->tenant[0] ? next->tenant : NULL;
        }
        t.lease_until = t.updated_at + e->runner_lease_ms;
        rc = cas_write(e, &t, err); /* *rec changes below, only once the outcome is known */
    }
    for (size_t i = 0; i < nrows; i++) {
        free(rows[i].args);
        free(rows[i].result);
    }
    if (rc) {
        mv__saga_record_free(next);
        (*rec)->stale = true;
        return rc;
    }
    next->version = version + 1;
    next->pending = -1;
    next->stale = false;
    next->end_run = false;
    if (ends) next->runner[0] = '\0';
    mv__saga_record_free(*rec);
    *rec = next;
    if (e->on_save) {
        json_t *pub = mv__saga_public_json(next);
        e->on_save(pub, e->on_save_ctx);
        json_decref(pub);
    }
    return MV_OK;
}

mv_code mv__saga_save_with_noted(mv_saga_engine *e, mv__saga_record **rec, int state, int index,
                                 mv__saga_step *step, const journal_note *note, mv_err *err) {
    mv__saga_record *next;
    bool has_step = step != NULL;
    mv_code rc = mv__saga_with(e, *rec, state, index, step, &next, err);
    return rc ? rc : mv__saga_save_noted(e, rec, next, has_step ? index : -1, false, note, err);
}

mv_code mv__saga_save_with(mv_saga_engine *e, mv__saga_record **rec, int state, int index,
                           mv__saga_step *step, mv_err *err) {
    return mv__saga_save_with_noted(e, rec, state, index, step, NULL, err);
}

/* ---- the runner lease ---------------------------------------------------------------------- */

typedef struct {
    const char *id, *runner;
    int64_t now, until, changes;
    bool take;
} runner_tx;

static mv_code runner_fn(mv_db *db, void *ctx, mv_err *err) {
    runner_tx *t = ctx;
    if (t->take)
        return mv_db_execf(db, mv__sql_saga_take_runner, &t->changes, err, "sisi", t->runner,
                           t->until, t->id, t->now);
    return mv_db_execf(db, mv__sql_saga_drop_runner, &t->changes, err, "ss", t->id, t->runner);
}

/* Takes the runner lease of saga_id for runner (37 bytes, filled). A saga that does not exist is
 * not an error here: the load that follows reports it. */
mv_code mv__saga_take_runner(mv_saga_engine *e, const char *saga_id, char runner[37], mv_err *err) {
    mv_code rc = mv_id_uuid(runner, err);
    if (rc) return rc;
    runner_tx t = {.id = saga_id, .runner = runner, .take = true};
    if ((rc = mv__saga_now_ms(e, &t.now, err))) return rc;
    t.until = t.now + e->runner_lease_ms;
    if ((rc = mv_store_write(e->store, runner_fn, &t, err))) return rc;
    mv__saga_record *existing = NULL;
    if (t.changes == 0 && mv__saga_load(e, saga_id, &existing, NULL) == MV_OK) {
        mv__saga_record_free(existing);
        mv_err_set(err, MV_SAGA_CONCURRENCY, "saga %s: another runner is working on it", saga_id);
        if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
        return MV_SAGA_CONCURRENCY;
    }
    return MV_OK;
}

void mv__saga_drop_runner(mv_saga_engine *e, const char *saga_id, const char *runner) {
    runner_tx t = {.id = saga_id, .runner = runner};
    mv_store_write(e->store, runner_fn, &t, NULL); /* failing here only delays the next runner */
}
