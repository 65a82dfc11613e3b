/* arena.c — see arena.h. Blocks of ARENA_BLOCK bytes (an allocation larger than that gets a
 * block of its own, linked behind the current one so the current one's free space stays in use);
 * a list of cleanups (jansson references, adopted malloc'd bodies) run newest first at the end.
 * The reset keeps one ordinary block, so an arena reused request after request stops calling
 * malloc once its requests fit one block. */
#include "base/arena.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif

#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define REDZONE 32 /* after each allocation: a write past its end lands in poisoned bytes */
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#define REDZONE 0
#endif

typedef struct arena_block {
    struct arena_block *next;
    size_t used, size;
    max_align_t data[];
} arena_block;

typedef struct arena_cleanup {
    struct arena_cleanup *next;
    void (*fn)(void *);
    void *ptr;
} arena_cleanup;

struct mv_arena {
    arena_block *blocks;
    arena_cleanup *cleanups;
    size_t held;  /* bytes of blocks held */
    size_t limit; /* most bytes of blocks */
    bool exhausted;
};

#define ARENA_BLOCK 8192

mv_arena *mv_arena_new(void) {
    mv_arena *a = calloc(1, sizeof(mv_arena));
    if (a) a->limit = MV_ARENA_DEFAULT_LIMIT;
    return a;
}

static void run_cleanups(mv_arena *arena) {
    for (arena_cleanup *c = arena->cleanups; c;) {
        arena_cleanup *next = c->next; /* the record itself lives in a block */
        c->fn(c->ptr);
        c = next;
    }
    arena->cleanups = NULL;
}

static void block_free(arena_block *b) {
    UNPOISON(b->data, b->size); /* malloc's own bookkeeping takes over */
    free(b);
}

void mv_arena_free(mv_arena *arena) {
    if (!arena) return;
    run_cleanups(arena);
    for (arena_block *b = arena->blocks; b;) {
        arena_block *next = b->next;
        block_free(b);
        b = next;
    }
    free(arena);
}

void mv_arena_reset(mv_arena *arena) {
    if (!arena) return;
    run_cleanups(arena);
    arena_block *keep = NULL;
    for (arena_block *b = arena->blocks; b;) {
        arena_block *next = b->next;
        if (!keep && b->size == ARENA_BLOCK) {
            keep = b;
        } else {
            block_free(b);
        }
        b = next;
    }
    if (keep) {
        keep->used = 0;
        keep->next = NULL;
        POISON(keep->data, keep->size); /* what the last request had is no longer addressable */
    }
    arena->blocks = keep;
    arena->held = keep ? ARENA_BLOCK : 0;
    arena->exhausted = false;
}

void mv_arena_set_limit(mv_arena *arena, size_t bytes) {
    if (arena) arena->limit = bytes;
}

bool mv_arena_exhausted(const mv_arena *arena) { return arena && arena->exhausted; }

void *mv_arena_alloc(mv_arena *arena, size_t n) {
    const size_t align = sizeof(max_align_t);
    if (n > SIZE_MAX / 2) return NULL;
    size_t need = (n + REDZONE + align - 1) / align * align;
    if (need == 0) need = align;
    arena_block *b = arena->blocks;
    if (!b || b->size - b->used < need) {
        size_t size = need > ARENA_BLOCK ? need : ARENA_BLOCK;
        /* the first block is always allowed, so a tiny limit still serves small requests */
        if (arena->held > 0 && (size > arena->limit || arena->held > arena->limit - size)) {
            arena->exhausted = true;
            return NULL;
        }
        arena_block *nb = malloc(sizeof(arena_block) + size);
        if (!nb) return NULL;
        nb->used = 0;
        nb->size = size;
        POISON(nb->data, size);
        arena->held += size;
        if (b && need > ARENA_BLOCK) {
            /* an oversized block goes behind the current one so its free space stays usable */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            arena->blocks = nb;
        }
        b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += need;
    UNPOISON(p, n);
    memset(p, 0, n);
    return p;
}

char *mv_arena_strndup(mv_arena *arena, const char *s, size_t n) {
    char *p = mv_arena_alloc(arena, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *mv_arena_strdup(mv_arena *arena, const char *s) {
    return s ? mv_arena_strndup(arena, s, strlen(s)) : NULL;
}

char *mv_arena_printf(mv_arena *arena, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *p = mv_arena_alloc(arena, (size_t)n + 1);
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

bool mv_arena_defer(mv_arena *arena, void (*fn)(void *), void *ptr) {
    arena_cleanup *c = mv_arena_alloc(arena, sizeof *c);
    if (!c) return false;
    c->fn = fn;
    c->ptr = ptr;
    c->next = arena->cleanups;
    arena->cleanups = c;
    return true;
}

static void decref_cleanup(void *p) { json_decref(p); }

json_t *mv_arena_json(mv_arena *arena, json_t *v) {
    if (!v) return NULL;
    if (!mv_arena_defer(arena, decref_cleanup, v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}
