/* missive/durable.h — durable execution primitives: the effect journal, the effect scope that
 * drives it, human approvals with signed single-use resume tokens, sagas with compensation, and
 * reconciliation scans of whatever is left in doubt.
 *
 * Everything is persisted in an mv_store (schema from `missive migrate`); every contested change
 * is one conditional UPDATE on (state, version), so concurrent servers stay correct. External
 * calls (effect executors, saga steps, compensators) never run inside a transaction. Time comes
 * from an injectable mv_clock (integer ms since the epoch). Handles are thread-safe as long as
 * their store is; they keep no global state. */
#ifndef MISSIVE_DURABLE_H
#define MISSIVE_DURABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "missive/base.h"
#include "missive/error.h"
#include "missive/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- cancellation -------------------------------------------------------------------------- */

/* A cancellation flag, checked like an AbortSignal before every durable transition. Caller-owned;
 * zero-initialise it. Firing is thread-safe; the reason becomes the MV_ABORTED message. */
typedef struct mv_abort {
#ifdef __cplusplus
    volatile int aborted; /* _Atomic int in C, same size and alignment: use the functions below */
#else
    _Atomic int aborted;
#endif
    char reason[256];
} mv_abort;

/* Sets the flag (first reason wins; NULL reason → "operation aborted"). NULL-safe. */
void mv_abort_fire(mv_abort *abort, const char *reason);
/* True once fired. NULL → false. */
bool mv_abort_is_set(const mv_abort *abort);

/* ---- effect lifecycle events ------------------------------------------------------------- */

typedef enum mv_effect_stage {
    MV_STAGE_EXECUTION = 0, /* zero so a zeroed input means "execution" */
    MV_STAGE_ADMISSION,
    MV_STAGE_COMPENSATION,
    MV_STAGE_RECONCILIATION,
} mv_effect_stage;

typedef enum mv_effect_phase {
    MV_PHASE_STARTED,
    MV_PHASE_SUCCEEDED,
    MV_PHASE_FAILED,
    MV_PHASE_AMBIGUOUS,
} mv_effect_phase;

/* "execution", "admission", "compensation", "reconciliation" / "started", "succeeded", ... */
const char *mv_effect_stage_name(mv_effect_stage stage);
const char *mv_effect_phase_name(mv_effect_phase phase);

/* A token-only event: never inputs, results or secrets. Optional fields are NULL / -1 / 0. */
typedef struct mv_effect_event {
    const char *effect_id;
    const char *capability;
    mv_effect_stage stage;
    mv_effect_phase phase;
    int64_t at;
    int64_t duration_ms; /* -1 when absent */
    int attempt;         /* 0 when absent */
    const char *error_code;
    const char *target;
    const char *digest;
} mv_effect_event;

/* Observers are fail-open: they cannot fail the effect. Invalid events are dropped silently. */
typedef struct mv_effect_observer {
    void (*fn)(const mv_effect_event *event, void *ctx);
    void *ctx;
} mv_effect_observer;

/* ---- journal ------------------------------------------------------------------------------- */

/* Effect states: admission → executing → committed; failed(began=false) → failed;
 * failed(began=true) → unknown (from whatever the current state is). */
typedef enum mv_effect_state {
    MV_EFFECT_ADMISSION,
    MV_EFFECT_EXECUTING,
    MV_EFFECT_COMMITTED,
    MV_EFFECT_FAILED,
    MV_EFFECT_UNKNOWN,
} mv_effect_state;

/* "admission", "executing", "committed", "failed" or "unknown" (static strings). */
const char *mv_effect_state_name(mv_effect_state state);

typedef struct mv_journal mv_journal;

typedef struct mv_journal_options {
    const mv_clock *clock; /* NULL → wall clock */
    bool allow_memory;     /* accept sqlite::memory: (tests only) */
} mv_journal_options;

/* Binds a journal to store (borrowed: it must outlive the journal). Refuses a memory store with
 * MV_INVALID_ARGUMENT "durable effect journal requires a durable store" unless allow_memory.
 * *out is freed with mv_journal_free(). */
mv_code mv_journal_new(mv_store *store, const mv_journal_options *opts, mv_journal **out,
                       mv_err *err);
void mv_journal_free(mv_journal *journal);

/* What an intent records. Optional fields are NULL. Rules: effect_id a printable token ≤ 64;
 * capability a valid capability id (≤ 128); target printable ≤ 128; digest 64 lowercase hex;
 * tenant_id and principal_id printable ≤ 255, both or neither. */
typedef struct mv_effect_intent {
    const char *effect_id;
    const char *capability;
    const char *target;
    const char *digest;
    const char *tenant_id;
    const char *principal_id;
} mv_effect_intent;

/* A stored effect. Empty strings mean absent. */
typedef struct mv_effect_record {
    char effect_id[65];
    char capability[129];
    char target[129];
    char digest[65];
    char tenant_id[256];
    char principal_id[256];
    mv_effect_state state;
    char error_code[65];
    int64_t created_at, updated_at, version;
} mv_effect_record;

/* Each transition is one conditional UPDATE on (state, version) → version + 1. A rejected one
 * fails with MV_EFFECT_TRANSITION "durable effect <id>: <from>-><to> transition was rejected"
 * (`create` for a duplicate intent, `missing` for an unknown id). Invalid input →
 * MV_INVALID_ARGUMENT naming the field; an invalid stored record → MV_INTERNAL. */
mv_code mv_journal_intent(mv_journal *journal, const mv_effect_intent *intent, mv_err *err);
mv_code mv_journal_executing(mv_journal *journal, const char *effect_id, mv_err *err);
mv_code mv_journal_committed(mv_journal *journal, const char *effect_id, mv_err *err);
mv_code mv_journal_failed(mv_journal *journal, const char *effect_id, bool began,
                          const char *error_code, mv_err *err);
/* Reads one record (validated). Unknown id → MV_NOT_FOUND. */
mv_code mv_journal_get(mv_journal *journal, const char *effect_id, mv_effect_record *out,
                       mv_err *err);

/* ---- effect scope ------------------------------------------------------------------------- */

/* Evidence of what happened to the effects of one request (§3.5): has any begun, committed, is
 * any in doubt. Caller-owned; zero-initialise. */
typedef struct mv_effect_evidence {
    bool began, committed, retry_declared;
    int uncertain;
} mv_effect_evidence;

/* Evidence of one effect (SEMANTICS §3.5): what is known to have happened. The marks move the
 * state; safe_to_retry is true only when a retry was declared safe and nothing began. */
void mv_evidence_mark_began(mv_effect_evidence *e);
void mv_evidence_mark_committed(mv_effect_evidence *e);
void mv_evidence_mark_ambiguous(mv_effect_evidence *e);
void mv_evidence_mark_failed(mv_effect_evidence *e);
/* MV_INVALID_ARGUMENT "cannot mark an idempotent request safe to retry after an effect began". */
mv_code mv_evidence_mark_safe_to_retry(mv_effect_evidence *e, mv_err *err);
bool mv_evidence_safe_to_retry(const mv_effect_evidence *e);
bool mv_evidence_ambiguous(const mv_effect_evidence *e);

/* A scope: default observer, default cancellation flag, clock, and the evidence it gathers.
 * Caller-owned plain struct; zero-initialise and set what you need. */
typedef struct mv_effect_scope {
    mv_effect_observer observer;
    mv_abort *abort;
    const mv_clock *clock;
    mv_effect_evidence evidence;
} mv_effect_scope;

/* What an executor and the transitions see. Optional strings are NULL, attempt 0 when absent. */
typedef struct mv_effect_context {
    const char *effect_id;
    const char *capability;
    mv_effect_stage stage;
    const char *target;
    const char *digest;
    const char *tenant_id;
    const char *principal_id;
    int attempt;
    mv_abort *abort; /* may be NULL */
} mv_effect_context;

typedef struct mv_effect_failure {
    bool began;
    const char *error_code;
    const mv_err *error; /* the executor's (or transition's) error */
} mv_effect_failure;

/* Durable transitions around the executor; any may be NULL. intent, executing and committed fail
 * the run when they fail; failed's errors are swallowed. */
typedef struct mv_effect_transitions {
    mv_code (*intent)(const mv_effect_context *c, void *ctx, mv_err *err);
    mv_code (*executing)(const mv_effect_context *c, void *ctx, mv_err *err);
    mv_code (*committed)(const mv_effect_context *c, const json_t *result, void *ctx, mv_err *err);
    mv_code (*failed)(const mv_effect_context *c, const mv_effect_failure *f, void *ctx,
                      mv_err *err);
    void *ctx;
} mv_effect_transitions;

/* The transitions that journal an effect in j (as executeCapability does). */
mv_effect_transitions mv_journal_transitions(mv_journal *j);

/* The executor: the side effect itself. *result (may stay NULL) is a new reference. */
typedef mv_code (*mv_effect_execute_fn)(const mv_effect_context *c, void *ctx, json_t **result,
                                        mv_err *err);

typedef struct mv_effect_input {
    const char *effect_id; /* NULL → a fresh UUID */
    const char *capability;
    const char *target, *digest;          /* optional */
    const char *tenant_id, *principal_id; /* optional identity, both or neither */
    mv_effect_stage stage;                /* default execution */
    int attempt;                          /* 0 = absent; otherwise ≥ 1 */
    /* Failure classification: error_code_fn, else error_code, else began ? "execution_failed" :
     * "admission_failed". failure_phase_fn (MV_PHASE_FAILED or MV_PHASE_AMBIGUOUS), else
     * began ? ambiguous : failed. */
    const char *error_code;
    const char *(*error_code_fn)(const mv_err *error, bool began, void *ctx);
    mv_effect_phase (*failure_phase_fn)(const mv_err *error, bool began, void *ctx);
    void *policy_ctx;
    /* Optional admission step run after intent (e.g. mv_approval_gate_admit). */
    mv_code (*admit)(const mv_effect_context *c, void *ctx, mv_err *err);
    void *admit_ctx;
    mv_effect_transitions transitions;
    mv_abort *abort;             /* NULL → scope->abort */
    mv_effect_observer observer; /* in addition to scope->observer */
} mv_effect_input;

/* Runs one owned effect: abort check → intent → admit (admission events) → abort check →
 * executing → execute (began) → committed. On any failure after the intent was recorded the
 * failed transition runs (its errors swallowed; a rejected intent recorded nothing, so it is not
 * "failed"), the evidence and a failed/ambiguous event are recorded, and the original error is
 * returned. Input errors (MV_INVALID_ARGUMENT) are returned before any transition. *result (may
 * be NULL) receives the executor's result, a new reference, on success. */
mv_code mv_effect_run(mv_effect_scope *scope, const mv_effect_input *input,
                      mv_effect_execute_fn execute, void *ctx, json_t **result, mv_err *err);

/* ---- approvals ---------------------------------------------------------------------------- */

/* States: pending → approved | denied (decide) → consumed (resume) ; pending/approved → expired. */
typedef struct mv_approvals mv_approvals;

typedef struct mv_approvals_options {
    const unsigned char *secret; /* ≥ 32 bytes; copied */
    size_t secret_len;
    int64_t ttl_ms; /* 0 → 900000 */
    const mv_clock *clock;
    bool allow_memory;
    /* false (the default): the approval's principal cannot decide it (MV_APPROVAL_BINDING). */
    bool allow_self_approval;
} mv_approvals_options;

/* MV_INVALID_ARGUMENT "approval secret must contain at least 32 random bytes" for a short secret,
 * "approval coordinator requires a durable store" for a memory store. */
mv_code mv_approvals_new(mv_store *store, const mv_approvals_options *opts, mv_approvals **out,
                         mv_err *err);
void mv_approvals_free(mv_approvals *approvals);

/* One authorization: what is bound into the approval. target/digest optional. */
typedef struct mv_approval_request {
    const char *effect_id;
    const char *capability;
    const char *target;
    const char *digest;
    const char *tenant_id;
    const char *principal_id;
    const char *resume_token; /* NULL → create a pending approval */
    int64_t ttl_ms;           /* 0 → the coordinator's */
    mv_abort *abort;
} mv_approval_request;

/* Without a token: stores a pending approval (only the token's SHA-256) and fails with
 * MV_APPROVAL_REQUIRED "capability approval is required", filling err->approval_id,
 * err->resume_token and err->expires_at. With a token: verifies it and consumes the approval in
 * one conditional UPDATE; fails with MV_APPROVAL_TOKEN_INVALID, _EXPIRED, MV_APPROVAL_BINDING,
 * MV_APPROVAL_TOKEN_REPLAY, MV_APPROVAL_PENDING or MV_APPROVAL_DENIED (§4.3 order). */
mv_code mv_approval_authorize(mv_approvals *approvals, const mv_approval_request *req, mv_err *err);
/* The token path of mv_approval_authorize inside the caller's write transaction on db (so the
 * caller can consume and claim in one transaction; nothing is kept if the caller rolls back —
 * including the `expired` marker). */
mv_code mv_approval_consume_tx(mv_approvals *approvals, mv_db *db, const mv_approval_request *req,
                               mv_err *err);

/* decision "approved" or "denied", by the same tenant, while pending and unexpired; else
 * MV_APPROVAL_DECISION_REJECTED "approval decision rejected". decided_by equal to the approval's
 * principal → MV_APPROVAL_BINDING unless allow_self_approval. */
mv_code mv_approval_decide(mv_approvals *approvals, const char *approval_id, const char *tenant_id,
                           const char *decision, const char *decided_by, mv_err *err);

/* A stored approval (never the token or its hash). Empty strings mean absent. */
typedef struct mv_approval_record {
    char approval_id[129];
    char effect_id[65];
    char capability[129];
    char target[129];
    char digest[65];
    char tenant_id[256];
    char principal_id[256];
    char state[16]; /* pending, approved, denied, consumed, expired */
    char decided_by[256];
    int64_t created_at, updated_at, expires_at, version;
} mv_approval_record;

/* tenant_id NULL = any tenant (operators); otherwise another tenant's approval is
 * MV_APPROVAL_NOT_FOUND, like a missing one. */
mv_code mv_approval_get(mv_approvals *approvals, const char *approval_id, const char *tenant_id,
                        mv_approval_record *out, mv_err *err);
/* {"approvalId","state","capability","target","tenantId","principalId","createdAt","expiresAt",
 * "decidedBy"?} — a new reference. */
json_t *mv_approval_to_json(const mv_approval_record *rec);

/* An admit callback for mv_effect_input.admit: authorizes c (capability, target, digest,
 * identity, effect id) through gate->approvals with gate->resume_token. */
typedef struct mv_approval_gate {
    mv_approvals *approvals;
    const char *resume_token;
    int64_t ttl_ms;
} mv_approval_gate;
mv_code mv_approval_gate_admit(const mv_effect_context *c, void *gate, mv_err *err);

/* ---- sagas -------------------------------------------------------------------------------- */

/* Saga states, and the states of its steps. Each state machine lives in durable/saga.c with one
 * name table and one transition table; the names below are what records and JSON carry. */
typedef enum mv_saga_state {
    MV_SAGA_RUNNING,       /* "running" */
    MV_SAGA_COMPENSATING,  /* "compensating" */
    MV_SAGA_COMPLETED,     /* "completed" */
    MV_SAGA_COMPENSATED,   /* "compensated" */
    MV_SAGA_MANUAL_REVIEW, /* "manual-review" */
    MV_SAGA_WAITING,       /* "waiting": until its wakeAt, before a delayed step */
    MV_SAGA_STATE_COUNT
} mv_saga_state;

typedef enum mv_saga_step_state {
    MV_STEP_EXECUTING,           /* "executing" */
    MV_STEP_COMMITTED,           /* "committed" */
    MV_STEP_FAILED,              /* "failed" */
    MV_STEP_AMBIGUOUS,           /* "ambiguous" */
    MV_STEP_COMPENSATING,        /* "compensating" */
    MV_STEP_COMPENSATED,         /* "compensated" */
    MV_STEP_COMPENSATION_FAILED, /* "compensation-failed" */
    MV_STEP_STATE_COUNT
} mv_saga_step_state;

/* The state's name ("invalid" out of range). */
const char *mv_saga_state_name(mv_saga_state state);
const char *mv_saga_step_state_name(mv_saga_step_state state);
/* The state named s, or -1 (s may be NULL). */
int mv_saga_state_parse(const char *s);
int mv_saga_step_state_parse(const char *s);

typedef struct mv_saga_engine mv_saga_engine;
typedef struct mv_saga_ctx mv_saga_ctx; /* valid during one run callback */

/* What a step executor sees. To say the effect conclusively did NOT commit, return
 * MV_SAGA_STEP_FAILED (optionally with error_code set, default "not_committed"); the saga then
 * compensates. Any other failure after the call began is ambiguous: the saga goes to
 * manual-review. */
typedef struct mv_saga_step_call {
    const char *saga_id;
    const char *step;
    const char *effect_id; /* use as the Idempotency-Key */
    mv_abort *abort;
    char error_code[65]; /* out, with MV_SAGA_STEP_FAILED */
} mv_saga_step_call;
typedef mv_code (*mv_saga_step_fn)(mv_saga_step_call *call, void *ctx, json_t **result,
                                   mv_err *err);

typedef struct mv_saga_compensation_call {
    const char *saga_id;
    const char *step;
    const char *effect_id; /* the step's compensationEffectId: the same on every attempt */
    int attempt;
    const json_t *result; /* the step's result (may be NULL) */
    mv_abort *abort;
} mv_saga_compensation_call;
typedef mv_code (*mv_saga_compensate_fn)(const json_t *args, const mv_saga_compensation_call *call,
                                         void *ctx, mv_err *err);

typedef struct mv_saga_compensator {
    const char *step;
    mv_saga_compensate_fn fn;
    void *ctx;
} mv_saga_compensator;

/* The run function calls mv_saga_step() for each step, in order, and returns MV_OK or the first
 * error. input is the stored input (read-only). */
typedef mv_code (*mv_saga_run_fn)(mv_saga_ctx *ctx, const json_t *input, void *def_ctx,
                                  mv_err *err);
/* Delay before compensation attempt n+1 after failed attempt n; must be ≥ 0. */
typedef int64_t (*mv_saga_backoff_fn)(int attempt, void *def_ctx);

typedef struct mv_saga_definition {
    const char *name;       /* printable token ≤ 128 */
    const char *capability; /* optional capability id, names the effects */
    mv_saga_run_fn run;
    const mv_saga_compensator *compensators;
    size_t ncompensators;
    int max_attempts;           /* compensation attempts; 0 → 3 */
    mv_saga_backoff_fn backoff; /* NULL → min(60000, 100·2^(attempt−1)) */
    void *ctx;                  /* passed to run and backoff */
} mv_saga_definition;

/* Validates a definition ("saga run must be a function", "saga maxAttempts must be a positive
 * safe integer", "saga compensator <n> must be a function", ...): MV_INVALID_ARGUMENT. */
mv_code mv_saga_definition_check(const mv_saga_definition *def, mv_err *err);

/* The size of a saga encryption key (AES-256-GCM). */
#define MV_SAGA_KEY_BYTES 32

typedef struct mv_saga_engine_options {
    const mv_clock *clock;
    mv_effect_observer observer;
    bool allow_memory;
    /* Optional AES-256-GCM key for input, results and compensation arguments at rest. */
    const unsigned char *encryption_key; /* MV_SAGA_KEY_BYTES, copied; NULL = plaintext */
    /* Called after every successful save, outside any transaction, with the saved record (public
     * shape, borrowed). For lease extension, metrics, tests. */
    void (*on_save)(const json_t *record, void *ctx);
    void *on_save_ctx;
    /* Resume and compensate hold the saga's runner lease (one runner at a time; a second gets
     * MV_SAGA_CONCURRENCY at once). Extended by every save. 0 → 30000. */
    int64_t runner_lease_ms;
} mv_saga_engine_options;

/* An engine over store (a durable store unless opts->allow_memory). opts may be NULL. Free with
 * mv_saga_engine_free (NULL-safe); the store must outlive it. */
mv_code mv_saga_engine_new(mv_store *store, const mv_saga_engine_options *opts,
                           mv_saga_engine **out, mv_err *err);
void mv_saga_engine_free(mv_saga_engine *engine);

/* Inside run: executes step `name` once. A step already committed returns its stored result
 * without running again; one left executing/ambiguous sends the saga to manual-review
 * (MV_SAGA_AMBIGUOUS_STEP). compensation_args (may be NULL) is stored for the compensator.
 * *result (may be NULL) receives a new reference to the step's result. */
mv_code mv_saga_step(mv_saga_ctx *ctx, const char *name, const json_t *compensation_args,
                     mv_saga_step_fn execute, void *cb_ctx, json_t **result, mv_err *err);
/* Inside run, before mv_saga_step(ctx, step, ...): the step runs delay_ms (0 ..
 * MV_SAGA_MAX_DELAY_MS) after the run first gets here. The first time, the saga is saved waiting
 * with "wakeAt" = updatedAt + delay_ms and a wake timer in the same transaction, and this returns
 * MV_SAGA_DELAYED: run returns it, and the engine call ends MV_OK with the saga waiting, holding
 * no thread. Its timer resumes it at wakeAt in whichever missived sharing the store claims it (a
 * program without the daemon calls mv_saga_resume at or after wakeAt); then this returns MV_OK
 * and the saga is running again. A step already started, or a delay of 0, returns MV_OK. */
#define MV_SAGA_MAX_DELAY_MS INT64_C(31536000000) /* 365 days */
mv_code mv_saga_delay(mv_saga_ctx *ctx, const char *step, int64_t delay_ms, mv_err *err);
const char *mv_saga_ctx_id(const mv_saga_ctx *ctx);
/* {"<step>": result, ...} of the steps committed so far (a new reference). */
json_t *mv_saga_ctx_results(const mv_saga_ctx *ctx);

/* In every call below, *record (may be NULL) receives the saga's JSON in its latest state,
 * {"sagaId","definition","state","input","steps":[...],"createdAt","updatedAt"} — also when an
 * error is returned, as long as the saga exists. Free with json_decref. Every save is a versioned
 * compare-and-set: a lost race fails with MV_SAGA_CONCURRENCY "saga <id>: concurrent transition
 * rejected" (and never compensates on the winner's behalf). */

/* Creates the saga (MV_SAGA_EXISTS "saga <id>: already exists" when the id is taken) and runs it.
 * A failing step's error is returned after compensating (or after manual-review). */
mv_code mv_saga_execute(mv_saga_engine *engine, const mv_saga_definition *def, const char *saga_id,
                        const json_t *input, mv_abort *abort, json_t **record, mv_err *err);
/* Idempotent start: like execute for a new id; for an existing one with the same definition and
 * the same input (canonical fingerprint) returns the current record with *replayed = true and
 * runs nothing; another definition or input → MV_SAGA_MISMATCH. */
mv_code mv_saga_start(mv_saga_engine *engine, const mv_saga_definition *def, const char *saga_id,
                      const json_t *input, mv_abort *abort, json_t **record, bool *replayed,
                      mv_err *err);
/* Continues a running saga, or a waiting one at or after its wakeAt (before it: left waiting;
 * other states: returned unchanged). */
mv_code mv_saga_resume(mv_saga_engine *engine, const mv_saga_definition *def, const char *saga_id,
                       mv_abort *abort, json_t **record, mv_err *err);
/* Compensates committed steps in reverse order, what is due now (completed/compensated:
 * unchanged; an ambiguous step: manual-review + MV_SAGA_AMBIGUOUS_STEP). */
mv_code mv_saga_compensate(mv_saga_engine *engine, const mv_saga_definition *def,
                           const char *saga_id, mv_abort *abort, json_t **record, mv_err *err);

/* An operator's resolution of an ambiguous step. kind "execution" (outcome "committed" with an
 * optional result, or "not-committed" with an optional error_code) or "compensation" (outcome
 * "compensated" or "not-compensated"). */
typedef struct mv_saga_resolution {
    const char *kind;
    const char *step;
    const char *effect_id;
    const char *outcome;
    const json_t *result;
    const char *error_code;
} mv_saga_resolution;
/* Records the outcome only (resume or compensate continues). def may be NULL: the maxAttempts
 * stored with the saga then decides manual-review. MV_SAGA_RESOLUTION for a step that does not
 * exist, a wrong effect id, or a step not awaiting resolution. */
mv_code mv_saga_resolve(mv_saga_engine *engine, const mv_saga_definition *def, const char *saga_id,
                        const mv_saga_resolution *resolution, json_t **record, mv_err *err);
/* MV_SAGA_NOT_FOUND when absent. */
mv_code mv_saga_get(mv_saga_engine *engine, const char *saga_id, json_t **record, mv_err *err);

/* Tenants (DESIGN "Security rules"): a saga belongs to the tenant it was created in ("default"
 * for mv_saga_execute / mv_saga_start). The _in variants create it in tenant (NULL = "default");
 * mv_saga_start_in answers MV_SAGA_NOT_FOUND for an id another tenant holds. Callers that act for
 * a tenant check mv_saga_tenant() before get, resume, compensate or resolve. */
mv_code mv_saga_execute_in(mv_saga_engine *engine, const char *tenant,
                           const mv_saga_definition *def, const char *saga_id, const json_t *input,
                           mv_abort *abort, json_t **record, mv_err *err);
mv_code mv_saga_start_in(mv_saga_engine *engine, const char *tenant, const mv_saga_definition *def,
                         const char *saga_id, const json_t *input, mv_abort *abort, json_t **record,
                         bool *replayed, mv_err *err);
/* The saga's tenant into out (256 bytes); MV_SAGA_NOT_FOUND when absent. */
mv_code mv_saga_tenant(mv_saga_engine *engine, const char *saga_id, char out[256], mv_err *err);

/* ---- reconciliation ----------------------------------------------------------------------- */

typedef struct mv_reconcile_options {
    int64_t stale_before; /* effects: only records updated at or before; sagas: stale-running */
    const char *cursor;   /* NULL = first page; else the previous page's cursor */
    int limit;            /* 0 → 100; 1..1000 */
    mv_effect_observer observer; /* effects: a reconciliation event per finding */
    const mv_clock *clock;       /* the events' time; NULL → wall clock */
} mv_reconcile_options;

typedef struct mv_reconcile_page {
    json_t *findings; /* array of finding objects (owned; free with mv_reconcile_page_clear) */
    char cursor[256]; /* "" on the last page */
} mv_reconcile_page;

/* Releases page->findings and resets the cursor (NULL-safe). */
void mv_reconcile_page_clear(mv_reconcile_page *page);

/* One page over effects in admission/executing/unknown updated at or before stale_before:
 * {"effectId","capability","state":"incomplete"|"ambiguous","updatedAt"}. Keyset-paged over the
 * (state, updated_at) index: cost follows the non-terminal records only. Errors:
 * MV_INVALID_ARGUMENT "reconciliation limit must be between 1 and 1000",
 * "invalid reconciliation cursor". */
mv_code mv_reconcile_effects_page(mv_store *store, const mv_reconcile_options *opts,
                                  mv_reconcile_page *out, mv_err *err);
/* One page over sagas in running/compensating/manual-review: {"sagaId","state","step"?,
 * "effectId"?,"reason":"ambiguous-execution"|"ambiguous-compensation"|"manual-review"|
 * "stale-running"} (stale: updated at or before stale_before). Keyset-paged in start order over
 * the (state, created_at) index (migration 12), so a saga saved between two pages is neither
 * skipped nor repeated. */
mv_code mv_reconcile_sagas_page(mv_store *store, const mv_reconcile_options *opts,
                                mv_reconcile_page *out, mv_err *err);
/* All findings as one page of 1000; more than that fails with MV_INVALID_ARGUMENT "effect
 * reconciliation exceeds 1000 records; use mv_reconcile_effects_page()" (saga: likewise).
 * *findings is a new reference. */
mv_code mv_reconcile_effects(mv_store *store, int64_t stale_before, mv_effect_observer observer,
                             json_t **findings, mv_err *err);
mv_code mv_reconcile_sagas(mv_store *store, int64_t stale_before, json_t **findings, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
