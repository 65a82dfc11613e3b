/* daemon.c — opening and closing what the daemon's routes need, and what --check-config checks
 * beyond the config file. The store is opened and migrated here, before the server listens, so a
 * daemon that answers is a daemon whose schema is current. Everything is built from the loaded
 * config in dependency order (store → templates → delivery → service → outbox worker) and closed
 * in reverse. */
#include <string.h>

#include <stdlib.h>

#include "cmd/daemon.h"
#include "cmd/tls.h"
#include "durable/timer.h"
#include "http/request.h"
#include "http/work_pool.h"

/* Runs check on every registered template, stopping at the first error. */
static mv_code each_template(mv_registry *reg,
                             mv_code (*check)(const mv_template *, void *, mv_err *), void *ctx,
                             mv_err *err) {
    json_t *codes = mv_registry_codes(reg);
    size_t i;
    json_t *code;
    mv_code rc = MV_OK;
    json_array_foreach(codes, i, code) {
        mv_template *t = mv_registry_find(reg, json_string_value(code));
        rc = t ? check(t, ctx, err) : MV_OK;
        mv_template_release(t);
        if (rc != MV_OK) break;
    }
    json_decref(codes);
    return rc;
}

/* An action that needs approval is a config error when approvals are not configured. */
static mv_code check_template_approvals(const mv_template *t, void *ctx, mv_err *err) {
    (void)ctx;
    for (size_t a = 0; a < t->nactions; a++)
        if (t->actions[a].approval_capability)
            return mv_err_set(err, MV_INVALID_CONFIG,
                              "template \"%s\" action \"%s\" needs approval, but the config "
                              "has no \"approvals\" section",
                              t->template_cd, t->actions[a].action_cd);
    return MV_OK;
}

mv_code mv_daemon_check_approvals(const mv_config *cfg, mv_registry *reg, mv_err *err) {
    return cfg->approvals.enabled ? MV_OK : each_template(reg, check_template_approvals, NULL, err);
}

static mv_code check_template_channels(const mv_template *t, void *ctx, mv_err *err) {
    return mv_reach_check_template(ctx, t, err);
}

/* Every channel a template names is configured ("channels"). */
mv_code mv_daemon_check_channels(const mv_config *cfg, mv_registry *reg, mv_err *err) {
    return each_template(reg, check_template_channels, cfg->reach, err);
}

mv_code mv_daemon_check_template_sagas(const mv_template *t, const mv_saga_book *book,
                                       const char *sagas_dir, mv_err *err) {
    for (size_t a = 0; t && a < t->nactions; a++) {
        const mv_action_def *d = &t->actions[a];
        if (d->handler != MV_HANDLER_SAGA) continue;
        if (!book)
            return mv_err_set(err, MV_INVALID_CONFIG,
                              "template \"%s\" action \"%s\" runs saga \"%s\", but the config "
                              "has no \"sagas\" directory",
                              t->template_cd, d->action_cd, d->handler_target);
        if (!mv_saga_book_find(book, d->handler_target))
            return mv_err_set(err, MV_INVALID_CONFIG,
                              "template \"%s\" action \"%s\" runs unknown saga \"%s\" (not defined "
                              "in %s)",
                              t->template_cd, d->action_cd, d->handler_target,
                              sagas_dir ? sagas_dir : "the sagas directory");
    }
    return MV_OK;
}

typedef struct {
    const mv_saga_book *book;
    const char *dir;
} saga_check;

static mv_code check_template_sagas(const mv_template *t, void *ctx, mv_err *err) {
    const saga_check *c = ctx;
    return mv_daemon_check_template_sagas(t, c->book, c->dir, err);
}

/* Every saga handler of every registered template names a loaded definition. */
mv_code mv_daemon_check_sagas(const char *dir, mv_registry *reg, const mv_saga_book *book,
                              mv_err *err) {
    saga_check c = {book, dir};
    return each_template(reg, check_template_sagas, &c, err);
}

mv_code mv_daemon_check(const mv_config *cfg, mv_err *err) {
    mv_code rc = MV_OK;
    mv_registry *reg = mv_registry_new();
    mv_saga_book *book = NULL;
    if (!reg) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (cfg->templates) {
        rc = mv_registry_load_dir(reg, cfg->templates, err);
        if (rc == MV_OK) rc = mv_daemon_check_approvals(cfg, reg, err);
        if (rc == MV_OK) rc = mv_daemon_check_channels(cfg, reg, err);
    }
    if (rc == MV_OK && cfg->sagas) {
        book = mv_saga_book_new(NULL);
        rc = book ? mv_saga_book_load_dir(book, cfg->sagas, err)
                  : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (rc == MV_OK) rc = mv_daemon_check_sagas(cfg->sagas, reg, book, err);
    if (rc == MV_OK && cfg->tls.cert_file) {
        mv_daemon_tls_creds *creds = NULL;
        rc = mv_daemon_tls_creds_load(cfg->tls.cert_file, cfg->tls.key_file, &creds, err);
        mv_daemon_tls_creds_free(creds);
    }
    mv_saga_book_free(book);
    mv_registry_free(reg);
    return rc;
}

static mv_code daemon_health(void *ctx, mv_err *err) {
    mv_daemon *d = ctx;
    return mv_service_health(d->service, err);
}

static void log_outbox_event(void *ctx, const mv_outbox_event *ev) {
    (void)ctx;
    mv_log(ev->final ? "error" : "warn", "outbox delivery failed",
           json_pack("{s:s,s:s,s:s,s:i,s:b}", "row", ev->row_id, "stage", ev->stage, "error",
                     ev->error, "attempt", ev->attempt, "final", ev->final));
}

static void log_payment_compensation(void *ctx, const mv_payment_failure *ev) {
    (void)ctx;
    mv_log("error", "payment compensation failed",
           json_pack("{s:s,s:s,s:s,s:s?}", "operation", ev->operation, "sessionId", ev->session_id,
                     "error", ev->error, "templateCd", ev->template_cd));
}

static void log_warning(void *ctx, const char *what, const json_t *fields) {
    (void)ctx;
    mv_log("warn", what, json_deep_copy(fields));
}

static mv_code open_service(mv_daemon *d, const mv_config *cfg, mv_err *err) {
    mv_code rc;
    d->registry = mv_registry_new();
    if (!d->registry) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (cfg->templates && (rc = mv_registry_load_dir(d->registry, cfg->templates, err)) != MV_OK)
        return rc;
    if ((rc = mv_daemon_check_approvals(cfg, d->registry, err)) != MV_OK) return rc;
    if ((rc = mv_daemon_check_channels(cfg, d->registry, err)) != MV_OK) return rc;
    d->webhook = (mv_webhook_config){.secret = cfg->webhook_secret.bytes,
                                     .secret_len = cfg->webhook_secret.len,
                                     .secrets = cfg->webhook_keys,
                                     .nsecrets = cfg->n_webhook_keys,
                                     .connect_timeout_ms = cfg->webhooks.connect_timeout_ms,
                                     .timeout_ms = cfg->webhooks.timeout_ms,
                                     .max_response_bytes = cfg->webhooks.max_response_bytes,
                                     .on_call = mv_daemon_on_webhook,
                                     .on_call_ctx = d};
    if ((rc = mv_loop_new(NULL, &d->loop, err)) != MV_OK) return rc;
    if (cfg->payment.enabled &&
        !(d->payment = mv_payment_webhook_new(cfg->payment.webhook, &d->webhook)))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (cfg->approvals.enabled) {
        mv_approvals_options ao = {.secret = cfg->approvals.secret.bytes,
                                   .secret_len = cfg->approvals.secret.len,
                                   .ttl_ms = cfg->approvals.ttl_ms,
                                   .allow_self_approval = cfg->approvals.allow_self_approval};
        if ((rc = mv_approvals_new(d->store, &ao, &d->approvals, err)) != MV_OK) return rc;
    }
    if (cfg->sagas) {
        mv_saga_book *book = mv_saga_book_new(&d->webhook);
        if (!book) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        atomic_store(&d->sagas, book);
        if ((rc = mv_saga_book_load_dir(book, cfg->sagas, err)) != MV_OK) return rc;
        /* a saga run by an action holds its runner lease as long as the action holds its claim */
        mv_saga_engine_options so = {.runner_lease_ms = cfg->leases.action_ms,
                                     .encryption_key = cfg->saga_encryption.key.bytes};
        if ((rc = mv_saga_engine_new(d->store, &so, &d->saga_engine, err)) != MV_OK) return rc;
    }
    if ((rc = mv_daemon_check_sagas(cfg->sagas, d->registry, d->sagas, err)) != MV_OK) return rc;
    json_t *exclusions = json_array();
    for (size_t i = 0; i < cfg->email.n_exclusions; i++)
        json_array_append_new(exclusions, json_string(cfg->email.exclusions[i]));
    mv_service_options o = {
        .store = d->store,
        .registry = d->registry,
        .admin_roles = (const char *const *)cfg->admin_roles,
        .nadmin_roles = cfg->n_admin_roles,
        .default_list_limit = cfg->list.default_limit,
        .max_list_limit = cfg->list.max_limit,
        .client_request_lease_ms = cfg->leases.client_request_ms,
        .client_request_wait_ms = cfg->leases.client_request_wait_ms,
        .client_request_wait_zero = cfg->leases.client_request_wait_ms == 0,
        .client_request_poll_ms = cfg->leases.client_request_poll_ms,
        .action_lease_ms = cfg->leases.action_ms,
        .payment = d->payment,
        .on_payment_compensation_failure = log_payment_compensation,
        .webhook = &d->webhook,
        .loop = d->loop,
        .email = cfg->email.enabled,
        .email_exclusions = exclusions,
        .approvals = d->approvals,
        .sagas = d->saga_engine,
        .find_saga = mv_daemon_saga_finder(),
        .find_saga_ctx = d,
        .saga_stop = &d->saga_stop,
        .max_message_bytes = cfg->limits.message_bytes,
        .max_page_bytes = cfg->list.max_page_bytes,
        .on_warning = log_warning,
        .reach = cfg->reach,
    };
    rc = mv_service_new(&o, &d->service, err);
    json_decref(exclusions);
    return rc;
}

static mv_code start_outbox(mv_daemon *d, const mv_config *cfg, mv_err *err) {
    mv_code rc;
    if (cfg->email.enabled) {
        json_t *section = json_pack("{s:s*,s:s*,s:s*}", "smtp", cfg->email.smtp, "webhook",
                                    cfg->email.webhook, "from", cfg->email.from);
        json_t *dir = cfg->email.directory_webhook
                          ? json_pack("{s:s}", "webhook", cfg->email.directory_webhook)
                          : json_pack("{s:s}", "file", cfg->email.directory_file);
        json_object_set_new(section, "directory", dir);
        rc = mv_email_settings_load(section, cfg->dir, &d->webhook, &d->email, err);
        json_decref(section);
        if (rc != MV_OK) return rc;
    }
    mv_outbox_config oc = {.webhook = &d->webhook,
                           .email = d->email ? &d->email->email : NULL,
                           .max_attempts = cfg->outbox.max_attempts,
                           .backoff_base_ms = cfg->outbox.backoff_ms,
                           .on_event = log_outbox_event,
                           .loop = d->loop,
                           .directory = d->email ? d->email->email.directory : NULL};
    return mv_outbox_worker_start(d->store, &oc, cfg->outbox.poll_ms, &d->outbox, err);
}

mv_code mv_daemon_open(mv_daemon *d, const mv_config *cfg, bool migrate, mv_err *err) {
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    mv_log_set_level(cfg->log_level);
    mv_store_options so = {.pool_size = cfg->store_options.pool_size,
                           .synchronous = cfg->store_options.synchronous,
                           .busy_timeout_ms = cfg->store_options.busy_timeout_ms,
                           .statement_timeout_ms = cfg->store_options.statement_timeout_ms,
                           .no_group_commit = cfg->store_options.no_group_commit};
    mv_code rc = mv_store_open(cfg->store, &so, &d->store, err);
    if (rc == MV_OK) {
        int applied = 0;
        rc = migrate ? mv_store_migrate(d->store, &applied, err)
                     : mv_store_check_schema(d->store, err);
    }
    if (rc == MV_OK) {
        /* the JWKS fetch uses the limits of every outgoing call */
        d->jwks_http = (mv_webhook_config){.connect_timeout_ms = cfg->webhooks.connect_timeout_ms,
                                           .timeout_ms = cfg->webhooks.timeout_ms,
                                           .max_response_bytes = cfg->webhooks.max_response_bytes};
        mv_jwt_options jo = {.algorithms = cfg->auth.algorithms,
                             .secret = cfg->auth.secret.bytes,
                             .secret_len = cfg->auth.secret.len,
                             .jwks_file = cfg->auth.jwks_file,
                             .jwks_url = cfg->auth.jwks_url,
                             .jwks_refresh_s = cfg->auth.jwks_refresh_s,
                             .http = &d->jwks_http,
                             .issuer = cfg->auth.issuer,
                             .audience = cfg->auth.audience,
                             .leeway_s = cfg->auth.leeway_s,
                             .exp_optional = !cfg->auth.require_exp};
        mv_auth_options ao = {.mode = cfg->auth.jwt ? MV_AUTH_JWT : MV_AUTH_HEADERS,
                              .secret = cfg->auth.secret.bytes,
                              .secret_len = cfg->auth.secret.len,
                              .jwt = &jo,
                              .claims = {cfg->auth.claim_user, cfg->auth.claim_roles,
                                         cfg->auth.claim_permissions, cfg->auth.claim_tenant}};
        rc = mv_auth_new(&ao, &d->auth, err);
    }
    if (rc == MV_OK && cfg->tls.cert_file && !mv_daemon_tls_available())
        rc = mv_err_set(err, MV_INVALID_CONFIG,
                        "\"tls\" is set, but this libmicrohttpd was built without HTTPS support");
    if (rc == MV_OK && cfg->tls.cert_file) {
        mv_daemon_tls_creds *creds = NULL;
        rc = mv_daemon_tls_creds_load(cfg->tls.cert_file, cfg->tls.key_file, &creds, err);
        if (rc == MV_OK && !(d->tls = mv_daemon_tls_new(creds)))
            rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (rc == MV_OK && !(d->metrics = mv_metrics_new()))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) rc = open_service(d, cfg, err);
    if (rc == MV_OK) rc = start_outbox(d, cfg, err);
    if (rc == MV_OK) rc = mv_recovery_loop_start(d, &d->recovery, err);
    if (rc == MV_OK) rc = mv_daemon_timers_start(d, err);
    if (rc == MV_OK) {
        const mv_config_secret *ts =
            cfg->stream.secret.env ? &cfg->stream.secret : &cfg->approvals.secret;
        mv_stream_hub_options ho = {.service = d->service,
                                    .store = d->store,
                                    .max_connections = cfg->stream.max_connections,
                                    .heartbeat_ms = cfg->stream.heartbeat_ms,
                                    .secret = ts->bytes,
                                    .secret_len = ts->len,
                                    .locale_claim = cfg->auth.claim_locale};
        rc = mv_stream_hub_new(&ho, &d->streams, err);
    }
    if (rc != MV_OK) {
        mv_daemon_close(d);
        return rc;
    }
    mv_daemon_metrics_init(d);
    atomic_store(&d->ui_enabled, cfg->ui.enabled);
    d->ops = (mv_http_ops){
        .health = daemon_health, .health_ctx = d, .metrics = d->metrics, .draining = &d->draining};
    d->list_routes = (mv_list_routes){.store = d->store,
                                      .engine = d->saga_engine,
                                      .approvals = d->approvals != NULL,
                                      .admin_permission = cfg->admin_permission_key,
                                      .default_limit = cfg->list.default_limit,
                                      .max_limit = cfg->list.max_limit};
    d->message_routes = (mv_message_routes){.service = d->service,
                                            .admin_permission = cfg->admin_permission_key,
                                            .metrics = d->metrics,
                                            .locale_claim = cfg->auth.claim_locale};
    d->reach_routes = (mv_reach_routes){.store = d->store, .service = d->service};
    d->durable_routes = (mv_durable_routes){.approvals = d->approvals,
                                            .engine = d->saga_engine,
                                            .book = d->sagas,
                                            .admin_permission = cfg->admin_permission_key,
                                            .metrics = d->metrics,
                                            .loop = d->loop,
                                            .stop = &d->saga_stop};
    return MV_OK;
}

void mv_daemon_close(mv_daemon *d) {
    if (!d) return;
    mv_loop_stop(d->loop); /* abandons any call still waiting, so the workers stop promptly */
    mv_recovery_loop_stop(d->recovery);
    mv__timer_engine_free(d->timers); /* before the service its fires use */
    mv__work_pool_free(d->saga_jobs); /* after the timers whose wakes submit to it */
    mv_outbox_worker_stop(d->outbox);
    mv_loop_free(d->loop); /* after its last user, before the service */
    d->loop = NULL;
    mv_stream_hub_free(d->streams);
    /* the channel settings a reload put in place (the start config's belong to the config) */
    mv_reach *reach = d->service ? (mv_reach *)mv_service_reach(d->service) : NULL;
    if (reach && d->cfg && reach != d->cfg->reach) mv_reach_free(reach);
    mv_service_free(d->service);
    mv_saga_engine_free(d->saga_engine);
    mv_saga_book_free(d->sagas);
    for (size_t i = 0; i < d->n_retired_books; i++)
        mv_saga_book_free(d->retired_books[i]);
    free(d->retired_books);
    for (size_t i = 0; i < d->n_retired_reach; i++)
        mv_reach_free(d->retired_reach[i]);
    free(d->retired_reach);
    mv_daemon_tls_free(d->tls);
    mv_approvals_free(d->approvals);
    mv_email_settings_free(d->email);
    mv_payment_webhook_free(d->payment);
    mv_registry_free(d->registry);
    mv_metrics_free(d->metrics);
    mv_auth_free(d->auth);
    mv_store_close(d->store);
    memset(d, 0, sizeof *d);
}
