/* template.c — one template file → an immutable, validated mv_template.
 *
 * Validation runs in two passes so the reference's checks keep their exact order and wording
 * (SEMANTICS §1.3): pass 1 is the reference (templateCd, actions array, then per action: actionCd,
 * duplicate, name, variant, available to someone, one default per usertype, using JavaScript
 * truthiness for the flags); pass 2 is missive's own strictness while it builds the struct
 * (code patterns, unknown keys, JSON types, Mustache and JsonLogic that compile, handler/prepare/
 * approval shapes). Everything kept is a private copy, so the caller's JSON can change afterwards
 * without affecting the template. Every message is prefixed with the source name. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/js_value.h"
#include "message/reach_internal.h"
#include "message/time_internal.h"
#include "missive/base.h"
#include "missive/template.h"

/* Where an error happened: "<source>: template "X" action "Y" <what>". */
typedef struct parse_ctx {
    const char *source;
    const char *template_cd; /* NULL before it is known */
    const char *action_cd;   /* NULL outside an action */
    mv_err *err;
} parse_ctx;

static mv_code failv(const parse_ctx *c, mv_code code, const char *fmt, va_list ap) {
    char what[400], where[300] = "";
    vsnprintf(what, sizeof what, fmt, ap);
    if (c->template_cd && c->action_cd)
        snprintf(where, sizeof where, "template \"%s\" action \"%s\" ", c->template_cd,
                 c->action_cd);
    else if (c->template_cd)
        snprintf(where, sizeof where, "template \"%s\" ", c->template_cd);
    return mv_err_set(c->err, code, "%s: %s%s", c->source, where, what);
}

static mv_code fail(const parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mv_code fail(const parse_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mv_code rc = failv(c, MV_INVALID_TEMPLATE, fmt, ap);
    va_end(ap);
    return rc;
}

static mv_code oom(const parse_ctx *c) {
    return mv_err_set(c->err, MV_NO_MEMORY, "%s: out of memory", c->source);
}

/* ---- small JSON predicates ------------------------------------------------------------------ */

/* typeof v === "string" && v.trim() !== "" */
static bool nonempty_trimmed(const json_t *v) {
    const char *s = json_string_value(v);
    if (!s) return false;
    for (; *s; s++)
        if (!strchr(" \t\n\v\f\r", *s)) return true;
    return false;
}

/* Absent and null both mean "not given" for optional keys. */
static const json_t *opt(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static bool key_allowed(const char *key, const char *const *allowed) {
    for (; *allowed; allowed++)
        if (strcmp(key, *allowed) == 0) return true;
    return false;
}

/* First key of obj not in allowed, or NULL. */
static const char *unknown_key(const json_t *obj, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        (void)v;
        if (!key_allowed(key, allowed)) return key;
    }
    return NULL;
}

static bool valid_url(const char *s) {
    if (!s) return false;
    size_t skip = strncmp(s, "http://", 7) == 0 ? 7 : strncmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip || !s[skip]) return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) return false;
    return true;
}

/* ---- field readers: each validates one field and produces its owned form --------------------- */

/* An optional string field (null/absent → ""). */
static mv_code read_plain(const parse_ctx *c, const json_t *obj, const char *key, char **out) {
    const json_t *v = opt(obj, key);
    if (v && !json_is_string(v)) return fail(c, "%s must be a string", key);
    *out = strdup(v ? json_string_value(v) : "");
    return *out ? MV_OK : oom(c);
}

/* Compiles Mustache text; `field` names it in errors ("receiverContent.title"). */
static mv_code compile_text(const parse_ctx *c, const char *field, const char *src, mv_tpl **out) {
    mv_err e;
    mv_err_clear(&e);
    mv_code rc = mv_tpl_compile(src, strlen(src), out, &e);
    if (rc == MV_NO_MEMORY) return oom(c);
    if (rc != MV_OK) return fail(c, "%s: %s", field, e.message);
    return MV_OK;
}

/* An optional Mustache string field of obj (null/absent → src_default, or *out NULL when
 * src_default is NULL). `prefix` is the enclosing field name ("senderContent"), or "". */
static mv_code read_text(const parse_ctx *c, const json_t *obj, const char *prefix, const char *key,
                         const char *src_default, mv_tpl **out) {
    char field[160];
    snprintf(field, sizeof field, "%s%s%s", prefix, *prefix ? "." : "", key);
    *out = NULL;
    const json_t *v = opt(obj, key);
    if (v && !json_is_string(v)) return fail(c, "%s must be a string", field);
    const char *src = v ? json_string_value(v) : src_default;
    if (!src) return MV_OK;
    return compile_text(c, field, src, out);
}

static const char *const CONTENT_KEYS[] = {"title", "short", "long", NULL};

static mv_code read_content(const parse_ctx *c, const json_t *tpl, const char *key,
                            mv_content_tpl *out) {
    const json_t *v = opt(tpl, key);
    const json_t *empty = NULL;
    if (v && !json_is_object(v)) return fail(c, "%s must be an object", key);
    const char *bad = v ? unknown_key(v, CONTENT_KEYS) : NULL;
    if (bad) return fail(c, "%s has unknown key \"%s\"", key, bad);
    if (!v) v = empty = json_object();
    if (!v) return oom(c);
    mv_code rc = read_text(c, v, key, "title", "", &out->title);
    if (rc == MV_OK) rc = read_text(c, v, key, "short", "", &out->short_text);
    if (rc == MV_OK) rc = read_text(c, v, key, "long", "", &out->long_text);
    json_decref((json_t *)empty);
    return rc;
}

static const char *const UI_KEYS[] = {"sender", "receiver", NULL};

static mv_code read_ui(const parse_ctx *c, const json_t *tpl, json_t **out) {
    const json_t *v = opt(tpl, "uiTemplate");
    if (!v) {
        *out = json_string("");
    } else if (json_is_string(v)) {
        *out = json_deep_copy(v);
    } else if (json_is_object(v)) {
        const char *bad = unknown_key(v, UI_KEYS);
        if (bad) return fail(c, "uiTemplate has unknown key \"%s\"", bad);
        for (int i = 0; UI_KEYS[i]; i++) {
            const json_t *s = opt(v, UI_KEYS[i]);
            if (s && !json_is_string(s))
                return fail(c, "uiTemplate.%s must be a string", UI_KEYS[i]);
        }
        *out = json_deep_copy(v);
    } else {
        return fail(c, "uiTemplate must be a string or an object with sender and receiver");
    }
    return *out ? MV_OK : oom(c);
}

static const char *const PREPARE_KEYS[] = {"toUser", "toRoles", "fanOut", NULL};

static mv_code read_prepare(const parse_ctx *c, const json_t *tpl, mv_template *t) {
    const json_t *p = opt(tpl, "prepare");
    t->prepare = MV_PREPARE_DECLARATIVE;
    if (p && !json_is_object(p))
        return fail(c, "prepare must be an object ({toUser, toRoles, fanOut} or {webhook})");
    if (p && json_object_get(p, "webhook")) {
        t->prepare_to_roles = json_array();
        if (!t->prepare_to_roles) return oom(c);
        const char *url = json_string_value(json_object_get(p, "webhook"));
        if (!url) return fail(c, "prepare.webhook must be a string");
        if (json_object_size(p) != 1) {
            const char *key;
            json_t *v;
            json_object_foreach((json_t *)p, key, v) {
                (void)v;
                if (strcmp(key, "webhook") != 0)
                    return fail(c, "prepare.webhook cannot be combined with \"%s\"", key);
            }
        }
        if (!valid_url(url))
            return fail(c, "prepare.webhook must be an http:// or https:// URL, got \"%s\"", url);
        t->prepare = MV_PREPARE_WEBHOOK;
        t->prepare_webhook = strdup(url);
        return t->prepare_webhook ? MV_OK : oom(c);
    }
    const char *bad = p ? unknown_key(p, PREPARE_KEYS) : NULL;
    if (bad) return fail(c, "prepare has unknown key \"%s\"", bad);

    const json_t *to_user = p ? opt(p, "toUser") : NULL;
    if (to_user && !json_is_string(to_user)) return fail(c, "prepare.toUser must be a string");
    if (to_user && json_string_length(to_user) > 0) {
        mv_code rc =
            compile_text(c, "prepare.toUser", json_string_value(to_user), &t->prepare_to_user);
        if (rc != MV_OK) return rc;
    }

    const json_t *roles = p ? opt(p, "toRoles") : NULL;
    if (roles && !json_is_array(roles)) return fail(c, "prepare.toRoles must be an array");
    size_t i;
    const json_t *role;
    json_array_foreach(roles, i, role) {
        if (!nonempty_trimmed(role))
            return fail(c, "prepare.toRoles[%zu] must be a non-empty string", i);
    }
    t->prepare_to_roles = roles ? json_deep_copy(roles) : json_array();
    if (!t->prepare_to_roles) return oom(c);

    const json_t *fan_out = p ? opt(p, "fanOut") : NULL;
    if (fan_out && !nonempty_trimmed(fan_out))
        return fail(c, "prepare.fanOut must be a dotted path (a non-empty string) or null");
    if (fan_out) {
        t->prepare_fan_out = strdup(json_string_value(fan_out));
        if (!t->prepare_fan_out) return oom(c);
    }
    return MV_OK;
}

/* ---- actions ------------------------------------------------------------------------------------
 */

static const char *const ACTION_KEYS[] = {"actionCd",   "name",           "variant",
                                          "isDefault",  "sender",         "receiver",
                                          "permission", "condition",      "confirmation",
                                          "payload",    "handler",        "senderNotification",
                                          "approval",   "resultTemplate", NULL};
static const char *const CONFIRM_KEYS[] = {"title",        "message",   "notesLabel",
                                           "requireNotes", "documents", NULL};
static const char *const NOTIFY_KEYS[] = {"title", "short", "long", NULL};
static const char *const APPROVAL_KEYS[] = {"capability", "ttlMs", NULL};

static mv_code read_flag(const parse_ctx *c, const json_t *a, const char *key, bool *value,
                         bool *present) {
    const json_t *v = opt(a, key);
    if (present) *present = v != NULL;
    if (v && !json_is_boolean(v)) return fail(c, "%s must be true or false", key);
    *value = json_is_true(v);
    return MV_OK;
}

static mv_code read_confirmation(const parse_ctx *c, const json_t *a, mv_action_def *d) {
    const json_t *v = opt(a, "confirmation");
    if (!v) return MV_OK;
    if (!json_is_object(v)) return fail(c, "confirmation must be an object");
    const char *bad = unknown_key(v, CONFIRM_KEYS);
    if (bad) return fail(c, "confirmation has unknown key \"%s\"", bad);
    if (!json_is_string(json_object_get(v, "title")))
        return fail(c, "confirmation.title must be a string");
    if (!json_is_string(json_object_get(v, "message")))
        return fail(c, "confirmation.message must be a string");
    d->has_confirmation = true;
    mv_code rc = read_text(c, v, "confirmation", "title", NULL, &d->confirm_title);
    if (rc == MV_OK) rc = read_text(c, v, "confirmation", "message", NULL, &d->confirm_message);
    if (rc != MV_OK) return rc;
    /* The reference renders notesLabel only when it is truthy (a non-empty string). */
    const json_t *label = opt(v, "notesLabel");
    if (label && !json_is_string(label)) return fail(c, "confirmation.notesLabel must be a string");
    if (label && json_string_length(label) > 0) {
        rc = read_text(c, v, "confirmation", "notesLabel", NULL, &d->confirm_notes_label);
        if (rc != MV_OK) return rc;
    }
    const json_t *req = opt(v, "requireNotes");
    if (req && !json_is_boolean(req))
        return fail(c, "confirmation.requireNotes must be true or false");
    const json_t *docs = opt(v, "documents");
    if (docs && !json_is_boolean(docs))
        return fail(c, "confirmation.documents must be true or false");
    if (req) d->confirm_require_notes = json_incref((json_t *)req); /* booleans are immutable */
    if (docs) d->confirm_documents = json_incref((json_t *)docs);
    return MV_OK;
}

static mv_code read_handler(const parse_ctx *c, const json_t *a, mv_action_def *d) {
    const json_t *h = opt(a, "handler");
    d->handler = MV_HANDLER_NONE;
    if (!h) return MV_OK;
    if (!json_is_object(h) || json_object_size(h) != 1)
        return fail(c, "handler must be null, {\"webhook\": URL}, {\"payment\": \"refund\"|"
                       "\"expire\"} or {\"saga\": NAME}");
    const char *s;
    if (json_object_get(h, "webhook")) {
        s = json_string_value(json_object_get(h, "webhook"));
        if (!s) return fail(c, "handler.webhook must be a string");
        if (!valid_url(s))
            return fail(c, "handler.webhook must be an http:// or https:// URL, got \"%s\"", s);
        d->handler = MV_HANDLER_WEBHOOK;
    } else if (json_object_get(h, "payment")) {
        s = json_string_value(json_object_get(h, "payment"));
        if (!s || (strcmp(s, "refund") != 0 && strcmp(s, "expire") != 0))
            return fail(c, "handler.payment must be \"refund\" or \"expire\"");
        d->handler = MV_HANDLER_PAYMENT;
    } else if (json_object_get(h, "saga")) {
        s = json_string_value(json_object_get(h, "saga"));
        if (!s) return fail(c, "handler.saga must be a string");
        if (!mv_valid_token(s, 128))
            return fail(c,
                        "handler.saga must be a saga name (1..128 printable characters, no "
                        "spaces), got \"%s\"",
                        s);
        d->handler = MV_HANDLER_SAGA;
    } else {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)h, key, v) {
            (void)v;
            return fail(c, "handler has unknown key \"%s\" (expected webhook, payment or saga)",
                        key);
        }
        return fail(c, "handler is malformed");
    }
    d->handler_target = strdup(s);
    return d->handler_target ? MV_OK : oom(c);
}

static mv_code read_notification(const parse_ctx *c, const json_t *a, mv_action_def *d) {
    const json_t *n = opt(a, "senderNotification");
    if (!n) return MV_OK;
    mv_code rc;
    if (json_is_string(n)) {
        /* As the reference: {title: sender title, long: s, short: s}. */
        d->has_sender_notification = true;
        rc = compile_text(c, "senderNotification", json_string_value(n), &d->notify_long);
        if (rc == MV_OK)
            rc = compile_text(c, "senderNotification", json_string_value(n), &d->notify_short);
        return rc;
    }
    if (!json_is_object(n))
        return fail(c, "senderNotification must be a string or an object {title?, short?, long}");
    const char *bad = unknown_key(n, NOTIFY_KEYS);
    if (bad) return fail(c, "senderNotification has unknown key \"%s\"", bad);
    if (!json_object_size(n))
        return fail(c, "senderNotification must have at least one of title, short and long");
    d->has_sender_notification = true;
    /* {title: c.title || sender title, long, short: c.short || c.long}. */
    const json_t *title = opt(n, "title");
    if (title && !json_is_string(title))
        return fail(c, "senderNotification.title must be a string");
    if (title && json_string_length(title) > 0) {
        rc = read_text(c, n, "senderNotification", "title", NULL, &d->notify_title);
        if (rc != MV_OK) return rc;
    }
    rc = read_text(c, n, "senderNotification", "long", "", &d->notify_long);
    if (rc != MV_OK) return rc;
    const json_t *shrt = opt(n, "short");
    if (shrt && !json_is_string(shrt)) return fail(c, "senderNotification.short must be a string");
    if (shrt && json_string_length(shrt) > 0)
        return read_text(c, n, "senderNotification", "short", NULL, &d->notify_short);
    return compile_text(c, "senderNotification.long", mv_tpl_source(d->notify_long),
                        &d->notify_short);
}

static mv_code read_approval(const parse_ctx *c, const json_t *a, mv_action_def *d) {
    const json_t *ap = opt(a, "approval");
    if (!ap) return MV_OK;
    if (!json_is_object(ap)) return fail(c, "approval must be an object {capability, ttlMs?}");
    const char *bad = unknown_key(ap, APPROVAL_KEYS);
    if (bad) return fail(c, "approval has unknown key \"%s\"", bad);
    const char *cap = json_string_value(json_object_get(ap, "capability"));
    if (!cap) return fail(c, "approval.capability must be a string");
    if (!mv_valid_capability(cap))
        return fail(c,
                    "approval.capability \"%s\" is not a capability id (lowercase words "
                    "separated by . or -, such as \"refunds.large\")",
                    cap);
    const json_t *ttl = opt(ap, "ttlMs");
    if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) <= 0))
        return fail(c, "approval.ttlMs must be a positive integer (milliseconds)");
    d->approval_capability = strdup(cap);
    d->approval_ttl_ms = ttl ? json_integer_value(ttl) : 0;
    return d->approval_capability ? MV_OK : oom(c);
}

/* Pass 2 for one action: everything beyond the reference, building d. */
static mv_code read_action(const parse_ctx *c, const json_t *a, mv_action_def *d) {
    const char *action_cd = json_string_value(json_object_get(a, "actionCd"));
    if (!mv_valid_action_cd(action_cd)) return fail(c, "actionCd must match [A-Za-z0-9_-]{1,128}");
    const char *bad = unknown_key(a, ACTION_KEYS);
    if (bad) return fail(c, "has unknown key \"%s\"", bad);
    d->action_cd = strdup(action_cd);
    d->variant = strdup(json_string_value(json_object_get(a, "variant")));
    if (!d->action_cd || !d->variant) return oom(c);
    mv_code rc = read_text(c, a, "", "name", NULL, &d->name);
    if (rc == MV_OK) rc = read_flag(c, a, "sender", &d->sender, NULL);
    if (rc == MV_OK) rc = read_flag(c, a, "receiver", &d->receiver, NULL);
    if (rc == MV_OK) rc = read_flag(c, a, "isDefault", &d->is_default, &d->has_is_default);
    if (rc != MV_OK) return rc;

    const json_t *perm = opt(a, "permission");
    if (perm && !nonempty_trimmed(perm))
        return fail(c, "permission must be a non-empty string or null");
    if (perm && !(d->permission = strdup(json_string_value(perm)))) return oom(c);

    const json_t *cond = opt(a, "condition");
    if (cond) {
        mv_err e;
        mv_err_clear(&e);
        rc = mv_logic_compile(cond, &d->condition, &e);
        if (rc == MV_NO_MEMORY) return oom(c);
        if (rc != MV_OK) return fail(c, "condition: %s", e.message);
        if (!(d->condition_json = json_deep_copy(cond))) return oom(c);
    }

    if ((rc = read_confirmation(c, a, d)) != MV_OK) return rc;

    const json_t *payload = opt(a, "payload");
    if (payload && !json_is_object(payload)) return fail(c, "payload must be an object");
    if (payload && !(d->payload = json_deep_copy(payload))) return oom(c);

    const json_t *result_tpl = opt(a, "resultTemplate");
    if (result_tpl && !json_is_string(result_tpl))
        return fail(c, "resultTemplate must be a string or null");

    if ((rc = read_handler(c, a, d)) != MV_OK) return rc;
    if ((rc = read_notification(c, a, d)) != MV_OK) return rc;
    return read_approval(c, a, d);
}

/* Pass 1: the reference's validateTemplate, same order, same words. */
static mv_code check_reference(parse_ctx *c, const json_t *json) {
    const json_t *cd = json_object_get(json, "templateCd");
    if (!nonempty_trimmed(cd)) return fail(c, "templateCd must be a non-empty string");
    c->template_cd = json_string_value(cd);
    const json_t *actions = json_object_get(json, "actions");
    if (!json_is_array(actions)) return fail(c, "actions must be an array");
    const char *default_of[2] = {NULL, NULL}; /* sender, receiver */
    static const char *const usertypes[2] = {"sender", "receiver"};
    size_t i;
    const json_t *a;
    json_array_foreach(actions, i, a) {
        if (!json_is_object(a)) return fail(c, "actions[%zu] must be an object", i);
        const json_t *acd = json_object_get(a, "actionCd");
        if (!nonempty_trimmed(acd)) return fail(c, "actionCd must be a non-empty string");
        const char *action_cd = json_string_value(acd);
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(actions, j), "actionCd")),
                       action_cd) == 0)
                return fail(c, "has duplicate actionCd \"%s\"", action_cd);
        c->action_cd = action_cd;
        if (!nonempty_trimmed(json_object_get(a, "name")))
            return fail(c, "name must be a non-empty string");
        if (!nonempty_trimmed(json_object_get(a, "variant")))
            return fail(c, "variant must be a non-empty string");
        bool flags[2] = {mv_js_boolean(json_object_get(a, "sender")),
                         mv_js_boolean(json_object_get(a, "receiver"))};
        if (!flags[0] && !flags[1]) {
            /* a misspelled "receiver" is the usual cause: name the key, not only the symptom */
            const char *bad = unknown_key(a, ACTION_KEYS);
            if (bad)
                return fail(c, "has unknown key \"%s\" and must be available to sender or receiver",
                            bad);
            return fail(c, "must be available to sender or receiver");
        }
        c->action_cd = NULL;
        if (!mv_js_boolean(json_object_get(a, "isDefault"))) continue;
        for (int u = 0; u < 2; u++) {
            if (!flags[u]) continue;
            if (default_of[u])
                return fail(c, "has multiple default %s actions: \"%s\" and \"%s\"", usertypes[u],
                            default_of[u], action_cd);
            default_of[u] = action_cd;
        }
    }
    return MV_OK;
}

/* ---- expiry ---------------------------------------------------------------------------------- */

static const char *const EXPIRY_KEYS[] = {"afterMs", "actionCd", "senderNotification", NULL};

/* "expiry": {afterMs?, actionCd?, senderNotification?}; actionCd must name a receiver action
 * (read after the actions). The notification is read as an action's, then moved. */
static mv_code read_expiry(parse_ctx *c, const json_t *tpl, mv_template *t) {
    const json_t *e = opt(tpl, "expiry");
    if (!e) return MV_OK;
    if (!json_is_object(e)) return fail(c, "expiry must be an object");
    const char *bad = unknown_key(e, EXPIRY_KEYS);
    if (bad) return fail(c, "expiry has unknown key \"%s\"", bad);
    if (!(t->expiry = calloc(1, sizeof *t->expiry))) return oom(c);
    const json_t *after = opt(e, "afterMs");
    if (after && (!json_is_integer(after) || json_integer_value(after) < 1 ||
                  json_integer_value(after) > MV_MAX_DELAY_MS))
        return fail(c, "expiry.afterMs must be an integer from 1 to %lld (365 days)",
                    (long long)MV_MAX_DELAY_MS);
    t->expiry->after_ms = after ? json_integer_value(after) : 0;
    const json_t *cd = opt(e, "actionCd");
    if (cd) {
        if (!json_is_string(cd)) return fail(c, "expiry.actionCd must be a string");
        const mv_action_def *a = mv_template_action(t, json_string_value(cd));
        if (!a || !a->receiver)
            return fail(c, "expiry.actionCd \"%s\" is not a receiver action of the template",
                        json_string_value(cd));
        if (!(t->expiry->action_cd = strdup(json_string_value(cd)))) return oom(c);
    }
    mv_action_def n = {0};
    mv_code rc = read_notification(c, e, &n);
    t->expiry->has_sender_notification = n.has_sender_notification;
    t->expiry->notify_title = n.notify_title;
    t->expiry->notify_short = n.notify_short;
    t->expiry->notify_long = n.notify_long;
    return rc;
}

static void expiry_free(mv_expiry_def *e) {
    if (!e) return;
    free(e->action_cd);
    mv_tpl_free(e->notify_title);
    mv_tpl_free(e->notify_short);
    mv_tpl_free(e->notify_long);
    free(e);
}

static const char *const TEMPLATE_KEYS[] = {
    "templateCd",      "type",       "description", "paymentCd", "senderContent",
    "receiverContent", "uiTemplate", "prepare",     "required",  "actions",
    "label",           "channels",   "category",    "critical",  "locales",
    "expiry",          "reminders",  "escalation",  NULL};

/* Names separated by single dots, as mv_json_path walks them: no empty name, no control
 * character (an embedded NUL included: n is the JSON string's length). */
static bool dotted_path(const char *s, size_t n) {
    if (n == 0 || n > MV_TEMPLATE_MAX_REQUIRED_PATH || s[0] == '.' || s[n - 1] == '.') return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || (s[i] == '.' && s[i + 1] == '.'))
            return false;
    return true;
}

/* "required": the payload fields a create must give, checked before anything is reserved. */
static mv_code read_required(const parse_ctx *c, const json_t *json, mv_template *t) {
    const json_t *r = opt(json, "required");
    if (!r) return MV_OK;
    if (!json_is_array(r))
        return fail(c, "required must be an array of dotted paths into the payload, such as "
                       "[\"listing\", \"guest.name\"]");
    size_t n = json_array_size(r);
    if (n > MV_TEMPLATE_MAX_REQUIRED)
        return fail(c, "required lists %zu fields; at most %d are allowed", n,
                    MV_TEMPLATE_MAX_REQUIRED);
    if (n && !(t->required = calloc(n, sizeof *t->required))) return oom(c);
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(r, i);
        const char *s = json_string_value(p);
        if (!s) return fail(c, "required[%zu] must be a string", i);
        if (!dotted_path(s, json_string_length(p)))
            return fail(c,
                        "required[%zu] \"%s\" is not a dotted path (names separated by single "
                        "dots, at most %d bytes)",
                        i, s, MV_TEMPLATE_MAX_REQUIRED_PATH);
        for (size_t j = 0; j < i; j++)
            if (strcmp(t->required[j], s) == 0) return fail(c, "required lists \"%s\" twice", s);
        if (!(t->required[i] = strdup(s))) return oom(c);
        t->nrequired = i + 1;
    }
    return MV_OK;
}

mv_code mv_template_check_payload(const mv_template *t, const json_t *payload, mv_err *err) {
    for (size_t i = 0; t && i < t->nrequired; i++) {
        const json_t *v = mv_json_path(payload, t->required[i]);
        if (!v || json_is_null(v))
            return mv_err_set(
                err, MV_INVALID_ARGUMENT,
                "\"%s\" is required by template \"%s\" (missing or null in the payload)",
                t->required[i], t->template_cd);
    }
    return MV_OK;
}

mv_code mv_template_parse(const json_t *json, const char *source_name, mv_template **out,
                          mv_err *err) {
    *out = NULL;
    parse_ctx c = {.source = source_name ? source_name : "<inline>", .err = err};
    if (!json_is_object(json)) return fail(&c, "a template must be a JSON object");
    mv_code rc = check_reference(&c, json);
    if (rc != MV_OK) return rc;

    mv_template *t = calloc(1, sizeof *t);
    if (!t) return oom(&c);
    t->refs_ = 1;
    if (!c.template_cd || !mv_valid_template_cd(c.template_cd)) {
        rc = fail(&c, "templateCd must match [A-Za-z0-9_.-]{1,128}");
        goto fail;
    }
    const char *bad = unknown_key(json, TEMPLATE_KEYS);
    if (bad) {
        rc = fail(&c, "has unknown key \"%s\"", bad);
        goto fail;
    }
    if (!(t->template_cd = strdup(c.template_cd))) goto nomem;
    if ((rc = read_plain(&c, json, "type", &t->type)) != MV_OK) goto fail;
    if ((rc = read_plain(&c, json, "description", &t->description)) != MV_OK) goto fail;
    if ((rc = read_plain(&c, json, "paymentCd", &t->payment_cd)) != MV_OK) goto fail;
    const json_t *label = opt(json, "label");
    if (label && !nonempty_trimmed(label)) {
        rc = fail(&c, "label must be a non-empty string or null");
        goto fail;
    }
    if ((rc = read_content(&c, json, "senderContent", &t->sender_content)) != MV_OK) goto fail;
    if ((rc = read_content(&c, json, "receiverContent", &t->receiver_content)) != MV_OK) goto fail;
    if ((rc = read_ui(&c, json, &t->ui_template)) != MV_OK) goto fail;
    if ((rc = read_prepare(&c, json, t)) != MV_OK) goto fail;
    if ((rc = read_required(&c, json, t)) != MV_OK) goto fail;

    const json_t *actions = json_object_get(json, "actions");
    size_t n = json_array_size(actions);
    if (n && !(t->actions = calloc(n, sizeof *t->actions))) goto nomem;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(actions, i);
        c.action_cd = json_string_value(json_object_get(a, "actionCd"));
        t->nactions = i + 1; /* so a partly built action is freed too */
        if ((rc = read_action(&c, a, &t->actions[i])) != MV_OK) goto fail;
    }
    c.action_cd = NULL;
    if ((rc = mv__template_read_reach(json, c.source, t, err)) != MV_OK) goto fail;
    if ((rc = read_expiry(&c, json, t)) != MV_OK) goto fail;
    if ((rc = mv__template_read_time(json, c.source, t, err)) != MV_OK) goto fail;
    if (!(t->source = json_deep_copy(json))) goto nomem;
    *out = t;
    return MV_OK;
nomem:
    rc = oom(&c);
fail:
    t->refs_ = 1;
    mv_template_release(t);
    return rc;
}

mv_code mv_template_load_file(const char *path, mv_template **out, mv_err *err) {
    *out = NULL;
    json_t *json;
    mv_code rc = mv_json_load_file(path, &json, err);
    if (rc != MV_OK) return rc;
    rc = mv_template_parse(json, path, out, err);
    json_decref(json);
    return rc;
}

mv_template *mv_template_retain(mv_template *t) {
    if (t) __atomic_add_fetch(&t->refs_, 1, __ATOMIC_RELAXED);
    return t;
}

static void content_free(mv_content_tpl *c) {
    mv_tpl_free(c->title);
    mv_tpl_free(c->short_text);
    mv_tpl_free(c->long_text);
}

static void action_free(mv_action_def *d) {
    free(d->action_cd);
    mv_tpl_free(d->name);
    free(d->variant);
    free(d->permission);
    mv_logic_free(d->condition);
    json_decref(d->condition_json);
    mv_tpl_free(d->confirm_title);
    mv_tpl_free(d->confirm_message);
    mv_tpl_free(d->confirm_notes_label);
    json_decref(d->confirm_require_notes);
    json_decref(d->confirm_documents);
    json_decref(d->payload);
    free(d->handler_target);
    mv_tpl_free(d->notify_title);
    mv_tpl_free(d->notify_short);
    mv_tpl_free(d->notify_long);
    free(d->approval_capability);
}

void mv_template_release(mv_template *t) {
    if (!t || __atomic_sub_fetch(&t->refs_, 1, __ATOMIC_ACQ_REL) > 0) return;
    free(t->template_cd);
    free(t->type);
    free(t->description);
    free(t->payment_cd);
    content_free(&t->sender_content);
    content_free(&t->receiver_content);
    json_decref(t->ui_template);
    mv_tpl_free(t->prepare_to_user);
    json_decref(t->prepare_to_roles);
    free(t->prepare_fan_out);
    free(t->prepare_webhook);
    for (size_t i = 0; i < t->nrequired; i++)
        free(t->required[i]);
    free(t->required);
    for (size_t i = 0; i < t->nactions; i++)
        action_free(&t->actions[i]);
    free(t->actions);
    mv__template_free_reach(t);
    expiry_free(t->expiry);
    mv__template_free_time(t);
    json_decref(t->source);
    free(t);
}

const mv_action_def *mv_template_action(const mv_template *t, const char *action_cd) {
    if (!t || !action_cd) return NULL;
    for (size_t i = 0; i < t->nactions; i++)
        if (strcmp(t->actions[i].action_cd, action_cd) == 0) return &t->actions[i];
    return NULL;
}

const char *mv_template_ui(const mv_template *t, mv_usertype usertype) {
    const json_t *ui = t ? t->ui_template : NULL;
    if (json_is_string(ui)) return json_string_value(ui);
    if (!json_is_object(ui)) return "";
    const char *keys[3] = {usertype == MV_SENDER ? "sender" : "receiver", "sender", "receiver"};
    for (int i = 0; i < 3; i++) {
        const char *s = json_string_value(json_object_get(ui, keys[i]));
        if (s && *s) return s;
    }
    return "";
}
