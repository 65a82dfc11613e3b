/* migration_outbox_checks.c — the outbox table's CHECK constraints without IN lists, on SQLite.
 *
 * SQLite evaluates `state IN ('pending', …, 'failed')` (five values) by building a temporary
 * b-tree of the five values for every statement that writes the column: every outbox row a create
 * inserts, and every claim and outcome of a delivery, built and freed it again on the store's one
 * writer — about a third of the cost of inserting a row. The same constraints spelled as equalities
 * joined by OR are plain comparisons. SQLite cannot change a table's CHECK in place, so the table
 * is rebuilt with its rows, column for column, and its index made again; PostgreSQL evaluates
 * such a list as comparisons already and keeps its table. */
#include "store/driver.h"

#define OUTBOX_CHECKS_SQLITE                                                                       \
    "CREATE TABLE outbox_rebuilt ("                                                                \
    " id TEXT PRIMARY KEY,"                                                                        \
    " kind TEXT NOT NULL CHECK (kind = 'email' OR kind = 'webhook'),"                              \
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
    "CREATE INDEX outbox_due ON outbox (state, next_attempt_at);"

const mv_migration mv_migration_outbox_checks = {
    .version = 25,
    .name = "outbox_checks",
    .sqlite_sql = OUTBOX_CHECKS_SQLITE,
    .postgres_sql = "SELECT 1", /* nothing to change: see above */
};
