/* pg_private.h — a PostgreSQL server of a test's own, for tests that stop, kill or restart the
 * server (never the shared MISSIVE_TEST_PG one): started with scripts/pg-test-cluster, driven
 * with pg_ctl, removed at the end.
 *
 *   pg_private pg;
 *   REQUIRE(pg_private_start(&pg));        // pg.url: a libpq URI of its `postgres` database
 *   ... pg_private_restart(&pg);           // every open connection is cut
 *   ... pg_private_stop_server(&pg); ... pg_private_start_server(&pg);
 *   pg_private_remove(&pg);
 *
 * A primary and its synchronous standby, for failover tests:
 *   pg_private primary, standby;
 *   REQUIRE(pg_private_start_sync(&primary) && pg_private_start_standby(&primary, &standby));
 *   ... pg_private_kill_server(&primary); pg_private_promote(&standby); ... */
#ifndef MISSIVE_TEST_PG_PRIVATE_H
#define MISSIVE_TEST_PG_PRIVATE_H

#include <stdbool.h>

typedef struct pg_private {
    char url[512];
    char dir[256];
    int port; /* on 127.0.0.1 */
} pg_private;

/* True when PostgreSQL's server binaries are installed (scripts/deps installs them). */
bool pg_private_available(void);

/* A new cluster (a few seconds); false when PostgreSQL's server binaries are missing. */
bool pg_private_start(pg_private *pg);
/* As pg_private_start, but commits wait for a synchronous standby's flush once one is named. */
bool pg_private_start_sync(pg_private *pg);
/* A streaming standby of primary (a pg_private_start_sync one), made its synchronous standby:
 * returns once the primary reports it in sync. */
bool pg_private_start_standby(const pg_private *primary, pg_private *standby);
/* pg_ctl stop -m immediate: the server dies at once, as in a crash (no shutdown checkpoint). */
bool pg_private_kill_server(pg_private *pg);
/* pg_ctl promote: a standby becomes a primary (returns once it accepts writes). */
bool pg_private_promote(pg_private *pg);
/* pg_ctl restart -m fast: the server goes away and comes back; open connections are cut. */
bool pg_private_restart(pg_private *pg);
/* pg_ctl stop -m fast (the server goes away, nothing committed is lost) / start again on the
 * same port and socket. */
bool pg_private_stop_server(pg_private *pg);
bool pg_private_start_server(pg_private *pg);
/* Stops the server and removes its directory. NULL-safe on a cluster that never started. */
void pg_private_remove(pg_private *pg);

#endif
