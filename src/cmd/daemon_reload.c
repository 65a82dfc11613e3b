/* daemon_reload.c — SIGHUP: templates, saga definitions and the reloadable part of the config,
 * swapped into a running daemon without closing a connection.
 *
 * Everything new is loaded and checked first, off to the side (a fresh config, a fresh template
 * registry, a fresh saga book, fresh TLS credentials); only when all of it is valid is anything
 * applied, so a bad file changes nothing and the daemon keeps serving what it had. Applying is a
 * handful of single swaps, each one atomic for its readers: the registry's contents under its own
 * lock (a request keeps the template it found), the saga book and the CORS set through atomic
 * pointers (a replaced one is kept until the daemon closes, because sagas in flight hold its
 * definitions), the message size limit, the UI switch and the log level as atomic values. No
 * request takes a lock it did not take before. The keys that only a restart can change are
 * compared with the running config's and named in the log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/daemon.h"
#include "cmd/tls.h"
#include "http/request.h"

/* What a reload applies, as key paths (the rest only at start): a whole section, or one key of a
 * section whose other keys need a restart.
 * "listen" and "store" are compared on their final values (the command line may set them). */
static const char *const RELOADABLE[] = {"log",        "cors",      "limits.messageBytes",
                                         "ui.enabled", "channels",  "preferences",
                                         "links",      "templates", "sagas",
                                         "tls",        "listen",    "store",
                                         NULL};

/* 2: path is reloaded; 1: something under path is (compare key by key); 0: neither. */
static int reload_scope(const char *path) {
    size_t n = strlen(path);
    int scope = 0;
    for (size_t i = 0; RELOADABLE[i]; i++) {
        if (strcmp(RELOADABLE[i], path) == 0) return 2;
        if (strncmp(RELOADABLE[i], path, n) == 0 && RELOADABLE[i][n] == '.') scope = 1;
    }
    return scope;
}

static void add_key(json_t *keys, const char *key) {
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) if (strcmp(json_string_value(k), key) == 0) return;
    json_array_append_new(keys, json_string(key));
}

/* Adds to keys every path under prefix whose value differs between a and b (objects, either may
 * be NULL) and that a reload does not apply, in b's order and then a's. */
static void diff_fixed(json_t *keys, const char *prefix, json_t *a, json_t *b) {
    json_t *const sides[] = {b, a};
    for (int s = 0; s < 2; s++) {
        const char *key;
        json_t *v;
        json_object_foreach(sides[s], key, v) {
            char path[256];
            snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", key);
            int scope = reload_scope(path);
            json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
            if (json_is_null(x)) x = NULL;
            if (json_is_null(y)) y = NULL;
            if (scope == 2 || (!x && !y) || (x && y && json_equal(x, y))) continue;
            if (scope == 1 && (!x || json_is_object(x)) && (!y || json_is_object(y)))
                diff_fixed(keys, path, x, y);
            else
                add_key(keys, path);
        }
    }
}

/* The keys whose values differ between the running config and the new one but cannot change
 * while the daemon runs. */
static json_t *fixed_changes(const mv_config *old, const mv_config *nc) {
    json_t *keys = json_array();
    if (!keys) return NULL;
    if (strcmp(old->listen, nc->listen) != 0) add_key(keys, "listen");
    if (strcmp(old->store, nc->store) != 0) add_key(keys, "store");
    diff_fixed(keys, "", old->raw, nc->raw);
    /* sagas and HTTPS are switched on or off only at start; their files reload */
    if ((old->sagas == NULL) != (nc->sagas == NULL)) add_key(keys, "sagas");
    if ((old->tls.cert_file == NULL) != (nc->tls.cert_file == NULL)) add_key(keys, "tls");
    return keys;
}

static const mv_saga_definition *current_saga(void *ctx, const char *name) {
    mv_daemon *d = ctx;
    return mv_saga_book_find(atomic_load(&d->sagas), name);
}

mv_saga_finder mv_daemon_saga_finder(void) { return current_saga; }

/* What a reload would swap in, all checked. */
typedef struct staged {
    mv_config *cfg;
    mv_registry *registry;
    mv_saga_book *book; /* NULL: keep the running book */
    mv_daemon_tls_creds *creds;
    json_t *fixed;
} staged;

static void staged_free(staged *s) {
    mv_config_free(s->cfg);
    mv_registry_free(s->registry);
    mv_saga_book_free(s->book);
    mv_daemon_tls_creds_free(s->creds);
    json_decref(s->fixed);
}

static mv_code stage(mv_daemon *d, const char *path, const mv_config_overrides *ov, staged *s,
                     mv_err *err) {
    mv_code rc = mv_config_load(path, ov, &s->cfg, err);
    if (rc != MV_OK) return rc;
    const mv_config *nc = s->cfg;
    if (!(s->fixed = fixed_changes(d->cfg, nc)) || !(s->registry = mv_registry_new()))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (nc->templates && (rc = mv_registry_load_dir(s->registry, nc->templates, err)) != MV_OK)
        return rc;
    /* approvals are configured at start: the templates must fit what runs */
    if ((rc = mv_daemon_check_approvals(d->cfg, s->registry, err)) != MV_OK) return rc;
    /* the new templates against the new channels: both are applied together */
    if ((rc = mv_daemon_check_channels(nc, s->registry, err)) != MV_OK) return rc;
    if (atomic_load(&d->sagas) && nc->sagas) {
        if (!(s->book = mv_saga_book_new(&d->webhook)))
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        if ((rc = mv_saga_book_load_dir(s->book, nc->sagas, err)) != MV_OK) return rc;
    }
    const mv_saga_book *book = s->book ? s->book : atomic_load(&d->sagas);
    const char *dir = s->book ? nc->sagas : d->cfg->sagas;
    if ((rc = mv_daemon_check_sagas(dir, s->registry, book, err)) != MV_OK) return rc;
    if (d->tls && nc->tls.cert_file)
        rc = mv_daemon_tls_creds_load(nc->tls.cert_file, nc->tls.key_file, &s->creds, err);
    return rc;
}

static mv_code apply(mv_daemon *d, mv_router *router, staged *s, mv_err *err) {
    const mv_config *nc = s->cfg;
    mv_code rc = mv_router_set_cors(router, (const char *const *)nc->cors.origins,
                                    nc->cors.n_origins, nc->cors.max_age_s, err);
    if (rc != MV_OK) return rc;
    mv_log_set_level(nc->log_level);
    atomic_store(&d->ui_enabled, nc->ui.enabled);
    mv_service_set_max_message_bytes(d->service, nc->limits.message_bytes);
    mv_reach **kept = realloc(d->retired_reach, (d->n_retired_reach + 1) * sizeof *kept);
    if (!kept) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    d->retired_reach = kept;
    /* the new channels, preference defaults and link settings; requests in flight may still
     * read the old ones, which live until the daemon closes (the first is the start config's) */
    mv_reach *old = (mv_reach *)mv_service_reach(d->service);
    mv_service_set_reach(d->service, s->cfg->reach);
    if (old != d->cfg->reach) d->retired_reach[d->n_retired_reach++] = old;
    s->cfg->reach = NULL;                       /* now the service's, freed with the daemon */
    mv_registry_swap(d->registry, s->registry); /* s->registry now holds the old templates */
    if (s->book) {
        mv_saga_book **more = realloc(d->retired_books, (d->n_retired_books + 1) * sizeof *more);
        if (!more) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        d->retired_books = more;
        /* sagas running now keep their definitions: the old book lives until the daemon closes */
        atomic_store(&d->durable_routes.book, s->book);
        d->retired_books[d->n_retired_books++] = atomic_exchange(&d->sagas, s->book);
        s->book = NULL;
    }
    if (s->creds) {
        mv_daemon_tls_use(d->tls, s->creds);
        s->creds = NULL;
    }
    return MV_OK;
}

bool mv_daemon_reload(mv_daemon *d, mv_router *router, const char *path,
                      const mv_config_overrides *ov) {
    staged s = {0};
    mv_err err = {0};
    mv_code rc = stage(d, path, ov, &s, &err);
    if (rc == MV_OK) rc = apply(d, router, &s, &err);
    char msg[sizeof err.message + 64];
    if (rc != MV_OK) {
        snprintf(msg, sizeof msg, "reload: refused: %s", err.message);
        mv_log("error", msg, json_pack("{s:s}", "code", mv_code_name(err.code)));
        staged_free(&s);
        return false;
    }
    if (json_array_size(s.fixed)) {
        char names[512] = "";
        size_t i, used = 0;
        json_t *k;
        json_array_foreach(s.fixed, i, k) {
            if (used < sizeof names)
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                         json_string_value(k));
        }
        snprintf(msg, sizeof msg, "reload: not applied until a restart: %s", names);
        mv_log("warn", msg, json_pack("{s:O}", "keys", s.fixed));
    }
    size_t ntemplates = mv_registry_count(d->registry);
    size_t nsagas = mv_saga_book_count(atomic_load(&d->sagas));
    snprintf(msg, sizeof msg, "reload: ok (templates %zu, sagas %zu)", ntemplates, nsagas);
    mv_log("info", msg,
           json_pack("{s:I,s:I,s:b}", "templates", (json_int_t)ntemplates, "sagas",
                     (json_int_t)nsagas, "tls", s.cfg->tls.cert_file && d->tls));
    staged_free(&s);
    return true;
}
