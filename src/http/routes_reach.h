/* http/routes_reach.h — the reach routes (docs/channels.md): GET and PUT /preferences, each the
 * caller's own preference set in their tenant, and the action-link pages GET and POST /a/{token}
 * (routes_links.c). */
#ifndef MISSIVE_HTTP_ROUTES_REACH_H
#define MISSIVE_HTTP_ROUTES_REACH_H

#include "http/routes_messages.h"
#include "missive/reach.h"

typedef struct mv_reach_routes {
    mv_store *store;     /* borrowed */
    mv_service *service; /* borrowed: its current reach settings (mv_service_reach), and the link
                          * pages run actions through it */
} mv_reach_routes;

/* Registers GET /preferences, PUT /preferences and the link pages. routes must outlive the
 * router. */
mv_code mv_reach_routes_add(mv_router *router, mv_reach_routes *routes, mv_err *err);
/* Registers GET /a/{token} and POST /a/{token} (public: the token is the credential). */
mv_code mv_link_routes_add(mv_router *router, mv_reach_routes *routes, mv_err *err);

/* The language a reader asks for: Accept-Language, else the JWT claim at claim_path (a dotted
 * path, NULL: none), else X-User-Locale in headers mode; NULL when none says. */
const char *mv_http_reader_locale(mv_http_request *req, const char *claim_path);
/* GET /messages/{id} in the reader's language (mv_message_localize): the message with "locale". */
void mv_http_localized_message(mv_http_request *req, mv_http_response *res, mv_service *svc,
                               const mv_user *user, const char *claim_path);
/* GET /messages in the reader's language: the page of lr (mv_message_list), each message
 * localized as by id (mv_messages_localize). */
void mv_http_localized_list(mv_http_request *req, mv_http_response *res, mv_service *svc,
                            const mv_list_request *lr, const char *claim_path);

#endif
