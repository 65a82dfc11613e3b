/* tally.c — maintained counters behind the unfiltered inbox count, so GET /messages/count costs
 * a few rows whatever the size of the inbox.
 *
 * A user sees a message directly (as its sender or recipient) or through one of its roles. Each
 * active message is counted once per way in:
 *   (user, '')       active messages the user sees directly, and the user's dismissed / seen /
 *                    read marks on them (seen and read counted only while not dismissed);
 *   ('', roleSet)    active messages addressed to that exact role set (the stored toRoles);
 *   (user, roleSet)  of those, how many the user also sees directly (`n_active`, subtracted so
 *                    nothing counts twice), and the user's marks on the others.
 * A count reads the user's rows and the tenant's role-set rows and keeps the role sets that
 * meet the user's roles: its cost follows the number of distinct role sets, not of messages.
 *
 * A row's key holds the role set itself up to TALLY_KEY_INLINE bytes, else "sha256:" and its
 * digest: tenant, user and key stay a small index entry on PostgreSQL whatever the roles (migration
 * 15).
 *
 * Every change updates its rows in its own transaction: create (+1), archive (−1 and the marks
 * of every viewer), a mark (the difference it made). Marks and the archive first lock the
 * message row (an UPDATE that changes nothing), so a mark and an archive of one message, or two
 * marks, never interleave between reading the old state and adding the difference. */
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"

/* One statement adds to every row a change touches (at most 5: see count_message), rows in key
 * order so two creates never lock the same tally rows in opposite orders. */
#define TALLY_ADD                                                                                  \
    "INSERT INTO inbox_tallies (tenant_id, owner, role_key, role_set, n_active, n_dismissed, "     \
    "n_seen, n_read) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
#define TALLY_ROW ", (?, ?, ?, ?, ?, ?, ?, ?)"
#define TALLY_COLS 8
#define TALLY_UPSERT                                                                               \
    " ON CONFLICT (tenant_id, owner, role_key) DO UPDATE SET "                                     \
    "n_active = inbox_tallies.n_active + excluded.n_active, "                                      \
    "n_dismissed = inbox_tallies.n_dismissed + excluded.n_dismissed, "                             \
    "n_seen = inbox_tallies.n_seen + excluded.n_seen, "                                            \
    "n_read = inbox_tallies.n_read + excluded.n_read"
static const char SQL_TALLY_ADD[] = TALLY_ADD TALLY_UPSERT;
static const char SQL_TALLY_ADD2[] = TALLY_ADD TALLY_ROW TALLY_UPSERT;
static const char SQL_TALLY_ADD3[] = TALLY_ADD TALLY_ROW TALLY_ROW TALLY_UPSERT;
static const char SQL_TALLY_ADD4[] = TALLY_ADD TALLY_ROW TALLY_ROW TALLY_ROW TALLY_UPSERT;
static const char SQL_TALLY_ADD5[] = TALLY_ADD TALLY_ROW TALLY_ROW TALLY_ROW TALLY_ROW TALLY_UPSERT;
static const char *const SQL_TALLY_ADD_N[] = {NULL,           SQL_TALLY_ADD,  SQL_TALLY_ADD2,
                                              SQL_TALLY_ADD3, SQL_TALLY_ADD4, SQL_TALLY_ADD5};
#define TALLY_MAX_ROWS 5
static const char SQL_TALLY_ROWS[] =
    "SELECT owner, role_set, n_active, n_dismissed, n_seen, n_read FROM inbox_tallies "
    "WHERE tenant_id = ? AND (owner = ? OR owner = '')";
static const char SQL_LOCK_MESSAGE[] =
    "UPDATE messages SET archived = archived WHERE id = ? AND tenant_id = ?";
static const char SQL_MESSAGE_ADDRESS[] =
    "SELECT from_user, to_user, to_roles, archived FROM messages WHERE id = ? AND tenant_id = ?";
static const char SQL_VIEWERS_OF[] =
    "SELECT viewer_id, seen_at, read_at, dismissed_at, snoozed_until FROM message_viewers "
    "WHERE message_id = ?";

static tally_flags flags_of(bool seen, bool read, bool dismissed) {
    return (tally_flags){
        .dismissed = dismissed, .seen = seen && !dismissed, .read = read && !dismissed};
}

tally_flags mv__tally_flags_from_row(mv_stmt *st, int col) {
    /* a snoozed message is out of the viewer's inbox and counts, as a dismissed one */
    return flags_of(!mv_stmt_is_null(st, col), !mv_stmt_is_null(st, col + 1),
                    !mv_stmt_is_null(st, col + 2) || !mv_stmt_is_null(st, col + 3));
}

#define TALLY_KEY_INLINE 512
_Static_assert(2 * MV_MAX_ID_BYTES + TALLY_KEY_INLINE + 64 < 2704,
               "a tally's key stays below PostgreSQL's B-tree entry limit");

/* m->role_key from m->role_set. */
static void key_roles(tally_message *m) {
    size_t n = strlen(m->role_set);
    if (n <= TALLY_KEY_INLINE) {
        m->role_key = m->role_set;
        return;
    }
    char hex[65];
    mv_sha256_hex(m->role_set, n, hex);
    memcpy(m->role_digest, "sha256:", 7);
    memcpy(m->role_digest + 7, hex, sizeof hex);
    m->role_key = m->role_digest;
}

/* Deferred (store/db.h): nobody reads a tally write's result. role_set "" is the user's own row. */
static mv_code add(mv_db *db, const char *tenant, const char *owner, const tally_message *m,
                   bool own, int64_t active, int64_t dismissed, int64_t seen, int64_t read,
                   mv_err *err) {
    if (!active && !dismissed && !seen && !read) return MV_OK;
    return mv_db_execf_later(db, SQL_TALLY_ADD, err, "ssssiiii", tenant, owner,
                             own ? "" : m->role_key, own ? "" : m->role_set, active, dismissed,
                             seen, read);
}
static bool is_direct(const tally_message *m, const char *user) {
    return (m->from[0] && strcmp(m->from, user) == 0) || (m->to[0] && strcmp(m->to, user) == 0);
}

static bool has_roles(const tally_message *m) {
    return m->role_set[0] && strcmp(m->role_set, "[]") != 0;
}

typedef struct {
    const char *owner, *role_key, *role_set;
} tally_key;

static int key_order(const void *a, const void *b) {
    const tally_key *x = a, *y = b;
    int c = strcmp(x->owner, y->owner);
    return c ? c : strcmp(x->role_key, y->role_key);
}

/* +1 / −1 for every way into the message (no viewer marks), in one statement. */
static mv_code count_message(mv_db *db, const char *tenant, const tally_message *m, int64_t sign,
                             mv_err *err) {
    const char *users[2] = {m->from, m->to};
    tally_key keys[TALLY_MAX_ROWS];
    int n = 0;
    for (int i = 0; i < 2; i++) {
        if (!users[i][0] || (i == 1 && strcmp(m->from, m->to) == 0)) continue;
        keys[n++] = (tally_key){users[i], "", ""};
        if (has_roles(m)) keys[n++] = (tally_key){users[i], m->role_key, m->role_set};
    }
    if (has_roles(m)) keys[n++] = (tally_key){"", m->role_key, m->role_set};
    if (n == 0) return MV_OK;
    qsort(keys, (size_t)n, sizeof keys[0], key_order);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_TALLY_ADD_N[n], &st, err);
    if (rc != MV_OK) return rc;
    for (int i = 0; i < n; i++) {
        int at = i * TALLY_COLS;
        mv_stmt_bind_text(st, at + 1, tenant);
        mv_stmt_bind_text(st, at + 2, keys[i].owner);
        mv_stmt_bind_text(st, at + 3, keys[i].role_key);
        mv_stmt_bind_text(st, at + 4, keys[i].role_set);
        mv_stmt_bind_int64(st, at + 5, sign);
        for (int k = 6; k <= TALLY_COLS; k++)
            mv_stmt_bind_int64(st, at + k, 0);
    }
    return mv_stmt_exec_later(st, err);
}

mv_code mv__tally_message_load(mv_db *db, const char *tenant, const char *id, bool lock,
                               tally_message *m, mv_err *err) {
    memset(m, 0, sizeof *m);
    mv_code rc;
    if (lock && (rc = mv_db_execf_later(db, SQL_LOCK_MESSAGE, err, "ss", id, tenant)) != MV_OK)
        return rc;
    mv_stmt *st;
    if ((rc = mv_db_row(db, SQL_MESSAGE_ADDRESS, &st, err, "ss", id, tenant)) != MV_OK) return rc;
    if (st) {
        m->found = true;
        mv_strlcpy(m->from, mv_stmt_text(st, 0), sizeof m->from);
        mv_strlcpy(m->to, mv_stmt_text(st, 1), sizeof m->to);
        const char *roles = mv_stmt_text(st, 2);
        m->role_set = strdup(roles ? roles : "");
        m->archived = mv_stmt_int64(st, 3) != 0;
    }
    mv_stmt_done(st);
    if (m->found && !m->role_set) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (m->found) key_roles(m);
    return MV_OK;
}

void mv__tally_message_clear(tally_message *m) {
    free(m->role_set);
    m->role_set = NULL;
}

/* The sender, recipient and role set of a message document already in hand (no re-read). */
static mv_code from_doc(const json_t *doc, tally_message *m, mv_err *err) {
    memset(m, 0, sizeof *m);
    m->found = true;
    mv_strlcpy(m->from, mv_json_str(doc, "fromUser"), sizeof m->from);
    mv_strlcpy(m->to, mv_json_str(doc, "toUser"), sizeof m->to);
    json_t *roles = json_object_get(doc, "toRoles");
    m->role_set = roles && json_is_array(roles) ? mv_json_compact(roles) : strdup("[]");
    if (!m->role_set) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    key_roles(m);
    return MV_OK;
}

mv_code mv__tally_created_tx(mv_db *db, const char *tenant, const json_t *doc, mv_err *err) {
    tally_message m;
    mv_code rc = from_doc(doc, &m, err);
    if (rc != MV_OK) return rc;
    rc = count_message(db, tenant, &m, 1, err);
    mv__tally_message_clear(&m);
    return rc;
}

/* Takes the marks of message id's viewers out of what m counts (out), or puts them in. */
static mv_code count_marks(mv_db *db, const char *tenant, const char *id, const tally_message *m,
                           bool out, mv_err *err) {
    mv_stmt *st = NULL;
    mv_code rc = mv_db_prepare(db, SQL_VIEWERS_OF, &st, err);
    if (st) {
        mv_stmt_bindf(st, "s", id);
        int r;
        /* the viewers' marks leave with the message; collected first: no statement may run
         * while this one is still stepping on every driver */
        typedef struct {
            char *user;
            tally_flags f;
        } mark;
        mark *marks = NULL;
        size_t n = 0, cap = 0;
        while ((r = mv_stmt_step(st, err)) == 1) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                mark *nm = realloc(marks, cap * sizeof *marks);
                if (!nm) break;
                marks = nm;
            }
            marks[n].user = strdup(mv_stmt_text(st, 0) ? mv_stmt_text(st, 0) : "");
            marks[n++].f = mv__tally_flags_from_row(st, 1);
        }
        mv_stmt_done(st);
        if (r < 0) rc = err ? err->code : MV_INTERNAL;
        const tally_flags none = {0};
        for (size_t i = 0; i < n; i++) {
            if (rc == MV_OK && marks[i].user)
                rc = mv__tally_viewer_tx(db, tenant, m, marks[i].user, out ? marks[i].f : none,
                                         out ? none : marks[i].f, err);
            free(marks[i].user);
        }
        free(marks);
    }
    return rc;
}

/* Takes out what an active message m counted, its viewers' marks included. */
static mv_code uncount_archived(mv_db *db, const char *tenant, const char *id, tally_message *m,
                                mv_err *err) {
    m->archived = false; /* take out what it counted while active */
    mv_code rc = count_message(db, tenant, m, -1, err);
    return rc == MV_OK ? count_marks(db, tenant, id, m, true, err) : rc;
}

mv_code mv__tally_readdressed_tx(mv_db *db, const char *tenant, const json_t *before,
                                 const json_t *after, mv_err *err) {
    tally_message m;
    mv_code rc = mv__tally_archived_doc_tx(db, tenant, before, err);
    if (rc == MV_OK && (rc = from_doc(after, &m, err)) == MV_OK) {
        rc = count_message(db, tenant, &m, 1, err);
        if (rc == MV_OK) rc = count_marks(db, tenant, mv_json_str(after, "id"), &m, false, err);
        mv__tally_message_clear(&m);
    }
    return rc;
}

mv_code mv__tally_archived_tx(mv_db *db, const char *tenant, const char *id, mv_err *err) {
    tally_message m;
    mv_code rc = mv__tally_message_load(db, tenant, id, false, &m, err);
    if (rc == MV_OK && m.found) rc = uncount_archived(db, tenant, id, &m, err);
    mv__tally_message_clear(&m);
    return rc;
}

mv_code mv__tally_archived_doc_tx(mv_db *db, const char *tenant, const json_t *doc, mv_err *err) {
    tally_message m;
    mv_code rc = from_doc(doc, &m, err);
    if (rc != MV_OK) return rc;
    rc = uncount_archived(db, tenant, mv_json_str(doc, "id"), &m, err);
    mv__tally_message_clear(&m);
    return rc;
}

mv_code mv__tally_viewer_tx(mv_db *db, const char *tenant, const tally_message *m, const char *user,
                            tally_flags before, tally_flags after, mv_err *err) {
    if (!m->found || m->archived) return MV_OK; /* archived messages are not counted */
    bool direct = is_direct(m, user);
    if (!direct && !has_roles(m)) return MV_OK;
    return add(db, tenant, user, m, direct, 0, (int64_t)after.dismissed - before.dismissed,
               (int64_t)after.seen - before.seen, (int64_t)after.read - before.read, err);
}

/* ---- counting ---------------------------------------------------------------------------- */

static bool meets(const char *role_set, const mv_user *user) {
    json_t *roles = json_loads(role_set, 0, NULL);
    bool hit = false;
    size_t i;
    json_t *r;
    json_array_foreach(roles, i, r) {
        for (size_t k = 0; !hit && json_is_string(r) && k < user->nroles; k++)
            hit = user->roles[k] && strcmp(user->roles[k], json_string_value(r)) == 0;
        if (hit) break;
    }
    json_decref(roles);
    return hit;
}

mv_code mv__tally_counts_tx(mv_db *db, const mv_user *user, const char *uid, mv_inbox_counts *out,
                            mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_TALLY_ROWS, &st, err);
    if (rc != MV_OK) return rc;
    mv_stmt_bindf(st, "ss", mv__svc_tenant(user), uid);
    int64_t active = 0, dismissed = 0, seen = 0, read = 0;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        const char *owner = mv_stmt_text(st, 0), *role_set = mv_stmt_text(st, 1);
        bool role_row = !owner || !owner[0], own_row = !role_set || !role_set[0];
        if (!own_row && !meets(role_set, user)) continue;
        int64_t a = mv_stmt_int64(st, 2);
        active += role_row ? a : own_row ? a : -a; /* (user, roleSet): the overlap */
        dismissed += mv_stmt_int64(st, 3);
        seen += mv_stmt_int64(st, 4);
        read += mv_stmt_int64(st, 5);
    }
    mv_stmt_done(st);
    if (r < 0) return err ? err->code : MV_INTERNAL;
    out->count = active - dismissed;
    out->unseen = out->count - seen;
    out->unread = out->count - read;
    return MV_OK;
}
