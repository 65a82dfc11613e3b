/* missive/reach.h — where a message goes beyond the inbox: named webhook channels, each user's
 * delivery preferences (with tenant defaults) and the rule that decides, per recipient, which
 * channels deliver a message.
 *
 * A reach (mv_reach) is the parsed, read-only form of the config's "channels" and "preferences"
 * sections; it is built once (and again on a reload) and shared by every thread. Preferences are
 * rows of the store, one per (tenant, user), in the JSON shape of GET /preferences:
 *
 *   {"channels": {"email": true}, "categories": {"bookings": {"email": false, "sms": true}},
 *    "digest": {"email": {"everyMs": 3600000}}, "locale": "de"}
 *
 * Resolution (mv_reach_allows), first that says: the user's category × channel, the user's
 * channel, the tenant default's category × channel, the tenant default's channel, the template.
 * `inbox` is always on; a critical template ignores preferences. */
#ifndef MISSIVE_REACH_H
#define MISSIVE_REACH_H

#include <jansson.h>
#include <stdbool.h>

#include "missive/error.h"
#include "missive/store.h"
#include "missive/template.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_reach mv_reach;

#define MV_REACH_MAX_CHANNELS 32    /* named webhook channels in one config */
#define MV_REACH_MAX_CATEGORIES 256 /* categories in one preference set */
#define MV_REACH_MIN_DIGEST_MS 1000 /* digest.<channel>.everyMs at least */

/* Parses the config sections (each may be NULL = absent):
 *   channels:    {"sms": {"webhook": "https://…"}, …} — names [a-z][a-z0-9_-]{0,31}, not
 *                inbox/email, at most MV_REACH_MAX_CHANNELS;
 *   preferences: {"defaults": {…preference shape…}, "tenants": {"acme": {…}}} — "tenants"
 *                replaces the defaults for one tenant.
 * email_enabled: whether the email channel exists. Errors are MV_INVALID_CONFIG naming the key
 * ("channels.sms.webhook: …"). *out owned by the caller: mv_reach_free. */
mv_code mv_reach_new(const json_t *channels, const json_t *preferences, bool email_enabled,
                     mv_reach **out, mv_err *err);
void mv_reach_free(mv_reach *r); /* NULL-safe */

/* True for "inbox", for "email" when email is enabled, and for every configured channel. */
bool mv_reach_knows(const mv_reach *r, const char *channel);
/* The webhook URL of a named channel (borrowed), NULL for inbox, email and unknown names. */
const char *mv_reach_webhook(const mv_reach *r, const char *channel);
/* How many named webhook channels; the name of the i-th (borrowed). */
size_t mv_reach_channel_count(const mv_reach *r);
const char *mv_reach_channel_name(const mv_reach *r, size_t i);

/* A template's channels each need a configured channel (r NULL: only inbox and email exist).
 * MV_INVALID_TEMPLATE naming the template and the channel otherwise. */
mv_code mv_reach_check_template(const mv_reach *r, const mv_template *t, mv_err *err);

/* Checks a preference set (the body of PUT /preferences, or a config default): an object with
 * only channels, categories, digest and locale; channels known to r; values booleans; inbox
 * never false; digest.<channel>.everyMs ≥ MV_REACH_MIN_DIGEST_MS; locale a BCP 47 tag or null.
 * prefix ("" or "preferences.defaults.") is put before the field the error names.
 * MV_INVALID_ARGUMENT otherwise. */
mv_code mv_preferences_check(const mv_reach *r, const json_t *prefs, const char *prefix,
                             mv_err *err);

/* The caller's preferences in their tenant: the stored set with every key present
 * ({"channels": {}, "categories": {}, "digest": {}, "locale": null} when none is stored).
 * *out is a new reference. */
mv_code mv_preferences_get(mv_store *store, const mv_user *user, json_t **out, mv_err *err);
/* Replaces the caller's preferences (checked as mv_preferences_check; nothing is written when
 * the check fails). *out (may be NULL) receives the stored set as mv_preferences_get. */
mv_code mv_preferences_put(mv_store *store, const mv_reach *r, const mv_user *user,
                           const json_t *prefs, json_t **out, mv_err *err);

/* Whether channel delivers a message of category to a user with preferences user_prefs (NULL =
 * none stored) in tenant, when the template itself says template_on. See the top of this file.
 */
bool mv_reach_allows(const mv_reach *r, const char *tenant, const json_t *user_prefs,
                     const char *category, const char *channel, bool template_on, bool critical);

/* ---- action links ---------------------------------------------------------------------------
 * With links configured, every channel delivery carries {baseUrl}/a/{token} per action its
 * recipient may run. A token is "<payload>.<signature>" in base64url: the payload binds tenant,
 * message, action, recipient and expiry; the signature is HMAC-SHA256 under the links secret.
 * A token is single-use: its use is recorded in the same transaction as the action's claim
 * (mv_action_request.link), so it is spent exactly when the action's attempt is durable. */

#define MV_LINK_MIN_SECRET 32 /* bytes */

/* Enables links: base_url ("https://missive.example.com", no trailing slash needed), the secret
 * (copied; at least MV_LINK_MIN_SECRET bytes) and the lifetime (ttl_ms ≥ 1000).
 * MV_INVALID_CONFIG otherwise. */
mv_code mv_reach_set_links(mv_reach *r, const char *base_url, const void *secret, size_t secret_len,
                           int64_t ttl_ms, mv_err *err);
bool mv_reach_links_enabled(const mv_reach *r);

/* What a valid token binds. */
typedef struct mv_link {
    char tenant[129];
    char message_id[25];
    char action_cd[129];
    char user_id[256];
    int64_t expires_at;
    char token_id[65]; /* hex SHA-256 of the payload: the single-use key */
} mv_link;

/* The URL of a new link valid until now + ttl; *out malloc'd. */
mv_code mv_link_url(const mv_reach *r, const char *tenant, const char *message_id,
                    const char *action_cd, const char *user_id, int64_t now, char **out,
                    mv_err *err);
/* Checks a token: MV_LINK_INVALID when malformed, forged, altered or expired at now. */
mv_code mv_link_verify(const mv_reach *r, const char *token, int64_t now, mv_link *out,
                       mv_err *err);
/* Whether the link was used (its action claimed through it). */
mv_code mv_link_used(mv_store *store, const mv_link *link, bool *used, mv_err *err);
/* Retention: forgets the uses of links that expired before `before` (their tokens are refused
 * as expired, so no use needs remembering). *removed (may be NULL) gets how many. */
mv_code mv_links_gc(mv_store *store, int64_t before, int64_t *removed, mv_err *err);

/* ---- languages --------------------------------------------------------------------------------
 */

typedef struct mv_service mv_service;

/* Puts a message (the JSON of mv_message_get, changed in place) into the reader's language: the
 * template's "locales" rendered at create, picked by accept (an Accept-Language value or one tag;
 * de-AT falls back to de, then to the default); sets "locale" to the tag used, or null for the
 * template's default content. */
mv_code mv_message_localize(mv_service *svc, json_t *message, const char *accept, mv_err *err);
/* mv_message_localize for every message of an array (a list's page), in one store read. */
mv_code mv_messages_localize(mv_service *svc, json_t *messages, const char *accept, mv_err *err);

/* A BCP 47 language tag as missive accepts one: a 2–3 letter language, then subtags of 1–8
 * letters or digits separated by '-', at most 35 characters in all. */
bool mv_valid_locale(const char *tag);

#ifdef __cplusplus
}
#endif

#endif
