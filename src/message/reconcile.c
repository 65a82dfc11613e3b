/* reconcile.c — reconciliation scans over messages and client-request reservations: actions whose
 * attempt was abandoned and creates whose reservation lease ran out (missive/reconcile.h).
 *
 * A scan runs one "phase" (a state with its own threshold) at a time, each a keyset range over
 * an index that starts with the state column, so terminal rows (archived messages, completed
 * reservations) are never read. The cursor is the position after the last row returned —
 * (phase, time, key...) as base64url JSON — so a page costs the same at any depth and rows
 * changing state between pages are simply not seen again. */
#include <stdlib.h>
#include <string.h>

#include "missive/base.h"
#include "missive/reconcile.h"
#include "store/db.h"

#define DEFAULT_LIMIT 100
#define MAX_LIMIT 1000
#define MAX_CURSOR 4096

/* Each scan reads one partial index (migration 11) in its keyset order: the state stays a literal,
 * which is what lets the planner prove the index's predicate (tests/message/index_test.c).
 * Uses messages_processing_by_lease (action_lease_expires_at, id) WHERE processing. */
static const char SQL_EXPIRED_ACTIONS[] =
    "SELECT id, template_cd, action_cd, action_attempt_id, action_lease_expires_at, updated_at "
    "FROM messages WHERE action_state = 'processing' AND action_lease_expires_at < ? "
    "AND (action_lease_expires_at, id) > (?, ?) ORDER BY action_lease_expires_at, id LIMIT ?";
/* Retryable messages are few (each is a failed attempt waiting for its user), ordered by when they
 * last changed. Uses messages_retryable_by_update (updated_at, id) WHERE retryable. */
static const char SQL_STALE_ACTIONS[] =
    "SELECT id, template_cd, action_cd, action_attempt_id, action_lease_expires_at, updated_at "
    "FROM messages WHERE action_state = 'retryable' AND updated_at <= ? "
    "AND (updated_at, id) > (?, ?) ORDER BY updated_at, id LIMIT ?";
/* A reservation's key is (tenant, owner, template, client request id): the keyset order carries
 * all four, or a page boundary between two tenants' reservations of the same owner, template and
 * id with the same lease would skip one. Uses message_requests_pending_by_lease (lease_expires_at,
 * tenant, owner, template, id) WHERE pending (migration 14). */
static const char SQL_EXPIRED_REQUESTS[] =
    "SELECT tenant_id, client_request_owner_id, template_cd, client_request_id, "
    "lease_expires_at, updated_at FROM message_requests WHERE state = 'pending' "
    "AND lease_expires_at < ? AND (lease_expires_at, tenant_id, client_request_owner_id, "
    "template_cd, client_request_id) > (?, ?, ?, ?, ?) ORDER BY lease_expires_at, tenant_id, "
    "client_request_owner_id, template_cd, client_request_id LIMIT ?";
/* The statements, for the plan tests. */
const char *const mv__reconcile_sql[] = {SQL_EXPIRED_ACTIONS, SQL_STALE_ACTIONS,
                                         SQL_EXPIRED_REQUESTS};

void mv_reconcile_results_clear(mv_reconcile_results *r) {
    if (!r) return;
    json_decref(r->findings);
    free(r->next_cursor);
    r->findings = NULL;
    r->next_cursor = NULL;
}

/* ---- cursor ------------------------------------------------------------------------------- */

/* A position: the phase, the ordering time and nkeys key strings of the last row returned. */
typedef struct position {
    int phase;
    int64_t time;
    char *keys[4]; /* malloc'd */
} position;

static void position_clear(position *p) {
    for (int i = 0; i < 4; i++) {
        free(p->keys[i]);
        p->keys[i] = NULL;
    }
}

static mv_code invalid_cursor(mv_err *err) {
    return mv_err_set(err, MV_INVALID_ARGUMENT, "invalid reconciliation cursor");
}

static mv_code decode_cursor(const char *cursor, int nphases, int nkeys, position *p, mv_err *err) {
    size_t len = strlen(cursor), n = 0;
    if (len == 0 || len > MAX_CURSOR) return invalid_cursor(err);
    unsigned char *plain = malloc(len * 3 / 4 + 2);
    if (!plain) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_t *a = NULL;
    bool ok = mv_b64url_decode(cursor, len, plain, &n) &&
              mv_json_parse((const char *)plain, n, &a, NULL) == MV_OK;
    free(plain);
    ok = ok && json_is_array(a) && json_array_size(a) == (size_t)(2 + nkeys) &&
         json_is_integer(json_array_get(a, 0)) && json_is_integer(json_array_get(a, 1));
    if (ok) {
        json_int_t phase = json_integer_value(json_array_get(a, 0));
        p->phase = (int)phase;
        p->time = json_integer_value(json_array_get(a, 1));
        ok = phase >= 0 && phase < nphases && p->time >= 0;
    }
    for (int i = 0; ok && i < nkeys; i++) {
        const char *k = json_string_value(json_array_get(a, (size_t)(2 + i)));
        ok = k && (p->keys[i] = strdup(k)) != NULL;
    }
    json_decref(a);
    if (!ok) {
        position_clear(p);
        return invalid_cursor(err);
    }
    return MV_OK;
}

static char *encode_cursor(const position *p, int nkeys) {
    json_t *a = json_pack("[i, I]", p->phase, (json_int_t)p->time);
    for (int i = 0; a && i < nkeys; i++)
        json_array_append_new(a, json_string(p->keys[i] ? p->keys[i] : ""));
    char *plain = a ? mv_json_compact(a) : NULL;
    json_decref(a);
    if (!plain) return NULL;
    size_t n = strlen(plain);
    char *out = malloc(mv_b64url_len(n) + 1);
    if (out) mv_b64url_encode(plain, n, out);
    free(plain);
    return out;
}

/* ---- the scan ----------------------------------------------------------------------------- */

typedef struct phase {
    const char *sql;
    int64_t threshold;
} phase;

typedef struct scan_tx {
    const phase *phases;
    int nphases, nkeys, limit;
    bool requests;
    position start;
    bool has_start;
    json_t *findings;
    position last;
    bool more;
} scan_tx;

static const char *text_or_empty(mv_stmt *st, int col) {
    const char *s = mv_stmt_text(st, col);
    return s ? s : "";
}

static json_t *action_finding(mv_stmt *st, int phase) {
    json_t *f =
        json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "messageId", text_or_empty(st, 0), "templateCd",
                  text_or_empty(st, 1), "actionState", phase == 0 ? "processing" : "retryable",
                  "actionCd", mv_stmt_text(st, 2), "actionAttemptId", mv_stmt_text(st, 3));
    if (!f) return NULL;
    if (!mv_stmt_is_null(st, 4))
        json_object_set_new(f, "leaseExpiresAt", json_integer(mv_stmt_int64(st, 4)));
    json_object_set_new(f, "updatedAt", json_integer(mv_stmt_int64(st, 5)));
    json_object_set_new(f, "reason", json_string(phase == 0 ? "lease-expired" : "stale-retryable"));
    return f;
}

static json_t *request_finding(mv_stmt *st) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "tenantId", text_or_empty(st, 0),
                     "ownerId", text_or_empty(st, 1), "templateCd", text_or_empty(st, 2),
                     "clientRequestId", text_or_empty(st, 3), "state", "pending", "leaseExpiresAt",
                     (json_int_t)mv_stmt_int64(st, 4), "updatedAt",
                     (json_int_t)mv_stmt_int64(st, 5), "reason", "lease-expired");
}

static mv_code remember(position *p, int phase, mv_stmt *st, bool requests) {
    position_clear(p);
    p->phase = phase;
    int nkeys = requests ? 4 : 1;
    p->time = mv_stmt_int64(st, requests || phase == 0 ? 4 : 5); /* the lease, or updated_at */
    for (int i = 0; i < nkeys; i++)
        if (!(p->keys[i] = strdup(text_or_empty(st, i)))) return MV_NO_MEMORY;
    return MV_OK;
}

static mv_code scan_fn(mv_db *db, void *ctx, mv_err *err) {
    scan_tx *t = ctx;
    int collected = 0;
    for (int pi = t->has_start ? t->start.phase : 0; pi < t->nphases && !t->more; pi++) {
        bool resume = t->has_start && pi == t->start.phase;
        int64_t after = resume ? t->start.time : -1;
        mv_stmt *st;
        mv_code rc = mv_db_prepare(db, t->phases[pi].sql, &st, err);
        if (rc) return rc;
        int64_t want = t->limit - collected + 1;
        if (t->requests)
            mv_stmt_bindf(st, "iissssi", t->phases[pi].threshold, after,
                          resume ? t->start.keys[0] : "", resume ? t->start.keys[1] : "",
                          resume ? t->start.keys[2] : "", resume ? t->start.keys[3] : "", want);
        else
            mv_stmt_bindf(st, "iisi", t->phases[pi].threshold, after,
                          resume ? t->start.keys[0] : "", want);
        int r;
        while ((r = mv_stmt_step(st, err)) == 1) {
            if (collected == t->limit) {
                t->more = true;
                break;
            }
            json_t *f = t->requests ? request_finding(st) : action_finding(st, pi);
            if (!f || json_array_append_new(t->findings, f) != 0 ||
                remember(&t->last, pi, st, t->requests) != MV_OK) {
                mv_stmt_done(st);
                return mv_err_set(err, MV_NO_MEMORY, "out of memory");
            }
            collected++;
        }
        mv_stmt_done(st);
        if (r < 0) return err ? err->code : MV_INTERNAL;
    }
    return MV_OK;
}

static mv_code scan(mv_store *store, const mv_reconcile_scan *s, const phase *phases, int nphases,
                    bool requests, mv_reconcile_results *out, mv_err *err) {
    out->findings = NULL;
    out->next_cursor = NULL;
    int limit = s->limit ? s->limit : DEFAULT_LIMIT;
    if (limit < 1 || limit > MAX_LIMIT)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "reconciliation limit must be between 1 and 1000");
    scan_tx t = {.phases = phases,
                 .nphases = nphases,
                 .nkeys = requests ? 4 : 1,
                 .limit = limit,
                 .requests = requests};
    mv_code rc;
    if (s->cursor) {
        if ((rc = decode_cursor(s->cursor, nphases, t.nkeys, &t.start, err))) return rc;
        t.has_start = true;
    }
    if (!(t.findings = json_array())) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    } else if ((rc = mv_store_read(store, scan_fn, &t, err)) == MV_OK && t.more &&
               !(out->next_cursor = encode_cursor(&t.last, t.nkeys))) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    position_clear(&t.start);
    position_clear(&t.last);
    if (rc) {
        json_decref(t.findings);
        return rc;
    }
    out->findings = t.findings;
    return MV_OK;
}

mv_code mv_reconcile_actions_page(mv_store *store, const mv_reconcile_scan *s,
                                  mv_reconcile_results *out, mv_err *err) {
    const phase phases[] = {{SQL_EXPIRED_ACTIONS, s->now}, {SQL_STALE_ACTIONS, s->stale_before}};
    return scan(store, s, phases, 2, false, out, err);
}

mv_code mv_reconcile_requests_page(mv_store *store, const mv_reconcile_scan *s,
                                   mv_reconcile_results *out, mv_err *err) {
    const phase phases[] = {{SQL_EXPIRED_REQUESTS, s->now}};
    return scan(store, s, phases, 1, true, out, err);
}
