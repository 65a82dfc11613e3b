/* http/stream_index.h — the stream hub's structures kept across its turns (stream_hub.c): lists a
 * stream sits in through nodes embedded in it, an index of streams by tenant and user or role,
 * and a timer wheel of deadlines (heartbeats, credential expiry).
 *
 * None of it locks: the hub's thread alone touches them. A node belongs to at most one list at a
 * time and says which (so removing it is O(1), and removing a node in none is a no-op). */
#ifndef MISSIVE_HTTP_STREAM_INDEX_H
#define MISSIVE_HTTP_STREAM_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mv__sx_list mv__sx_list;

typedef struct mv__sx_node {
    struct mv__sx_node *prev, *next;
    mv__sx_list *list; /* NULL: in none */
    void *owner;       /* what the node stands for (the stream) */
} mv__sx_node;

struct mv__sx_list {
    mv__sx_node *first, *last;
    size_t n;
};

/* Appends n (standing for owner) to l; n must be in no list. */
void mv__sx_list_push(mv__sx_list *l, mv__sx_node *n, void *owner);
/* Takes n out of its list (none: nothing happens). */
void mv__sx_list_remove(mv__sx_node *n);

/* Streams by (tenant, kind, key): a kind is the caller's (user, role). Keys whose list empties are
 * freed, so the index holds only what open streams name. */
typedef struct mv__stream_index mv__stream_index;

mv__stream_index *mv__stream_index_new(void);     /* NULL when out of memory */
void mv__stream_index_free(mv__stream_index *ix); /* NULL-safe; the nodes are the caller's */
/* Files n (for owner) under (tenant, kind, key); an empty key files nothing (true). False, n in
 * no list, when out of memory. */
bool mv__stream_index_add(mv__stream_index *ix, mv__sx_node *n, void *owner, const char *tenant,
                          int kind, const char *key);
/* Takes n out of the index (a key left with none is dropped); n in none: nothing happens. */
void mv__stream_index_remove(mv__stream_index *ix, mv__sx_node *n);
/* The streams under (tenant, kind, key), or NULL: borrowed until the index next changes. */
const mv__sx_list *mv__stream_index_find(const mv__stream_index *ix, const char *tenant, int kind,
                                         const char *key);
/* Keys held and nodes filed (both 0 once every stream is taken out). */
size_t mv__stream_index_keys(const mv__stream_index *ix);
size_t mv__stream_index_nodes(const mv__stream_index *ix);

/* Deadlines in slots of MV__WHEEL_GRAIN_MS: adding and removing are O(1), and a look at the time
 * visits only what came due. A deadline beyond the wheel's horizon comes due early (at the
 * horizon): the callback checks its own deadline and adds it again. */
#define MV__WHEEL_GRAIN_MS 128
#define MV__WHEEL_SLOTS 256

typedef struct mv__sx_wheel {
    mv__sx_list slot[MV__WHEEL_SLOTS];
    int64_t tick; /* the last slot looked at (ms / grain) */
    size_t n;
} mv__sx_wheel;

void mv__sx_wheel_init(mv__sx_wheel *w, int64_t now_ms);
/* Files n (for owner) at due_ms: at the earliest in the slot after the current one. */
void mv__sx_wheel_add(mv__sx_wheel *w, mv__sx_node *n, void *owner, int64_t due_ms);
void mv__sx_wheel_remove(mv__sx_wheel *w, mv__sx_node *n);
/* Takes out every node whose slot is due by now_ms and calls due(owner, ctx) for each (which may
 * add it again). */
void mv__sx_wheel_expire(mv__sx_wheel *w, int64_t now_ms, void (*due)(void *owner, void *ctx),
                         void *ctx);

#endif
