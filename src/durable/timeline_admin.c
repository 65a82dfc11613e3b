/* timeline_admin.c — one saga's timeline for operators (GET /admin/sagas/{id}/timeline): the
 * saga row, its step rows and the journal effect of each step and compensation, as entries sorted
 * by time (base/timeline.h). Read in one read transaction, so the entries are one consistent
 * picture; nothing is decrypted (inputs, results and compensation arguments are not shown). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timeline.h"
#include "missive/operations.h"
#include "store/db.h"

#define TIMELINE_STEPS 200 /* the most steps one timeline shows */

static const char SQL_SAGA[] =
    "SELECT definition, state, created_at, updated_at FROM sagas WHERE saga_id = ? "
    "AND tenant_id = ?";
static const char SQL_STEPS[] =
    "SELECT idx, name, state, effect_id, compensation_effect_id, attempts, error_code, "
    "created_at, updated_at FROM saga_steps WHERE saga_id = ? ORDER BY idx LIMIT ?";
static const char SQL_EFFECT[] =
    "SELECT state, error_code, updated_at FROM effects WHERE effect_id = ?";

typedef struct {
    const char *tenant, *id;
    json_t *head, *entries;
    bool found;
} saga_tx;

/* The step's attempts as a number on the entry just added. */
static void set_attempt(json_t *entries, int64_t attempts) {
    json_t *last = json_array_get(entries, json_array_size(entries) - 1);
    if (last) json_object_set_new(last, "attempt", json_integer((json_int_t)attempts));
}

static mv_code effect_entry(mv_db *db, json_t *entries, const char *effect_id, const char *event,
                            const char *step, int64_t attempts, mv_err *err) {
    if (!effect_id || !*effect_id) return MV_OK;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_EFFECT, &st, err, "s", effect_id);
    if (rc || !st) return rc;
    mv__timeline_add(entries, mv_stmt_int64(st, 2), event, NULL, NULL, step, mv_stmt_text(st, 0),
                     mv_stmt_text(st, 1));
    set_attempt(entries, attempts);
    mv_stmt_done(st);
    return MV_OK;
}

typedef struct {
    char name[129], effect[65], compensation[65], state[33], error[65];
    int64_t attempts, created, updated;
} step_row;

static mv_code saga_fn(mv_db *db, void *ctx, mv_err *err) {
    saga_tx *t = ctx;
    json_array_clear(t->entries);
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_SAGA, &st, err, "ss", t->id, t->tenant);
    if (rc) return rc;
    if (!st) return MV_OK;
    t->found = true;
    char state[33];
    snprintf(state, sizeof state, "%s", mv_stmt_text(st, 1) ? mv_stmt_text(st, 1) : "");
    json_decref(t->head);
    t->head = json_pack("{s:s,s:s,s:s}", "sagaId", t->id, "definition", mv_stmt_text(st, 0),
                        "state", state);
    mv__timeline_add(t->entries, mv_stmt_int64(st, 2), "sagaStarted", NULL, NULL, NULL, NULL, NULL);
    /* the end, added after the steps: at an equal time it comes last */
    bool finished = strcmp(state, "running") != 0 && strcmp(state, "compensating") != 0;
    int64_t updated = mv_stmt_int64(st, 3);
    mv_stmt_done(st);
    /* the steps first (a statement open while another runs is not portable), then their effects */
    step_row *rows = calloc(TIMELINE_STEPS, sizeof *rows);
    int n = 0, r;
    if (!rows) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if ((rc = mv_db_prepare(db, SQL_STEPS, &st, err))) {
        free(rows);
        return rc;
    }
    mv_stmt_bindf(st, "si", t->id, (int64_t)TIMELINE_STEPS);
    while ((r = mv_stmt_step(st, err)) == 1 && n < TIMELINE_STEPS) {
        step_row *s = &rows[n++];
        const char *v;
        snprintf(s->name, sizeof s->name, "%s", (v = mv_stmt_text(st, 1)) ? v : "");
        snprintf(s->state, sizeof s->state, "%s", (v = mv_stmt_text(st, 2)) ? v : "");
        snprintf(s->effect, sizeof s->effect, "%s", (v = mv_stmt_text(st, 3)) ? v : "");
        snprintf(s->compensation, sizeof s->compensation, "%s", (v = mv_stmt_text(st, 4)) ? v : "");
        s->attempts = mv_stmt_is_null(st, 5) ? 0 : mv_stmt_int64(st, 5);
        snprintf(s->error, sizeof s->error, "%s", (v = mv_stmt_text(st, 6)) ? v : "");
        s->created = mv_stmt_int64(st, 7);
        s->updated = mv_stmt_int64(st, 8);
    }
    mv_stmt_done(st);
    if (r < 0) {
        free(rows);
        return err ? err->code : MV_INTERNAL;
    }
    for (int i = 0; i < n; i++) {
        step_row *s = &rows[i];
        mv__timeline_add(t->entries, s->created, "stepStarted", NULL, NULL, s->name, NULL, NULL);
        set_attempt(t->entries, s->attempts);
        if ((rc = effect_entry(db, t->entries, s->effect, "effect", s->name, s->attempts, err)) ||
            (rc = effect_entry(db, t->entries, s->compensation, "compensation", s->name,
                               s->attempts, err))) {
            free(rows);
            return rc;
        }
        mv__timeline_add(t->entries, s->updated, "stepFinished", NULL, NULL, s->name,
                         s->state[0] ? s->state : NULL, s->error[0] ? s->error : NULL);
        set_attempt(t->entries, s->attempts);
    }
    free(rows);
    if (finished)
        mv__timeline_add(t->entries, updated, "sagaFinished", NULL, NULL, NULL, state, NULL);
    return MV_OK;
}

mv_code mv_saga_timeline(mv_store *store, const char *tenant_id, const char *saga_id, json_t **out,
                         mv_err *err) {
    *out = NULL;
    if (!tenant_id || !saga_id || !mv_valid_token(saga_id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga id must be 1 to 128 printable characters without spaces");
    saga_tx t = {.tenant = tenant_id, .id = saga_id, .entries = json_array()};
    if (!t.entries) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv_store_read(store, saga_fn, &t, err);
    if (rc == MV_OK && !t.found)
        rc = mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s not found", saga_id);
    json_t *sorted = rc == MV_OK ? mv__timeline_sorted(t.entries) : NULL;
    if (rc == MV_OK && !sorted) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) {
        json_object_set_new(t.head, "entries", sorted);
        *out = t.head;
        t.head = NULL;
    }
    json_decref(t.head);
    json_decref(t.entries);
    return rc;
}
