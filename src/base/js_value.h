/* base/js_value.h — JavaScript value semantics over jansson values, for the JsonLogic evaluator.
 *
 * JsonLogic is defined by its JavaScript reference implementation, so its operators inherit JS
 * coercions: ToNumber, parseFloat, ToString (number printing included), truthiness, loose (==)
 * and strict (===) equality and relational comparison. JSON has no NaN or Infinity, so numbers
 * that would be non-finite become null when turned back into JSON (what JSON.stringify does).
 * Arrays and objects compare by identity, as in JS: two distinct json_t never are ===. */
#ifndef MISSIVE_BASE_JS_VALUE_H
#define MISSIVE_BASE_JS_VALUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* JsonLogic truthiness: JS truthiness, except that an empty array is falsy. NULL is falsy. */
bool mv_js_truthy(const json_t *v);
/* Plain JavaScript truthiness (Boolean(v)): objects and arrays are truthy even when empty.
 * NULL (undefined) is falsy. */
bool mv_js_boolean(const json_t *v);

/* JS Number(v): null → 0, booleans → 0/1, strings parsed strictly (trimmed; "" → 0; hex, octal,
 * binary prefixes; "Infinity"), arrays through their string form, objects → NaN. */
double mv_js_to_number(const json_t *v);

/* JS parseFloat(v): the longest decimal prefix of String(v) after leading blanks, else NaN. */
double mv_js_parse_float(const json_t *v);

/* A JSON number for d: an integer when d is integral and exactly representable (|d| <= 2^53), a
 * real otherwise, null when d is NaN or infinite. New reference; NULL only when out of memory. */
json_t *mv_js_number(double d);

/* JS String(d) into out ("1", "0.5", "1e+21", "1e-7", "NaN", "-Infinity"). */
void mv_js_format_number(double d, char out[32]);

/* JS String(v), malloc'd and NUL-terminated (the length in *len when len is not NULL): null →
 * "null", arrays joined with "," (null elements empty), objects "[object Object]". NULL when out
 * of memory. */
char *mv_js_to_string(const json_t *v, size_t *len);

/* JS [v0, v1, ...].join(""): like mv_js_to_string on each value, except null becomes "". */
char *mv_js_join(json_t *const *vals, size_t n, size_t *len);

/* JS a === b and a == b. */
bool mv_js_strict_equal(const json_t *a, const json_t *b);
bool mv_js_loose_equal(const json_t *a, const json_t *b);

/* JS a < b (or_equal: a <= b). Strings compare by bytes (UTF-8 order: code points, which differs
 * from JS's UTF-16 order only between astral characters and U+E000..U+FFFF). */
bool mv_js_less(const json_t *a, const json_t *b, bool or_equal);

#endif
