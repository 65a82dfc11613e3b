/* mustache_node.h — the compiled form of a template, shared by the compiler (mustache_parse.c)
 * and the renderer (mustache.c).
 *
 * A template is a tree of nodes: each list is a singly linked chain (node->next); a block owns
 * two chains, the body and the {{else}} branch. Names are resolved into paths at compile time so
 * rendering only walks the tree. Nothing here is modified after mv_tpl_compile() returns, which
 * is what makes concurrent rendering of one mv_tpl safe. */
#ifndef MISSIVE_BASE_MUSTACHE_NODE_H
#define MISSIVE_BASE_MUSTACHE_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "missive/mustache.h"

typedef enum mv_path_kind {
    MV_PATH_NAME,  /* "a.b.c": first segment searched up the context stack, the rest inside it */
    MV_PATH_LOCAL, /* ".", "this", "this.a", "../a": segments looked up in one frame only */
    MV_PATH_INDEX, /* @index */
    MV_PATH_KEY,   /* @key */
    MV_PATH_FIRST, /* @first */
    MV_PATH_LAST,  /* @last */
} mv_path_kind;

typedef struct mv_path {
    mv_path_kind kind;
    unsigned up;  /* MV_PATH_LOCAL: how many frames up ("../" count) */
    size_t nsegs; /* segments stored back to back, NUL-terminated, in segs */
    char *segs;   /* NULL when nsegs == 0 */
} mv_path;

typedef enum mv_node_kind {
    MV_NODE_TEXT,     /* literal text */
    MV_NODE_VAR,      /* {{name}} (escaped per render) or {{{name}}} / {{& name}} (never) */
    MV_NODE_SECTION,  /* {{#name}} — Mustache section */
    MV_NODE_INVERTED, /* {{^name}} */
    MV_NODE_IF,       /* {{#if name}} */
    MV_NODE_UNLESS,   /* {{#unless name}} */
    MV_NODE_EACH,     /* {{#each name}} */
    MV_NODE_WITH,     /* {{#with name}} */
} mv_node_kind;

typedef struct mv_node {
    mv_node_kind kind;
    struct mv_node *next;
    const char *text; /* MV_NODE_TEXT: points into the template's copy of the source */
    size_t len;
    bool raw;                       /* MV_NODE_VAR: never escape */
    mv_path path;                   /* every kind but MV_NODE_TEXT */
    struct mv_node *body, *inverse; /* blocks: the body and the {{else}} branch */
} mv_node;

struct mv_tpl {
    char *source; /* NUL-terminated copy; text nodes point into it */
    size_t len;
    mv_node *root;
};

#endif
