/* read.c — the read side: visibility, list (skip or keyset cursor), count, get, getActions.
 *
 * Visible = fromUser = me OR toUser = me OR one of my roles is in toRoles. A page is the union of
 * one bounded index range per branch (sender, recipient, each role), each already ordered by
 * (created_at DESC, id DESC) and cut at the page size, merged and cut again: its cost depends on
 * the page size and the number of roles, not on the number of messages or — with the cursor — on
 * the depth of the page. `skip` is kept for compatibility and costs skip + limit rows per branch.
 *
 * A page is also bounded in bytes (list.maxPageBytes): the page query returns ids with the size
 * of their stored content, the page is cut where the budget ends (never below one message), and
 * only the rows that fit are read, a chunk of ids at a time, each measured as the JSON it becomes
 * and handed on at once (mv_message_list_each). So a page never holds more than its budget,
 * whatever the messages weigh. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "base/strbuf.h"
#include "message/inbox_internal.h"

/* ---- SQL built once: one branch per role slot --------------------------------------------- */

/* A row-value comparison, so both SQLite and PostgreSQL seek the index to the cursor instead of
 * walking it from the top (an OR of two comparisons would cost the depth of the page). */
#define KEYSET "(%s, %s) < (?, ?)"

/* The stored size of a message, as the page query reports it (characters of its JSON columns). */
#define STORED_SIZE                                                                                \
    "LENGTH(messages.payload) + LENGTH(messages.sender_content) + "                                \
    "LENGTH(messages.receiver_content) + LENGTH(messages.documents) + LENGTH(messages.to_roles) "  \
    "+ "                                                                                           \
    "COALESCE(LENGTH(messages.display), 0)"

/* The rows of a page are read by id, FETCH_CHUNK at a time (unused slots bind NULL), with the
 * viewer's state of each (the first parameter), in any order (fetch_page restores the page's). */
#define FETCH_CHUNK 32
#define FETCH_SLOTS                                                                                \
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "   \
    "?, ?"
static const char SQL_FETCH_PAGE[] =
    "SELECT " MESSAGE_COLUMNS ", vv.seen_at, vv.read_at, vv.dismissed_at, vv.snoozed_until, "
    "vv.reminded_at "
    "FROM messages LEFT JOIN message_viewers vv ON vv.message_id = messages.id "
    "AND vv.viewer_id = ? WHERE messages.id IN (" FETCH_SLOTS ")";

/* Parameters of one list branch: the viewer join, tenant, key, archived, the keyset (2), the
 * filters, the branch's limit. A statement binds its branches and LIMIT/OFFSET. */
#define LIST_BRANCH_PARAMS (6 + INBOX_FILTER_PARAMS + 1)
#define LIST_PARAMS ((2 + MV_LIST_ROLE_SLOTS) * LIST_BRANCH_PARAMS + 2)
/* visible_sql: tenant and user twice, tenant and archived of the role rows, every role slot. */
#define VISIBLE_PARAMS (6 + MV_MAX_ROLES)
#define COUNT_PARAMS (2 + VISIBLE_PARAMS + INBOX_FILTER_PARAMS)
#define MARK_PARAMS (1 + VISIBLE_PARAMS + INBOX_FILTER_PARAMS + 3)
_Static_assert(LIST_PARAMS <= MV_STMT_MAX_PARAMS, "a list statement binds too many values");
_Static_assert(COUNT_PARAMS <= MV_STMT_MAX_PARAMS, "the count statement binds too many values");
_Static_assert(MARK_PARAMS <= MV_STMT_MAX_PARAMS, "the mark-all statement binds too many values");
_Static_assert(MV_LIST_ROLE_SLOTS <= MV_MAX_ROLES, "more role slots than roles");

#define LIST_HEAD                                                                                  \
    "SELECT messages.id, messages.created_at, " STORED_SIZE " FROM messages "                      \
    "WHERE messages.id IN ("                                                                       \
    "SELECT id FROM (SELECT m.id FROM messages m" INBOX_VIEWER_JOIN(                               \
        "m.id") " WHERE m.tenant_id = ? AND m.from_user = ? AND m.archived = ? AND " KEYSET        \
        INBOX_FILTER_SQL " ORDER BY m.created_at DESC, m.id DESC LIMIT ?) AS s "                   \
                "UNION ALL SELECT id FROM (SELECT m.id FROM messages m" INBOX_VIEWER_JOIN(         \
                    "m.id") " WHERE m.tenant_id = ? AND m.to_user = ? AND m.archived = ? "         \
                            "AND " KEYSET INBOX_FILTER_SQL                                         \
                            " ORDER BY m.created_at DESC, m.id DESC LIMIT ?) AS r"
#define LIST_ROLE_BRANCH                                                                           \
    " UNION ALL SELECT message_id FROM (SELECT g.message_id FROM message_roles g "                 \
    "JOIN messages m ON m.id = g.message_id" INBOX_VIEWER_JOIN(                                    \
        "g.message_id") " WHERE g.tenant_id = ? AND g.role = ? AND g.archived = ? AND " KEYSET     \
        INBOX_FILTER_SQL " ORDER BY g.created_at DESC, g.message_id DESC LIMIT ?) AS g%d"
#define LIST_TAIL ") ORDER BY messages.created_at DESC, messages.id DESC LIMIT ? OFFSET ?"
#define VISIBLE_HEAD                                                                               \
    "((m.tenant_id = ? AND m.from_user = ?) OR (m.tenant_id = ? AND m.to_user = ?) "               \
    "OR m.id IN (SELECT message_id FROM message_roles WHERE tenant_id = ? AND "                    \
    "archived = ? AND role IN ("
#define COUNT_HEAD                                                                                 \
    "SELECT COUNT(*), COALESCE(SUM(CASE WHEN v.seen_at IS NULL THEN 1 ELSE 0 END), 0), "           \
    "COALESCE(SUM(CASE WHEN v.read_at IS NULL THEN 1 ELSE 0 END), 0) "                             \
    "FROM messages m" INBOX_VIEWER_JOIN("m.id") " WHERE m.archived = ? AND "
#define MARK_HEAD                                                                                  \
    "SELECT m.id FROM messages m" INBOX_VIEWER_JOIN("m.id") " WHERE m.archived = 0 AND "
#define MARK_TAIL                                                                                  \
    INBOX_FILTER_SQL " AND (CAST(? AS BIGINT) < 0 OR m.created_at < ?) ORDER BY m.id LIMIT ?"
/* Each %s / %d of the formats above adds at most 16 characters. */
#define VISIBLE_BYTES (sizeof VISIBLE_HEAD + MV_MAX_ROLES * sizeof ", ?" + sizeof ")))")

/* Each buffer holds its statement, by the sizes of the pieces it is built from (sql_add stops
 * rather than run a cut query if that were ever wrong). */
static char sql_list[sizeof LIST_HEAD + 4 * 16 +
                     MV_LIST_ROLE_SLOTS * (sizeof LIST_ROLE_BRANCH + 3 * 16) + sizeof LIST_TAIL];
static char sql_count[sizeof COUNT_HEAD + VISIBLE_BYTES + sizeof INBOX_FILTER_SQL];
static char sql_mark_candidates[sizeof MARK_HEAD + VISIBLE_BYTES + sizeof MARK_TAIL];
static pthread_once_t sql_once = PTHREAD_ONCE_INIT;

typedef struct {
    char *p;
    size_t size, used;
} sql_text;

/* Appends, never past the end: text that does not fit means the sizes above are wrong — stop
 * rather than run a truncated query (`left -= n` cannot wrap here). */
static void sql_add(sql_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sql_add(sql_text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->used, t->size - t->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= t->size - t->used) abort();
    t->used += (size_t)n;
}

/* The three branches of visibility as one predicate over messages `m` (counts and mark-all; the
 * list uses one index range per branch instead). */
static void visible_sql(sql_text *t) {
    /* the tenant inside each branch (role rows carry their message's tenant): SQLite then seeks
     * each index; an outer tenant_id = ? made it scan the whole tenant instead */
    sql_add(t, "%s", VISIBLE_HEAD);
    for (int i = 0; i < MV_MAX_ROLES; i++)
        sql_add(t, "%s", i ? ", ?" : "?");
    sql_add(t, "%s", ")))");
}

static void build_sql(void) {
    sql_text t = {sql_list, sizeof sql_list, 0};
    sql_add(&t, LIST_HEAD, "m.created_at", "m.id", "m.created_at", "m.id");
    for (int i = 0; i < MV_LIST_ROLE_SLOTS; i++)
        sql_add(&t, LIST_ROLE_BRANCH, "g.created_at", "g.message_id", i);
    sql_add(&t, "%s", LIST_TAIL);

    t = (sql_text){sql_count, sizeof sql_count, 0};
    sql_add(&t, "%s", COUNT_HEAD);
    visible_sql(&t);
    sql_add(&t, "%s", INBOX_FILTER_SQL);

    t = (sql_text){sql_mark_candidates, sizeof sql_mark_candidates, 0};
    sql_add(&t, "%s", MARK_HEAD);
    visible_sql(&t);
    sql_add(&t, "%s", MARK_TAIL);
}

const char *mv__message_list_sql(void) {
    pthread_once(&sql_once, build_sql);
    return sql_list;
}

const char *mv__message_count_sql(void) {
    pthread_once(&sql_once, build_sql);
    return sql_count;
}

const char *mv__message_counts_sql(void) { return mv__message_count_sql(); }

const char *mv__message_mark_candidates_sql(void) {
    pthread_once(&sql_once, build_sql);
    return sql_mark_candidates;
}

void mv__visibility_bind(mv_stmt *st, int *idx, const char *uid, const mv_user *user,
                         bool archived) {
    const char *tenant = mv__svc_tenant(user);
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

/* A message cursor is the lists' keyset cursor whose id is a message id. */
static bool cursor_decode(const char *cursor, int64_t *created_at, char id[25]) {
    return mv__keyset_cursor_decode(cursor, created_at, id, 25) && mv_valid_message_id(id);
}

/* ---- pagination values -------------------------------------------------------------------- */

static mv_code int_param(const json_t *v, const char *name, bool *given, int64_t *out,
                         mv_err *err) {
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
    mv_message_sink sink;           /* receives each message of the page, in order */
    mv_message_text_sink text_sink; /* or its JSON text, written from the row */
    void *sink_ctx;
    mv_strbuf row;        /* text_sink: the message being written */
    size_t count;         /* messages handed to the sink */
    int64_t last_created; /* the last one's key, for the next cursor */
    char last_id[25];
    bool more; /* a next page exists */
} list_arg;

/* Reads the messages of ids[0..n) (in page order), handing each to the sink, while the page stays
 * within budget bytes of JSON; *full = true when a message did not fit. A chunk's rows come in
 * whatever order the store finds them (no ORDER BY: SQLite's sorter copied every row and every
 * column it sorted, ~75 allocations a page) and are put back in page order here: the text path
 * writes them into one buffer and keeps each one's place, the document path keeps the documents. */
static mv_code fetch_page(mv_db *db, list_arg *a, char (*ids)[25], size_t n, int64_t budget,
                          int64_t *used, bool *full, mv_err *err) {
    for (size_t base = 0; base < n && !*full; base += FETCH_CHUNK) {
        size_t m = n - base < FETCH_CHUNK ? n - base : FETCH_CHUNK;
        mv_stmt *st;
        mv_code rc = mv_db_prepare(db, SQL_FETCH_PAGE, &st, err);
        if (rc != MV_OK) return rc;
        mv_stmt_bind_text(st, 1, a->user_id);
        for (size_t i = 0; i < FETCH_CHUNK; i++)
            mv_stmt_bind_text(st, (int)i + 2, i < m ? ids[base + i] : NULL);
        struct {
            bool got;
            size_t at, len;     /* text path: the message's bytes in a->row */
            int64_t created_at; /* text path */
            json_t *doc;        /* document path */
        } slot[FETCH_CHUNK] = {0};
        a->row.len = 0;
        int r;
        while ((r = mv_stmt_step(st, err)) == 1) {
            const char *id = mv_stmt_text(st, 0);
            size_t k = 0;
            while (k < m && (!id || strcmp(ids[base + k], id) != 0))
                k++;
            if (k == m || slot[k].got) continue;
            slot[k].got = true;
            if (a->text_sink) {
                slot[k].at = a->row.len;
                if (!mv__doc_write_row(&a->row, st, st, MV__MESSAGE_NCOLS)) {
                    rc = mv_err_set(err, MV_NO_MEMORY, "out of memory writing a message");
                    break;
                }
                slot[k].len = a->row.len - slot[k].at;
                slot[k].created_at = mv_stmt_is_null(st, 26) ? 0 : mv_stmt_int64(st, 26);
            } else {
                slot[k].doc = mv__doc_from_row(st);
                json_object_set_new(slot[k].doc, "viewer",
                                    mv__inbox_viewer_from_row(st, MV__MESSAGE_NCOLS));
            }
        }
        mv_stmt_done(st);
        if (rc == MV_OK && r < 0) rc = err ? err->code : MV_INTERNAL;
        mv_strbuf text = {.count_only = true}; /* each document's JSON bytes, counted, not kept */
        for (size_t k = 0; k < m; k++) {
            if (!slot[k].got) continue; /* gone since the page query */
            json_t *doc = slot[k].doc;
            slot[k].doc = NULL;
            if (rc != MV_OK || *full) {
                json_decref(doc);
                continue;
            }
            size_t bytes = slot[k].len;
            if (!a->text_sink) {
                text.len = 0; /* counted as json_dumpb counts: 0 when it cannot be written */
                bytes = mv_json_write(&text, doc) ? text.len : 0;
            }
            int64_t size = (int64_t)bytes + 1; /* and its comma */
            if (a->count > 0 && *used + size > budget) {
                json_decref(doc);
                *full = true;
                continue;
            }
            *used += size;
            a->last_created = a->text_sink ? slot[k].created_at
                                           : json_integer_value(json_object_get(doc, "createdAt"));
            mv_strlcpy(a->last_id, ids[base + k], sizeof a->last_id);
            a->count++;
            bool ok = a->text_sink ? a->text_sink(a->sink_ctx, a->row.data + slot[k].at, bytes)
                                   : a->sink(a->sink_ctx, doc, bytes);
            if (!ok) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory writing a page of messages");
        }
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

/* Admission of a page's bytes (see service.h): waits while other pages hold the budget. One page
 * is always admitted, whatever its size, so nothing waits forever. */
static void page_admit(mv_service *svc, int64_t bytes) {
    int64_t limit = MV_PAGES_IN_FLIGHT * svc->o.max_page_bytes;
    pthread_mutex_lock(&svc->page_mu);
    while (svc->page_bytes_in_flight > 0 && svc->page_bytes_in_flight + bytes > limit)
        pthread_cond_wait(&svc->page_cv, &svc->page_mu);
    svc->page_bytes_in_flight += bytes;
    pthread_mutex_unlock(&svc->page_mu);
}

static void page_release(mv_service *svc, int64_t bytes) {
    pthread_mutex_lock(&svc->page_mu);
    svc->page_bytes_in_flight -= bytes;
    pthread_cond_broadcast(&svc->page_cv);
    pthread_mutex_unlock(&svc->page_mu);
}

/* Appends the page keys ({"id", "createdAt", "size"}) the list statement finds for one slice of
 * the user's roles (slice 0 also holds the user's own sent and received messages): the newest
 * `inner` per branch after the keyset position, then `limit` of them from `offset` on. */
static mv_code slice_keys(mv_db *db, const list_arg *a, size_t slice, int64_t after_created,
                          const char *after_id, int64_t inner, int64_t limit, int64_t offset,
                          mv__page_keys *out, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql_list, &st, err);
    if (rc != MV_OK) return rc;
    const mv_user *u = a->req->user;
    /* scheduled: the sender's own branch over the messages not sent yet (schedule.c) */
    bool scheduled = a->req->scheduled;
    int archived = scheduled ? 2 : a->req->archived ? 1 : 0;
    int idx = 1;
    for (int branch = 0; branch < 2 + MV_LIST_ROLE_SLOTS; branch++) {
        size_t role = slice * MV_LIST_ROLE_SLOTS + (size_t)(branch - 2);
        /* a NULL key matches nothing */
        const char *key = scheduled && branch > 0 ? NULL
                          : branch < 2            ? (slice == 0 ? a->user_id : NULL)
                          : role < u->nroles      ? u->roles[role]
                                                  : NULL;
        /* a branch without a key matches nothing whatever else it binds: NULLs, which cost no
         * copy (a bound text is copied; 16 unused role branches made 48 copies a page) */
        mv_stmt_bind_text(st, idx++, key ? a->user_id : NULL);
        mv_stmt_bind_text(st, idx++, key ? a->tenant : NULL);
        mv_stmt_bind_text(st, idx++, key);
        mv_stmt_bind_int64(st, idx++, archived);
        mv_stmt_bind_int64(st, idx++, after_created);
        mv_stmt_bind_text(st, idx++, key ? after_id : NULL);
        mv__inbox_filter_bind(st, &idx, a->req->filter);
        mv_stmt_bind_int64(st, idx++, inner);
    }
    mv_stmt_bind_int64(st, idx++, limit);
    mv_stmt_bind_int64(st, idx++, offset);
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        if (!mv__page_keys_add(out, mv_stmt_text(st, 0), mv_stmt_int64(st, 1),
                               mv_stmt_int64(st, 2))) {
            mv_stmt_done(st);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

typedef struct {
    mv_db *db;
    const list_arg *a;
} slice_ctx;

static mv_code fetch_slice(void *ctx, size_t slice, int64_t after_created, const char *after_id,
                           int64_t n, mv__page_keys *out, mv_err *err) {
    slice_ctx *c = ctx;
    return slice_keys(c->db, c->a, slice, after_created, after_id, n, n, 0, out, err);
}

static mv_code list_tx(mv_db *db, void *ctx, mv_err *err) {
    list_arg *a = ctx;
    /* the page's keys, one extra telling whether a next page exists; a user with more roles than
     * one statement has slots runs one statement per slice, merged (visibility.c) */
    mv__page_keys keys = {0};
    size_t slices = mv__role_slices(a->req->user->nroles);
    slice_ctx c = {db, a};
    mv_code rc = slices == 1 ? slice_keys(db, a, 0, a->after_created, a->after_id,
                                          a->skip + a->limit + 1, a->limit + 1, a->skip, &keys, err)
                             : mv__visible_page(slices, fetch_slice, &c, a->after_created,
                                                a->after_id, a->skip, a->limit + 1, &keys, err);
    /* the page's ids, cut where the stored sizes pass the budget (at least one message) */
    char(*ids)[25] = rc == MV_OK ? malloc((size_t)(a->limit + 1) * sizeof *ids) : NULL;
    if (rc == MV_OK && !ids) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc != MV_OK) {
        free(keys.v);
        return rc;
    }
    int64_t budget = a->svc->o.max_page_bytes, stored = 0;
    size_t n = 0;
    for (size_t i = 0; i < keys.n; i++) {
        int64_t size = keys.v[i].size;
        if ((int64_t)n == a->limit || (n > 0 && stored + size > budget)) {
            a->more = true;
            break;
        }
        stored += size;
        mv_strlcpy(ids[n++], keys.v[i].id, sizeof ids[0]);
    }
    free(keys.v);
    int64_t used = 0;
    bool full = false;
    page_admit(a->svc, stored);
    rc = fetch_page(db, a, ids, n, budget, &used, &full, err);
    page_release(a->svc, stored);
    if (full) a->more = true;
    free(ids);
    return rc;
}

static mv_code list_run(mv_service *svc, const mv_list_request *req, mv_message_sink sink,
                        mv_message_text_sink text_sink, void *sink_ctx, char **next_cursor,
                        mv_err *err) {
    if (next_cursor) *next_cursor = NULL;
    pthread_once(&sql_once, build_sql);
    char uid[256];
    mv_code rc = mv__svc_require_user(req->user, uid, err);
    if (rc != MV_OK) return rc;
    if (req->user->nroles > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d roles per user", MV_MAX_ROLES);
    list_arg a = {.svc = svc,
                  .req = req,
                  .user_id = uid,
                  .tenant = mv__svc_tenant(req->user),
                  .after_created = INT64_MAX,
                  .sink = sink,
                  .text_sink = text_sink,
                  .sink_ctx = sink_ctx};
    bool given;
    int64_t v = 0;
    if ((rc = int_param(req->limit, "limit", &given, &v, err))) return rc;
    a.limit = !given                      ? svc->o.default_list_limit
              : v < 1                     ? 1
              : v > svc->o.max_list_limit ? svc->o.max_list_limit
                                          : v;
    v = 0;
    if ((rc = int_param(req->skip, "skip", &given, &v, err))) return rc;
    a.skip = v < 0 ? 0 : v;
    if (a.skip > 1000000)
        return mv_err_set(err, MV_INVALID_PAGINATION,
                          "listMessages skip must be at most 1000000; "
                          "use the cursor for deep pages");
    if (req->cursor && !cursor_decode(req->cursor, &a.after_created, a.after_id))
        return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is malformed");
    rc = mv_store_read(svc->o.store, list_tx, &a, err);
    free(a.row.data);
    if (rc == MV_OK && a.more && a.count > 0 && next_cursor &&
        !(*next_cursor = mv__keyset_cursor_encode(a.last_created, a.last_id)))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    return rc;
}

mv_code mv_message_list_each(mv_service *svc, const mv_list_request *req, mv_message_sink sink,
                             void *sink_ctx, char **next_cursor, mv_err *err) {
    return list_run(svc, req, sink, NULL, sink_ctx, next_cursor, err);
}

mv_code mv_message_list_text(mv_service *svc, const mv_list_request *req, mv_message_text_sink sink,
                             void *sink_ctx, char **next_cursor, mv_err *err) {
    return list_run(svc, req, NULL, sink, sink_ctx, next_cursor, err);
}

static bool append_message(void *ctx, json_t *msg, size_t json_bytes) {
    (void)json_bytes;
    return json_array_append_new(ctx, msg) == 0;
}

mv_code mv_message_list(mv_service *svc, const mv_list_request *req, json_t **messages,
                        char **next_cursor, mv_err *err) {
    json_t *page = json_array();
    *messages = NULL;
    if (!page) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv_message_list_each(svc, req, append_message, page, next_cursor, err);
    if (rc != MV_OK) {
        json_decref(page);
        if (next_cursor) {
            free(*next_cursor);
            *next_cursor = NULL;
        }
        return rc;
    }
    *messages = page;
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
    if (tallied(a)) return mv__tally_counts_tx(db, a->user, a->uid, &a->counts, err);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql_count, &st, err);
    if (rc != MV_OK) return rc;
    int idx = 1;
    mv_stmt_bind_text(st, idx++, a->uid); /* the viewer join */
    mv_stmt_bind_int64(st, idx++, a->archived ? 1 : 0);
    mv__visibility_bind(st, &idx, a->uid, a->user, a->archived);
    mv__inbox_filter_bind(st, &idx, a->filter);
    int r = mv_stmt_step(st, err);
    if (r == 1)
        a->counts =
            (mv_inbox_counts){mv_stmt_int64(st, 0), mv_stmt_int64(st, 1), mv_stmt_int64(st, 2)};
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_message_counts(mv_service *svc, const mv_user *user, const mv_inbox_filter *filter,
                          bool archived, mv_inbox_counts *out, mv_err *err) {
    *out = (mv_inbox_counts){0};
    pthread_once(&sql_once, build_sql);
    char uid[256];
    mv_code rc = mv__svc_require_user(user, uid, err);
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
    mv_code rc = mv__doc_load(db, a->id, a->tenant, &a->doc, err);
    return rc == MV_OK && a->doc ? mv__inbox_viewer_attach(db, a->doc, a->viewer_id, err) : rc;
}

/* A message of the user's tenant (user NULL: any tenant); another tenant's is not found.
 * viewer_id: whose "viewer" state to attach (NULL = all null). */
static mv_code load_message(mv_service *svc, const char *id, const mv_user *user,
                            const char *viewer_id, json_t **doc, mv_err *err) {
    get_arg a = {id, user ? mv__svc_tenant(user) : NULL, viewer_id, NULL};
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
    char uid[MV_MAX_ID_BYTES + 1];
    mv_code checked = mv__svc_check_user(user, err);
    if (checked != MV_OK) return checked;
    bool has_user = user && mv__svc_require_user(user, uid, NULL) == MV_OK;
    mv_code rc = load_message(svc, id, user, has_user ? uid : NULL, &doc, err);
    if (rc != MV_OK) return rc;
    if (user && !mv_user_is_sender(user, doc) && !mv_user_is_receiver(user, doc)) {
        json_decref(doc);
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id);
    }
    *message = doc;
    return MV_OK;
}

/* ---- get, as text ------------------------------------------------------------------------- */

/* The row and the viewer's state in one statement (the viewer join matches nothing for NULL). */
static const char SQL_GET_TEXT[] =
    "SELECT " MESSAGE_COLUMNS ", vv.seen_at, vv.read_at, vv.dismissed_at, vv.snoozed_until, "
    "vv.reminded_at "
    "FROM messages LEFT JOIN message_viewers vv ON vv.message_id = messages.id "
    "AND vv.viewer_id = ? WHERE messages.id = ?";
static const char SQL_GET_TENANT_TEXT[] =
    "SELECT " MESSAGE_COLUMNS ", vv.seen_at, vv.read_at, vv.dismissed_at, vv.snoozed_until, "
    "vv.reminded_at "
    "FROM messages LEFT JOIN message_viewers vv ON vv.message_id = messages.id "
    "AND vv.viewer_id = ? WHERE messages.id = ? AND messages.tenant_id = ?";

typedef struct {
    const char *id, *tenant, *viewer_id;
    const mv_user *user; /* NULL: no visibility check */
    mv_strbuf out;
    bool found;
} get_text_arg;

static mv_code get_text_tx(mv_db *db, void *ctx, mv_err *err) {
    get_text_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = a->tenant ? mv_db_row(db, SQL_GET_TENANT_TEXT, &st, err, "sss", a->viewer_id,
                                       a->id, a->tenant)
                           : mv_db_row(db, SQL_GET_TEXT, &st, err, "ss", a->viewer_id, a->id);
    if (rc != MV_OK || !st) {
        mv_stmt_done(st);
        return rc;
    }
    bool visible = true;
    if (a->user) {
        json_t *who = mv__doc_audience_from_row(st);
        visible = who && (mv_user_is_sender(a->user, who) || mv_user_is_receiver(a->user, who));
        json_decref(who);
    }
    if (visible) {
        a->out.len = 0;
        if (!a->out.data && (a->out.data = malloc(4096))) { /* most messages fit: no growing */
            a->out.cap = 4096;
            a->out.data[0] = '\0';
        }
        a->found = true;
        if (!mv__doc_write_row(&a->out, st, st, MV__MESSAGE_NCOLS))
            rc = mv_err_set(err, MV_NO_MEMORY, "out of memory writing a message");
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_message_get_text(mv_service *svc, const char *id, const mv_user *user, char **json,
                            size_t *len, mv_err *err) {
    *json = NULL;
    if (len) *len = 0;
    char uid[MV_MAX_ID_BYTES + 1];
    mv_code checked = mv__svc_check_user(user, err);
    if (checked != MV_OK) return checked;
    bool has_user = user && mv__svc_require_user(user, uid, NULL) == MV_OK;
    if (!mv_valid_message_id(id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    get_text_arg a = {id,   user ? mv__svc_tenant(user) : NULL, has_user ? uid : NULL, user, {0},
                      false};
    mv_code rc = mv_store_read(svc->o.store, get_text_tx, &a, err);
    if (rc == MV_OK && !a.found)
        rc = mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id);
    if (rc != MV_OK) {
        free(a.out.data);
        return rc;
    }
    *json = mv_strbuf_take(&a.out, len);
    return *json ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

/* ---- who may see a message --------------------------------------------------------------- */

/* At the positions mv__doc_audience_from_row reads (3, 4, 5 and 16), and nothing else of the row.
 */
static const char SQL_AUDIENCE[] =
    "SELECT NULL, NULL, NULL, from_user, to_user, to_roles, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, action_state FROM messages WHERE id = ?";

typedef struct {
    const char *id;
    json_t *who;
} audience_arg;

static mv_code audience_tx(mv_db *db, void *ctx, mv_err *err) {
    audience_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_AUDIENCE, &st, err, "s", a->id);
    if (rc != MV_OK || !st) {
        mv_stmt_done(st);
        return rc;
    }
    json_decref(a->who); /* a retried transaction */
    a->who = mv__doc_audience_from_row(st);
    mv_stmt_done(st);
    return a->who ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

mv_code mv__message_audience(mv_service *svc, const char *id, json_t **who, mv_err *err) {
    *who = NULL;
    if (!mv_valid_message_id(id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    audience_arg a = {id, NULL};
    mv_code rc = mv_store_read(svc->o.store, audience_tx, &a, err);
    if (rc == MV_OK && !a.who)
        rc = mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id);
    if (rc != MV_OK) {
        json_decref(a.who);
        return rc;
    }
    *who = a.who;
    return MV_OK;
}

/* ---- getActions ------------------------------------------------------------------------- */

/* The action's "resultTemplate" (a Mustache string the inbox renders over the handler's result) is
 * passed through as written: the result exists only after the press, so it cannot be rendered here.
 */
static mv_code add_display_keys(const mv_template *t, json_t *actions, mv_err *err) {
    const json_t *defs = json_object_get(t->source, "actions");
    size_t i, j;
    json_t *item, *def;
    json_array_foreach(actions, i, item) {
        const char *cd = mv_json_str(item, "actionCd");
        json_array_foreach(defs, j, def) {
            const json_t *rt = json_object_get(def, "resultTemplate");
            if (!cd || !json_is_string(rt) || !mv_json_str(def, "actionCd") ||
                strcmp(mv_json_str(def, "actionCd"), cd) != 0)
                continue;
            if (json_object_set(item, "resultTemplate", (json_t *)rt) != 0)
                return mv_err_set(err, MV_NO_MEMORY, "out of memory listing actions");
        }
    }
    return MV_OK;
}

mv_code mv_message_actions(mv_service *svc, const char *id, mv_usertype usertype,
                           const mv_user *user, bool is_admin, json_t **out, mv_err *err) {
    *out = NULL;
    json_t *doc;
    mv_code rc = load_message(svc, id, user, NULL, &doc, err);
    if (rc != MV_OK) return rc;
    char uid[256];
    if ((rc = mv__svc_require_user(user, uid, err)) != MV_OK) goto done;
    if (!is_admin &&
        !(usertype == MV_SENDER ? mv_user_is_sender(user, doc) : mv_user_is_receiver(user, doc))) {
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
        condition_report report = {svc, template_cd, id};
        mv_condition_warning w = {mv__svc_condition_stopped, &report};
        rc = mv_actions_filter_warn(t, usertype, user, doc, payload, &w, &actions, err);
    }
    if (rc == MV_OK) rc = add_display_keys(t, actions, err);
    if (rc == MV_OK) {
        *out =
            json_pack("{s:s,s:o}", "uiTemplate", mv_template_ui(t, usertype), "actions", actions);
        const json_t *label = json_object_get(t->source, "label");
        if (*out && json_is_string(label)) json_object_set(*out, "label", (json_t *)label);
        /* the label in each language that has one: the reader picks its own */
        const char *tag;
        const json_t *loc;
        json_t *labels = NULL;
        json_object_foreach(json_object_get(t->source, "locales"), tag, loc) {
            const json_t *l = json_object_get(loc, "label");
            if (!json_is_string(l) || !*out) continue;
            if (!labels && !(labels = json_object())) break;
            json_object_set(labels, tag, (json_t *)l);
        }
        if (labels) json_object_set_new(*out, "labels", labels);
        if (!*out) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory listing actions");
    } else {
        json_decref(actions);
    }
    mv_template_release(t);
done:
    json_decref(doc);
    return rc;
}
