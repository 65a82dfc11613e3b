/* mono.h — milliseconds on the monotonic clock: for timeouts, pauses and rate limits inside the
 * process, never stored and never compared with wall-clock times. */
#ifndef MV_BASE_MONO_H
#define MV_BASE_MONO_H

#include <stdint.h>
#include <time.h>

static inline int64_t mv__mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
