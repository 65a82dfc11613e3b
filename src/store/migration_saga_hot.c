/* migration_saga_hot.c — a running saga's saves leave every indexed column of its `sagas` row
 * alone, so PostgreSQL writes them as HOT updates (issue 13: ≈ 9 KB of WAL per 3-step saga, most
 * of it index entries).
 *
 * Every save of a saga sets updated_at, and updated_at led the scan index of migration 3
 * (state, updated_at, saga_id): each save — four per 3-step saga — then wrote a new heap tuple on
 * another page and an entry in each of the six indexes of `sagas`. The reconciliation and recovery
 * scans that index served read only non-terminal states and need an order, not the time of the
 * last save: they now walk (state, created_at, saga_id) — a key no save changes, so a keyset
 * cursor over it never skips or repeats a saga that moved between two pages — and test updated_at
 * (staleness, a runner-less saga's quiet time) on the rows they read. The only saves that still
 * touch an index are those that change the state (the end of a run, compensation, manual review).
 *
 * Each step is also an effect in the journal, inserted executing and updated to committed: a
 * change of state, so never a HOT update, and the effects' scan index (state, updated_at, id) got
 * an entry for both versions. That index serves only the effect reconciliation scan, which reads
 * the states admission, executing and unknown; it becomes a partial index over those states (the
 * scan names them literally, so both planners prove it usable), and a committed or failed effect
 * leaves it: one B-tree write less per step, and an index the size of what is in flight.
 *
 * PostgreSQL also leaves room on each heap page (fillfactor) so a row's new versions fit beside
 * it: a HOT update must stay on its page. SQLite has no such setting and needs none (an UPDATE
 * rewrites only the indexes over the columns it changes). */
#include "store/driver.h"

#define SAGA_SCAN_INDEX                                                                            \
    "DROP INDEX sagas_state_updated;"                                                              \
    "CREATE INDEX sagas_state_created ON sagas (state, created_at, saga_id);"                      \
    "DROP INDEX effects_state_updated;"                                                            \
    "CREATE INDEX effects_state_updated ON effects (state, updated_at, effect_id)"                 \
    " WHERE state IN ('admission', 'executing', 'unknown');"

const mv_migration mv_migration_saga_hot = {
    .version = 12,
    .name = "saga_hot",
    .sqlite_sql = SAGA_SCAN_INDEX,
    .postgres_sql = SAGA_SCAN_INDEX "ALTER TABLE sagas SET (fillfactor = 70);",
};
