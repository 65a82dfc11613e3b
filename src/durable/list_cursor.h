/* durable/list_cursor.h — the page end of the operator lists (the saga and approval lists); the
 * cursor itself is base/keyset_cursor.h. */
#ifndef MISSIVE_DURABLE_LIST_CURSOR_H
#define MISSIVE_DURABLE_LIST_CURSOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "missive/error.h"

/* Cuts rows (fetched with limit + 1) to limit and, when a row was cut, makes *next_cursor from
 * the last kept row's "createdAt" and id_key members. */
mv_code mv__list_finish(json_t *rows, int limit, const char *id_key, char **next_cursor,
                        mv_err *err);

/* The list statements, for the plan tests. */
const char *mv__saga_list_sql(bool by_state, bool by_definition);
const char *mv__approval_list_sql(bool by_principal);

#endif
