/* http/routes_messages.h — the message routes of DESIGN.md's HTTP table over a message service. */
#ifndef MISSIVE_HTTP_ROUTES_MESSAGES_H
#define MISSIVE_HTTP_ROUTES_MESSAGES_H

#include "http/auth.h"
#include "http/metrics.h"
#include "http/router.h"
#include "missive/message.h"

typedef struct mv_message_routes {
    mv_service *service;          /* borrowed */
    const char *admin_permission; /* "is.admin" */
    mv_metrics *metrics;          /* may be NULL: counts actions by outcome */
    const char *locale_claim;     /* JWT claim with the reader's language (NULL: none) */
} mv_message_routes;

/* The acting user of a request (borrows from the principal, roles array in the arena). */
void mv_http_user(mv_http_request *req, mv_user *out);
/* mv_http_user with the identity prepare hooks see (built per call in headers mode): for the
 * routes that can run a prepare hook or a handler — create and action. */
void mv_http_user_identity(mv_http_request *req, mv_user *out);

/* Registers POST /messages/new/{templateCd}, GET /messages, GET /messages/count,
 * GET /messages/{id}, GET /messages/{id}/actions/{usertype} and
 * POST /messages/{id}/action/{actionCd}. routes must outlive the router. */
mv_code mv_message_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err);

#endif
