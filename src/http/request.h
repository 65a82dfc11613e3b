/* http/request.h — what handlers use to read a request and write a response: header, query and
 * path-parameter lookup, JSON bodies, the one error-body shape, and the daemon's JSON log line.
 *
 * Every error leaves the daemon through mv_http_error(), so the body shape, the status table and
 * the masking of internal errors live in one place. */
#ifndef MISSIVE_HTTP_REQUEST_H
#define MISSIVE_HTTP_REQUEST_H

#include <jansson.h>
#include <stdbool.h>

#include "http/http_server.h"
#include "missive/error.h"

/* ---- reading ----------------------------------------------------------------------------- */

/* First header named name (case-insensitive), or NULL. */
const char *mv_http_header_get(const mv_http_request *req, const char *name);
/* How many headers named name (case-insensitive) the request carries. */
size_t mv_http_header_count(const mv_http_request *req, const char *name);
/* First query parameter named name (case-sensitive), or NULL. */
const char *mv_http_query_get(const mv_http_request *req, const char *name);
/* Path parameter from the matched pattern ("id" for "/messages/{id}"), or NULL. */
const char *mv_http_param(const mv_http_request *req, const char *name);

/* The body check of the fixed order (after authentication and route parameters): 413 when the
 * body was too large; 400 invalid_argument when a non-empty body has a Content-Type other than
 * application/json (parameters allowed; an absent Content-Type is accepted); 400 invalid_json
 * (naming line and column) when it does not parse. An empty body is {}. *out is owned by
 * req's arena. */
mv_code mv_http_read_json_body(mv_http_request *req, json_t **out, mv_err *err);

/* Percent-decodes one path segment into the arena (a malformed escape stays literal);
 * *out_len (may be NULL) receives the decoded length, which tells an embedded NUL apart. */
char *mv_http_decode_segment(mv_arena *arena, const char *s, size_t n, size_t *out_len);

/* ---- writing ----------------------------------------------------------------------------- */

/* Adds a response header (copied into the arena). */
void mv_http_set_header(mv_http_response *res, const char *name, const char *value);
/* First response header named name (case-insensitive), or NULL. */
const char *mv_http_response_header(const mv_http_response *res, const char *name);
/* Sets status and a JSON body (compact), with Content-Type: application/json. Steals body (a
 * NULL body answers "null"). */
void mv_http_json(mv_http_response *res, int status, json_t *body);
/* A page of a list route: 200 {key: items, "nextCursor": next or null} when rc is MV_OK, else
 * the error. Takes items (a reference) and next (malloc'd) in both cases. */
void mv_http_json_page(mv_http_response *res, mv_code rc, const char *key, json_t *items,
                       char *next, const mv_err *err);
/* Sets status and body, taking a malloc'd body of len bytes without copying it: it is freed
 * with the request, after the server has sent it (the way large bodies avoid a second copy). */
void mv_http_adopt(mv_http_response *res, int status, const char *content_type, char *body,
                   size_t len);
/* Sets status and a text body with the given Content-Type. */
void mv_http_text(mv_http_response *res, int status, const char *content_type, const char *text,
                  size_t len);

/* The error response for err: status from mv_code_http_status(err->code), body
 * {"error": {"code", "message", <the structured fields err carries>}}. Internal errors
 * (internal, no memory, I/O, schema too new) answer {"error":{"code":"internal","message":
 * "internal error"}} and keep the real message in res->detail for the request log only.
 * client_request_pending adds Retry-After (err->retry_after_s, at least 1). */
void mv_http_error(mv_http_response *res, const mv_err *err);
/* mv_http_error with a code and a printf-style message. */
void mv_http_errorf(mv_http_response *res, mv_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- logging ----------------------------------------------------------------------------- */

/* Writes one JSON object per line to the log stream (stderr by default):
 * {"ts": <ms>, "level": level, "msg": msg, ...fields}. Steals fields (may be NULL). Thread-safe:
 * each line is a single write. */
void mv_log(const char *level, const char *msg, json_t *fields);
/* A field of mv_log_fields: a string (s; NULL leaves the field out), an integer or a real. */
typedef struct mv_log_field {
    const char *key;
    enum { MV_LOG_STR, MV_LOG_INT, MV_LOG_REAL } type;
    const char *s;
    long long i;
    double d;
} mv_log_field;
/* mv_log with its fields written straight into the line (no JSON document built and dumped):
 * the same bytes as mv_log with an object of the same fields in the same order. For the
 * per-request access line. */
void mv_log_fields(const char *level, const char *msg, const mv_log_field *fields, size_t n);
/* Redirects the log to fd (tests); -1 silences it. Returns the previous fd. */
int mv_log_set_fd(int fd);
/* Lines below this level are dropped: 0 debug, 1 info (default), 2 warn, 3 error ("log.level"). */
void mv_log_set_level(int level);
/* True when a line of level ("debug", "info", "warn", "error") would be written. */
bool mv_log_enabled(const char *level);

#endif
