/* daemon.c — opening and closing what the daemon's routes need, and what --check-config checks
 * beyond the config file. The store is opened and migrated here, before the server listens, so a
 * daemon that answers is a daemon whose schema is current. */
#include <string.h>

#include "cmd/daemon.h"

mv_code mv_daemon_check(const mv_config *cfg, mv_err *err) {
    (void)cfg;
    (void)err;
    /* Templates and saga definitions are validated here once their loaders exist. */
    return MV_OK;
}

static mv_code daemon_health(void *ctx, mv_err *err) {
    mv_daemon *d = ctx;
    return mv_store_check_schema(d->store, err);
}

mv_code mv_daemon_open(mv_daemon *d, const mv_config *cfg, bool migrate, mv_err *err) {
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    mv_store_options so = {.pool_size = cfg->store_options.pool_size,
                           .synchronous = cfg->store_options.synchronous,
                           .busy_timeout_ms = cfg->store_options.busy_timeout_ms,
                           .statement_timeout_ms = cfg->store_options.statement_timeout_ms};
    mv_code rc = mv_store_open(cfg->store, &so, &d->store, err);
    if (rc == MV_OK) {
        int applied = 0;
        rc = migrate ? mv_store_migrate(d->store, &applied, err)
                     : mv_store_check_schema(d->store, err);
    }
    if (rc == MV_OK) {
        mv_auth_options ao = {.mode = cfg->auth.jwt ? MV_AUTH_JWT : MV_AUTH_HEADERS,
                              .secret = cfg->auth.secret.bytes,
                              .secret_len = cfg->auth.secret.len};
        rc = mv_auth_new(&ao, &d->auth, err);
    }
    if (rc == MV_OK && !(d->metrics = mv_metrics_new()))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc != MV_OK) {
        mv_daemon_close(d);
        return rc;
    }
    d->ops = (mv_http_ops){.health = daemon_health, .health_ctx = d, .metrics = d->metrics};
    return MV_OK;
}

void mv_daemon_close(mv_daemon *d) {
    if (!d) return;
    mv_metrics_free(d->metrics);
    mv_auth_free(d->auth);
    mv_store_close(d->store);
    d->metrics = NULL;
    d->auth = NULL;
    d->store = NULL;
}
