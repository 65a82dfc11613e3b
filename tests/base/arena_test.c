/* arena_test.c — the arena (base/arena.h): alignment, growth past a block and oversized
 * allocations, the limit (a clear failure, then usable again after a reset), reset and free
 * running cleanups newest first, NULL-safety, and — in an AddressSanitizer build — the bytes after
 * an allocation and the memory of a reset arena poisoned. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <stdio.h>

#include "base/arena.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#endif

TEST(every_allocation_is_aligned_for_any_type_and_zeroed) {
    mv_arena *a = mv_arena_new();
    REQUIRE(a);
    for (size_t n = 0; n < 300; n++) {
        unsigned char *p = mv_arena_alloc(a, n);
        REQUIRE(p);
        CHECK_INT((uintptr_t)p % _Alignof(max_align_t), 0);
        size_t zero = 0;
        for (size_t i = 0; i < n; i++)
            zero += p[i] == 0;
        CHECK_INT(zero, n);
        memset(p, 0xAB, n); /* dirty it: the next allocation must come back zeroed anyway */
    }
    mv_arena_free(a);
}

TEST(the_arena_grows_past_a_block_and_keeps_every_allocation) {
    mv_arena *a = mv_arena_new();
    REQUIRE(a);
    char *strings[2000];
    for (int i = 0; i < 2000; i++) {
        strings[i] = mv_arena_printf(a, "string number %d", i);
        REQUIRE(strings[i]);
    }
    char *big = mv_arena_alloc(a, 100000); /* larger than a block: a block of its own */
    REQUIRE(big);
    memset(big, 'x', 100000);
    char *after = mv_arena_strdup(a, "after the big one");
    int intact = 0;
    for (int i = 0; i < 2000; i++) {
        char want[32];
        snprintf(want, sizeof want, "string number %d", i);
        intact += strcmp(strings[i], want) == 0;
    }
    CHECK_INT(intact, 2000);
    CHECK_STR(after, "after the big one");
    CHECK_STR(mv_arena_strndup(a, "abcdef", 3), "abc");
    CHECK(mv_arena_strdup(a, NULL) == NULL);
    mv_arena_free(a);
}

TEST(an_allocation_past_the_limit_fails_clearly_and_a_reset_clears_it) {
    mv_arena *a = mv_arena_new();
    REQUIRE(a);
    mv_arena_set_limit(a, 32 * 1024);
    CHECK(!mv_arena_exhausted(a));
    CHECK(mv_arena_alloc(a, 100) != NULL); /* the first block is always allowed */
    CHECK(mv_arena_alloc(a, 16 * 1024) != NULL);
    CHECK(mv_arena_alloc(a, 64 * 1024) == NULL); /* would pass 32 KiB */
    CHECK(mv_arena_exhausted(a));
    int n = 0;
    while (n < 100000 && mv_arena_alloc(a, 1000))
        n++;
    CHECK(n > 0 && n < 40); /* small allocations go on until the limit, then stop */
    mv_arena_reset(a);
    CHECK(!mv_arena_exhausted(a));
    CHECK(mv_arena_alloc(a, 16 * 1024) != NULL);
    mv_arena_free(a);
}

static int order[8], norder;
static void record(void *p) { order[norder++] = (int)(intptr_t)p; }

TEST(reset_and_free_run_the_cleanups_newest_first_and_free_is_null_safe) {
    mv_arena *a = mv_arena_new();
    REQUIRE(a);
    norder = 0;
    CHECK(mv_arena_defer(a, record, (void *)(intptr_t)1));
    CHECK(mv_arena_defer(a, record, (void *)(intptr_t)2));
    mv_arena_reset(a);
    CHECK_INT(norder, 2);
    CHECK_INT(order[0], 2);
    CHECK_INT(order[1], 1);
    char *s = mv_arena_strdup(a, "reused"); /* the kept block serves again */
    CHECK_STR(s, "reused");
    CHECK(mv_arena_defer(a, record, (void *)(intptr_t)3));
    json_t *v = mv_arena_json(a, json_string("held until the end"));
    CHECK(v != NULL);
    mv_arena_free(a);
    CHECK_INT(norder, 3);
    CHECK_INT(order[2], 3);
    mv_arena_free(NULL);
    mv_arena_reset(NULL);
    CHECK(mv_arena_json(NULL, NULL) == NULL);
}

TEST(under_asan_the_bytes_past_an_allocation_and_a_reset_arena_are_poisoned) {
#ifdef HAVE_ASAN
    mv_arena *a = mv_arena_new();
    REQUIRE(a);
    char *s = mv_arena_strdup(a, "twelve bytes");
    REQUIRE(s);
    CHECK(!__asan_address_is_poisoned(s + 12)); /* the NUL */
    CHECK(__asan_address_is_poisoned(s + 13));  /* one past the end */
    char *t = mv_arena_alloc(a, 40);
    CHECK(__asan_address_is_poisoned(t + 40));
    mv_arena_reset(a);
    CHECK(__asan_address_is_poisoned(s)); /* the last request's strings are gone */
    mv_arena_free(a);
#else
    /* without AddressSanitizer there is nothing to see; the ASan build (make asan) runs this */
    CHECK(1);
#endif
}

int main(void) {
    return RUN_TESTS(every_allocation_is_aligned_for_any_type_and_zeroed,
                     the_arena_grows_past_a_block_and_keeps_every_allocation,
                     an_allocation_past_the_limit_fails_clearly_and_a_reset_clears_it,
                     reset_and_free_run_the_cleanups_newest_first_and_free_is_null_safe,
                     under_asan_the_bytes_past_an_allocation_and_a_reset_arena_are_poisoned);
}
