/* base/strbuf.h — a growable, always NUL-terminated byte buffer. An allocation failure is sticky
 * (oom): later appends do nothing, so a caller checks once at the end. */
#ifndef MISSIVE_BASE_STRBUF_H
#define MISSIVE_BASE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct mv_strbuf {
    char *data; /* NULL until the first append */
    size_t len, cap;
    bool oom;
    bool count_only; /* appends only add to len: measures what would be written, stores nothing */
} mv_strbuf;

/* Appends n bytes (doubling the capacity as needed). Returns false when out of memory. */
bool mv_strbuf_add(mv_strbuf *b, const char *s, size_t n);
/* Appends n bytes the caller writes at *at (for writers that serialise in place). Returns false
 * (and *at = NULL) when out of memory. */
bool mv_strbuf_reserve(mv_strbuf *b, size_t n, char **at);
/* Appends a NUL-terminated string. */
bool mv_strbuf_adds(mv_strbuf *b, const char *s);
/* The NUL-terminated contents (also for an empty buffer), which the caller now owns, or NULL
 * after an allocation failure (the buffer is freed). *len (may be NULL) gets the length. The
 * buffer is left empty. */
char *mv_strbuf_take(mv_strbuf *b, size_t *len);

/* Appends v as json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) would write it (base/json.c).
 * False when v cannot be written (not UTF-8, nested too deep) or out of memory; then nothing of
 * v was appended. */
typedef struct json_t json_t;
bool mv_json_write(mv_strbuf *b, const json_t *v);
/* Appends the n bytes at s as a JSON string, escaped as jansson escapes it. False when they are
 * not valid UTF-8 (json_string refuses those) or out of memory; then part of it may have been
 * appended. */
bool mv_json_write_string(mv_strbuf *b, const char *s, size_t n);
/* Appends d as jansson writes a real with `digits` significant digits (17: its default): always
 * with a '.' or an exponent, the exponent without leading zeros. False when out of memory. */
bool mv_json_write_real(mv_strbuf *b, double d, int digits);
/* Appends what mv_json_write would write for json_loads(text, JSON_DECODE_ANY) — for a stored
 * JSON column (NUL-terminated text), without the round trip when the text is already in the
 * writer's form (then it is copied as it is) — or the JSON text fallback when text is NULL or
 * does not parse. False only when out of memory. */
bool mv_json_write_stored(mv_strbuf *b, const char *text, const char *fallback);
/* True when the n bytes at text are exactly what mv_json_write writes for the value they parse
 * to (so they can be copied instead of parsed and written again). False when unsure. */
bool mv_json_stored_is_written(const char *text, size_t n);

#endif
