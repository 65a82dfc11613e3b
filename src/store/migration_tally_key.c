/* migration_tally_key.c — the inbox counters are keyed by a bounded role key.
 *
 * inbox_tallies was keyed by (tenant, owner, role set), the role set being the message's whole
 * toRoles as JSON: up to 256 names of up to 255 bytes, far more than PostgreSQL accepts in one
 * B-tree entry (about 2.7 kB), so a message to many long roles failed on PostgreSQL only. The
 * key is now role_key — the role set itself when short, else its SHA-256 (message/tally.c) —
 * and role_set keeps the names a count matches against. Rows keep their role set as their key:
 * every one of them was short enough to be indexed, and counts add rows up, so an SQLite row
 * keyed by a long set and the new rows of the same set still count right together. */
#include "store/driver.h"

#define TALLY_KEY_SQL                                                                              \
    "CREATE TABLE inbox_tallies_keyed ("                                                           \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " owner TEXT NOT NULL,"                                                                        \
    " role_key TEXT NOT NULL,"                                                                     \
    " role_set TEXT NOT NULL,"                                                                     \
    " n_active BIGINT NOT NULL,"                                                                   \
    " n_dismissed BIGINT NOT NULL,"                                                                \
    " n_seen BIGINT NOT NULL,"                                                                     \
    " n_read BIGINT NOT NULL,"                                                                     \
    " PRIMARY KEY (tenant_id, owner, role_key));"                                                  \
    "INSERT INTO inbox_tallies_keyed (tenant_id, owner, role_key, role_set, n_active,"             \
    " n_dismissed, n_seen, n_read)"                                                                \
    " SELECT tenant_id, owner, role_set, role_set, n_active, n_dismissed, n_seen, n_read"          \
    " FROM inbox_tallies;"                                                                         \
    "DROP TABLE inbox_tallies;"                                                                    \
    "ALTER TABLE inbox_tallies_keyed RENAME TO inbox_tallies;"

const mv_migration mv_migration_tally_key = {
    .version = 15,
    .name = "tally_key",
    .sqlite_sql = TALLY_KEY_SQL,
    .postgres_sql = TALLY_KEY_SQL, /* the same statements: both dialects accept them */
};
