/* saga.c — durable sagas (§4.4): a sequence of steps, each journaled as executing before its
 * external call and committed after it, compensated in reverse order when a later step fails.
 *
 * The saga row holds the saga (state, input, version, runner lease) and each step is a row of
 * saga_steps, inserted when the step starts and updated by one small statement per transition.
 * Every save is one write transaction: a compare-and-set on the saga's version (which also extends
 * the runner lease), the step rows it changes and the step's effect in the journal, so one record
 * moves under one writer at a time and the saga, its steps and the journal never disagree. A
 * runner that finds the version moved under it stops with MV_SAGA_CONCURRENCY and touches
 * nothing: another runner owns the saga now (the reference would compensate; a lost race is not a
 * failure). An outcome the engine cannot know — a step that may or may not have committed, a
 * compensator that keeps failing — puts the saga in manual-review until an operator records the
 * outcome with mv_saga_resolve(). Input, results and compensation arguments can be encrypted at
 * rest.
 *
 * Round trips: the runner keeps the record in memory while it holds the lease and never re-reads
 * it between its own writes. A saga starts with one INSERT that also takes the runner lease; a
 * step's commit is written with the next write of the saga (the next step's start, the saga's end
 * or its compensation) rather than in a transaction of its own; the saga's end also drops the
 * lease. A 3-step saga is 5 write transactions. The price of folding a commit forward: a runner
 * that dies between a step's return and its next write leaves that step executing, which the next
 * runner treats as ambiguous (manual review), as it would a crash during the call itself. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "durable/durable_internal.h"
#include "store/db.h"

#define ENC_PREFIX "enc:v1:"

struct mv_saga_engine {
    mv_store *store;
    const mv_clock *clock;
    mv_effect_observer observer;
    bool has_key;
    unsigned char key[MV_SAGA_KEY_BYTES];
    void (*on_save)(const json_t *record, void *ctx);
    void *on_save_ctx;
    int64_t runner_lease_ms;
};

struct mv_saga_ctx {
    mv_saga_engine *e;
    const mv_saga_definition *def;
    const char *saga_id;
    json_t **rec; /* the runner's current record (internal shape) */
    mv_abort *abort;
};

/* Internal keys of the in-memory record (never in the public JSON): */
#define K_RUNNER "runnerId"       /* the runner lease this process holds, until it drops it */
#define K_PENDING "pendingCommit" /* index of a committed step not yet written */
#define K_STALE "stale"           /* a save failed: the store may differ from memory */
#define K_LEGACY "legacySteps"    /* the steps came from a pre-migration-10 document */
#define K_END "endRun"            /* this save ends the run: it drops the runner lease */

/* A new saga holds its runner lease from the first statement. */
#define INSERT_SAGA                                                                                \
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, "             \
    "max_attempts, created_at, updated_at, version, tenant_id, runner_id, runner_expires_at) "     \
    "VALUES (?, ?, 'running', ?, ?, '[]', ?, ?, ?, 1, ?, ?, ?)"
static const char SQL_INSERT_SAGA[] = INSERT_SAGA " ON CONFLICT DO NOTHING";
/* PostgreSQL: the same INSERT sent blind (BEGIN, INSERT and COMMIT in one flush); a saga id
 * already taken is its unique violation, answered as MV_SAGA_EXISTS by the commit. */
static const char SQL_INSERT_SAGA_BLIND[] = INSERT_SAGA;
static const char SQL_SAGA_TENANT[] = "SELECT tenant_id FROM sagas WHERE saga_id = ?";
static const char SQL_GET_SAGA[] =
    "SELECT saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version FROM sagas WHERE saga_id = ?";
static const char SQL_GET_STEPS[] =
    "SELECT name, state, effect_id, compensation_effect_id, compensation_args, result, attempts, "
    "error_code, next_attempt_at FROM saga_steps WHERE saga_id = ? ORDER BY idx";
/* Every save: the compare-and-set on the version, extending the runner lease (while one is held)
 * or dropping it when the save ends the run (the second and third parameters: the runner whose
 * lease ends, or NULL). */
#define CAS_SAGA                                                                                   \
    "UPDATE sagas SET state = ?, updated_at = ?, version = ?, "                                    \
    "runner_id = CASE WHEN runner_id = ? THEN NULL ELSE runner_id END, "                           \
    "runner_expires_at = CASE WHEN runner_id IS NULL OR runner_id = ? THEN NULL "                  \
    "ELSE CAST(? AS BIGINT) END "                                                                  \
    "WHERE saga_id = ? AND version = ?"
#define STEP_COLUMNS                                                                               \
    "saga_id, idx, name, state, effect_id, compensation_effect_id, compensation_args, result, "    \
    "attempts, error_code, next_attempt_at, created_at, updated_at"
#define UPDATE_STEP                                                                                \
    "UPDATE saga_steps SET state = ?, result = ?, attempts = ?, error_code = ?, "                  \
    "next_attempt_at = ?, updated_at = ? WHERE saga_id = ? AND idx = ?"
static const char SQL_CAS_SAGA[] = CAS_SAGA;
static const char SQL_INSERT_STEP[] =
    "INSERT INTO saga_steps (" STEP_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
static const char SQL_UPDATE_STEP[] = UPDATE_STEP;
/* PostgreSQL: the saves of a running saga as one statement each (data-modifying CTEs, every part
 * conditional on the compare-and-set), so a step transition is BEGIN, one statement, COMMIT.
 * The result row counts what each part changed: s the saga, u the committed step's row, c its
 * effect (executing → committed), i the new step's row, e its effect (inserted executing).
 * c compares the effect's state through an expression (`state || ''`) so that no plan can serve
 * it from effects_state_updated: with the literal 'executing' (rare in the column's statistics)
 * the cached generic plan walked that index's whole 'executing' range — an entry for every
 * effect inserted executing since the table's last vacuum, ≈ 270 pages and 0.8 ms per save after
 * a few thousand sagas — instead of reading the one row through the key. */
#define PG_S "s AS (" CAS_SAGA " RETURNING 1)"
#define PG_U "u AS (" UPDATE_STEP " AND EXISTS (SELECT 1 FROM s) RETURNING 1)"
#define PG_C                                                                                       \
    "c AS (UPDATE effects SET state = 'committed', updated_at = ?, version = version + 1 "         \
    "WHERE effect_id = ? AND state || '' = 'executing' AND EXISTS (SELECT 1 FROM s) RETURNING 1)"
#define PG_I                                                                                       \
    "i AS (INSERT INTO saga_steps (" STEP_COLUMNS ") SELECT CAST(? AS TEXT), CAST(? AS INTEGER), " \
    "CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), "        \
    "CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), " \
    "CAST(? AS BIGINT) FROM s RETURNING 1)"
#define PG_E_INSERT                                                                                \
    "e AS (INSERT INTO effects (effect_id, capability, target, digest, tenant_id, principal_id, "  \
    "state, error_code, created_at, updated_at, version) SELECT CAST(? AS TEXT), CAST(? AS "       \
    "TEXT), CAST(? AS TEXT), NULL, NULL, NULL, 'executing', NULL, CAST(? AS BIGINT), "             \
    "CAST(? AS BIGINT), 2 FROM s"
#define PG_E PG_E_INSERT " ON CONFLICT DO NOTHING RETURNING 1)"
#define PG_COUNT(x) "(SELECT count(*) FROM " x ")"
/* a step's start */
static const char SQL_PG_SAVE_START[] =
    "WITH " PG_S ", " PG_I ", " PG_E
    " SELECT " PG_COUNT("s") ", 1, 1, " PG_COUNT("i") ", " PG_COUNT("e");
/* the previous step's commit and the next step's start */
static const char SQL_PG_SAVE_COMMIT_START[] =
    "WITH " PG_S ", " PG_U ", " PG_C ", " PG_I ", " PG_E " SELECT " PG_COUNT("s") ", " PG_COUNT(
        "u") ", " PG_COUNT("c") ", " PG_COUNT("i") ", " PG_COUNT("e");
/* the last step's commit and the saga's end (or any save that carries a pending commit) */
static const char SQL_PG_SAVE_COMMIT[] =
    "WITH " PG_S ", " PG_U ", " PG_C
    " SELECT " PG_COUNT("s") ", " PG_COUNT("u") ", " PG_COUNT("c") ", 1, 1";
/* The same saves sent blind (mv_stmt_exec_later), so BEGIN, the save and COMMIT go in one flush:
 * instead of a result row, the statement's own INSERT fails when any part did not change exactly
 * its one row — it inserts a step row whose saga_id is NULL, a not-null violation that writes
 * nothing and fails the transaction at its COMMIT (saga_steps: the table with the fewest indexes
 * for the executor to open). The caller then rolls back and runs the save again with
 * SQL_PG_SAVE_*, whose result says which part it was. The new effect is a plain INSERT here: an
 * effect id already taken fails the transaction too (its unique violation), and the precise
 * statement's ON CONFLICT DO NOTHING then reports it — no speculative insertion on the hot path. */
#define PG_GUARD(parts, n)                                                                         \
    " INSERT INTO saga_steps (saga_id, idx, created_at, updated_at) SELECT CAST(NULL AS TEXT), "   \
    "0, 0, 0 WHERE " parts " <> " #n
#define PG_E_BLIND PG_E_INSERT " RETURNING 1)"
static const char SQL_PG_BLIND_START[] =
    "WITH " PG_S ", " PG_I
    ", " PG_E_BLIND PG_GUARD(PG_COUNT("s") " + " PG_COUNT("i") " + " PG_COUNT("e"), 3);
static const char SQL_PG_BLIND_COMMIT_START[] =
    "WITH " PG_S ", " PG_U ", " PG_C ", " PG_I
    ", " PG_E_BLIND PG_GUARD(PG_COUNT("s") " + " PG_COUNT("u") " + " PG_COUNT("c") " + " PG_COUNT(
                                 "i") " + " PG_COUNT("e"),
                             5);
static const char SQL_PG_BLIND_COMMIT[] =
    "WITH " PG_S ", " PG_U
    ", " PG_C PG_GUARD(PG_COUNT("s") " + " PG_COUNT("u") " + " PG_COUNT("c"), 3);
/* A record read from a pre-migration-10 document is written out as rows on its first save. */
static const char SQL_DELETE_STEPS[] = "DELETE FROM saga_steps WHERE saga_id = ?";
static const char SQL_CLEAR_DOCUMENT[] = "UPDATE sagas SET steps = '[]' WHERE saga_id = ?";
/* One runner at a time: resume and compensate take the saga's runner lease first, so a second
 * caller (another thread, process or daemon) answers saga_concurrency at once instead of racing
 * the first through a step that is still running. Every save extends the lease; a crashed
 * runner's lease simply expires. */
static const char SQL_TAKE_RUNNER[] =
    "UPDATE sagas SET runner_id = ?, runner_expires_at = ? "
    "WHERE saga_id = ? AND (runner_id IS NULL OR runner_expires_at <= ?)";
static const char SQL_DROP_RUNNER[] = "UPDATE sagas SET runner_id = NULL, runner_expires_at = NULL "
                                      "WHERE saga_id = ? AND runner_id = ?";

/* ---- the two state machines: names and transitions ------------------------------------- */

static const char *const saga_state_names[MV_SAGA_STATE_COUNT] = {
    "running", "compensating", "completed", "compensated", "manual-review"};
static const char *const step_state_names[MV_STEP_STATE_COUNT] = {
    "executing",   "committed",          "failed", "ambiguous", "compensating",
    "compensated", "compensation-failed"};

#define TO(s) (1u << (s))
/* Where each saga state may go (a save that keeps the state is always allowed). Manual review
 * ends when an operator's resolution lets the saga run or compensate again. */
static const unsigned saga_moves[MV_SAGA_STATE_COUNT] = {
    [MV_SAGA_RUNNING] =
        TO(MV_SAGA_COMPENSATING) | TO(MV_SAGA_COMPLETED) | TO(MV_SAGA_MANUAL_REVIEW),
    [MV_SAGA_COMPENSATING] = TO(MV_SAGA_COMPENSATED) | TO(MV_SAGA_MANUAL_REVIEW),
    [MV_SAGA_COMPLETED] = 0,
    [MV_SAGA_COMPENSATED] = 0,
    [MV_SAGA_MANUAL_REVIEW] = TO(MV_SAGA_RUNNING) | TO(MV_SAGA_COMPENSATING),
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

static bool is(const json_t *obj, const char *key, const char *value) {
    const char *s = mv_json_str(obj, key);
    return s && strcmp(s, value) == 0;
}

/* with(): keep the saga's state. */
#define KEEP_STATE (-1)

/* State of a saga record / of a step, by enum. */
static bool saga_is(const json_t *rec, mv_saga_state state) {
    return mv_saga_state_parse(mv_json_str(rec, "state")) == (int)state;
}

static bool step_is(const json_t *step, mv_saga_step_state state) {
    return mv_saga_step_state_parse(mv_json_str(step, "state")) == (int)state;
}

static void set_step_state(json_t *step, mv_saga_step_state state) {
    json_object_set_new(step, "state", json_string(mv_saga_step_state_name(state)));
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

static mv_code now_ms(mv_saga_engine *e, int64_t *out, mv_err *err) {
    return mv_durable_now(e->clock, "saga clock", out, err);
}

/* ---- encryption at rest ------------------------------------------------------------------ */

/* "enc:v1:" + b64url(nonce(12) | ciphertext | tag(16)), the saga id as associated data so a
 * value cannot be moved to another saga's row. Caller frees. */
static char *seal(const mv_saga_engine *e, const char *saga_id, const char *plain) {
    size_t n = strlen(plain);
    unsigned char *buf = malloc(12 + n + 16);
    char *out = NULL;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0;
    if (!buf || !c || mv_random_bytes(buf, 12, NULL) != MV_OK) goto done;
    if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, e->key, buf) != 1 ||
        EVP_EncryptUpdate(c, NULL, &len, (const unsigned char *)saga_id, (int)strlen(saga_id)) !=
            1 ||
        EVP_EncryptUpdate(c, buf + 12, &len, (const unsigned char *)plain, (int)n) != 1 ||
        EVP_EncryptFinal_ex(c, buf + 12 + len, &fin) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, buf + 12 + n) != 1)
        goto done;
    out = malloc(sizeof ENC_PREFIX + mv_b64url_len(12 + n + 16));
    if (!out) goto done;
    memcpy(out, ENC_PREFIX, sizeof ENC_PREFIX - 1);
    mv_b64url_encode(buf, 12 + n + 16, out + sizeof ENC_PREFIX - 1);
done:
    EVP_CIPHER_CTX_free(c);
    free(buf);
    return out;
}

/* Inverse of seal; NULL when the value was tampered with or the key is wrong. Caller frees. */
static char *open_sealed(const mv_saga_engine *e, const char *saga_id, const char *sealed) {
    const char *b = sealed + sizeof ENC_PREFIX - 1;
    size_t blen = strlen(b), n = 0;
    unsigned char *buf = malloc(blen * 3 / 4 + 1);
    char *plain = NULL;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0;
    if (!buf || !c || !mv_b64url_decode(b, blen, buf, &n) || n < 28) goto fail;
    plain = malloc(n - 28 + 1);
    if (!plain) goto fail;
    if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, e->key, buf) != 1 ||
        EVP_DecryptUpdate(c, NULL, &len, (const unsigned char *)saga_id, (int)strlen(saga_id)) !=
            1 ||
        EVP_DecryptUpdate(c, (unsigned char *)plain, &len, buf + 12, (int)(n - 28)) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, buf + n - 16) != 1 ||
        EVP_DecryptFinal_ex(c, (unsigned char *)plain + len, &fin) != 1)
        goto fail;
    plain[n - 28] = '\0';
    EVP_CIPHER_CTX_free(c);
    free(buf);
    return plain;
fail:
    EVP_CIPHER_CTX_free(c);
    free(buf);
    free(plain);
    return NULL;
}

/* A stored value → JSON (a new reference, NULL on failure). */
static json_t *unseal_value(const mv_saga_engine *e, const char *saga_id, const char *text) {
    json_t *v = NULL;
    if (e->has_key && strncmp(text, ENC_PREFIX, sizeof ENC_PREFIX - 1) == 0) {
        char *plain = open_sealed(e, saga_id, text);
        if (plain) mv_json_parse(plain, strlen(plain), &v, NULL);
        free(plain);
    } else {
        mv_json_parse(text, strlen(text), &v, NULL);
    }
    return v;
}

/* JSON → stored text (caller frees). */
static char *seal_value(const mv_saga_engine *e, const char *saga_id, const json_t *v) {
    char *text = mv_json_compact(v);
    if (!text || !e->has_key) return text;
    char *sealed = seal(e, saga_id, text);
    free(text);
    return sealed;
}

/* The input's fingerprint; keyed when encryption is on, so it reveals nothing about the input. */
static void input_fingerprint(const mv_saga_engine *e, const json_t *input, char out[65]) {
    if (!e->has_key) {
        mv_json_fingerprint(input, out);
        return;
    }
    char *c = mv_json_canonical(input);
    unsigned char mac[32];
    mv_hmac_sha256(e->key, MV_SAGA_KEY_BYTES, c ? c : "", c ? strlen(c) : 0, mac);
    mv_hex(mac, 32, out);
    free(c);
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
        !json_object_get(rec, "input"))
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
        json_t *v = unseal_value(e, saga_id, text);
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
    json_t *input = unseal_value(t->e, t->id, mv_stmt_text(st, 3) ? mv_stmt_text(st, 3) : "");
    /* a document other than [] predates migration 10 (or was written by hand): its steps first */
    const char *doc = mv_stmt_text(st, 5);
    bool legacy = doc && strcmp(doc, "[]") != 0;
    json_t *steps = NULL;
    if (legacy)
        mv_json_parse(doc, strlen(doc), &steps, NULL);
    else if (doc)
        steps = json_array();
    bool ok = sid && strcmp(sid, t->id) == 0 && input && json_is_array(steps);
    json_t *rec = json_pack(
        "{s:s, s:s?, s:s?, s:o?, s:s?, s:o?, s:I, s:I, s:I, s:I}", "sagaId", t->id, "definition",
        mv_stmt_text(st, 1), "state", mv_stmt_text(st, 2), "input", input, "inputFingerprint",
        mv_stmt_text(st, 4), "steps", steps, "maxAttempts", (json_int_t)mv_stmt_int64(st, 6),
        "createdAt", (json_int_t)mv_stmt_int64(st, 7), "updatedAt",
        (json_int_t)mv_stmt_int64(st, 8), "version", (json_int_t)mv_stmt_int64(st, 9));
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
    /* decrypt the step values of a document */
    size_t i;
    json_t *s;
    json_array_foreach(steps, i, s) {
        static const char *const keys[] = {"compensationArgs", "result"};
        for (int k = 0; k < 2; k++) {
            json_t *v = json_object_get(s, keys[k]);
            if (!t->e->has_key || !json_is_string(v) ||
                strncmp(json_string_value(v), ENC_PREFIX, sizeof ENC_PREFIX - 1) != 0)
                continue;
            json_t *plain = unseal_value(t->e, t->id, json_string_value(v));
            if (!plain) {
                json_decref(rec);
                return mv_err_set(err, MV_INTERNAL, "saga %s: stored data cannot be decrypted",
                                  t->id);
            }
            json_object_set_new(s, keys[k], plain);
        }
    }
    if (legacy) json_object_set_new(rec, K_LEGACY, json_true());
    if ((rc = load_steps(db, t, steps, err)) || (rc = validate(t->id, rec, err))) {
        json_decref(rec);
        return rc;
    }
    t->rec = rec;
    return MV_OK;
}

static mv_code load(mv_saga_engine *e, const char *id, json_t **out, mv_err *err) {
    load_tx t = {.e = e, .id = id};
    mv_code rc = mv_store_read(e->store, load_fn, &t, err);
    *out = rc == MV_OK ? t.rec : NULL;
    return rc;
}

/* The public shape (DESIGN "Sagas and approvals over HTTP"). A new reference. */
static json_t *public_json(const json_t *rec) {
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
    return json_pack(
        "{s:O, s:O, s:O, s:O, s:o, s:O, s:O}", "sagaId", json_object_get(rec, "sagaId"),
        "definition", json_object_get(rec, "definition"), "state", json_object_get(rec, "state"),
        "input", json_object_get(rec, "input"), "steps", steps, "createdAt",
        json_object_get(rec, "createdAt"), "updatedAt", json_object_get(rec, "updatedAt"));
}

/* What a save also writes to the effect journal, in the same transaction: a saga step is an
 * effect like any other (named by the definition's capability), so `missive reconcile --kind
 * effects` finds a step left executing or ambiguous. Compensations are tracked on the saga record
 * only: they retry under one effect id, which the journal's terminal states do not allow. */
typedef struct {
    bool insert; /* the step's intent: the row is created executing */
    const char *effect_id, *capability, *target;
    unsigned from_mask; /* otherwise: move from one of these states to `to` */
    mv_effect_state to;
    const char *error_code;
} journal_note;

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
    bool legacy, pending; /* pending: rows[0] and notes[0] are a pending step commit */
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

/* Binds a step row from *i on, in the order of SQL_INSERT_STEP or SQL_UPDATE_STEP. */
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
    mv_code rc = mv_db_prepare(db, r->insert ? SQL_INSERT_STEP : SQL_UPDATE_STEP, &st, err);
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
    mv_stmt_bind_text(st, (*i)++, t->release);
    mv_stmt_bind_text(st, (*i)++, t->release);
    mv_stmt_bind_int64(st, (*i)++, t->lease_until);
    mv_stmt_bind_text(st, (*i)++, t->id);
    mv_stmt_bind_int64(st, (*i)++, t->version);
}

/* The PostgreSQL statement for t when it has one of the shapes of a running saga, else NULL. */
static const char *pg_save_sql(const cas_tx *t) {
    bool start = t->nrows >= 1 && t->rows[t->nrows - 1].insert && t->nnotes >= 1 &&
                 t->notes[t->nnotes - 1]->insert;
    if (t->legacy) return NULL;
    if (!t->pending && t->nrows == 1 && t->nnotes == 1 && start) return SQL_PG_SAVE_START;
    if (t->pending && t->nrows == 2 && t->nnotes == 2 && start) return SQL_PG_SAVE_COMMIT_START;
    if (t->pending && t->nrows == 1 && t->nnotes == 1 && !t->rows[0].insert)
        return SQL_PG_SAVE_COMMIT;
    return NULL;
}

/* The blind twin of a SQL_PG_SAVE_* statement (same parameters). */
static const char *pg_blind_sql(const char *sql) {
    if (sql == SQL_PG_SAVE_START) return SQL_PG_BLIND_START;
    if (sql == SQL_PG_SAVE_COMMIT_START) return SQL_PG_BLIND_COMMIT_START;
    return SQL_PG_BLIND_COMMIT;
}

/* Binds the parameters of a SQL_PG_SAVE_* (or its blind twin) statement; *r is the index of the
 * row of the step started (when one is). */
static void bind_pg(mv_stmt *st, const cas_tx *t, const journal_note **commit,
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
        *start = t->notes[n];
        mv_stmt_bind_text(st, i++, (*start)->effect_id);
        mv_stmt_bind_text(st, i++, (*start)->capability);
        mv_stmt_bind_text(st, i++, (*start)->target);
        mv_stmt_bind_int64(st, i++, t->updated_at);
        mv_stmt_bind_int64(st, i++, t->updated_at);
    }
}

/* The hot save in one round trip: the blind statement, its answer read with the COMMIT's. */
static mv_code cas_pg_blind(mv_db *db, void *ctx, mv_err *err) {
    cas_tx *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, pg_blind_sql(pg_save_sql(t)), &st, err);
    if (rc) return rc;
    const journal_note *commit = NULL, *start = NULL;
    size_t r;
    bind_pg(st, t, &commit, &start, &r);
    return mv_stmt_exec_later(st, err);
}

static mv_code cas_pg(mv_db *db, cas_tx *t, const char *sql, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql, &st, err);
    if (rc) return rc;
    size_t r;
    const journal_note *commit = NULL, *start = NULL;
    bind_pg(st, t, &commit, &start, &r);
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
        (rc = mv__journal_move_tx(db, commit->effect_id, commit->from_mask, commit->to, NULL,
                                  t->updated_at, true, err)))
        return rc;
    if (count[3] != 1) return no_row(t->id, &t->rows[r], err);
    if (count[4] != 1)
        return mv_err_set(err, MV_EFFECT_TRANSITION,
                          "durable effect %s: create transition was rejected", start->effect_id);
    return MV_OK;
}

static mv_code cas_fn(mv_db *db, void *ctx, mv_err *err) {
    cas_tx *t = ctx;
    const char *one = mv_db_kind(db) == MV_STORE_POSTGRES ? pg_save_sql(t) : NULL;
    if (one) return cas_pg(db, t, one, err);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_CAS_SAGA, &st, err);
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
    if (t->legacy && ((rc = mv_db_execf(db, SQL_DELETE_STEPS, NULL, err, "s", t->id)) ||
                      (rc = mv_db_execf(db, SQL_CLEAR_DOCUMENT, NULL, err, "s", t->id))))
        return rc;
    for (size_t i = 0; i < t->nrows; i++)
        if ((rc = write_row(db, t->id, &t->rows[i], t->updated_at, err))) return rc;
    for (size_t i = 0; i < t->nnotes; i++)
        if ((rc = note_fn(db, t->notes[i], t->updated_at, err))) return rc;
    return MV_OK;
}

static mv_code concurrency(const char *id, mv_err *err) {
    mv_err_set(err, MV_SAGA_CONCURRENCY, "saga %s: concurrent transition rejected", id);
    if (err) mv_strlcpy(err->saga_id, id, sizeof err->saga_id);
    return MV_SAGA_CONCURRENCY;
}

/* The row of step `idx` as stored (values sealed when encryption is on). */
static mv_code fill_row(const mv_saga_engine *e, const char *saga_id, const json_t *step,
                        int64_t idx, bool insert, step_row *r, mv_err *err) {
    memset(r, 0, sizeof *r);
    r->insert = insert;
    r->idx = idx;
    r->name = mv_json_str(step, "name");
    r->state = mv_json_str(step, "state");
    r->effect_id = mv_json_str(step, "effectId");
    r->comp_id = mv_json_str(step, "compensationEffectId");
    r->error_code = mv_json_str(step, "errorCode");
    json_t *v;
    if ((v = json_object_get(step, "attempts"))) {
        r->has_attempts = true;
        r->attempts = json_integer_value(v);
    }
    if ((v = json_object_get(step, "nextAttemptAt"))) {
        r->has_next = true;
        r->next_at = json_integer_value(v);
    }
    if ((v = json_object_get(step, "result")) && !(r->result = seal_value(e, saga_id, v)))
        return mv_err_set(err, MV_INTERNAL, "saga %s: cannot encrypt a value", saga_id);
    if (insert) {
        v = json_object_get(step, "compensationArgs");
        json_t *null = v ? NULL : json_null();
        r->args = seal_value(e, saga_id, v ? v : null);
        if (!r->args)
            return mv_err_set(err, MV_INTERNAL, "saga %s: cannot encrypt a value", saga_id);
    }
    return MV_OK;
}

static bool ends_run(const json_t *rec) {
    int state = mv_saga_state_parse(mv_json_str(rec, "state"));
    return state == MV_SAGA_COMPLETED || state == MV_SAGA_COMPENSATED ||
           state == MV_SAGA_MANUAL_REVIEW;
}

/* Saves next (owned) over *rec with a compare-and-set on *rec's version, in one transaction with:
 * step `index` of next (-1: none; insert: a new row), a committed step still pending in next
 * (K_PENDING), every step when next came from a document (K_LEGACY), and note (may be NULL) in
 * the journal. A save that ends the run (completed, compensated, manual review) drops the runner
 * lease in the same statement. On success *rec becomes next (version + 1); on failure *rec is
 * marked stale. */
static mv_code save_noted(mv_saga_engine *e, json_t **rec, json_t *next, int index, bool insert,
                          const journal_note *note, mv_err *err) {
    const char *id = mv_json_str(*rec, "sagaId");
    int64_t version = json_integer_value(json_object_get(*rec, "version"));
    json_t *steps = json_object_get(next, "steps");
    bool legacy = json_object_get(next, K_LEGACY) != NULL;
    json_t *pending = json_object_get(next, K_PENDING);
    int pidx = pending ? (int)json_integer_value(pending) : -1;
    bool ends = ends_run(next) || json_object_get(next, K_END);
    step_row small[2], *rows = small;
    size_t nrows = 0, cap = 2;
    mv_code rc = MV_OK;
    if (legacy && json_array_size(steps) > cap) {
        cap = json_array_size(steps);
        if (!(rows = calloc(cap, sizeof *rows))) {
            json_decref(next);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
    }
    if (legacy) {
        for (size_t i = 0; rc == MV_OK && i < json_array_size(steps); i++)
            rc = fill_row(e, id, json_array_get(steps, i), (int64_t)i, true, &rows[nrows++], err);
    } else {
        if (pidx >= 0 && pidx != index)
            rc = fill_row(e, id, json_array_get(steps, (size_t)pidx), pidx, false, &rows[nrows++],
                          err);
        if (rc == MV_OK && index >= 0)
            rc = fill_row(e, id, json_array_get(steps, (size_t)index), index, insert,
                          &rows[nrows++], err);
    }
    journal_note commit = {.effect_id =
                               mv_json_str(json_array_get(steps, (size_t)pidx), "effectId"),
                           .from_mask = MV__EFFECT_MASK(MV_EFFECT_EXECUTING),
                           .to = MV_EFFECT_COMMITTED};
    if (rc == MV_OK) {
        cas_tx t = {.id = id,
                    .state = mv_json_str(next, "state"),
                    .release = ends ? mv_json_str(next, K_RUNNER) : NULL,
                    .updated_at = json_integer_value(json_object_get(next, "updatedAt")),
                    .version = version,
                    .legacy = legacy,
                    .rows = rows,
                    .nrows = nrows};
        if (pidx >= 0 && commit.effect_id) t.notes[t.nnotes++] = &commit;
        t.pending = !legacy && pidx >= 0 && pidx != index && commit.effect_id;
        if (note) t.notes[t.nnotes++] = note;
        t.lease_until = t.updated_at + e->runner_lease_ms;
        rc = MV_INTERNAL;
        /* PostgreSQL: a running saga's save is sent blind first; when it fails for any reason
         * but a lost connection, the transaction rolled back and the save runs again reading
         * its results, which tells a moved version from a taken effect id as before. The blind
         * write only queues one statement from t and changes nothing else, so it may be run again:
         * concurrent sagas' saves share commits (store/pg_batch.c), and one that fails in a
         * batch is run again alone and fails there as it would have alone; *rec changes below,
         * only once the outcome is known. */
        if (mv_store_kind_of(e->store) == MV_STORE_POSTGRES && pg_save_sql(&t)) {
            mv_err blind = {0};
            rc = mv__store_write_rerunnable(e->store, cas_pg_blind, &t, &blind);
            if (rc == MV_STORE_UNAVAILABLE) mv_err_copy(err, &blind);
        }
        if (rc != MV_OK && rc != MV_STORE_UNAVAILABLE)
            rc = mv_store_write(e->store, cas_fn, &t, err);
        if (rc == MV_SAGA_CONCURRENCY) concurrency(id, err);
    }
    for (size_t i = 0; i < nrows; i++) {
        free(rows[i].args);
        free(rows[i].result);
    }
    if (rows != small) free(rows);
    if (rc) {
        json_decref(next);
        json_object_set_new(*rec, K_STALE, json_true());
        return rc;
    }
    json_object_set_new(next, "version", json_integer(version + 1));
    json_object_del(next, K_PENDING);
    json_object_del(next, K_LEGACY);
    json_object_del(next, K_STALE);
    json_object_del(next, K_END);
    if (ends) json_object_del(next, K_RUNNER);
    json_decref(*rec);
    *rec = next;
    if (e->on_save) {
        json_t *pub = public_json(next);
        e->on_save(pub, e->on_save_ctx);
        json_decref(pub);
    }
    return MV_OK;
}

/* A copy of rec with a new state (NULL: unchanged), step `index` replaced by step (owned; NULL:
 * unchanged) and updatedAt = now. */
static mv_code with(mv_saga_engine *e, const json_t *rec, int state, int index, json_t *step,
                    json_t **out, mv_err *err) {
    int64_t now;
    mv_code rc = now_ms(e, &now, err);
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
    *out = next;
    return MV_OK;
}

static mv_code save_with_noted(mv_saga_engine *e, json_t **rec, int state, int index, json_t *step,
                               const journal_note *note, mv_err *err) {
    json_t *next;
    mv_code rc = with(e, *rec, state, index, step, &next, err);
    return rc ? rc : save_noted(e, rec, next, step ? index : -1, false, note, err);
}

static mv_code save_with(mv_saga_engine *e, json_t **rec, int state, int index, json_t *step,
                         mv_err *err) {
    return save_with_noted(e, rec, state, index, step, NULL, err);
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
        return mv_db_execf(db, SQL_TAKE_RUNNER, &t->changes, err, "sisi", t->runner, t->until,
                           t->id, t->now);
    return mv_db_execf(db, SQL_DROP_RUNNER, &t->changes, err, "ss", t->id, t->runner);
}

/* Takes the runner lease of saga_id for runner (37 bytes, filled). A saga that does not exist is
 * not an error here: the load that follows reports it. */
static mv_code take_runner(mv_saga_engine *e, const char *saga_id, char runner[37], mv_err *err) {
    mv_code rc = mv_id_uuid(runner, err);
    if (rc) return rc;
    runner_tx t = {.id = saga_id, .runner = runner, .take = true};
    if ((rc = now_ms(e, &t.now, err))) return rc;
    t.until = t.now + e->runner_lease_ms;
    if ((rc = mv_store_write(e->store, runner_fn, &t, err))) return rc;
    json_t *existing = NULL;
    if (t.changes == 0 && load(e, saga_id, &existing, NULL) == MV_OK) {
        json_decref(existing);
        mv_err_set(err, MV_SAGA_CONCURRENCY, "saga %s: another runner is working on it", saga_id);
        if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
        return MV_SAGA_CONCURRENCY;
    }
    return MV_OK;
}

static void drop_runner(mv_saga_engine *e, const char *saga_id, const char *runner) {
    runner_tx t = {.id = saga_id, .runner = runner};
    mv_store_write(e->store, runner_fn, &t, NULL); /* failing here only delays the next runner */
}

/* ---- definitions ------------------------------------------------------------------------- */

mv_code mv_saga_definition_check(const mv_saga_definition *def, mv_err *err) {
    if (!def) return mv_err_set(err, MV_INVALID_ARGUMENT, "saga definition must be an object");
    if (!mv_valid_token(def->name, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga definition must be a bounded printable token");
    if (def->capability && (!mv_valid_capability(def->capability) || strlen(def->capability) > 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga capability is invalid");
    if (!def->run) return mv_err_set(err, MV_INVALID_ARGUMENT, "saga run must be a function");
    if (def->ncompensators && !def->compensators)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga compensators must be an object");
    for (size_t i = 0; i < def->ncompensators; i++) {
        const mv_saga_compensator *c = &def->compensators[i];
        if (!mv_valid_token(c->step, 128))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "saga compensator name must be a bounded printable token");
        if (!c->fn)
            return mv_err_set(err, MV_INVALID_ARGUMENT, "saga compensator %s must be a function",
                              c->step);
    }
    if (def->max_attempts < 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga maxAttempts must be a positive safe integer");
    return MV_OK;
}

static int max_attempts(const mv_saga_definition *def) {
    return def->max_attempts > 0 ? def->max_attempts : MV_DEFAULT_SAGA_MAX_ATTEMPTS;
}

static int64_t default_backoff(int attempt) {
    if (attempt < 1) return 100;
    if (attempt > 10) return 60000;
    int64_t d = INT64_C(100) << (attempt - 1);
    return d < 60000 ? d : 60000;
}

static const mv_saga_compensator *find_compensator(const mv_saga_definition *def,
                                                   const char *step) {
    for (size_t i = 0; i < def->ncompensators; i++)
        if (strcmp(def->compensators[i].step, step) == 0) return &def->compensators[i];
    return NULL;
}

static int find_step(const json_t *rec, const char *key, const char *value) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(rec, "steps"), i, s) {
        if (is(s, key, value)) return (int)i;
    }
    return -1;
}

static mv_code check_call(const mv_saga_definition *def, const char *saga_id, mv_abort *abort,
                          mv_err *err) {
    mv_code rc;
    if ((rc = mv_saga_definition_check(def, err))) return rc;
    if (!mv_valid_token(saga_id, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga id must be a bounded printable token");
    if (abort && mv_abort_is_set(abort))
        return mv_err_set(err, MV_ABORTED, "%s",
                          abort->reason[0] ? abort->reason : "saga execution aborted");
    return MV_OK;
}

static mv_code check_definition(const mv_saga_definition *def, const json_t *rec, mv_err *err) {
    if (def && !is(rec, "definition", def->name))
        return mv_err_set(err, MV_SAGA_MISMATCH, "saga definition mismatch");
    return MV_OK;
}

static mv_code ambiguous(const char *saga_id, const char *step, mv_err *err) {
    mv_err_set(err, MV_SAGA_AMBIGUOUS_STEP, "saga %s: step %s has an ambiguous effect", saga_id,
               step);
    if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    return MV_SAGA_AMBIGUOUS_STEP;
}

/* Fills *record with the saga as stored now (when asked and it exists), returns rc. */
static mv_code finish(mv_saga_engine *e, const char *saga_id, json_t **record, mv_code rc) {
    if (!record) return rc;
    *record = NULL;
    json_t *rec = NULL;
    if (mv_valid_token(saga_id, 128) && load(e, saga_id, &rec, NULL) == MV_OK) {
        *record = public_json(rec);
        json_decref(rec);
    }
    return rc;
}

/* ---- steps ------------------------------------------------------------------------------- */

typedef struct {
    mv_saga_ctx *ctx;
    const char *name;
    json_t *step; /* the new step record (owned) */
    mv_saga_step_fn execute;
    void *cb_ctx;
    mv_saga_step_call call;
    const char *effect_id;
} step_run;

static mv_effect_phase step_phase(const mv_err *error, bool began, void *p) {
    (void)began;
    (void)p;
    return error->code == MV_SAGA_STEP_FAILED ? MV_PHASE_FAILED : MV_PHASE_AMBIGUOUS;
}

static const char *step_error_code(const mv_err *error, bool began, void *p) {
    step_run *r = p;
    if (error->code == MV_SAGA_STEP_FAILED)
        return r->call.error_code[0] ? r->call.error_code : "not_committed";
    return began ? "execution_unknown" : "aborted_before_execution";
}

static mv_code step_intent(const mv_effect_context *c, void *p, mv_err *err) {
    step_run *r = p;
    json_t *next;
    mv_code rc = with(r->ctx->e, *r->ctx->rec, KEEP_STATE, 0, NULL, &next, err);
    if (rc) return rc;
    json_t *steps = json_object_get(next, "steps");
    json_array_append(steps, r->step);
    journal_note note = {.insert = true,
                         .effect_id = c->effect_id,
                         .capability = c->capability,
                         .target = r->ctx->saga_id};
    return save_noted(r->ctx->e, r->ctx->rec, next, (int)json_array_size(steps) - 1, true, &note,
                      err);
}

/* The commit is recorded in memory and written with the saga's next save (K_PENDING): the next
 * step's intent, the saga's end or its compensation, whichever comes first. */
static mv_code step_committed(const mv_effect_context *c, const json_t *result, void *p,
                              mv_err *err) {
    (void)c;
    step_run *r = p;
    int index = find_step(*r->ctx->rec, "effectId", r->effect_id);
    if (index < 0) return concurrency(r->ctx->saga_id, err);
    json_t *step =
        json_deep_copy(json_array_get(json_object_get(*r->ctx->rec, "steps"), (size_t)index));
    set_step_state(step, MV_STEP_COMMITTED);
    if (result) json_object_set_new(step, "result", json_deep_copy(result));
    json_t *next;
    mv_code rc = with(r->ctx->e, *r->ctx->rec, KEEP_STATE, index, step, &next, err);
    if (rc) return rc;
    json_object_set_new(next, K_PENDING, json_integer(index));
    json_decref(*r->ctx->rec);
    *r->ctx->rec = next;
    return MV_OK;
}

static mv_code step_failed(const mv_effect_context *c, const mv_effect_failure *f, void *p,
                           mv_err *err) {
    step_run *r = p;
    int index = find_step(*r->ctx->rec, "effectId", r->effect_id);
    if (index < 0) return concurrency(r->ctx->saga_id, err);
    bool known = f->error->code == MV_SAGA_STEP_FAILED || !f->began;
    json_t *step =
        json_deep_copy(json_array_get(json_object_get(*r->ctx->rec, "steps"), (size_t)index));
    set_step_state(step, known ? MV_STEP_FAILED : MV_STEP_AMBIGUOUS);
    json_object_set_new(step, "errorCode", json_string(f->error_code));
    journal_note note = {.effect_id = c->effect_id,
                         .from_mask = MV__EFFECT_MASK(MV_EFFECT_ADMISSION) |
                                      MV__EFFECT_MASK(MV_EFFECT_EXECUTING),
                         .to = known ? MV_EFFECT_FAILED : MV_EFFECT_UNKNOWN,
                         .error_code = f->error_code};
    return save_with_noted(r->ctx->e, r->ctx->rec,
                           known ? MV_SAGA_COMPENSATING : MV_SAGA_MANUAL_REVIEW, index, step, &note,
                           err);
}

static mv_code step_execute(const mv_effect_context *c, void *p, json_t **result, mv_err *err) {
    step_run *r = p;
    r->call = (mv_saga_step_call){
        .saga_id = r->ctx->saga_id, .step = r->name, .effect_id = c->effect_id, .abort = c->abort};
    mv_code rc = r->execute(&r->call, r->cb_ctx, result, err);
    if (rc == MV_SAGA_STEP_FAILED && r->call.error_code[0] &&
        !mv_valid_error_code(r->call.error_code)) {
        /* a provider that cannot name its failure is not proof that nothing happened */
        json_decref(*result);
        *result = NULL;
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step error code is invalid");
    }
    return rc;
}

const char *mv_saga_ctx_id(const mv_saga_ctx *ctx) { return ctx->saga_id; }

json_t *mv_saga_ctx_results(const mv_saga_ctx *ctx) {
    json_t *out = json_object();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(*ctx->rec, "steps"), i, s) {
        if (step_is(s, MV_STEP_COMMITTED))
            json_object_set(out, mv_json_str(s, "name"),
                            json_object_get(s, "result") ? json_object_get(s, "result")
                                                         : json_null());
    }
    return out;
}

mv_code mv_saga_step(mv_saga_ctx *ctx, const char *name, const json_t *compensation_args,
                     mv_saga_step_fn execute, void *cb_ctx, json_t **result, mv_err *err) {
    mv_saga_engine *e = ctx->e;
    mv_code rc;
    if (result) *result = NULL;
    if (mv_abort_is_set(ctx->abort))
        return mv_err_set(err, MV_ABORTED, "%s",
                          ctx->abort->reason[0] ? ctx->abort->reason : "saga execution aborted");
    if (!mv_valid_token(name, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step must be a bounded printable token");
    if (!execute)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step execute must be a function");
    if (!find_compensator(ctx->def, name))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step %s has no compensator", name);
    /* The runner's record is the stored one (it holds the lease, and every save is a
     * compare-and-set on the version): a step already in it is not run again. */
    json_t *rec = *ctx->rec;
    int index = find_step(rec, "name", name);
    if (index >= 0) {
        json_t *existing = json_array_get(json_object_get(rec, "steps"), (size_t)index);
        if (step_is(existing, MV_STEP_COMMITTED)) {
            json_t *r = json_object_get(existing, "result");
            if (result && r) *result = json_deep_copy(r);
            return MV_OK;
        }
        if (step_is(existing, MV_STEP_EXECUTING) || step_is(existing, MV_STEP_AMBIGUOUS)) {
            if (!saga_is(rec, MV_SAGA_MANUAL_REVIEW) &&
                (rc = save_with(e, ctx->rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err)))
                return rc;
            return ambiguous(ctx->saga_id, name, err);
        }
        return mv_err_set(err, MV_SAGA_RESOLUTION, "saga %s: step %s cannot resume from %s",
                          ctx->saga_id, name, mv_json_str(existing, "state"));
    }
    char effect_id[37], comp_id[37];
    if ((rc = mv_id_uuid(effect_id, err)) || (rc = mv_id_uuid(comp_id, err))) return rc;
    step_run r = {
        .ctx = ctx, .name = name, .execute = execute, .cb_ctx = cb_ctx, .effect_id = effect_id};
    r.step =
        json_pack("{s:s, s:s, s:s, s:s, s:O, s:i}", "name", name, "effectId", effect_id,
                  "compensationEffectId", comp_id, "state",
                  mv_saga_step_state_name(MV_STEP_EXECUTING), "compensationArgs",
                  compensation_args ? (json_t *)compensation_args : json_null(), "attempts", 0);
    if (!r.step) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (compensation_args) { /* a private copy: the caller may change theirs */
        json_object_set_new(r.step, "compensationArgs", json_deep_copy(compensation_args));
    }
    mv_effect_scope scope = {.observer = e->observer, .clock = e->clock};
    mv_effect_input in = {
        .effect_id = effect_id,
        .capability = ctx->def->capability ? ctx->def->capability : "saga.execute",
        .stage = MV_STAGE_EXECUTION,
        .abort = ctx->abort,
        .failure_phase_fn = step_phase,
        .error_code_fn = step_error_code,
        .policy_ctx = &r,
        .transitions = {
            .intent = step_intent, .committed = step_committed, .failed = step_failed, .ctx = &r}};
    rc = mv_effect_run(&scope, &in, step_execute, &r, result, err);
    json_decref(r.step);
    if (rc) {
        if (err) mv_strlcpy(err->saga_id, ctx->saga_id, sizeof err->saga_id);
    }
    return rc;
}

/* ---- compensate --------------------------------------------------------------------------- */

typedef struct {
    mv_saga_engine *e;
    const mv_saga_definition *def;
    const mv_saga_compensator *comp;
    json_t **rec;
    int index, attempt, max;
    json_t *step; /* the step being compensated (owned) */
    mv_err transition_error;
    bool has_transition_error;
} comp_run;

static mv_effect_phase always_failed(const mv_err *error, bool began, void *p) {
    (void)error;
    (void)began;
    (void)p;
    return MV_PHASE_FAILED;
}

static mv_code comp_executing(const mv_effect_context *c, void *p, mv_err *err) {
    (void)c;
    comp_run *r = p;
    return save_with(r->e, r->rec, KEEP_STATE, r->index, json_deep_copy(r->step), err);
}

static mv_code comp_committed(const mv_effect_context *c, const json_t *result, void *p,
                              mv_err *err) {
    (void)c;
    (void)result;
    comp_run *r = p;
    set_step_state(r->step, MV_STEP_COMPENSATED);
    return save_with(r->e, r->rec, KEEP_STATE, r->index, json_deep_copy(r->step), err);
}

static mv_code comp_failed(const mv_effect_context *c, const mv_effect_failure *f, void *p,
                           mv_err *err) {
    (void)c;
    (void)f;
    comp_run *r = p;
    bool exhausted = r->attempt >= r->max;
    mv_code rc = MV_OK;
    json_t *failed = json_deep_copy(r->step);
    set_step_state(failed, MV_STEP_COMPENSATION_FAILED);
    json_object_set_new(failed, "errorCode", json_string("compensation_failed"));
    if (!exhausted) {
        int64_t delay = r->def->backoff ? r->def->backoff(r->attempt, r->def->ctx)
                                        : default_backoff(r->attempt);
        int64_t now, next = 0;
        if (delay < 0 || delay > MV_MAX_SAFE_INT)
            rc = mv_err_set(&r->transition_error, MV_INVALID_ARGUMENT,
                            "saga backoff must return a non-negative safe integer");
        else if (!(rc = now_ms(r->e, &now, &r->transition_error)))
            rc = mv_durable_add(now, delay, "saga next retry", &next, &r->transition_error);
        if (!rc) json_object_set_new(failed, "nextAttemptAt", json_integer(next));
    }
    if (!rc)
        rc = save_with(r->e, r->rec, exhausted ? MV_SAGA_MANUAL_REVIEW : MV_SAGA_COMPENSATING,
                       r->index, failed, &r->transition_error);
    else
        json_decref(failed);
    if (!rc) return MV_OK;
    r->has_transition_error = true;
    json_t *invalid = json_deep_copy(r->step);
    set_step_state(invalid, MV_STEP_COMPENSATION_FAILED);
    json_object_set_new(invalid, "errorCode", json_string("invalid_retry_policy"));
    return save_with(r->e, r->rec, MV_SAGA_MANUAL_REVIEW, r->index, invalid, err);
}

static mv_code comp_execute(const mv_effect_context *c, void *p, json_t **result, mv_err *err) {
    (void)result;
    comp_run *r = p;
    json_t *args = json_deep_copy(json_object_get(r->step, "compensationArgs"));
    mv_saga_compensation_call call = {.saga_id = mv_json_str(*r->rec, "sagaId"),
                                      .step = mv_json_str(r->step, "name"),
                                      .effect_id = c->effect_id,
                                      .attempt = r->attempt,
                                      .result = json_object_get(r->step, "result"),
                                      .abort = c->abort};
    mv_code rc = r->comp->fn(args ? args : json_null(), &call, r->comp->ctx, err);
    json_decref(args);
    return rc;
}

/* The start of a compensation (the synchronous engine's and the loop's): a saga already over
 * needs none (*go false); a step whose outcome is unknown sends it to manual review
 * (MV_SAGA_AMBIGUOUS_STEP); otherwise the saga is saved compensating and *go is true. */
static mv_code comp_prelude(mv_saga_engine *e, json_t **rec, const char *saga_id, bool *go,
                            mv_err *err) {
    mv_code rc;
    *go = false;
    if (saga_is(*rec, MV_SAGA_COMPLETED) || saga_is(*rec, MV_SAGA_COMPENSATED)) return MV_OK;
    json_t *steps = json_object_get(*rec, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *s = json_array_get(steps, i);
        if (step_is(s, MV_STEP_AMBIGUOUS) || step_is(s, MV_STEP_EXECUTING) ||
            step_is(s, MV_STEP_COMPENSATING)) {
            char name[129];
            mv_strlcpy(name, mv_json_str(s, "name"), sizeof name);
            if (!saga_is(*rec, MV_SAGA_MANUAL_REVIEW) &&
                (rc = save_with(e, rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err)))
                return rc;
            return ambiguous(saga_id, name, err);
        }
    }
    if (!saga_is(*rec, MV_SAGA_COMPENSATING) &&
        (rc = save_with(e, rec, MV_SAGA_COMPENSATING, 0, NULL, err)))
        return rc;
    *go = true;
    return MV_OK;
}

enum { PICK_SKIP, PICK_STOP, PICK_RUN };

/* What compensation does at step `index` of *rec (both engines walk the steps backwards):
 * PICK_SKIP — nothing to undo there; PICK_STOP — the compensation stops here for now, *rc being
 * the result (a retry not due yet, or the saga sent to manual review: no compensator, attempts
 * exhausted); PICK_RUN — *r is the attempt to make (its step copy compensating, attempts + 1). */
static int comp_pick(mv_saga_engine *e, const mv_saga_definition *def, json_t **rec, int index,
                     comp_run *r, mv_code *rc, mv_err *err) {
    *rc = MV_OK;
    json_t *step = json_array_get(json_object_get(*rec, "steps"), (size_t)index);
    if (!step_is(step, MV_STEP_COMMITTED) && !step_is(step, MV_STEP_COMPENSATION_FAILED))
        return PICK_SKIP;
    int64_t now;
    if ((*rc = now_ms(e, &now, err))) return PICK_STOP;
    json_t *next_at = json_object_get(step, "nextAttemptAt");
    if (next_at && json_integer_value(next_at) > now) return PICK_STOP; /* not due yet */
    const mv_saga_compensator *comp = find_compensator(def, mv_json_str(step, "name"));
    int max = max_attempts(def);
    int attempts = (int)json_integer_value(json_object_get(step, "attempts"));
    if (!comp || attempts >= max) {
        if (!comp || !saga_is(*rec, MV_SAGA_MANUAL_REVIEW))
            *rc = save_with(e, rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err);
        return PICK_STOP;
    }
    *r = (comp_run){.e = e,
                    .def = def,
                    .comp = comp,
                    .rec = rec,
                    .index = index,
                    .attempt = attempts + 1,
                    .max = max};
    if (!(r->step = json_deep_copy(step))) {
        *rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
        return PICK_STOP;
    }
    json_object_del(r->step, "errorCode");
    json_object_del(r->step, "nextAttemptAt");
    set_step_state(r->step, MV_STEP_COMPENSATING);
    json_object_set_new(r->step, "attempts", json_integer(r->attempt));
    return PICK_RUN;
}

/* Compensates *rec (loaded, definition checked). */
static mv_code compensate_loaded(mv_saga_engine *e, const mv_saga_definition *def, json_t **rec,
                                 mv_abort *abort, mv_err *err) {
    mv_code rc;
    const char *id = mv_json_str(*rec, "sagaId");
    char saga_id[129];
    mv_strlcpy(saga_id, id, sizeof saga_id);
    if (mv_abort_is_set(abort))
        return mv_err_set(err, MV_ABORTED, "%s",
                          abort->reason[0] ? abort->reason : "saga execution aborted");
    bool go = false;
    if ((rc = comp_prelude(e, rec, saga_id, &go, err)) || !go) return rc;
    for (int index = (int)json_array_size(json_object_get(*rec, "steps")) - 1; index >= 0;
         index--) {
        if (mv_abort_is_set(abort))
            return mv_err_set(err, MV_ABORTED, "%s",
                              abort->reason[0] ? abort->reason : "saga execution aborted");
        comp_run r;
        int pick = comp_pick(e, def, rec, index, &r, &rc, err);
        if (pick == PICK_SKIP) continue;
        if (pick == PICK_STOP) return rc;
        mv_effect_scope scope = {.observer = e->observer, .clock = e->clock};
        mv_effect_input in = {.effect_id = mv_json_str(r.step, "compensationEffectId"),
                              .capability = def->capability ? def->capability : "saga.compensate",
                              .stage = MV_STAGE_COMPENSATION,
                              .attempt = r.attempt,
                              .abort = abort,
                              .failure_phase_fn = always_failed,
                              .error_code = "compensation_failed",
                              .transitions = {.executing = comp_executing,
                                              .committed = comp_committed,
                                              .failed = comp_failed,
                                              .ctx = &r}};
        mv_err run_err = {0};
        rc = mv_effect_run(&scope, &in, comp_execute, &r, NULL, &run_err);
        json_decref(r.step);
        if (rc) {
            if (r.has_transition_error) return mv_err_copy(err, &r.transition_error);
            return MV_OK; /* the failed attempt is recorded; the next call retries when due */
        }
    }
    return save_with(e, rec, MV_SAGA_COMPENSATED, 0, NULL, err);
}

typedef mv_code (*loaded_fn)(mv_saga_engine *e, const mv_saga_definition *def, json_t **rec,
                             mv_abort *abort, mv_err *err);

/* The end of a run: a commit still pending is written and the runner lease dropped, in one
 * transaction; otherwise the lease is dropped unless the last save already did. */
static void end_run(mv_saga_engine *e, const char *saga_id, json_t **rec, const char *runner) {
    /* (after a failed save too: the compare-and-set succeeds only if the store is still at the
     * version this record has, i.e. holds exactly this record) */
    if (*rec && json_object_get(*rec, K_PENDING)) {
        json_t *next;
        if (with(e, *rec, KEEP_STATE, 0, NULL, &next, NULL) == MV_OK) {
            /* this save ends the run whatever the state: it drops the lease like a final one */
            json_object_set_new(next, K_END, json_true());
            if (save_noted(e, rec, next, -1, false, NULL, NULL) == MV_OK) return;
        }
    }
    if (!*rec || json_object_get(*rec, K_RUNNER) || json_object_get(*rec, K_STALE))
        drop_runner(e, saga_id, runner); /* failing here only delays the next runner */
}

/* Fills *record with the saga: the runner's record when it is what the store holds, else as
 * stored now. */
static mv_code finish_run(mv_saga_engine *e, const char *saga_id, json_t *rec, json_t **record,
                          mv_code rc) {
    if (!record || !rec || json_object_get(rec, K_STALE) || json_object_get(rec, K_PENDING))
        return finish(e, saga_id, record, rc);
    *record = public_json(rec);
    return rc;
}

/* The frame of resume and compensate: validate, hold the runner lease, load, run, release. A saga
 * just created arrives as created (owned, lease held, runner named in it): nothing is read. */
static mv_code as_runner(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                         mv_abort *abort, json_t *created, json_t **record, mv_err *err,
                         loaded_fn run) {
    mv_code rc;
    json_t *rec = created;
    char runner[37];
    if (created) {
        mv_strlcpy(runner, mv_json_str(created, K_RUNNER), sizeof runner);
        rc = run(e, def, &rec, abort, err);
    } else {
        if ((rc = check_call(def, saga_id, abort, err)) ||
            (rc = take_runner(e, saga_id, runner, err)))
            return finish(e, saga_id, record, rc);
        if (!(rc = load(e, saga_id, &rec, err)) && !(rc = check_definition(def, rec, err))) {
            json_object_set_new(rec, K_RUNNER, json_string(runner));
            rc = run(e, def, &rec, abort, err);
        }
    }
    end_run(e, saga_id, &rec, runner);
    rc = finish_run(e, saga_id, rec, record, rc);
    json_decref(rec);
    return rc;
}

mv_code mv_saga_compensate(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                           mv_abort *abort, json_t **record, mv_err *err) {
    return as_runner(e, def, saga_id, abort, NULL, record, err, compensate_loaded);
}

/* ---- resume and execute ------------------------------------------------------------------- */

/* The runner's record after a failed save: what the store holds now. */
static mv_code refresh(mv_saga_engine *e, const char *saga_id, json_t **rec, mv_err *err) {
    if (!json_object_get(*rec, K_STALE)) return MV_OK;
    json_t *fresh;
    mv_code rc = load(e, saga_id, &fresh, err);
    if (rc) return rc;
    json_t *runner = json_object_get(*rec, K_RUNNER);
    if (runner) json_object_set(fresh, K_RUNNER, runner);
    /* a commit this runner holds and the store does not have yet stays pending */
    json_t *pending = json_object_get(*rec, K_PENDING);
    if (pending) {
        size_t idx = (size_t)json_integer_value(pending);
        json_t *mine = json_array_get(json_object_get(*rec, "steps"), idx),
               *stored = json_array_get(json_object_get(fresh, "steps"), idx);
        const char *id = mv_json_str(mine, "effectId");
        if (stored && step_is(stored, MV_STEP_EXECUTING) && id && is(stored, "effectId", id)) {
            json_array_set(json_object_get(fresh, "steps"), idx, mine);
            json_object_set(fresh, K_PENDING, pending);
        }
    }
    json_decref(*rec);
    *rec = fresh;
    return MV_OK;
}

static mv_code resume_loaded(mv_saga_engine *e, const mv_saga_definition *def, json_t **rec,
                             mv_abort *abort, mv_err *err) {
    mv_code rc;
    if (!saga_is(*rec, MV_SAGA_RUNNING)) return MV_OK;
    char saga_id[129];
    mv_strlcpy(saga_id, mv_json_str(*rec, "sagaId"), sizeof saga_id);
    mv_saga_ctx ctx = {.e = e, .def = def, .saga_id = saga_id, .rec = rec, .abort = abort};
    json_t *input = json_deep_copy(json_object_get(*rec, "input"));
    mv_err run_err = {0};
    rc = def->run(&ctx, input, def->ctx, &run_err);
    json_decref(input);
    if (rc == MV_OK) {
        if ((rc = refresh(e, saga_id, rec, err))) return rc;
        if (saga_is(*rec, MV_SAGA_RUNNING))
            return save_with(e, rec, MV_SAGA_COMPLETED, 0, NULL, err);
        return MV_OK;
    }
    if (run_err.code == MV_OK) run_err.code = rc;
    if (rc == MV_SAGA_CONCURRENCY) return mv_err_copy(err, &run_err); /* the winner goes on */
    mv_code lrc = refresh(e, saga_id, rec, err);
    if (lrc) return lrc;
    if (!saga_is(*rec, MV_SAGA_MANUAL_REVIEW) && (lrc = compensate_loaded(e, def, rec, abort, err)))
        return lrc;
    return mv_err_copy(err, &run_err);
}

mv_code mv_saga_resume(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                       mv_abort *abort, json_t **record, mv_err *err) {
    return as_runner(e, def, saga_id, abort, NULL, record, err, resume_loaded);
}

typedef struct {
    const char *id, *definition, *input, *fingerprint, *tenant, *runner;
    int max_attempts;
    int64_t now, until;
    bool created;
} create_tx;

static mv_code create_fn(mv_db *db, void *ctx, mv_err *err) {
    create_tx *t = ctx;
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_INSERT_SAGA, &changes, err, "ssssiiissi", t->id, t->definition,
                             t->input, t->fingerprint, (int64_t)t->max_attempts, t->now, t->now,
                             t->tenant, t->runner, t->until);
    t->created = changes == 1;
    return rc;
}

static mv_code create_blind_fn(mv_db *db, void *ctx, mv_err *err) {
    create_tx *t = ctx;
    return mv_db_execf_later_unique(db, SQL_INSERT_SAGA_BLIND, MV_SAGA_EXISTS, err, "ssssiiissi",
                                    t->id, t->definition, t->input, t->fingerprint,
                                    (int64_t)t->max_attempts, t->now, t->now, t->tenant, t->runner,
                                    t->until);
}

/* Inserts the saga's row (t->created: it was new). On PostgreSQL the INSERT goes blind first, so
 * the start is one round trip; a taken id is its unique violation (the transaction wrote nothing)
 * and any other failure but a lost connection runs the precise INSERT in a new transaction. The
 * blind INSERT only queues a statement (t is set after the outcome), so concurrent starts share
 * commits (mv__store_write_rerunnable, store/pg_batch.c). */
static mv_code create_write(mv_saga_engine *e, create_tx *t, mv_err *err) {
    if (mv_store_kind_of(e->store) == MV_STORE_POSTGRES) {
        mv_err blind = {0};
        mv_code rc = mv__store_write_rerunnable(e->store, create_blind_fn, t, &blind);
        if (rc == MV_OK || rc == MV_SAGA_EXISTS) {
            t->created = rc == MV_OK;
            return MV_OK;
        }
        if (rc == MV_STORE_UNAVAILABLE) return mv_err_copy(err, &blind);
    }
    return mv_store_write(e->store, create_fn, t, err);
}

/* Creates the row with this caller as its runner; *created (owned: the record as stored, with the
 * runner named) is NULL when the id is taken. */
static mv_code create(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                      const char *saga_id, const json_t *input, json_t **created, mv_err *err) {
    mv_code rc;
    *created = NULL;
    char runner[37];
    create_tx t = {.id = saga_id,
                   .definition = def->name,
                   .tenant = tenant ? tenant : "default",
                   .runner = runner,
                   .max_attempts = max_attempts(def)};
    if ((rc = mv_id_uuid(runner, err)) || (rc = now_ms(e, &t.now, err))) return rc;
    t.until = t.now + e->runner_lease_ms;
    char fp[65];
    json_t *null_input = input ? NULL : json_null();
    input_fingerprint(e, input ? input : null_input, fp);
    char *text = seal_value(e, saga_id, input ? input : null_input);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    t.input = text;
    t.fingerprint = fp;
    rc = create_write(e, &t, err);
    free(text);
    if (rc || !t.created) return rc;
    *created =
        json_pack("{s:s, s:s, s:s, s:o, s:s, s:[], s:i, s:I, s:I, s:i, s:s}", "sagaId", saga_id,
                  "definition", def->name, "state", mv_saga_state_name(MV_SAGA_RUNNING), "input",
                  input ? json_deep_copy(input) : json_null(), "inputFingerprint", fp, "steps",
                  "maxAttempts", t.max_attempts, "createdAt", (json_int_t)t.now, "updatedAt",
                  (json_int_t)t.now, "version", 1, K_RUNNER, runner);
    if (!*created) { /* the row exists and holds our lease: let it expire rather than lie */
        drop_runner(e, saga_id, runner);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    return MV_OK;
}

mv_code mv_saga_execute(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                        const json_t *input, mv_abort *abort, json_t **record, mv_err *err) {
    return mv_saga_execute_in(e, NULL, def, saga_id, input, abort, record, err);
}

mv_code mv_saga_execute_in(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                           const char *saga_id, const json_t *input, mv_abort *abort,
                           json_t **record, mv_err *err) {
    mv_code rc;
    json_t *created = NULL;
    if (record) *record = NULL;
    if (tenant && !mv_valid_token(tenant, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga tenant must be a bounded printable token");
    if ((rc = check_call(def, saga_id, abort, err))) return rc; /* nothing persisted */
    if ((rc = create(e, tenant, def, saga_id, input, &created, err))) return rc;
    if (!created) {
        mv_err_set(err, MV_SAGA_EXISTS, "saga %s: already exists", saga_id);
        if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
        return finish(e, saga_id, record, MV_SAGA_EXISTS);
    }
    return as_runner(e, def, saga_id, abort, created, record, err, resume_loaded);
}

mv_code mv_saga_start(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                      const json_t *input, mv_abort *abort, json_t **record, bool *replayed,
                      mv_err *err) {
    return mv_saga_start_in(e, NULL, def, saga_id, input, abort, record, replayed, err);
}

/* A start's checks, then the saga's row: *created is the new record (its runner lease taken), or
 * NULL when the id already exists (the caller answers as a replay). */
static mv_code checked_create(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                              const char *saga_id, const json_t *input, mv_abort *abort,
                              json_t **created, mv_err *err) {
    mv_code rc;
    if (tenant && !mv_valid_token(tenant, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga tenant must be a bounded printable token");
    if ((rc = check_call(def, saga_id, abort, err))) return rc;
    return create(e, tenant, def, saga_id, input, created, err);
}

mv_code mv_saga_start_in(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                         const char *saga_id, const json_t *input, mv_abort *abort, json_t **record,
                         bool *replayed, mv_err *err) {
    mv_code rc;
    json_t *created = NULL;
    if (record) *record = NULL;
    if (replayed) *replayed = false;
    if ((rc = checked_create(e, tenant, def, saga_id, input, abort, &created, err))) return rc;
    if (created) return as_runner(e, def, saga_id, abort, created, record, err, resume_loaded);
    char owner[256];
    if ((rc = mv_saga_tenant(e, saga_id, owner, err))) return rc;
    if (strcmp(owner, tenant ? tenant : "default") != 0) /* another tenant's id does not exist */
        return mv_err_set(err, MV_SAGA_NOT_FOUND, "saga %s: not found", saga_id);
    json_t *rec;
    if ((rc = load(e, saga_id, &rec, err))) return rc;
    char fp[65];
    json_t *null_input = input ? NULL : json_null();
    input_fingerprint(e, input ? input : null_input, fp);
    if (!is(rec, "definition", def->name))
        rc = mv_err_set(err, MV_SAGA_MISMATCH, "saga %s: belongs to another definition", saga_id);
    else if (!is(rec, "inputFingerprint", fp))
        rc = mv_err_set(err, MV_SAGA_MISMATCH, "saga %s: was started with a different input",
                        saga_id);
    else if (replayed)
        *replayed = true;
    if (rc && err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    if (record && rc == MV_OK) *record = public_json(rec);
    json_decref(rec);
    return rc;
}

/* ---- resolution ---------------------------------------------------------------------------- */

static mv_code resolution_error(const char *saga_id, const char *step, const char *what,
                                mv_err *err) {
    mv_err_set(err, MV_SAGA_RESOLUTION, "saga %s: step %s %s", saga_id, step, what);
    if (err) mv_strlcpy(err->saga_id, saga_id, sizeof err->saga_id);
    return MV_SAGA_RESOLUTION;
}

static mv_code resolve_loaded(mv_saga_engine *e, const mv_saga_definition *def, json_t **rec,
                              const mv_saga_resolution *res, mv_err *err) {
    const char *saga_id = mv_json_str(*rec, "sagaId");
    int index = find_step(*rec, "name", res->step);
    if (index < 0) return resolution_error(saga_id, res->step, "does not exist", err);
    json_t *step = json_deep_copy(json_array_get(json_object_get(*rec, "steps"), (size_t)index));
    const char *state_now = mv_json_str(step, "state");
    char what[160];
    mv_saga_state saga_state;
    mv_code rc = MV_OK;
    /* an execution outcome recorded by an operator settles the step's journal row too */
    journal_note note = {.effect_id = res->effect_id,
                         .from_mask = MV__EFFECT_MASK(MV_EFFECT_EXECUTING) |
                                      MV__EFFECT_MASK(MV_EFFECT_UNKNOWN)};
    const journal_note *noted = NULL;
    if (strcmp(res->kind, "execution") == 0) {
        if (!is(step, "effectId", res->effect_id))
            rc = resolution_error(saga_id, res->step, "execution effect id does not match", err);
        else if (!step_is(step, MV_STEP_EXECUTING) && !step_is(step, MV_STEP_AMBIGUOUS)) {
            snprintf(what, sizeof what, "is not awaiting an execution resolution (%s)", state_now);
            rc = resolution_error(saga_id, res->step, what, err);
        }
        if (rc) goto done;
        json_object_del(step, "errorCode");
        json_object_del(step, "result");
        if (strcmp(res->outcome, "committed") == 0) {
            set_step_state(step, MV_STEP_COMMITTED);
            if (res->result) json_object_set_new(step, "result", json_deep_copy(res->result));
            saga_state = MV_SAGA_RUNNING;
            note.to = MV_EFFECT_COMMITTED;
        } else {
            const char *code = res->error_code ? res->error_code : "not_committed";
            if (!mv_valid_error_code(code)) {
                rc = mv_err_set(err, MV_INVALID_ARGUMENT, "saga resolution errorCode is invalid");
                goto done;
            }
            set_step_state(step, MV_STEP_FAILED);
            json_object_set_new(step, "errorCode", json_string(code));
            saga_state = MV_SAGA_COMPENSATING;
            note.to = MV_EFFECT_FAILED;
            note.error_code = code;
        }
        noted = &note;
    } else {
        if (!is(step, "compensationEffectId", res->effect_id))
            rc = resolution_error(saga_id, res->step, "compensation effect id does not match", err);
        else if (!step_is(step, MV_STEP_COMPENSATING)) {
            snprintf(what, sizeof what, "is not awaiting a compensation resolution (%s)",
                     state_now);
            rc = resolution_error(saga_id, res->step, what, err);
        }
        if (rc) goto done;
        json_object_del(step, "errorCode");
        json_object_del(step, "nextAttemptAt");
        bool compensated = strcmp(res->outcome, "compensated") == 0;
        set_step_state(step, compensated ? MV_STEP_COMPENSATED : MV_STEP_COMPENSATION_FAILED);
        int max =
            def ? max_attempts(def) : (int)json_integer_value(json_object_get(*rec, "maxAttempts"));
        if (max < 1) max = MV_DEFAULT_SAGA_MAX_ATTEMPTS;
        saga_state = !compensated && json_integer_value(json_object_get(step, "attempts")) >= max
                         ? MV_SAGA_MANUAL_REVIEW
                         : MV_SAGA_COMPENSATING;
    }
    return save_with_noted(e, rec, saga_state, index, step, noted, err);
done:
    json_decref(step);
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
    json_t *rec = NULL;
    if (!(rc = load(e, saga_id, &rec, err)) && !(rc = check_definition(def, rec, err)))
        rc = resolve_loaded(e, def, &rec, res, err);
    json_decref(rec);
    return finish(e, saga_id, record, rc);
}

typedef struct {
    const char *id;
    char *out;
    bool found;
} tenant_tx;

static mv_code tenant_fn(mv_db *db, void *ctx, mv_err *err) {
    tenant_tx *t = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_SAGA_TENANT, &st, err, "s", t->id);
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
    json_t *rec;
    mv_code rc = load(e, saga_id, &rec, err);
    if (rc) return rc;
    *record = public_json(rec);
    json_decref(rec);
    return *record ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

/* ---- the runner in halves (durable_internal.h) -------------------------------------------------
 * The same run as as_runner + resume_loaded + mv_saga_step + compensate_loaded, cut where the
 * executor or a compensator would be called, so that a driver can make those calls elsewhere (on
 * the outgoing-call loop) and come back with their outcome on another thread. Every save is the
 * engine's own (step_intent, step_committed, step_failed, comp_*, save_with, end_run) and the
 * lifecycle events are those mv_effect_run emits, in the same order. */

struct mv__saga_runner {
    mv_saga_engine *e;
    const mv_saga_definition *def;
    char saga_id[129], runner[37];
    json_t *rec;
    mv_saga_ctx ctx;
    /* the step in flight */
    step_run step;
    char step_name[129], effect_id[37];
    mv_effect_context c;
    int64_t started;
    /* after the steps: the run's error, returned once compensation is done */
    mv_err run_err;
    int comp_index;
    comp_run comp;
    bool comp_live; /* comp.step is owned */
    mv__saga_comp_call comp_call;
};

static void runner_emit(mv__saga_runner *r, mv_effect_phase phase, int64_t since,
                        const char *error_code) {
    int64_t at = mv_clock_now(r->e->clock);
    mv_effect_event ev = {.effect_id = r->c.effect_id,
                          .capability = r->c.capability,
                          .stage = r->c.stage,
                          .phase = phase,
                          .at = at,
                          .duration_ms = since < 0 ? -1 : (at >= since ? at - since : 0),
                          .attempt = r->c.attempt,
                          .error_code = error_code};
    mv_effect_observer obs[2] = {r->e->observer, {0}};
    mv_effect_emit(obs, 2, &ev);
}

static mv__saga_runner *runner_new(mv_saga_engine *e, const mv_saga_definition *def,
                                   const char *saga_id, const char *runner, json_t *rec) {
    mv__saga_runner *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->e = e;
    r->def = def;
    mv_strlcpy(r->saga_id, saga_id, sizeof r->saga_id);
    mv_strlcpy(r->runner, runner, sizeof r->runner);
    r->rec = rec;
    r->ctx = (mv_saga_ctx){.e = e, .def = def, .saga_id = r->saga_id, .rec = &r->rec};
    return r;
}

mv_code mv__saga_runner_start(mv_saga_engine *e, const char *tenant, const mv_saga_definition *def,
                              const char *saga_id, const json_t *input, mv__saga_runner **out,
                              json_t **record, bool *replayed, mv_err *err) {
    mv_code rc;
    json_t *created = NULL;
    *out = NULL;
    if (record) *record = NULL;
    if (replayed) *replayed = false;
    if ((rc = checked_create(e, tenant, def, saga_id, input, NULL, &created, err))) return rc;
    if (created) {
        *out = runner_new(e, def, saga_id, mv_json_str(created, K_RUNNER), created);
        if (*out) return MV_OK;
        drop_runner(e, saga_id, mv_json_str(created, K_RUNNER));
        json_decref(created);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    /* taken: what mv_saga_start_in answers (nothing runs) */
    return mv_saga_start_in(e, tenant, def, saga_id, input, NULL, record, replayed, err);
}

mv_code mv__saga_runner_take(mv_saga_engine *e, const mv_saga_definition *def, const char *saga_id,
                             mv__saga_runner **out, json_t **record, mv_err *err) {
    mv_code rc;
    char runner[37];
    json_t *rec = NULL;
    *out = NULL;
    if (record) *record = NULL;
    if ((rc = check_call(def, saga_id, NULL, err)) || (rc = take_runner(e, saga_id, runner, err)))
        return finish(e, saga_id, record, rc);
    if (!(rc = load(e, saga_id, &rec, err)) && !(rc = check_definition(def, rec, err))) {
        json_object_set_new(rec, K_RUNNER, json_string(runner));
        if ((*out = runner_new(e, def, saga_id, runner, rec))) return MV_OK;
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    end_run(e, saga_id, &rec, runner);
    rc = finish_run(e, saga_id, rec, record, rc);
    json_decref(rec);
    return rc;
}

const char *mv__saga_runner_id(const mv__saga_runner *r) { return r->saga_id; }

bool mv__saga_runner_running(const mv__saga_runner *r) { return saga_is(r->rec, MV_SAGA_RUNNING); }

bool mv__saga_runner_compensating(const mv__saga_runner *r) {
    return saga_is(r->rec, MV_SAGA_COMPENSATING);
}

json_t *mv__saga_runner_input(const mv__saga_runner *r) {
    return json_deep_copy(json_object_get(r->rec, "input"));
}

json_t *mv__saga_runner_results(const mv__saga_runner *r) { return mv_saga_ctx_results(&r->ctx); }

int64_t mv__saga_runner_lease_ms(const mv__saga_runner *r) { return r->e->runner_lease_ms; }

static const char SQL_EXTEND_RUNNER[] =
    "UPDATE sagas SET runner_expires_at = ? WHERE saga_id = ? AND runner_id = ?";

typedef struct {
    const char *id, *runner;
    int64_t until, changes;
} extend_tx;

static mv_code extend_fn(mv_db *db, void *ctx, mv_err *err) {
    extend_tx *t = ctx;
    return mv_db_execf(db, SQL_EXTEND_RUNNER, &t->changes, err, "iss", t->until, t->id, t->runner);
}

bool mv__saga_runner_extend(const mv__saga_runner *r) {
    int64_t now;
    if (now_ms(r->e, &now, NULL)) return true; /* a clock that cannot be read: try again later */
    extend_tx t = {.id = r->saga_id, .runner = r->runner};
    t.until = now > MV_MAX_SAFE_INT - r->e->runner_lease_ms ? MV_MAX_SAFE_INT
                                                            : now + r->e->runner_lease_ms;
    if (mv_store_write(r->e->store, extend_fn, &t, NULL) != MV_OK) return true;
    return t.changes == 1;
}

mv_code mv__saga_runner_step_begin(mv__saga_runner *r, const char *name,
                                   const json_t *compensation_args, const char **effect_id,
                                   mv_err *err) {
    mv_saga_engine *e = r->e;
    mv_code rc;
    *effect_id = NULL;
    /* mv_saga_step's checks and its answer for a step already in the record */
    if (!mv_valid_token(name, 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step must be a bounded printable token");
    if (!find_compensator(r->def, name))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "saga step %s has no compensator", name);
    int index = find_step(r->rec, "name", name);
    if (index >= 0) {
        json_t *existing = json_array_get(json_object_get(r->rec, "steps"), (size_t)index);
        if (step_is(existing, MV_STEP_COMMITTED)) return MV_OK;
        if (step_is(existing, MV_STEP_EXECUTING) || step_is(existing, MV_STEP_AMBIGUOUS)) {
            if (!saga_is(r->rec, MV_SAGA_MANUAL_REVIEW) &&
                (rc = save_with(e, &r->rec, MV_SAGA_MANUAL_REVIEW, 0, NULL, err)))
                return rc;
            return ambiguous(r->saga_id, name, err);
        }
        return mv_err_set(err, MV_SAGA_RESOLUTION, "saga %s: step %s cannot resume from %s",
                          r->saga_id, name, mv_json_str(existing, "state"));
    }
    char comp_id[37];
    if ((rc = mv_id_uuid(r->effect_id, err)) || (rc = mv_id_uuid(comp_id, err))) return rc;
    mv_strlcpy(r->step_name, name, sizeof r->step_name);
    r->step = (step_run){.ctx = &r->ctx, .name = r->step_name, .effect_id = r->effect_id};
    r->step.step =
        json_pack("{s:s, s:s, s:s, s:s, s:O, s:i}", "name", name, "effectId", r->effect_id,
                  "compensationEffectId", comp_id, "state",
                  mv_saga_step_state_name(MV_STEP_EXECUTING), "compensationArgs",
                  compensation_args ? (json_t *)compensation_args : json_null(), "attempts", 0);
    if (!r->step.step) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (compensation_args)
        json_object_set_new(r->step.step, "compensationArgs", json_deep_copy(compensation_args));
    /* mv_effect_run up to the executor: the intent, then "started" */
    r->c =
        (mv_effect_context){.effect_id = r->effect_id,
                            .capability = r->def->capability ? r->def->capability : "saga.execute",
                            .stage = MV_STAGE_EXECUTION};
    r->started = mv_clock_now(e->clock);
    mv_err orig = {0};
    if ((rc = step_intent(&r->c, &r->step, &orig))) {
        if (orig.code == MV_OK) orig.code = rc;
        runner_emit(r, MV_PHASE_FAILED, r->started,
                    step_error_code(&orig, false, &r->step)); /* aborted_before_execution */
        json_decref(r->step.step);
        r->step.step = NULL;
        mv_err_copy(err, &orig);
        if (err) mv_strlcpy(err->saga_id, r->saga_id, sizeof err->saga_id);
        return orig.code;
    }
    r->started = mv_clock_now(e->clock);
    runner_emit(r, MV_PHASE_STARTED, -1, NULL);
    *effect_id = r->effect_id;
    return MV_OK;
}

mv_code mv__saga_runner_step_end(mv__saga_runner *r, mv_code call_rc, json_t *result,
                                 const char *error_code, const mv_err *call_err, mv_err *err) {
    mv_err orig = {0};
    mv_code rc = call_rc;
    if (rc != MV_OK && call_err) mv_err_copy(&orig, call_err);
    mv_strlcpy(r->step.call.error_code, error_code ? error_code : "",
               sizeof r->step.call.error_code);
    if (rc == MV_SAGA_STEP_FAILED && r->step.call.error_code[0] &&
        !mv_valid_error_code(r->step.call.error_code)) {
        json_decref(result);
        result = NULL;
        rc = mv_err_set(&orig, MV_INVALID_ARGUMENT, "saga step error code is invalid");
    }
    if (rc == MV_OK && !(rc = step_committed(&r->c, result, &r->step, &orig))) {
        runner_emit(r, MV_PHASE_SUCCEEDED, r->started, NULL);
        json_decref(result);
        json_decref(r->step.step);
        r->step.step = NULL;
        return MV_OK;
    }
    json_decref(result);
    if (orig.code == MV_OK) orig.code = rc;
    const char *code = step_error_code(&orig, true, &r->step);
    mv_effect_phase phase = step_phase(&orig, true, &r->step);
    mv_err ignored = {0};
    mv_effect_failure f = {.began = true, .error_code = code, .error = &orig};
    (void)step_failed(&r->c, &f, &r->step, &ignored);
    runner_emit(r, phase, r->started, code);
    json_decref(r->step.step);
    r->step.step = NULL;
    mv_err_copy(err, &orig);
    if (err) mv_strlcpy(err->saga_id, r->saga_id, sizeof err->saga_id);
    return orig.code;
}

/* compensate_loaded's loop from r->comp_index down: the next call to make (*call), or the end of
 * the compensation (its result). */
static mv_code comp_advance(mv__saga_runner *r, const mv__saga_comp_call **call, mv_err *err) {
    mv_saga_engine *e = r->e;
    mv_code rc;
    for (; r->comp_index >= 0; r->comp_index--) {
        int pick = comp_pick(e, r->def, &r->rec, r->comp_index, &r->comp, &rc, err);
        if (pick == PICK_SKIP) continue;
        if (pick == PICK_STOP) return rc;
        const mv_saga_compensator *comp = r->comp.comp;
        r->comp_live = true;
        r->c = (mv_effect_context){.effect_id = mv_json_str(r->comp.step, "compensationEffectId"),
                                   .capability =
                                       r->def->capability ? r->def->capability : "saga.compensate",
                                   .stage = MV_STAGE_COMPENSATION,
                                   .attempt = r->comp.attempt};
        r->started = mv_clock_now(e->clock);
        /* mv_effect_run up to the executor: the executing transition, then "started" */
        mv_err orig = {0};
        if ((rc = comp_executing(&r->c, &r->comp, &orig))) {
            if (orig.code == MV_OK) orig.code = rc;
            mv_err ignored = {0};
            mv_effect_failure f = {
                .began = false, .error_code = "compensation_failed", .error = &orig};
            (void)comp_failed(&r->c, &f, &r->comp, &ignored);
            runner_emit(r, MV_PHASE_FAILED, r->started, "compensation_failed");
            json_decref(r->comp.step);
            r->comp_live = false;
            if (r->comp.has_transition_error) return mv_err_copy(err, &r->comp.transition_error);
            return MV_OK;
        }
        r->started = mv_clock_now(e->clock);
        runner_emit(r, MV_PHASE_STARTED, -1, NULL);
        r->comp_call =
            (mv__saga_comp_call){.comp = comp,
                                 .args = json_object_get(r->comp.step, "compensationArgs"),
                                 .call = {.saga_id = r->saga_id,
                                          .step = mv_json_str(r->comp.step, "name"),
                                          .effect_id = r->c.effect_id,
                                          .attempt = r->comp.attempt,
                                          .result = json_object_get(r->comp.step, "result")}};
        *call = &r->comp_call;
        return MV_OK;
    }
    return save_with(e, &r->rec, MV_SAGA_COMPENSATED, 0, NULL, err);
}

/* The end of the compensation a run went into: its error, or the run's. */
static mv_code comp_over(mv__saga_runner *r, mv_code lrc, mv_err *err) {
    if (lrc) return lrc;
    return mv_err_copy(err, &r->run_err);
}

/* compensate_loaded's prelude; then the first call. */
static mv_code comp_begin(mv__saga_runner *r, const mv__saga_comp_call **call, mv_err *err) {
    bool go = false;
    mv_code rc = comp_prelude(r->e, &r->rec, r->saga_id, &go, err);
    if (rc || !go) return rc;
    r->comp_index = (int)json_array_size(json_object_get(r->rec, "steps")) - 1;
    return comp_advance(r, call, err);
}

mv_code mv__saga_runner_ran(mv__saga_runner *r, mv_code run_rc, const mv_err *run_err,
                            const mv__saga_comp_call **call, mv_err *err) {
    mv_code rc;
    *call = NULL;
    if (run_rc == MV_OK) { /* resume_loaded after a run that returned MV_OK */
        if ((rc = refresh(r->e, r->saga_id, &r->rec, err))) return rc;
        if (saga_is(r->rec, MV_SAGA_RUNNING))
            return save_with(r->e, &r->rec, MV_SAGA_COMPLETED, 0, NULL, err);
        return MV_OK;
    }
    memset(&r->run_err, 0, sizeof r->run_err);
    if (run_err) mv_err_copy(&r->run_err, run_err);
    if (r->run_err.code == MV_OK) r->run_err.code = run_rc;
    if (run_rc == MV_SAGA_CONCURRENCY) return mv_err_copy(err, &r->run_err);
    if ((rc = refresh(r->e, r->saga_id, &r->rec, err))) return rc;
    if (saga_is(r->rec, MV_SAGA_MANUAL_REVIEW)) return mv_err_copy(err, &r->run_err);
    rc = comp_begin(r, call, err);
    return *call ? MV_OK : comp_over(r, rc, err);
}

mv_code mv__saga_runner_compensate(mv__saga_runner *r, const mv__saga_comp_call **call,
                                   mv_err *err) {
    *call = NULL;
    r->run_err = (mv_err){0}; /* compensate_loaded alone: its own result */
    return comp_begin(r, call, err);
}

mv_code mv__saga_runner_comp_end(mv__saga_runner *r, mv_code call_rc, const mv_err *call_err,
                                 const mv__saga_comp_call **call, mv_err *err) {
    *call = NULL;
    mv_code rc = call_rc;
    mv_err orig = {0};
    if (rc != MV_OK && call_err) mv_err_copy(&orig, call_err);
    if (rc == MV_OK && !(rc = comp_committed(&r->c, NULL, &r->comp, &orig))) {
        runner_emit(r, MV_PHASE_SUCCEEDED, r->started, NULL);
        json_decref(r->comp.step);
        r->comp_live = false;
        r->comp_index--;
        rc = comp_advance(r, call, err);
        return *call ? MV_OK : comp_over(r, rc, err);
    }
    if (orig.code == MV_OK) orig.code = rc;
    mv_err ignored = {0};
    mv_effect_failure f = {.began = true, .error_code = "compensation_failed", .error = &orig};
    (void)comp_failed(&r->c, &f, &r->comp, &ignored);
    runner_emit(r, MV_PHASE_FAILED, r->started, "compensation_failed");
    json_decref(r->comp.step);
    r->comp_live = false;
    /* the failed attempt is recorded; the next call retries when due */
    return comp_over(
        r, r->comp.has_transition_error ? mv_err_copy(err, &r->comp.transition_error) : MV_OK, err);
}

mv_code mv__saga_runner_finish(mv__saga_runner *r, mv_code rc, json_t **record) {
    if (!r) return rc;
    if (r->step.step) json_decref(r->step.step);
    if (r->comp_live) json_decref(r->comp.step);
    end_run(r->e, r->saga_id, &r->rec, r->runner);
    rc = finish_run(r->e, r->saga_id, r->rec, record, rc);
    json_decref(r->rec);
    free(r);
    return rc;
}
