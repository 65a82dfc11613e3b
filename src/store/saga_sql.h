/* store/saga_sql.h — the saga engine's statements, and the saves the store may write in its own
 * dialect.
 *
 * A save is a compare-and-set on the saga's version (CAS_SAGA) with the rows of its steps
 * (UPDATE_STEP, or an INSERT of STEP_COLUMNS) and its journal rows, each a statement of its own
 * that both stores accept. A store may also have a form of a save that does all of it in one
 * statement (PostgreSQL: data-modifying CTEs, so a step transition is BEGIN, one statement,
 * COMMIT); mv__saga_save_sql gives it, or NULL when the store has none (SQLite, where a statement
 * costs no round trip) and the caller runs the statements one by one.
 *
 * Its parameters, in order: CAS_SAGA's nine; for a shape with a commit, UPDATE_STEP's eight and
 * then (updated_at, effect_id) of the committed step's effect (executing → committed); for STEP,
 * the changed step's UPDATE_STEP eight, and for STEP_MOVE then (state, updated_at, error_code,
 * effect_id) of its effect, moved from executing; for a shape with a start, the new step row's
 * thirteen (STEP_COLUMNS) and then (effect_id, capability, target, created_at, updated_at) of its
 * effect, inserted executing.
 *
 * The precise form answers one row of five counts: what each part changed (the saga, the
 * committed (or, for STEP and STEP_MOVE, the changed) step's row, its effect, the new step's row,
 * its effect; 1 for a part the shape does not have) — 0 for the effect when it was not executing
 * or, for the new one, when its id is taken. The blind form (for mv_stmt_exec_later) answers
 * nothing and fails the transaction when any part did not change exactly its one row; the caller
 * then runs the precise form in a new transaction to learn which. */
#ifndef MISSIVE_STORE_SAGA_SQL_H
#define MISSIVE_STORE_SAGA_SQL_H

#include <stdbool.h>

#include "missive/store.h"
#include "store/db.h"

/* Every save: the compare-and-set on the version, setting wake_at (the saga's wakeAt: NULL unless
 * it waits, or runs the step it waited for), extending the runner lease (while one is held) or
 * dropping it when the save ends the run (the fifth and sixth parameters: the runner whose lease
 * ends, or NULL). */
#define CAS_SAGA                                                                                   \
    "UPDATE sagas SET state = ?, updated_at = ?, version = ?, wake_at = CAST(? AS BIGINT), "       \
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

typedef enum {
    MV__SAGA_SAVE_START,        /* a step's start */
    MV__SAGA_SAVE_COMMIT_START, /* the previous step's commit and the next step's start */
    MV__SAGA_SAVE_COMMIT,       /* a step's commit (the saga's end, or a save carrying it) */
    MV__SAGA_SAVE_STEP,         /* one step row's change alone (a compensation's transitions) */
    MV__SAGA_SAVE_STEP_MOVE,    /* a step row's change and its effect's move from executing */
    MV__SAGA_SAVE_STATE         /* the saga row alone (its state) */
} mv__saga_save_shape;

/* The saga engine's other statements (both stores). A new saga holds its runner lease from its
 * INSERT: mv__sql_saga_insert answers no row for an id already taken (ON CONFLICT DO NOTHING);
 * the blind form (sent with BEGIN and COMMIT in one flush) fails on it with a unique violation. */
extern const char mv__sql_saga_insert[], mv__sql_saga_insert_blind[];
/* a saga row (saga_id, definition, state, input, input_fingerprint, max_attempts, created_at,
 * updated_at, version, wake_at, tenant_id) and its steps in order (name, state, effect_id,
 * compensation_effect_id, compensation_args, result, attempts, error_code, next_attempt_at) */
extern const char mv__sql_saga_get[], mv__sql_saga_steps[], mv__sql_saga_tenant[];
/* CAS_SAGA, a new step row (STEP_COLUMNS), UPDATE_STEP */
extern const char mv__sql_saga_cas[], mv__sql_saga_insert_step[], mv__sql_saga_update_step[];
/* the runner lease: take (runner, until, saga, now), drop (saga, runner), extend (until, saga,
 * runner) */
extern const char mv__sql_saga_take_runner[], mv__sql_saga_drop_runner[],
    mv__sql_saga_extend_runner[];

/* The one-statement form of a save of this shape on db's store (blind or precise), or NULL. The
 * pointer is a static constant (db.h: the statement cache's key). */
const char *mv__saga_save_sql(mv_db *db, mv__saga_save_shape shape, bool blind);
/* The same question before a transaction: whether store has the one-statement forms. */
bool mv__saga_save_has_sql(mv_store *store);

#endif
