/* durable/list_cursor.h — the statements of the operator lists (the saga and approval lists); the
 * cursor and the page end (mv__list_finish) are base/keyset_cursor.h's. */
#ifndef MISSIVE_DURABLE_LIST_CURSOR_H
#define MISSIVE_DURABLE_LIST_CURSOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/keyset_cursor.h"
#include "missive/error.h"

/* The list statements, for the plan tests. */
const char *mv__saga_list_sql(bool by_state, bool by_definition);
const char *mv__approval_list_sql(bool by_principal);

#endif
