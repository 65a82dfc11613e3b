/* cmd/daemon.h — what missived wires together, in three seams the rest of the project fills:
 * mv_daemon_check (what --check-config validates beyond the config file), mv_daemon_open /
 * mv_daemon_close (the store and the services behind the routes) and mv_daemon_routes (the
 * route table). missived.c itself only parses flags, handles signals and runs the server. */
#ifndef MISSIVE_CMD_DAEMON_H
#define MISSIVE_CMD_DAEMON_H

#include <stdbool.h>

#include "cmd/config.h"
#include "http/auth.h"
#include "http/metrics.h"
#include "http/ops.h"
#include "http/router.h"
#include "http/routes_durable.h"
#include "http/routes_lists.h"
#include "http/routes_messages.h"
#include "http/routes_reach.h"
#include "http/routes_ui.h"
#include "http/stream_hub.h"
#include "missive/deliver.h"
#include "missive/durable.h"
#include "missive/message.h"
#include "missive/operations.h"
#include "missive/saga_webhook.h"
#include "missive/store.h"

typedef struct mv_daemon {
    const mv_config *cfg; /* borrowed */
    mv_store *store;
    mv_auth *auth;
    mv_webhook_config jwks_http; /* limits of the JWKS fetch (auth keeps a copy) */
    mv_metrics *metrics;
    mv_http_ops ops; /* /healthz and /metrics */
    mv_registry *registry;
    mv_webhook_config webhook;    /* limits and signing key of every outgoing call */
    mv_loop *loop;                /* outgoing calls that wait without a thread (action handlers) */
    mv_payment_provider *payment; /* NULL when "payment" is not configured */
    mv_email_settings *email;     /* NULL when "email" is not configured */
    mv_outbox_worker *outbox;     /* delivers the outbox while the daemon runs */
    mv_approvals *approvals;      /* NULL when "approvals" is not configured */
    /* NULL when "sagas" is not configured. Atomic: a reload swaps in a new book; the replaced
     * ones stay alive until close (sagas in flight hold their definitions) */
    mv_saga_book *_Atomic sagas;
    mv_saga_book **retired_books;
    size_t n_retired_books;
    /* channel settings a reload replaced (the service holds the current one): requests in flight
     * may still read them, so they live until close */
    mv_reach **retired_reach;
    size_t n_retired_reach;
    mv_saga_engine *saga_engine;
    mv_service *service;
    mv_message_routes message_routes;
    mv_durable_routes durable_routes;
    mv_list_routes list_routes;        /* GET /sagas, GET /approvals */
    struct mv_recovery_loop *recovery; /* resumes sagas whose runner died; retention */
    atomic_bool draining;              /* set on SIGTERM: /readyz answers 503 */
    mv_abort saga_stop;                /* fired on SIGTERM: sagas on the loop stop between steps */
    mv_stream_hub *streams;            /* GET /messages/stream: the change log fanned out */
    atomic_bool ui_enabled;            /* "ui.enabled", switched by a reload */
    mv_ui_routes ui_routes;
    struct mv_daemon_tls *tls;       /* NULL without "tls"; the certificate a reload replaces */
    mv_reach_routes reach_routes;    /* GET/PUT /preferences */
    struct mv__timer_engine *timers; /* fires due timers (expiry, …) on its own thread */
    struct mv__work_pool *saga_jobs; /* the jobs of sagas its timers wake (saves between calls) */
} mv_daemon;

/* --check-config: checks what the config names (templates, saga definitions) after the config
 * itself has loaded. Returns MV_OK or fills err naming the file at fault. */
mv_code mv_daemon_check(const mv_config *cfg, mv_err *err);
/* A template whose action runs {"saga": NAME} needs NAME in book (NULL: no "sagas" directory is
 * configured, so any saga handler is an error). The error names the template, the action and
 * the saga; sagas_dir (may be NULL) says where definitions were looked for. */
mv_code mv_daemon_check_template_sagas(const mv_template *t, const mv_saga_book *book,
                                       const char *sagas_dir, mv_err *err);
/* Opens the store (migrating it unless migrate is false, in which case an outdated schema is an
 * error), the authenticator, the metrics registry and the services. On failure everything
 * opened so far is closed. */
mv_code mv_daemon_open(mv_daemon *d, const mv_config *cfg, bool migrate, mv_err *err);
/* Closes what mv_daemon_open opened. NULL-safe, idempotent. */
void mv_daemon_close(mv_daemon *d);
/* daemon_ops.c: declares every metric family (HELP, TYPE, zero series) and installs the
 * scrape-time collector; the webhook observer (metrics + a warn line per failed call); the
 * recovery loop (a thread running a pass every recovery.intervalMs; stop joins it, NULL-safe). */
void mv_daemon_metrics_init(mv_daemon *d);
void mv_daemon_on_webhook(void *ctx, const mv_webhook_call_info *call);
typedef struct mv_recovery_loop mv_recovery_loop;
mv_code mv_recovery_loop_start(mv_daemon *d, mv_recovery_loop **out, mv_err *err);
void mv_recovery_loop_stop(mv_recovery_loop *loop);

/* The template checks of --check-config, also run by a reload on the new set: every action that
 * needs approval has approvals configured (cfg), every saga handler names a definition of book
 * (dir: where those were read, for the message). */
mv_code mv_daemon_check_approvals(const mv_config *cfg, mv_registry *reg, mv_err *err);
/* Every channel a template names is configured in cfg ("channels", or email). */
mv_code mv_daemon_check_channels(const mv_config *cfg, mv_registry *reg, mv_err *err);
mv_code mv_daemon_check_sagas(const char *dir, mv_registry *reg, const mv_saga_book *book,
                              mv_err *err);
/* Looks a saga up in the daemon's current book (ctx: the mv_daemon). */
mv_saga_finder mv_daemon_saga_finder(void);

/* daemon_reload.c, on SIGHUP: reads path again (with the same overrides) and applies templates,
 * saga definitions, "log", "cors", "limits", "ui" and the TLS certificate without closing a
 * connection; keys that need a restart are named in a warn line. Anything invalid is refused
 * with an error line and changes nothing. Returns true when applied. The main thread only. */
bool mv_daemon_reload(mv_daemon *d, mv_router *router, const char *path,
                      const mv_config_overrides *ov);
/* daemon_ops.c: the timer engine with the service's kinds registered and its thread started
 * (lag observed into missive_timer_lag_seconds); closed with mv__timer_engine_free. */
mv_code mv_daemon_timers_start(mv_daemon *d, mv_err *err);

/* Registers every route of the daemon on router (whose app is d). */
mv_code mv_daemon_routes(mv_router *router, mv_daemon *d, mv_err *err);

#endif
