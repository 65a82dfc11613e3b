/* timeline.c — the entries of an operator's timeline (a message's, a saga's): one shape, sorted
 * by time with ties kept in the order they were found. */
#include <stdlib.h>

#include "base/timeline.h"

void mv__timeline_add(json_t *entries, int64_t at, const char *event, const char *actor,
                      const char *attempt, const char *step, const char *outcome,
                      const char *detail) {
    json_array_append_new(entries,
                          json_pack("{s:I,s:s,s:s?,s:s?,s:s?,s:s?,s:s?}", "at", (json_int_t)at,
                                    "event", event, "actor", actor, "attempt", attempt, "step",
                                    step, "outcome", outcome, "detail", detail));
}

static int by_time(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t p = json_integer_value(json_object_get(x, "at")),
               q = json_integer_value(json_object_get(y, "at"));
    if (p != q) return p < q ? -1 : 1;
    json_int_t i = json_integer_value(json_object_get(x, "_n")),
               j = json_integer_value(json_object_get(y, "_n"));
    return i < j ? -1 : i > j;
}

json_t *mv__timeline_sorted(json_t *entries) {
    size_t n = json_array_size(entries);
    json_t **v = n ? calloc(n, sizeof *v) : NULL;
    json_t *out = json_array();
    if ((n && !v) || !out) {
        free(v);
        json_decref(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        v[i] = json_array_get(entries, i);
        json_object_set_new(v[i], "_n", json_integer((json_int_t)i));
    }
    if (n) qsort(v, n, sizeof *v, by_time);
    for (size_t i = 0; i < n; i++) {
        json_object_del(v[i], "_n");
        json_array_append(out, v[i]);
    }
    free(v);
    return out;
}
