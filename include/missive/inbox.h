/* missive/inbox.h — per-viewer inbox state (seen, read, dismissed), inbox filters and counts, and
 * the durable change log that live streams read.
 *
 * State is per (message, user): for a role-addressed message every member has their own. Marking
 * is idempotent (the first timestamp is kept) and never changes the message's actionState; it
 * works on archived messages and notifications too. Every change to a message — creation, action
 * state, archive, a viewer's state — writes one change-log row in the same transaction, so a
 * reader of the log sees exactly the committed changes, in commit order. */
#ifndef MISSIVE_INBOX_H
#define MISSIVE_INBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "missive/message.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- viewer state -------------------------------------------------------------------------- */

typedef enum mv_mark {
    MV_MARK_SEEN,      /* sets seenAt (kept when already set) */
    MV_MARK_READ,      /* sets readAt, and seenAt when unset */
    MV_MARK_UNREAD,    /* clears readAt only */
    MV_MARK_DISMISS,   /* sets dismissedAt: the message leaves this user's inbox */
    MV_MARK_UNDISMISS, /* clears dismissedAt */
} mv_mark;

/* Marks message id for user. *message (may be NULL): the message as the user sees it, with its
 * new "viewer". MV_MESSAGE_NOT_FOUND unless the user can see the message (sender, recipient or
 * member of one of its roles). */
mv_code mv_message_mark(mv_service *svc, const char *id, const mv_user *user, mv_mark mark,
                        json_t **message, mv_err *err);

/* ---- snooze ------------------------------------------------------------------------------- */

/* Snoozes message id for user (a receiver of it: anyone else gets MV_MESSAGE_NOT_FOUND) until
 * `until` (ms; after now and at most 365 days ahead, else MV_INVALID_ARGUMENT): it leaves that
 * user's inbox and counts, and comes back by itself at `until` (a `snooze` timer), with
 * viewer.snoozedUntil null, a viewer change-log row and so message.updated and counts on the
 * user's streams. Snoozing again moves `until`. Other viewers' state never changes. *message (may
 * be NULL): the message as the user sees it, with viewer.snoozedUntil. */
mv_code mv_message_snooze(mv_service *svc, const char *id, const mv_user *user, int64_t until,
                          json_t **message, mv_err *err);
/* Ends user's snooze of message id now (nothing to do when it is not snoozed). */
mv_code mv_message_unsnooze(mv_service *svc, const char *id, const mv_user *user, json_t **message,
                            mv_err *err);

/* Cancels message id, scheduled by user (its sender) and not sent yet: 200 with actionState
 * "cancelled" (hidden from every list, nothing delivered); MV_MESSAGE_ALREADY_SENT once its
 * sendAt has come; MV_MESSAGE_NOT_FOUND to anyone but its sender. */
mv_code mv_message_cancel(mv_service *svc, const char *id, const mv_user *user, json_t **message,
                          mv_err *err);

/* ---- filters and counts -------------------------------------------------------------------- */

/* A yes/no filter. UNSET is the default: "any" for read and seen, "false" for dismissed (dismissed
 * messages leave the inbox unless asked for). */
typedef enum mv_flag { MV_FLAG_UNSET = 0, MV_FLAG_FALSE, MV_FLAG_TRUE, MV_FLAG_ANY } mv_flag;

typedef struct mv_inbox_filter {
    const char *template_cd; /* NULL = any */
    const char *type;        /* NULL = any */
    mv_flag read, seen, dismissed;
    mv_flag snoozed; /* UNSET = false: snoozed messages leave the inbox until their snooze ends */
} mv_inbox_filter;

/* Marks seen (MV_MARK_SEEN) or read (MV_MARK_READ) every active, not dismissed message the user
 * sees that matches template_cd / type of filter (its flags are ignored) and was created before
 * `before` (< 0 = any time). *updated: how many messages changed. */
mv_code mv_message_mark_all(mv_service *svc, const mv_user *user, mv_mark mark,
                            const mv_inbox_filter *filter, int64_t before, int64_t *updated,
                            mv_err *err);

typedef struct mv_inbox_counts {
    int64_t count;  /* messages matching the filter */
    int64_t unseen; /* of those, not seen by the user */
    int64_t unread; /* of those, not read by the user */
} mv_inbox_counts;

/* Counts the user's inbox (archived = false) or archive (true) under filter (NULL = defaults). */
mv_code mv_message_counts(mv_service *svc, const mv_user *user, const mv_inbox_filter *filter,
                          bool archived, mv_inbox_counts *out, mv_err *err);

/* ---- change log ---------------------------------------------------------------------------- */

typedef enum mv_change_kind {
    MV_CHANGE_CREATED,  /* a message was created */
    MV_CHANGE_UPDATED,  /* its action state changed or it was archived */
    MV_CHANGE_VIEWER,   /* one viewer's state changed (only that viewer is told) */
    MV_CHANGE_REMINDED, /* one viewer was reminded of the message (only that viewer is told) */
} mv_change_kind;

typedef struct mv_change {
    int64_t id; /* monotonic; the SSE event id */
    mv_change_kind kind;
    char tenant[129];
    char message_id[25]; /* "" for a bulk viewer change (seen-all / read-all) */
    char viewer_id[256]; /* MV_CHANGE_VIEWER, _REMINDED: the viewer; "" otherwise */
    int64_t created_at;
} mv_change;

/* Reads up to max changes with id > after, in id order, into out (*n receives how many). Every
 * change with id <= the last one returned that is not returned was rolled back or removed by
 * retention. */
mv_code mv_changes_read(mv_store *store, int64_t after, mv_change *out, int max, int *n,
                        mv_err *err);
/* The newest change id (0 when none), and the highest id retention has removed (resuming after
 * an id below *pruned cannot be complete). Either pointer may be NULL. */
mv_code mv_changes_latest(mv_store *store, int64_t *latest, int64_t *pruned, mv_err *err);
/* Removes changes created at or before older_than (ms); *removed (may be NULL) gets the count. */
mv_code mv_changes_gc(mv_store *store, int64_t older_than, int64_t *removed, mv_err *err);

/* Waits for new changes: a write committed through this store (in this process) wakes the waiter
 * at once; on PostgreSQL a LISTEN connection also wakes it when another process numbers changes
 * (message/changes.c: the sequencer NOTIFYs after numbering committed changes); on
 * SQLite other processes' changes are found by polling mv_changes_latest (one index lookup) after
 * each timeout. One waiter per store receives the in-process wake-ups (the newest one created).
 * Free with mv_change_waiter_free (NULL-safe). */
typedef struct mv_change_waiter mv_change_waiter;
mv_code mv_change_waiter_new(mv_store *store, mv_change_waiter **out, mv_err *err);
/* Returns after a notification or timeout_ms, whichever comes first; true when notified. A
 * broken LISTEN connection is reopened on the next call (until then it behaves as a timeout). */
bool mv_change_waiter_wait(mv_change_waiter *w, int timeout_ms);
/* Makes a wait in progress (or the next one) return at once. Thread-safe. */
void mv_change_waiter_wake(mv_change_waiter *w);
void mv_change_waiter_free(mv_change_waiter *w);

#ifdef __cplusplus
}
#endif

#endif
