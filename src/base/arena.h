/* base/arena.h — a bump allocator for work with one owner and one end: a request's target,
 * headers, query, route parameters, principal and response live in its arena and are freed in
 * one go when it is answered (nginx pools, PostgreSQL memory contexts).
 *
 * Why not malloc per piece: a request allocates dozens of small strings and frees them all
 * together; an arena takes them from one block that is reset and kept for the next request, so
 * the common request costs no malloc at all. Why a limit: what a request may allocate is bounded
 * (mv_arena_set_limit; MV_ARENA_DEFAULT_LIMIT otherwise), so no input makes one request's work
 * grow without end; an allocation past the limit fails like an allocation failure and
 * mv_arena_exhausted() tells the two apart. Under AddressSanitizer the free space of every
 * block and a redzone after every allocation are poisoned, so an overflow out of an arena string
 * is reported as it would be out of a malloc'd one. */
#ifndef MISSIVE_BASE_ARENA_H
#define MISSIVE_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct json_t json_t;
typedef struct mv_arena mv_arena;

/* Bytes of blocks an arena may hold unless mv_arena_set_limit says otherwise. */
#define MV_ARENA_DEFAULT_LIMIT ((size_t)64 * 1024 * 1024)

/* A new empty arena; NULL when out of memory. Free with mv_arena_free() (NULL-safe), which
 * also runs every registered cleanup, newest first. */
mv_arena *mv_arena_new(void);
void mv_arena_free(mv_arena *arena);
/* Runs the cleanups and frees everything allocated, keeping one block for reuse: the arena is as
 * new (limit kept, not exhausted), without the malloc of its first block. */
void mv_arena_reset(mv_arena *arena);
/* The most bytes of blocks the arena may hold (at least one block's worth is always allowed). */
void mv_arena_set_limit(mv_arena *arena, size_t bytes);
/* True after an allocation failed because it would have passed the limit (until the reset). */
bool mv_arena_exhausted(const mv_arena *arena);
/* n bytes aligned for any type, zeroed; NULL when out of memory or past the limit. Valid until
 * mv_arena_free or mv_arena_reset. */
void *mv_arena_alloc(mv_arena *arena, size_t n);
/* Copies n bytes and adds a NUL. s may be NULL only when n == 0. */
char *mv_arena_strndup(mv_arena *arena, const char *s, size_t n);
char *mv_arena_strdup(mv_arena *arena, const char *s);
char *mv_arena_printf(mv_arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Runs fn(ptr) when the arena is freed or reset. Returns false (and runs nothing) when out of
 * memory. */
bool mv_arena_defer(mv_arena *arena, void (*fn)(void *), void *ptr);
/* Hands a jansson reference to the arena (json_decref at the end); returns v, or NULL (after
 * releasing v) when out of memory. NULL-safe. */
json_t *mv_arena_json(mv_arena *arena, json_t *v);

#endif
