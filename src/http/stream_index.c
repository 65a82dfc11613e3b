/* stream_index.c — what the stream hub keeps across turns so that a turn costs what changed, not
 * what is open: intrusive lists, the index of streams by tenant and user or role, and a timer
 * wheel.
 *
 * With 20,000 streams open the hub used to rebuild its index by user and role on every page and
 * walk every stream for heartbeats and positions on every turn, so an idle stream cost CPU on
 * every commit. Here a stream is filed once when it opens and taken out once when it closes; a
 * change looks up the keys its message names (sender, receiver, roles) and meets only their
 * streams. Keys are chained in a power-of-two table that grows with the keys held; a key whose
 * list empties is freed at once, so the index never holds what no open stream names. */
#include <stdlib.h>
#include <string.h>

#include "http/stream_index.h"

/* ---- lists -------------------------------------------------------------------------------- */

void mv__sx_list_push(mv__sx_list *l, mv__sx_node *n, void *owner) {
    n->owner = owner;
    n->list = l;
    n->next = NULL;
    n->prev = l->last;
    if (l->last)
        l->last->next = n;
    else
        l->first = n;
    l->last = n;
    l->n++;
}

void mv__sx_list_remove(mv__sx_node *n) {
    mv__sx_list *l = n->list;
    if (!l) return;
    if (n->prev)
        n->prev->next = n->next;
    else
        l->first = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->last = n->prev;
    l->n--;
    n->prev = n->next = NULL;
    n->list = NULL;
}

/* ---- the index ---------------------------------------------------------------------------- */

typedef struct key_entry {
    mv__sx_list streams; /* first: a node's list is its key's entry */
    struct key_entry *chain;
    uint64_t hash;
    size_t len;
    char key[]; /* "tenant\0<kind byte>key" */
} key_entry;

struct mv__stream_index {
    key_entry **table;
    size_t cap, keys, nodes;
};

static uint64_t hash_of(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* The key's bytes into buf (NULL when longer than cap). */
static const char *make_key(char *buf, size_t cap, const char *tenant, int kind, const char *key,
                            size_t *len) {
    size_t tl = strlen(tenant), kl = strlen(key);
    if (tl + 2 + kl > cap) return NULL;
    memcpy(buf, tenant, tl + 1);
    buf[tl + 1] = (char)('0' + kind);
    memcpy(buf + tl + 2, key, kl);
    *len = tl + 2 + kl;
    return buf;
}

mv__stream_index *mv__stream_index_new(void) {
    mv__stream_index *ix = calloc(1, sizeof *ix);
    if (!ix) return NULL;
    ix->cap = 64;
    ix->table = calloc(ix->cap, sizeof *ix->table);
    if (!ix->table) {
        free(ix);
        return NULL;
    }
    return ix;
}

void mv__stream_index_free(mv__stream_index *ix) {
    if (!ix) return;
    for (size_t i = 0; i < ix->cap; i++)
        for (key_entry *e = ix->table[i], *next; e; e = next) {
            next = e->chain;
            for (mv__sx_node *n = e->streams.first; n; n = n->next)
                n->list = NULL; /* the nodes outlive the index: they are in none now */
            free(e);
        }
    free(ix->table);
    free(ix);
}

static key_entry **slot_of(const mv__stream_index *ix, const char *k, size_t len, uint64_t h) {
    key_entry **pp = &ix->table[h & (ix->cap - 1)];
    while (*pp && !((*pp)->hash == h && (*pp)->len == len && memcmp((*pp)->key, k, len) == 0))
        pp = &(*pp)->chain;
    return pp;
}

/* Doubles the table once the keys outnumber its slots (a failed grow keeps the old one). */
static void grow(mv__stream_index *ix) {
    if (ix->keys < ix->cap) return;
    size_t ncap = ix->cap * 2;
    key_entry **nt = calloc(ncap, sizeof *nt);
    if (!nt) return;
    for (size_t i = 0; i < ix->cap; i++)
        for (key_entry *e = ix->table[i], *next; e; e = next) {
            next = e->chain;
            e->chain = nt[e->hash & (ncap - 1)];
            nt[e->hash & (ncap - 1)] = e;
        }
    free(ix->table);
    ix->table = nt;
    ix->cap = ncap;
}

bool mv__stream_index_add(mv__stream_index *ix, mv__sx_node *n, void *owner, const char *tenant,
                          int kind, const char *key) {
    n->list = NULL;
    n->owner = owner;
    if (!key || !*key) return true;
    char buf[1100];
    size_t len = 0;
    const char *k = make_key(buf, sizeof buf, tenant, kind, key, &len);
    if (!k) return true; /* longer than any id or role that can match (both are bounded) */
    uint64_t h = hash_of(k, len);
    key_entry **pp = slot_of(ix, k, len, h);
    if (!*pp) {
        key_entry *e = calloc(1, sizeof *e + len);
        if (!e) return false;
        e->hash = h;
        e->len = len;
        memcpy(e->key, k, len);
        *pp = e;
        ix->keys++;
        grow(ix);
        pp = slot_of(ix, k, len, h);
    }
    mv__sx_list_push(&(*pp)->streams, n, owner);
    ix->nodes++;
    return true;
}

void mv__stream_index_remove(mv__stream_index *ix, mv__sx_node *n) {
    key_entry *e = (key_entry *)n->list; /* streams is the entry's first member */
    if (!e) return;
    mv__sx_list_remove(n);
    ix->nodes--;
    if (e->streams.n) return;
    key_entry **pp = slot_of(ix, e->key, e->len, e->hash);
    *pp = e->chain;
    ix->keys--;
    free(e);
}

const mv__sx_list *mv__stream_index_find(const mv__stream_index *ix, const char *tenant, int kind,
                                         const char *key) {
    if (!key || !*key) return NULL;
    char buf[1100];
    size_t len = 0;
    const char *k = make_key(buf, sizeof buf, tenant, kind, key, &len);
    if (!k) return NULL;
    key_entry *e = *slot_of(ix, k, len, hash_of(k, len));
    return e ? &e->streams : NULL;
}

size_t mv__stream_index_keys(const mv__stream_index *ix) { return ix->keys; }
size_t mv__stream_index_nodes(const mv__stream_index *ix) { return ix->nodes; }

/* ---- the timer wheel ---------------------------------------------------------------------- */

void mv__sx_wheel_init(mv__sx_wheel *w, int64_t now_ms) {
    memset(w, 0, sizeof *w);
    w->tick = now_ms / MV__WHEEL_GRAIN_MS;
}

void mv__sx_wheel_add(mv__sx_wheel *w, mv__sx_node *n, void *owner, int64_t due_ms) {
    int64_t t = due_ms / MV__WHEEL_GRAIN_MS;
    if (t <= w->tick) t = w->tick + 1;
    if (t >= w->tick + MV__WHEEL_SLOTS) t = w->tick + MV__WHEEL_SLOTS - 1;
    mv__sx_list_push(&w->slot[t % MV__WHEEL_SLOTS], n, owner);
    w->n++;
}

void mv__sx_wheel_remove(mv__sx_wheel *w, mv__sx_node *n) {
    if (!n->list) return;
    mv__sx_list_remove(n);
    w->n--;
}

void mv__sx_wheel_expire(mv__sx_wheel *w, int64_t now_ms, void (*due)(void *owner, void *ctx),
                         void *ctx) {
    int64_t now = now_ms / MV__WHEEL_GRAIN_MS;
    if (w->n == 0)
        w->tick = now; /* nothing filed: no slot to look at */
    else if (now - w->tick > MV__WHEEL_SLOTS)
        w->tick = now - MV__WHEEL_SLOTS; /* a full lap behind: every slot once */
    while (w->tick < now) {
        w->tick++;
        mv__sx_list *l = &w->slot[w->tick % MV__WHEEL_SLOTS];
        /* what due adds goes to a later slot, so this list only shrinks */
        while (l->first) {
            mv__sx_node *n = l->first;
            mv__sx_wheel_remove(w, n);
            due(n->owner, ctx);
        }
    }
}
