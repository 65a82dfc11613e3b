/* deliver/outbox_text.h — what the message layer needs of the outbox beyond missive/deliver.h:
 * adding a row whose payload the caller already wrote as compact JSON text (message/channels.c,
 * message/document.c build it straight into a buffer inside the create's transaction, without a
 * jansson tree to build, dump and free per delivery), and the planner each outbox run calls first
 * (below). */
#ifndef MISSIVE_DELIVER_OUTBOX_TEXT_H
#define MISSIVE_DELIVER_OUTBOX_TEXT_H

#include "missive/deliver.h"

/* mv_outbox_add_tx for a payload given as its JSON text, which must already be of kind's shape
 * (see mv_outbox_add_tx): nothing here parses or checks it. */
mv_code mv__outbox_add_text_tx(mv_db *db, mv_outbox_kind kind, const char *payload, int64_t now,
                               mv_err *err);

/* ---- plans: a message's deliveries decided after its commit ----------------------------------
 * A create whose message goes out on channels does not render its deliveries inside its own
 * transaction, on the store's one writer: it marks the message (message/channels.c), and each
 * outbox run on the store first lets the store's planner turn the due marks into delivery rows,
 * then delivers those rows with the rest. The planner is the message service's, registered per
 * store because the outbox sits below it. */

/* Decides up to max plans due at now (each once, whatever runs beside it). Returns an error only
 * when the store fails. */
typedef mv_code (*mv__outbox_planner)(void *ctx, mv_store *store, int64_t now, int max,
                                      mv_err *err);
/* Registers (fn non-NULL) or removes (fn NULL, for that ctx) store's planner. */
void mv__outbox_set_planner(mv_store *store, mv__outbox_planner fn, void *ctx);
/* Only the planning part of mv_outbox_run_due: up to max due plans of store turned into their
 * delivery rows, none of them sent (cfg: its clock; NULL: the real one). */
mv_code mv__outbox_plan_due(mv_store *store, const mv_outbox_config *cfg, int max, mv_err *err);

#endif
