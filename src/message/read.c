/* read.c — the read side: visibility, list (skip or keyset cursor), count, get, getActions.
 *
 * Visible = fromUser = me OR toUser = me OR one of my roles is in toRoles. A page is the union of
 * one bounded index range per branch (sender, recipient, each role), each already ordered by
 * (created_at DESC, id DESC) and cut at the page size, merged and cut again: its cost depends on
 * the page size and the number of roles, not on the number of messages or — with the cursor — on
 * the depth of the page. `skip` is kept for compatibility and costs skip + limit rows per branch. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"

/* ---- SQL built once: one branch per role slot --------------------------------------------- */

/* A row-value comparison, so both SQLite and PostgreSQL seek the index to the cursor instead of
 * walking it from the top (an OR of two comparisons would cost the depth of the page). */
#define KEYSET "(%s, %s) < (?, ?)"

static char sql_list[16384];
static char sql_count[4096];
static char sql_mark_candidates[4096];
static pthread_once_t sql_once = PTHREAD_ONCE_INIT;

/* The three branches of visibility as one predicate over messages `m` (counts and mark-all; the
 * list uses one index range per branch instead). */
static int visible_sql(char *p, size_t left) {
    /* the tenant inside each branch (role rows carry their message's tenant): SQLite then seeks
     * each index; an outer tenant_id = ? made it scan the whole tenant instead */
    int n = snprintf(p, left,
                     "((m.tenant_id = ? AND m.from_user = ?) OR (m.tenant_id = ? AND m.to_user = ?) "
                     "OR m.id IN (SELECT message_id FROM message_roles WHERE tenant_id = ? AND "
                     "archived = ? AND role IN (");
    for (int i = 0; i < MV_MAX_ROLES; i++) n += snprintf(p + n, left - (size_t)n, i ? ", ?" : "?");
    return n + snprintf(p + n, left - (size_t)n, ")))");
}

static void build_sql(void) {
    char *p = sql_list;
    size_t left = sizeof sql_list;
    int n = snprintf(p, left,
                     "SELECT " MESSAGE_COLUMNS ", vv.seen_at, vv.read_at, vv.dismissed_at "
                     "FROM messages LEFT JOIN message_viewers vv ON vv.message_id = messages.id "
                     "AND vv.viewer_id = ? WHERE id IN ("
                     "SELECT id FROM (SELECT m.id FROM messages m" INBOX_VIEWER_JOIN("m.id")
                     " WHERE m.tenant_id = ? AND m.from_user = ? AND m.archived = ? AND " KEYSET
                     INBOX_FILTER_SQL " ORDER BY m.created_at DESC, m.id DESC LIMIT ?) AS s "
                     "UNION ALL SELECT id FROM (SELECT m.id FROM messages m" INBOX_VIEWER_JOIN("m.id")
                     " WHERE m.tenant_id = ? AND m.to_user = ? AND m.archived = ? AND " KEYSET
                     INBOX_FILTER_SQL " ORDER BY m.created_at DESC, m.id DESC LIMIT ?) AS r",
                     "m.created_at", "m.id", "m.created_at", "m.id");
    p += n, left -= (size_t)n;
    for (int i = 0; i < MV_MAX_ROLES; i++) {
        n = snprintf(p, left,
                     " UNION ALL SELECT message_id FROM (SELECT g.message_id FROM message_roles g "
                     "JOIN messages m ON m.id = g.message_id" INBOX_VIEWER_JOIN("g.message_id")
                     " WHERE g.tenant_id = ? AND g.role = ? AND g.archived = ? AND " KEYSET
                     INBOX_FILTER_SQL " ORDER BY g.created_at DESC, g.message_id DESC LIMIT ?) AS g%d",
                     "g.created_at", "g.message_id", i);
        p += n, left -= (size_t)n;
    }
    snprintf(p, left, ") ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?");

    p = sql_count;
    left = sizeof sql_count;
    n = snprintf(p, left,
                 "SELECT COUNT(*), COALESCE(SUM(CASE WHEN v.seen_at IS NULL THEN 1 ELSE 0 END), 0), "
                 "COALESCE(SUM(CASE WHEN v.read_at IS NULL THEN 1 ELSE 0 END), 0) "
                 "FROM messages m" INBOX_VIEWER_JOIN("m.id") " WHERE m.archived = ? AND ");
    n += visible_sql(p + n, left - (size_t)n);
    snprintf(p + n, left - (size_t)n, INBOX_FILTER_SQL);

    p = sql_mark_candidates;
    left = sizeof sql_mark_candidates;
    n = snprintf(p, left,
                 "SELECT m.id FROM messages m" INBOX_VIEWER_JOIN("m.id") " WHERE m.archived = 0 AND ");
    n += visible_sql(p + n, left - (size_t)n);
    snprintf(p + n, left - (size_t)n,
             INBOX_FILTER_SQL " AND (CAST(? AS BIGINT) < 0 OR m.created_at < ?) ORDER BY m.id LIMIT ?");
}

const char *message_list_sql(void) {
    pthread_once(&sql_once, build_sql);
    return sql_list;
}

const char *message_count_sql(void) {
    pthread_once(&sql_once, build_sql);
    return sql_count;
}

const char *message_counts_sql(void) {
    return message_count_sql();
}

const char *message_mark_candidates_sql(void) {
    pthread_once(&sql_once, build_sql);
    return sql_mark_candidates;
}

void visibility_bind(mv_stmt *st, int *idx, const char *uid, const mv_user *user, bool archived) {
    const char *tenant = svc_tenant(user);
    mv_stmt_bind_text(st, (*idx)++, tenant);
    mv_stmt_bind_text(st, (*idx)++, uid);
    mv_stmt_bind_text(st, (*idx)++, tenant);
    mv_stmt_bind_text(st, (*idx)++, uid);
    mv_stmt_bind_text(st, (*idx)++, tenant);
    mv_stmt_bind_int64(st, (*idx)++, archived ? 1 : 0);
    for (size_t i = 0; i < MV_MAX_ROLES; i++)
        mv_stmt_bind_text(st, (*idx)++, i < user->nroles ? user->roles[i] : NULL);
}

/* ---- cursors: opaque base64url of "<createdAt>:<id>" -------------------------------------- */

static char *cursor_encode(int64_t created_at, const char *id) {
    char raw[64];
    int n = snprintf(raw, sizeof raw, "%lld:%s", (long long)created_at, id);
    char *out = malloc(mv_b64url_len((size_t)n) + 1);
    if (out) mv_b64url_encode(raw, (size_t)n, out);
    return out;
}

static bool cursor_decode(const char *cursor, int64_t *created_at, char id[25]) {
    size_t len = strlen(cursor);
    unsigned char raw[64];
    size_t n;
    if (len == 0 || len > 80 || !mv_b64url_decode(cursor, len, raw, &n) || n >= sizeof raw)
        return false;
    raw[n] = '\0';
    char *colon = strchr((char *)raw, ':');
    if (!colon) return false;
    *colon = '\0';
    char *end;
    long long t = strtoll((char *)raw, &end, 10);
    if (*end || end == (char *)raw || t < 0 || !mv_valid_message_id(colon + 1)) return false;
    *created_at = t;
    mv_strlcpy(id, colon + 1, 25);
    return true;
}

/* ---- pagination values -------------------------------------------------------------------- */

static mv_code int_param(const json_t *v, const char *name, bool *given, int64_t *out, mv_err *err) {
    *given = v && !json_is_null(v);
    if (!*given) return MV_OK;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return MV_OK;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == (double)(int64_t)d && d > -9.2e18 && d < 9.2e18) {
            *out = (int64_t)d;
            return MV_OK;
        }
    }
    return mv_err_set(err, MV_INVALID_PAGINATION, "listMessages %s must be a finite integer", name);
}

/* ---- list ------------------------------------------------------------------------------- */

typedef struct {
    mv_service *svc;
    const mv_list_request *req;
    const char *user_id, *tenant;
    int64_t limit, skip;
    int64_t after_created;
    char after_id[25];
    json_t *messages;
} list_arg;

static mv_code list_tx(mv_db *db, void *ctx, mv_err *err) {
    list_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql_list, &st, err);
    if (rc != MV_OK) return rc;
    const mv_user *u = a->req->user;
    int archived = a->req->archived ? 1 : 0;
    int64_t inner = a->skip + a->limit + 1; /* one extra row tells whether a next page exists */
    int idx = 1;
    mv_stmt_bind_text(st, idx++, a->user_id); /* the viewer state of the page */
    for (int branch = 0; branch < 2 + MV_MAX_ROLES; branch++) {
        const char *key = branch < 2 ? a->user_id
                          : (size_t)(branch - 2) < u->nroles ? u->roles[branch - 2]
                                                             : NULL;
        mv_stmt_bind_text(st, idx++, a->user_id);
        mv_stmt_bind_text(st, idx++, a->tenant);
        mv_stmt_bind_text(st, idx++, key);
        mv_stmt_bind_int64(st, idx++, archived);
        mv_stmt_bind_int64(st, idx++, a->after_created);
        mv_stmt_bind_text(st, idx++, a->after_id);
        inbox_filter_bind(st, &idx, a->req->filter);
        mv_stmt_bind_int64(st, idx++, inner);
    }
    mv_stmt_bind_int64(st, idx++, a->limit + 1);
    mv_stmt_bind_int64(st, idx++, a->skip);
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        json_t *doc = doc_from_row(st);
        json_object_set_new(doc, "viewer", inbox_viewer_from_row(st, 30) /* after MESSAGE_COLUMNS */);
        json_array_append_new(a->messages, doc);
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_message_list(mv_service *svc, const mv_list_request *req, json_t **messages,
                        char **next_cursor, mv_err *err) {
    *messages = NULL;
    if (next_cursor) *next_cursor = NULL;
    pthread_once(&sql_once, build_sql);
    char uid[256];
    mv_code rc = svc_require_user(req->user, uid, err);
    if (rc != MV_OK) return rc;
    if (req->user->nroles > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d roles per user", MV_MAX_ROLES);
    list_arg a = {.svc = svc,
                  .req = req,
                  .user_id = uid,
                  .tenant = svc_tenant(req->user),
                  .after_created = INT64_MAX};
    bool given;
    int64_t v = 0;
    if ((rc = int_param(req->limit, "limit", &given, &v, err))) return rc;
    a.limit = !given ? svc->o.default_list_limit
              : v < 1 ? 1
              : v > svc->o.max_list_limit ? svc->o.max_list_limit
                                          : v;
    v = 0;
    if ((rc = int_param(req->skip, "skip", &given, &v, err))) return rc;
    a.skip = v < 0 ? 0 : v;
    if (a.skip > 1000000)
        return mv_err_set(err, MV_INVALID_PAGINATION, "listMessages skip must be at most 1000000; "
                                                      "use the cursor for deep pages");
    if (req->cursor && !cursor_decode(req->cursor, &a.after_created, a.after_id))
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    a.messages = json_array();
    rc = mv_store_read(svc->o.store, list_tx, &a, err);
    if (rc != MV_OK) {
        json_decref(a.messages);
        return rc;
    }
    if ((int64_t)json_array_size(a.messages) > a.limit) {
        json_array_remove(a.messages, (size_t)a.limit);
        json_t *last = json_array_get(a.messages, (size_t)a.limit - 1);
        if (next_cursor)
            *next_cursor = cursor_encode(json_integer_value(json_object_get(last, "createdAt")),
                                         mv_json_str(last, "id"));
    }
    *messages = a.messages;
    return MV_OK;
}

/* ---- count ------------------------------------------------------------------------------ */

typedef struct {
    const mv_user *user;
    const char *uid;
    const mv_inbox_filter *filter;
    bool archived;
    mv_inbox_counts counts;
} count_arg;

/* The unfiltered inbox count (the badge) comes from the maintained tallies (tally.c); any filter
 * or the archive is counted from the messages themselves. */
static bool tallied(const count_arg *a) {
    static const mv_inbox_filter none = {0};
    return !a->archived && (!a->filter || memcmp(a->filter, &none, sizeof none) == 0);
}

static mv_code count_tx(mv_db *db, void *ctx, mv_err *err) {
    count_arg *a = ctx;
    if (tallied(a)) return tally_counts_tx(db, a->user, a->uid, &a->counts, err);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql_count, &st, err);
    if (rc != MV_OK) return rc;
    int idx = 1;
    mv_stmt_bind_text(st, idx++, a->uid); /* the viewer join */
    mv_stmt_bind_int64(st, idx++, a->archived ? 1 : 0);
    visibility_bind(st, &idx, a->uid, a->user, a->archived);
    inbox_filter_bind(st, &idx, a->filter);
    int r = mv_stmt_step(st, err);
    if (r == 1)
        a->counts = (mv_inbox_counts){mv_stmt_int64(st, 0), mv_stmt_int64(st, 1),
                                      mv_stmt_int64(st, 2)};
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_message_counts(mv_service *svc, const mv_user *user, const mv_inbox_filter *filter,
                          bool archived, mv_inbox_counts *out, mv_err *err) {
    *out = (mv_inbox_counts){0};
    pthread_once(&sql_once, build_sql);
    char uid[256];
    mv_code rc = svc_require_user(user, uid, err);
    if (rc != MV_OK) return rc;
    if (user->nroles > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d roles per user", MV_MAX_ROLES);
    count_arg a = {user, uid, filter, archived, {0}};
    rc = mv_store_read(svc->o.store, count_tx, &a, err);
    if (rc == MV_OK) *out = a.counts;
    return rc;
}

mv_code mv_message_count(mv_service *svc, const mv_user *user, int64_t *count, mv_err *err) {
    mv_inbox_counts c;
    mv_code rc = mv_message_counts(svc, user, NULL, false, &c, err);
    *count = c.count;
    return rc;
}

/* ---- get -------------------------------------------------------------------------------- */

typedef struct {
    const char *id, *tenant;
    const char *viewer_id; /* whose "viewer" state to attach; NULL = all null */
    json_t *doc;
} get_arg;

static mv_code get_tx(mv_db *db, void *ctx, mv_err *err) {
    get_arg *a = ctx;
    mv_code rc = doc_load(db, a->id, a->tenant, &a->doc, err);
    return rc == MV_OK && a->doc ? inbox_viewer_attach(db, a->doc, a->viewer_id, err) : rc;
}

/* A message of the user's tenant (user NULL: any tenant); another tenant's is not found.
 * viewer_id: whose "viewer" state to attach (NULL = all null). */
static mv_code load_message(mv_service *svc, const char *id, const mv_user *user,
                            const char *viewer_id, json_t **doc, mv_err *err) {
    get_arg a = {id, user ? svc_tenant(user) : NULL, viewer_id, NULL};
    *doc = NULL;
    if (!mv_valid_message_id(id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    mv_code rc = mv_store_read(svc->o.store, get_tx, &a, err);
    if (rc != MV_OK) return rc;
    if (!a.doc) return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id);
    *doc = a.doc;
    return MV_OK;
}

mv_code mv_message_get(mv_service *svc, const char *id, const mv_user *user, json_t **message,
                       mv_err *err) {
    json_t *doc;
    char uid[256];
    bool has_user = user && svc_require_user(user, uid, NULL) == MV_OK;
    mv_code rc = load_message(svc, id, user, has_user ? uid : NULL, &doc, err);
    if (rc != MV_OK) return rc;
    if (user && !mv_user_is_sender(user, doc) && !mv_user_is_receiver(user, doc)) {
        json_decref(doc);
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id);
    }
    *message = doc;
    return MV_OK;
}

/* ---- getActions ------------------------------------------------------------------------- */

mv_code mv_message_actions(mv_service *svc, const char *id, mv_usertype usertype,
                           const mv_user *user, bool is_admin, json_t **out, mv_err *err) {
    *out = NULL;
    json_t *doc;
    mv_code rc = load_message(svc, id, user, NULL, &doc, err);
    if (rc != MV_OK) return rc;
    char uid[256];
    if ((rc = svc_require_user(user, uid, err)) != MV_OK) goto done;
    if (!is_admin && !(usertype == MV_SENDER ? mv_user_is_sender(user, doc)
                                             : mv_user_is_receiver(user, doc))) {
        rc = mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id);
        goto done;
    }
    const char *template_cd = mv_json_str(doc, "templateCd");
    if (template_cd && strcmp(template_cd, MV_GENERIC_NOTIFICATION_TEMPLATE_CD) == 0) {
        *out = json_pack("{s:s,s:[]}", "uiTemplate", "notification", "actions");
        goto done;
    }
    mv_template *t = mv_registry_find(svc->o.registry, template_cd ? template_cd : "");
    if (!t) {
        rc = mv_err_set(err, MV_TEMPLATE_NOT_FOUND, "template \"%s\" not found",
                        template_cd ? template_cd : "");
        goto done;
    }
    json_t *actions = NULL;
    const char *state = mv_json_str(doc, "actionState");
    if (is_admin || (state && strcmp(state, "archived") == 0)) {
        actions = json_array();
    } else {
        json_t *payload = json_object_get(doc, "payload");
        rc = mv_actions_filter(t, usertype, user, doc, payload, &actions, err);
    }
    if (rc == MV_OK)
        *out = json_pack("{s:s,s:o}", "uiTemplate", mv_template_ui(t, usertype), "actions", actions);
    mv_template_release(t);
done:
    json_decref(doc);
    return rc;
}
