/* js_value.c — the JavaScript coercions JsonLogic inherits from its reference implementation.
 *
 * Everything here is a pure function of its arguments (no globals, no locale beyond the C
 * default strtod uses), so the evaluator built on it is reentrant. Whitespace trimmed by
 * Number() and parseFloat() is the ASCII set; JS also trims a few Unicode spaces. */
#include "base/js_value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

/* ---- strings of values ------------------------------------------------------------------- */

/* Appends String(v); inside an array (and in join) null is the empty string, as in JS. */
static void sb_value(mv_strbuf *b, const json_t *v, bool in_array) {
    char num[32];
    switch (json_typeof(v)) {
    case JSON_NULL:
        if (!in_array) mv_strbuf_add(b, "null", 4);
        break;
    case JSON_TRUE: mv_strbuf_add(b, "true", 4); break;
    case JSON_FALSE: mv_strbuf_add(b, "false", 5); break;
    case JSON_INTEGER:
    case JSON_REAL:
        mv_js_format_number(json_number_value(v), num);
        mv_strbuf_add(b, num, strlen(num));
        break;
    case JSON_STRING: mv_strbuf_add(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY:
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) mv_strbuf_add(b, ",", 1);
            sb_value(b, json_array_get(v, i), true);
        }
        break;
    case JSON_OBJECT: mv_strbuf_add(b, "[object Object]", 15); break;
    }
}

char *mv_js_to_string(const json_t *v, size_t *len) {
    mv_strbuf b = {0};
    sb_value(&b, v ? v : json_null(), false);
    return mv_strbuf_take(&b, len);
}

char *mv_js_join(json_t *const *vals, size_t n, size_t *len) {
    mv_strbuf b = {0};
    for (size_t i = 0; i < n; i++)
        if (vals[i]) sb_value(&b, vals[i], true);
    return mv_strbuf_take(&b, len);
}

/* ES Number::toString: shortest round-trip digits, laid out in plain or exponent form. */
void mv_js_format_number(double d, char out[32]) {
    if (isnan(d)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(d)) {
        strcpy(out, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (d == 0) {
        strcpy(out, "0"); /* -0 too */
        return;
    }
    char *o = out;
    if (d < 0) {
        *o++ = '-';
        d = -d;
    }
    char tmp[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    char digits[24] = {0}; /* %e always prints a digit; zeroed as snprintf's output is unseen */
    int k = 0;
    const char *s = tmp;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[k++] = *s;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    int n = atoi(s + 1) + 1; /* the decimal point sits after n digits */
    if (k <= n && n <= 21) {
        memcpy(o, digits, (size_t)k);
        o += k;
        for (int i = k; i < n; i++)
            *o++ = '0';
    } else if (0 < n && n <= 21) {
        memcpy(o, digits, (size_t)n);
        o += n;
        *o++ = '.';
        memcpy(o, digits + n, (size_t)(k - n));
        o += k - n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -n; i++)
            *o++ = '0';
        memcpy(o, digits, (size_t)k);
        o += k;
    } else {
        *o++ = digits[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(k - 1));
            o += k - 1;
        }
        o += sprintf(o, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
    }
    *o = '\0';
}

/* ---- numbers of values ------------------------------------------------------------------- */

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Length of the longest prefix of s that is a JS StrDecimalLiteral:
 * [+-]? (Infinity | digits [. digits?] | . digits) ([eE] [+-]? digits)?  — 0 when none. */
static size_t scan_decimal(const char *s, size_t n, bool *infinite) {
    size_t i = 0, int_digits = 0, frac_digits = 0, end;
    *infinite = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (n - i >= 8 && memcmp(s + i, "Infinity", 8) == 0) {
        *infinite = true;
        return i + 8;
    }
    for (; i < n && is_digit(s[i]); i++)
        int_digits++;
    if (i < n && s[i] == '.') {
        size_t j = i + 1;
        for (; j < n && is_digit(s[j]); j++)
            frac_digits++;
        if (int_digits || frac_digits) i = j;
    }
    if (!int_digits && !frac_digits) return 0;
    end = i;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1, exp_digits = 0;
        if (j < n && (s[j] == '+' || s[j] == '-')) j++;
        for (; j < n && is_digit(s[j]); j++)
            exp_digits++;
        if (exp_digits) end = j;
    }
    return end;
}

/* The value of s[0..n), a prefix scan_decimal accepted. */
static double decimal_value(const char *s, size_t n, bool infinite) {
    if (infinite) return s[0] == '-' ? -INFINITY : INFINITY;
    char small[64];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) return NAN;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double d = strtod(buf, NULL);
    if (buf != small) free(buf);
    return d;
}

/* JS StringToNumber. */
static double string_to_number(const char *s, size_t n) {
    while (n && is_space(*s))
        s++, n--;
    while (n && is_space(s[n - 1]))
        n--;
    if (n == 0) return 0;
    if (n > 2 && s[0] == '0' && strchr("xXoObB", s[1])) {
        int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
        double d = 0;
        for (size_t i = 2; i < n; i++) {
            char c = s[i];
            int v = is_digit(c)              ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : 99;
            if (v >= base) return NAN;
            d = d * base + v;
        }
        return d;
    }
    bool infinite;
    size_t m = scan_decimal(s, n, &infinite);
    return m == n ? decimal_value(s, m, infinite) : NAN;
}

double mv_js_to_number(const json_t *v) {
    if (!v) return 0;
    switch (json_typeof(v)) {
    case JSON_NULL:
    case JSON_FALSE: return 0;
    case JSON_TRUE: return 1;
    case JSON_INTEGER:
    case JSON_REAL: return json_number_value(v);
    case JSON_STRING: return string_to_number(json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        size_t n;
        char *s = mv_js_to_string(v, &n);
        double d = s ? string_to_number(s, n) : NAN;
        free(s);
        return d;
    }
    case JSON_OBJECT: break;
    }
    return NAN;
}

double mv_js_parse_float(const json_t *v) {
    if (json_is_number(v)) return json_number_value(v);
    size_t n;
    char *s = mv_js_to_string(v, &n);
    if (!s) return NAN;
    const char *p = s;
    while (n && is_space(*p))
        p++, n--;
    bool infinite;
    size_t m = scan_decimal(p, n, &infinite);
    double d = m ? decimal_value(p, m, infinite) : NAN;
    free(s);
    return d;
}

json_t *mv_js_number(double d) {
    if (!isfinite(d)) return json_null();
    if (d == trunc(d) && fabs(d) <= 9007199254740992.0) return json_integer((json_int_t)d);
    return json_real(d);
}

/* ---- truthiness and comparison ----------------------------------------------------------- */

bool mv_js_boolean(const json_t *v) { return json_is_array(v) || mv_js_truthy(v); }

bool mv_js_truthy(const json_t *v) {
    if (!v) return false;
    switch (json_typeof(v)) {
    case JSON_NULL:
    case JSON_FALSE: return false;
    case JSON_TRUE: return true;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0 && !isnan(json_real_value(v));
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_OBJECT: return true;
    }
    return false;
}

/* The JS type of a value: integers and reals are both "number". */
typedef enum { K_NULL, K_BOOL, K_NUMBER, K_STRING, K_ARRAY, K_OBJECT } js_kind;

static js_kind kind_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return K_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return K_BOOL;
    case JSON_INTEGER:
    case JSON_REAL: return K_NUMBER;
    case JSON_STRING: return K_STRING;
    case JSON_ARRAY: return K_ARRAY;
    case JSON_OBJECT: return K_OBJECT;
    }
    return K_NULL;
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c) return c;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

bool mv_js_strict_equal(const json_t *a, const json_t *b) {
    if (!a) a = json_null();
    if (!b) b = json_null();
    if (a == b) return true;
    js_kind k = kind_of(a);
    if (k != kind_of(b)) return false;
    switch (k) {
    case K_NULL: return true;
    case K_BOOL: return json_is_true(a) == json_is_true(b);
    case K_NUMBER: return json_number_value(a) == json_number_value(b);
    case K_STRING:
        return bytes_cmp(json_string_value(a), json_string_length(a), json_string_value(b),
                         json_string_length(b)) == 0;
    case K_ARRAY:
    case K_OBJECT: return false; /* distinct objects */
    }
    return false;
}

/* A primitive after JS ToPrimitive (and ToNumber for booleans): a string or a number. */
typedef struct {
    bool is_string;
    const char *s;
    size_t n;
    char *owned;
    double num;
} primitive;

static void to_primitive(const json_t *v, primitive *p) {
    memset(p, 0, sizeof *p);
    if (json_is_string(v)) {
        p->is_string = true;
        p->s = json_string_value(v);
        p->n = json_string_length(v);
    } else if (json_is_array(v) || json_is_object(v)) {
        p->is_string = true;
        p->owned = mv_js_to_string(v, &p->n);
        p->s = p->owned ? p->owned : "";
        if (!p->owned) p->n = 0;
    } else {
        p->num = mv_js_to_number(v);
    }
}

static double primitive_number(const primitive *p) {
    return p->is_string ? string_to_number(p->s, p->n) : p->num;
}

bool mv_js_loose_equal(const json_t *a, const json_t *b) {
    if (!a) a = json_null();
    if (!b) b = json_null();
    js_kind ka = kind_of(a), kb = kind_of(b);
    if (ka == kb) return mv_js_strict_equal(a, b);
    if (ka == K_NULL || kb == K_NULL) return false;
    if ((ka == K_ARRAY || ka == K_OBJECT) && (kb == K_ARRAY || kb == K_OBJECT)) return false;
    primitive pa, pb;
    to_primitive(a, &pa);
    to_primitive(b, &pb);
    bool eq;
    if (pa.is_string && pb.is_string)
        eq = bytes_cmp(pa.s, pa.n, pb.s, pb.n) == 0;
    else
        eq = primitive_number(&pa) == primitive_number(&pb);
    free(pa.owned);
    free(pb.owned);
    return eq;
}

bool mv_js_less(const json_t *a, const json_t *b, bool or_equal) {
    if (!a) a = json_null();
    if (!b) b = json_null();
    primitive pa, pb;
    to_primitive(a, &pa);
    to_primitive(b, &pb);
    bool r;
    if (pa.is_string && pb.is_string) {
        int c = bytes_cmp(pa.s, pa.n, pb.s, pb.n);
        r = or_equal ? c <= 0 : c < 0;
    } else {
        double x = primitive_number(&pa), y = primitive_number(&pb);
        r = or_equal ? x <= y : x < y; /* false when either is NaN */
    }
    free(pa.owned);
    free(pb.owned);
    return r;
}
