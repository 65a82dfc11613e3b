/* http/routes_durable.h — the approval and saga routes of DESIGN.md "Sagas and approvals over
 * HTTP" over an approval coordinator, a saga engine and a book of webhook saga definitions. */
#ifndef MISSIVE_HTTP_ROUTES_DURABLE_H
#define MISSIVE_HTTP_ROUTES_DURABLE_H

#include "http/metrics.h"
#include "http/router.h"
#include "missive/durable.h"
#include "missive/saga_webhook.h"

typedef struct mv_durable_routes {
    mv_approvals *approvals; /* borrowed; NULL → the approval routes answer 404 not_found */
    mv_saga_engine *engine;  /* borrowed; NULL → the saga routes answer 404 not_found */
    /* borrowed; NULL → the saga routes answer 404 not_found. Atomic: a reload puts a new book
     * here while requests run (each lookup reads it once; the old book stays alive) */
    const mv_saga_book *_Atomic book;
    const char *admin_permission; /* "is.admin" (NULL → "is.admin") */
    mv_metrics *metrics;          /* NULL → decisions are not counted */
    /* When set, POST /sagas/{definition}, resume and compensate of a book's saga run on the loop
     * and answer later (the write-pool thread is free while a step's call waits); stop (may be
     * NULL) is fired at shutdown: runs in flight then end after their current step, answered 503
     * draining and left for recovery. */
    mv_loop *loop;
    mv_abort *stop;
} mv_durable_routes;

/* The permission that lets a user decide approvals (admins may too). */
#define MV_APPROVALS_DECIDE_PERMISSION "approvals.decide"

/* Registers GET /approvals/{id}, POST /approvals/{id}/decision, POST /sagas/{definition},
 * GET /sagas/{id}, POST /sagas/{id}/resume, POST /sagas/{id}/compensate and
 * POST /sagas/{id}/resolve. routes must outlive the router; its members are read on every request
 * (so they may be filled after registering). */
mv_code mv_durable_routes_add(mv_router *router, mv_durable_routes *routes, mv_err *err);

#endif
