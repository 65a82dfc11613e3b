/* readiness.c — "can this store serve?" for /readyz: the schema is current, and a write commits.
 *
 * Answering a SELECT is not enough: a SQLite file on a full disk (or a PostgreSQL server that
 * went read-only) still answers reads while every create fails. So the check writes one row of
 * its own table and commits it, exactly as a request would (group commit included), and reports
 * the store unavailable when that fails. */
#include "missive/base.h"
#include "store/db.h"

static const char SQL_TOUCH_PROBE[] =
    "INSERT INTO readiness_probe (id, checked_at) VALUES (1, ?) "
    "ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at";

static mv_code touch_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_TOUCH_PROBE, NULL, err, "i", mv_now_ms());
}

mv_code mv_store_ready(mv_store *store, mv_err *err) {
    mv_code rc = mv_store_check_schema(store, err);
    if (rc != MV_OK) return rc;
    rc = mv_store_write(store, touch_tx, NULL, err);
    if (rc != MV_OK && err) err->code = MV_STORE_UNAVAILABLE;
    return rc != MV_OK ? MV_STORE_UNAVAILABLE : MV_OK;
}
