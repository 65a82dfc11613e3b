/* config.c — reads the daemon's JSON config into mv_config.
 *
 * Every object is checked against its list of known keys before any value is read, so a typo is
 * an error naming its full path ("auth.foo") instead of a silently ignored setting. Values are
 * read by small typed getters that name the key in their messages. Cross-key rules (lease vs
 * webhook timeout, headers auth on a public address, secrets of the right length) run last, on
 * the final values after command-line overrides. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/config.h"
#include "http/http_server.h"
#include "missive/base.h"

typedef struct loader {
    const char *file;
    mv_err *err;
    mv_config *cfg;
} loader;

static mv_code fail(loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mv_code fail(loader *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mv_err_setv(l->err, MV_INVALID_CONFIG, fmt, ap);
    va_end(ap);
    mv_err_prefix(l->err, "%s", l->file);
    return MV_INVALID_CONFIG;
}

static void key_path(char *out, size_t n, const char *prefix, const char *key) {
    if (prefix && *prefix)
        snprintf(out, n, "%s.%s", prefix, key);
    else
        snprintf(out, n, "%s", key);
}

static mv_code check_keys(loader *l, json_t *obj, const char *prefix, const char *const *known) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        bool ok = false;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = strcmp(known[i], k) == 0;
        if (!ok) {
            char p[256];
            key_path(p, sizeof p, prefix, k);
            return fail(l, "unknown key \"%s\"", p);
        }
    }
    return MV_OK;
}

/* ---- typed getters: absent (or null) keeps the default ----------------------------------- */

static mv_code get_int(loader *l, json_t *obj, const char *prefix, const char *key, int64_t min,
                       int64_t max, int64_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return MV_OK;
    char p[256];
    key_path(p, sizeof p, prefix, key);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return fail(l, "\"%s\" must be an integer from %lld to %lld", p, (long long)min,
                    (long long)max);
    *out = json_integer_value(v);
    return MV_OK;
}

static mv_code get_int32(loader *l, json_t *obj, const char *prefix, const char *key, int min,
                         int max, int *out) {
    int64_t v = *out;
    mv_code rc = get_int(l, obj, prefix, key, min, max, &v);
    *out = (int)v;
    return rc;
}

static mv_code get_bool(loader *l, json_t *obj, const char *prefix, const char *key, bool *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return MV_OK;
    char p[256];
    key_path(p, sizeof p, prefix, key);
    if (!json_is_boolean(v)) return fail(l, "\"%s\" must be true or false", p);
    *out = json_is_true(v);
    return MV_OK;
}

static mv_code get_str(loader *l, json_t *obj, const char *prefix, const char *key, char **out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return MV_OK;
    char p[256];
    key_path(p, sizeof p, prefix, key);
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v))
        return fail(l, "\"%s\" must be a non-empty string", p);
    char *s = strdup(json_string_value(v));
    if (!s) return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    free(*out);
    *out = s;
    return MV_OK;
}

static mv_code get_str_array(loader *l, json_t *obj, const char *prefix, const char *key,
                             char ***out, size_t *n) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return MV_OK;
    char p[256];
    key_path(p, sizeof p, prefix, key);
    if (!json_is_array(v)) return fail(l, "\"%s\" must be an array of strings", p);
    size_t cnt = json_array_size(v);
    char **arr = calloc(cnt + 1, sizeof *arr);
    if (!arr) return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    *out = arr;
    *n = 0;
    for (size_t i = 0; i < cnt; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || json_string_length(e) == 0)
            return fail(l, "\"%s[%zu]\" must be a non-empty string", p, i);
        if (!(arr[i] = strdup(json_string_value(e))))
            return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
        *n = i + 1;
    }
    return MV_OK;
}

/* The object at key: *out = NULL when absent or null; an error when another type. */
static mv_code get_obj(loader *l, json_t *obj, const char *prefix, const char *key,
                       const char *const *known, json_t **out) {
    *out = NULL;
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return MV_OK;
    char p[256];
    key_path(p, sizeof p, prefix, key);
    if (!json_is_object(v)) return fail(l, "\"%s\" must be an object", p);
    *out = v;
    return check_keys(l, v, p, known);
}

/* ---- paths, URLs and secrets ------------------------------------------------------------- */

/* Makes a relative *p absolute by prefixing the config directory. */
static mv_code resolve(loader *l, char **p) {
    if (!*p || (*p)[0] == '/') return MV_OK;
    size_t n = strlen(l->cfg->dir) + strlen(*p) + 2;
    char *r = malloc(n);
    if (!r) return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    snprintf(r, n, "%s/%s", l->cfg->dir, *p);
    free(*p);
    *p = r;
    return MV_OK;
}

static mv_code resolve_store(loader *l, char **url) {
    static const char SQLITE[] = "sqlite:";
    const size_t n = sizeof SQLITE - 1;
    if (strncmp(*url, SQLITE, n) != 0) return MV_OK;
    const char *path = *url + n;
    if (path[0] == '/' || path[0] == '\0' || strcmp(path, ":memory:") == 0) return MV_OK;
    size_t len = n + strlen(l->cfg->dir) + strlen(path) + 2;
    char *r = malloc(len);
    if (!r) return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    snprintf(r, len, "%s%s/%s", SQLITE, l->cfg->dir, path);
    free(*url);
    *url = r;
    return MV_OK;
}

static mv_code check_url(loader *l, const char *key, const char *url, const char *const *schemes) {
    if (!url) return MV_OK;
    for (size_t i = 0; schemes[i]; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0 && url[strlen(schemes[i])])
            return MV_OK;
    return fail(l, "\"%s\" must be a URL starting with %s%s%s", key, schemes[0],
                schemes[1] ? " or " : "", schemes[1] ? schemes[1] : "");
}

/* A Standard Webhooks secret "whsec_<base64>" means the decoded bytes. */
static mv_code decode_whsec(loader *l, const char *key, mv_config_secret *s, const char *v) {
    const char *b = v + 6;
    size_t n = strlen(b);
    while (n > 0 && b[n - 1] == '=')
        n--;
    char *url = malloc(n + 1);
    unsigned char *out = malloc(n * 3 / 4 + 2);
    bool ok = url && out;
    for (size_t i = 0; ok && i < n; i++)
        url[i] = b[i] == '+' ? '-' : b[i] == '/' ? '_' : b[i];
    size_t len = 0;
    if (ok) ok = strpbrk(b, "-_") == NULL && mv_b64url_decode(url, n, out, &len) && len > 0;
    free(url);
    if (!ok) {
        free(out);
        return fail(l,
                    "environment variable %s (named by \"%s\") starts with whsec_ but the rest "
                    "is not base64",
                    s->env, key);
    }
    s->bytes = out;
    s->len = len;
    return MV_OK;
}

static mv_code read_secret(loader *l, const char *key, mv_config_secret *s, size_t min_len) {
    if (!s->env) return MV_OK;
    const char *v = getenv(s->env);
    if (!v || !*v)
        return fail(l, "environment variable %s (named by \"%s\") is not set", s->env, key);
    if (strcmp(key, "webhookSecretEnv") == 0 && strncmp(v, "whsec_", 6) == 0)
        return decode_whsec(l, key, s, v);
    size_t n = strlen(v);
    if (n < min_len)
        return fail(l,
                    "environment variable %s (named by \"%s\") must hold at least %zu bytes, "
                    "it has %zu",
                    s->env, key, min_len, n);
    s->bytes = (unsigned char *)strdup(v);
    if (!s->bytes) return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    s->len = n;
    return MV_OK;
}

/* ---- sections ---------------------------------------------------------------------------- */

#define TRY(x)                                                                                     \
    do {                                                                                           \
        mv_code rc_ = (x);                                                                         \
        if (rc_ != MV_OK) return rc_;                                                              \
    } while (0)

static const char *const TOP_KEYS[] = {"listen",
                                       "store",
                                       "storeOptions",
                                       "templates",
                                       "sagas",
                                       "threads",
                                       "maxConnections",
                                       "connectionTimeoutMs",
                                       "auth",
                                       "adminRoles",
                                       "adminPermissionKey",
                                       "list",
                                       "leases",
                                       "webhookSecretEnv",
                                       "webhooks",
                                       "shutdownTimeoutMs",
                                       "payment",
                                       "email",
                                       "approvals",
                                       "outbox",
                                       "timers",
                                       "log",
                                       "recovery",
                                       "retention",
                                       "limits",
                                       "stream",
                                       "cors",
                                       "ui",
                                       "maxConnectionsPerIp",
                                       "headerTimeoutMs",
                                       "sagaEncryption",
                                       "tls",
                                       "channels",
                                       "preferences",
                                       "links",
                                       NULL};

static mv_code load_server(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    TRY(get_str(l, root, "", "listen", &c->listen));
    TRY(get_str(l, root, "", "store", &c->store));
    TRY(get_str(l, root, "", "templates", &c->templates));
    TRY(get_str(l, root, "", "sagas", &c->sagas));
    TRY(get_int32(l, root, "", "threads", 1, 1024, &c->threads));
    TRY(get_int32(l, root, "", "maxConnections", 1, 1000000, &c->max_connections));
    TRY(get_int32(l, root, "", "connectionTimeoutMs", 1, 3600000, &c->connection_timeout_ms));
    TRY(get_int32(l, root, "", "maxConnectionsPerIp", 0, 1000000, &c->max_connections_per_ip));
    TRY(get_int32(l, root, "", "headerTimeoutMs", 1, 3600000, &c->header_timeout_ms));
    TRY(get_int(l, root, "", "shutdownTimeoutMs", 0, 3600000, &c->shutdown_timeout_ms));
    json_t *so;
    static const char *const SO_KEYS[] = {"poolSize",           "synchronous", "busyTimeoutMs",
                                          "statementTimeoutMs", "groupCommit", NULL};
    TRY(get_obj(l, root, "", "storeOptions", SO_KEYS, &so));
    if (so) {
        TRY(get_int32(l, so, "storeOptions", "poolSize", 1, 1024, &c->store_options.pool_size));
        TRY(get_str(l, so, "storeOptions", "synchronous", &c->store_options.synchronous));
        TRY(get_int32(l, so, "storeOptions", "busyTimeoutMs", 1, 3600000,
                      &c->store_options.busy_timeout_ms));
        TRY(get_int32(l, so, "storeOptions", "statementTimeoutMs", 1, 3600000,
                      &c->store_options.statement_timeout_ms));
        bool group_commit = true;
        TRY(get_bool(l, so, "storeOptions", "groupCommit", &group_commit));
        c->store_options.no_group_commit = !group_commit;
        const char *s = c->store_options.synchronous;
        if (s && strcmp(s, "FULL") && strcmp(s, "NORMAL") && strcmp(s, "OFF"))
            return fail(l, "\"storeOptions.synchronous\" must be \"FULL\", \"NORMAL\" or \"OFF\"");
    }
    return MV_OK;
}

/* The identity-provider half of "auth" (DESIGN "Identity (JWT, JWKS)"). */
static mv_code load_identity(loader *l, json_t *a) {
    mv_config *c = l->cfg;
    char **algs = NULL;
    size_t n = 0;
    mv_code rc = get_str_array(l, a, "auth", "algorithms", &algs, &n);
    static const char *const NAMES[] = {"RS256", "ES256", "EdDSA", "HS256"}; /* mv_jwt_alg order */
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < 4 && strcmp(algs[i], NAMES[k]) != 0)
            k++;
        if (k == 4 && rc == MV_OK)
            rc = fail(l, "\"auth.algorithms[%zu]\" must be one of RS256, ES256, EdDSA, HS256", i);
        if (k < 4) c->auth.algorithms |= 1u << k;
        free(algs[i]);
    }
    free(algs);
    TRY(rc);
    if (json_is_array(json_object_get(a, "algorithms")) && n == 0)
        return fail(l, "\"auth.algorithms\" must not be empty");
    TRY(get_str(l, a, "auth", "jwksFile", &c->auth.jwks_file));
    TRY(get_str(l, a, "auth", "jwksUrl", &c->auth.jwks_url));
    TRY(get_int32(l, a, "auth", "jwksRefreshS", 1, 86400, &c->auth.jwks_refresh_s));
    TRY(get_str(l, a, "auth", "issuer", &c->auth.issuer));
    TRY(get_str(l, a, "auth", "audience", &c->auth.audience));
    TRY(get_int32(l, a, "auth", "leewaySeconds", 0, 3600, &c->auth.leeway_s));
    TRY(get_bool(l, a, "auth", "requireExp", &c->auth.require_exp));
    TRY(resolve(l, &c->auth.jwks_file));
    json_t *cl;
    static const char *const CLAIM_KEYS[] = {"user",   "roles",  "permissions",
                                             "tenant", "locale", NULL};
    TRY(get_obj(l, a, "auth", "claims", CLAIM_KEYS, &cl));
    if (cl) {
        TRY(get_str(l, cl, "auth.claims", "user", &c->auth.claim_user));
        TRY(get_str(l, cl, "auth.claims", "roles", &c->auth.claim_roles));
        TRY(get_str(l, cl, "auth.claims", "permissions", &c->auth.claim_permissions));
        TRY(get_str(l, cl, "auth.claims", "tenant", &c->auth.claim_tenant));
        TRY(get_str(l, cl, "auth.claims", "locale", &c->auth.claim_locale));
    }
    return MV_OK;
}

static mv_code load_auth(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    json_t *a;
    static const char *const KEYS[] = {
        "mode",     "trustProxyHeaders", "secretEnv",    "algorithms",
        "jwksFile", "jwksUrl",           "jwksRefreshS", "issuer",
        "audience", "leewaySeconds",     "requireExp",   "claims",
        NULL};
    TRY(get_obj(l, root, "", "auth", KEYS, &a));
    if (!a) return MV_OK;
    char *mode = NULL;
    mv_code rc = get_str(l, a, "auth", "mode", &mode);
    if (rc == MV_OK && mode) {
        if (strcmp(mode, "jwt") == 0)
            c->auth.jwt = true;
        else if (strcmp(mode, "headers") != 0)
            rc = fail(l, "\"auth.mode\" must be \"headers\" or \"jwt\"");
    }
    free(mode);
    TRY(rc);
    TRY(get_bool(l, a, "auth", "trustProxyHeaders", &c->auth.trust_proxy_headers));
    TRY(get_str(l, a, "auth", "secretEnv", &c->auth.secret.env));
    return load_identity(l, a);
}

static mv_code load_messages(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    TRY(get_str_array(l, root, "", "adminRoles", &c->admin_roles, &c->n_admin_roles));
    TRY(get_str(l, root, "", "adminPermissionKey", &c->admin_permission_key));
    json_t *o;
    static const char *const LIST_KEYS[] = {"defaultLimit", "maxLimit", "maxPageBytes", NULL};
    TRY(get_obj(l, root, "", "list", LIST_KEYS, &o));
    if (o) {
        TRY(get_int32(l, o, "list", "defaultLimit", 1, 100000, &c->list.default_limit));
        TRY(get_int32(l, o, "list", "maxLimit", 1, 100000, &c->list.max_limit));
        TRY(get_int(l, o, "list", "maxPageBytes", 1024, 1LL << 30, &c->list.max_page_bytes));
    }
    json_t *lim;
    static const char *const LIMIT_KEYS[] = {"messageBytes", NULL};
    TRY(get_obj(l, root, "", "limits", LIMIT_KEYS, &lim));
    if (lim)
        TRY(get_int(l, lim, "limits", "messageBytes", 1024, 1LL << 30, &c->limits.message_bytes));
    if (c->list.default_limit > c->list.max_limit && !json_object_get(o, "defaultLimit"))
        c->list.default_limit = c->list.max_limit;
    if (c->list.default_limit > c->list.max_limit)
        return fail(l, "\"list.defaultLimit\" (%d) must not exceed \"list.maxLimit\" (%d)",
                    c->list.default_limit, c->list.max_limit);
    static const char *const LEASE_KEYS[] = {"clientRequestMs", "clientRequestWaitMs",
                                             "clientRequestPollMs", "actionMs", NULL};
    TRY(get_obj(l, root, "", "leases", LEASE_KEYS, &o));
    if (o) {
        const int64_t day = 86400000;
        TRY(get_int(l, o, "leases", "clientRequestMs", 1, day, &c->leases.client_request_ms));
        TRY(get_int(l, o, "leases", "clientRequestWaitMs", 0, day,
                    &c->leases.client_request_wait_ms));
        TRY(get_int(l, o, "leases", "clientRequestPollMs", 1, day,
                    &c->leases.client_request_poll_ms));
        TRY(get_int(l, o, "leases", "actionMs", 1, day, &c->leases.action_ms));
    }
    return MV_OK;
}

static mv_code load_delivery(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    json_t *wse = json_object_get(root, "webhookSecretEnv");
    if (json_is_array(wse)) {
        char **names = NULL;
        size_t n = 0;
        mv_code rc = get_str_array(l, root, "", "webhookSecretEnv", &names, &n);
        if (rc == MV_OK && (n == 0 || n > 16))
            rc = fail(l, "\"webhookSecretEnv\" must name 1 to 16 variables");
        if (rc == MV_OK && n > 1 && !(c->webhook_more = calloc(n - 1, sizeof *c->webhook_more)))
            rc = mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
        for (size_t i = 0; i < n; i++) {
            if (rc == MV_OK && i == 0)
                c->webhook_secret.env = names[i];
            else if (rc == MV_OK)
                c->webhook_more[c->n_webhook_more++].env = names[i];
            else
                free(names[i]);
        }
        free(names);
        TRY(rc);
    } else {
        TRY(get_str(l, root, "", "webhookSecretEnv", &c->webhook_secret.env));
    }
    json_t *o;
    static const char *const WH_KEYS[] = {"connectTimeoutMs", "timeoutMs", "maxResponseBytes",
                                          NULL};
    TRY(get_obj(l, root, "", "webhooks", WH_KEYS, &o));
    if (o) {
        TRY(get_int32(l, o, "webhooks", "connectTimeoutMs", 1, 600000,
                      &c->webhooks.connect_timeout_ms));
        TRY(get_int32(l, o, "webhooks", "timeoutMs", 1, 3600000, &c->webhooks.timeout_ms));
        int64_t max = (int64_t)c->webhooks.max_response_bytes;
        TRY(get_int(l, o, "webhooks", "maxResponseBytes", 1, 1 << 30, &max));
        c->webhooks.max_response_bytes = (size_t)max;
    }

    static const char *const PAY_KEYS[] = {"webhook", NULL};
    TRY(get_obj(l, root, "", "payment", PAY_KEYS, &o));
    if (o) {
        c->payment.enabled = true;
        TRY(get_str(l, o, "payment", "webhook", &c->payment.webhook));
        if (!c->payment.webhook) return fail(l, "\"payment.webhook\" is required");
    }

    static const char *const EMAIL_KEYS[] = {"smtp",      "webhook",    "from",
                                             "directory", "exclusions", NULL};
    TRY(get_obj(l, root, "", "email", EMAIL_KEYS, &o));
    if (o) {
        c->email.enabled = true;
        TRY(get_str(l, o, "email", "smtp", &c->email.smtp));
        TRY(get_str(l, o, "email", "webhook", &c->email.webhook));
        TRY(get_str(l, o, "email", "from", &c->email.from));
        TRY(get_str_array(l, o, "email", "exclusions", &c->email.exclusions,
                          &c->email.n_exclusions));
        if (!c->email.smtp == !c->email.webhook)
            return fail(l, "\"email\" needs exactly one of \"smtp\" and \"webhook\"");
        if ((c->email.smtp && !c->email.from) || (c->email.from && !strchr(c->email.from, '@')))
            return fail(l, "\"email.from\" must be an email address");
        json_t *d;
        static const char *const DIR_KEYS[] = {"webhook", "file", NULL};
        TRY(get_obj(l, o, "email", "directory", DIR_KEYS, &d));
        if (d) {
            TRY(get_str(l, d, "email.directory", "webhook", &c->email.directory_webhook));
            TRY(get_str(l, d, "email.directory", "file", &c->email.directory_file));
        }
        if (!c->email.directory_webhook == !c->email.directory_file)
            return fail(l, "\"email.directory\" needs exactly one of \"webhook\" and \"file\"");
        TRY(resolve(l, &c->email.directory_file));
    }

    static const char *const SAGA_ENCRYPTION_KEYS[] = {"keyEnv", NULL};
    TRY(get_obj(l, root, "", "sagaEncryption", SAGA_ENCRYPTION_KEYS, &o));
    if (o) {
        TRY(get_str(l, o, "sagaEncryption", "keyEnv", &c->saga_encryption.key.env));
        if (!c->saga_encryption.key.env) return fail(l, "\"sagaEncryption.keyEnv\" is required");
    }

    static const char *const APPROVAL_KEYS[] = {"secretEnv", "ttlMs", "allowSelfApproval", NULL};
    TRY(get_obj(l, root, "", "approvals", APPROVAL_KEYS, &o));
    if (o) {
        c->approvals.enabled = true;
        TRY(get_str(l, o, "approvals", "secretEnv", &c->approvals.secret.env));
        TRY(get_int(l, o, "approvals", "ttlMs", 1, 30LL * 86400000, &c->approvals.ttl_ms));
        TRY(get_bool(l, o, "approvals", "allowSelfApproval", &c->approvals.allow_self_approval));
        if (!c->approvals.secret.env) return fail(l, "\"approvals.secretEnv\" is required");
    }

    static const char *const OUTBOX_KEYS[] = {"pollMs", "maxAttempts", "backoffMs", NULL};
    TRY(get_obj(l, root, "", "outbox", OUTBOX_KEYS, &o));
    if (o) {
        TRY(get_int32(l, o, "outbox", "pollMs", 1, 3600000, &c->outbox.poll_ms));
        TRY(get_int32(l, o, "outbox", "maxAttempts", 1, 1000, &c->outbox.max_attempts));
        TRY(get_int32(l, o, "outbox", "backoffMs", 1, 3600000, &c->outbox.backoff_ms));
    }

    static const char *const TIMER_KEYS[] = {"pollMs", "leaseMs", NULL};
    TRY(get_obj(l, root, "", "timers", TIMER_KEYS, &o));
    if (o) {
        TRY(get_int32(l, o, "timers", "pollMs", 10, 60000, &c->timers.poll_ms));
        TRY(get_int32(l, o, "timers", "leaseMs", 100, 3600000, &c->timers.lease_ms));
    }
    return MV_OK;
}

/* "ui": {"enabled": bool, "oidc": {"issuer", "clientId"}}; the default of enabled needs the final
 * listen address (check_whole). */
static mv_code load_ui(loader *l, json_t *root) {
    json_t *o, *oidc;
    static const char *const UI_KEYS[] = {"enabled", "oidc", NULL};
    static const char *const OIDC_KEYS[] = {"issuer", "clientId", NULL};
    TRY(get_obj(l, root, "", "ui", UI_KEYS, &o));
    if (o && json_object_get(o, "enabled") && !json_is_null(json_object_get(o, "enabled"))) {
        TRY(get_bool(l, o, "ui", "enabled", &l->cfg->ui.enabled));
        l->cfg->ui.set = true;
    }
    TRY(get_obj(l, o, "ui", "oidc", OIDC_KEYS, &oidc));
    if (!oidc) return MV_OK;
    TRY(get_str(l, oidc, "ui.oidc", "issuer", &l->cfg->ui.oidc_issuer));
    TRY(get_str(l, oidc, "ui.oidc", "clientId", &l->cfg->ui.oidc_client_id));
    static const char *const HTTP_URL[] = {"https://", "http://", NULL};
    if (!l->cfg->ui.oidc_issuer || !l->cfg->ui.oidc_client_id || !*l->cfg->ui.oidc_client_id)
        return fail(l, "\"ui.oidc\" needs \"issuer\" and \"clientId\"");
    TRY(check_url(l, "ui.oidc.issuer", l->cfg->ui.oidc_issuer, HTTP_URL));
    if (strpbrk(l->cfg->ui.oidc_issuer, " ;,'\"\r\n"))
        return fail(
            l, "\"ui.oidc.issuer\" must be a URL without spaces, quotes, commas or semicolons");
    return MV_OK;
}

/* "log", "recovery" and "retention" (docs/operations.md). */
static mv_code load_operations(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    json_t *o;
    static const char *const LOG_KEYS[] = {"level", NULL};
    TRY(get_obj(l, root, "", "log", LOG_KEYS, &o));
    json_t *level = o ? json_object_get(o, "level") : NULL;
    if (level && !json_is_null(level)) {
        static const char *const LEVELS[] = {"debug", "info", "warn", "error"};
        c->log_level = -1;
        for (int i = 0; i < 4; i++)
            if (json_is_string(level) && strcmp(json_string_value(level), LEVELS[i]) == 0)
                c->log_level = i;
        if (c->log_level < 0)
            return fail(l, "\"log.level\" must be \"debug\", \"info\", \"warn\" or \"error\"");
    }
    static const char *const RECOVERY_KEYS[] = {"intervalMs", NULL};
    TRY(get_obj(l, root, "", "recovery", RECOVERY_KEYS, &o));
    if (o) TRY(get_int(l, o, "recovery", "intervalMs", 10, 86400000, &c->recovery_interval_ms));
    static const char *const RETENTION_KEYS[] = {"clientRequestsMs", "streamEventsMs", NULL};
    TRY(get_obj(l, root, "", "retention", RETENTION_KEYS, &o));
    if (o) {
        TRY(get_int(l, o, "retention", "clientRequestsMs", 0, INT64_C(9007199254740991),
                    &c->retention.client_requests_ms));
        TRY(get_int(l, o, "retention", "streamEventsMs", 1000, 365LL * 86400000,
                    &c->retention.stream_events_ms));
    }
    return MV_OK;
}

/* Live updates: "stream", "retention" and "cors" (DESIGN part two). */
static mv_code load_live(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    json_t *o;
    static const char *const STREAM_KEYS[] = {"maxConnections", "heartbeatMs", "secretEnv", NULL};
    TRY(get_obj(l, root, "", "stream", STREAM_KEYS, &o));
    if (o) {
        TRY(get_int32(l, o, "stream", "maxConnections", 1, 1000000, &c->stream.max_connections));
        TRY(get_int(l, o, "stream", "heartbeatMs", 100, 3600000, &c->stream.heartbeat_ms));
        TRY(get_str(l, o, "stream", "secretEnv", &c->stream.secret.env));
    }
    /* "retention.streamEventsMs" is read with the other retention key (load_operations) */
    static const char *const CORS_KEYS[] = {"allowedOrigins", "maxAgeS", NULL};
    TRY(get_obj(l, root, "", "cors", CORS_KEYS, &o));
    if (o) {
        TRY(get_str_array(l, o, "cors", "allowedOrigins", &c->cors.origins, &c->cors.n_origins));
        TRY(get_int32(l, o, "cors", "maxAgeS", 0, 86400, &c->cors.max_age_s));
        for (size_t i = 0; i < c->cors.n_origins; i++)
            if (strcmp(c->cors.origins[i], "*") == 0 ||
                (strncmp(c->cors.origins[i], "https://", 8) != 0 &&
                 strncmp(c->cors.origins[i], "http://", 7) != 0))
                return fail(l, "\"cors.allowedOrigins\" entries must be origins such as "
                               "https://app.example.com (no wildcard)");
    }
    return MV_OK;
}

/* "tls": {"certFile", "keyFile"} (docs/operations.md, "HTTPS"): both or the section absent. */
static mv_code load_tls(loader *l, json_t *root) {
    mv_config *c = l->cfg;
    json_t *o;
    static const char *const TLS_KEYS[] = {"certFile", "keyFile", NULL};
    TRY(get_obj(l, root, "", "tls", TLS_KEYS, &o));
    if (!o) return MV_OK;
    TRY(get_str(l, o, "tls", "certFile", &c->tls.cert_file));
    TRY(get_str(l, o, "tls", "keyFile", &c->tls.key_file));
    if (!c->tls.cert_file || !c->tls.key_file)
        return fail(l, "\"tls\" needs both \"certFile\" and \"keyFile\"");
    TRY(resolve(l, &c->tls.cert_file));
    return resolve(l, &c->tls.key_file);
}

static mv_code check_identity(loader *l) {
    mv_config *c = l->cfg;
    const unsigned hs = 1u << 3, asym = 7u; /* HS256; RS256 | ES256 | EdDSA */
    bool jwks = c->auth.jwks_file || c->auth.jwks_url;
    if (c->auth.jwks_file && c->auth.jwks_url)
        return fail(l, "give \"auth.jwksFile\" or \"auth.jwksUrl\", not both");
    if (c->auth.jwt && !c->auth.secret.env && !jwks)
        return fail(
            l, "auth mode \"jwt\" needs \"auth.secretEnv\", \"auth.jwksFile\" or \"auth.jwksUrl\"");
    if ((c->auth.algorithms & hs) && !c->auth.secret.env)
        return fail(l, "\"auth.algorithms\" lists HS256, which needs \"auth.secretEnv\"");
    if ((c->auth.algorithms & asym) && !jwks)
        return fail(l,
                    "\"auth.algorithms\" lists RS256, ES256 or EdDSA, which need \"auth.jwksFile\" "
                    "or \"auth.jwksUrl\"");
    static const char *const HTTP[] = {"http://", "https://", NULL};
    return check_url(l, "auth.jwksUrl", c->auth.jwks_url, HTTP);
}

/* Rules across keys, on the final values (after overrides). */
static mv_code check_whole(loader *l) {
    mv_config *c = l->cfg;
    char host[256];
    int port;
    mv_err perr = {0};
    if (mv_http_parse_listen(c->listen, host, sizeof host, &port, &perr) != MV_OK)
        return fail(l, "\"listen\": %s", perr.message);
    if (!c->ui.set) c->ui.enabled = mv_http_host_is_loopback(host);
    if (c->ui.oidc_issuer && !c->auth.jwt)
        return fail(l, "\"ui.oidc\" needs \"auth.mode\": \"jwt\" (the daemon checks the "
                       "provider's tokens)");
    if (!c->auth.jwt && !c->auth.trust_proxy_headers && !mv_http_host_is_loopback(host))
        return fail(
            l, "auth mode \"headers\" trusts X-User-Id from anyone who can connect; listen on "
               "a loopback address, or set \"auth.trustProxyHeaders\": true behind a proxy that "
               "sets those headers");
    TRY(check_identity(l));
    if (strncmp(c->store, "sqlite:", 7) != 0 && strncmp(c->store, "postgres://", 11) != 0 &&
        strncmp(c->store, "postgresql://", 13) != 0)
        return fail(l, "\"store\" must be sqlite:PATH or postgres://…");
    if (c->leases.action_ms <= c->webhooks.timeout_ms)
        return fail(l,
                    "\"leases.actionMs\" (%lld) must exceed \"webhooks.timeoutMs\" (%d), or an "
                    "action's lease would expire while its handler is still running",
                    (long long)c->leases.action_ms, c->webhooks.timeout_ms);
    if (c->webhooks.connect_timeout_ms > c->webhooks.timeout_ms)
        return fail(l, "\"webhooks.connectTimeoutMs\" must not exceed \"webhooks.timeoutMs\"");
    static const char *const HTTP[] = {"http://", "https://", NULL};
    static const char *const SMTP[] = {"smtp://", "smtps://", NULL};
    TRY(check_url(l, "payment.webhook", c->payment.webhook, HTTP));
    TRY(check_url(l, "email.directory.webhook", c->email.directory_webhook, HTTP));
    TRY(check_url(l, "email.smtp", c->email.smtp, SMTP));
    TRY(check_url(l, "email.webhook", c->email.webhook, HTTP));
    TRY(read_secret(l, "auth.secretEnv", &c->auth.secret, 32));
    TRY(read_secret(l, "approvals.secretEnv", &c->approvals.secret, 32));
    TRY(read_secret(l, "stream.secretEnv", &c->stream.secret, 32));
    TRY(read_secret(l, "webhookSecretEnv", &c->webhook_secret, 1));
    for (size_t i = 0; i < c->n_webhook_more; i++)
        TRY(read_secret(l, "webhookSecretEnv", &c->webhook_more[i], 1));
    if (c->webhook_secret.env) {
        c->webhook_keys = calloc(c->n_webhook_more + 1, sizeof *c->webhook_keys);
        if (!c->webhook_keys) return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
        c->webhook_keys[0] = (mv_webhook_secret){c->webhook_secret.bytes, c->webhook_secret.len};
        for (size_t i = 0; i < c->n_webhook_more; i++)
            c->webhook_keys[i + 1] =
                (mv_webhook_secret){c->webhook_more[i].bytes, c->webhook_more[i].len};
        c->n_webhook_keys = c->n_webhook_more + 1;
    }
    TRY(read_secret(l, "sagaEncryption.keyEnv", &c->saga_encryption.key, MV_SAGA_KEY_BYTES));
    if (c->saga_encryption.key.env && c->saga_encryption.key.len != MV_SAGA_KEY_BYTES)
        return fail(l,
                    "environment variable %s (named by \"sagaEncryption.keyEnv\") must hold "
                    "exactly %d raw bytes (an AES-256 key), it has %zu",
                    c->saga_encryption.key.env, MV_SAGA_KEY_BYTES, c->saga_encryption.key.len);
    return MV_OK;
}

static void set_defaults(mv_config *c) {
    c->threads = MV_DEFAULT_THREADS;
    c->max_connections = MV_DEFAULT_MAX_CONNECTIONS;
    c->connection_timeout_ms = MV_DEFAULT_CONNECTION_TIMEOUT_MS;
    c->list.default_limit = MV_DEFAULT_LIST_LIMIT;
    c->list.max_limit = MV_DEFAULT_MAX_LIST_LIMIT;
    c->leases.client_request_ms = MV_DEFAULT_CLIENT_REQUEST_LEASE_MS;
    c->leases.client_request_wait_ms = MV_DEFAULT_CLIENT_REQUEST_WAIT_MS;
    c->leases.client_request_poll_ms = MV_DEFAULT_CLIENT_REQUEST_POLL_MS;
    c->leases.action_ms = MV_DEFAULT_ACTION_LEASE_MS;
    c->webhooks.connect_timeout_ms = MV_DEFAULT_WEBHOOK_CONNECT_TIMEOUT_MS;
    c->webhooks.timeout_ms = MV_DEFAULT_WEBHOOK_TIMEOUT_MS;
    c->webhooks.max_response_bytes = MV_DEFAULT_WEBHOOK_MAX_RESPONSE_BYTES;
    c->shutdown_timeout_ms = MV_DEFAULT_SHUTDOWN_TIMEOUT_MS;
    c->approvals.ttl_ms = MV_DEFAULT_APPROVAL_TTL_MS;
    c->outbox.poll_ms = MV_DEFAULT_OUTBOX_POLL_MS;
    c->outbox.max_attempts = MV_DEFAULT_OUTBOX_MAX_ATTEMPTS;
    c->outbox.backoff_ms = MV_DEFAULT_OUTBOX_BACKOFF_MS;
    c->timers.poll_ms = MV_DEFAULT_TIMER_POLL_MS;
    c->timers.lease_ms = MV_DEFAULT_TIMER_LEASE_MS;
    c->max_connections_per_ip = MV_DEFAULT_MAX_CONNECTIONS_PER_IP;
    c->header_timeout_ms = MV_DEFAULT_HEADER_TIMEOUT_MS;
    c->list.max_page_bytes = 4194304;
    c->limits.message_bytes = 1048576;
    c->auth.jwks_refresh_s = 300;
    c->auth.leeway_s = 30;
    c->auth.require_exp = true;
    c->log_level = 1;
    c->recovery_interval_ms = 5000;
    c->retention.client_requests_ms = 86400000;
    c->retention.stream_events_ms = 86400000;
    c->stream.max_connections = 20000;
    c->stream.heartbeat_ms = 15000;
    c->cors.max_age_s = 600;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static mv_code load(loader *l, const char *path, const mv_config_overrides *ov) {
    mv_config *c = l->cfg;
    set_defaults(c);
    if (!(c->path = strdup(path)) || !(c->dir = dir_of(path)))
        return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    json_t *root;
    mv_code rc = mv_json_load_file(path, &root, l->err);
    if (rc == MV_INVALID_JSON) l->err->code = MV_INVALID_CONFIG;
    if (rc != MV_OK) return l->err->code;
    if (!json_is_object(root)) {
        json_decref(root);
        return fail(l, "the configuration must be a JSON object");
    }
    rc = check_keys(l, root, "", TOP_KEYS);
    if (rc == MV_OK) rc = load_server(l, root);
    if (rc == MV_OK) rc = load_live(l, root);
    if (rc == MV_OK) rc = load_auth(l, root);
    if (rc == MV_OK) rc = load_messages(l, root);
    if (rc == MV_OK) rc = load_delivery(l, root);
    if (rc == MV_OK) rc = load_ui(l, root);
    if (rc == MV_OK) rc = load_operations(l, root);
    if (rc == MV_OK) rc = load_tls(l, root);
    if (rc == MV_OK && (rc = mv_config_load_reach(root, c->email.enabled, &c->reach, l->err)))
        mv_err_prefix(l->err, "%s", l->file);
    c->raw = root; /* kept: a reload compares it */
    TRY(rc);

    if (!c->admin_permission_key && !(c->admin_permission_key = strdup("is.admin")))
        return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    if (!c->listen && !(c->listen = strdup("127.0.0.1:8080")))
        return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    if (!c->store && !(c->store = strdup("sqlite:missive.db")))
        return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    TRY(resolve_store(l, &c->store));
    TRY(resolve(l, &c->templates));
    TRY(resolve(l, &c->sagas));
    if (ov && ov->listen) {
        free(c->listen);
        if (!(c->listen = strdup(ov->listen)))
            return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    }
    if (ov && ov->store) {
        free(c->store);
        if (!(c->store = strdup(ov->store)))
            return mv_err_set(l->err, MV_NO_MEMORY, "out of memory");
    }
    return check_whole(l);
}

mv_code mv_config_load(const char *path, const mv_config_overrides *ov, mv_config **out,
                       mv_err *err) {
    *out = NULL;
    mv_err local = {0};
    if (!err) err = &local;
    mv_config *c = calloc(1, sizeof *c);
    if (!c) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    loader l = {.file = path, .err = err, .cfg = c};
    mv_code rc = load(&l, path, ov);
    if (rc != MV_OK) {
        mv_config_free(c);
        return rc;
    }
    *out = c;
    return MV_OK;
}

static void free_secret(mv_config_secret *s) {
    free(s->env);
    if (s->bytes) {
        volatile unsigned char *p = s->bytes;
        for (size_t i = 0; i < s->len; i++)
            p[i] = 0;
        free(s->bytes);
    }
}

static void free_strings(char **a, size_t n) {
    for (size_t i = 0; a && i < n; i++)
        free(a[i]);
    free(a);
}

void mv_config_free(mv_config *c) {
    if (!c) return;
    free(c->path);
    free(c->dir);
    free(c->listen);
    free(c->store);
    free(c->store_options.synchronous);
    free(c->templates);
    free(c->sagas);
    free_secret(&c->auth.secret);
    free(c->auth.jwks_file);
    free(c->auth.jwks_url);
    free(c->auth.issuer);
    free(c->ui.oidc_issuer);
    free(c->ui.oidc_client_id);
    free(c->auth.audience);
    free(c->auth.claim_user);
    free(c->auth.claim_roles);
    free(c->auth.claim_permissions);
    free(c->auth.claim_tenant);
    free(c->auth.claim_locale);
    free_strings(c->admin_roles, c->n_admin_roles);
    free(c->admin_permission_key);
    free_secret(&c->webhook_secret);
    for (size_t i = 0; i < c->n_webhook_more; i++)
        free_secret(&c->webhook_more[i]);
    free(c->webhook_more);
    free(c->webhook_keys);
    free(c->payment.webhook);
    free(c->email.smtp);
    free(c->email.webhook);
    free(c->email.from);
    free(c->email.directory_webhook);
    free(c->email.directory_file);
    free_strings(c->email.exclusions, c->email.n_exclusions);
    free_secret(&c->approvals.secret);
    free_secret(&c->saga_encryption.key);
    free_secret(&c->stream.secret);
    free_strings(c->cors.origins, c->cors.n_origins);
    free(c->tls.cert_file);
    free(c->tls.key_file);
    json_decref(c->raw);
    mv_reach_free(c->reach);
    free(c);
}
