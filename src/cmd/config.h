/* cmd/config.h — the daemon's JSON configuration file (DESIGN "Configuration") as a struct.
 *
 * mv_config_load reads the file, rejects unknown keys naming their path ("auth.foo"), checks
 * every type and range, fills defaults, resolves relative paths against the file's directory,
 * and reads the secrets from the environment variables the file names (never from the file).
 * A loaded config is complete and consistent: nothing downstream re-validates it. */
#ifndef MISSIVE_CMD_CONFIG_H
#define MISSIVE_CMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "missive/deliver.h"
#include "missive/durable.h"
#include "missive/error.h"
#include "missive/reach.h"

typedef struct mv_config_secret {
    char *env;            /* the variable's name, NULL when not configured */
    unsigned char *bytes; /* its raw bytes (NUL-terminated for convenience) */
    size_t len;
} mv_config_secret;

typedef struct mv_config {
    char *path; /* the config file as given */
    char *dir;  /* its directory: the base of relative paths */

    char *listen; /* "127.0.0.1:8080" */
    char *store;  /* store URL; a relative sqlite: path is resolved */
    struct {
        int pool_size;       /* 0 → the store's default */
        char *synchronous;   /* "FULL" (default), "NORMAL", "OFF" */
        int busy_timeout_ms; /* 0 → default */
        int statement_timeout_ms;
        bool no_group_commit; /* "groupCommit": false (benchmark baseline) */
    } store_options;
    char *templates;            /* directory (resolved), NULL when absent */
    char *sagas;                /* directory (resolved), NULL when absent (sagas disabled) */
    int threads;                /* threads for requests that write or call out, default 64 */
    int max_connections;        /* default 10000 (capped by the descriptor limit) */
    int connection_timeout_ms;  /* idle HTTP connection timeout, default 30000 */
    int max_connections_per_ip; /* default 512; 0 = no limit */
    int header_timeout_ms;      /* a connection's first request head, default 10000 */

    struct {
        bool jwt;                 /* mode "jwt"; false → "headers" */
        bool trust_proxy_headers; /* headers mode on a non-loopback address */
        mv_config_secret secret;  /* jwt: from secretEnv (at least 32 bytes) */
        unsigned algorithms;      /* bit (1u << mv_jwt_alg) each; 0 → by key material */
        char *jwks_file;          /* resolved path, or NULL */
        char *jwks_url;           /* http(s) URL, or NULL */
        int jwks_refresh_s;       /* 300 */
        char *issuer, *audience;  /* NULL → not checked */
        int leeway_s;             /* 30 */
        bool require_exp;         /* true: a token without exp is refused */
        char *claim_user, *claim_roles, *claim_permissions, *claim_tenant; /* NULL → defaults */
        char *claim_locale; /* the reader's language (routes_reach.c); NULL → none */
    } auth;

    char **admin_roles; /* default none */
    size_t n_admin_roles;
    char *admin_permission_key; /* "is.admin" */

    struct {
        int default_limit;      /* 50 */
        int max_limit;          /* 100 */
        int64_t max_page_bytes; /* 4194304: a page ends early rather than exceed it */
    } list;
    struct {
        int64_t message_bytes; /* 1048576: payload plus rendered content of one message */
    } limits;
    struct {
        int64_t client_request_ms;      /* 30000 */
        int64_t client_request_wait_ms; /* 5000 */
        int64_t client_request_poll_ms; /* 200 */
        int64_t action_ms;              /* 30000 */
    } leases;

    mv_config_secret webhook_secret; /* webhookSecretEnv (its first name); NULL env when absent */
    mv_config_secret *webhook_more;  /* the array's further names (rotation: older secrets) */
    size_t n_webhook_more;
    mv_webhook_secret *webhook_keys; /* every webhook secret in order, pointing into the above */
    size_t n_webhook_keys;           /* 0 when webhookSecretEnv is absent */
    struct {
        int connect_timeout_ms;    /* 2000 */
        int timeout_ms;            /* 10000 */
        size_t max_response_bytes; /* 1048576 */
    } webhooks;
    int64_t shutdown_timeout_ms; /* 30000 */

    struct {
        bool enabled;
        char *webhook;
    } payment;
    struct {
        bool enabled;
        char *smtp;              /* exactly one of smtp and webhook */
        char *webhook;           /* POST {"email": {…}} instead of SMTP */
        char *from;              /* required with smtp */
        char *directory_webhook; /* exactly one of these two */
        char *directory_file;    /* JSON file {"userId": "address"} (resolved) */
        char **exclusions;
        size_t n_exclusions;
    } email;
    struct {
        bool enabled;
        mv_config_secret secret;  /* at least 32 bytes */
        int64_t ttl_ms;           /* 900000 */
        bool allow_self_approval; /* false: a principal cannot decide their own approval */
    } approvals;
    struct {
        mv_config_secret key; /* sagaEncryption.keyEnv: exactly MV_SAGA_KEY_BYTES; NULL env = off */
    } saga_encryption;
    struct {
        int poll_ms;      /* 1000 */
        int max_attempts; /* 10 */
        int backoff_ms;   /* 1000 (doubles per attempt) */
    } outbox;
    struct {
        int poll_ms;  /* 250: the longest a SQLite daemon sleeps before looking for due timers */
        int lease_ms; /* 30000: how long a claimed timer is this daemon's before others take it */
    } timers;
    struct {
        bool enabled;         /* /ui/ served; default: true on a loopback listen address */
        bool set;             /* "ui.enabled" given in the file */
        char *oidc_issuer;    /* "ui.oidc.issuer": the console signs in there; NULL = off */
        char *oidc_client_id; /* "ui.oidc.clientId" */
    } ui;
    /* Operations (docs/operations.md) */
    int log_level;                /* "log.level": 0 debug, 1 info (default), 2 warn, 3 error */
    int64_t recovery_interval_ms; /* "recovery.intervalMs": 5000 */
    struct {
        int64_t client_requests_ms; /* 86400000 */
        int64_t stream_events_ms;   /* 86400000 */
    } retention;
    struct {
        int max_connections;     /* 20000: beyond → 503 stream_capacity */
        int64_t heartbeat_ms;    /* 15000 */
        mv_config_secret secret; /* stream tickets; else approvals.secretEnv's */
    } stream;
    struct {
        char **origins; /* allowed origins, exact match; none by default */
        size_t n_origins;
        int max_age_s; /* 600 */
    } cors;
    /* Operations, second edition (docs/operations.md): HTTPS and reloads */
    struct {
        char *cert_file; /* "tls.certFile" (resolved), PEM chain; NULL: plain HTTP */
        char *key_file;  /* "tls.keyFile" (resolved), PEM private key */
    } tls;
    json_t *raw; /* the file as read: a reload compares the keys that cannot change live */
    mv_reach
        *reach; /* "channels", "preferences", "links" (config_reach.c); never NULL once loaded */
} mv_config;

/* Command-line values that replace the file's (NULL = keep). Relative paths here are relative
 * to the working directory, as a shell user expects. */
typedef struct mv_config_overrides {
    const char *listen;
    const char *store;
} mv_config_overrides;

/* Loads and validates path. ov may be NULL. Errors are MV_INVALID_CONFIG (or MV_IO when the
 * file cannot be read) with a message naming the file and the key. *out owned by the caller:
 * mv_config_free. */
mv_code mv_config_load(const char *path, const mv_config_overrides *ov, mv_config **out,
                       mv_err *err);
/* Parses the reach sections of a config root ("channels", "preferences", "links") into a new *out
 * (mv_reach_free); on its own so that a reload can build a new one. MV_INVALID_CONFIG naming the
 * key otherwise. email_enabled: whether the config has "email". */
mv_code mv_config_load_reach(const json_t *root, bool email_enabled, mv_reach **out, mv_err *err);
/* Frees the config and wipes the secrets. NULL-safe. */
void mv_config_free(mv_config *cfg);

#endif
