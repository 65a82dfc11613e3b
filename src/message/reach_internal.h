/* message/reach_internal.h — the parts of reach (missive/reach.h) the message service's own files
 * call: a template's "channels", "category" and "critical" (template_reach.c) and the deliveries
 * a new message queues in its create's transaction (channels.c). */
#ifndef MISSIVE_MESSAGE_REACH_INTERNAL_H
#define MISSIVE_MESSAGE_REACH_INTERNAL_H

#include "missive/reach.h"
#include "missive/template.h"
#include "store/db.h"

typedef struct mv_service mv_service;

/* Reads "channels", "category" and "critical" of a template JSON into t (errors are
 * MV_INVALID_TEMPLATE prefixed with source and the template); t->template_cd must be set. */
mv_code mv__template_read_reach(const json_t *json, const char *source, mv_template *t,
                                mv_err *err);
/* Frees what mv__template_read_reach allocated (NULL-safe members). */
void mv__template_free_reach(mv_template *t);

/* Every delivery of doc in tenant (NULL = "default"): its email (as before, unless the template's
 * channels or the recipient's preferences say otherwise) and one outbox row per named channel
 * the recipient receives. t: the message's template (NULL for notifications: email only). data: the
 * message's template data (NULL for notifications: the channel overrides then render with {}).
 * Inside the create's (or claim's) transaction. */
mv_code mv__doc_deliver(mv_service *svc, mv_db *db, const json_t *doc, const char *tenant,
                        const mv_template *t, const json_t *data, mv_err *err);

/* The stored preferences of (tenant, user) inside a transaction; *out NULL when none. */
mv_code mv__preferences_load_tx(mv_db *db, const char *tenant, const char *user, json_t **out,
                                mv_err *err);

#endif
