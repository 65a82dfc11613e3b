/* missive/operations.h — what an operator of missive needs beyond the request path: listing
 * sagas and approvals page by page, counting sagas by state, and recovering sagas whose runner
 * died (docs/operations.md).
 *
 * Lists are keyset-paginated, newest first by (createdAt, id), each filter combination served by
 * its own index, so a page costs the same at any depth and whatever the table size. Cursors are
 * opaque strings; a malformed one is MV_INVALID_PAGINATION. Recovery relies on the saga runner
 * lease: any number of daemons may run it at once, and each saga is driven by one of them. */
#ifndef MISSIVE_OPERATIONS_H
#define MISSIVE_OPERATIONS_H

#include <jansson.h>
#include <stdint.h>

#include "missive/durable.h"
#include "missive/error.h"
#include "missive/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- listing ----------------------------------------------------------------------------- */

typedef struct mv_saga_list_query {
    const char *tenant_id;  /* required: lists never cross tenants */
    const char *state;      /* NULL = any; else running, compensating, completed, compensated,
                               manual-review */
    const char *definition; /* NULL = any; a printable token of at most 128 characters */
    int limit;              /* 1..1000 */
    const char *cursor;     /* NULL = the first page */
} mv_saga_list_query;

/* One page of sagas: *sagas (new array) of {"sagaId","definition","state","createdAt",
 * "updatedAt"}; *next_cursor (malloc'd, caller frees) NULL on the last page. Errors:
 * MV_INVALID_ARGUMENT naming the bad filter or limit, MV_INVALID_PAGINATION. */
mv_code mv_saga_list(mv_store *store, const mv_saga_list_query *q, json_t **sagas,
                     char **next_cursor, mv_err *err);

/* Sagas by state: counts[0] running, [1] compensating, [2] completed, [3] compensated,
 * [4] manual-review, [5] waiting (mv_saga_state's order). */
#define MV_SAGA_STATE_COUNT 6
extern const char *const mv_saga_state_names[MV_SAGA_STATE_COUNT];
mv_code mv_saga_counts(mv_store *store, int64_t counts[MV_SAGA_STATE_COUNT], mv_err *err);

typedef struct mv_approval_list_query {
    const char *tenant_id;    /* required: lists never cross tenants */
    const char *principal_id; /* NULL = every principal (approvers, admins); else only theirs */
    const char *state;        /* NULL = "pending"; pending, approved, denied, consumed, expired */
    int64_t now;              /* "pending" lists only approvals not yet expired at now */
    int limit;                /* 1..1000 */
    const char *cursor;
} mv_approval_list_query;

/* One page of approvals as mv_approval_to_json shapes them. Same conventions as mv_saga_list. */
mv_code mv_approval_list(mv_store *store, const mv_approval_list_query *q, json_t **approvals,
                         char **next_cursor, mv_err *err);

/* ---- admin views (GET /admin/…) ------------------------------------------------------------ */

/* Every message of a tenant, newest first (created_at, id), for operators: not limited to what one
 * user may see. */
typedef struct mv_message_admin_query {
    const char *tenant_id;   /* required */
    const char *state;       /* NULL = any; scheduled, active, processing, retryable, archived,
                                cancelled */
    const char *template_cd; /* NULL = any */
    const char *sender;      /* NULL = any; fromUser */
    const char *recipient;   /* NULL = any; toUser */
    const char *text;        /* NULL = any; 1..100 bytes found (ASCII case-insensitively) in the
                                recipient's title */
    int limit;               /* 1..1000 */
    const char *cursor;      /* NULL = the first page */
} mv_message_admin_query;

/* At most MV_ADMIN_SCAN_ROWS stored rows are examined per page when a text search filters them:
 * a page may then hold fewer than limit items with a next cursor (keep paging). */
#define MV_ADMIN_SCAN_ROWS 2000

/* *messages (new array) of {"id","templateCd","type","fromUser","toUser","toRoles",
 * "actionState","actionCd","title","createdAt","updatedAt"}; *next_cursor (malloc'd) NULL on
 * the last page. Errors: MV_INVALID_ARGUMENT naming the bad filter, MV_INVALID_PAGINATION. */
mv_code mv_message_admin_list(mv_store *store, const mv_message_admin_query *q, json_t **messages,
                              char **next_cursor, mv_err *err);

/* What happened to one message, oldest first: *out (new object) {"messageId", "templateCd",
 * "actionState", "entries": [{"at", "event", "actor", "attempt", "step", "outcome", "detail"}]}
 * from its row, its change log (what retention kept) and its approval. Events: created,
 * delivered, updated, viewer, reminded, actionStarted, actionFailed, actionSucceeded,
 * approvalRequested, approvalDecided, cancelled, archived. MV_MESSAGE_NOT_FOUND when the
 * message does not exist in tenant_id. */
mv_code mv_message_timeline(mv_store *store, const char *tenant_id, const char *message_id,
                            json_t **out, mv_err *err);

/* What happened to one saga, oldest first: *out {"sagaId", "definition", "state", "entries":
 * [...]} as mv_message_timeline's, from its steps and their journal effects. Events:
 * sagaStarted, stepStarted, effect, stepFinished, compensation, sagaFinished. step is the
 * step's name, attempt the step's attempts. MV_SAGA_NOT_FOUND when not in tenant_id. */
mv_code mv_saga_timeline(mv_store *store, const char *tenant_id, const char *saga_id, json_t **out,
                         mv_err *err);

/* The outbox deliveries of a tenant's messages, newest first. channel: NULL = any; "email" or a
 * webhook channel's name. Rows are shown without their payload (addresses, bodies):
 * {"id","kind","channel","state","attempts","nextAttemptAt","createdAt","updatedAt","messageId",
 * "recipient","failureStage"?}. Same paging conventions as mv_message_admin_list (filtered rows
 * are examined up to MV_ADMIN_SCAN_ROWS per page). */
typedef struct mv_outbox_admin_query {
    const char *tenant_id; /* required */
    const char *state;     /* NULL = any; pending, delivering, sent, skipped, failed */
    const char *channel;   /* NULL = any */
    int limit;             /* 1..1000 */
    const char *cursor;
} mv_outbox_admin_query;
mv_code mv_outbox_admin_list(mv_store *store, const mv_outbox_admin_query *q, json_t **rows,
                             char **next_cursor, mv_err *err);

/* ---- recovery ---------------------------------------------------------------------------- */

/* Finds a definition by name (NULL when unknown: such a saga is left alone). */
typedef const mv_saga_definition *(*mv_saga_finder)(void *ctx, const char *name);

typedef struct mv_recovery_report {
    int resumed;     /* running sagas continued */
    int compensated; /* compensating sagas driven further */
    int busy;        /* another runner held the saga (another daemon got there first) */
    int skipped;     /* unknown definition */
    int failed;      /* the run ended with an error (recorded on the saga; see the log) */
} mv_recovery_report;

/* Called once per saga handled, after its run (for logs); err is the run's error or NULL. */
typedef void (*mv_recovery_event)(void *ctx, const char *saga_id, const char *state_before,
                                  const char *action, const mv_err *err);

/* One pass: sagas in `running` or `compensating` whose runner lease expired at now (or that have
 * no runner and were last saved at least stale_ms before now), oldest first, at most limit
 * (1..1000): running ones are resumed, compensating ones compensated (what is due). Each is run
 * through the engine, which takes the runner lease first, so a saga another daemon is running is
 * counted busy and not touched. Returns an error only when the store fails. */
mv_code mv_saga_recover(mv_saga_engine *engine, mv_store *store, int64_t now, int64_t stale_ms,
                        int limit, mv_saga_finder find, void *find_ctx, mv_recovery_event on_event,
                        void *event_ctx, mv_recovery_report *report, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
