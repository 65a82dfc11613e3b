/* keyset_cursor.h — the opaque cursor of every keyset-paginated list (messages, sagas, approvals,
 * the outbox): base64url of "<createdAt>:<id>", the last row of the previous page. One encoding and
 * one strict decoder, so a cursor is malformed for the same reasons on every route. */
#ifndef MV_BASE_KEYSET_CURSOR_H
#define MV_BASE_KEYSET_CURSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "missive/error.h"

/* The largest integer a JSON number holds exactly (2^53 - 1): the latest a cursor may point at. */
#define MV_CURSOR_MAX_TIME INT64_C(9007199254740991)

/* A malloc'd cursor, NULL when out of memory or when the id is longer than 128 characters. */
char *mv__keyset_cursor_encode(int64_t created_at, const char *id);
/* NULL cursor → the position before the first row (created_at = MV_CURSOR_MAX_TIME, id = "").
 * false when the cursor is malformed: not base64url, no colon, a negative, too large or
 * non-numeric time, or an id that is not a printable token of at most id_size - 1 characters
 * (id_size ≤ 129). */
bool mv__keyset_cursor_decode(const char *cursor, int64_t *created_at, char *id, size_t id_size);

/* The end of a page fetched with limit + 1 rows (JSON objects): cuts rows to limit and, when a
 * row was cut, makes *next_cursor (malloc'd) from the last kept row's "createdAt" and id_key
 * members; else *next_cursor is NULL. */
mv_code mv__list_finish(json_t *rows, int limit, const char *id_key, char **next_cursor,
                        mv_err *err);

#endif
