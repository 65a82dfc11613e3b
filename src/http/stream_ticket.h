/* http/stream_ticket.h — signed stream tickets (stream_ticket.c), made by POST /stream-tickets and
 * accepted by GET /messages/stream alone. */
#ifndef MISSIVE_HTTP_STREAM_TICKET_H
#define MISSIVE_HTTP_STREAM_TICKET_H

#include <stddef.h>
#include <stdint.h>

#include "http/auth.h"
#include "http/request.h"

/* A ticket for p (and the reader's locale, may be NULL) valid until expires_at (wall-clock ms),
 * signed with key; malloc'd, NULL when out of memory. */
char *mv__stream_ticket_new(const unsigned char *key, size_t key_len, const mv_principal *p,
                            const char *locale, int64_t expires_at);
/* Checks a ticket signed with key at time now (wall-clock ms) and fills p from its claims
 * (allocated in req's arena). MV_UNAUTHENTICATED when malformed, forged or expired. */
mv_code mv__stream_ticket_check(const unsigned char *key, size_t key_len, int64_t now,
                                mv_http_request *req, const char *ticket, mv_principal *p,
                                mv_err *err);

#endif
