/* reconcile.c — paged scans of records left in doubt (§4.2): effects that never finished
 * (admission → "incomplete", executing/unknown → "ambiguous") and sagas that are ambiguous, in
 * manual review, or stale.
 *
 * Only non-terminal states are read, one state at a time in (updated_at, id) order over the
 * (state, updated_at, id) index — sagas in (created_at, id) order over (state, created_at, id) —
 * with an opaque keyset cursor (state, that time, id): a page costs the same at any depth and
 * never touches the retained terminal history. (The reference
 * used an offset cursor; keyset is what it recommends for production stores.) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "durable/durable_internal.h"
#include "store/db.h"

#define MAX_LIMIT 1000

/* The states named literally as well: the scan index is partial over them (migration 12). */
const char mv_sql_scan_effects[] =
    "SELECT effect_id, capability, state, updated_at FROM effects "
    "WHERE state = ? AND state IN ('admission', 'executing', 'unknown') AND updated_at <= ? "
    "AND updated_at >= ? AND (updated_at > ? OR effect_id > ?) ORDER BY updated_at, effect_id "
    "LIMIT ?";
/* The fifth column: the first step in doubt of the saga's step rows (migration 10) as
 * "state effectId compensationEffectId name" (tokens hold no spaces), NULL when there is none; the
 * third: a document written before migration 10, "[]" after it. Sagas are read in (created_at, id)
 * order over the (state, created_at, id) index of migration 12 (the sixth column: the cursor's
 * key), since a running saga's saves do not touch an index; updated_at (the fourth) says whether
 * it is stale. */
const char mv_sql_scan_sagas[] =
    "SELECT saga_id, state, steps, updated_at, "
    "(SELECT t.state || ' ' || t.effect_id || ' ' || t.compensation_effect_id || ' ' || t.name "
    "FROM saga_steps t WHERE t.saga_id = sagas.saga_id "
    "AND t.state IN ('executing', 'ambiguous', 'compensating') ORDER BY t.idx LIMIT 1), "
    "created_at FROM sagas "
    "WHERE state = ? AND created_at >= ? AND (created_at > ? OR saga_id > ?) "
    "ORDER BY created_at, saga_id LIMIT ?";

static const char *const effect_states[] = {"admission", "executing", "unknown"};

void mv_reconcile_page_clear(mv_reconcile_page *page) {
    if (!page) return;
    json_decref(page->findings);
    page->findings = NULL;
    page->cursor[0] = '\0';
}

typedef struct {
    int state;
    int64_t at; /* effects: updated_at; sagas: created_at */
    char id[129];
} position;

static mv_code invalid_cursor(mv_err *err) {
    return mv_err_set(err, MV_INVALID_ARGUMENT, "invalid reconciliation cursor");
}

static void encode_cursor(const position *p, char out[256]) {
    char plain[192];
    int n = snprintf(plain, sizeof plain, "%d.%" PRId64 ".%s", p->state, p->at, p->id);
    mv_b64url_encode(plain, (size_t)n, out);
}

static mv_code decode_cursor(const char *cursor, int nstates, position *p, mv_err *err) {
    size_t len = strlen(cursor);
    unsigned char plain[256];
    size_t n = 0;
    if (len == 0 || len > 255 || !mv_b64url_decode(cursor, len, plain, &n))
        return invalid_cursor(err);
    plain[n] = '\0';
    char *s = (char *)plain, *end;
    if (s[0] < '0' || s[0] >= '0' + nstates || s[1] != '.') return invalid_cursor(err);
    p->state = s[0] - '0';
    s += 2;
    if (*s < '0' || *s > '9') return invalid_cursor(err);
    long long t = strtoll(s, &end, 10);
    if (*end != '.' || t < 0 || t > MV_MAX_SAFE_INT) return invalid_cursor(err);
    p->at = t;
    if (!mv_valid_token(end + 1, 128) || strlen(end + 1) != n - (size_t)(end + 1 - (char *)plain))
        return invalid_cursor(err);
    mv_strlcpy(p->id, end + 1, sizeof p->id);
    return MV_OK;
}

typedef struct {
    bool sagas;
    const char *const *states;
    int nstates;
    const mv_reconcile_options *opts;
    int limit;
    position start;
    bool has_start;
    json_t *findings;
    position last;
    bool more;
} scan_tx;

static json_t *effect_finding(mv_stmt *st) {
    const char *id = mv_stmt_text(st, 0), *cap = mv_stmt_text(st, 1), *state = mv_stmt_text(st, 2);
    if (!id || !cap || !state || !mv_valid_capability(cap) || !mv_valid_token(id, 64)) return NULL;
    const char *finding = strcmp(state, "admission") == 0 ? "incomplete" : "ambiguous";
    return json_pack("{s:s, s:s, s:s, s:I}", "effectId", id, "capability", cap, "state", finding,
                     "updatedAt", (json_int_t)mv_stmt_int64(st, 3));
}

static json_t *saga_finding(mv_stmt *st, int64_t stale_before) {
    const char *id = mv_stmt_text(st, 0), *state = mv_stmt_text(st, 1),
               *steps_text = mv_stmt_text(st, 2);
    if (!id || !state || !steps_text) return NULL;
    json_t *steps = NULL, *out = NULL;
    if (mv_json_parse(steps_text, strlen(steps_text), &steps, NULL) != MV_OK) return NULL;
    size_t i;
    json_t *s;
    json_array_foreach(steps, i, s) {
        int ss = mv_saga_step_state_parse(mv_json_str(s, "state"));
        bool comp = ss == MV_STEP_COMPENSATING;
        if (comp || ss == MV_STEP_EXECUTING || ss == MV_STEP_AMBIGUOUS) {
            out = json_pack("{s:s, s:s, s:s?, s:s?, s:s}", "sagaId", id, "state", state, "step",
                            mv_json_str(s, "name"), "effectId",
                            mv_json_str(s, comp ? "compensationEffectId" : "effectId"), "reason",
                            comp ? "ambiguous-compensation" : "ambiguous-execution");
            break;
        }
    }
    json_decref(steps);
    if (out) return out;
    const char *row = mv_stmt_text(st, 4);
    char ss[32], eid[65], cid[65], name[129];
    if (row && sscanf(row, "%31s %64s %64s %128s", ss, eid, cid, name) == 4) {
        bool comp = mv_saga_step_state_parse(ss) == MV_STEP_COMPENSATING;
        return json_pack("{s:s, s:s, s:s, s:s, s:s}", "sagaId", id, "state", state, "step", name,
                         "effectId", comp ? cid : eid, "reason",
                         comp ? "ambiguous-compensation" : "ambiguous-execution");
    }
    if (mv_saga_state_parse(state) == MV_SAGA_MANUAL_REVIEW)
        return json_pack("{s:s, s:s, s:s}", "sagaId", id, "state", state, "reason",
                         mv_saga_state_name(MV_SAGA_MANUAL_REVIEW));
    if (mv_stmt_int64(st, 3) <= stale_before)
        return json_pack("{s:s, s:s, s:s}", "sagaId", id, "state", state, "reason",
                         "stale-running");
    return NULL;
}

static mv_code scan_fn(mv_db *db, void *ctx, mv_err *err) {
    scan_tx *t = ctx;
    int collected = 0;
    for (int si = t->has_start ? t->start.state : 0; si < t->nstates && !t->more; si++) {
        bool resume = t->has_start && si == t->start.state;
        int64_t after_at = resume ? t->start.at : -1;
        const char *after_id = resume ? t->start.id : "";
        mv_stmt *st;
        mv_code rc =
            mv_db_prepare(db, t->sagas ? mv_sql_scan_sagas : mv_sql_scan_effects, &st, err);
        if (rc) return rc;
        int64_t want = t->limit - collected + 1;
        if (t->sagas)
            mv_stmt_bindf(st, "siisi", t->states[si], after_at, after_at, after_id, want);
        else
            mv_stmt_bindf(st, "siiisi", t->states[si], t->opts->stale_before, after_at, after_at,
                          after_id, want);
        int r;
        while ((r = mv_stmt_step(st, err)) == 1) {
            if (collected == t->limit) {
                t->more = true;
                break;
            }
            json_t *f = t->sagas ? saga_finding(st, t->opts->stale_before) : effect_finding(st);
            if (f) json_array_append_new(t->findings, f);
            collected++;
            t->last.state = si;
            t->last.at = mv_stmt_int64(st, t->sagas ? 5 : 3);
            mv_strlcpy(t->last.id, mv_stmt_text(st, 0) ? mv_stmt_text(st, 0) : "",
                       sizeof t->last.id);
        }
        mv_stmt_done(st);
        if (r < 0) return err ? err->code : MV_INTERNAL;
    }
    return MV_OK;
}

static mv_code scan(mv_store *store, bool sagas, const mv_reconcile_options *opts,
                    mv_reconcile_page *out, mv_err *err) {
    out->findings = NULL;
    out->cursor[0] = '\0';
    int limit = opts->limit ? opts->limit : MV_DEFAULT_RECONCILE_LIMIT;
    /* the saga states a scan reads: the non-terminal ones */
    const char *saga_states[] = {mv_saga_state_name(MV_SAGA_RUNNING),
                                 mv_saga_state_name(MV_SAGA_COMPENSATING),
                                 mv_saga_state_name(MV_SAGA_MANUAL_REVIEW)};
    if (limit < 1 || limit > MAX_LIMIT)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "reconciliation limit must be between 1 and 1000");
    scan_tx t = {.sagas = sagas,
                 .states = sagas ? saga_states : effect_states,
                 .nstates = 3,
                 .opts = opts,
                 .limit = limit};
    mv_code rc;
    if (opts->cursor) {
        if ((rc = decode_cursor(opts->cursor, t.nstates, &t.start, err))) return rc;
        t.has_start = true;
    }
    t.findings = json_array();
    if (!t.findings) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if ((rc = mv_store_read(store, scan_fn, &t, err))) {
        json_decref(t.findings);
        return rc;
    }
    out->findings = t.findings;
    if (t.more) encode_cursor(&t.last, out->cursor);
    return MV_OK;
}

mv_code mv_reconcile_effects_page(mv_store *store, const mv_reconcile_options *opts,
                                  mv_reconcile_page *out, mv_err *err) {
    mv_code rc = scan(store, false, opts, out, err);
    if (rc || !opts->observer.fn) return rc;
    /* events after the transaction: an observer is an external call */
    int64_t at = mv_clock_now(opts->clock);
    size_t i;
    json_t *f;
    json_array_foreach(out->findings, i, f) {
        bool amb = strcmp(mv_json_str(f, "state"), "ambiguous") == 0;
        mv_effect_event ev = {.effect_id = mv_json_str(f, "effectId"),
                              .capability = mv_json_str(f, "capability"),
                              .stage = MV_STAGE_RECONCILIATION,
                              .phase = amb ? MV_PHASE_AMBIGUOUS : MV_PHASE_FAILED,
                              .at = at,
                              .duration_ms = -1,
                              .error_code = amb ? "effect_ambiguous" : "effect_incomplete"};
        mv_effect_emit(&opts->observer, 1, &ev);
    }
    return MV_OK;
}

mv_code mv_reconcile_sagas_page(mv_store *store, const mv_reconcile_options *opts,
                                mv_reconcile_page *out, mv_err *err) {
    return scan(store, true, opts, out, err);
}

mv_code mv_reconcile_effects(mv_store *store, int64_t stale_before, mv_effect_observer observer,
                             json_t **findings, mv_err *err) {
    *findings = NULL;
    mv_reconcile_options o = {
        .stale_before = stale_before, .limit = MAX_LIMIT, .observer = observer};
    mv_reconcile_page page;
    mv_code rc = mv_reconcile_effects_page(store, &o, &page, err);
    if (rc) return rc;
    if (page.cursor[0]) {
        mv_reconcile_page_clear(&page);
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "effect reconciliation exceeds 1000 records; use "
                          "mv_reconcile_effects_page()");
    }
    *findings = page.findings;
    return MV_OK;
}

mv_code mv_reconcile_sagas(mv_store *store, int64_t stale_before, json_t **findings, mv_err *err) {
    *findings = NULL;
    mv_reconcile_options o = {.stale_before = stale_before, .limit = MAX_LIMIT};
    mv_reconcile_page page;
    mv_code rc = mv_reconcile_sagas_page(store, &o, &page, err);
    if (rc) return rc;
    if (page.cursor[0]) {
        mv_reconcile_page_clear(&page);
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga reconciliation exceeds 1000 records; use "
                          "mv_reconcile_sagas_page()");
    }
    *findings = page.findings;
    return MV_OK;
}
