/* service.c — constructing a message service: options validated once, admin roles and email
 * exclusions copied (the caller's arrays may go away), C overrides for prepare and handlers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "message/service.h"
#include "store/listen.h"
#include "store/write_async.h"

int64_t mv__svc_now(const mv_service *svc) { return mv_clock_now(svc->o.clock); }

void mv__svc_condition_stopped(void *ctx, const mv_action_def *action, const mv_err *why) {
    const condition_report *r = ctx;
    if (!r->svc->o.on_warning) return;
    json_t *fields =
        json_pack("{s:s?,s:s,s:s?,s:s}", "templateCd", r->template_cd, "actionCd",
                  action->action_cd, "messageId", r->message_id, "error", why->message);
    r->svc->o.on_warning(r->svc->o.hook_ctx, "action condition stopped at its work bound", fields);
    json_decref(fields);
}

const char *mv__svc_tenant(const mv_user *user) {
    return user && user->tenant && *user->tenant ? user->tenant : MV_DEFAULT_TENANT;
}

/* The length of s once trimmed as mv_user_id trims it. */
static size_t trimmed_len(const char *s) {
    static const char space[] = " \t\n\v\f\r";
    size_t n = strlen(s);
    while (n && strchr(space, *s))
        s++, n--;
    while (n && strchr(space, s[n - 1]))
        n--;
    return n;
}

mv_code mv__svc_check_user(const mv_user *user, mv_err *err) {
    if (!user) return MV_OK;
    mv_code rc = user->id ? mv_check_id_length("user.id", trimmed_len(user->id), err) : MV_OK;
    if (rc == MV_OK && user->nroles > MV_MAX_ROLES)
        rc = mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d roles per user", MV_MAX_ROLES);
    for (size_t i = 0; rc == MV_OK && i < user->nroles; i++) {
        char field[48];
        snprintf(field, sizeof field, "user.roles[%zu]", i);
        rc = mv_check_id_length(field, user->roles[i] ? strlen(user->roles[i]) : 0, err);
    }
    if (rc == MV_OK && user->tenant)
        rc = mv_check_id_length("user.tenant", strlen(user->tenant), err);
    return rc;
}

mv_code mv__svc_check_roles(const json_t *roles, const char *field, mv_err *err) {
    if (json_array_size(roles) > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "a message may have at most %d %s",
                          MV_MAX_ROLES, field);
    size_t i;
    const json_t *r;
    json_array_foreach(roles, i, r) {
        char name[48];
        snprintf(name, sizeof name, "%.24s[%zu]", field, i);
        mv_code rc =
            json_is_string(r) ? mv_check_id_length(name, json_string_length(r), err) : MV_OK;
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

mv_code mv__svc_require_user(const mv_user *user, char buf[MV_MAX_ID_BYTES + 1], mv_err *err) {
    mv_code rc = mv__svc_check_user(user, err);
    if (rc != MV_OK) return rc;
    if (!mv_user_id(user, buf, MV_MAX_ID_BYTES + 1))
        return mv_err_set(err, MV_INVALID_USER, "user._id must be a non-empty string or ObjectId");
    return MV_OK;
}

static mv_code check_limit(const char *name, int value, mv_err *err) {
    if (value < 1) return mv_err_set(err, MV_INVALID_PAGINATION, "%s must be at least 1", name);
    return MV_OK;
}

mv_code mv_service_new(const mv_service_options *opts, mv_service **out, mv_err *err) {
    *out = NULL;
    if (!opts || !opts->store || !opts->registry)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "a message service needs a store and a registry");
    mv_service_options o = *opts;
    if (!o.max_list_limit) o.max_list_limit = MV_DEFAULT_MAX_LIST_LIMIT;
    if (!o.default_list_limit) o.default_list_limit = MV_DEFAULT_LIST_LIMIT;
    mv_code rc;
    if ((rc = check_limit("maxListLimit", o.max_list_limit, err)) ||
        (rc = check_limit("defaultListLimit", o.default_list_limit, err)))
        return rc;
    if (o.default_list_limit > o.max_list_limit)
        return mv_err_set(err, MV_INVALID_PAGINATION,
                          "defaultListLimit must be less than or equal to maxListLimit");
    if (o.client_request_lease_ms <= 0)
        o.client_request_lease_ms = MV_DEFAULT_CLIENT_REQUEST_LEASE_MS;
    if (o.client_request_wait_zero || o.client_request_wait_ms < 0)
        o.client_request_wait_ms = 0;
    else if (o.client_request_wait_ms == 0)
        o.client_request_wait_ms = MV_DEFAULT_CLIENT_REQUEST_WAIT_MS;
    if (o.client_request_poll_ms <= 0) o.client_request_poll_ms = MV_DEFAULT_CLIENT_REQUEST_POLL_MS;
    if (o.action_lease_ms <= 0) o.action_lease_ms = MV_DEFAULT_ACTION_LEASE_MS;
    if (o.max_message_bytes <= 0) o.max_message_bytes = MV_DEFAULT_MESSAGE_BYTES;
    if (o.max_page_bytes <= 0) o.max_page_bytes = MV_DEFAULT_PAGE_BYTES;
    if (o.nadmin_roles > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d adminRoles", MV_MAX_ROLES);
    json_t *admin = json_array(); /* the toRoles of a message whose prepare gives none */
    for (size_t i = 0; admin && i < o.nadmin_roles; i++)
        json_array_append_new(admin, json_string(o.admin_roles[i] ? o.admin_roles[i] : ""));
    mv_code checked = admin ? mv__svc_check_roles(admin, "adminRoles", err)
                            : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_decref(admin);
    if (checked != MV_OK) return checked;

    mv_service *s = calloc(1, sizeof *s);
    if (!s) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    s->o = o;
    atomic_init(&s->max_message_bytes, o.max_message_bytes);
    atomic_init(&s->reach, o.reach);
    s->admin_roles = calloc(o.nadmin_roles + 1, sizeof *s->admin_roles);
    for (size_t i = 0; s->admin_roles && i < o.nadmin_roles; i++)
        s->admin_roles[s->nadmin_roles++] = strdup(o.admin_roles[i]);
    s->o.admin_roles = NULL;
    s->email_exclusions = o.email_exclusions ? json_deep_copy(o.email_exclusions) : json_array();
    s->o.email_exclusions = NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->page_mu, NULL);
    pthread_cond_init(&s->page_cv, NULL);
    mv__channels_attach(s, true);
    *out = s;
    return MV_OK;
}

void mv_service_set_max_message_bytes(mv_service *svc, int64_t max_bytes) {
    atomic_store(&svc->max_message_bytes, max_bytes > 0 ? max_bytes : MV_DEFAULT_MESSAGE_BYTES);
}

void mv_service_set_reach(mv_service *svc, const struct mv_reach *reach) {
    atomic_store(&svc->reach, reach);
}

const struct mv_reach *mv_service_reach(const mv_service *svc) {
    return svc ? atomic_load(&((mv_service *)svc)->reach) : NULL;
}

mv_store *mv__service_change_log(mv_service *svc) {
    pthread_mutex_lock(&svc->mu);
    if (!svc->change_log) {
        svc->change_log = svc->o.store;
        mv_store_options lo = {.pool_size = 1};
        mv_store *own = NULL;
        mv_err e = {0};
        if (!mv__store_reads_locally(svc->o.store) &&
            mv_store_open(mv__store_url(svc->o.store), &lo, &own, &e) == MV_OK) {
            svc->change_log = own;
            svc->own_change_log = true;
        } /* else the service's store just connected: share it rather than fail */
    }
    mv_store *log = svc->change_log;
    pthread_mutex_unlock(&svc->mu);
    return log;
}

void mv_service_free(mv_service *svc) {
    if (!svc) return;
    mv__channels_attach(svc, false);
    if (svc->own_change_log) mv_store_close(svc->change_log);
    for (size_t i = 0; i < svc->nadmin_roles; i++)
        free(svc->admin_roles[i]);
    free(svc->admin_roles);
    json_decref(svc->email_exclusions);
    for (override_entry *e = svc->overrides, *n; e; e = n) {
        n = e->next;
        free(e->template_cd);
        free(e->action_cd);
        free(e);
    }
    pthread_mutex_destroy(&svc->mu);
    pthread_mutex_destroy(&svc->page_mu);
    pthread_cond_destroy(&svc->page_cv);
    free(svc);
}

static void add_override(mv_service *svc, const char *template_cd, const char *action_cd,
                         mv_prepare_fn prepare, mv_action_fn handler, void *ctx) {
    override_entry *e = calloc(1, sizeof *e);
    if (!e) return;
    e->template_cd = strdup(template_cd);
    e->action_cd = action_cd ? strdup(action_cd) : NULL;
    e->prepare = prepare;
    e->handler = handler;
    e->ctx = ctx;
    pthread_mutex_lock(&svc->mu);
    e->next = svc->overrides; /* newest first: a later registration wins */
    svc->overrides = e;
    pthread_mutex_unlock(&svc->mu);
}

void mv_service_set_prepare(mv_service *svc, const char *template_cd, mv_prepare_fn fn, void *ctx) {
    add_override(svc, template_cd, NULL, fn, NULL, ctx);
}

void mv_service_set_handler(mv_service *svc, const char *template_cd, const char *action_cd,
                            mv_action_fn fn, void *ctx) {
    add_override(svc, template_cd, action_cd, NULL, fn, ctx);
}

static override_entry *find_override(mv_service *svc, const char *t, const char *a) {
    override_entry *found = NULL;
    pthread_mutex_lock(&svc->mu);
    for (override_entry *e = svc->overrides; e && !found; e = e->next)
        if (strcmp(e->template_cd, t) == 0 &&
            (a ? (e->action_cd && strcmp(e->action_cd, a) == 0) : !e->action_cd))
            found = e;
    pthread_mutex_unlock(&svc->mu);
    return found;
}

bool mv__svc_find_prepare(mv_service *svc, const char *template_cd, mv_prepare_fn *fn, void **ctx) {
    override_entry *e = find_override(svc, template_cd, NULL);
    if (!e) return false;
    *fn = e->prepare;
    *ctx = e->ctx;
    return true;
}

bool mv__svc_find_handler(mv_service *svc, const char *template_cd, const char *action_cd,
                          mv_action_fn *fn, void **ctx) {
    override_entry *e = find_override(svc, template_cd, action_cd);
    if (!e) return false;
    *fn = e->handler;
    *ctx = e->ctx;
    return true;
}

mv_code mv_service_health(mv_service *svc, mv_err *err) {
    /* reading works; a store that cannot take a write (a full disk, a read-only or lost server)
     * is not ready either */
    return mv_store_ready(svc->o.store, err);
}
