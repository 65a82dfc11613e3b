/* durable/approval_async.h — an approval decision as one operation: started, then done.
 *
 * The route's decision (POST /approvals/{id}/decision) is one write queued on the store's group
 * commit (store/write_async.h): the approval read in the caller's tenant (another tenant's is not
 * found), the decision (the same rules as mv_approval_decide: pending, unexpired, not the
 * requester's own unless allowed), and the record as decided, in one transaction. */
#ifndef MISSIVE_DURABLE_APPROVAL_ASYNC_H
#define MISSIVE_DURABLE_APPROVAL_ASYNC_H

#include "missive/durable.h"

/* Called exactly once: rc MV_OK with *record the approval as decided, else the error (err valid
 * only during the call). Runs on the store's committing thread, or on the caller's before
 * mv__approval_decide_begin returns when a check failed; must not block. */
typedef void (*mv__decide_done)(void *ctx, mv_code rc, const mv_approval_record *record,
                                const mv_err *err);

/* The strings stay valid until done ran. */
void mv__approval_decide_begin(mv_approvals *a, const char *approval_id, const char *tenant_id,
                               const char *decision, const char *decided_by, mv__decide_done done,
                               void *done_ctx);

#endif
