/* saga_record.c — the saga record: the two state machines, the engine, the typed record
 * (saga_internal.h) parsed once from a saga's row and its step rows, the public JSON shape, and
 * with() (every change of state goes through it). */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "store/db.h"
#include "store/saga_sql.h"

/* ---- the two state machines: names and transitions ------------------------------------- */

static const char *const saga_state_names[MV_SAGA_STATE_COUNT] = {
    "running", "compensating", "completed", "compensated", "manual-review", "waiting"};
static const char *const step_state_names[MV_STEP_STATE_COUNT] = {
    "executing",   "committed",          "failed", "ambiguous", "compensating",
    "compensated", "compensation-failed"};

#define TO(s) (1u << (s))
/* Where each saga state may go (a save that keeps the state is always allowed). Manual review
 * ends when an operator's resolution lets the saga run or compensate again. */
static const unsigned saga_moves[MV_SAGA_STATE_COUNT] = {
    [MV_SAGA_RUNNING] = TO(MV_SAGA_COMPENSATING) | TO(MV_SAGA_COMPLETED) |
                        TO(MV_SAGA_MANUAL_REVIEW) | TO(MV_SAGA_WAITING),
    [MV_SAGA_COMPENSATING] = TO(MV_SAGA_COMPENSATED) | TO(MV_SAGA_MANUAL_REVIEW),
    [MV_SAGA_COMPLETED] = 0,
    [MV_SAGA_COMPENSATED] = 0,
    [MV_SAGA_MANUAL_REVIEW] = TO(MV_SAGA_RUNNING) | TO(MV_SAGA_COMPENSATING),
    /* woken by its timer (or resumed at or after wakeAt); an operator may compensate it */
    [MV_SAGA_WAITING] = TO(MV_SAGA_RUNNING) | TO(MV_SAGA_COMPENSATING),
};
/* Where each step state may go: executed once (or resolved by an operator), then compensated,
 * retrying a failed compensation under the same effect id. */
static const unsigned step_moves[MV_STEP_STATE_COUNT] = {
    [MV_STEP_EXECUTING] = TO(MV_STEP_COMMITTED) | TO(MV_STEP_FAILED) | TO(MV_STEP_AMBIGUOUS),
    [MV_STEP_COMMITTED] = TO(MV_STEP_COMPENSATING) | TO(MV_STEP_COMPENSATION_FAILED),
    [MV_STEP_FAILED] = 0,
    [MV_STEP_AMBIGUOUS] = TO(MV_STEP_COMMITTED) | TO(MV_STEP_FAILED),
    [MV_STEP_COMPENSATING] = TO(MV_STEP_COMPENSATED) | TO(MV_STEP_COMPENSATION_FAILED),
    [MV_STEP_COMPENSATED] = 0,
    [MV_STEP_COMPENSATION_FAILED] = TO(MV_STEP_COMPENSATING) | TO(MV_STEP_COMPENSATED),
};

const char *mv_saga_state_name(mv_saga_state state) {
    return (unsigned)state < MV_SAGA_STATE_COUNT ? saga_state_names[state] : "invalid";
}

const char *mv_saga_step_state_name(mv_saga_step_state state) {
    return (unsigned)state < MV_STEP_STATE_COUNT ? step_state_names[state] : "invalid";
}

static int parse_name(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

int mv_saga_state_parse(const char *s) {
    return parse_name(s, saga_state_names, MV_SAGA_STATE_COUNT);
}

int mv_saga_step_state_parse(const char *s) {
    return parse_name(s, step_state_names, MV_STEP_STATE_COUNT);
}

/* The one transition rule of each machine: staying is allowed, moving only as the table says. */
static bool may_move(const unsigned *moves, int from, int to) {
    return from >= 0 && to >= 0 && (from == to || (moves[from] & TO(to)));
}

/* ---- engine ------------------------------------------------------------------------------- */

mv_code mv_saga_engine_new(mv_store *store, const mv_saga_engine_options *opts,
                           mv_saga_engine **out, mv_err *err) {
    *out = NULL;
    if (!store) return mv_err_set(err, MV_INVALID_ARGUMENT, "saga engine needs a store");
    if (mv_store_is_memory(store) && !(opts && opts->allow_memory))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga engine requires a durable store");
    mv_saga_engine *e = calloc(1, sizeof *e);
    if (!e) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    e->store = store;
    e->runner_lease_ms = MV_DEFAULT_SAGA_RUNNER_LEASE_MS;
    if (opts) {
        e->clock = opts->clock;
        e->observer = opts->observer;
        e->on_save = opts->on_save;
        e->on_save_ctx = opts->on_save_ctx;
        /* capped so that now + lease cannot overflow (a wrapped expiry is already past) */
        if (opts->runner_lease_ms > 0)
            e->runner_lease_ms =
                opts->runner_lease_ms < MV_MAX_SAFE_INT ? opts->runner_lease_ms : MV_MAX_SAFE_INT;
        if (opts->encryption_key) {
            memcpy(e->key, opts->encryption_key, MV_SAGA_KEY_BYTES);
            e->has_key = true;
        }
    }
    *out = e;
    return MV_OK;
}

void mv_saga_engine_free(mv_saga_engine *engine) {
    if (!engine) return;
    memset(engine->key, 0, sizeof engine->key);
    free(engine);
}

mv_code mv__saga_now_ms(mv_saga_engine *e, int64_t *out, mv_err *err) {
    return mv_durable_now(e->clock, "saga clock", out, err);
}

/* ---- the record ---------------------------------------------------------------------------- */

mv__saga_record *mv__saga_record_new(void) {
    mv__saga_record *rec = calloc(1, sizeof *rec);
    if (rec) rec->pending = -1;
    return rec;
}

void mv__saga_step_clear(mv__saga_step *step) {
    json_decref(step->args);
    json_decref(step->result);
    memset(step, 0, sizeof *step);
}

/* The payloads are shared (never changed once in a record): a copy holds references. */
void mv__saga_step_copy(mv__saga_step *dst, const mv__saga_step *src) {
    *dst = *src;
    json_incref(dst->args);
    json_incref(dst->result);
}

void mv__saga_record_free(mv__saga_record *rec) {
    if (!rec) return;
    for (size_t i = 0; i < rec->nsteps; i++)
        mv__saga_step_clear(&rec->steps[i]);
    free(rec->steps);
    json_decref(rec->input);
    free(rec);
}

static bool reserve_steps(mv__saga_record *rec, size_t n) {
    if (n <= rec->cap) return true;
    size_t cap = rec->cap ? rec->cap * 2 : 4;
    while (cap < n)
        cap *= 2;
    mv__saga_step *steps = realloc(rec->steps, cap * sizeof *steps);
    if (!steps) return false;
    rec->steps = steps;
    rec->cap = cap;
    return true;
}

bool mv__saga_record_append(mv__saga_record *rec, mv__saga_step *step) {
    if (!reserve_steps(rec, rec->nsteps + 1)) {
        mv__saga_step_clear(step);
        return false;
    }
    rec->steps[rec->nsteps++] = *step;
    memset(step, 0, sizeof *step);
    return true;
}

mv_code mv__saga_new_step(mv__saga_step *step, const char *name, const char *effect_id,
                          const char *comp_id, const json_t *compensation_args, mv_err *err) {
    memset(step, 0, sizeof *step);
    mv_strlcpy(step->name, name, sizeof step->name);
    mv_strlcpy(step->effect_id, effect_id, sizeof step->effect_id);
    mv_strlcpy(step->comp_id, comp_id, sizeof step->comp_id);
    step->state = MV_STEP_EXECUTING;
    /* a private copy: the caller may change theirs */
    step->args = compensation_args ? json_deep_copy(compensation_args) : json_null();
    return step->args ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

mv__saga_record *mv__saga_record_copy(const mv__saga_record *rec) {
    mv__saga_record *out = malloc(sizeof *out);
    if (!out) return NULL;
    *out = *rec;
    out->steps = NULL;
    out->cap = 0;
    /* + 1: the step a save may append (so the steps are never NULL, even with none) */
    if (!reserve_steps(out, rec->nsteps + 1) || !out->steps) {
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < rec->nsteps; i++)
        mv__saga_step_copy(&out->steps[i], &rec->steps[i]);
    json_incref(out->input);
    return out;
}

/* ---- load ----------------------------------------------------------------------------------- */

typedef struct {
    mv_saga_engine *e;
    const char *id;
    mv__saga_record *rec;
} load_tx;

static mv_code invalid_record(const char *id, mv_err *err) {
    return mv_err_set(err, MV_INTERNAL, "saga %s: store returned an invalid record", id);
}

static mv_code invalid_step(const char *id, mv_err *err) {
    return mv_err_set(err, MV_INTERNAL, "saga %s: store returned an invalid step record", id);
}

/* A bounded printable token (mv_valid_token) copied into out (max + 1 bytes). */
static bool copy_token(char *out, const char *s, size_t max) {
    if (!mv_valid_token(s, max)) return false;
    mv_strlcpy(out, s, max + 1);
    return true;
}

/* Validates a loaded record's steps (§4.4): unique names and effect ids. */
static mv_code validate_steps(const char *id, const mv__saga_record *rec, mv_err *err) {
    for (size_t i = 0; i < rec->nsteps; i++) {
        const mv__saga_step *s = &rec->steps[i];
        if (strcmp(s->effect_id, s->comp_id) == 0) return invalid_step(id, err);
        for (size_t k = 0; k < i; k++) {
            const mv__saga_step *o = &rec->steps[k];
            if (strcmp(o->name, s->name) == 0 || strcmp(o->effect_id, s->effect_id) == 0 ||
                strcmp(o->comp_id, s->effect_id) == 0 || strcmp(o->effect_id, s->comp_id) == 0 ||
                strcmp(o->comp_id, s->comp_id) == 0)
                return invalid_step(id, err);
        }
    }
    return MV_OK;
}

/* A step value as stored (compact JSON, or sealed text) → JSON; NULL when it cannot be read. A
 * sealed value without a key stays the string it is, as values inside a document always did. */
static json_t *stored_value(const mv_saga_engine *e, const char *saga_id, const char *text,
                            bool *undecryptable) {
    if (strncmp(text, ENC_PREFIX, sizeof ENC_PREFIX - 1) == 0) {
        if (!e->has_key) return json_string(text);
        json_t *v = mv__saga_unseal_value(e, saga_id, text);
        if (!v) *undecryptable = true;
        return v;
    }
    json_t *v = NULL;
    mv_json_parse(text, strlen(text), &v, NULL);
    return v;
}

/* One row of mv__sql_saga_steps into *s; false when a column is not what a step holds. */
static bool parse_step(mv_stmt *st, load_tx *t, mv__saga_step *s, bool *undecryptable) {
    const char *args = mv_stmt_text(st, 4), *result = mv_stmt_text(st, 5),
               *code = mv_stmt_text(st, 7);
    int state = mv_saga_step_state_parse(mv_stmt_text(st, 1));
    bool ok = copy_token(s->name, mv_stmt_text(st, 0), 128) &&
              copy_token(s->effect_id, mv_stmt_text(st, 2), 64) &&
              copy_token(s->comp_id, mv_stmt_text(st, 3), 64) && state >= 0;
    s->state = (mv_saga_step_state)state;
    if (args && !(s->args = stored_value(t->e, t->id, args, undecryptable))) ok = false;
    if (!args) ok = false;
    if (result && !(s->result = stored_value(t->e, t->id, result, undecryptable))) ok = false;
    if (mv_stmt_is_null(st, 6) || mv_stmt_int64(st, 6) < 0) ok = false;
    s->attempts = mv_stmt_int64(st, 6);
    if (code) {
        if (mv_valid_error_code(code))
            mv_strlcpy(s->error_code, code, sizeof s->error_code);
        else
            ok = false;
    }
    if (!mv_stmt_is_null(st, 8)) {
        s->has_next = true;
        s->next_at = mv_stmt_int64(st, 8);
        if (!mv_valid_timestamp(s->next_at)) ok = false;
    }
    return ok;
}

/* Appends the step rows of t->id to t->rec. */
static mv_code load_steps(mv_db *db, load_tx *t, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, mv__sql_saga_steps, &st, err);
    if (rc) return rc;
    mv_stmt_bind_text(st, 1, t->id);
    int r;
    bool undecryptable = false, bad = false, oom = false;
    while ((r = mv_stmt_step(st, err)) == 1) {
        mv__saga_step s = {0};
        if (!parse_step(st, t, &s, &undecryptable)) bad = true;
        if (!mv__saga_record_append(t->rec, &s)) oom = true;
    }
    mv_stmt_done(st);
    if (r < 0) return err ? err->code : MV_INTERNAL;
    if (oom) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (undecryptable)
        return mv_err_set(err, MV_INTERNAL, "saga %s: stored data cannot be decrypted", t->id);
    if (bad) return invalid_step(t->id, err);
    return MV_OK;
}

/* The saga row (mv__sql_saga_get) into rec; false when a column is not what a saga holds. */
static bool parse_saga(mv_stmt *st, const char *id, mv__saga_record *rec) {
    const char *sid = mv_stmt_text(st, 0), *fp = mv_stmt_text(st, 4),
               *tenant = mv_stmt_text(st, 10);
    int state = mv_saga_state_parse(mv_stmt_text(st, 2));
    mv_strlcpy(rec->id, id, sizeof rec->id);
    rec->state = (mv_saga_state)state;
    /* a fingerprint that is not one never matches a caller's (start_in compares them) */
    if (fp && strlen(fp) < sizeof rec->fingerprint)
        mv_strlcpy(rec->fingerprint, fp, sizeof rec->fingerprint);
    if (tenant) mv_strlcpy(rec->tenant, tenant, sizeof rec->tenant);
    rec->max_attempts = mv_stmt_int64(st, 5);
    rec->created_at = mv_stmt_int64(st, 6);
    rec->updated_at = mv_stmt_int64(st, 7);
    rec->version = mv_stmt_int64(st, 8);
    if (!mv_stmt_is_null(st, 9)) {
        rec->has_wake_at = true;
        rec->wake_at = mv_stmt_int64(st, 9);
    }
    return sid && strcmp(sid, id) == 0 && state >= 0 &&
           copy_token(rec->definition, mv_stmt_text(st, 1), 128) &&
           mv_valid_timestamp(rec->created_at) && mv_valid_timestamp(rec->updated_at) &&
           rec->created_at <= rec->updated_at && rec->version >= 1 &&
           (!rec->has_wake_at || mv_valid_timestamp(rec->wake_at));
}

static mv_code load_fn(mv_db *db, void *ctx, mv_err *err) {
    load_tx *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, mv__sql_saga_get, &st, err, "s", t->id);
    if (rc) return rc;
    if (!st) return mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s: not found", t->id);
    mv__saga_record_free(t->rec); /* a read run again starts over */
    mv__saga_record *rec = t->rec = mv__saga_record_new();
    if (!rec) {
        mv_stmt_done(st);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    const char *text = mv_stmt_text(st, 3);
    bool encrypted_input = text && strncmp(text, ENC_PREFIX, sizeof ENC_PREFIX - 1) == 0;
    rec->input = mv__saga_unseal_value(t->e, t->id, text ? text : "");
    bool ok = parse_saga(st, t->id, rec);
    mv_stmt_done(st);
    /* the steps are the saga's saga_steps rows (load_steps): the `steps` document of migration
     * 3 is [] on every saga since migration 10 moved each one into rows, and no engine since has
     * written one (an older engine refuses a newer schema) */
    if (!rec->input) {
        if (!t->e->has_key && encrypted_input)
            return mv_err_set(err, MV_INTERNAL,
                              "saga %s: stored data is encrypted and no key is configured", t->id);
        if (t->e->has_key)
            return mv_err_set(err, MV_INTERNAL, "saga %s: stored data cannot be decrypted", t->id);
        return invalid_record(t->id, err);
    }
    if ((rc = load_steps(db, t, err))) return rc;
    if (!ok) return invalid_record(t->id, err);
    return validate_steps(t->id, rec, err);
}

mv_code mv__saga_load(mv_saga_engine *e, const char *id, mv__saga_record **out, mv_err *err) {
    load_tx t = {.e = e, .id = id};
    mv_code rc = mv_store_read(e->store, load_fn, &t, err);
    if (rc) {
        mv__saga_record_free(t.rec);
        t.rec = NULL;
    }
    *out = t.rec;
    return rc;
}

/* ---- the public shape ----------------------------------------------------------------------- */

static json_t *public_step(const mv__saga_step *s) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s}", "name", s->name, "state",
                          mv_saga_step_state_name(s->state), "attempts", (json_int_t)s->attempts,
                          "effectId", s->effect_id, "compensationEffectId", s->comp_id);
    if (!o) return NULL;
    if (s->result) json_object_set(o, "result", s->result);
    if (s->error_code[0]) json_object_set_new(o, "errorCode", json_string(s->error_code));
    if (s->has_next) json_object_set_new(o, "nextAttemptAt", json_integer(s->next_at));
    return o;
}

/* The public shape (DESIGN "Sagas and approvals over HTTP"). A new reference. */
json_t *mv__saga_public_json(const mv__saga_record *rec) {
    json_t *steps = json_array();
    for (size_t i = 0; steps && i < rec->nsteps; i++)
        json_array_append_new(steps, public_step(&rec->steps[i]));
    json_t *out = json_pack("{s:s, s:s, s:s, s:O, s:o, s:I, s:I}", "sagaId", rec->id, "definition",
                            rec->definition, "state", mv_saga_state_name(rec->state), "input",
                            rec->input, "steps", steps, "createdAt", (json_int_t)rec->created_at,
                            "updatedAt", (json_int_t)rec->updated_at);
    if (out && saga_is(rec, MV_SAGA_WAITING) && rec->has_wake_at)
        json_object_set_new(out, "wakeAt", json_integer(rec->wake_at));
    return out;
}

/* ---- with() --------------------------------------------------------------------------------- */

static mv_code refuse(mv__saga_step *step, mv_code rc) {
    if (step) mv__saga_step_clear(step);
    return rc;
}

mv_code mv__saga_with(mv_saga_engine *e, const mv__saga_record *rec, int state, int index,
                      mv__saga_step *step, mv__saga_record **out, mv_err *err) {
    int64_t now;
    mv_code rc = mv__saga_now_ms(e, &now, err);
    if (rc) return refuse(step, rc);
    /* every change of state goes through the transition tables */
    if (state != KEEP_STATE && !may_move(saga_moves, (int)rec->state, state))
        return refuse(step,
                      mv_err_set(err, MV_INTERNAL, "saga %s: %s->%s transition is not allowed",
                                 rec->id, mv_saga_state_name(rec->state),
                                 mv_saga_state_name((mv_saga_state)state)));
    bool replace = step && index >= 0 && (size_t)index < rec->nsteps;
    if (replace) {
        const mv__saga_step *old = &rec->steps[index];
        if (!may_move(step_moves, (int)old->state, (int)step->state))
            return refuse(step, mv_err_set(err, MV_INTERNAL,
                                           "saga %s: step %s %s->%s transition is not allowed",
                                           rec->id, old->name, mv_saga_step_state_name(old->state),
                                           mv_saga_step_state_name(step->state)));
    }
    mv__saga_record *next = mv__saga_record_copy(rec);
    if (!next) return refuse(step, mv_err_set(err, MV_NO_MEMORY, "out of memory"));
    if (state != KEEP_STATE) next->state = (mv_saga_state)state;
    if (replace) {
        mv__saga_step_clear(&next->steps[index]);
        next->steps[index] = *step;
        memset(step, 0, sizeof *step);
    } else if (step) {
        mv__saga_step_clear(step);
    }
    next->updated_at = now;
    /* wakeAt: the saga's last wait, kept while it runs the step it waited for (a resume then
     * knows the wait is over); the step's start (step_intent) or any other state ends it */
    if (!saga_is(next, MV_SAGA_WAITING) && !saga_is(next, MV_SAGA_RUNNING))
        next->has_wake_at = false;
    *out = next;
    return MV_OK;
}

/* Fills *record with the saga as stored now (when asked and it exists), returns rc. */
mv_code mv__saga_finish(mv_saga_engine *e, const char *saga_id, json_t **record, mv_code rc) {
    if (!record) return rc;
    *record = NULL;
    mv__saga_record *rec = NULL;
    if (mv_valid_token(saga_id, 128) && mv__saga_load(e, saga_id, &rec, NULL) == MV_OK) {
        *record = mv__saga_public_json(rec);
        mv__saga_record_free(rec);
    }
    return rc;
}
