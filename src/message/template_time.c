/* template_time.c — a template's "reminders" and "escalation": lists of steps each due afterMs
 * after the message became visible (docs/time.md). Both are read once at load so that a bad step
 * is named by `missive templates check`, never found when its timer fires. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/time_internal.h"
#include "missive/mustache.h"

static mv_code bad(mv_err *err, const char *source, const mv_template *t, const char *fmt,
                   const char *key, size_t i) {
    char what[400];
    snprintf(what, sizeof what, fmt, key, i);
    return mv_err_set(err, MV_INVALID_TEMPLATE, "%s: template \"%s\" %s", source, t->template_cd,
                      what);
}

static bool only_keys(const json_t *o, const char *a, const char *b) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (strcmp(key, a) != 0 && strcmp(key, b) != 0) return false;
    }
    return true;
}

/* The list under key (absent: *n = 0): an array of at most max objects with keys afterMs and
 * other, afterMs an integer from 1 to 365 days. */
static mv_code read_steps(const json_t *json, const char *key, const char *other, size_t max,
                          const char *source, const mv_template *t, size_t *n, mv_err *err) {
    const json_t *a = json_object_get(json, key);
    *n = 0;
    if (!a || json_is_null(a)) return MV_OK;
    if (!json_is_array(a) || json_array_size(a) > max)
        return bad(err, source, t, "%s must be an array of at most %zu steps", key, max);
    size_t i;
    const json_t *s;
    json_array_foreach(a, i, s) {
        if (!json_is_object(s) || !only_keys(s, "afterMs", other))
            return bad(err, source, t,
                       "%s[%zu] must be an object with afterMs and its one other key", key, i);
        const json_t *after = json_object_get(s, "afterMs");
        if (!json_is_integer(after) || json_integer_value(after) < 1 ||
            json_integer_value(after) > MV_MAX_DELAY_MS)
            return bad(err, source, t, "%s[%zu].afterMs must be an integer from 1 to 31536000000",
                       key, i);
    }
    *n = json_array_size(a);
    return MV_OK;
}

static mv_code read_reminders(const json_t *json, const char *source, mv_template *t, mv_err *err) {
    size_t n;
    mv_code rc =
        read_steps(json, "reminders", "title", MV_TEMPLATE_MAX_REMINDERS, source, t, &n, err);
    if (rc != MV_OK || n == 0) return rc;
    if (!(t->reminders = calloc(n, sizeof *t->reminders)))
        return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    const json_t *a = json_object_get(json, "reminders");
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(a, i), *title = json_object_get(s, "title");
        t->nreminders = i + 1; /* so a partly built list is freed too */
        t->reminders[i].after_ms = json_integer_value(json_object_get(s, "afterMs"));
        if (!json_is_string(title) || json_string_length(title) == 0)
            return bad(err, source, t, "%s[%zu].title must be a non-empty string", "reminders", i);
        mv_err e = {0};
        rc = mv_tpl_compile(json_string_value(title), json_string_length(title),
                            &t->reminders[i].title, &e);
        if (rc == MV_NO_MEMORY) return mv_err_set(err, rc, "%s: out of memory", source);
        if (rc != MV_OK)
            return bad(err, source, t, "%s[%zu].title is not valid Mustache", "reminders", i);
    }
    return MV_OK;
}

static mv_code read_escalation(const json_t *json, const char *source, mv_template *t,
                               mv_err *err) {
    size_t n;
    mv_code rc =
        read_steps(json, "escalation", "toRoles", MV_TEMPLATE_MAX_ESCALATIONS, source, t, &n, err);
    if (rc != MV_OK || n == 0) return rc;
    if (!(t->escalations = calloc(n, sizeof *t->escalations)))
        return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    const json_t *a = json_object_get(json, "escalation");
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(a, i), *roles = json_object_get(s, "toRoles");
        t->nescalations = i + 1;
        t->escalations[i].after_ms = json_integer_value(json_object_get(s, "afterMs"));
        bool ok =
            json_is_array(roles) && json_array_size(roles) >= 1 && json_array_size(roles) <= 16;
        size_t k;
        const json_t *r;
        json_array_foreach(roles, k, r) {
            ok = ok && json_is_string(r) && json_string_length(r) >= 1 &&
                 json_string_length(r) <= 255;
        }
        if (!ok)
            return bad(err, source, t,
                       "%s[%zu].toRoles must be an array of 1 to 16 non-empty role names",
                       "escalation", i);
        t->escalations[i].to_roles = json_deep_copy(roles);
        if (!t->escalations[i].to_roles)
            return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    }
    return MV_OK;
}

mv_code mv__template_read_time(const json_t *json, const char *source, mv_template *t,
                               mv_err *err) {
    mv_code rc = read_reminders(json, source, t, err);
    return rc == MV_OK ? read_escalation(json, source, t, err) : rc;
}

void mv__template_free_time(mv_template *t) {
    for (size_t i = 0; i < t->nreminders; i++)
        mv_tpl_free(t->reminders[i].title);
    free(t->reminders);
    for (size_t i = 0; i < t->nescalations; i++)
        json_decref(t->escalations[i].to_roles);
    free(t->escalations);
}
