/* email.c — the reference's email rules (SEMANTICS §1.10) and the `"email"` config section.
 *
 * Who gets an email is decided when the message is created (the caller then writes an outbox row
 * in the same transaction); what is sent is decided here too, so the worker only delivers. The
 * rules are the reference's: a toUser, a non-empty trimmed receiver title not in the exclusion
 * list (trimmed, case-insensitive), and the longer of long/short as the body, measured in UTF-16
 * code units as JavaScript's `length` is. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "missive/deliver.h"

static bool is_blank(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* The trimmed span of s. */
static const char *trim_span(const char *s, size_t *len) {
    while (*s && is_blank((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_blank((unsigned char)s[n - 1]))
        n--;
    *len = n;
    return s;
}

static bool same_folded(const char *a, size_t an, const char *b, size_t bn) {
    if (an != bn) return false;
    for (size_t i = 0; i < an; i++)
        if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i])) return false;
    return true;
}

bool mv_email_should_send(const char *to_user, const char *receiver_title,
                          const json_t *exclusions) {
    size_t un, tn;
    if (!to_user || !receiver_title) return false;
    trim_span(to_user, &un);
    const char *t = trim_span(receiver_title, &tn);
    if (un == 0 || tn == 0) return false;
    size_t i;
    json_t *ex;
    json_array_foreach(exclusions, i, ex) {
        if (!json_is_string(ex)) continue;
        size_t en;
        const char *e = trim_span(json_string_value(ex), &en);
        if (same_folded(t, tn, e, en)) return false;
    }
    return true;
}

static size_t utf16_length(const char *s) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xC0) == 0x80) continue; /* continuation byte */
        n += (*p >= 0xF0) ? 2 : 1;         /* 4-byte sequences are surrogate pairs */
    }
    return n;
}

const char *mv_email_body(const char *long_text, const char *short_text) {
    const char *l = long_text ? long_text : "";
    const char *s = short_text ? short_text : "";
    return utf16_length(l) > utf16_length(s) ? l : s;
}

/* ---- config ------------------------------------------------------------------------------ */

void mv_email_settings_free(mv_email_settings *s) {
    if (!s) return;
    mv_directory_close(s->email.directory);
    json_decref(s->exclusions);
    free(s->smtp_url);
    free(s->from);
    free(s->webhook_url);
    free(s);
}

static mv_code string_member(const json_t *obj, const char *key, const char *where, bool required,
                             char **out, mv_err *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) return mv_err_set(err, MV_INVALID_CONFIG, "%s.%s is required", where, key);
        return MV_OK;
    }
    if (!json_is_string(v) || json_string_length(v) == 0)
        return mv_err_set(err, MV_INVALID_CONFIG, "%s.%s must be a non-empty string", where, key);
    if (!(*out = strdup(json_string_value(v))))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    return MV_OK;
}

static mv_code load_directory(const json_t *d, const char *base_dir, const mv_webhook_config *wh,
                              mv_directory **out, mv_err *err) {
    if (!json_is_object(d) || json_object_size(d) != 1)
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "email.directory must be {\"webhook\": URL} or {\"file\": PATH}");
    const char *url = mv_json_str(d, "webhook");
    const char *file = mv_json_str(d, "file");
    if (url) return mv_directory_open_webhook(url, wh, out, err);
    if (!file || !*file)
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "email.directory must be {\"webhook\": URL} or {\"file\": PATH}");
    char path[4096];
    if (file[0] != '/' && base_dir && *base_dir)
        snprintf(path, sizeof path, "%s/%s", base_dir, file);
    else
        mv_strlcpy(path, file, sizeof path);
    mv_code rc = mv_directory_open_file(path, out, err);
    if (rc) mv_err_prefix(err, "email.directory.file");
    return rc;
}

mv_code mv_email_settings_load(const json_t *section, const char *base_dir,
                               const mv_webhook_config *wh, mv_email_settings **out, mv_err *err) {
    *out = NULL;
    if (!json_is_object(section))
        return mv_err_set(err, MV_INVALID_CONFIG, "email must be an object");
    static const char *known[] = {"smtp", "from", "directory", "exclusions", "webhook"};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)section, key, v) {
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok |= strcmp(key, known[i]) == 0;
        if (!ok) return mv_err_set(err, MV_INVALID_CONFIG, "unknown key \"email.%.100s\"", key);
    }
    mv_email_settings *s = calloc(1, sizeof *s);
    if (!s) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc;
    if ((rc = string_member(section, "smtp", "email", false, &s->smtp_url, err)) ||
        (rc = string_member(section, "webhook", "email", false, &s->webhook_url, err)) ||
        (rc = string_member(section, "from", "email", s->smtp_url != NULL, &s->from, err)))
        goto fail;
    if (!s->smtp_url && !s->webhook_url) {
        rc = mv_err_set(err, MV_INVALID_CONFIG, "email needs \"smtp\" (or \"webhook\")");
        goto fail;
    }
    if (s->smtp_url && strncmp(s->smtp_url, "smtp://", 7) != 0 &&
        strncmp(s->smtp_url, "smtps://", 8) != 0) {
        rc = mv_err_set(err, MV_INVALID_CONFIG, "email.smtp must start with smtp:// or smtps://");
        goto fail;
    }
    if (s->webhook_url && strncmp(s->webhook_url, "http://", 7) != 0 &&
        strncmp(s->webhook_url, "https://", 8) != 0) {
        rc =
            mv_err_set(err, MV_INVALID_CONFIG, "email.webhook must start with http:// or https://");
        goto fail;
    }
    if (s->from && (!strchr(s->from, '@') || strpbrk(s->from, " <>\r\n,;"))) {
        rc = mv_err_set(err, MV_INVALID_CONFIG, "email.from must be a plain addr@domain address");
        goto fail;
    }
    json_t *d = json_object_get(section, "directory");
    if (!d) {
        rc = mv_err_set(err, MV_INVALID_CONFIG, "email.directory is required");
        goto fail;
    }
    if ((rc = load_directory(d, base_dir, wh, &s->email.directory, err))) goto fail;
    json_t *ex = json_object_get(section, "exclusions");
    if (ex) {
        size_t i;
        json_t *e;
        if (!json_is_array(ex)) {
            rc = mv_err_set(err, MV_INVALID_CONFIG, "email.exclusions must be an array of strings");
            goto fail;
        }
        json_array_foreach(ex, i, e) {
            if (!json_is_string(e)) {
                rc =
                    mv_err_set(err, MV_INVALID_CONFIG, "email.exclusions[%zu] must be a string", i);
                goto fail;
            }
        }
        s->exclusions = json_deep_copy(ex);
    } else {
        s->exclusions = json_array();
    }
    if (!s->exclusions) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
        goto fail;
    }
    s->email.smtp.url = s->smtp_url;
    s->email.smtp.from = s->from;
    s->email.webhook_url = s->webhook_url;
    *out = s;
    return MV_OK;
fail:
    mv_email_settings_free(s);
    return rc;
}
