/* migration_durable.c — tables of the durable execution primitives: effects (the journal),
 * approvals and sagas (steps kept as a JSON array in the saga row, so one compare-and-set covers
 * the saga and all its steps).
 *
 * Reconciliation scans walk only non-terminal states, in (state, updated_at, id) order, so each
 * table that is scanned has exactly that index: the cost of a scan follows the records in doubt,
 * never the retained history. Both dialects accept the same DDL here. */
#include "store/driver.h"

#define DURABLE_SCHEMA                                                                             \
    "CREATE TABLE effects ("                                                                       \
    " effect_id TEXT PRIMARY KEY,"                                                                 \
    " capability TEXT NOT NULL,"                                                                   \
    " target TEXT,"                                                                                \
    " digest TEXT,"                                                                                \
    " tenant_id TEXT,"                                                                             \
    " principal_id TEXT,"                                                                          \
    " state TEXT NOT NULL,"                                                                        \
    " error_code TEXT,"                                                                            \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL,"                                                                 \
    " version BIGINT NOT NULL);"                                                                   \
    "CREATE INDEX effects_state_updated ON effects (state, updated_at, effect_id);"                \
    "CREATE TABLE approvals ("                                                                     \
    " approval_id TEXT PRIMARY KEY,"                                                               \
    " effect_id TEXT NOT NULL,"                                                                    \
    " capability TEXT NOT NULL,"                                                                   \
    " target TEXT,"                                                                                \
    " digest TEXT,"                                                                                \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " principal_id TEXT NOT NULL,"                                                                 \
    " token_hash TEXT NOT NULL,"                                                                   \
    " state TEXT NOT NULL,"                                                                        \
    " decided_by TEXT,"                                                                            \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL,"                                                                 \
    " expires_at BIGINT NOT NULL,"                                                                 \
    " version BIGINT NOT NULL);"                                                                   \
    "CREATE INDEX approvals_state_expires ON approvals (state, expires_at);"                       \
    "CREATE TABLE sagas ("                                                                         \
    " saga_id TEXT PRIMARY KEY,"                                                                   \
    " definition TEXT NOT NULL,"                                                                   \
    " state TEXT NOT NULL,"                                                                        \
    " input TEXT NOT NULL,"                                                                        \
    " input_fingerprint TEXT NOT NULL,"                                                            \
    " steps TEXT NOT NULL,"                                                                        \
    " max_attempts INTEGER NOT NULL,"                                                              \
    " runner_id TEXT,"                                                                             \
    " runner_expires_at BIGINT,"                                                                   \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL,"                                                                 \
    " version BIGINT NOT NULL);"                                                                   \
    "CREATE INDEX sagas_state_updated ON sagas (state, updated_at, saga_id);"

const mv_migration mv_migration_durable = {
    .version = 3,
    .name = "durable",
    .sqlite_sql = DURABLE_SCHEMA,
    .postgres_sql = DURABLE_SCHEMA,
};
