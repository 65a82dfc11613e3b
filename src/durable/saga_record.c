/* saga_record.c — the saga record: the two state machines, the engine, loading a saga and its
 * step rows, the public JSON shape, and with() (every change of state goes through it). */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "store/db.h"

static const char SQL_GET_SAGA[] =
    "SELECT saga_id, definition, state, input, input_fingerprint, max_attempts, "
    "created_at, updated_at, version, wake_at, tenant_id FROM sagas WHERE saga_id = ?";
static const char SQL_GET_STEPS[] =
    "SELECT name, state, effect_id, compensation_effect_id, compensation_args, result, attempts, "
    "error_code, next_attempt_at FROM saga_steps WHERE saga_id = ? ORDER BY idx";

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

/* ---- load and save ------------------------------------------------------------------------ */

typedef struct {
    mv_saga_engine *e;
    const char *id;
    json_t *rec;
} load_tx;

static mv_code invalid_record(const char *id, mv_err *err) {
    return mv_err_set(err, MV_INTERNAL, "saga %s: store returned an invalid record", id);
}

/* Validates a loaded record (§4.4): known states, tokens, timestamps, unique names and ids. */
static mv_code validate(const char *id, const json_t *rec, mv_err *err) {
    json_int_t created = json_integer_value(json_object_get(rec, "createdAt"));
    json_int_t updated = json_integer_value(json_object_get(rec, "updatedAt"));
    json_int_t version = json_integer_value(json_object_get(rec, "version"));
    json_t *steps = json_object_get(rec, "steps");
    if (mv_saga_state_parse(mv_json_str(rec, "state")) < 0 || !json_is_array(steps) ||
        !mv_valid_token(mv_json_str(rec, "definition"), 128) || !mv_valid_timestamp(created) ||
        !mv_valid_timestamp(updated) || created > updated || version < 1 ||
        !json_object_get(rec, "input") ||
        (json_object_get(rec, "wakeAt") &&
         !mv_valid_timestamp(json_integer_value(json_object_get(rec, "wakeAt")))))
        return invalid_record(id, err);
    size_t n = json_array_size(steps);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(steps, i);
        const char *name = mv_json_str(s, "name"), *eid = mv_json_str(s, "effectId"),
                   *cid = mv_json_str(s, "compensationEffectId");
        json_t *attempts = json_object_get(s, "attempts"),
               *next = json_object_get(s, "nextAttemptAt");
        const char *code = mv_json_str(s, "errorCode");
        if (!mv_valid_token(name, 128) || !mv_valid_token(eid, 64) || !mv_valid_token(cid, 64) ||
            mv_saga_step_state_parse(mv_json_str(s, "state")) < 0 || !json_is_integer(attempts) ||
            json_integer_value(attempts) < 0 ||
            (next && !mv_valid_timestamp(json_integer_value(next))) ||
            (json_object_get(s, "errorCode") && (!code || !mv_valid_error_code(code))))
            return mv_err_set(err, MV_INTERNAL, "saga %s: store returned an invalid step record",
                              id);
        for (size_t k = 0; k < i; k++) {
            json_t *o = json_array_get(steps, k);
            const char *ids[] = {mv_json_str(o, "effectId"),
                                 mv_json_str(o, "compensationEffectId")};
            if (strcmp(mv_json_str(o, "name"), name) == 0 || strcmp(ids[0], eid) == 0 ||
                strcmp(ids[1], eid) == 0 || strcmp(ids[0], cid) == 0 || strcmp(ids[1], cid) == 0 ||
                strcmp(eid, cid) == 0)
                return mv_err_set(err, MV_INTERNAL,
                                  "saga %s: store returned an invalid step record", id);
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

/* Appends the step rows of t->id to steps. */
static mv_code load_steps(mv_db *db, load_tx *t, json_t *steps, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_GET_STEPS, &st, err);
    if (rc) return rc;
    mv_stmt_bind_text(st, 1, t->id);
    int r;
    bool undecryptable = false, bad = false;
    while ((r = mv_stmt_step(st, err)) == 1) {
        json_t *s = json_object();
        static const char *const texts[] = {"name", "state", "effectId", "compensationEffectId"};
        for (int k = 0; k < 4; k++)
            if (mv_stmt_text(st, k))
                json_object_set_new(s, texts[k], json_string(mv_stmt_text(st, k)));
        const char *args = mv_stmt_text(st, 4), *result = mv_stmt_text(st, 5);
        json_t *v = args ? stored_value(t->e, t->id, args, &undecryptable) : NULL;
        if (v)
            json_object_set_new(s, "compensationArgs", v);
        else
            bad = true;
        if (result) {
            if ((v = stored_value(t->e, t->id, result, &undecryptable)))
                json_object_set_new(s, "result", v);
            else
                bad = true;
        }
        if (!mv_stmt_is_null(st, 6))
            json_object_set_new(s, "attempts", json_integer(mv_stmt_int64(st, 6)));
        if (mv_stmt_text(st, 7))
            json_object_set_new(s, "errorCode", json_string(mv_stmt_text(st, 7)));
        if (!mv_stmt_is_null(st, 8))
            json_object_set_new(s, "nextAttemptAt", json_integer(mv_stmt_int64(st, 8)));
        json_array_append_new(steps, s);
    }
    mv_stmt_done(st);
    if (r < 0) return err ? err->code : MV_INTERNAL;
    if (undecryptable)
        return mv_err_set(err, MV_INTERNAL, "saga %s: stored data cannot be decrypted", t->id);
    if (bad)
        return mv_err_set(err, MV_INTERNAL, "saga %s: store returned an invalid step record",
                          t->id);
    return MV_OK;
}

static mv_code load_fn(mv_db *db, void *ctx, mv_err *err) {
    load_tx *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GET_SAGA, &st, err, "s", t->id);
    if (rc) return rc;
    if (!st) return mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s: not found", t->id);
    const char *sid = mv_stmt_text(st, 0);
    bool encrypted_input =
        mv_stmt_text(st, 3) && strncmp(mv_stmt_text(st, 3), ENC_PREFIX, sizeof ENC_PREFIX - 1) == 0;
    json_t *input =
        mv__saga_unseal_value(t->e, t->id, mv_stmt_text(st, 3) ? mv_stmt_text(st, 3) : "");
    /* the steps are the saga's saga_steps rows (load_steps): the `steps` document of migration
     * 3 is [] on every saga since migration 10 moved each one into rows, and no engine since has
     * written one (an older engine refuses a newer schema) */
    json_t *steps = json_array();
    bool ok = sid && strcmp(sid, t->id) == 0 && input && json_is_array(steps);
    json_t *rec = json_pack(
        "{s:s, s:s?, s:s?, s:o?, s:s?, s:o?, s:I, s:I, s:I, s:I}", "sagaId", t->id, "definition",
        mv_stmt_text(st, 1), "state", mv_stmt_text(st, 2), "input", input, "inputFingerprint",
        mv_stmt_text(st, 4), "steps", steps, "maxAttempts", (json_int_t)mv_stmt_int64(st, 5),
        "createdAt", (json_int_t)mv_stmt_int64(st, 6), "updatedAt",
        (json_int_t)mv_stmt_int64(st, 7), "version", (json_int_t)mv_stmt_int64(st, 8));
    if (rec && !mv_stmt_is_null(st, 9))
        json_object_set_new(rec, "wakeAt", json_integer(mv_stmt_int64(st, 9)));
    if (rec && mv_stmt_text(st, 10))
        json_object_set_new(rec, K_TENANT, json_string(mv_stmt_text(st, 10)));
    mv_stmt_done(st);
    if (!rec) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (!ok) {
        json_decref(rec);
        if (!input && !t->e->has_key && encrypted_input)
            return mv_err_set(err, MV_INTERNAL,
                              "saga %s: stored data is encrypted and no key is configured", t->id);
        if (!input && t->e->has_key)
            return mv_err_set(err, MV_INTERNAL, "saga %s: stored data cannot be decrypted", t->id);
        return invalid_record(t->id, err);
    }
    if ((rc = load_steps(db, t, steps, err)) || (rc = validate(t->id, rec, err))) {
        json_decref(rec);
        return rc;
    }
    t->rec = rec;
    return MV_OK;
}

mv_code mv__saga_load(mv_saga_engine *e, const char *id, json_t **out, mv_err *err) {
    load_tx t = {.e = e, .id = id};
    mv_code rc = mv_store_read(e->store, load_fn, &t, err);
    *out = rc == MV_OK ? t.rec : NULL;
    return rc;
}

/* The public shape (DESIGN "Sagas and approvals over HTTP"). A new reference. */
json_t *mv__saga_public_json(const json_t *rec) {
    json_t *steps = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(rec, "steps"), i, s) {
        json_t *o =
            json_pack("{s:O, s:O, s:O, s:O, s:O}", "name", json_object_get(s, "name"), "state",
                      json_object_get(s, "state"), "attempts", json_object_get(s, "attempts"),
                      "effectId", json_object_get(s, "effectId"), "compensationEffectId",
                      json_object_get(s, "compensationEffectId"));
        static const char *const opt[] = {"result", "errorCode", "nextAttemptAt"};
        for (int k = 0; o && k < 3; k++)
            if (json_object_get(s, opt[k])) json_object_set(o, opt[k], json_object_get(s, opt[k]));
        json_array_append_new(steps, o);
    }
    json_t *out = json_pack(
        "{s:O, s:O, s:O, s:O, s:o, s:O, s:O}", "sagaId", json_object_get(rec, "sagaId"),
        "definition", json_object_get(rec, "definition"), "state", json_object_get(rec, "state"),
        "input", json_object_get(rec, "input"), "steps", steps, "createdAt",
        json_object_get(rec, "createdAt"), "updatedAt", json_object_get(rec, "updatedAt"));
    if (out && saga_is(rec, MV_SAGA_WAITING) && json_object_get(rec, "wakeAt"))
        json_object_set(out, "wakeAt", json_object_get(rec, "wakeAt"));
    return out;
}

/* A copy of rec with a new state (NULL: unchanged), step `index` replaced by step (owned; NULL:
 * unchanged) and updatedAt = now. */
mv_code mv__saga_with(mv_saga_engine *e, const json_t *rec, int state, int index, json_t *step,
                      json_t **out, mv_err *err) {
    int64_t now;
    mv_code rc = mv__saga_now_ms(e, &now, err);
    if (rc) {
        json_decref(step);
        return rc;
    }
    /* every change of state goes through the transition tables */
    const char *id = mv_json_str(rec, "sagaId");
    int from = mv_saga_state_parse(mv_json_str(rec, "state"));
    if (state != KEEP_STATE && !may_move(saga_moves, from, state)) {
        json_decref(step);
        return mv_err_set(err, MV_INTERNAL, "saga %s: %s->%s transition is not allowed", id,
                          mv_saga_state_name((mv_saga_state)from),
                          mv_saga_state_name((mv_saga_state)state));
    }
    const json_t *old = step ? json_array_get(json_object_get(rec, "steps"), (size_t)index) : NULL;
    if (old) {
        int sf = mv_saga_step_state_parse(mv_json_str(old, "state")),
            st = mv_saga_step_state_parse(mv_json_str(step, "state"));
        if (!may_move(step_moves, sf, st)) {
            json_decref(step);
            return mv_err_set(err, MV_INTERNAL, "saga %s: step %s %s->%s transition is not allowed",
                              id, mv_json_str(old, "name"),
                              mv_saga_step_state_name((mv_saga_step_state)sf),
                              mv_saga_step_state_name((mv_saga_step_state)st));
        }
    }
    json_t *next = json_deep_copy(rec);
    if (!next) {
        json_decref(step);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (state != KEEP_STATE)
        json_object_set_new(next, "state", json_string(mv_saga_state_name((mv_saga_state)state)));
    if (step) json_array_set_new(json_object_get(next, "steps"), (size_t)index, step);
    json_object_set_new(next, "updatedAt", json_integer(now));
    /* wakeAt: the saga's last wait, kept while it runs the step it waited for (a resume then
     * knows the wait is over); the step's start (step_intent) or any other state ends it */
    if (!saga_is(next, MV_SAGA_WAITING) && !saga_is(next, MV_SAGA_RUNNING))
        json_object_del(next, "wakeAt");
    *out = next;
    return MV_OK;
}

/* Fills *record with the saga as stored now (when asked and it exists), returns rc. */
mv_code mv__saga_finish(mv_saga_engine *e, const char *saga_id, json_t **record, mv_code rc) {
    if (!record) return rc;
    *record = NULL;
    json_t *rec = NULL;
    if (mv_valid_token(saga_id, 128) && mv__saga_load(e, saga_id, &rec, NULL) == MV_OK) {
        *record = mv__saga_public_json(rec);
        json_decref(rec);
    }
    return rc;
}
