/* message/reach_internal.h — the parts of reach (missive/reach.h) the message service's own files
 * call: a template's "channels", "category" and "critical" (template_reach.c) and the deliveries
 * a new message queues in its create's transaction (channels.c). */
#ifndef MISSIVE_MESSAGE_REACH_INTERNAL_H
#define MISSIVE_MESSAGE_REACH_INTERNAL_H

#include "missive/reach.h"
#include "missive/template.h"
#include "store/db.h"

typedef struct mv_service mv_service;

typedef struct mv__reach_channel {
    char *name, *webhook;
} mv__reach_channel;

/* Built once, read-only after (reach.c); links.c reads the link fields. */
struct mv_reach {
    bool email;
    mv__reach_channel channels[MV_REACH_MAX_CHANNELS];
    size_t nchannels;
    json_t *defaults; /* preference set for every tenant, NULL = none */
    json_t *tenants;  /* tenant → preference set replacing defaults, NULL = none */
    char *link_base;  /* NULL: links are off */
    unsigned char *link_secret;
    size_t link_secret_len;
    int64_t link_ttl_ms;
};

/* Reads "channels", "category" and "critical" of a template JSON into t (errors are
 * MV_INVALID_TEMPLATE prefixed with source and the template); t->template_cd must be set. */
mv_code mv__template_read_reach(const json_t *json, const char *source, mv_template *t,
                                mv_err *err);
/* Frees what mv__template_read_reach allocated (NULL-safe members). */
void mv__template_free_reach(mv_template *t);

/* The plan a new message's row carries when its deliveries are decided after the create (named
 * webhook channels: see the top of channels.c's plans); *plan NULL when it needs none, else JSON
 * text for mv__doc_insert_planned (malloc'd). */
mv_code mv__doc_plan(mv_service *svc, const json_t *doc, const mv_template *t, const json_t *data,
                     char **plan, mv_err *err);
/* The deliveries of new message doc in tenant (NULL = "default") that are not planned: its
 * rendered locales, and its email when the template names no webhook channel (as before, unless
 * the template's channels or the recipient's preferences say otherwise); with named channels the
 * row carries a plan (mv__doc_plan) and every delivery is decided by the outbox's next run. t:
 * the message's template (NULL for notifications: email only). data: the message's template data.
 * Inside the create's (or claim's) transaction. */
mv_code mv__doc_deliver(mv_service *svc, mv_db *db, const json_t *doc, const char *tenant,
                        const mv_template *t, const json_t *data, const json_t *localized,
                        mv_err *err);

/* Registers (attach) or removes the service as the planner of its store's outbox
 * (deliver/outbox_text.h): mv_service_new and mv_service_free. */
void mv__channels_attach(mv_service *svc, bool attach);

/* A reminder of doc to user `to` (docs/time.md) on every channel of t but the inbox that the
 * user's preferences allow, as for a new message: its content is the receiver's with the
 * reminder's title, its kind "reminder". Inside the reminder's transaction. */
mv_code mv__doc_remind(mv_service *svc, mv_db *db, const json_t *doc, const char *tenant,
                       const mv_template *t, const char *to, const char *title, mv_err *err);

/* digest.c: the digest window of channel for a user (0: deliveries are not held) — the user's
 * `digest.<channel>.everyMs`, else their tenant's default. */
int64_t mv__digest_every(const mv_reach *r, const char *tenant, const json_t *prefs,
                         const char *channel);
/* Holds item ({messageId, templateCd, category, content, links}) for user's digest on channel in
 * the window of `at` (every ms long) and arms the window's timer. Inside the create's transaction.
 */
mv_code mv__digest_hold_tx(mv_service *svc, mv_db *db, const char *tenant, const char *user,
                           const char *channel, int64_t every, int64_t at, const json_t *item,
                           mv_err *err);

/* The stored preferences of (tenant, user) inside a transaction; *out NULL when none. */
mv_code mv__preferences_load_tx(mv_db *db, const char *tenant, const char *user, json_t **out,
                                mv_err *err);

/* Records the use of a link inside the claim's transaction: MV_MESSAGE_ARCHIVED ("this link was
 * already used") when it was, which rolls the claim back. */
mv_code mv__link_consume_tx(mv_db *db, const mv_link *link, int64_t now, mv_err *err);

/* locales.c: a template's "locales" rendered for a new message with its template data (*out NULL
 * when the template has none): {"de": {"senderContent", "receiverContent", "actions": {cd:
 * name}}}, each content complete (the default rendering in doc where a locale has no text). */
mv_code mv__locales_render(const mv_template *t, const json_t *data, const json_t *doc,
                           json_t **out, mv_err *err);
/* What limits.messageBytes counts of a rendering: its strings' lengths. */
int64_t mv__locales_bytes(const json_t *rendered);
/* The rendering stored beside a message (*out NULL when none), inside a transaction. */
mv_code mv__locales_load_tx(mv_db *db, const char *message_id, json_t **out, mv_err *err);
/* Stores a rendering beside its message (deferred; rendered NULL: nothing). */
mv_code mv__locales_insert_tx(mv_db *db, const char *message_id, const json_t *rendered,
                              mv_err *err);
/* The best tag of rendered for an Accept-Language value or a single tag (RFC 4647 lookup: de-AT,
 * then de; by q), or NULL for the default. Borrowed from rendered. */
const char *mv__locale_pick(const json_t *rendered, const char *accept);

#endif
