/* malloc_count.c — an LD_PRELOAD counter of heap calls, for measuring allocations per request
 * (bench/list_cost). Not built by `make bench` (it has no main): bench/list_cost compiles it.
 *
 * malloc, calloc, realloc, free, posix_memalign, aligned_alloc and memalign are counted (relaxed
 * atomics) and passed to glibc's __libc_* functions. Every 20 ms a thread writes the totals to the
 * file named by MALLOC_COUNT_FILE — "mallocs frees" (mallocs: every call that allocates, including
 * calloc and realloc) — so a script reads them before and after a load run: a counter, not a
 * profiler, so its cost stays a few nanoseconds per call. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static atomic_ulong n_alloc, n_free;

void *malloc(size_t n) {
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b) {
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

void free(void *p) {
    if (p) atomic_fetch_add_explicit(&n_free, 1, memory_order_relaxed);
    __libc_free(p);
}

void *memalign(size_t al, size_t n) {
    atomic_fetch_add_explicit(&n_alloc, 1, memory_order_relaxed);
    return __libc_memalign(al, n);
}

void *aligned_alloc(size_t al, size_t n) { return memalign(al, n); }

int posix_memalign(void **out, size_t al, size_t n) {
    void *p = memalign(al, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

static void *writer(void *arg) {
    int fd = (int)(long)arg;
    for (;;) {
        char line[64];
        int len = snprintf(line, sizeof line, "%20lu %20lu\n", atomic_load(&n_alloc),
                           atomic_load(&n_free));
        if (pwrite(fd, line, (size_t)len, 0) < 0) break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

__attribute__((constructor)) static void start(void) {
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &at, writer, (void *)(long)fd);
    pthread_attr_destroy(&at);
}
