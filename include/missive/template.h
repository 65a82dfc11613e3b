/* missive/template.h — message templates: the parsed, validated form of one template file, the
 * registry that holds them, and the action rules (which actions a user sees and may run).
 *
 * A template is immutable once registered and reference-counted: mv_registry_find() returns a
 * reference the caller releases with mv_template_release(), so a template replaced or removed
 * while a request uses it stays valid until that request ends. All text fields that carry
 * {{mustache}} are compiled at load time; a malformed one is rejected then, naming the template
 * and the field. The file format is in docs/templates.md ("Template format"). */
#ifndef MISSIVE_TEMPLATE_H
#define MISSIVE_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "missive/error.h"
#include "missive/jsonlogic.h"
#include "missive/mustache.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MV_GENERIC_NOTIFICATION_TEMPLATE_CD "__generic-notification__"

typedef enum mv_usertype { MV_SENDER, MV_RECEIVER } mv_usertype;

/* The tenant of a user without one (DESIGN "Security rules"). */
#define MV_DEFAULT_TENANT "default"

/* The acting user. roles and permissions are borrowed for the duration of a call. tenant scopes
 * everything the call reads or writes: messages, their reservations, sagas and approvals of
 * another tenant do not exist for this user. */
typedef struct mv_user {
    const char *id;           /* compared trimmed; empty or NULL is "no user" */
    const char *const *roles; /* nroles entries */
    size_t nroles;
    const json_t *permissions; /* object: key → truthy value; NULL = none */
    const char *tenant;        /* NULL → "default" */
    const json_t *identity;    /* free-form object passed to prepare hooks; NULL = {} */
} mv_user;

typedef struct mv_content_tpl {
    mv_tpl *title, *short_text, *long_text; /* never NULL (empty templates when absent) */
} mv_content_tpl;

typedef enum mv_handler_kind {
    MV_HANDLER_NONE,    /* "handler": null or absent — the action only archives */
    MV_HANDLER_WEBHOOK, /* {"webhook": URL} */
    MV_HANDLER_PAYMENT, /* {"payment": "refund"|"expire"} */
    MV_HANDLER_SAGA,    /* {"saga": NAME} */
} mv_handler_kind;

typedef struct mv_action_def {
    char *action_cd;
    mv_tpl *name;
    char *variant;
    bool is_default, has_is_default; /* has_is_default: the key was present */
    bool sender, receiver;
    char *permission;    /* NULL = none */
    mv_logic *condition; /* NULL = none */
    json_t *condition_json;
    bool has_confirmation;
    mv_tpl *confirm_title, *confirm_message, *confirm_notes_label; /* notes label may be NULL */
    json_t *confirm_require_notes, *confirm_documents;             /* raw, may be NULL */
    json_t *payload; /* passed through verbatim, may be NULL */
    mv_handler_kind handler;
    char *handler_target;         /* URL, "refund"/"expire", or saga name */
    bool has_sender_notification; /* string form fills long and short with the same template */
    mv_tpl *notify_title, *notify_short,
        *notify_long;          /* title may be NULL → message's sender title */
    char *approval_capability; /* NULL = no approval */
    int64_t approval_ttl_ms;   /* 0 = the configured default */
} mv_action_def;

#define MV_TEMPLATE_MAX_LOCALES 16

/* "expiry": what happens to a message nobody acted on in time (docs/time.md). */
typedef struct mv_expiry_def {
    int64_t after_ms; /* 0: a message expires only when its create sets expiresAt */
    char *action_cd;  /* a receiver action run as system:expiry; NULL: the message is archived */
    /* the sender's notification at expiry, as an action's senderNotification */
    bool has_sender_notification;
    mv_tpl *notify_title, *notify_short, *notify_long;
} mv_expiry_def;

/* "reminders": one entry per reminder, counted from when the message became visible. */
#define MV_TEMPLATE_MAX_REMINDERS 5
typedef struct mv_reminder_def {
    int64_t after_ms;
    mv_tpl *title; /* rendered from the message's payload */
} mv_reminder_def;

/* "escalation": one entry per step; its roles join the message's toRoles if still active. */
#define MV_TEMPLATE_MAX_ESCALATIONS 5
typedef struct mv_escalation_def {
    int64_t after_ms;
    json_t *to_roles; /* array of role strings */
} mv_escalation_def;

/* The longest a message may wait for its expiry (and the furthest a time in a request may be). */
#define MV_MAX_DELAY_MS (365LL * 86400000LL)

typedef enum mv_prepare_kind { MV_PREPARE_DECLARATIVE, MV_PREPARE_WEBHOOK } mv_prepare_kind;

/* A template's "required" list: at most this many dotted paths, each at most this many bytes. */
#define MV_TEMPLATE_MAX_REQUIRED 64
#define MV_TEMPLATE_MAX_REQUIRED_PATH 256

/* One entry of a template's "locales": the contents and action texts in that language (members
 * NULL where the template's default applies). */
typedef struct mv_template_locale_action {
    char *action_cd;
    mv_tpl *name;
} mv_template_locale_action;
typedef struct mv_template_locale {
    char *tag; /* BCP 47, as written */
    mv_content_tpl sender_content, receiver_content;
    mv_template_locale_action *actions;
    size_t nactions;
} mv_template_locale;

/* One entry of a template's "channels" (missive/reach.h): where its messages are delivered, with
 * the content that channel gets instead of the receiver content (members NULL where none). */
typedef struct mv_template_channel {
    char *name; /* "email", "sms", … */
    mv_content_tpl content;
} mv_template_channel;

typedef struct mv_template {
    char *template_cd;
    char *type;        /* "" when absent */
    char *description; /* "" when absent */
    char *payment_cd;  /* "" when absent */
    mv_content_tpl sender_content, receiver_content;
    json_t *ui_template; /* a string or {"sender": …, "receiver": …} */
    mv_prepare_kind prepare;
    mv_tpl *prepare_to_user;  /* declarative: rendered from the item data; NULL = no toUser */
    json_t *prepare_to_roles; /* declarative: array of strings (may be empty) */
    char *prepare_fan_out;    /* declarative: dotted path to an array, NULL = none */
    char *prepare_webhook;    /* webhook: URL */
    char **required;          /* dotted paths into the payload a create must give (not null) */
    size_t nrequired;
    mv_action_def *actions;
    size_t nactions;
    /* reach (message/template_reach.c): has_channels false → email only, as before */
    bool has_channels, critical;
    mv_template_channel *channels;
    size_t nchannels;
    char *category;              /* "category", default the templateCd */
    mv_template_locale *locales; /* "locales" (at most MV_TEMPLATE_MAX_LOCALES) */
    size_t nlocales;
    mv_expiry_def *expiry;      /* NULL when the template has no "expiry" */
    mv_reminder_def *reminders; /* "reminders" (message/template_time.c) */
    size_t nreminders;
    mv_escalation_def *escalations; /* "escalation" */
    size_t nescalations;
    json_t *source; /* the template JSON as loaded (read-only) */
    int refs_;      /* internal */
} mv_template;

typedef struct mv_registry mv_registry;

/* ---- templates ---------------------------------------------------------------------------- */

/* Parses and validates one template from JSON. source_name (a file path or "<inline>") is used
 * in error messages. Validation follows the reference exactly (messages such as
 * `template "booking" has duplicate actionCd "accept"`) plus: unknown keys, route-pattern codes,
 * Mustache fields that do not compile, conditions that are not valid JsonLogic, handler/prepare/
 * approval shapes. Errors are MV_INVALID_TEMPLATE, prefixed with source_name. *out has one
 * reference owned by the caller. */
mv_code mv_template_parse(const json_t *json, const char *source_name, mv_template **out,
                          mv_err *err);
/* MV_OK when payload has every path of t->required (present and not null), else
 * MV_INVALID_ARGUMENT naming the first one missing. A create checks this before anything else. */
mv_code mv_template_check_payload(const mv_template *t, const json_t *payload, mv_err *err);
/* Reads a file and parses it. */
mv_code mv_template_load_file(const char *path, mv_template **out, mv_err *err);
mv_template *mv_template_retain(mv_template *t);
/* Drops a reference; frees on the last. NULL-safe. */
void mv_template_release(mv_template *t);
/* The action with that code, or NULL (borrowed from t). */
const mv_action_def *mv_template_action(const mv_template *t, const char *action_cd);
/* Resolves uiTemplate for a usertype: string → itself; object → obj[usertype] || obj.sender ||
 * obj.receiver || "". Borrowed. */
const char *mv_template_ui(const mv_template *t, mv_usertype usertype);

/* ---- registry (thread-safe) --------------------------------------------------------------- */

/* An empty registry (NULL when out of memory); free with mv_registry_free. */
mv_registry *mv_registry_new(void);
/* NULL-safe; releases the registry's references. */
void mv_registry_free(mv_registry *reg);
/* Adds or replaces (keeping the original position in mv_registry_codes). Takes its own
 * reference to t. */
void mv_registry_put(mv_registry *reg, mv_template *t);
/* Parses json and registers it. */
mv_code mv_registry_register(mv_registry *reg, const json_t *json, const char *source_name,
                             mv_err *err);
/* Loads one file. */
mv_code mv_registry_load_file(mv_registry *reg, const char *path, mv_err *err);
/* Loads every *.json in dir, in name order. Every bad file is reported: err->message lists them
 * all, one per line; good files are registered even when others fail. */
mv_code mv_registry_load_dir(mv_registry *reg, const char *dir, mv_err *err);
/* A new reference to the template, or NULL. Release with mv_template_release(). */
mv_template *mv_registry_find(mv_registry *reg, const char *template_cd);
bool mv_registry_has(mv_registry *reg, const char *template_cd);
/* Number of templates; codes in registration order into a new JSON array (caller owns). */
size_t mv_registry_count(mv_registry *reg);
json_t *mv_registry_codes(mv_registry *reg);
/* Returns true when something was removed. */
bool mv_registry_remove(mv_registry *reg, const char *template_cd);
void mv_registry_clear(mv_registry *reg);
/* Exchanges the contents of two registries at once (a reload: load the new set into a fresh
 * registry, check it, then swap it in and free the fresh one, which now holds the old set).
 * A finder sees either the old set or the new one, never a mix; a template found before the
 * swap stays valid until released. */
void mv_registry_swap(mv_registry *reg, mv_registry *other);

/* ---- rules ---------------------------------------------------------------------------------- */

/* The user's id trimmed into buf (size bytes); false when missing or empty. */
bool mv_user_id(const mv_user *user, char *buf, size_t size);
/* Relationship with a message document (the JSON shape of a message): sender = fromUser equals
 * the trimmed user id; receiver = toUser equals it, or a toRoles entry is among user->roles.
 * Stored ids are compared trimmed; an empty or null stored id matches nobody. */
bool mv_user_is_sender(const mv_user *user, const json_t *message);
bool mv_user_is_receiver(const mv_user *user, const json_t *message);
/* permissions[key] is truthy (JavaScript truthiness). */
bool mv_user_has_permission(const mv_user *user, const char *key);

/* isActionAllowed: the user is that usertype of the message and the action is available to it,
 * the optional permission is granted, the optional condition (evaluated with the message as
 * data) is truthy. */
bool mv_action_allowed(const mv_action_def *action, const mv_user *user, const json_t *message);

/* filterActions: the actions available to usertype (flag, permission, condition — not the user's
 * relation to the message), rendered: a new JSON array of {actionCd, isDefault?, name, variant,
 * confirmation?, payload?} with name and confirmation rendered (no escaping) from data. */
mv_code mv_actions_filter(const mv_template *t, mv_usertype usertype, const mv_user *user,
                          const json_t *message, const json_t *data, json_t **out, mv_err *err);

/* Told when an action's condition stopped at its work bound (MV_LOGIC_MAX_STEPS or
 * MV_LOGIC_MAX_BYTES; why names it): the action is then not allowed, and the template's author
 * should hear of it. */
typedef struct mv_condition_warning {
    void (*fn)(void *ctx, const mv_action_def *action, const mv_err *why);
    void *ctx;
} mv_condition_warning;

/* mv_action_allowed and mv_actions_filter that report a condition stopped at its bound to w
 * (may be NULL). */
bool mv_action_allowed_warn(const mv_action_def *action, const mv_user *user, const json_t *message,
                            const mv_condition_warning *w);
mv_code mv_actions_filter_warn(const mv_template *t, mv_usertype usertype, const mv_user *user,
                               const json_t *message, const json_t *data,
                               const mv_condition_warning *w, json_t **out, mv_err *err);

/* Renders a content block ({title, short, long}) with data, no escaping; a new JSON object. */
mv_code mv_content_render(const mv_content_tpl *c, const json_t *data, json_t **out, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
