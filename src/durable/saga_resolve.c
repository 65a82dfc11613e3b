/* saga_resolve.c — an operator's resolution of a saga in manual review, and saga look-ups. */
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "store/db.h"
#include "store/saga_sql.h"

/* ---- resolution ---------------------------------------------------------------------------- */

static mv_code resolution_error(const char *saga_id, const char *step, const char *what,
                                mv_err *err) {
    mv_err_set(err, MV_SAGA_RESOLUTION, "saga %s: step %s %s", saga_id, step, what);
    if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    return MV_SAGA_RESOLUTION;
}

static mv_code resolve_loaded(mv_saga_engine *e, const mv_saga_definition *def,
                              mv__saga_record **rec, const mv_saga_resolution *res, mv_err *err) {
    const char *saga_id = (*rec)->id;
    int index = mv__saga_find_step(*rec, res->step);
    if (index < 0) return resolution_error(saga_id, res->step, "does not exist", err);
    mv__saga_step step;
    mv__saga_step_copy(&step, &(*rec)->steps[index]);
    const char *state_now = mv_saga_step_state_name(step.state);
    char what[160];
    mv_saga_state saga_state;
    mv_code rc = MV_OK;
    /* an execution outcome recorded by an operator settles the step's journal row too */
    journal_note note = {.effect_id = res->effect_id,
                         .from_mask = MV__EFFECT_MASK(MV_EFFECT_EXECUTING) |
                                      MV__EFFECT_MASK(MV_EFFECT_UNKNOWN)};
    const journal_note *noted = NULL;
    if (strcmp(res->kind, "execution") == 0) {
        if (strcmp(step.effect_id, res->effect_id) != 0)
            rc = resolution_error(saga_id, res->step, "execution effect id does not match", err);
        else if (!step_is(&step, MV_STEP_EXECUTING) && !step_is(&step, MV_STEP_AMBIGUOUS)) {
            snprintf(what, sizeof what, "is not awaiting an execution resolution (%s)", state_now);
            rc = resolution_error(saga_id, res->step, what, err);
        }
        if (rc) goto done;
        step.error_code[0] = '\0';
        json_decref(step.result);
        step.result = NULL;
        if (strcmp(res->outcome, "committed") == 0) {
            step.state = MV_STEP_COMMITTED;
            if (res->result) step.result = json_deep_copy(res->result);
            saga_state = MV_SAGA_RUNNING;
            note.to = MV_EFFECT_COMMITTED;
        } else {
            const char *code = res->error_code ? res->error_code : "not_committed";
            if (!mv_valid_error_code(code)) {
                rc = mv_err_set(err, MV_INVALID_ARGUMENT, "saga resolution errorCode is invalid");
                goto done;
            }
            step.state = MV_STEP_FAILED;
            mv_strlcpy(step.error_code, code, sizeof step.error_code);
            saga_state = MV_SAGA_COMPENSATING;
            note.to = MV_EFFECT_FAILED;
            note.error_code = code;
        }
        noted = &note;
    } else {
        if (strcmp(step.comp_id, res->effect_id) != 0)
            rc = resolution_error(saga_id, res->step, "compensation effect id does not match", err);
        else if (!step_is(&step, MV_STEP_COMPENSATING)) {
            snprintf(what, sizeof what, "is not awaiting a compensation resolution (%s)",
                     state_now);
            rc = resolution_error(saga_id, res->step, what, err);
        }
        if (rc) goto done;
        step.error_code[0] = '\0';
        step.has_next = false;
        bool compensated = strcmp(res->outcome, "compensated") == 0;
        step.state = compensated ? MV_STEP_COMPENSATED : MV_STEP_COMPENSATION_FAILED;
        int max = def ? mv__saga_max_attempts(def) : (int)(*rec)->max_attempts;
        if (max < 1) max = MV_DEFAULT_SAGA_MAX_ATTEMPTS;
        saga_state =
            !compensated && step.attempts >= max ? MV_SAGA_MANUAL_REVIEW : MV_SAGA_COMPENSATING;
    }
    return mv__saga_save_with_noted(e, rec, saga_state, index, &step, noted, err);
done:
    mv__saga_step_clear(&step);
    return rc;
}

mv_code mv_saga_resolve(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                        const mv_saga_resolution *res, json_t **record, mv_err *err) {
    mv_code rc;
    if (record) *record = NULL;
    if (def && (rc = mv_saga_definition_check(def, err))) return rc;
    if (!mv_valid_token(saga_id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga id must be a bounded printable token");
    if (!res || !res->kind || !res->outcome ||
        !((strcmp(res->kind, "execution") == 0 && (strcmp(res->outcome, "committed") == 0 ||
                                                   strcmp(res->outcome, "not-committed") == 0)) ||
          (strcmp(res->kind, "compensation") == 0 &&
           (strcmp(res->outcome, "compensated") == 0 ||
            strcmp(res->outcome, "not-compensated") == 0))))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga resolution kind or outcome is invalid");
    if (!mv_valid_token(res->step, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga resolution step must be a bounded printable token");
    if (!mv_valid_token(res->effect_id, 64))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga resolution effect id must be a bounded printable token");
    mv__saga_record *rec = NULL;
    if (!(rc = mv__saga_load(e, saga_id, &rec, err)) &&
        !(rc = mv__saga_check_definition(def, rec, err)))
        rc = resolve_loaded(e, def, &rec, res, err);
    mv__saga_record_free(rec);
    return mv__saga_finish(e, saga_id, record, rc);
}

typedef struct {
    const char *id;
    char *out;
    bool found;
} tenant_tx;

static mv_code tenant_fn(mv_db *db, void *ctx, mv_err *err) {
    tenant_tx *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, mv__sql_saga_tenant, &st, err, "s", t->id);
    if (st) {
        t->found = true;
        mv_strlcpy(t->out, mv_stmt_text(st, 0), 256);
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_saga_tenant(mv_saga_engine *e, const char *saga_id, char out[256], mv_err *err) {
    out[0] = '\0';
    if (!mv_valid_token(saga_id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga id must be a bounded printable token");
    tenant_tx t = {saga_id, out, false};
    mv_code rc = mv_store_read(e->store, tenant_fn, &t, err);
    if (rc == MV_OK && !t.found)
        rc = mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s: not found", saga_id);
    return rc;
}

mv_code mv_saga_get(mv_saga_engine *e, const char *saga_id, json_t **record, mv_err *err) {
    *record = NULL;
    if (!mv_valid_token(saga_id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga id must be a bounded printable token");
    mv__saga_record *rec;
    mv_code rc = mv__saga_load(e, saga_id, &rec, err);
    if (rc) return rc;
    *record = mv__saga_public_json(rec);
    mv__saga_record_free(rec);
    return *record ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}
