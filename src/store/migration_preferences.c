/* migration_preferences.c — each user's delivery preferences (missive/reach.h), one row per
 * tenant and user: the preference set as JSON (channels, categories, digest) and the user's
 * locale in its own column, which deliveries and action-link pages read. And the uses of action
 * links (message/links.c): one row per spent token, written by the action's claim. And a
 * message's contents in its template's other languages (message/locales.c), rendered at create. */
#include "store/driver.h"

#define PREFERENCES_SQL                                                                            \
    "CREATE TABLE preferences ("                                                                   \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " user_id TEXT NOT NULL,"                                                                      \
    " prefs TEXT NOT NULL,"                                                                        \
    " locale TEXT,"                                                                                \
    " updated_at BIGINT NOT NULL,"                                                                 \
    " PRIMARY KEY (tenant_id, user_id));"                                                          \
    "CREATE TABLE link_uses ("                                                                     \
    " token_id TEXT PRIMARY KEY,"                                                                  \
    " tenant_id TEXT NOT NULL,"                                                                    \
    " message_id TEXT NOT NULL,"                                                                   \
    " action_cd TEXT NOT NULL,"                                                                    \
    " user_id TEXT NOT NULL,"                                                                      \
    " used_at BIGINT NOT NULL);"                                                                   \
    "CREATE TABLE message_locales ("                                                               \
    " message_id TEXT PRIMARY KEY,"                                                                \
    " locales TEXT NOT NULL);"

const mv_migration mv_migration_preferences = {
    .version = 16,
    .name = "reach",
    .sqlite_sql = PREFERENCES_SQL,
    .postgres_sql = PREFERENCES_SQL, /* the same statements: both dialects accept them */
};
