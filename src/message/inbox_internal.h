/* message/inbox_internal.h — what the message service's files share about viewer state, inbox
 * filters and the change log (inbox.c, changes.c, read.c, create.c, claim.c). */
#ifndef MISSIVE_MESSAGE_INBOX_INTERNAL_H
#define MISSIVE_MESSAGE_INBOX_INTERNAL_H

#include "message/service.h"
#include "missive/inbox.h"

/* Appends one change-log row (and, on PostgreSQL, takes the commit-order lock and queues the
 * wake-up). Call it as the last statement of the transaction that made the change. viewer_id is
 * stored for MV_CHANGE_VIEWER only. */
mv_code change_add_tx(mv_db *db, const char *tenant, const char *message_id, mv_change_kind kind,
                      const char *viewer_id, int64_t now, mv_err *err);

/* The viewer join and the filter of every inbox query, over messages aliased `m`: one LEFT JOIN
 * (binds the viewer id) and INBOX_FILTER_PARAMS placeholders bound by inbox_filter_bind. A
 * disabled filter binds NULL / -1, so one statement text serves every combination. */
#define INBOX_VIEWER_JOIN(message_id)                                                              \
    " LEFT JOIN message_viewers v ON v.message_id = " message_id " AND v.viewer_id = ?"
#define INBOX_FILTER_SQL                                                                           \
    " AND (CAST(? AS TEXT) IS NULL OR m.template_cd = ?)"                                          \
    " AND (CAST(? AS TEXT) IS NULL OR m.type = ?)"                                                 \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.read_at IS NULL THEN 0 ELSE 1 END) = ?)"          \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.seen_at IS NULL THEN 0 ELSE 1 END) = ?)"          \
    " AND (CAST(? AS BIGINT) < 0 OR (CASE WHEN v.dismissed_at IS NULL THEN 0 ELSE 1 END) = ?)"
#define INBOX_FILTER_PARAMS 10

/* Binds the INBOX_FILTER_SQL placeholders from *idx on (f NULL = defaults). */
void inbox_filter_bind(mv_stmt *st, int *idx, const mv_inbox_filter *f);
/* {"seenAt", "readAt", "dismissedAt"} from three columns starting at col (NULL → null). */
json_t *inbox_viewer_from_row(mv_stmt *st, int col);
/* Sets doc's "viewer" to user_id's state, read inside the transaction. */
mv_code inbox_viewer_attach(mv_db *db, json_t *doc, const char *user_id, mv_err *err);

/* read.c: the visibility predicate lives with the list query, and so do the statements that
 * repeat it. visibility_bind binds its placeholders (user id twice, archived, the role slots). */
const char *message_counts_sql(void);
const char *message_mark_all_sql(bool read);
void visibility_bind(mv_stmt *st, int *idx, const char *uid, const mv_user *user, bool archived);

#endif
