/* approval.c — human approvals resumed by signed single-use tokens (§4.3).
 *
 * A token is `v1.<b64url claims {v,id,nonce,exp}>.<b64url HMAC-SHA256(secret, claims segment)>`;
 * only its SHA-256 is stored, so a database leak yields no usable token. Resuming verifies the
 * signature and expiry, then classifies the stored approval in the reference's order (binding,
 * token hash, replay, expiry, pending, denied) with constant-time comparisons, and consumes it
 * with one conditional UPDATE on (state = approved, version): of two concurrent resumes exactly
 * one wins, the other sees a replay. */
#include <stdlib.h>
#include <string.h>

#include "durable/approval_async.h"
#include "durable/durable_internal.h"
#include "store/db.h"
#include "store/write_async.h"

#define MAX_TOKEN_LEN 2048

struct mv_approvals {
    mv_store *store;
    unsigned char secret[256];
    size_t secret_len;
    int64_t ttl_ms;
    const mv_clock *clock;
    bool allow_self_approval;
};

static const char SQL_INSERT_APPROVAL[] =
    "INSERT INTO approvals (approval_id, effect_id, capability, target, digest, tenant_id, "
    "principal_id, token_hash, state, decided_by, created_at, updated_at, expires_at, version) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', NULL, ?, ?, ?, 1) ON CONFLICT DO NOTHING";
static const char SQL_GET_APPROVAL[] =
    "SELECT approval_id, effect_id, capability, target, digest, tenant_id, principal_id, "
    "token_hash, state, decided_by, created_at, updated_at, expires_at, version FROM approvals "
    "WHERE approval_id = ?";
static const char SQL_CONSUME_APPROVAL[] =
    "UPDATE approvals SET state = 'consumed', updated_at = ?, version = version + 1 "
    "WHERE approval_id = ? AND state = 'approved' AND version = ? AND expires_at > ?";
static const char SQL_EXPIRE_APPROVAL[] =
    "UPDATE approvals SET state = 'expired', updated_at = ?, version = version + 1 "
    "WHERE approval_id = ? AND version = ? AND state <> 'expired' AND state <> 'consumed'";
static const char SQL_DECIDE_APPROVAL[] =
    "UPDATE approvals SET state = ?, decided_by = ?, updated_at = ?, version = version + 1 "
    "WHERE approval_id = ? AND tenant_id = ? AND state = 'pending' AND expires_at > ?";
static const char SQL_APPROVAL_PRINCIPAL[] =
    "SELECT principal_id FROM approvals WHERE approval_id = ? AND tenant_id = ?";

mv_code mv_approvals_new(mv_store *store, const mv_approvals_options *opts, mv_approvals **out,
                         mv_err *err) {
    *out = NULL;
    if (!store || !opts) return mv_err_set(err, MV_INVALID_ARGUMENT, "approvals need a store");
    if (mv_store_is_memory(store) && !opts->allow_memory)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval coordinator requires a durable store");
    if (!opts->secret || opts->secret_len < 32)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval secret must contain at least 32 random bytes");
    if (opts->secret_len > sizeof((mv_approvals *)0)->secret)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "approval secret must be at most 256 bytes");
    if (opts->ttl_ms < 0 || opts->ttl_ms > MV_MAX_SAFE_INT)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval ttlMs must be a positive safe integer");
    mv_approvals *a = calloc(1, sizeof *a);
    if (!a) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    a->store = store;
    memcpy(a->secret, opts->secret, opts->secret_len);
    a->secret_len = opts->secret_len;
    a->ttl_ms = opts->ttl_ms ? opts->ttl_ms : MV_DEFAULT_APPROVAL_TTL_MS;
    a->clock = opts->clock;
    a->allow_self_approval = opts->allow_self_approval;
    *out = a;
    return MV_OK;
}

void mv_approvals_free(mv_approvals *approvals) {
    if (!approvals) return;
    memset(approvals->secret, 0, sizeof approvals->secret);
    free(approvals);
}

/* ---- messages ------------------------------------------------------------------------------ */

static mv_code token_invalid(mv_err *err) {
    return mv_err_set(err, MV_APPROVAL_TOKEN_INVALID, "approval resume token is invalid");
}
static mv_code token_expired(mv_err *err) {
    return mv_err_set(err, MV_APPROVAL_TOKEN_EXPIRED, "approval resume token has expired");
}

/* What the stored approval says about one resume, in the order of §4.3. */
typedef enum {
    OUTCOME_CONSUMED,
    OUTCOME_MISSING,
    OUTCOME_BINDING,
    OUTCOME_TOKEN,
    OUTCOME_REPLAY,
    OUTCOME_EXPIRED,
    OUTCOME_PENDING,
    OUTCOME_DENIED,
} outcome;

static mv_code outcome_error(outcome o, mv_err *err) {
    switch (o) {
    case OUTCOME_CONSUMED: return MV_OK;
    case OUTCOME_REPLAY:
        return mv_err_set(err, MV_APPROVAL_TOKEN_REPLAY,
                          "approval resume token has already been consumed");
    case OUTCOME_BINDING:
        return mv_err_set(err, MV_APPROVAL_BINDING,
                          "approval resume token is bound to another tenant or principal");
    case OUTCOME_EXPIRED: return token_expired(err);
    case OUTCOME_PENDING:
        return mv_err_set(err, MV_APPROVAL_PENDING, "capability approval is still pending");
    case OUTCOME_DENIED:
        return mv_err_set(err, MV_APPROVAL_DENIED, "capability approval was denied");
    default: return token_invalid(err);
    }
}

/* ---- request validation --------------------------------------------------------------------- */

static mv_code check_request(const mv_approval_request *r, mv_err *err) {
    if (!r) return mv_err_set(err, MV_INVALID_ARGUMENT, "approval request is missing");
    if (mv_abort_is_set(r->abort)) return mv_err_set(err, MV_ABORTED, "%s", r->abort->reason);
    if (!r->tenant_id || !mv_valid_token(r->tenant_id, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval tenantId must be a bounded printable token");
    if (!r->principal_id || !mv_valid_token(r->principal_id, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval principalId must be a bounded printable token");
    if (!r->capability || !mv_valid_capability(r->capability) || strlen(r->capability) > 128)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "approval capability is invalid");
    if (r->target && !mv_valid_token(r->target, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval target must be a bounded printable token");
    if (r->digest && !mv_valid_digest(r->digest))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "approval digest is invalid");
    if (r->ttl_ms < 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval ttlMs must be a positive safe integer");
    return MV_OK;
}

/* ---- tokens ----------------------------------------------------------------------------- */

static void token_hash(const char *token, char out[44]) {
    unsigned char h[32];
    mv_sha256(token, strlen(token), h);
    mv_b64url_encode(h, 32, out);
}

static void sign(const mv_approvals *a, const char *payload, size_t len, char out[44]) {
    unsigned char mac[32];
    mv_hmac_sha256(a->secret, a->secret_len, payload, len, mac);
    mv_b64url_encode(mac, 32, out);
}

typedef struct {
    char id[129];
    int64_t exp;
} claims;

/* Signature, shape, then expiry — any failure but expiry is "invalid", telling a forger nothing. */
static mv_code verify(const mv_approvals *a, const char *token, int64_t now, claims *out,
                      mv_err *err) {
    size_t len = strlen(token);
    if (len > MAX_TOKEN_LEN || strncmp(token, "v1.", 3) != 0) return token_invalid(err);
    const char *payload = token + 3;
    const char *dot = strchr(payload, '.');
    if (!dot || strchr(dot + 1, '.')) return token_invalid(err);
    size_t plen = (size_t)(dot - payload);
    const char *sig = dot + 1;
    size_t slen = strlen(sig);
    unsigned char sig_bytes[MAX_TOKEN_LEN], mac[32];
    size_t sig_len = 0;
    if (slen == 0 || !mv_b64url_decode(sig, slen, sig_bytes, &sig_len)) return token_invalid(err);
    mv_hmac_sha256(a->secret, a->secret_len, payload, plen, mac);
    if (!mv_ct_equal(sig_bytes, sig_len, mac, 32)) return token_invalid(err);
    unsigned char json_bytes[MAX_TOKEN_LEN];
    size_t json_len = 0;
    if (plen == 0 || !mv_b64url_decode(payload, plen, json_bytes, &json_len))
        return token_invalid(err);
    json_t *c = NULL;
    if (mv_json_parse((const char *)json_bytes, json_len, &c, NULL) != MV_OK)
        return token_invalid(err);
    json_t *v = json_object_get(c, "v"), *id = json_object_get(c, "id"),
           *nonce = json_object_get(c, "nonce"), *exp = json_object_get(c, "exp");
    mv_code rc = MV_OK;
    if (!json_is_object(c) || !json_is_integer(v) || json_integer_value(v) != 1 ||
        !json_is_string(id) || !json_is_string(nonce) || !json_is_integer(exp) ||
        json_integer_value(exp) > MV_MAX_SAFE_INT || json_integer_value(exp) < -MV_MAX_SAFE_INT) {
        rc = token_invalid(err);
    } else if (!mv_valid_token(json_string_value(id), 128)) {
        rc = mv_err_set(err, MV_INVALID_ARGUMENT, "approval id must be a bounded printable token");
    } else if (!mv_valid_token(json_string_value(nonce), 128)) {
        rc = mv_err_set(err, MV_INVALID_ARGUMENT,
                        "approval nonce must be a bounded printable token");
    } else if (json_integer_value(exp) <= now) {
        rc = token_expired(err);
    } else {
        mv_strlcpy(out->id, json_string_value(id), sizeof out->id);
        out->exp = json_integer_value(exp);
    }
    json_decref(c);
    return rc;
}

/* ---- create ------------------------------------------------------------------------------ */

typedef struct {
    const mv_approval_request *r;
    const char *approval_id, *hash;
    int64_t now, expires_at;
} create_tx;

static mv_code create_fn(mv_db *db, void *ctx, mv_err *err) {
    create_tx *t = ctx;
    int64_t changes = 0;
    mv_code rc =
        mv_db_execf(db, SQL_INSERT_APPROVAL, &changes, err, "ssssssssiii", t->approval_id,
                    t->r->effect_id, t->r->capability, t->r->target, t->r->digest, t->r->tenant_id,
                    t->r->principal_id, t->hash, t->now, t->now, t->expires_at);
    if (rc) return rc;
    if (changes != 1)
        return mv_err_set(err, MV_INTERNAL, "approval store rejected a unique approval id");
    return MV_OK;
}

static mv_code create_pending(mv_approvals *a, const mv_approval_request *r, mv_err *err) {
    mv_code rc;
    if (!r->effect_id || !mv_valid_token(r->effect_id, 64))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval effect id must be a bounded printable token");
    char approval_id[37], nonce_s[25], hash[44];
    unsigned char nonce[18];
    if ((rc = mv_id_uuid(approval_id, err)) || (rc = mv_random_bytes(nonce, sizeof nonce, err)))
        return rc;
    mv_b64url_encode(nonce, sizeof nonce, nonce_s);
    create_tx t = {.r = r, .approval_id = approval_id, .hash = hash};
    if ((rc = mv_durable_now(a->clock, "approval clock", &t.now, err))) return rc;
    if ((rc = mv_durable_add(t.now, r->ttl_ms ? r->ttl_ms : a->ttl_ms, "approval expiry",
                             &t.expires_at, err)))
        return rc;
    char claims_json[256];
    int n = snprintf(claims_json, sizeof claims_json,
                     "{\"v\":1,\"id\":\"%s\",\"nonce\":\"%s\",\"exp\":%lld}", approval_id, nonce_s,
                     (long long)t.expires_at);
    char token[512];
    char payload[352], sig[44]; /* b64url of up to 256 bytes */
    mv_b64url_encode(claims_json, (size_t)n, payload);
    sign(a, payload, strlen(payload), sig);
    snprintf(token, sizeof token, "v1.%s.%s", payload, sig);
    token_hash(token, hash);
    if ((rc = mv_store_write(a->store, create_fn, &t, err))) return rc;
    mv_err_set(err, MV_APPROVAL_REQUIRED, "capability approval is required");
    if (err) {
        mv_strlcpy(err->approval_id, approval_id, sizeof err->approval_id);
        mv_strlcpy(err->resume_token, token, sizeof err->resume_token);
        err->expires_at = t.expires_at;
    }
    return MV_APPROVAL_REQUIRED;
}

/* ---- consume ------------------------------------------------------------------------------ */

/* Equality of two optional strings whose time depends only on their lengths. */
static bool same(const char *stored, const char *given) {
    if (!stored || !given) return stored == given;
    return mv_ct_equal(stored, strlen(stored), given, strlen(given));
}

typedef struct {
    const mv_approval_request *r;
    const char *approval_id, *hash;
    int64_t now;
    outcome result;
} consume_tx;

/* One classification pass; *retry when the consuming UPDATE lost to a concurrent change. */
static mv_code classify(mv_db *db, consume_tx *t, bool *retry, mv_err *err) {
    *retry = false;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GET_APPROVAL, &st, err, "s", t->approval_id);
    if (rc) return rc;
    if (!st) {
        t->result = OUTCOME_MISSING;
        return MV_OK;
    }
    /* All binding fields are compared, whatever the first mismatch, to keep the time flat. */
    bool bound = same(mv_stmt_text(st, 5), t->r->tenant_id);
    bound &= same(mv_stmt_text(st, 6), t->r->principal_id);
    bound &= same(mv_stmt_text(st, 2), t->r->capability);
    bound &= same(mv_stmt_text(st, 3), t->r->target);
    bound &= same(mv_stmt_text(st, 4), t->r->digest);
    bool token_ok = same(mv_stmt_text(st, 7), t->hash);
    char state[16];
    mv_strlcpy(state, mv_stmt_text(st, 8) ? mv_stmt_text(st, 8) : "", sizeof state);
    int64_t expires_at = mv_stmt_int64(st, 12), version = mv_stmt_int64(st, 13);
    mv_stmt_done(st);

    int64_t changes = 0;
    if (!bound)
        t->result = OUTCOME_BINDING;
    else if (!token_ok)
        t->result = OUTCOME_TOKEN;
    else if (strcmp(state, "consumed") == 0)
        t->result = OUTCOME_REPLAY;
    else if (expires_at <= t->now || strcmp(state, "expired") == 0) {
        if (strcmp(state, "expired") != 0 &&
            (rc = mv_db_execf(db, SQL_EXPIRE_APPROVAL, NULL, err, "isi", t->now, t->approval_id,
                              version)))
            return rc;
        t->result = OUTCOME_EXPIRED;
    } else if (strcmp(state, "pending") == 0)
        t->result = OUTCOME_PENDING;
    else if (strcmp(state, "denied") == 0)
        t->result = OUTCOME_DENIED;
    else if (strcmp(state, "approved") != 0)
        t->result = OUTCOME_TOKEN;
    else {
        if ((rc = mv_db_execf(db, SQL_CONSUME_APPROVAL, &changes, err, "isii", t->now,
                              t->approval_id, version, t->now)))
            return rc;
        t->result = OUTCOME_CONSUMED;
        if (changes != 1) *retry = true;
    }
    return MV_OK;
}

static mv_code consume_fn(mv_db *db, void *ctx, mv_err *err) {
    consume_tx *t = ctx;
    bool retry = false;
    mv_code rc = classify(db, t, &retry, err);
    if (rc == MV_OK && retry) rc = classify(db, t, &retry, err); /* see what the winner did */
    if (rc == MV_OK && retry) t->result = OUTCOME_REPLAY;
    return rc;
}

/* Verifies the token and prepares the consume; fills t. */
static mv_code prepare_consume(mv_approvals *a, const mv_approval_request *r, consume_tx *t,
                               claims *c, char hash[44], mv_err *err) {
    mv_code rc;
    if ((rc = check_request(r, err))) return rc;
    if (!r->resume_token) return token_invalid(err);
    int64_t now;
    if ((rc = mv_durable_now(a->clock, "approval clock", &now, err))) return rc;
    if ((rc = verify(a, r->resume_token, now, c, err))) return rc;
    token_hash(r->resume_token, hash);
    *t = (consume_tx){.r = r, .approval_id = c->id, .hash = hash, .now = now};
    return MV_OK;
}

mv_code mv_approval_consume_tx(mv_approvals *a, mv_db *db, const mv_approval_request *r,
                               mv_err *err) {
    consume_tx t;
    claims c;
    char hash[44];
    mv_code rc = prepare_consume(a, r, &t, &c, hash, err);
    if (rc) return rc;
    if ((rc = consume_fn(db, &t, err))) return rc;
    return outcome_error(t.result, err);
}

mv_code mv_approval_authorize(mv_approvals *a, const mv_approval_request *r, mv_err *err) {
    mv_code rc;
    if (r && !r->resume_token) {
        if ((rc = check_request(r, err))) return rc;
        return create_pending(a, r, err);
    }
    consume_tx t;
    claims c;
    char hash[44];
    if ((rc = prepare_consume(a, r, &t, &c, hash, err))) return rc;
    /* The transaction commits whatever the outcome, so an `expired` marker is kept. */
    if ((rc = mv_store_write(a->store, consume_fn, &t, err))) return rc;
    return outcome_error(t.result, err);
}

mv_code mv_approval_gate_admit(const mv_effect_context *c, void *gate, mv_err *err) {
    mv_approval_gate *g = gate;
    mv_approval_request r = {.effect_id = c->effect_id,
                             .capability = c->capability,
                             .target = c->target,
                             .digest = c->digest,
                             .tenant_id = c->tenant_id,
                             .principal_id = c->principal_id,
                             .resume_token = g->resume_token,
                             .ttl_ms = g->ttl_ms,
                             .abort = c->abort};
    return mv_approval_authorize(g->approvals, &r, err);
}

/* ---- decide and read ---------------------------------------------------------------------- */

typedef struct {
    const char *id, *tenant, *decision, *by;
    int64_t now;
    bool allow_self;
} decide_tx;

static mv_code decide_fn(mv_db *db, void *ctx, mv_err *err) {
    decide_tx *t = ctx;
    int64_t changes = 0;
    mv_code rc;
    if (!t->allow_self) { /* the principal never changes: reading it first cannot race */
        mv_stmt *st;
        if ((rc = mv_db_row(db, SQL_APPROVAL_PRINCIPAL, &st, err, "ss", t->id, t->tenant)))
            return rc;
        bool self = st && mv_stmt_text(st, 0) && strcmp(mv_stmt_text(st, 0), t->by) == 0;
        mv_stmt_done(st);
        if (self)
            return mv_err_set(err, MV_APPROVAL_BINDING,
                              "an approval cannot be decided by the principal who requested it");
    }
    rc = mv_db_execf(db, SQL_DECIDE_APPROVAL, &changes, err, "ssissi", t->decision, t->by, t->now,
                     t->id, t->tenant, t->now);
    if (rc) return rc;
    if (changes != 1)
        return mv_err_set(err, MV_APPROVAL_DECISION_REJECTED, "approval decision rejected");
    return MV_OK;
}

static mv_code check_approval_id(const char *id, mv_err *err) {
    if (!id || !mv_valid_token(id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval id must be a bounded printable token");
    return MV_OK;
}

/* The decision's checks (mv_approval_decide and mv__approval_decide_begin): *t filled. */
static mv_code decide_check(mv_approvals *a, const char *approval_id, const char *tenant_id,
                            const char *decision, const char *decided_by, decide_tx *t,
                            mv_err *err) {
    mv_code rc;
    if ((rc = check_approval_id(approval_id, err))) return rc;
    if (!tenant_id || !mv_valid_token(tenant_id, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval tenantId must be a bounded printable token");
    if (!decided_by || !mv_valid_token(decided_by, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval decidedBy must be a bounded printable token");
    if (!decision || (strcmp(decision, "approved") != 0 && strcmp(decision, "denied") != 0))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "approval decision must be \"approved\" or \"denied\"");
    *t = (decide_tx){.id = approval_id,
                     .tenant = tenant_id,
                     .decision = decision,
                     .by = decided_by,
                     .allow_self = a->allow_self_approval};
    return mv_durable_now(a->clock, "approval clock", &t->now, err);
}

mv_code mv_approval_decide(mv_approvals *a, const char *approval_id, const char *tenant_id,
                           const char *decision, const char *decided_by, mv_err *err) {
    decide_tx t;
    mv_code rc = decide_check(a, approval_id, tenant_id, decision, decided_by, &t, err);
    return rc ? rc : mv_store_write(a->store, decide_fn, &t, err);
}

typedef struct {
    const char *id, *tenant;
    mv_approval_record *out;
} get_tx;

static void col(mv_stmt *st, int i, char *dst, size_t size) {
    const char *s = mv_stmt_text(st, i);
    mv_strlcpy(dst, s ? s : "", size);
}

static mv_code get_fn(mv_db *db, void *ctx, mv_err *err) {
    get_tx *g = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GET_APPROVAL, &st, err, "s", g->id);
    if (rc) return rc;
    bool visible = st && (!g->tenant || same(mv_stmt_text(st, 5), g->tenant));
    if (visible) {
        mv_approval_record *o = g->out;
        memset(o, 0, sizeof *o);
        col(st, 0, o->approval_id, sizeof o->approval_id);
        col(st, 1, o->effect_id, sizeof o->effect_id);
        col(st, 2, o->capability, sizeof o->capability);
        col(st, 3, o->target, sizeof o->target);
        col(st, 4, o->digest, sizeof o->digest);
        col(st, 5, o->tenant_id, sizeof o->tenant_id);
        col(st, 6, o->principal_id, sizeof o->principal_id);
        col(st, 8, o->state, sizeof o->state);
        col(st, 9, o->decided_by, sizeof o->decided_by);
        o->created_at = mv_stmt_int64(st, 10);
        o->updated_at = mv_stmt_int64(st, 11);
        o->expires_at = mv_stmt_int64(st, 12);
        o->version = mv_stmt_int64(st, 13);
    }
    mv_stmt_done(st);
    if (!visible) return mv_err_set(err, MV_APPROVAL_NOT_FOUND, "approval %s not found", g->id);
    return MV_OK;
}

mv_code mv_approval_get(mv_approvals *a, const char *approval_id, const char *tenant_id,
                        mv_approval_record *out, mv_err *err) {
    mv_code rc;
    if ((rc = check_approval_id(approval_id, err))) return rc;
    get_tx g = {.id = approval_id, .tenant = tenant_id, .out = out};
    return mv_store_read(a->store, get_fn, &g, err);
}

/* ---- the decision as one operation (approval_async.h) ------------------------------------ */

typedef struct decide_op {
    decide_tx t;
    get_tx g;
    mv_approval_record rec;
    mv__decide_done done;
    void *done_ctx;
} decide_op;

/* Visible in the tenant, decided, read back: one transaction. */
static mv_code decide_op_fn(mv_db *db, void *ctx, mv_err *err) {
    decide_op *o = ctx;
    mv_code rc = get_fn(db, &o->g, err);
    if (rc == MV_OK) rc = decide_fn(db, &o->t, err);
    return rc == MV_OK ? get_fn(db, &o->g, err) : rc;
}

static void decide_written(mv_code rc, const mv_err *err, void *ctx) {
    decide_op *o = ctx;
    o->done(o->done_ctx, rc, rc == MV_OK ? &o->rec : NULL, err);
    free(o);
}

void mv__approval_decide_begin(mv_approvals *a, const char *approval_id, const char *tenant_id,
                               const char *decision, const char *decided_by, mv__decide_done done,
                               void *done_ctx) {
    mv_err err = {0};
    decide_op *o = calloc(1, sizeof *o);
    mv_code rc = o ? decide_check(a, approval_id, tenant_id, decision, decided_by, &o->t, &err)
                   : mv_err_set(&err, MV_NO_MEMORY, "out of memory");
    if (rc != MV_OK) {
        free(o);
        done(done_ctx, rc, NULL, &err);
        return;
    }
    o->g = (get_tx){.id = approval_id, .tenant = tenant_id, .out = &o->rec};
    o->done = done;
    o->done_ctx = done_ctx;
    mv__store_write_async(a->store, decide_op_fn, o, decide_written, o);
}

json_t *mv_approval_to_json(const mv_approval_record *rec) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:I, s:I}", "approvalId",
                          rec->approval_id, "state", rec->state, "capability", rec->capability,
                          "target", rec->target[0] ? rec->target : NULL, "tenantId", rec->tenant_id,
                          "principalId", rec->principal_id, "createdAt",
                          (json_int_t)rec->created_at, "expiresAt", (json_int_t)rec->expires_at);
    if (o && rec->decided_by[0]) json_object_set_new(o, "decidedBy", json_string(rec->decided_by));
    return o;
}
