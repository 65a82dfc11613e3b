/* migration_outbox.c — schema of the outbox: rows written in the same transaction as a state
 * change and delivered afterwards by deliver/outbox.c. A row is claimed with a lease
 * (lease_owner, lease_expires_at) so that two workers never deliver it at once and a dead
 * worker's row is picked up again after the lease; the (state, next_attempt_at) index serves the
 * worker's "what is due" query. The SQL is the same in both dialects. */
#include "store/driver.h"

#define OUTBOX_SQL                                                                                 \
    "CREATE TABLE outbox ("                                                                        \
    " id TEXT PRIMARY KEY,"                                                                        \
    " kind TEXT NOT NULL CHECK (kind IN ('email', 'webhook')),"                                    \
    " payload TEXT NOT NULL,"                                                                      \
    " state TEXT NOT NULL DEFAULT 'pending'"                                                       \
    "  CHECK (state IN ('pending', 'delivering', 'sent', 'skipped', 'failed')),"                   \
    " attempts INTEGER NOT NULL DEFAULT 0,"                                                        \
    " next_attempt_at BIGINT NOT NULL,"                                                            \
    " lease_owner TEXT,"                                                                           \
    " lease_expires_at BIGINT,"                                                                    \
    " last_error TEXT,"                                                                            \
    " failure_stage TEXT,"                                                                         \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL"                                                                  \
    ");"                                                                                           \
    "CREATE INDEX outbox_due ON outbox (state, next_attempt_at);"

const mv_migration mv_migration_outbox = {
    .version = 2,
    .name = "outbox",
    .sqlite_sql = OUTBOX_SQL,
    .postgres_sql = OUTBOX_SQL,
};
