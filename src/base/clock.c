/* clock.c — milliseconds since the epoch, and the injectable clock used for leases and expiry. */
#include <time.h>

#include "missive/base.h"

int64_t mv_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mv_clock_now(const mv_clock *clock) {
    return (clock && clock->now) ? clock->now(clock->ctx) : mv_now_ms();
}

void mv_sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int64_t manual_now(void *ctx) { return *(int64_t *)ctx; }

mv_clock mv_manual_clock(int64_t *now_ms) { return (mv_clock){.now = manual_now, .ctx = now_ms}; }
