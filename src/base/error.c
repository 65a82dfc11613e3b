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
