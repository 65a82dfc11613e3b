/* visibility.c — role matching for users with many roles.
 *
 * One list statement has MV_LIST_ROLE_SLOTS role branches (read.c). A user with more roles (up to
 * MV_MAX_ROLES) runs the statement once per slice of roles and the slices' pages are merged here:
 * each slice returns its newest n visible messages after a keyset position, so the newest n of the
 * union are among them. A message visible through roles in two slices appears in both and is kept
 * once. The cost is one statement per slice, each bounded by the page size, as for a user with
 * few roles; the common case (at most MV_LIST_ROLE_SLOTS roles) never comes here. */
#include <stdlib.h>
#include <string.h>

#include "message/service.h"

size_t mv__role_slices(size_t nroles) {
    return nroles <= MV_LIST_ROLE_SLOTS ? 1
                                        : (nroles + MV_LIST_ROLE_SLOTS - 1) / MV_LIST_ROLE_SLOTS;
}

bool mv__page_keys_add(mv__page_keys *k, const char *id, int64_t created_at, int64_t size) {
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        mv__page_key *v = realloc(k->v, cap * sizeof *v);
        if (!v) return false;
        k->v = v;
        k->cap = cap;
    }
    mv__page_key *e = &k->v[k->n++];
    mv_strlcpy(e->id, id ? id : "", sizeof e->id);
    e->created_at = created_at;
    e->size = size;
    return true;
}

/* Newest first by (createdAt, id), as the list statement orders them. */
static int newest_first(const void *a, const void *b) {
    const mv__page_key *x = a, *y = b;
    if (x->created_at != y->created_at) return x->created_at < y->created_at ? 1 : -1;
    return -strcmp(x->id, y->id);
}

/* The newest n messages after (*after_created, after_id) over every slice, appended to out. */
static mv_code merge_after(size_t slices, mv__slice_fetch fetch, void *ctx, int64_t after_created,
                           const char *after_id, int64_t n, mv__page_keys *out, mv_err *err) {
    mv__page_keys all = {0};
    mv_code rc = MV_OK;
    for (size_t s = 0; s < slices && rc == MV_OK; s++)
        rc = fetch(ctx, s, after_created, after_id, n, &all, err);
    if (rc == MV_OK) {
        if (all.n) qsort(all.v, all.n, sizeof *all.v, newest_first);
        int64_t kept = 0;
        for (size_t i = 0; i < all.n && kept < n && rc == MV_OK; i++) {
            if (i && strcmp(all.v[i].id, all.v[i - 1].id) == 0) continue;
            if (!mv__page_keys_add(out, all.v[i].id, all.v[i].created_at, all.v[i].size))
                rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
            kept++;
        }
    }
    free(all.v);
    return rc;
}

mv_code mv__visible_page(size_t slices, mv__slice_fetch fetch, void *ctx, int64_t after_created,
                         const char *after_id, int64_t skip, int64_t n, mv__page_keys *out,
                         mv_err *err) {
    char id[25];
    mv_strlcpy(id, after_id, sizeof id);
    /* `skip` walks forward in bounded batches: memory stays one batch per slice */
    while (skip > 0) {
        int64_t want = skip < 100 ? skip : 100;
        mv__page_keys batch = {0};
        mv_code rc = merge_after(slices, fetch, ctx, after_created, id, want, &batch, err);
        size_t got = batch.n;
        if (rc == MV_OK && got) {
            after_created = batch.v[got - 1].created_at;
            mv_strlcpy(id, batch.v[got - 1].id, sizeof id);
        }
        free(batch.v);
        if (rc != MV_OK) return rc;
        if ((int64_t)got < want) return MV_OK; /* fewer than skip messages: an empty page */
        skip -= want;
    }
    return merge_after(slices, fetch, ctx, after_created, id, n, out, err);
}
