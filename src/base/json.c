/* json.c — jansson with the strictness missive wants at its boundaries: a whole buffer is exactly
 * one value, errors name line and column, and a canonical form (sorted keys, compact) gives stable
 * fingerprints and digests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "missive/base.h"

mv_code mv_json_parse(const char *buf, size_t len, json_t **out, mv_err *err) {
    json_error_t je;
    *out = NULL;
    json_t *v = json_loadb(buf, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return mv_err_set(err, MV_INVALID_JSON, "invalid JSON at line %d, column %d: %s", je.line,
                          je.column, je.text);
    *out = v;
    return MV_OK;
}

mv_code mv_json_load_file(const char *path, json_t **out, mv_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mv_err_set(err, MV_IO, "%s: cannot open file", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    mv_code rc = mv_json_parse(buf ? buf : "", len, out, err);
    free(buf);
    if (rc != MV_OK) mv_err_prefix(err, "%s", path);
    return rc;
}

/* ---- the compact writer -------------------------------------------------------------------
 * Writes exactly what json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) writes, without its costs:
 * jansson's dump checks for cycles by printing every container's address into a key of a hash
 * table (a snprintf, an allocation and a free per object and array) and calls back per token,
 * while its buffer grows from 16 bytes. The rules copied from jansson 2.14's dump.c: keys in the
 * object's order; strings escaped as \" \\ \b \f \n \r \t and \u%04X for other control
 * characters, everything else (including '/' and non-ASCII) verbatim, and a string or key that is
 * not valid UTF-8 fails the whole dump; integers as %lld; reals as %.17g with ".0" added when
 * neither '.' nor 'e' appears and the exponent without '+' or leading zeros. Nesting deeper than
 * MAX_DEPTH fails (a cycle, which jansson also refuses). The canonical form sorts each object's
 * keys as JSON_SORT_KEYS does (bytewise, a prefix first). */

#define MAX_DEPTH 2048

/* The length of the valid UTF-8 sequence that starts at p (its lead byte ≥ 0x80) and ends before
 * end, or 0 when it is not one: the same rules as jansson's utf8_iterate (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end) {
    unsigned c = *p, min;
    int more;
    if (c >= 0xC2 && c <= 0xDF)
        more = 1, min = 0x80, c &= 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        more = 2, min = 0x800, c &= 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        more = 3, min = 0x10000, c &= 0x07;
    else
        return 0;
    if (end - p <= more) return 0;
    for (int i = 1; i <= more; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return (size_t)more + 1;
}

bool mv_json_write_string(mv_strbuf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
    mv_strbuf_add(b, "\"", 1);
    while (p < end) {
        unsigned c = *p;
        if (c >= 0x80) {
            size_t len = utf8_sequence(p, end);
            if (!len) return false;
            p += len;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            p++;
            continue;
        }
        mv_strbuf_add(b, (const char *)run, (size_t)(p - run));
        switch (c) {
        case '"': mv_strbuf_add(b, "\\\"", 2); break;
        case '\\': mv_strbuf_add(b, "\\\\", 2); break;
        case '\b': mv_strbuf_add(b, "\\b", 2); break;
        case '\f': mv_strbuf_add(b, "\\f", 2); break;
        case '\n': mv_strbuf_add(b, "\\n", 2); break;
        case '\r': mv_strbuf_add(b, "\\r", 2); break;
        case '\t': mv_strbuf_add(b, "\\t", 2); break;
        default: {
            static const char hex[] = "0123456789ABCDEF";
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            mv_strbuf_add(b, u, 6);
        }
        }
        run = ++p;
    }
    mv_strbuf_add(b, (const char *)run, (size_t)(p - run));
    return mv_strbuf_add(b, "\"", 1);
}

bool mv_json_write_real(mv_strbuf *b, double d, int digits) {
    char num[64];
    int n = snprintf(num, sizeof num, "%.*g", digits, d);
    if (n < 0 || (size_t)n >= sizeof num - 3) return false;
    if (!strchr(num, '.') && !strchr(num, 'e')) {
        memcpy(num + n, ".0", 3);
        n += 2;
    }
    char *e = strchr(num, 'e');
    if (e) {
        char *start = e + 1, *end = start + 1;
        if (*start == '-') start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, strlen(end) + 1);
            n -= (int)(end - start);
        }
    }
    return mv_strbuf_add(b, num, (size_t)n);
}

typedef struct {
    const char *key;
    size_t len;
    json_t *value;
} member;

/* jansson's compare_keys: bytes, then the shorter key first */
static int cmp_members(const void *a, const void *b) {
    const member *x = a, *y = b;
    int r = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);
    return r ? r : (x->len > y->len) - (x->len < y->len);
}

static bool write_value(mv_strbuf *b, const json_t *v, int depth, bool sorted);

static bool write_sorted_object(mv_strbuf *b, const json_t *v, int depth) {
    size_t n = json_object_size(v), i = 0;
    member stack[16], *m = n <= 16 ? stack : malloc(n * sizeof *m);
    if (!m) return false;
    for (void *it = json_object_iter((json_t *)v); it && i < n;
         it = json_object_iter_next((json_t *)v, it), i++)
        m[i] = (member){json_object_iter_key(it), json_object_iter_key_len(it),
                        json_object_iter_value(it)};
    qsort(m, i, sizeof *m, cmp_members);
    bool ok = mv_strbuf_add(b, "{", 1);
    for (size_t k = 0; ok && k < i; k++) {
        if (k) mv_strbuf_add(b, ",", 1);
        ok = mv_json_write_string(b, m[k].key, m[k].len) && mv_strbuf_add(b, ":", 1) &&
             write_value(b, m[k].value, depth + 1, true);
    }
    if (m != stack) free(m);
    return ok && mv_strbuf_add(b, "}", 1);
}

static bool write_value(mv_strbuf *b, const json_t *v, int depth, bool sorted) {
    if (depth > MAX_DEPTH) return false;
    switch (json_typeof(v)) {
    case JSON_NULL: return mv_strbuf_add(b, "null", 4);
    case JSON_TRUE: return mv_strbuf_add(b, "true", 4);
    case JSON_FALSE: return mv_strbuf_add(b, "false", 5);
    case JSON_INTEGER: {
        char num[32];
        int n = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return mv_strbuf_add(b, num, (size_t)n);
    }
    case JSON_REAL: return mv_json_write_real(b, json_real_value(v), 17);
    case JSON_STRING: return mv_json_write_string(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        mv_strbuf_add(b, "[", 1);
        for (size_t i = 0; i < n; i++) {
            if (i) mv_strbuf_add(b, ",", 1);
            if (!write_value(b, json_array_get(v, i), depth + 1, sorted)) return false;
        }
        return mv_strbuf_add(b, "]", 1);
    }
    case JSON_OBJECT: {
        if (sorted) return write_sorted_object(b, v, depth);
        mv_strbuf_add(b, "{", 1);
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first) mv_strbuf_add(b, ",", 1);
            first = false;
            if (!mv_json_write_string(b, json_object_iter_key(it), json_object_iter_key_len(it)))
                return false;
            mv_strbuf_add(b, ":", 1);
            if (!write_value(b, json_object_iter_value(it), depth + 1, false)) return false;
        }
        return mv_strbuf_add(b, "}", 1);
    }
    }
    return false;
}

static bool write_top(mv_strbuf *b, const json_t *v, bool sorted) {
    size_t len = b->len;
    if (v && write_value(b, v, 0, sorted) && !b->oom) return true;
    if (!b->oom) {
        b->len = len; /* nothing of a failed value stays */
        if (b->data && !b->count_only) b->data[len] = '\0';
    }
    return false;
}

bool mv_json_write(mv_strbuf *b, const json_t *v) { return write_top(b, v, false); }

static char *dump(const json_t *v, bool sorted) {
    mv_strbuf b = {.data = malloc(256), .cap = 256};
    if (!b.data) return NULL;
    b.data[0] = '\0';
    if (!write_top(&b, v, sorted)) {
        free(b.data);
        return NULL;
    }
    return mv_strbuf_take(&b, NULL);
}

char *mv_json_compact(const json_t *v) { return dump(v, false); }

/* json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY), byte for byte: fingerprints
 * stored by earlier versions must still match. */
char *mv_json_canonical(const json_t *v) { return dump(v, true); }

void mv_json_fingerprint(const json_t *v, char out[65]) {
    char *s = mv_json_canonical(v);
    mv_sha256_hex(s ? s : "", s ? strlen(s) : 0, out);
    free(s);
}

const char *mv_json_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(obj, key));
}

json_t *mv_json_path(const json_t *root, const char *path) {
    const json_t *cur = root;
    const char *p = path;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, p, n);
        } else if (json_is_array(cur)) {
            char *end;
            char idx[32];
            if (n == 0 || n >= sizeof idx) return NULL;
            memcpy(idx, p, n);
            idx[n] = '\0';
            long i = strtol(idx, &end, 10);
            if (*end || i < 0) return NULL;
            cur = json_array_get(cur, (size_t)i);
        } else {
            return NULL;
        }
        p = dot ? dot + 1 : p + n;
    }
    return (json_t *)cur;
}

/* ---- stored JSON text, written as it is ----------------------------------------------------
 * A stored column holds what mv_json_write wrote, so parsing it into jansson and writing it again
 * gives the same bytes: the scan below checks that the text is exactly in that form — one value,
 * no whitespace, strings escaped as the writer escapes them and valid UTF-8, integers that fit,
 * reals as %.17g writes them, no key twice in an object — and then copies it. Anything it is not
 * sure of (another escape, deep nesting, an object of many keys, text written by someone else)
 * takes the slow path, json_loads and mv_json_write, so the bytes are the same either way. */

#define STORED_MAX_DEPTH 64
#define STORED_MAX_KEYS 64

typedef struct {
    const char *p, *end;
} stored_scan;

static bool scan_value(stored_scan *s, int depth);

/* One string in the writer's form; the opening quote at s->p. */
static bool scan_string(stored_scan *s) {
    const unsigned char *p = (const unsigned char *)s->p + 1, *end = (const unsigned char *)s->end;
    while (p < end) {
        unsigned c = *p;
        if (c == '"') {
            s->p = (const char *)p + 1;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            if (end - p < 2) return false;
            switch (p[1]) {
            case '"':
            case '\\':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't': p += 2; continue;
            case 'u': {
                /* only \u00XX (upper-case hex) for a control character without a short form;
                 * \u0000 is refused by json_loads, so it takes the slow path too */
                static const char hex[] = "0123456789ABCDEF";
                if (end - p < 6 || p[2] != '0' || p[3] != '0' || (p[4] != '0' && p[4] != '1'))
                    return false;
                const char *h = memchr(hex, p[5], 16);
                if (!h || !p[5]) return false;
                unsigned v = (unsigned)(p[4] - '0') * 16 + (unsigned)(h - hex);
                if (v == 0 || v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t')
                    return false;
                p += 6;
                continue;
            }
            default: return false;
            }
        }
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t len = utf8_sequence(p, end);
        if (!len) return false;
        p += len;
    }
    return false;
}

static bool scan_number(stored_scan *s) {
    const char *start = s->p, *p = s->p;
    bool real = false;
    while (p < s->end && strchr("+-0123456789.eE", *p) && *p) {
        if (*p == '.' || *p == 'e' || *p == 'E') real = true;
        p++;
    }
    size_t n = (size_t)(p - start);
    s->p = p;
    if (!real) {
        /* -?(0|[1-9][0-9]*), at most 18 digits (always fits), not -0 */
        const char *d = start + (*start == '-');
        size_t digits = (size_t)(p - d);
        if (digits == 0 || digits > 18) return false;
        for (const char *q = d; q < p; q++)
            if (*q < '0' || *q > '9') return false;
        return (*d != '0' || digits == 1) && !(*start == '-' && *d == '0');
    }
    /* a real: the bytes the writer gives its value, or the slow path */
    char num[64];
    if (n >= 40 || (*start != '-' && (*start < '0' || *start > '9'))) return false;
    memcpy(num, start, n);
    num[n] = '\0';
    char *endp;
    double d = strtod(num, &endp);
    if (*endp) return false;
    char out[64] = "";
    mv_strbuf b = {.data = out, .cap = sizeof out}; /* never grows: a real is under 32 bytes */
    if (!mv_json_write_real(&b, d, 17) || b.data != out) return false;
    return b.len == n && memcmp(b.data, start, n) == 0;
}

static bool scan_literal(stored_scan *s, const char *word, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) return false;
    s->p += n;
    return true;
}

static bool scan_value(stored_scan *s, int depth) {
    if (s->p >= s->end || depth > STORED_MAX_DEPTH) return false;
    switch (*s->p) {
    case '"': return scan_string(s);
    case 't': return scan_literal(s, "true", 4);
    case 'f': return scan_literal(s, "false", 5);
    case 'n': return scan_literal(s, "null", 4);
    case '[':
        s->p++;
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return true;
        }
        for (;;) {
            if (!scan_value(s, depth + 1) || s->p >= s->end) return false;
            if (*s->p == ']') {
                s->p++;
                return true;
            }
            if (*s->p++ != ',') return false;
        }
    case '{': {
        s->p++;
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return true;
        }
        /* the keys so far, as written: one text per string in the writer's form, so equal
         * bytes mean an equal key */
        struct {
            const char *k;
            size_t n;
        } keys[STORED_MAX_KEYS];
        size_t nkeys = 0;
        for (;;) {
            if (s->p >= s->end || *s->p != '"' || nkeys == STORED_MAX_KEYS) return false;
            const char *k = s->p;
            if (!scan_string(s)) return false;
            size_t kn = (size_t)(s->p - k);
            for (size_t i = 0; i < nkeys; i++)
                if (keys[i].n == kn && memcmp(keys[i].k, k, kn) == 0) return false;
            keys[nkeys].k = k;
            keys[nkeys++].n = kn;
            if (s->p >= s->end || *s->p++ != ':') return false;
            if (!scan_value(s, depth + 1) || s->p >= s->end) return false;
            if (*s->p == '}') {
                s->p++;
                return true;
            }
            if (*s->p++ != ',') return false;
        }
    }
    default: return scan_number(s);
    }
}

bool mv_json_stored_is_written(const char *text, size_t n) {
    stored_scan s = {text, text + n};
    return scan_value(&s, 0) && s.p == s.end;
}

bool mv_json_write_stored(mv_strbuf *b, const char *text, const char *fallback) {
    if (text) {
        size_t n = strlen(text);
        if (mv_json_stored_is_written(text, n)) return mv_strbuf_add(b, text, n);
        json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
        if (v) {
            bool ok = mv_json_write(b, v);
            json_decref(v);
            if (ok || b->oom) return ok;
        }
    }
    return mv_strbuf_add(b, fallback, strlen(fallback));
}
