/* error.c — the code table and the helpers that fill mv_err. Filling an error never allocates. */
#include "missive/error.h"

#include <stdio.h>
#include <string.h>

#undef mv_err_set /* only the analyzer's model of it (error.h); this file defines the function */

static const struct {
    const char *name;
    int status;
} code_table[] = {
#define MV_X_ROW(e, name, status) {name, status},
    MV_CODE_TABLE(MV_X_ROW)
#undef MV_X_ROW
};

void mv_err_clear(mv_err *err) {
    if (err) memset(err, 0, sizeof *err);
}

mv_code mv_err_setv(mv_err *err, mv_code code, const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return code;
}

mv_code mv_err_set(mv_err *err, mv_code code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mv_err_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

mv_code mv_err_copy(mv_err *dst, const mv_err *src) {
    if (!src) return MV_OK;
    if (dst && dst != src) memcpy(dst, src, sizeof *dst);
    return src->code;
}

void mv_err_prefix(mv_err *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[256], old[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof old);
    /* the prefix always fits; the old message keeps what room is left */
    int n = snprintf(err->message, sizeof err->message, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof err->message)
        mv_strlcpy(err->message + n, old, sizeof err->message - (size_t)n);
}

const char *mv_code_name(mv_code code) {
    if ((int)code < 0 || code >= MV_CODE_COUNT) return "internal";
    return code_table[code].name;
}

int mv_code_http_status(mv_code code) {
    if ((int)code < 0 || code >= MV_CODE_COUNT) return 500;
    return code_table[code].status;
}

void mv_strlcpy(char *dst, const char *src, size_t size) {
    if (!size) return;
    size_t n = src ? strlen(src) : 0;
    if (n >= size) n = size - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

const char *mv_code_public_message(mv_code code) {
    switch (code) {
    case MV_PREPARE_FAILED:
    case MV_PREPARE_UNAVAILABLE: return "prepare failed";
    case MV_PAYMENT_FAILED:
    case MV_PAYMENT_UNAVAILABLE: return "payment session creation failed";
    case MV_PAYMENT_COMPENSATION_FAILED: return "payment session compensation failed during expire";
    case MV_UPSTREAM_FAILED: return "an upstream call failed";
    case MV_STORE_UNAVAILABLE: return "the store is unavailable; try again";
    case MV_ACTION_NEEDS_REVIEW: return "the action's saga needs review by an operator";
    default: return NULL;
    }
}

bool mv_code_is_definitive(mv_code code) {
    switch (code) {
    case MV_PREPARE_FAILED:
    case MV_PAYMENT_FAILED:
    case MV_INVALID_ARGUMENT:
    case MV_INVALID_TEMPLATE:
    case MV_PAYLOAD_TOO_LARGE: return true;
    default: return false;
    }
}

static bool url_start(const char *p) {
    static const char *const schemes[] = {"http://",       "https://", "postgres://",
                                          "postgresql://", "smtp://",  "smtps://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(p, schemes[i], strlen(schemes[i])) == 0) return true;
    return false;
}

static bool url_end(char c) {
    return c == '\0' || c == ' ' || c == '"' || c == '\'' || c == '\t' || c == '\n' || c == '>' ||
           c == ')' || c == ',';
}

void mv_redact_urls(const char *text, char *out, size_t size) {
    if (!size) return;
    size_t n = 0;
    const char *p = text ? text : "";
    while (*p && n + 1 < size) {
        if (!url_start(p)) {
            out[n++] = *p++;
            continue;
        }
        const char *scheme_end = strstr(p, "://") + 3, *end = scheme_end;
        while (!url_end(*end))
            end++;
        const char *at = NULL; /* userinfo ends at the last '@' before the path */
        for (const char *q = scheme_end; q < end && *q != '/' && *q != '?' && *q != '#'; q++)
            if (*q == '@') at = q;
        for (const char *q = p; q < scheme_end && n + 1 < size; q++)
            out[n++] = *q;
        for (const char *q = at ? at + 1 : scheme_end; q < end && *q != '?' && *q != '#'; q++)
            if (n + 1 < size) out[n++] = *q;
        p = end;
    }
    out[n] = '\0';
}
