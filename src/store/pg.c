/* pg.c — the PostgreSQL driver (placeholder until the PostgreSQL issue lands). */
#include "store/driver.h"

static mv_code pg_connect(const char *url, const mv_store_options *o, void **out, mv_err *err) {
    (void)url;
    (void)o;
    (void)out;
    return mv_err_set(err, MV_STORE_UNAVAILABLE, "the PostgreSQL driver is not built yet");
}

const mv_driver mv_pg_driver = {.name = "postgres", .connect = pg_connect};
