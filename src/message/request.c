/* request.c — the client-request reservation state machine (idempotent create).
 *
 *   (none) --reserve--> pending --complete (lease owner, same txn as the messages)--> completed
 *                          |  \--fail (lease owner)--> failed
 *                          \--takeover (lease expired, same fingerprint)--> pending (new owner)
 *
 * Every transition is one conditional statement; its row count says whether this caller won.
 * A completed reservation is replayed only after checking that the stored messages are exactly
 * items 0..n-1, so a half-written state can never be served as a success. */
#include <stdlib.h>
#include <string.h>

#include "message/request.h"

static const char SQL_RESERVE[] =
    "INSERT INTO message_requests (tenant_id, client_request_owner_id, template_cd, "
    "client_request_id, state, fingerprint, item_count, lease_owner_id, lease_expires_at, "
    "created_at, updated_at) "
    "VALUES (?, ?, ?, ?, 'pending', ?, NULL, ?, ?, ?, ?) ON CONFLICT DO NOTHING";
/* One row, already completed or failed: for a key nobody has used (a conflict fails it). */
static const char SQL_RECORD[] =
    "INSERT INTO message_requests (tenant_id, client_request_owner_id, template_cd, "
    "client_request_id, state, fingerprint, item_count, lease_owner_id, lease_expires_at, "
    "completed_at, failed_at, failure_message, created_at, updated_at, first_message_id, "
    "last_message_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)";
static const char SQL_TAKEOVER[] =
    "UPDATE message_requests SET lease_owner_id = ?, lease_expires_at = ?, updated_at = ? "
    "WHERE tenant_id = ? AND client_request_owner_id = ? AND template_cd = ? "
    "AND client_request_id = ? "
    "AND state = 'pending' AND fingerprint = ? AND lease_expires_at <= ?";
static const char SQL_FIND[] =
    "SELECT state, fingerprint, item_count, failure_message, lease_expires_at, first_message_id, "
    "last_message_id "
    "FROM message_requests "
    "WHERE tenant_id = ? AND client_request_owner_id = ? AND template_cd = ? "
    "AND client_request_id = ?";
/* The reservation's messages: the primary-key range of their ids (migration 24), each row matched
 * on the whole key (the range may hold other creates' messages written meanwhile). The tenant is
 * compared through COALESCE (it is never NULL) so that SQLite's planner, which has no statistics,
 * does not take a list index for its leading tenant_id over the id range. */
static const char SQL_FIND_MESSAGES[] =
    "SELECT " MESSAGE_COLUMNS " FROM messages "
    "WHERE id >= ? AND id <= ? AND COALESCE(tenant_id, '') = ? AND client_request_owner_id = ? "
    "AND template_cd = ? AND client_request_id = ? "
    "ORDER BY client_request_item_index, id";
static const char SQL_COMPLETE[] =
    "UPDATE message_requests SET state = 'completed', item_count = ?, completed_at = ?, "
    "lease_expires_at = NULL, updated_at = ?, first_message_id = ?, last_message_id = ? "
    "WHERE tenant_id = ? AND client_request_owner_id = ? AND template_cd = ? "
    "AND client_request_id = ? "
    "AND state = 'pending' AND lease_owner_id = ?";
static const char SQL_FAIL[] =
    "UPDATE message_requests SET state = 'failed', failed_at = ?, failure_message = ?, "
    "lease_expires_at = NULL, updated_at = ? "
    "WHERE tenant_id = ? AND client_request_owner_id = ? AND template_cd = ? "
    "AND client_request_id = ? "
    "AND state = 'pending' AND lease_owner_id = ?";
/* A removed reservation releases its key: the messages it created keep their clientRequestId (it
 * is history, shown in their JSON) but are detached from the key's scope (owner and item index
 * cleared), so the key's next use is a new request that creates fresh messages. Detach first,
 * then delete, in one transaction. */
/* Both read message_requests_completed_by_time (completed_at) WHERE completed (migration 11); the
 * detach reads each removed reservation's id range of messages (migration 24) and matches the
 * whole key, tenant first, on each row (never another tenant's messages with the same key). The
 * key's columns are compared through COALESCE so that only the id range is indexable: SQLite would
 * otherwise build an automatic index over every message for the join (a NULL owner, a message
 * already detached, never equals a reservation's owner). CROSS JOIN makes SQLite read the removed
 * reservations first; PostgreSQL treats it as a plain join. */
static const char SQL_GC_DETACH[] =
    "UPDATE messages SET client_request_owner_id = NULL, client_request_item_index = NULL "
    "WHERE id IN (SELECT m.id FROM message_requests r CROSS JOIN messages m "
    "WHERE m.id >= r.first_message_id AND m.id <= r.last_message_id "
    "AND COALESCE(m.tenant_id, '') = r.tenant_id "
    "AND COALESCE(m.client_request_owner_id, '') = r.client_request_owner_id "
    "AND COALESCE(m.template_cd, '') = r.template_cd "
    "AND COALESCE(m.client_request_id, '') = r.client_request_id "
    "AND r.state = 'completed' AND r.completed_at <= ?)";
static const char SQL_GC[] =
    "DELETE FROM message_requests WHERE state = 'completed' AND completed_at <= ?";

static mv_code inconsistent(const request_scope *s, mv_err *err, const char *detail) {
    return mv_err_set(err, MV_CLIENT_REQUEST_INCONSISTENT,
                      "clientRequestId \"%s\" has inconsistent persisted state: %s", s->id, detail);
}

/* findCompletedClientRequestReplay, plus the fingerprint check. */
mv_code mv__request_replay_tx(mv_db *db, const request_scope *s, json_t **replay,
                              int64_t *lease_left, int64_t now, mv_err *err) {
    *replay = NULL;
    mv_stmt *st;
    mv_code rc =
        mv_db_row(db, SQL_FIND, &st, err, "ssss", s->tenant, s->owner, s->template_cd, s->id);
    if (rc != MV_OK) return rc;
    bool found = st != NULL;
    int r;
    char state[16] = "", fingerprint[65] = "", failure[400] = "";
    bool count_null = true;
    int64_t count = 0, lease = 0;
    char first[MV_MAX_ID_BYTES + 1] = "", last[MV_MAX_ID_BYTES + 1] = "";
    if (found) {
        mv_strlcpy(state, mv_stmt_text(st, 0), sizeof state);
        mv_strlcpy(fingerprint, mv_stmt_text(st, 1), sizeof fingerprint);
        count_null = mv_stmt_is_null(st, 2);
        count = mv_stmt_int64(st, 2);
        mv_strlcpy(failure, mv_stmt_text(st, 3), sizeof failure);
        lease = mv_stmt_int64(st, 4);
        if (!mv_stmt_is_null(st, 5) && !mv_stmt_is_null(st, 6)) {
            mv_strlcpy(first, mv_stmt_text(st, 5), sizeof first);
            mv_strlcpy(last, mv_stmt_text(st, 6), sizeof last);
        }
    }
    mv_stmt_done(st);
    if (lease_left) *lease_left = lease > now ? lease - now : 0;

    json_t *docs = json_array();
    json_t *indexes = json_array();
    if (!first[0]) goto found_all; /* no messages (none yet, or a reservation without any) */
    if ((rc = mv_db_prepare(db, SQL_FIND_MESSAGES, &st, err)) != MV_OK) goto fail;
    mv_stmt_bindf(st, "ssssss", first, last, s->tenant, s->owner, s->template_cd, s->id);
    while ((r = mv_stmt_step(st, err)) == 1) {
        json_array_append_new(docs, mv__doc_from_row(st));
        json_array_append_new(
            indexes, mv_stmt_is_null(st, 15) ? json_null() : json_integer(mv_stmt_int64(st, 15)));
    }
    mv_stmt_done(st);
    if (r < 0) {
        rc = err ? err->code : MV_INTERNAL;
        goto fail;
    }
found_all:
    if (!found) {
        rc = MV_OK;
        goto fail; /* nothing to replay */
    }
    if (strcmp(fingerprint, s->fingerprint) != 0) {
        rc = mv_err_set(err, MV_CLIENT_REQUEST_MISMATCH,
                        "clientRequestId \"%s\" was already used with a different payload", s->id);
        goto fail;
    }
    if (strcmp(state, "failed") == 0) {
        rc = mv_err_set(err, MV_CLIENT_REQUEST_FAILED,
                        "clientRequestId \"%s\" previously failed: %s", s->id, failure);
        goto fail;
    }
    if (strcmp(state, "completed") != 0) {
        rc = MV_OK; /* pending: nothing to replay yet */
        goto fail;
    }
    if (count_null || count < 0) {
        rc = inconsistent(s, err, "completed reservation has an invalid itemCount");
        goto fail;
    }
    if (count == 0 && json_array_size(docs)) {
        rc = inconsistent(s, err, "completed zero-item reservation has messages");
        goto fail;
    }
    bool exact = (int64_t)json_array_size(docs) == count;
    for (size_t i = 0; exact && i < json_array_size(indexes); i++)
        exact = json_integer_value(json_array_get(indexes, i)) == (json_int_t)i &&
                json_is_integer(json_array_get(indexes, i));
    if (!exact) {
        char *found_json = mv_json_compact(indexes);
        char detail[300];
        snprintf(detail, sizeof detail,
                 "completed reservation expects item indexes 0..%lld but found %s",
                 (long long)(count - 1), found_json ? found_json : "[]");
        free(found_json);
        rc = inconsistent(s, err, detail);
        goto fail;
    }
    json_decref(indexes);
    *replay = docs;
    return MV_OK;
fail:
    json_decref(docs);
    json_decref(indexes);
    return rc;
}

mv_code mv__request_acquire_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                               int64_t lease_ms, int64_t now, bool *acquired, mv_err *err) {
    int64_t changes = 0;
    *acquired = false;
    mv_code rc =
        mv_db_execf(db, SQL_RESERVE, &changes, err, "ssssssiii", s->tenant, s->owner,
                    s->template_cd, s->id, s->fingerprint, lease_owner, now + lease_ms, now, now);
    if (rc != MV_OK) return rc;
    if (changes == 0)
        rc = mv_db_execf(db, SQL_TAKEOVER, &changes, err, "siisssssi", lease_owner, now + lease_ms,
                         now, s->tenant, s->owner, s->template_cd, s->id, s->fingerprint, now);
    *acquired = rc == MV_OK && changes == 1;
    return rc;
}

void mv__request_id_range(const json_t *docs, const char **first, const char **last) {
    *first = *last = NULL;
    size_t i;
    const json_t *doc;
    json_array_foreach(docs, i, doc) {
        const char *id = mv_json_str(doc, "id");
        if (!id) continue;
        if (!*first || strcmp(id, *first) < 0) *first = id;
        if (!*last || strcmp(id, *last) > 0) *last = id;
    }
}

mv_code mv__request_complete_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                                const json_t *docs, int64_t now, mv_err *err) {
    int64_t changes = 0;
    const char *first, *last;
    mv__request_id_range(docs, &first, &last);
    mv_code rc =
        mv_db_execf(db, SQL_COMPLETE, &changes, err, "iiisssssss", (int64_t)json_array_size(docs),
                    now, now, first, last, s->tenant, s->owner, s->template_cd, s->id, lease_owner);
    if (rc == MV_OK && changes != 1)
        rc = mv_err_set(err, MV_CLIENT_REQUEST_PENDING,
                        "clientRequestId \"%s\" is still pending; retry after the current "
                        "reservation completes or its lease expires",
                        s->id);
    return rc;
}

mv_code mv__request_fail_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                            const char *failure, int64_t now, mv_err *err) {
    /* nobody reads its row count: a lease lost meanwhile leaves the row to its new owner */
    return mv_db_execf_later(db, SQL_FAIL, err, "isisssss", now, failure, now, s->tenant, s->owner,
                             s->template_cd, s->id, lease_owner);
}

mv_code mv__request_record_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                              const json_t *docs, const char *failure, int64_t now, mv_err *err) {
    if (failure)
        return mv_db_execf_later_unique(
            db, SQL_RECORD, MV__REQUEST_KEY_TAKEN, err, "ssssssnsnisiinn", s->tenant, s->owner,
            s->template_cd, s->id, "failed", s->fingerprint, lease_owner, now, failure, now, now);
    const char *first, *last;
    mv__request_id_range(docs, &first, &last);
    return mv_db_execf_later_unique(db, SQL_RECORD, MV__REQUEST_KEY_TAKEN, err, "ssssssisinniiss",
                                    s->tenant, s->owner, s->template_cd, s->id, "completed",
                                    s->fingerprint, (int64_t)json_array_size(docs), lease_owner,
                                    now, now, now, first, last);
}

mv_code mv__request_gc_tx(mv_db *db, int64_t completed_before, int64_t *removed, mv_err *err) {
    mv_code rc = mv_db_execf(db, SQL_GC_DETACH, NULL, err, "i", completed_before);
    if (rc != MV_OK) return rc;
    return mv_db_execf(db, SQL_GC, removed, err, "i", completed_before);
}

typedef struct {
    int64_t before, removed;
} gc_arg;

static mv_code gc_tx(mv_db *db, void *ctx, mv_err *err) {
    gc_arg *a = ctx;
    return mv__request_gc_tx(db, a->before, &a->removed, err);
}

mv_code mv_requests_gc(mv_store *store, int64_t completed_before, int64_t *removed, mv_err *err) {
    gc_arg a = {completed_before, 0};
    mv_code rc = mv_store_write(store, gc_tx, &a, err);
    if (removed) *removed = a.removed;
    return rc;
}

/* One count per state, each from that state's partial index (migration 11). */
static const char SQL_STATS[] =
    "SELECT 'pending', COUNT(*) FROM message_requests WHERE state = 'pending' "
    "UNION ALL SELECT 'completed', COUNT(*) FROM message_requests WHERE state = 'completed' "
    "UNION ALL SELECT 'failed', COUNT(*) FROM message_requests WHERE state = 'failed'";
/* The statements, for the plan tests. */
const char *const mv__request_gc_sql[] = {SQL_GC_DETACH, SQL_GC, SQL_STATS, SQL_FIND_MESSAGES};

static mv_code stats_tx(mv_db *db, void *ctx, mv_err *err) {
    int64_t *counts = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_STATS, &st, err);
    if (rc != MV_OK) return rc;
    int r;
    while ((r = mv_stmt_step(st, err)) == 1) {
        const char *state = mv_stmt_text(st, 0);
        int i = strcmp(state, "pending") == 0 ? 0 : strcmp(state, "completed") == 0 ? 1 : 2;
        counts[i] += mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return r < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

mv_code mv_requests_stats(mv_store *store, int64_t counts[3], mv_err *err) {
    counts[0] = counts[1] = counts[2] = 0;
    return mv_store_read(store, stats_tx, counts, err);
}
