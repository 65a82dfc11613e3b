/* store/saga_sql.c — the saga engine's statements (saga_sql.h): those both stores run, and
 * PostgreSQL's one-statement forms of a running saga's saves. */
#include "store/saga_sql.h"

#define INSERT_SAGA                                                                                \
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, "             \
    "max_attempts, created_at, updated_at, version, tenant_id, runner_id, runner_expires_at) "     \
    "VALUES (?, ?, 'running', ?, ?, '[]', ?, ?, ?, 1, ?, ?, ?)"
const char mv__sql_saga_insert[] = INSERT_SAGA " ON CONFLICT DO NOTHING";
const char mv__sql_saga_insert_blind[] = INSERT_SAGA;
const char mv__sql_saga_get[] =
    "SELECT saga_id, definition, state, input, input_fingerprint, max_attempts, "
    "created_at, updated_at, version, wake_at, tenant_id FROM sagas WHERE saga_id = ?";
const char mv__sql_saga_steps[] =
    "SELECT name, state, effect_id, compensation_effect_id, compensation_args, result, attempts, "
    "error_code, next_attempt_at FROM saga_steps WHERE saga_id = ? ORDER BY idx";
const char mv__sql_saga_tenant[] = "SELECT tenant_id FROM sagas WHERE saga_id = ?";
const char mv__sql_saga_cas[] = CAS_SAGA;
const char mv__sql_saga_insert_step[] =
    "INSERT INTO saga_steps (" STEP_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const char mv__sql_saga_update_step[] = UPDATE_STEP;
const char mv__sql_saga_take_runner[] =
    "UPDATE sagas SET runner_id = ?, runner_expires_at = ? "
    "WHERE saga_id = ? AND (runner_id IS NULL OR runner_expires_at <= ?)";
const char mv__sql_saga_drop_runner[] = "UPDATE sagas SET runner_id = NULL, runner_expires_at = "
                                        "NULL WHERE saga_id = ? AND runner_id = ?";
const char mv__sql_saga_extend_runner[] =
    "UPDATE sagas SET runner_expires_at = ? WHERE saga_id = ? AND runner_id = ?";

/* The saves of a running saga as one statement each (data-modifying CTEs, every part conditional
 * on the compare-and-set), so a step transition is BEGIN, one statement, COMMIT.
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
/* one step row's change (a compensation's executing, compensated and failed: no journal row) */
static const char SQL_PG_SAVE_STEP[] =
    "WITH " PG_S ", " PG_U " SELECT " PG_COUNT("s") ", " PG_COUNT("u") ", 1, 1, 1";
/* a step row's change and its effect's move from executing (a step failed or ambiguous, an
 * operator's outcome): an effect in another state (or none) counts 0, and the caller's full
 * journal transition in the same transaction decides */
#define PG_M                                                                                       \
    "m AS (UPDATE effects SET state = CAST(? AS TEXT), updated_at = CAST(? AS BIGINT), "           \
    "version = version + 1, error_code = COALESCE(CAST(? AS TEXT), error_code) "                   \
    "WHERE effect_id = ? AND state || '' = 'executing' AND EXISTS (SELECT 1 FROM s) RETURNING 1)"
static const char SQL_PG_SAVE_STEP_MOVE[] =
    "WITH " PG_S ", " PG_U ", " PG_M
    " SELECT " PG_COUNT("s") ", " PG_COUNT("u") ", " PG_COUNT("m") ", 1, 1";
/* the saga's state alone */
static const char SQL_PG_SAVE_STATE[] = "WITH " PG_S " SELECT " PG_COUNT("s") ", 1, 1, 1, 1";
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

static const char SQL_PG_BLIND_STEP[] =
    "WITH " PG_S ", " PG_U PG_GUARD(PG_COUNT("s") " + " PG_COUNT("u"), 2);
static const char SQL_PG_BLIND_STEP_MOVE[] =
    "WITH " PG_S ", " PG_U
    ", " PG_M PG_GUARD(PG_COUNT("s") " + " PG_COUNT("u") " + " PG_COUNT("m"), 3);
static const char SQL_PG_BLIND_STATE[] = "WITH " PG_S PG_GUARD(PG_COUNT("s"), 1);

const char *mv__saga_save_sql(mv_db *db, mv__saga_save_shape shape, bool blind) {
    if (mv_db_kind(db) != MV_STORE_POSTGRES) return NULL;
    switch (shape) {
    case MV__SAGA_SAVE_START: return blind ? SQL_PG_BLIND_START : SQL_PG_SAVE_START;
    case MV__SAGA_SAVE_COMMIT_START:
        return blind ? SQL_PG_BLIND_COMMIT_START : SQL_PG_SAVE_COMMIT_START;
    case MV__SAGA_SAVE_COMMIT: return blind ? SQL_PG_BLIND_COMMIT : SQL_PG_SAVE_COMMIT;
    case MV__SAGA_SAVE_STEP: return blind ? SQL_PG_BLIND_STEP : SQL_PG_SAVE_STEP;
    case MV__SAGA_SAVE_STEP_MOVE: return blind ? SQL_PG_BLIND_STEP_MOVE : SQL_PG_SAVE_STEP_MOVE;
    case MV__SAGA_SAVE_STATE: return blind ? SQL_PG_BLIND_STATE : SQL_PG_SAVE_STATE;
    }
    return NULL;
}

bool mv__saga_save_has_sql(mv_store *store) { return mv_store_kind_of(store) == MV_STORE_POSTGRES; }
