/* mustache_parse.c — compiles Mustache source (plus the Handlebars blocks) into a node tree.
 *
 * One left-to-right pass: find the next opening delimiter, read the tag, decide whether it stands
 * alone on its line (Mustache spec: a section, inverted, closing, comment, set-delimiter or
 * {{else}} tag with only whitespace around it takes its whole line with it), then append a node
 * to the innermost open block. Open blocks live on a small stack bounded by MV_TPL_MAX_DEPTH, so
 * neither compiling nor rendering recurses deeper than that. Every malformed input is an
 * MV_INVALID_TEMPLATE naming the line and column of the offending tag. */
#include <stdlib.h>
#include <string.h>

#include "base/mustache_node.h"

#define MAX_DELIMITER 16

typedef struct open_block {
    mv_node *node;    /* NULL for the root level */
    mv_node **tail;   /* where the next node of this level goes */
    const char *name; /* what the closing tag must say: the section name or the keyword */
    size_t name_len;
    size_t at;    /* offset of the opening tag, for messages */
    bool in_else; /* {{else}} seen: nodes now go to the inverse branch */
} open_block;

typedef struct parser {
    const char *src;
    size_t len;
    size_t pos; /* start of text not yet emitted */
    char otag[MAX_DELIMITER + 1], ctag[MAX_DELIMITER + 1];
    size_t olen, clen;
    open_block stack[MV_TPL_MAX_DEPTH + 1];
    size_t depth; /* stack[0] is the root */
    mv_err *err;
} parser;

/* ---- small helpers ---------------------------------------------------------------------- */

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void trim(const char **s, size_t *n) {
    while (*n && is_space(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n && is_space((*s)[*n - 1]))
        (*n)--;
}

static bool has_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (is_space(s[i])) return true;
    return false;
}

static bool equals(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool starts_with(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n >= l && memcmp(s, lit, l) == 0;
}

static size_t find(const parser *p, size_t from, const char *needle, size_t nlen) {
    if (from > p->len) return (size_t)-1;
    const char *hit = memmem(p->src + from, p->len - from, needle, nlen);
    return hit ? (size_t)(hit - p->src) : (size_t)-1;
}

/* 1-based line and column (in bytes) of offset `at`. */
static void position(const parser *p, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->src[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* Fails with "<what> at line L, column C" for the byte at offset `at`. */
static mv_code fail_at(parser *p, size_t at, const char *what) {
    int line, col;
    position(p, at, &line, &col);
    return mv_err_set(p->err, MV_INVALID_TEMPLATE, "%s at line %d, column %d", what, line, col);
}

/* ---- nodes ------------------------------------------------------------------------------- */

static void free_nodes(mv_node *n) {
    while (n) {
        mv_node *next = n->next;
        free_nodes(n->body);
        free_nodes(n->inverse);
        free(n->path.segs);
        free(n);
        n = next;
    }
}

static mv_node *append(parser *p, mv_node_kind kind) {
    mv_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    open_block *top = &p->stack[p->depth];
    *top->tail = n;
    top->tail = &n->next;
    return n;
}

static mv_code append_text(parser *p, size_t from, size_t to) {
    if (to <= from) return MV_OK;
    mv_node *n = append(p, MV_NODE_TEXT);
    if (!n) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory compiling a template");
    n->text = p->src + from;
    n->len = to - from;
    return MV_OK;
}

typedef enum path_result { PATH_OK, PATH_INVALID, PATH_NO_MEMORY } path_result;

/* Parses a name into a path: "a.b", ".", "this", "this.a", "./a", "../a", "@index", "@key",
 * "@first", "@last". */
static path_result parse_path(const char *s, size_t n, mv_path *out) {
    memset(out, 0, sizeof *out);
    if (n == 0 || has_space(s, n)) return PATH_INVALID;
    if (s[0] == '@') {
        if (equals(s, n, "@index"))
            out->kind = MV_PATH_INDEX;
        else if (equals(s, n, "@key"))
            out->kind = MV_PATH_KEY;
        else if (equals(s, n, "@first"))
            out->kind = MV_PATH_FIRST;
        else if (equals(s, n, "@last"))
            out->kind = MV_PATH_LAST;
        else
            return PATH_INVALID;
        return PATH_OK;
    }
    /* "this", "." and "../" prefixes name one frame; such names never search outwards. */
    bool local = false;
    while (starts_with(s, n, "../")) {
        local = true;
        out->up++;
        s += 3;
        n -= 3;
    }
    if (equals(s, n, "..")) {
        local = true;
        out->up++;
        n = 0;
    } else if (equals(s, n, ".") || equals(s, n, "this")) {
        local = true;
        n = 0;
    } else if (starts_with(s, n, "this.") && n > 5) {
        local = true;
        s += 5;
        n -= 5;
    } else if (starts_with(s, n, "./") && n > 2) {
        local = true;
        s += 2;
        n -= 2;
    }
    out->kind = local ? MV_PATH_LOCAL : MV_PATH_NAME;
    if (n == 0) return PATH_OK; /* the frame itself */

    /* Segments: split at '.', none empty ("a..b", "a." and ".a" are not names). */
    if (s[0] == '.' || s[n - 1] == '.') return PATH_INVALID;
    out->segs = malloc(n + 1);
    if (!out->segs) return PATH_NO_MEMORY;
    memcpy(out->segs, s, n);
    out->segs[n] = '\0';
    out->nsegs = 1;
    for (size_t i = 0; i < n; i++) {
        if (out->segs[i] != '.') continue;
        if (out->segs[i + 1] == '.') {
            free(out->segs);
            out->segs = NULL;
            return PATH_INVALID;
        }
        out->segs[i] = '\0';
        out->nsegs++;
    }
    return PATH_OK;
}

static mv_code set_path(parser *p, mv_node *n, const char *name, size_t len, size_t at) {
    switch (parse_path(name, len, &n->path)) {
    case PATH_OK: return MV_OK;
    case PATH_NO_MEMORY:
        return mv_err_set(p->err, MV_NO_MEMORY, "out of memory compiling a template");
    case PATH_INVALID: break;
    }
    return fail_at(p, at, len == 0 ? "missing name" : "invalid name");
}

/* ---- tags -------------------------------------------------------------------------------- */

typedef enum tag_kind {
    TAG_VAR,      /* {{name}} */
    TAG_RAW,      /* {{{name}}}, {{& name}} */
    TAG_COMMENT,  /* {{! ... }}, {{!-- ... --}} */
    TAG_DELIM,    /* {{=<% %>=}} */
    TAG_OPEN,     /* {{#name}}, {{#if name}} ... */
    TAG_INVERTED, /* {{^name}} */
    TAG_CLOSE,    /* {{/name}} */
    TAG_ELSE,     /* {{else}}, {{^}} */
    TAG_PARTIAL,  /* {{> name}} — not supported */
} tag_kind;

typedef struct tag {
    tag_kind kind;
    const char *arg; /* the tag's content after the sigil, trimmed */
    size_t arg_len;
    size_t start, end; /* offsets of the opening delimiter and just past the closing one */
} tag;

/* Reads the tag whose opening delimiter starts at `start`. */
static mv_code read_tag(parser *p, size_t start, tag *t) {
    size_t c0 = start + p->olen, c1, end;
    char needle[MAX_DELIMITER + 3];
    if (c0 < p->len && p->src[c0] == '{') { /* {{{name}}}: the closer is "}" + ctag */
        needle[0] = '}';
        memcpy(needle + 1, p->ctag, p->clen);
        c1 = find(p, c0 + 1, needle, p->clen + 1);
        end = c1 + p->clen + 1;
        c0++;
    } else if (p->len - c0 >= 3 && memcmp(p->src + c0, "!--", 3) == 0) { /* may contain }} */
        memcpy(needle, "--", 2);
        memcpy(needle + 2, p->ctag, p->clen);
        c1 = find(p, c0 + 3, needle, p->clen + 2);
        end = c1 + p->clen + 2;
    } else {
        c1 = find(p, c0, p->ctag, p->clen);
        end = c1 + p->clen;
    }
    if (c1 == (size_t)-1) return fail_at(p, start, "unclosed tag");

    const char *s = p->src + c0;
    size_t n = c1 - c0;
    bool triple = c0 > start + p->olen;
    trim(&s, &n);
    t->start = start;
    t->end = end;
    t->kind = triple ? TAG_RAW : TAG_VAR;
    if (!triple && n > 0) {
        switch (s[0]) {
        case '!': t->kind = TAG_COMMENT; break;
        case '=': t->kind = TAG_DELIM; break;
        case '#': t->kind = TAG_OPEN; break;
        case '^': t->kind = TAG_INVERTED; break;
        case '/': t->kind = TAG_CLOSE; break;
        case '&': t->kind = TAG_RAW; break;
        case '>': t->kind = TAG_PARTIAL; break;
        default: break;
        }
        if (t->kind != TAG_VAR) { /* skip the sigil */
            s++;
            n--;
        }
        if (t->kind != TAG_DELIM) trim(&s, &n);
    }
    if (t->kind == TAG_VAR && equals(s, n, "else")) t->kind = TAG_ELSE;
    if (t->kind == TAG_INVERTED && n == 0) t->kind = TAG_ELSE;
    t->arg = s;
    t->arg_len = n;
    return MV_OK;
}

/* True when the tag is alone on its line (only spaces and tabs around it). Then *line_start is
 * where the line's indentation begins and *line_end is just past its newline (or the end). */
static bool standalone(const parser *p, const tag *t, size_t *line_start, size_t *line_end) {
    if (t->kind == TAG_VAR || t->kind == TAG_RAW) return false;
    size_t b = t->start;
    while (b > p->pos && (p->src[b - 1] == ' ' || p->src[b - 1] == '\t'))
        b--;
    if (b > 0 && p->src[b - 1] != '\n') return false;
    size_t e = t->end;
    while (e < p->len && (p->src[e] == ' ' || p->src[e] == '\t'))
        e++;
    if (e < p->len && p->src[e] == '\n')
        e++;
    else if (e + 1 < p->len && p->src[e] == '\r' && p->src[e + 1] == '\n')
        e += 2;
    else if (e < p->len)
        return false;
    *line_start = b;
    *line_end = e;
    return true;
}

/* {{=<% %>=}}: two delimiters separated by whitespace, neither empty nor containing '='. */
static mv_code set_delimiters(parser *p, const tag *t) {
    const char *s = t->arg;
    size_t n = t->arg_len;
    if (n == 0 || s[n - 1] != '=') return fail_at(p, t->start, "bad delimiter tag");
    n--;
    trim(&s, &n);
    size_t w = 0;
    while (w < n && !is_space(s[w]))
        w++;
    const char *o = s, *c = s + w;
    size_t olen = w, clen = n - w;
    trim(&c, &clen);
    if (olen == 0 || clen == 0 || olen > MAX_DELIMITER || clen > MAX_DELIMITER ||
        has_space(c, clen) || memchr(o, '=', olen) || memchr(c, '=', clen))
        return fail_at(p, t->start, "bad delimiter tag");
    memcpy(p->otag, o, olen);
    p->otag[olen] = '\0';
    p->olen = olen;
    memcpy(p->ctag, c, clen);
    p->ctag[clen] = '\0';
    p->clen = clen;
    return MV_OK;
}

static const struct {
    const char *word;
    mv_node_kind kind;
} KEYWORDS[] = {
    {"if", MV_NODE_IF}, {"unless", MV_NODE_UNLESS}, {"each", MV_NODE_EACH}, {"with", MV_NODE_WITH}};

/* {{#name}}, {{^name}} or {{#if name}} ...: appends the block and makes it the current level. */
static mv_code open_section(parser *p, const tag *t) {
    if (p->depth == MV_TPL_MAX_DEPTH) {
        char what[64];
        snprintf(what, sizeof what, "sections nested deeper than %d", MV_TPL_MAX_DEPTH);
        return fail_at(p, t->start, what);
    }
    mv_node_kind kind = t->kind == TAG_INVERTED ? MV_NODE_INVERTED : MV_NODE_SECTION;
    /* A plain section's name is its whole argument; a keyword block splits "if x" in two. */
    const char *name = t->arg, *arg = t->arg;
    size_t name_len = t->arg_len;
    size_t arg_len = name_len;
    if (t->kind == TAG_OPEN) {
        size_t w = 0;
        while (w < t->arg_len && !is_space(t->arg[w]))
            w++;
        for (size_t i = 0; i < sizeof KEYWORDS / sizeof KEYWORDS[0]; i++) {
            if (!equals(t->arg, w, KEYWORDS[i].word)) continue;
            kind = KEYWORDS[i].kind;
            name_len = w;
            arg = t->arg + w;
            arg_len = t->arg_len - w;
            trim(&arg, &arg_len);
            if (arg_len == 0) {
                char what[64];
                snprintf(what, sizeof what, "\"#%s\" needs a name", KEYWORDS[i].word);
                return fail_at(p, t->start, what);
            }
            break;
        }
    }
    mv_node *n = append(p, kind);
    if (!n) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory compiling a template");
    mv_code rc = set_path(p, n, arg, arg_len, t->start);
    if (rc != MV_OK) return rc;
    open_block *b = &p->stack[++p->depth];
    b->node = n;
    b->tail = &n->body;
    b->name = name;
    b->name_len = name_len;
    b->at = t->start;
    b->in_else = false;
    return MV_OK;
}

static mv_code close_section(parser *p, const tag *t) {
    char what[300];
    if (p->depth == 0) {
        snprintf(what, sizeof what, "closing tag \"/%.*s\" without an open section",
                 (int)(t->arg_len > 100 ? 100 : t->arg_len), t->arg);
        return fail_at(p, t->start, what);
    }
    const open_block *b = &p->stack[p->depth];
    if (t->arg_len != b->name_len || memcmp(t->arg, b->name, b->name_len) != 0) {
        int line, col;
        position(p, b->at, &line, &col);
        snprintf(what, sizeof what,
                 "mismatched closing tag \"/%.*s\" (section \"%.*s\" opened at line %d, column %d)",
                 (int)(t->arg_len > 100 ? 100 : t->arg_len), t->arg,
                 (int)(b->name_len > 100 ? 100 : b->name_len), b->name, line, col);
        return fail_at(p, t->start, what);
    }
    p->depth--;
    return MV_OK;
}

static mv_code handle_tag(parser *p, const tag *t) {
    mv_node *n;
    switch (t->kind) {
    case TAG_COMMENT: return MV_OK;
    case TAG_DELIM: return set_delimiters(p, t);
    case TAG_OPEN:
    case TAG_INVERTED: return open_section(p, t);
    case TAG_CLOSE: return close_section(p, t);
    case TAG_PARTIAL: return fail_at(p, t->start, "partials are not supported");
    case TAG_ELSE: {
        open_block *b = &p->stack[p->depth];
        if (p->depth == 0) return fail_at(p, t->start, "\"else\" outside a section");
        if (b->in_else) return fail_at(p, t->start, "second \"else\" in one section");
        b->in_else = true;
        b->tail = &b->node->inverse;
        return MV_OK;
    }
    case TAG_VAR:
    case TAG_RAW:
        n = append(p, MV_NODE_VAR);
        if (!n) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory compiling a template");
        n->raw = t->kind == TAG_RAW;
        return set_path(p, n, t->arg, t->arg_len, t->start);
    }
    return MV_OK;
}

/* ---- public ------------------------------------------------------------------------------ */

mv_code mv_tpl_compile(const char *src, size_t len, mv_tpl **out, mv_err *err) {
    *out = NULL;
    if (len > MV_TPL_MAX_SOURCE)
        return mv_err_set(err, MV_INVALID_TEMPLATE,
                          "template is %zu bytes, more than the %d allowed", len,
                          MV_TPL_MAX_SOURCE);
    mv_tpl *tpl = calloc(1, sizeof *tpl);
    char *copy = malloc(len + 1);
    if (!tpl || !copy) {
        free(tpl);
        free(copy);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory compiling a template");
    }
    if (len) memcpy(copy, src, len);
    copy[len] = '\0';
    tpl->source = copy;
    tpl->len = len;

    parser p = {
        .src = copy, .len = len, .otag = "{{", .ctag = "}}", .olen = 2, .clen = 2, .err = err};
    p.stack[0].tail = &tpl->root;
    mv_code rc = MV_OK;
    for (;;) {
        size_t start = find(&p, p.pos, p.otag, p.olen);
        if (start == (size_t)-1) break;
        tag t = {0};
        if ((rc = read_tag(&p, start, &t)) != MV_OK) goto fail;
        size_t line_start, line_end;
        bool alone = standalone(&p, &t, &line_start, &line_end);
        if ((rc = append_text(&p, p.pos, alone ? line_start : t.start)) != MV_OK) goto fail;
        p.pos = alone ? line_end : t.end;
        if ((rc = handle_tag(&p, &t)) != MV_OK) goto fail;
    }
    if ((rc = append_text(&p, p.pos, len)) != MV_OK) goto fail;
    if (p.depth > 0) {
        const open_block *b = &p.stack[p.depth];
        char what[160];
        snprintf(what, sizeof what, "unclosed section \"%.*s\"",
                 (int)(b->name_len > 100 ? 100 : b->name_len), b->name);
        rc = fail_at(&p, b->at, what);
        goto fail;
    }
    *out = tpl;
    return MV_OK;
fail:
    mv_tpl_free(tpl);
    return rc;
}

const char *mv_tpl_source(const mv_tpl *tpl) { return tpl ? tpl->source : NULL; }

void mv_tpl_free(mv_tpl *tpl) {
    if (!tpl) return;
    free_nodes(tpl->root);
    free(tpl->source);
    free(tpl);
}
