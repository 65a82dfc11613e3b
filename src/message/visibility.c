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

/* Newest first by (createdAt, id), as the list statement orders them. */
static int newest_first(const void *a, const void *b) {
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    json_int_t tx = json_integer_value(json_object_get(x, "createdAt"));
    json_int_t ty = json_integer_value(json_object_get(y, "createdAt"));
    if (tx != ty) return tx < ty ? 1 : -1;
    const char *ix = mv_json_str(x, "id"), *iy = mv_json_str(y, "id");
    return -strcmp(ix ? ix : "", iy ? iy : "");
}

/* The newest n messages after (*after_created, after_id) over every slice, appended to out. */
static mv_code merge_after(size_t slices, mv__slice_fetch fetch, void *ctx, int64_t after_created,
                           const char *after_id, int64_t n, json_t *out, mv_err *err) {
    json_t *all = json_array();
    if (!all) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = MV_OK;
    for (size_t s = 0; s < slices && rc == MV_OK; s++)
        rc = fetch(ctx, s, after_created, after_id, n, all, err);
    size_t total = json_array_size(all);
    json_t **v = total ? malloc(total * sizeof *v) : NULL;
    if (rc == MV_OK && total && !v) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) {
        for (size_t i = 0; i < total; i++)
            v[i] = json_array_get(all, i);
        if (total) qsort(v, total, sizeof *v, newest_first);
        int64_t kept = 0;
        for (size_t i = 0; i < total && kept < n; i++) {
            if (i && strcmp(mv_json_str(v[i], "id"), mv_json_str(v[i - 1], "id")) == 0) continue;
            json_array_append(out, v[i]);
            kept++;
        }
    }
    free(v);
    json_decref(all);
    return rc;
}

mv_code mv__visible_page(size_t slices, mv__slice_fetch fetch, void *ctx, int64_t after_created,
                         const char *after_id, int64_t skip, int64_t n, json_t *out, mv_err *err) {
    char id[25];
    mv_strlcpy(id, after_id, sizeof id);
    /* `skip` walks forward in bounded batches: memory stays one batch per slice */
    while (skip > 0) {
        int64_t want = skip < 100 ? skip : 100;
        json_t *batch = json_array();
        if (!batch) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        mv_code rc = merge_after(slices, fetch, ctx, after_created, id, want, batch, err);
        size_t got = json_array_size(batch);
        if (rc == MV_OK && got) {
            json_t *last = json_array_get(batch, got - 1);
            after_created = json_integer_value(json_object_get(last, "createdAt"));
            mv_strlcpy(id, mv_json_str(last, "id"), sizeof id);
        }
        json_decref(batch);
        if (rc != MV_OK) return rc;
        if ((int64_t)got < want) return MV_OK; /* fewer than skip messages: an empty page */
        skip -= want;
    }
    return merge_after(slices, fetch, ctx, after_created, id, n, out, err);
}
