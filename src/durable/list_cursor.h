/* durable/list_cursor.h — the opaque keyset cursor of the operator lists: base64url of
 * "<createdAt>:<id>", the last row of the previous page. Shared by the saga and approval lists. */
#ifndef MISSIVE_DURABLE_LIST_CURSOR_H
#define MISSIVE_DURABLE_LIST_CURSOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "missive/error.h"

/* A malloc'd cursor, NULL when out of memory. */
char *mv__list_cursor_encode(int64_t created_at, const char *id);
/* NULL cursor → the position before the first row (created_at = max, id = ""). false when the
 * cursor is malformed (not base64url, no colon, a negative or non-numeric time, an id that is not
 * a printable token of at most 128 characters). id holds 129 bytes. */
bool mv__list_cursor_decode(const char *cursor, int64_t *created_at, char id[129]);

/* Cuts rows (fetched with limit + 1) to limit and, when a row was cut, makes *next_cursor from
 * the last kept row's "createdAt" and id_key members. */
mv_code mv__list_finish(json_t *rows, int limit, const char *id_key, char **next_cursor,
                        mv_err *err);

/* The list statements, for the plan tests. */
const char *mv__saga_list_sql(bool by_state, bool by_definition);
const char *mv__approval_list_sql(bool by_principal);

#endif
