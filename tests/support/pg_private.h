/* pg_private.h — a PostgreSQL server of a test's own, for tests that stop, kill or restart the
 * server (never the shared MISSIVE_TEST_PG one): started with scripts/pg-test-cluster, driven
 * with pg_ctl, removed at the end.
 *
 *   pg_private pg;
 *   REQUIRE(pg_private_start(&pg));        // pg.url: a libpq URI of its `postgres` database
 *   ... pg_private_restart(&pg);           // every open connection is cut
 *   ... pg_private_stop_server(&pg); ... pg_private_start_server(&pg);
 *   pg_private_remove(&pg); */
#ifndef MISSIVE_TEST_PG_PRIVATE_H
#define MISSIVE_TEST_PG_PRIVATE_H

#include <stdbool.h>

typedef struct pg_private {
    char url[512];
    char dir[256];
} pg_private;

/* A new cluster (a few seconds); false when PostgreSQL's server binaries are missing. */
bool pg_private_start(pg_private *pg);
/* pg_ctl restart -m fast: the server goes away and comes back; open connections are cut. */
bool pg_private_restart(pg_private *pg);
/* pg_ctl stop -m fast (the server goes away, nothing committed is lost) / start again on the
 * same port and socket. */
bool pg_private_stop_server(pg_private *pg);
bool pg_private_start_server(pg_private *pg);
/* Stops the server and removes its directory. NULL-safe on a cluster that never started. */
void pg_private_remove(pg_private *pg);

#endif
