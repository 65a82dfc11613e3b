/* migration_outbox_plans.c — the outbox's `plan` rows: a message's channel deliveries decided
 * after its create commits (deliver/outbox_text.h), and the partial index the outbox finds due
 * plans by, whatever the number of deliveries pending beside them.
 *
 * SQLite cannot change a table's CHECK in place, so the table is rebuilt as in schema version 25
 * (column for column, its rows in order) with `plan` allowed; PostgreSQL replaces the constraint
 * its CREATE TABLE named. */
#include "store/driver.h"

/* kind and state lead the key although the predicate fixes them: so that SQLite's planner, which
 * has no statistics here, prefers it to outbox_due (state, next_attempt_at) for the query of due
 * plans — through outbox_due it would walk every pending delivery due before them. */
#define PLANS_INDEX                                                                                \
    "CREATE INDEX outbox_plans_due ON outbox (kind, state, next_attempt_at) "                      \
    "WHERE state = 'pending' AND kind = 'plan';"

#define OUTBOX_PLANS_SQLITE                                                                        \
    "CREATE TABLE outbox_rebuilt ("                                                                \
    " id TEXT PRIMARY KEY,"                                                                        \
    " kind TEXT NOT NULL CHECK (kind = 'email' OR kind = 'webhook' OR kind = 'plan'),"             \
    " payload TEXT NOT NULL,"                                                                      \
    " state TEXT NOT NULL DEFAULT 'pending'"                                                       \
    "  CHECK (state = 'pending' OR state = 'delivering' OR state = 'sent' OR state = 'skipped'"    \
    "   OR state = 'failed'),"                                                                     \
    " attempts INTEGER NOT NULL DEFAULT 0,"                                                        \
    " next_attempt_at BIGINT NOT NULL,"                                                            \
    " lease_owner TEXT,"                                                                           \
    " lease_expires_at BIGINT,"                                                                    \
    " last_error TEXT,"                                                                            \
    " failure_stage TEXT,"                                                                         \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL"                                                                  \
    ");"                                                                                           \
    "INSERT INTO outbox_rebuilt (id, kind, payload, state, attempts, next_attempt_at, "            \
    " lease_owner, lease_expires_at, last_error, failure_stage, created_at, updated_at) "          \
    "SELECT id, kind, payload, state, attempts, next_attempt_at, lease_owner, lease_expires_at, "  \
    " last_error, failure_stage, created_at, updated_at FROM outbox ORDER BY rowid;"               \
    "DROP TABLE outbox;"                                                                           \
    "ALTER TABLE outbox_rebuilt RENAME TO outbox;"                                                 \
    "CREATE INDEX outbox_due ON outbox (state, next_attempt_at);" PLANS_INDEX

#define OUTBOX_PLANS_POSTGRES                                                                      \
    "ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;"                                        \
    "ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check "                                         \
    " CHECK (kind IN ('email', 'webhook', 'plan'));" PLANS_INDEX

const mv_migration mv_migration_outbox_plans = {
    .version = 26,
    .name = "outbox_plans",
    .sqlite_sql = OUTBOX_PLANS_SQLITE,
    .postgres_sql = OUTBOX_PLANS_POSTGRES,
};
