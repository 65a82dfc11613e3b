/* readiness.c — "can this store serve?" for /readyz: the schema is current, and a write commits.
 *
 * Answering a SELECT is not enough: a SQLite file on a full disk (or a PostgreSQL server that
 * went read-only) still answers reads while every create fails. So every check commits a small
 * write of its own (one row of store_probe, deleted and inserted again so a page is always
 * written: on SQLite a WAL frame, which a full disk refuses), and while real writes are failing
 * it runs the stronger probe that needs fresh space (mv_store_probe_write). The small write
 * allocates nothing, so checking readiness never grows the store. */
#include "missive/base.h"
#include "store/db.h"

static const char SQL_CLEAR_TOUCH[] = "DELETE FROM store_probe WHERE id = 2";
static const char SQL_TOUCH[] = "INSERT INTO store_probe (id, filler) VALUES (2, NULL)";

static mv_code touch_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = mv_db_execf(db, SQL_CLEAR_TOUCH, NULL, err, "");
    return rc == MV_OK ? mv_db_execf(db, SQL_TOUCH, NULL, err, "") : rc;
}

mv_code mv_store_ready(mv_store *store, mv_err *err) {
    bool failing = mv_store_write_failing(store); /* before the check's own transactions */
    mv_code rc = mv_store_check_schema(store, err);
    if (rc != MV_OK) return rc;
    if (failing) return mv_store_probe_write(store, err);
    rc = mv_store_write(store, touch_tx, NULL, err);
    if (rc != MV_OK && rc != MV_STORE_UNAVAILABLE) /* SQLite's "database or disk is full" */
        rc = mv_err_set(err, MV_STORE_UNAVAILABLE, "the store cannot take a write: %s",
                        err ? err->message : "");
    return rc;
}
