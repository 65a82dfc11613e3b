/* saga_internal.h — what the saga engine's files (saga.c, saga_record.c, saga_store.c,
 * saga_seal.c, saga_resolve.c, saga_runner.c, saga_wake.c) share: the engine and run context, the
 * typed saga record, and the functions one file gives another. Not installed. */
#ifndef MISSIVE_DURABLE_SAGA_INTERNAL_H
#define MISSIVE_DURABLE_SAGA_INTERNAL_H

#include <string.h>

#include "durable/durable_internal.h"
#include "missive/saga_webhook.h"

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
    /* the wake timer's definitions (mv__saga_wake_register) */
    const mv_saga_definition *(*find)(void *ctx, const char *name);
    void *find_ctx;
    mv_saga_async wake_env; /* wake_env.loop set: a book's saga is resumed on that loop */
};

/* ---- the saga record: the saga row and its saga_steps rows, parsed once when loaded and
 * written back one transition at a time (saga_store.c). The payloads (input, a step's result and
 * compensation arguments) stay JSON; everything the engine reads or changes is a field. */

/* One step: one saga_steps row. */
typedef struct {
    char name[129];
    char effect_id[65], comp_id[65];
    mv_saga_step_state state;
    json_t *args;        /* the compensation arguments (owned; JSON null when none) */
    json_t *result;      /* owned; NULL: none (a JSON null is a result) */
    int64_t attempts;    /* compensation attempts made */
    char error_code[65]; /* "": none */
    bool has_next;       /* nextAttemptAt: a failed compensation's next retry */
    int64_t next_at;
} mv__saga_step;

/* One saga: its row of sagas, its steps in order, and what the run in this process holds. */
typedef struct {
    char id[129], definition[129], tenant[256], fingerprint[65];
    mv_saga_state state;
    json_t *input; /* owned */
    int64_t max_attempts, created_at, updated_at, version;
    bool has_wake_at; /* wakeAt: the saga's last wait (see mv__saga_with) */
    int64_t wake_at;
    mv__saga_step *steps;
    size_t nsteps, cap;
    /* the run's own state, never stored as such */
    char runner[37]; /* the runner lease this process holds ("": none), until it drops it */
    int pending;     /* index of a committed step not yet written, or -1 */
    bool stale;      /* a save failed: the store may differ from memory */
    bool end_run;    /* this save ends the run: it drops the runner lease */
} mv__saga_record;

struct mv_saga_ctx {
    mv_saga_engine *e;
    const mv_saga_definition *def;
    const char *saga_id;
    mv__saga_record **rec; /* the runner's current record */
    mv_abort *abort;
};

/* State of a saga record / of a step. */
static inline bool saga_is(const mv__saga_record *rec, mv_saga_state state) {
    return rec->state == state;
}

static inline bool step_is(const mv__saga_step *step, mv_saga_step_state state) {
    return step->state == state;
}

/* The timer that wakes a waiting saga (saga_wake.c): kind, and id "saga:<saga id>" into out
 * (MV__TIMER_ID_MAX bytes; a saga id is at most 128). */
#define MV__SAGA_WAKE_KIND "saga_wake"
static inline void mv__saga_timer_id(const char *saga_id, char *out) {
    size_t n = strlen(saga_id);
    memcpy(out, "saga:", 5);
    memcpy(out + 5, saga_id, n + 1);
}

/* with(): keep the saga's state. */
#define KEEP_STATE (-1)

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

typedef struct {
    mv_saga_ctx *ctx;
    const char *name;
    mv__saga_step step; /* the new step (owned) */
    mv_saga_step_fn execute;
    void *cb_ctx;
    mv_saga_step_call call;
    const char *effect_id;
} step_run;

typedef struct {
    mv_saga_engine *e;
    const mv_saga_definition *def;
    const mv_saga_compensator *comp;
    mv__saga_record **rec;
    int index, attempt, max;
    mv__saga_step step; /* the step being compensated (owned) */
    mv_err transition_error;
    bool has_transition_error;
} comp_run;

typedef mv_code (*loaded_fn)(mv_saga_engine *e, const mv_saga_definition *def,
                             mv__saga_record **rec, mv_abort *abort, mv_err *err);

/* ---- saga_record.c: states, the engine, the record, load, the public shape, with() */
mv_code mv__saga_now_ms(mv_saga_engine *e, int64_t *out, mv_err *err);
mv__saga_record *mv__saga_record_new(void);
void mv__saga_record_free(mv__saga_record *rec);
mv__saga_record *mv__saga_record_copy(const mv__saga_record *rec); /* NULL: out of memory */
void mv__saga_step_copy(mv__saga_step *dst, const mv__saga_step *src);
void mv__saga_step_clear(mv__saga_step *step);
bool mv__saga_record_append(mv__saga_record *rec, mv__saga_step *step); /* moves *step in */
/* A new step, executing (names at most 128 bytes, effect ids 64; the arguments copied). */
mv_code mv__saga_new_step(mv__saga_step *step, const char *name, const char *effect_id,
                          const char *comp_id, const json_t *compensation_args, mv_err *err);
mv_code mv__saga_load(mv_saga_engine *e, const char *id, mv__saga_record **out, mv_err *err);
json_t *mv__saga_public_json(const mv__saga_record *rec);
/* A copy of rec with a new state (KEEP_STATE: unchanged), step `index` replaced by *step (moved
 * out of *step; NULL: unchanged) and updatedAt = now; every change of state is checked against
 * the transition tables here. */
mv_code mv__saga_with(mv_saga_engine *e, const mv__saga_record *rec, int state, int index,
                      mv__saga_step *step, mv__saga_record **out, mv_err *err);
mv_code mv__saga_finish(mv_saga_engine *e, const char *saga_id, json_t **record, mv_code rc);

/* ---- saga_seal.c: encryption at rest */
json_t *mv__saga_unseal_value(const mv_saga_engine *e, const char *saga_id, const char *text);
char *mv__saga_seal_value(const mv_saga_engine *e, const char *saga_id, const json_t *v);
void mv__saga_input_fingerprint(const mv_saga_engine *e, const json_t *input, char out[65]);

/* ---- saga_store.c: saves and the runner lease */
mv_code mv__saga_concurrency(const char *id, mv_err *err);
mv_code mv__saga_save_noted(mv_saga_engine *e, mv__saga_record **rec, mv__saga_record *next,
                            int index, bool insert, const journal_note *note, mv_err *err);
mv_code mv__saga_save_with_noted(mv_saga_engine *e, mv__saga_record **rec, int state, int index,
                                 mv__saga_step *step, const journal_note *note, mv_err *err);
mv_code mv__saga_save_with(mv_saga_engine *e, mv__saga_record **rec, int state, int index,
                           mv__saga_step *step, mv_err *err);
mv_code mv__saga_take_runner(mv_saga_engine *e, const char *saga_id, char runner[37], mv_err *err);
void mv__saga_drop_runner(mv_saga_engine *e, const char *saga_id, const char *runner);

/* What mv__saga_comp_pick answers. */
enum { PICK_SKIP, PICK_STOP, PICK_RUN };

/* ---- saga.c: definitions, steps, compensation, resume and execute */
int mv__saga_max_attempts(const mv_saga_definition *def);
const mv_saga_compensator *mv__saga_find_compensator(const mv_saga_definition *def,
                                                     const char *step);
int mv__saga_find_step(const mv__saga_record *rec, const char *name);
int mv__saga_find_effect(const mv__saga_record *rec, const char *effect_id);
mv_code mv__saga_check_call(const mv_saga_definition *def, const char *saga_id, mv_abort *abort,
                            mv_err *err);
mv_code mv__saga_check_definition(const mv_saga_definition *def, const mv__saga_record *rec,
                                  mv_err *err);
mv_code mv__saga_ambiguous(const char *saga_id, const char *step, mv_err *err);
mv_effect_phase mv__saga_step_phase(const mv_err *error, bool began, void *p);
const char *mv__saga_step_error_code(const mv_err *error, bool began, void *p);
mv_code mv__saga_step_intent(const mv_effect_context *c, void *p, mv_err *err);
mv_code mv__saga_step_committed(const mv_effect_context *c, const json_t *result, void *p,
                                mv_err *err);
mv_code mv__saga_step_failed(const mv_effect_context *c, const mv_effect_failure *f, void *p,
                             mv_err *err);
mv_code mv__saga_comp_executing(const mv_effect_context *c, void *p, mv_err *err);
mv_code mv__saga_comp_committed(const mv_effect_context *c, const json_t *result, void *p,
                                mv_err *err);
mv_code mv__saga_comp_failed(const mv_effect_context *c, const mv_effect_failure *f, void *p,
                             mv_err *err);
mv_code mv__saga_comp_prelude(mv_saga_engine *e, mv__saga_record **rec, const char *saga_id,
                              bool *go, mv_err *err);
int mv__saga_comp_pick(mv_saga_engine *e, const mv_saga_definition *def, mv__saga_record **rec,
                       int index, comp_run *r, mv_code *rc, mv_err *err);
void mv__saga_end_run(mv_saga_engine *e, const char *saga_id, mv__saga_record **rec,
                      const char *runner);
mv_code mv__saga_finish_run(mv_saga_engine *e, const char *saga_id, const mv__saga_record *rec,
                            json_t **record, mv_code rc);
mv_code mv__saga_refresh(mv_saga_engine *e, const char *saga_id, mv__saga_record **rec,
                         mv_err *err);
mv_code mv__saga_checked_create(mv_saga_engine *e, const char *tenant,
                                const mv_saga_definition *def, const char *saga_id,
                                const json_t *input, mv_abort *abort, mv__saga_record **created,
                                mv_err *err);

#endif
