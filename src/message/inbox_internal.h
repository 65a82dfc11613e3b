/* message/inbox_internal.h — what the message service's files share about viewer state, inbox
 * filters and the change log (inbox.c, changes.c, read.c, create.c, claim.c). */
#ifndef MISSIVE_MESSAGE_INBOX_INTERNAL_H
#define MISSIVE_MESSAGE_INBOX_INTERNAL_H

#include "message/service.h"
#include "missive/inbox.h"

/* A mark of one message (mv_message_mark) as one operation: the checks on the calling thread,
 * the write queued on the store's group commit (store/write_async.h). done runs exactly once —
 * on the committing thread, or on the caller's before this returns when a check failed — with
 * rc MV_OK and message (owned by the callee) the message as its viewer now sees it, else the
 * error; it must not block. id and user stay valid until done ran. */
typedef void (*mv__mark_done)(void *ctx, mv_code rc, json_t *message, const mv_err *err);
void mv__mark_begin(mv_service *svc, const char *id, const mv_user *user, mv_mark mark,
                    mv__mark_done done, void *done_ctx);

/* Appends one change-log row in the transaction that made the change: one INSERT, no lock, no
 * NOTIFY, so it may come anywhere in that transaction. On PostgreSQL the row gets its event id
 * after commit (changes.c). viewer_id is stored for MV_CHANGE_VIEWER only. */
mv_code mv__change_add_tx(mv_db *db, const char *tenant, const char *message_id,
                          mv_change_kind kind, const char *viewer_id, int64_t now, mv_err *err);
/* Two such rows (not viewer changes) in one statement, in this order. */
mv_code mv__change_add2_tx(mv_db *db, const char *tenant, const char *id1, mv_change_kind kind1,
                           const char *id2, mv_change_kind kind2, int64_t now, mv_err *err);
/* How many change-log rows this process has appended (committed or not) — a cheap "has anything
 * been written since" for the stream hub, which numbers them on PostgreSQL (changes.c). */
uint64_t mv__changes_written(void);
/* mv_changes_read, and in *pruned the highest id retention had removed as seen by the same
 * snapshot as the page: when *pruned > after the page may lack removed changes (the reader must
 * say `reset` rather than carry on as if it had them). */
mv_code mv__changes_read_page(mv_store *store, int64_t after, mv_change *out, int max, int *n,
                              int64_t *pruned, mv_err *err);

/* The viewer join and the filter of every inbox query, over messages aliased `m`: one LEFT JOIN
 * (binds the viewer id) and INBOX_FILTER_PARAMS placeholders bound by mv__inbox_filter_bind. A
 * disabled filter binds NULL / -1, so one statement text serves every combination. */
#define INBOX_VIEWER_JOIN(message_id)                                                              \
    " LEFT JOIN message_viewers v ON v.message_id = " message_id " AND v.viewer_id = ?"
#define INBOX_FILTER_SQL                                                                           \
    " AND (CAST(? AS TEXT) IS NULL OR m.template_cd = ?)"                                          \
    " AND (CAST(? AS TEXT) IS NULL OR m.type = ?)"                                                 \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.read_at IS NULL THEN 0 ELSE 1 END) = ?)"          \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.seen_at IS NULL THEN 0 ELSE 1 END) = ?)"          \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.dismissed_at IS NULL THEN 0 ELSE 1 END) = ?)"     \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.snoozed_until IS NULL THEN 0 ELSE 1 END) = ?)"
#define INBOX_FILTER_PARAMS 12

/* Binds the INBOX_FILTER_SQL placeholders from *idx on (f NULL = defaults). */
void mv__inbox_filter_bind(mv_stmt *st, int *idx, const mv_inbox_filter *f);
/* {"seenAt", "readAt", "dismissedAt", "snoozedUntil"} from four columns starting at col (NULL →
 * null). */
json_t *mv__inbox_viewer_from_row(mv_stmt *st, int col);
/* Sets doc's "viewer" to user_id's state, read inside the transaction. */
mv_code mv__inbox_viewer_attach(mv_db *db, json_t *doc, const char *user_id, mv_err *err);
/* Makes sure uid has a viewer row for message id (no state), inside the transaction. */
mv_code mv__inbox_viewer_ensure(mv_db *db, const char *tenant, const char *id, const char *uid,
                                int64_t now, mv_err *err);

/* ---- tally.c: the counters behind the unfiltered count ---- */

/* A viewer's marks as the tallies count them (seen and read only while not dismissed). */
typedef struct tally_flags {
    bool dismissed, seen, read;
} tally_flags;
/* Who a message is addressed to, as stored. */
typedef struct tally_message {
    bool found, archived;
    char from[MV_MAX_ID_BYTES + 1], to[MV_MAX_ID_BYTES + 1];
    char *role_set;       /* the stored toRoles text; freed by mv__tally_message_clear */
    const char *role_key; /* its key in the tallies: role_set, or role_digest when long */
    char role_digest[72];
} tally_message;

/* Reads the address of message id in tenant (m->found false when absent); lock first takes the
 * message's row lock, which every viewer-state change and the archive take before reading. */
mv_code mv__tally_message_load(mv_db *db, const char *tenant, const char *id, bool lock,
                               tally_message *m, mv_err *err);
void mv__tally_message_clear(tally_message *m);
/* uid's flags on message id as the tallies count them (no row: none). */
mv_code mv__inbox_viewer_flags(mv_db *db, const char *id, const char *uid, tally_flags *f,
                               mv_err *err);
/* Flags from four columns (seen_at, read_at, dismissed_at, snoozed_until) starting at col: a
 * snoozed message counts as dismissed. */
tally_flags mv__tally_flags_from_row(mv_stmt *st, int col);
/* A new active message (doc as inserted). */
mv_code mv__tally_created_tx(mv_db *db, const char *tenant, const json_t *doc, mv_err *err);
/* Message id has just been archived: it and its viewers' marks leave the counts. */
mv_code mv__tally_archived_tx(mv_db *db, const char *tenant, const char *id, mv_err *err);
/* The same for a message whose document the caller loaded (its addresses never change), in the
 * transaction that archived it: no re-read of the message row. */
mv_code mv__tally_archived_doc_tx(mv_db *db, const char *tenant, const json_t *doc, mv_err *err);
/* An active message's addresses went from before to after (escalation added roles): it and its
 * viewers' marks move from the old address's counts to the new one's. */
mv_code mv__tally_readdressed_tx(mv_db *db, const char *tenant, const json_t *before,
                                 const json_t *after, mv_err *err);
/* user's marks on m went from before to after (nothing when m is archived). */
mv_code mv__tally_viewer_tx(mv_db *db, const char *tenant, const tally_message *m, const char *user,
                            tally_flags before, tally_flags after, mv_err *err);
/* The unfiltered counts of the user's inbox from the tallies. */
mv_code mv__tally_counts_tx(mv_db *db, const mv_user *user, const char *uid, mv_inbox_counts *out,
                            mv_err *err);

/* read.c: the visibility predicate lives with the list query, and so do the statements that
 * repeat it. mv__visibility_bind binds its placeholders (user id twice, archived, the role slots).
 */
const char *mv__message_counts_sql(void);
const char *mv__message_mark_candidates_sql(void);
void mv__visibility_bind(mv_stmt *st, int *idx, const char *uid, const mv_user *user,
                         bool archived);

#endif
