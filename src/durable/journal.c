/* journal.c — the durable effect journal: one row per external side effect, moving
 * admission → executing → committed, or to failed (nothing began) / unknown (it began and the
 * outcome is in doubt).
 *
 * Every transition reads the row and applies one conditional UPDATE on (state, version) inside
 * the same write transaction; the row count decides, so two servers can never both move one
 * effect. Rows are validated when read: a journal that trusted a corrupted row would report a
 * wrong outcome for a payment. */
#include <stdlib.h>
#include <string.h>

#include "durable/durable_internal.h"
#include "store/db.h"

struct mv_journal {
    mv_store *store;
    const mv_clock *clock;
};

static const char SQL_INSERT_EFFECT[] =
    "INSERT INTO effects (effect_id, capability, target, digest, tenant_id, principal_id, state, "
    "error_code, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, 'admission', NULL, ?, "
    "?, 1) ON CONFLICT DO NOTHING";
static const char SQL_GET_EFFECT[] =
    "SELECT effect_id, capability, target, digest, tenant_id, principal_id, state, error_code, "
    "created_at, updated_at, version FROM effects WHERE effect_id = ?";
/* The saga engine's step intent: the row as an intent followed by the executing transition would
 * leave it (state executing, version 2), in one statement. */
static const char SQL_INSERT_EFFECT_EXECUTING[] =
    "INSERT INTO effects (effect_id, capability, target, digest, tenant_id, principal_id, state, "
    "error_code, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, 'executing', NULL, ?, "
    "?, 2) ON CONFLICT DO NOTHING";
/* A transition from the one state the caller expects, without reading the row first: the row count
 * decides as well as the (state, version) condition does. */
static const char SQL_MOVE_EFFECT_FROM[] =
    "UPDATE effects SET state = ?, updated_at = ?, version = version + 1, "
    "error_code = COALESCE(?, error_code) WHERE effect_id = ? AND state = ?";
static const char SQL_TRANSITION_EFFECT[] =
    "UPDATE effects SET state = ?, updated_at = ?, version = version + 1, "
    "error_code = COALESCE(?, error_code) WHERE effect_id = ? AND state = ? AND version = ?";

static const char *const state_names[] = {"admission", "executing", "committed", "failed",
                                          "unknown"};

const char *mv_effect_state_name(mv_effect_state state) {
    return (unsigned)state < 5 ? state_names[state] : "invalid";
}

static int parse_state(const char *s) {
    for (int i = 0; s && i < 5; i++)
        if (strcmp(s, state_names[i]) == 0) return i;
    return -1;
}

mv_code mv_journal_new(mv_store *store, const mv_journal_options *opts, mv_journal **out,
                       mv_err *err) {
    *out = NULL;
    if (!store) return mv_err_set(err, MV_INVALID_ARGUMENT, "durable effect journal needs a store");
    if (mv_store_is_memory(store) && !(opts && opts->allow_memory))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "durable effect journal requires a durable store");
    mv_journal *j = calloc(1, sizeof *j);
    if (!j) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    j->store = store;
    j->clock = opts ? opts->clock : NULL;
    *out = j;
    return MV_OK;
}

void mv_journal_free(mv_journal *journal) { free(journal); }

static void copy_col(mv_stmt *st, int col, char *dst, size_t size) {
    const char *s = mv_stmt_text(st, col);
    mv_strlcpy(dst, s ? s : "", size);
}

/* Reads and validates one row. *found = false when absent. */
static mv_code load_effect(mv_db *db, const char *id, mv_effect_record *rec, bool *found,
                           mv_err *err) {
    *found = false; /* on every path: the analyzer cannot see that a failed step sets err->code */
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GET_EFFECT, &st, err, "s", id);
    if (rc || !st) return rc;
    *found = true;
    memset(rec, 0, sizeof *rec);
    const char *eid = mv_stmt_text(st, 0), *cap = mv_stmt_text(st, 1);
    int state = parse_state(mv_stmt_text(st, 6));
    bool ok = eid && strcmp(eid, id) == 0 && cap && mv_valid_capability(cap) &&
              strlen(cap) < sizeof rec->capability && state >= 0;
    copy_col(st, 0, rec->effect_id, sizeof rec->effect_id);
    copy_col(st, 1, rec->capability, sizeof rec->capability);
    const char *target = mv_stmt_text(st, 2), *digest = mv_stmt_text(st, 3);
    const char *tenant = mv_stmt_text(st, 4), *principal = mv_stmt_text(st, 5);
    const char *code = mv_stmt_text(st, 7);
    if (target && !mv_valid_token(target, 128)) ok = false;
    if (digest && !mv_valid_digest(digest)) ok = false;
    if (tenant && !mv_valid_token(tenant, MV_MAX_ID_BYTES)) ok = false;
    if (principal && !mv_valid_token(principal, MV_MAX_ID_BYTES)) ok = false;
    if ((tenant == NULL) != (principal == NULL)) ok = false; /* partial identity */
    if (code && !mv_valid_error_code(code)) ok = false;
    copy_col(st, 2, rec->target, sizeof rec->target);
    copy_col(st, 3, rec->digest, sizeof rec->digest);
    copy_col(st, 4, rec->tenant_id, sizeof rec->tenant_id);
    copy_col(st, 5, rec->principal_id, sizeof rec->principal_id);
    copy_col(st, 7, rec->error_code, sizeof rec->error_code);
    rec->state = (mv_effect_state)(state < 0 ? 0 : state);
    rec->created_at = mv_stmt_int64(st, 8);
    rec->updated_at = mv_stmt_int64(st, 9);
    rec->version = mv_stmt_int64(st, 10);
    mv_stmt_done(st);
    if (!mv_valid_timestamp(rec->created_at) || !mv_valid_timestamp(rec->updated_at) ||
        rec->created_at > rec->updated_at || rec->version < 1 || rec->version > MV_MAX_SAFE_INT)
        ok = false;
    if (!ok)
        return mv_err_set(err, MV_INTERNAL, "durable effect %s: store returned an invalid record",
                          id);
    return MV_OK;
}

static mv_code check_id(const char *id, mv_err *err) {
    if (!mv_valid_token(id, 64))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "durable effect id must be a bounded printable token");
    return MV_OK;
}

/* ---- intent ------------------------------------------------------------------------------- */

typedef struct {
    const mv_effect_intent *in;
    int64_t now;
} intent_tx;

mv_code mv__journal_insert_tx(mv_db *db, const mv_effect_intent *in, int64_t now, mv_err *err) {
    int64_t changes = 0;
    mv_code rc =
        mv_db_execf(db, SQL_INSERT_EFFECT, &changes, err, "ssssssii", in->effect_id, in->capability,
                    in->target, in->digest, in->tenant_id, in->principal_id, now, now);
    if (rc) return rc;
    if (changes != 1)
        return mv_err_set(err, MV_EFFECT_TRANSITION,
                          "durable effect %s: create transition was rejected", in->effect_id);
    return MV_OK;
}

mv_code mv__journal_insert_executing_tx(mv_db *db, const mv_effect_intent *in, int64_t now,
                                        mv_err *err) {
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_INSERT_EFFECT_EXECUTING, &changes, err, "ssssssii",
                             in->effect_id, in->capability, in->target, in->digest, in->tenant_id,
                             in->principal_id, now, now);
    if (rc) return rc;
    if (changes != 1)
        return mv_err_set(err, MV_EFFECT_TRANSITION,
                          "durable effect %s: create transition was rejected", in->effect_id);
    return MV_OK;
}

static mv_code intent_fn(mv_db *db, void *ctx, mv_err *err) {
    intent_tx *t = ctx;
    return mv__journal_insert_tx(db, t->in, t->now, err);
}

mv_code mv_journal_intent(mv_journal *journal, const mv_effect_intent *in, mv_err *err) {
    mv_code rc;
    if (!in) return mv_err_set(err, MV_INVALID_ARGUMENT, "durable effect intent is missing");
    if ((rc = check_id(in->effect_id, err))) return rc;
    if (!in->capability || !mv_valid_capability(in->capability) || strlen(in->capability) > 128)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "durable effect capability is invalid");
    if (in->target && !mv_valid_token(in->target, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "durable effect target must be a bounded printable token");
    if (in->digest && !mv_valid_digest(in->digest))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "durable effect digest is invalid");
    if (in->tenant_id || in->principal_id) {
        if (!in->tenant_id || !mv_valid_token(in->tenant_id, MV_MAX_ID_BYTES))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "durable effect tenantId must be a bounded printable token");
        if (!in->principal_id || !mv_valid_token(in->principal_id, MV_MAX_ID_BYTES))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "durable effect principalId must be a bounded printable token");
    }
    intent_tx t = {.in = in};
    if ((rc = mv_durable_now(journal->clock, "durable effect clock", &t.now, err))) return rc;
    return mv_store_write(journal->store, intent_fn, &t, err);
}

/* ---- transitions -------------------------------------------------------------------------- */

/* The one transition function: from one of the states in from_mask to `to`, as a conditional
 * update on (state, version). */
mv_code mv__journal_move_tx(mv_db *db, const char *id, unsigned from_mask, mv_effect_state to,
                            const char *error_code, int64_t now, bool missing_ok, mv_err *err) {
    mv_effect_record rec;
    bool found;
    mv_code rc = load_effect(db, id, &rec, &found, err);
    if (rc) return rc;
    if (!found)
        return missing_ok ? MV_OK
                          : mv_err_set(err, MV_EFFECT_TRANSITION,
                                       "durable effect %s: missing transition was rejected", id);
    /* the reference names the state the transition expected when there is exactly one */
    const char *from = (from_mask & (from_mask - 1)) == 0
                           ? mv_effect_state_name((mv_effect_state)__builtin_ctz(from_mask))
                           : mv_effect_state_name(rec.state);
    if (!(from_mask & MV__EFFECT_MASK(rec.state)))
        return mv_err_set(err, MV_EFFECT_TRANSITION,
                          "durable effect %s: %s->%s transition was rejected", id, from,
                          mv_effect_state_name(to));
    int64_t changes = 0;
    rc = mv_db_execf(db, SQL_TRANSITION_EFFECT, &changes, err, "sisssi", mv_effect_state_name(to),
                     now, error_code, id, mv_effect_state_name(rec.state), rec.version);
    if (rc) return rc;
    if (changes != 1)
        return mv_err_set(err, MV_EFFECT_TRANSITION,
                          "durable effect %s: %s->%s transition was rejected", id, from,
                          mv_effect_state_name(to));
    return MV_OK;
}

mv_code mv__journal_move_from_tx(mv_db *db, const char *id, mv_effect_state expected,
                                 unsigned from_mask, mv_effect_state to, const char *error_code,
                                 int64_t now, bool missing_ok, mv_err *err) {
    int64_t changes = 0;
    mv_code rc =
        mv_db_execf(db, SQL_MOVE_EFFECT_FROM, &changes, err, "sisss", mv_effect_state_name(to), now,
                    error_code, id, mv_effect_state_name(expected));
    if (rc || changes == 1) return rc;
    /* not where expected: the full transition reads the row and names what it found */
    return mv__journal_move_tx(db, id, from_mask, to, error_code, now, missing_ok, err);
}

typedef struct {
    const char *id;
    int from; /* -1: whatever the current state is (failed) */
    mv_effect_state to;
    const char *error_code;
    int64_t now;
} transition_tx;

static mv_code transition_fn(mv_db *db, void *ctx, mv_err *err) {
    transition_tx *t = ctx;
    unsigned from = t->from < 0 ? MV__EFFECT_ANY : MV__EFFECT_MASK(t->from);
    return mv__journal_move_tx(db, t->id, from, t->to, t->error_code, t->now, false, err);
}

static mv_code transition(mv_journal *j, transition_tx *t, mv_err *err) {
    mv_code rc;
    if ((rc = check_id(t->id, err))) return rc;
    if ((rc = mv_durable_now(j->clock, "durable effect clock", &t->now, err))) return rc;
    return mv_store_write(j->store, transition_fn, t, err);
}

mv_code mv_journal_executing(mv_journal *journal, const char *effect_id, mv_err *err) {
    transition_tx t = {.id = effect_id, .from = MV_EFFECT_ADMISSION, .to = MV_EFFECT_EXECUTING};
    return transition(journal, &t, err);
}

mv_code mv_journal_committed(mv_journal *journal, const char *effect_id, mv_err *err) {
    transition_tx t = {.id = effect_id, .from = MV_EFFECT_EXECUTING, .to = MV_EFFECT_COMMITTED};
    return transition(journal, &t, err);
}

mv_code mv_journal_failed(mv_journal *journal, const char *effect_id, bool began,
                          const char *error_code, mv_err *err) {
    if (!error_code || !mv_valid_error_code(error_code))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "durable effect errorCode is invalid");
    transition_tx t = {.id = effect_id,
                       .from = -1,
                       .to = began ? MV_EFFECT_UNKNOWN : MV_EFFECT_FAILED,
                       .error_code = error_code};
    return transition(journal, &t, err);
}

/* ---- reads -------------------------------------------------------------------------------- */

typedef struct {
    const char *id;
    mv_effect_record *out;
} get_tx;

static mv_code get_fn(mv_db *db, void *ctx, mv_err *err) {
    get_tx *g = ctx;
    bool found;
    mv_code rc = load_effect(db, g->id, g->out, &found, err);
    if (rc) return rc;
    if (!found) return mv_err_set(err, MV_NOT_FOUND, "durable effect %s does not exist", g->id);
    return MV_OK;
}

mv_code mv_journal_get(mv_journal *journal, const char *effect_id, mv_effect_record *out,
                       mv_err *err) {
    mv_code rc;
    if ((rc = check_id(effect_id, err))) return rc;
    get_tx g = {.id = effect_id, .out = out};
    return mv_store_read(journal->store, get_fn, &g, err);
}

/* ---- the journal as effect-scope transitions --------------------------------------------- */

static mv_code jt_intent(const mv_effect_context *c, void *ctx, mv_err *err) {
    mv_effect_intent in = {.effect_id = c->effect_id,
                           .capability = c->capability,
                           .target = c->target,
                           .digest = c->digest,
                           .tenant_id = c->tenant_id,
                           .principal_id = c->principal_id};
    return mv_journal_intent(ctx, &in, err);
}

static mv_code jt_executing(const mv_effect_context *c, void *ctx, mv_err *err) {
    return mv_journal_executing(ctx, c->effect_id, err);
}

static mv_code jt_committed(const mv_effect_context *c, const json_t *result, void *ctx,
                            mv_err *err) {
    (void)result;
    return mv_journal_committed(ctx, c->effect_id, err);
}

static mv_code jt_failed(const mv_effect_context *c, const mv_effect_failure *f, void *ctx,
                         mv_err *err) {
    return mv_journal_failed(ctx, c->effect_id, f->began, f->error_code, err);
}

mv_effect_transitions mv_journal_transitions(mv_journal *j) {
    return (mv_effect_transitions){.intent = jt_intent,
                                   .executing = jt_executing,
                                   .committed = jt_committed,
                                   .failed = jt_failed,
                                   .ctx = j};
}
