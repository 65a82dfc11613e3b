/* http/routes_inbox.h — the inbox-state routes (DESIGN part two, "Inbox state (per viewer)"):
 * marking one message or all of them, and the query filters GET /messages and
 * GET /messages/count share. */
#ifndef MISSIVE_HTTP_ROUTES_INBOX_H
#define MISSIVE_HTTP_ROUTES_INBOX_H

#include "http/routes_messages.h"
#include "missive/inbox.h"

/* Reads templateCd, type, read, seen, dismissed and archived from the query into *f and
 * *archived. Any other query name except those in also_allowed (NULL-terminated, may be NULL) is
 * 400 invalid_argument naming it; so is a value other than true/false or a malformed code.
 * Strings stay in req's arena. */
mv_code mv_http_inbox_filter(mv_http_request *req, const char *const *also_allowed,
                             mv_inbox_filter *f, bool *archived, mv_err *err);

/* GET /messages (a page of the inbox, written as it is read) and GET /messages/count; the
 * route's ctx is the mv_message_routes (registered by mv_message_routes_add). */
void mv_http_list_messages(mv_http_request *req, mv_http_response *res, void *app);
void mv_http_count_messages(mv_http_request *req, mv_http_response *res, void *app);

/* Registers POST /messages/{id}/seen|read|unread|dismiss|undismiss and
 * POST /messages/seen-all|read-all. routes must outlive the router. */
mv_code mv_inbox_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err);

#endif
