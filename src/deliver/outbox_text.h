/* deliver/outbox_text.h — adding an outbox row whose payload the caller already wrote as compact
 * JSON text (message/channels.c, message/document.c build it straight into a buffer inside the
 * create's transaction, without a jansson tree to build, dump and free per delivery). */
#ifndef MISSIVE_DELIVER_OUTBOX_TEXT_H
#define MISSIVE_DELIVER_OUTBOX_TEXT_H

#include "missive/deliver.h"

/* mv_outbox_add_tx for a payload given as its JSON text, which must already be of kind's shape
 * (see mv_outbox_add_tx): nothing here parses or checks it. */
mv_code mv__outbox_add_text_tx(mv_db *db, mv_outbox_kind kind, const char *payload, int64_t now,
                               mv_err *err);

#endif
