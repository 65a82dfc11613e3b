/* stream_index_test.c — the stream hub's index and timer wheel: 2,000 streams of 200 users in
 * three tenants, with roles, filed and taken out in random order (some out early, as abrupt
 * closes are): a lookup by (tenant, user) or (tenant, role) finds exactly the streams filed under
 * it and never another tenant's, and once all are out the index holds no key and no node. The
 * wheel calls each deadline once, when due, and never one taken out. */
#include <stdlib.h>
#include <string.h>

#include "http/stream_index.h"
#include "test.h"

enum { USER, ROLE };

#define STREAMS 2000
#define USERS 200
#define TENANTS 3

typedef struct fake {
    int user, tenant, nroles, roles[3];
    bool filed;
    mv__sx_node keys[4];
    mv__sx_node timer;
    int fired;
} fake;

static void name_of(char *buf, size_t n, const char *prefix, int i) {
    snprintf(buf, n, "%s%d", prefix, i);
}

static const char *tenant_of(int t) {
    static const char *names[TENANTS] = {"default", "t2", "t3"};
    return names[t];
}

static void file(mv__stream_index *ix, fake *f) {
    char key[32];
    name_of(key, sizeof key, "user-", f->user);
    CHECK(mv__stream_index_add(ix, &f->keys[0], f, tenant_of(f->tenant), USER, key));
    for (int k = 0; k < f->nroles; k++) {
        name_of(key, sizeof key, "role-", f->roles[k]);
        CHECK(mv__stream_index_add(ix, &f->keys[k + 1], f, tenant_of(f->tenant), ROLE, key));
    }
    f->filed = true;
}

static void unfile(mv__stream_index *ix, fake *f) {
    for (int k = 0; k <= f->nroles; k++)
        mv__stream_index_remove(ix, &f->keys[k]);
    f->filed = false;
}

/* Every lookup finds exactly the filed streams that match it, each once. */
static void check_lookups(mv__stream_index *ix, fake *all) {
    static int seen[STREAMS];
    for (int t = 0; t < TENANTS; t++)
        for (int kind = USER; kind <= ROLE; kind++)
            for (int i = 0; i < (kind == USER ? USERS : 8); i++) {
                char key[32];
                name_of(key, sizeof key, kind == USER ? "user-" : "role-", i);
                memset(seen, 0, sizeof seen);
                const mv__sx_list *l = mv__stream_index_find(ix, tenant_of(t), kind, key);
                for (mv__sx_node *n = l ? l->first : NULL; n; n = n->next)
                    seen[(fake *)n->owner - all]++;
                int wrong = 0;
                for (int s = 0; s < STREAMS; s++) {
                    fake *f = &all[s];
                    bool match = f->filed && f->tenant == t &&
                                 (kind == USER ? f->user == i
                                               : (f->nroles > 0 && f->roles[0] == i) ||
                                                     (f->nroles > 1 && f->roles[1] == i) ||
                                                     (f->nroles > 2 && f->roles[2] == i));
                    wrong += seen[s] != (match ? 1 : 0);
                }
                CHECK_INT(wrong, 0);
            }
}

TEST(lookups_find_exactly_the_streams_of_a_tenants_user_or_role_and_nothing_is_left_after) {
    mv__stream_index *ix = mv__stream_index_new();
    REQUIRE(ix);
    fake *all = calloc(STREAMS, sizeof *all);
    srand(7);
    for (int s = 0; s < STREAMS; s++) {
        fake *f = &all[s];
        f->user = rand() % USERS;
        f->tenant = rand() % TENANTS;
        f->nroles = rand() % 4;
        for (int k = 0; k < f->nroles; k++) /* distinct roles of 8 */
            f->roles[k] = (f->user + k * 3) % 8;
    }
    size_t nodes = 0;
    for (int s = 0; s < STREAMS / 2; s++) {
        file(ix, &all[s]);
        nodes += 1 + (size_t)all[s].nroles;
    }
    for (int s = 0; s < STREAMS / 2; s += 3) { /* closed early, some of them just opened */
        unfile(ix, &all[s]);
        nodes -= 1 + (size_t)all[s].nroles;
    }
    for (int s = STREAMS / 2; s < STREAMS; s++) {
        file(ix, &all[s]);
        nodes += 1 + (size_t)all[s].nroles;
    }
    CHECK_INT((long)mv__stream_index_nodes(ix), (long)nodes);
    check_lookups(ix, all);
    /* another tenant's user of the same name is another key */
    CHECK(mv__stream_index_find(ix, "t9", USER, "user-1") == NULL);
    /* the rest go out in random order; a second removal changes nothing */
    int *order = malloc(STREAMS * sizeof *order);
    for (int s = 0; s < STREAMS; s++)
        order[s] = s;
    for (int s = STREAMS - 1; s > 0; s--) {
        int j = rand() % (s + 1), t = order[s];
        order[s] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < STREAMS; i++) {
        if (all[order[i]].filed) unfile(ix, &all[order[i]]);
        if (i % 500 == 0) check_lookups(ix, all);
    }
    free(order);
    unfile(ix, &all[0]);
    CHECK_INT((long)mv__stream_index_nodes(ix), 0);
    CHECK_INT((long)mv__stream_index_keys(ix), 0);
    check_lookups(ix, all);
    mv__stream_index_free(ix);
    free(all);
}

TEST(an_empty_key_is_filed_nowhere_and_freeing_the_index_releases_its_nodes) {
    mv__stream_index *ix = mv__stream_index_new();
    REQUIRE(ix);
    fake f = {0};
    CHECK(mv__stream_index_add(ix, &f.keys[0], &f, "default", USER, ""));
    CHECK(f.keys[0].list == NULL);
    CHECK(mv__stream_index_find(ix, "default", USER, "") == NULL);
    CHECK(mv__stream_index_add(ix, &f.keys[1], &f, "default", ROLE, "ops"));
    CHECK_INT((long)mv__stream_index_keys(ix), 1);
    mv__stream_index_free(ix); /* with a node still in it */
    CHECK(f.keys[1].list == NULL);
}

static void fired(void *owner, void *ctx) {
    (void)ctx;
    ((fake *)owner)->fired++;
}

typedef struct again_ctx {
    mv__sx_wheel *w;
    int64_t now;
} again_ctx;

static void fire_again(void *owner, void *ctx) {
    fake *f = owner;
    again_ctx *a = ctx;
    if (++f->fired < 3) mv__sx_wheel_add(a->w, &f->timer, f, a->now); /* "now": the next slot */
}

TEST(the_wheel_calls_each_deadline_once_when_due_and_never_one_taken_out) {
    mv__sx_wheel w;
    int64_t t0 = 1000000;
    mv__sx_wheel_init(&w, t0);
    fake f[5] = {0};
    mv__sx_wheel_add(&w, &f[0].timer, &f[0], t0 + 500);
    mv__sx_wheel_add(&w, &f[1].timer, &f[1], t0 + 15000);
    mv__sx_wheel_add(&w, &f[2].timer, &f[2], t0 + 3600 * 1000); /* beyond the horizon */
    mv__sx_wheel_add(&w, &f[3].timer, &f[3], t0 - 50);          /* already due: the next slot */
    mv__sx_wheel_add(&w, &f[4].timer, &f[4], t0 + 700);
    mv__sx_wheel_remove(&w, &f[4].timer);
    mv__sx_wheel_remove(&w, &f[4].timer); /* twice: nothing */
    int64_t now = t0 + 100;
    mv__sx_wheel_expire(&w, now, fired, &now);
    CHECK_INT(f[0].fired, 0);
    now = t0 + 2 * MV__WHEEL_GRAIN_MS;
    mv__sx_wheel_expire(&w, now, fired, &now);
    CHECK_INT(f[3].fired, 1);
    CHECK_INT(f[0].fired, 0);
    now = t0 + 500 + MV__WHEEL_GRAIN_MS;
    mv__sx_wheel_expire(&w, now, fired, &now);
    CHECK_INT(f[0].fired, 1);
    CHECK_INT(f[1].fired, 0);
    now = t0 + 15000 + MV__WHEEL_GRAIN_MS;
    mv__sx_wheel_expire(&w, now, fired, &now);
    CHECK_INT(f[1].fired, 1);
    CHECK_INT(f[2].fired, 0);
    now = t0 + 3600 * 1000; /* far later: the one past the horizon came due at it (early) */
    mv__sx_wheel_expire(&w, now, fired, &now);
    CHECK_INT(f[2].fired, 1);
    CHECK_INT(f[4].fired, 0);
    CHECK_INT(f[0].fired + f[1].fired + f[3].fired, 3);
    CHECK_INT((long)w.n, 0);
    /* a callback that files its stream again is called again in a later slot, not in a loop */
    again_ctx a = {&w, now};
    mv__sx_wheel_add(&w, &f[0].timer, &f[0], now);
    f[0].fired = 0;
    for (int i = 1; i <= 5; i++) {
        a.now = now + i * MV__WHEEL_GRAIN_MS;
        mv__sx_wheel_expire(&w, a.now, fire_again, &a);
        CHECK_INT(f[0].fired, i < 3 ? i : 3);
    }
    CHECK_INT((long)w.n, 0);
}

int main(void) {
    return RUN_TESTS(
        lookups_find_exactly_the_streams_of_a_tenants_user_or_role_and_nothing_is_left_after,
        an_empty_key_is_filed_nowhere_and_freeing_the_index_releases_its_nodes,
        the_wheel_calls_each_deadline_once_when_due_and_never_one_taken_out);
}
