/* mustache.c — renders a compiled template (mustache_node.h) against JSON data.
 *
 * One walker over the node tree with a context stack: sections, {{#each}} and {{#with}} push a
 * frame; names resolve the Mustache way (first segment searched from the innermost frame out,
 * the rest inside what was found). The stack has a fixed size because compilation bounds the
 * nesting depth, and all render state lives in one struct on the caller's stack, so one mv_tpl
 * renders concurrently from any number of threads.
 *
 * Values print as the reference's JavaScript string conversion did, except objects, which print
 * as compact JSON instead of "[object Object]"; numbers follow ECMAScript Number::toString so
 * 1.0 prints "1" and 1e21 prints "1e+21". */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/js_value.h"
#include "base/mustache_node.h"
#include "base/strbuf.h"

/* Nested loops over large data can take unbounded time without printing anything, which the
 * output limit would not catch; this bounds the work of one render. */
#define MAX_STEPS 20000000UL

/* A resolved name: a JSON value (NULL when missing) or one of the @ data variables. */
typedef struct value {
    enum { VAL_JSON, VAL_INDEX, VAL_KEY } kind;
    const json_t *json;
    size_t index;
    const char *key;
} value;

typedef struct frame {
    const json_t *ctx;
    bool iter; /* pushed by a loop: @index, @key, @first and @last refer to it */
    size_t index, count;
    const char *key; /* object iteration only */
} frame;

typedef struct renderer {
    mv_strbuf out;
    mv_escape escape;
    frame frames[MV_TPL_MAX_DEPTH + 1];
    size_t nframes;
    unsigned long steps;
    mv_err *err;
} renderer;

/* ---- output ------------------------------------------------------------------------------ */

static mv_code put(renderer *r, const char *s, size_t n) {
    if (n > MV_TPL_MAX_OUTPUT - r->out.len)
        return mv_err_set(r->err, MV_INVALID_TEMPLATE, "rendered output exceeds %d bytes",
                          MV_TPL_MAX_OUTPUT);
    if (!mv_strbuf_add(&r->out, s, n))
        return mv_err_set(r->err, MV_NO_MEMORY, "out of memory rendering a template");
    return MV_OK;
}

/* Writes s, HTML-escaping & < > " when esc is set (exactly the Mustache spec's set). */
static mv_code put_text(renderer *r, const char *s, size_t n, bool esc) {
    if (!esc) return put(r, s, n);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        default: continue;
        }
        mv_code rc = put(r, s + from, i - from);
        if (rc == MV_OK) rc = put(r, rep, strlen(rep));
        if (rc != MV_OK) return rc;
        from = i + 1;
    }
    return put(r, s + from, n - from);
}

static mv_code put_str(renderer *r, const char *s, bool esc) {
    return put_text(r, s, strlen(s), esc);
}

/* ---- value printing ---------------------------------------------------------------------- */

static mv_code put_scalar(renderer *r, const json_t *v, bool esc) {
    char num[32];
    if (!v) return MV_OK; /* missing prints nothing */
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return put(r, num, strlen(num));
    case JSON_REAL: mv_js_format_number(json_real_value(v), num); return put(r, num, strlen(num));
    case JSON_TRUE: return put(r, "true", 4);
    case JSON_FALSE: return put(r, "false", 5);
    case JSON_STRING: return put_text(r, json_string_value(v), json_string_length(v), esc);
    default: return MV_OK;
    }
}

/* A JSON string literal as JSON.stringify writes it. */
static mv_code put_json_string(renderer *r, const char *s, size_t n, bool esc) {
    mv_code rc = put_text(r, "\"", 1, esc);
    size_t from = 0;
    for (size_t i = 0; i < n && rc == MV_OK; i++) {
        unsigned char c = (unsigned char)s[i];
        char rep[8];
        if (c == '"' || c == '\\')
            snprintf(rep, sizeof rep, "\\%c", c);
        else if (c == '\n')
            strcpy(rep, "\\n");
        else if (c == '\r')
            strcpy(rep, "\\r");
        else if (c == '\t')
            strcpy(rep, "\\t");
        else if (c == '\b')
            strcpy(rep, "\\b");
        else if (c == '\f')
            strcpy(rep, "\\f");
        else if (c < 0x20)
            snprintf(rep, sizeof rep, "\\u%04x", c);
        else
            continue;
        rc = put_text(r, s + from, i - from, esc);
        if (rc == MV_OK) rc = put_text(r, rep, strlen(rep), esc);
        from = i + 1;
    }
    if (rc == MV_OK) rc = put_text(r, s + from, n - from, esc);
    if (rc == MV_OK) rc = put_text(r, "\"", 1, esc);
    return rc;
}

/* Compact JSON, keys in insertion order (JSON.stringify). */
static mv_code put_json(renderer *r, const json_t *v, bool esc) {
    mv_code rc = MV_OK;
    if (json_is_object(v)) {
        const char *key;
        const json_t *member;
        bool first = true;
        rc = put(r, "{", 1);
        json_object_foreach((json_t *)v, key, member) {
            if (rc == MV_OK && !first) rc = put(r, ",", 1);
            if (rc == MV_OK) rc = put_json_string(r, key, strlen(key), esc);
            if (rc == MV_OK) rc = put(r, ":", 1);
            if (rc == MV_OK) rc = put_json(r, member, esc);
            first = false;
        }
        return rc == MV_OK ? put(r, "}", 1) : rc;
    }
    if (json_is_array(v)) {
        rc = put(r, "[", 1);
        for (size_t i = 0; i < json_array_size(v) && rc == MV_OK; i++) {
            if (i) rc = put(r, ",", 1);
            if (rc == MV_OK) rc = put_json(r, json_array_get(v, i), esc);
        }
        return rc == MV_OK ? put(r, "]", 1) : rc;
    }
    if (json_is_string(v))
        return put_json_string(r, json_string_value(v), json_string_length(v), esc);
    if (json_is_null(v)) return put(r, "null", 4);
    return put_scalar(r, v, esc);
}

/* JavaScript String(v): arrays join their elements with "," (recursively; null elements print
 * empty), objects print as compact JSON, null prints nothing. */
static mv_code put_json_value(renderer *r, const json_t *v, bool esc) {
    if (json_is_array(v)) {
        mv_code rc = MV_OK;
        for (size_t i = 0; i < json_array_size(v) && rc == MV_OK; i++) {
            if (i) rc = put(r, ",", 1);
            if (rc == MV_OK) rc = put_json_value(r, json_array_get(v, i), esc);
        }
        return rc;
    }
    if (json_is_object(v)) return put_json(r, v, esc);
    return put_scalar(r, v, esc);
}

static mv_code put_value(renderer *r, value v, bool esc) {
    char num[32];
    switch (v.kind) {
    case VAL_INDEX: snprintf(num, sizeof num, "%zu", v.index); return put(r, num, strlen(num));
    case VAL_KEY: return put_str(r, v.key, esc);
    case VAL_JSON: return v.json ? put_json_value(r, v.json, esc) : MV_OK;
    }
    return MV_OK;
}

/* ---- lookup ------------------------------------------------------------------------------ */

/* An own member of an object, or an element of an array by decimal index. */
static const json_t *member(const json_t *v, const char *seg) {
    if (json_is_object(v)) return json_object_get(v, seg);
    if (!json_is_array(v) || !*seg || (seg[0] == '0' && seg[1])) return NULL;
    size_t i = 0;
    for (const char *c = seg; *c; c++) {
        if (*c < '0' || *c > '9' || i > SIZE_MAX / 10 - 1) return NULL;
        i = i * 10 + (size_t)(*c - '0');
    }
    return json_array_get(v, i);
}

/* The segments of path after the first `skip`, looked up inside v. */
static const json_t *descend(const json_t *v, const mv_path *path, size_t skip) {
    const char *seg = path->segs;
    for (size_t i = 0; i < path->nsegs && v; i++, seg += strlen(seg) + 1)
        if (i >= skip) v = member(v, seg);
    return v;
}

static const frame *loop_frame(const renderer *r) {
    for (size_t i = r->nframes; i-- > 0;)
        if (r->frames[i].iter) return &r->frames[i];
    return NULL;
}

static value resolve(const renderer *r, const mv_path *path) {
    value v = {VAL_JSON, NULL, 0, NULL};
    const frame *f;
    switch (path->kind) {
    case MV_PATH_NAME:
        for (size_t i = r->nframes; i-- > 0;) {
            const json_t *first = member(r->frames[i].ctx, path->segs);
            if (first) {
                v.json = descend(first, path, 1);
                break;
            }
        }
        return v;
    case MV_PATH_LOCAL:
        if (path->up < r->nframes)
            v.json = descend(r->frames[r->nframes - 1 - path->up].ctx, path, 0);
        return v;
    case MV_PATH_INDEX:
        if ((f = loop_frame(r))) v.kind = VAL_INDEX, v.index = f->index;
        return v;
    case MV_PATH_KEY:
        if ((f = loop_frame(r)) && f->key)
            v.kind = VAL_KEY, v.key = f->key;
        else if (f)
            v.kind = VAL_INDEX, v.index = f->index; /* arrays: @key is the index */
        return v;
    case MV_PATH_FIRST:
        if ((f = loop_frame(r))) v.json = f->index == 0 ? json_true() : json_false();
        return v;
    case MV_PATH_LAST:
        if ((f = loop_frame(r))) v.json = f->index + 1 == f->count ? json_true() : json_false();
        return v;
    }
    return v;
}

/* ---- truthiness -------------------------------------------------------------------------- */

/* Mustache sections (and Handlebars' blocks on a plain name): false, null, missing and the empty
 * list are false; everything else, "" and 0 included, enters the section. */
static bool section_true(value v) {
    if (v.kind != VAL_JSON) return true;
    if (!v.json || json_is_null(v.json) || json_is_false(v.json)) return false;
    return !json_is_array(v.json) || json_array_size(v.json) > 0;
}

/* {{#if}}: JavaScript truthiness, except that an empty list is false too (Handlebars). */
static bool if_true(value v) {
    if (v.kind == VAL_INDEX) return v.index != 0;
    if (v.kind == VAL_KEY) return *v.key != '\0';
    if (!section_true(v)) return false;
    if (json_is_string(v.json)) return json_string_length(v.json) > 0;
    if (json_is_integer(v.json)) return json_integer_value(v.json) != 0;
    if (json_is_real(v.json)) return json_real_value(v.json) != 0;
    return true;
}

static bool is_zero(value v) {
    if (v.kind == VAL_INDEX) return v.index == 0;
    return v.kind == VAL_JSON && json_is_number(v.json) && json_number_value(v.json) == 0;
}

/* ---- the walker -------------------------------------------------------------------------- */

static mv_code render_nodes(renderer *r, const mv_node *n);

/* Counts one unit of work: a node visited or a loop iteration entered. */
static mv_code step(renderer *r) {
    if (++r->steps <= MAX_STEPS) return MV_OK;
    return mv_err_set(r->err, MV_INVALID_TEMPLATE,
                      "rendering stopped after %lu steps (loops over too much data)", MAX_STEPS);
}

/* Renders body with ctx pushed (ctx NULL: no new frame, as Handlebars does for `true`). */
static mv_code render_in(renderer *r, const mv_node *body, const json_t *ctx, bool iter,
                         size_t index, size_t count, const char *key) {
    mv_code rc = step(r);
    if (rc != MV_OK) return rc;
    if (!ctx) return render_nodes(r, body);
    if (r->nframes == sizeof r->frames / sizeof r->frames[0])
        return mv_err_set(r->err, MV_INVALID_TEMPLATE, "sections nested deeper than %d",
                          MV_TPL_MAX_DEPTH);
    r->frames[r->nframes++] = (frame){ctx, iter, index, count, key};
    rc = render_nodes(r, body);
    r->nframes--;
    return rc;
}

/* {{#each}} and Mustache sections over a list: the body once per element (or member value). */
static mv_code render_loop(renderer *r, const mv_node *n, const json_t *list) {
    mv_code rc = MV_OK;
    if (json_is_array(list)) {
        size_t count = json_array_size(list);
        if (count == 0) return render_nodes(r, n->inverse);
        for (size_t i = 0; i < count && rc == MV_OK; i++)
            rc = render_in(r, n->body, json_array_get(list, i), true, i, count, NULL);
        return rc;
    }
    size_t count = json_is_object(list) ? json_object_size(list) : 0, i = 0;
    if (count == 0) return render_nodes(r, n->inverse);
    const char *key;
    const json_t *member;
    json_object_foreach((json_t *)list, key, member) {
        if ((rc = render_in(r, n->body, member, true, i++, count, key)) != MV_OK) break;
    }
    return rc;
}

static mv_code render_node(renderer *r, const mv_node *n) {
    if (n->kind == MV_NODE_TEXT) return put(r, n->text, n->len);
    value v = resolve(r, &n->path);
    const json_t *ctx = v.kind == VAL_JSON ? v.json : NULL;
    switch (n->kind) {
    case MV_NODE_TEXT: break;
    case MV_NODE_VAR: return put_value(r, v, !n->raw && r->escape == MV_ESCAPE_HTML);
    case MV_NODE_SECTION:
        if (!section_true(v)) return render_nodes(r, n->inverse);
        if (json_is_array(ctx)) return render_loop(r, n, ctx);
        return render_in(r, n->body, json_is_true(ctx) ? NULL : ctx, false, 0, 0, NULL);
    case MV_NODE_INVERTED: return render_nodes(r, section_true(v) ? n->inverse : n->body);
    case MV_NODE_IF: return render_nodes(r, if_true(v) ? n->body : n->inverse);
    case MV_NODE_UNLESS: return render_nodes(r, if_true(v) ? n->inverse : n->body);
    case MV_NODE_EACH: return render_loop(r, n, ctx);
    case MV_NODE_WITH:
        if (!if_true(v) && !is_zero(v)) return render_nodes(r, n->inverse);
        return render_in(r, n->body, ctx, false, 0, 0, NULL);
    }
    return MV_OK;
}

static mv_code render_nodes(renderer *r, const mv_node *n) {
    for (; n; n = n->next) {
        mv_code rc = step(r);
        if (rc == MV_OK) rc = render_node(r, n);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

/* ---- public ------------------------------------------------------------------------------ */

mv_code mv_tpl_render(const mv_tpl *tpl, const json_t *data, mv_escape escape, char **out,
                      size_t *out_len, mv_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    renderer r = {.escape = escape, .err = err, .nframes = 1};
    r.frames[0].ctx = data; /* NULL behaves as an empty object: nothing resolves */
    mv_code rc = render_nodes(&r, tpl->root);
    char *text = mv_strbuf_take(&r.out, out_len);
    if (rc == MV_OK && !text)
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory rendering a template");
    if (rc != MV_OK) {
        free(text);
        if (out_len) *out_len = 0;
        return rc;
    }
    *out = text;
    return MV_OK;
}

mv_code mv_render_string(const char *src, const json_t *data, mv_escape escape, char **out,
                         mv_err *err) {
    mv_tpl *tpl;
    *out = NULL;
    mv_code rc = mv_tpl_compile(src, strlen(src), &tpl, err);
    if (rc != MV_OK) return rc;
    rc = mv_tpl_render(tpl, data, escape, out, NULL, err);
    mv_tpl_free(tpl);
    return rc;
}
