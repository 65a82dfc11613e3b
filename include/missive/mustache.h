/* missive/mustache.h — our own Mustache renderer with the Handlebars blocks the reference used.
 *
 * A template compiles once into an immutable, reusable form (thread-safe to render concurrently);
 * rendering never re-parses. Supported: {{name}}, dotted names, {{{name}}} and {{& name}},
 * sections (lists iterate, truthy values enter, implicit iterator {{.}}), inverted sections,
 * comments, set-delimiter, standalone-line rules, and the Handlebars blocks {{#if x}},
 * {{#unless x}}, {{#each x}} (with {{this}} and {{@index}}), {{#with x}} and {{else}}.
 *
 * Value printing: strings as-is; numbers and booleans as JSON prints them; null/missing → "";
 * arrays → elements joined with "," (as JavaScript's String(array)); objects → compact JSON.
 * Only own members resolve (there is no prototype chain to leak). Escaping is chosen per render:
 * MV_ESCAPE_HTML follows the Mustache spec (& < > " escaped); MV_ESCAPE_NONE is used for message
 * content, which is plain text. */
#ifndef MISSIVE_MUSTACHE_H
#define MISSIVE_MUSTACHE_H

#include <jansson.h>
#include <stddef.h>

#include "missive/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_tpl mv_tpl;

typedef enum mv_escape { MV_ESCAPE_NONE, MV_ESCAPE_HTML } mv_escape;

#define MV_TPL_MAX_SOURCE (256 * 1024)  /* bytes of template text */
#define MV_TPL_MAX_DEPTH 32             /* nested sections */
#define MV_TPL_MAX_OUTPUT (1024 * 1024) /* bytes of rendered output */

/* Compiles src (len bytes, need not be NUL-terminated). On a malformed template returns
 * MV_INVALID_TEMPLATE with a message naming line and column ("unclosed tag at line 1,
 * column 8"). *out is owned by the caller: free with mv_tpl_free(). */
mv_code mv_tpl_compile(const char *src, size_t len, mv_tpl **out, mv_err *err);

/* Renders with data (any JSON value; NULL = empty object). *out is a NUL-terminated malloc'd
 * string owned by the caller (out_len may be NULL). Exceeding MV_TPL_MAX_OUTPUT fails with
 * MV_INVALID_TEMPLATE. */
mv_code mv_tpl_render(const mv_tpl *tpl, const json_t *data, mv_escape escape, char **out,
                      size_t *out_len, mv_err *err);

/* The source text the template was compiled from (borrowed). */
const char *mv_tpl_source(const mv_tpl *tpl);

/* NULL-safe. */
void mv_tpl_free(mv_tpl *tpl);

/* Compile + render + free in one call (for one-off renders such as the CLI). */
mv_code mv_render_string(const char *src, const json_t *data, mv_escape escape, char **out,
                         mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
