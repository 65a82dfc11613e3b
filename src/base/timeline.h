/* base/timeline.h — entries of the admin timelines (message/admin.c, durable/timeline_admin.c):
 * {"at", "event", "actor", "attempt", "step", "outcome", "detail"}, absent strings as null. */
#ifndef MV_BASE_TIMELINE_H
#define MV_BASE_TIMELINE_H

#include <jansson.h>
#include <stdint.h>

/* Appends one entry to entries (an array); NULL strings become null. */
void mv__timeline_add(json_t *entries, int64_t at, const char *event, const char *actor,
                      const char *attempt, const char *step, const char *outcome,
                      const char *detail);
/* A new array of entries' items sorted by "at", equal times in their order; NULL when out of
 * memory. */
json_t *mv__timeline_sorted(json_t *entries);

#endif
