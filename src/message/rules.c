/* rules.c — who may see and run which action (SEMANTICS §1.4–1.5), and rendering of the parts of
 * a template a user sees.
 *
 * One rule set serves both listing (mv_actions_filter: the usertype flag, permission and
 * condition — not the user's relation to the message, as the reference) and running
 * (mv_action_allowed: the relation as well). Stored user ids are normalised as the reference's
 * normalizeStoredUserId: strings trimmed, "" and null mean "nobody", so a stored null never
 * matches a user literally called "null". Rendering is plain text (no HTML escaping). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/js_value.h"
#include "message/service.h"
#include "missive/base.h"
#include "missive/template.h"

/* ---- identity ------------------------------------------------------------------------------ */

static bool is_space(char c) { return c && strchr(" \t\n\v\f\r", c) != NULL; }

/* Trims s (len bytes) into buf; false when the result is empty or does not fit. */
static bool trim_into(const char *s, size_t len, char *buf, size_t size) {
    while (len && is_space(*s))
        s++, len--;
    while (len && is_space(s[len - 1]))
        len--;
    if (!len || len >= size) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return true;
}

bool mv_user_id(const mv_user *user, char *buf, size_t size) {
    if (!user || !user->id || !buf || !size) return false;
    return trim_into(user->id, strlen(user->id), buf, size);
}

/* normalizeStoredUserId: null/absent → none; string → trimmed, "" → none; a number → its text. */
static bool stored_id(const json_t *v, char *buf, size_t size) {
    if (json_is_string(v)) return trim_into(json_string_value(v), json_string_length(v), buf, size);
    if (json_is_integer(v))
        return (size_t)snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < size;
    return false;
}

static bool same_user(const mv_user *user, const json_t *stored) {
    char uid[512], sid[512];
    return mv_user_id(user, uid, sizeof uid) && stored_id(stored, sid, sizeof sid) &&
           strcmp(uid, sid) == 0;
}

bool mv_user_is_sender(const mv_user *user, const json_t *message) {
    return same_user(user, json_object_get(message, "fromUser"));
}

bool mv_user_is_receiver(const mv_user *user, const json_t *message) {
    if (mv__schedule_unsent(message)) return false; /* not sent (yet): its sender's only */
    if (same_user(user, json_object_get(message, "toUser"))) return true;
    if (!user) return false;
    size_t i;
    const json_t *role;
    json_array_foreach(json_object_get(message, "toRoles"), i, role) {
        const char *r = json_string_value(role);
        if (!r) continue;
        for (size_t j = 0; j < user->nroles; j++)
            if (user->roles[j] && strcmp(user->roles[j], r) == 0) return true;
    }
    return false;
}

bool mv_user_has_permission(const mv_user *user, const char *key) {
    if (!user || !key || !json_is_object(user->permissions)) return false;
    return mv_js_boolean(json_object_get(user->permissions, key));
}

/* ---- actions ------------------------------------------------------------------------------- */

/* The part of the rules listing and running share: permission, then condition. A condition
 * that stops at its work bound is false, and w hears why. */
static bool permission_and_condition(const mv_action_def *action, const mv_user *user,
                                     const json_t *message, const mv_condition_warning *w) {
    if (action->permission && !mv_user_has_permission(user, action->permission)) return false;
    if (!action->condition) return true;
    json_t *empty = message ? NULL : json_object();
    mv_err why = {0};
    bool ok = mv_logic_test(action->condition, message ? message : empty, &why);
    json_decref(empty);
    if (!ok && why.code == MV_PAYLOAD_TOO_LARGE && w && w->fn) w->fn(w->ctx, action, &why);
    return ok;
}

bool mv_action_allowed_warn(const mv_action_def *action, const mv_user *user, const json_t *message,
                            const mv_condition_warning *w) {
    if (!action) return false;
    bool related = (action->receiver && mv_user_is_receiver(user, message)) ||
                   (action->sender && mv_user_is_sender(user, message));
    return related && permission_and_condition(action, user, message, w);
}

bool mv_action_allowed(const mv_action_def *action, const mv_user *user, const json_t *message) {
    return mv_action_allowed_warn(action, user, message, NULL);
}

/* Renders tpl with data into obj[key] (plain text). */
static mv_code set_rendered(json_t *obj, const char *key, const mv_tpl *tpl, const json_t *data,
                            mv_err *err) {
    char *s;
    size_t len;
    mv_code rc = mv_tpl_render(tpl, data, MV_ESCAPE_NONE, &s, &len, err);
    if (rc != MV_OK) return rc;
    json_t *v = json_stringn(s, len);
    free(s);
    if (!v || json_object_set_new(obj, key, v) != 0)
        return mv_err_set(err, MV_NO_MEMORY, "out of memory rendering %s", key);
    return MV_OK;
}

static mv_code set_copy(json_t *obj, const char *key, const json_t *v, mv_err *err) {
    if (json_object_set_new(obj, key, json_deep_copy(v)) != 0)
        return mv_err_set(err, MV_NO_MEMORY, "out of memory copying %s", key);
    return MV_OK;
}

/* One action as the UI gets it: {actionCd, isDefault?, name, variant, confirmation?, payload?}. */
static mv_code render_action(const mv_action_def *a, const json_t *data, json_t **out,
                             mv_err *err) {
    json_t *o = json_object(), *conf = NULL;
    mv_code rc = MV_NO_MEMORY;
    if (!o) goto nomem;
    if (json_object_set_new(o, "actionCd", json_string(a->action_cd)) != 0) goto nomem;
    if (a->has_is_default && json_object_set_new(o, "isDefault", json_boolean(a->is_default)) != 0)
        goto nomem;
    if ((rc = set_rendered(o, "name", a->name, data, err)) != MV_OK) goto fail;
    if (json_object_set_new(o, "variant", json_string(a->variant)) != 0) goto nomem;
    if (a->has_confirmation) {
        if (!(conf = json_object())) goto nomem;
        if ((rc = set_rendered(conf, "title", a->confirm_title, data, err)) != MV_OK) goto fail;
        if ((rc = set_rendered(conf, "message", a->confirm_message, data, err)) != MV_OK) goto fail;
        if (a->confirm_notes_label &&
            (rc = set_rendered(conf, "notesLabel", a->confirm_notes_label, data, err)) != MV_OK)
            goto fail;
        if (a->confirm_require_notes &&
            (rc = set_copy(conf, "requireNotes", a->confirm_require_notes, err)) != MV_OK)
            goto fail;
        if (a->confirm_documents &&
            (rc = set_copy(conf, "documents", a->confirm_documents, err)) != MV_OK)
            goto fail;
        rc = json_object_set_new(o, "confirmation", conf) == 0 ? MV_OK : MV_NO_MEMORY;
        conf = NULL;
        if (rc != MV_OK) goto nomem;
    }
    if (a->payload && (rc = set_copy(o, "payload", a->payload, err)) != MV_OK) goto fail;
    *out = o;
    return MV_OK;
nomem:
    rc = mv_err_set(err, MV_NO_MEMORY, "out of memory rendering action \"%s\"", a->action_cd);
fail:
    json_decref(conf);
    json_decref(o);
    return rc;
}

mv_code mv_actions_filter(const mv_template *t, mv_usertype usertype, const mv_user *user,
                          const json_t *message, const json_t *data, json_t **out, mv_err *err) {
    return mv_actions_filter_warn(t, usertype, user, message, data, NULL, out, err);
}

mv_code mv_actions_filter_warn(const mv_template *t, mv_usertype usertype, const mv_user *user,
                               const json_t *message, const json_t *data,
                               const mv_condition_warning *w, json_t **out, mv_err *err) {
    *out = NULL;
    json_t *list = json_array(), *empty = data ? NULL : json_object();
    mv_code rc = MV_OK;
    if (!list || (!data && !empty)) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory listing actions");
        goto done;
    }
    for (size_t i = 0; t && i < t->nactions; i++) {
        const mv_action_def *a = &t->actions[i];
        if (!(usertype == MV_SENDER ? a->sender : a->receiver)) continue;
        if (!permission_and_condition(a, user, message, w)) continue;
        json_t *item = NULL;
        if ((rc = render_action(a, data ? data : empty, &item, err)) != MV_OK) goto done;
        if (json_array_append_new(list, item) != 0) {
            rc = mv_err_set(err, MV_NO_MEMORY, "out of memory listing actions");
            goto done;
        }
    }
    *out = list;
    list = NULL;
done:
    json_decref(list);
    json_decref(empty);
    return rc;
}

mv_code mv_content_render(const mv_content_tpl *c, const json_t *data, json_t **out, mv_err *err) {
    *out = NULL;
    json_t *o = json_object(), *empty = data ? NULL : json_object();
    mv_code rc = MV_OK;
    if (!o || (!data && !empty)) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory rendering content");
        goto done;
    }
    if (!data) data = empty;
    if ((rc = set_rendered(o, "title", c->title, data, err)) != MV_OK) goto done;
    if ((rc = set_rendered(o, "short", c->short_text, data, err)) != MV_OK) goto done;
    if ((rc = set_rendered(o, "long", c->long_text, data, err)) != MV_OK) goto done;
    *out = o;
    o = NULL;
done:
    json_decref(o);
    json_decref(empty);
    return rc;
}
