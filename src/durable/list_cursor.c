/* list_cursor.c — the end of an operator list's page: cut to the limit, and the cursor of the
 * next page (base/keyset_cursor.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keyset_cursor.h"
#include "durable/durable_internal.h"
#include "durable/list_cursor.h"
