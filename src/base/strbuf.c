/* strbuf.c — see strbuf.h. */
#include "base/strbuf.h"

#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL. */
static bool grow(mv_strbuf *b, size_t n) {
    if (b->oom) return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->oom = true;
            return false;
        }
        b->data = grown;
        b->cap = cap;
    }
    return true;
}

bool mv_strbuf_add(mv_strbuf *b, const char *s, size_t n) {
    if (b->count_only) {
        b->len += n;
        return true;
    }
    if (!grow(b, n)) return false;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool mv_strbuf_reserve(mv_strbuf *b, size_t n, char **at) {
    *at = NULL;
    if (b->count_only) return false; /* nothing to write into */
    if (!grow(b, n)) return false;
    *at = b->data + b->len;
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool mv_strbuf_adds(mv_strbuf *b, const char *s) { return mv_strbuf_add(b, s, strlen(s)); }

char *mv_strbuf_take(mv_strbuf *b, size_t *len) {
    mv_strbuf_add(b, "", 0); /* an empty result still needs its buffer */
    char *out = b->oom ? NULL : b->data;
    if (b->oom) free(b->data);
    if (len) *len = out ? b->len : 0;
    *b = (mv_strbuf){0};
    return out;
}
