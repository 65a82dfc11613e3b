/* registry_test.c — the registry's lock-free lookups against its writers: a swap (what a reload
 * does) is seen whole by finds running on other threads, never half of one set and half of the
 * other; templates replaced, removed or swapped out stay valid until their finder releases them;
 * and the registries hold exactly their own references afterwards. Meant for ThreadSanitizer as
 * much as for the default build. */
#include <pthread.h>
#include <stdatomic.h>

#include "missive/template.h"
#include "test.h"

/* A template whose type names its generation ("old" or "new"). */
static mv_template *make(const char *code, const char *generation) {
    char text[256];
    snprintf(text, sizeof text, "{\"templateCd\": \"%s\", \"type\": \"%s\", \"actions\": []}", code,
             generation);
    json_t *j = json_loads(text, 0, NULL);
    mv_template *t = NULL;
    mv_template_parse(j, "<test>", &t, NULL);
    json_decref(j);
    return t;
}

static mv_registry *filled(const char *generation, int n) {
    mv_registry *reg = mv_registry_new();
    for (int i = 0; reg && i < n; i++) {
        char code[16];
        snprintf(code, sizeof code, "t%d", i);
        mv_template *t = make(code, generation);
        mv_registry_put(reg, t);
        mv_template_release(t);
    }
    return reg;
}

typedef struct reader {
    pthread_t thread;
    mv_registry *reg;
    atomic_bool *stop;
    atomic_long finds;
    long mixed, missing;
} reader;

/* Finds t0 and t1 and counts again and again while the main thread swaps: every find succeeds
 * (both sets have them), every count is one set's (3 or 4, never a table half built), and every
 * template handed out is readable (its type one of the two generations, not freed memory). */
static void *read_loop(void *arg) {
    reader *r = arg;
    while (!atomic_load(r->stop)) {
        mv_template *a = mv_registry_find(r->reg, "t0"), *b = mv_registry_find(r->reg, "t1");
        atomic_fetch_add(&r->finds, 2);
        if (!a || !b)
            r->missing++;
        else if (strcmp(a->type, "old") != 0 && strcmp(a->type, "new") != 0)
            r->mixed++; /* a freed or torn template */
        size_t n = mv_registry_count(r->reg);
        if (n != 3 && n != 4) r->missing++;
        mv_template_release(a);
        mv_template_release(b);
    }
    return NULL;
}

TEST(finds_on_other_threads_see_every_swap_whole_and_never_a_freed_template) {
    mv_registry *live = filled("old", 3), *fresh = filled("new", 4);
    REQUIRE(live && fresh);
    atomic_bool stop = false;
    reader r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (reader){.reg = live, .stop = &stop};
        REQUIRE(pthread_create(&r[i].thread, NULL, read_loop, &r[i]) == 0);
    }
    mv_template *held = mv_registry_find(live, "t2"); /* found before any swap */
    /* at least 2000 swaps (an even number), and until every reader has done its share of finds */
    for (int round = 0;; round++) {
        bool busy = true;
        for (int i = 0; i < 4; i++)
            busy = busy && atomic_load(&r[i].finds) >= 2000;
        if (round >= 2000 && round % 2 == 0 && busy) break;
        mv_registry_swap(live, fresh);
        if (round % 100 == 0) { /* a put and a remove among the swaps, on the spare set */
            mv_template *t = make("t9", "new");
            mv_registry_put(fresh, t);
            mv_template_release(t);
            CHECK(mv_registry_remove(fresh, "t9"));
        }
    }
    atomic_store(&stop, true);
    long finds = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(r[i].thread, NULL);
        CHECK_INT(r[i].missing, 0);
        CHECK_INT(r[i].mixed, 0);
        finds += atomic_load(&r[i].finds);
    }
    CHECK(finds > 0);
    /* an even number of swaps: back where it started */
    CHECK_INT(mv_registry_count(live), 3);
    CHECK_INT(mv_registry_count(fresh), 4);
    mv_template *t0 = mv_registry_find(live, "t0");
    CHECK_STR(t0 ? t0->type : NULL, "old");
    mv_template_release(t0);
    /* one more: the old set moves out, and freeing it leaves our template valid */
    mv_registry_swap(live, fresh);
    mv_registry_free(fresh);
    CHECK_STR(held->type, "old");
    CHECK_INT(held->refs_, 1); /* ours is the last reference */
    mv_template_release(held);
    t0 = mv_registry_find(live, "t3");
    CHECK_STR(t0 ? t0->type : NULL, "new");
    mv_template_release(t0);
    mv_registry_free(live);
}

TEST(a_swap_with_an_empty_registry_empties_it_and_keeps_the_order_of_the_other) {
    mv_registry *a = filled("old", 3), *b = mv_registry_new();
    REQUIRE(a && b);
    mv_registry_swap(a, b);
    CHECK_INT(mv_registry_count(a), 0);
    CHECK(!mv_registry_has(a, "t0"));
    json_t *codes = mv_registry_codes(b);
    char *s = json_dumps(codes, JSON_COMPACT);
    CHECK_STR(s, "[\"t0\",\"t1\",\"t2\"]");
    free(s);
    json_decref(codes);
    mv_registry_swap(a, a); /* with itself: nothing */
    mv_registry_swap(a, NULL);
    CHECK_INT(mv_registry_count(b), 3);
    mv_registry_free(a);
    mv_registry_free(b);
}

int main(void) {
    return RUN_TESTS(finds_on_other_threads_see_every_swap_whole_and_never_a_freed_template,
                     a_swap_with_an_empty_registry_empties_it_and_keeps_the_order_of_the_other);
}
