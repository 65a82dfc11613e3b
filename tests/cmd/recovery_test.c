/* recovery_test.c — the recovery loop with real daemons killed with SIGKILL mid-saga, on both
 * stores (one daemon restarted) and on PostgreSQL with three daemons sharing the database:
 *
 * - a saga whose runner died inside a step call is taken by another runner once the runner lease
 *   has expired (within lease + recovery interval) and sent to manual review, the step that was in
 *   flight not sent again (the engine cannot know whether it committed);
 * - a saga whose runner died while its compensation waited for a backoff is compensated to the
 *   end by whoever looks next, each compensation attempt sent once, even with three daemons
 *   looking at once. */
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"

#define LEASE_MS 1500
#define INTERVAL_MS 200

typedef struct {
    int step1, step2, undo1, undo2;
    int step1_delay_ms; /* hang step1 (the daemon is killed meanwhile) */
    bool step2_rejects; /* 400: the saga compensates */
} far_side;

static void sink_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    far_side *f = ctx;
    res->status = 200;
    res->body = "{\"ok\": true}";
    if (strcmp(req->path, "/step1") == 0) {
        __atomic_fetch_add(&f->step1, 1, __ATOMIC_SEQ_CST);
        res->delay_ms = f->step1_delay_ms;
    } else if (strcmp(req->path, "/step2") == 0) {
        __atomic_fetch_add(&f->step2, 1, __ATOMIC_SEQ_CST);
        if (f->step2_rejects) res->status = 400;
    } else if (strcmp(req->path, "/undo1") == 0) {
        /* every saga's first compensation attempt fails: it waits for its backoff */
        __atomic_fetch_add(&f->undo1, 1, __ATOMIC_SEQ_CST);
        json_t *b = json_loads(req->body, 0, NULL);
        if (json_integer_value(json_object_get(b, "attempt")) == 1) res->status = 500;
        json_decref(b);
    } else if (strcmp(req->path, "/undo2") == 0) {
        __atomic_fetch_add(&f->undo2, 1, __ATOMIC_SEQ_CST);
    }
}

static int load(int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

typedef struct {
    char dir[600], config[700];
    const char *store;
    http_sink *sink;
    far_side far;
} world;

static bool world_open(world *w, const char *kind, const char *name) {
    memset(w, 0, sizeof *w);
    if (!(w->store = test_store_url(kind, name))) return false;
    if (!(w->sink = http_sink_start())) return false;
    http_sink_set_handler(w->sink, sink_handler, &w->far);
    const char *u = http_sink_url(w->sink);
    char label[128];
    snprintf(label, sizeof label, "%s-%s", name, kind);
    snprintf(w->dir, sizeof w->dir, "%s", test_tmp_path(label));
    char path[800];
    snprintf(path, sizeof path, "%s/sagas", w->dir);
    if (mkdir(w->dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/sagas/fulfil.json", w->dir);
    if (!test_write_file(path,
                         "{\"name\": \"fulfil\", \"capability\": \"orders.fulfil\","
                         " \"retry\": {\"maxAttempts\": 3, \"backoffMs\": {\"initial\": 300}},"
                         " \"steps\": [{\"name\": \"step1\", \"run\": {\"webhook\": \"%s/step1\"},"
                         "   \"compensate\": {\"webhook\": \"%s/undo1\"}},"
                         "  {\"name\": \"step2\", \"run\": {\"webhook\": \"%s/step2\"},"
                         "   \"compensate\": {\"webhook\": \"%s/undo2\"}}]}",
                         u, u, u, u))
        return false;
    snprintf(w->config, sizeof w->config, "%s/missived.json", w->dir);
    return test_write_file(w->config,
                           "{\"sagas\": \"%s/sagas\", \"auth\": {\"mode\": \"headers\"},"
                           " \"leases\": {\"actionMs\": %d},"
                           " \"webhooks\": {\"timeoutMs\": 1000, \"connectTimeoutMs\": 500},"
                           " \"recovery\": {\"intervalMs\": %d}}",
                           w->dir, LEASE_MS, INTERVAL_MS);
}

static void world_close(world *w) { http_sink_stop(w->sink); }

static const char ADMIN[] = "X-User-Id: ops\nX-User-Permissions: is.admin\n";

/* The saga's state as GET /sagas/{id} tells it ("" when it cannot be read). */
static const char *saga_state(int port, const char *id, char out[32]) {
    char path[256];
    snprintf(path, sizeof path, "/sagas/%s", id);
    test_reply r = test_http(port, "GET", path, ADMIN, NULL);
    snprintf(out, 32, "%s", mv_json_str(r.json, "state") ? mv_json_str(r.json, "state") : "");
    test_reply_free(&r);
    return out;
}

/* Waits until the saga is in state (asking port), at most timeout_ms; returns the time taken or
 * -1. */
static int64_t wait_state(int port, const char *id, const char *state, int timeout_ms) {
    int64_t start = mv_now_ms();
    char now[32];
    while (mv_now_ms() - start < timeout_ms) {
        if (strcmp(saga_state(port, id, now), state) == 0) return mv_now_ms() - start;
        mv_sleep_ms(50);
    }
    fprintf(stderr, "saga %s still \"%s\", not \"%s\"\n", id, now, state);
    return -1;
}

typedef struct {
    int port;
    const char *id;
} start_arg;

/* POST /sagas/fulfil on a thread: its daemon may be killed before it answers. */
static void *start_saga(void *p) {
    start_arg *a = p;
    char body[256];
    snprintf(body, sizeof body, "{\"sagaId\": \"%s\", \"input\": {\"order\": 7}}", a->id);
    test_reply r = test_http(a->port, "POST", "/sagas/fulfil", ADMIN, body);
    test_reply_free(&r);
    return NULL;
}

static void kill9(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

STORE_TEST(a_saga_whose_daemon_was_killed_inside_a_step_goes_to_review_after_a_restart) {
    world w;
    REQUIRE(world_open(&w, kind, "recover1"));
    w.far.step1_delay_ms = 800; /* answered after the kill: the call is in doubt */
    int port = test_free_port();
    char log[700];
    snprintf(log, sizeof log, "%s/d1.log", w.dir);
    pid_t pid = test_daemon_start(w.config, port, w.store, log);
    REQUIRE(pid > 0);
    pthread_t t;
    start_arg a = {port, "order-7"};
    pthread_create(&t, NULL, start_saga, &a);
    REQUIRE(http_sink_wait(w.sink, 1, 5000)); /* step1 is on the wire */
    kill9(pid);
    pthread_join(t, NULL);

    int64_t killed_at = mv_now_ms();
    snprintf(log, sizeof log, "%s/d2.log", w.dir);
    pid = test_daemon_start(w.config, port, w.store, log);
    REQUIRE(pid > 0);
    char state[32];
    CHECK_STR(saga_state(port, "order-7", state), "running"); /* the lease still holds it */
    CHECK(wait_state(port, "order-7", "manual-review", LEASE_MS + INTERVAL_MS + 3000) >= 0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS); /* later passes leave a saga in review alone */
    CHECK_INT(load(&w.far.step1), 1);
    CHECK_INT(load(&w.far.step2), 0);
    CHECK_INT(load(&w.far.undo1), 0);
    /* the operator's list shows it */
    test_reply r = test_http(port, "GET", "/sagas?state=manual-review", ADMIN, NULL);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(r.json, "sagas"), 0), "sagaId"),
              "order-7");
    test_reply_free(&r);
    CHECK_INT(test_daemon_stop(pid), 0);
    world_close(&w);
}

STORE_TEST(a_compensation_left_waiting_by_a_killed_daemon_is_finished_after_a_restart) {
    world w;
    REQUIRE(world_open(&w, kind, "recover2"));
    w.far.step2_rejects = true;
    int port = test_free_port();
    pid_t pid = test_daemon_start(w.config, port, w.store, NULL);
    REQUIRE(pid > 0);
    start_arg a = {port, "order-8"};
    start_saga(&a); /* step1 ok, step2 400, undo1 500: compensating, next attempt in 300 ms */
    char state[32];
    CHECK_STR(saga_state(port, "order-8", state), "compensating");
    kill9(pid);
    int64_t killed_at = mv_now_ms();
    pid = test_daemon_start(w.config, port, w.store, NULL);
    REQUIRE(pid > 0);
    CHECK(wait_state(port, "order-8", "compensated", LEASE_MS + INTERVAL_MS + 3000) >= 0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS);
    CHECK_INT(load(&w.far.step1), 1);
    CHECK_INT(load(&w.far.step2), 1);
    CHECK_INT(load(&w.far.undo1), 2); /* the failed attempt, then the one recovery sent */
    CHECK_INT(load(&w.far.undo2), 0); /* step2 never committed */
    CHECK_INT(test_daemon_stop(pid), 0);
    world_close(&w);
}

/* ---- three daemons on one PostgreSQL --------------------------------------------------------- */

#define DAEMONS 3

static bool start_all(world *w, int ports[DAEMONS], pid_t pids[DAEMONS]) {
    for (int i = 0; i < DAEMONS; i++) {
        ports[i] = test_free_port();
        char log[700];
        snprintf(log, sizeof log, "%s/d%d.log", w->dir, i);
        if ((pids[i] = test_daemon_start(w->config, ports[i], w->store, log)) <= 0) return false;
    }
    return true;
}

POSTGRES_TEST(three_daemons_one_killed_inside_a_step_another_takes_the_saga_once) {
    world w;
    REQUIRE(world_open(&w, kind, "recover3"));
    w.far.step1_delay_ms = 800;
    int ports[DAEMONS];
    pid_t pids[DAEMONS];
    REQUIRE(start_all(&w, ports, pids));
    pthread_t t;
    start_arg a = {ports[0], "order-9"};
    pthread_create(&t, NULL, start_saga, &a);
    REQUIRE(http_sink_wait(w.sink, 1, 5000));
    kill9(pids[0]);
    pthread_join(t, NULL);
    int64_t killed_at = mv_now_ms();
    CHECK(wait_state(ports[1], "order-9", "manual-review", LEASE_MS + INTERVAL_MS + 3000) >= 0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS);
    CHECK_INT(load(&w.far.step1), 1);
    CHECK_INT(load(&w.far.step2), 0);
    char state[32];
    CHECK_STR(saga_state(ports[2], "order-9", state), "manual-review");
    for (int i = 1; i < DAEMONS; i++)
        CHECK_INT(test_daemon_stop(pids[i]), 0);
    world_close(&w);
}

POSTGRES_TEST(three_daemons_finish_a_killed_daemons_compensation_each_attempt_once) {
    world w;
    REQUIRE(world_open(&w, kind, "recover4"));
    w.far.step2_rejects = true;
    int ports[DAEMONS];
    pid_t pids[DAEMONS];
    REQUIRE(start_all(&w, ports, pids));
    /* several sagas at once, so the three loops race for each of them */
    const char *ids[] = {"order-a", "order-b", "order-c", "order-d"};
    for (int i = 0; i < 4; i++) {
        start_arg a = {ports[0], ids[i]};
        start_saga(&a);
        char state[32];
        CHECK_STR(saga_state(ports[0], ids[i], state), "compensating");
    }
    kill9(pids[0]);
    int64_t killed_at = mv_now_ms();
    int undo_before = load(&w.far.undo1); /* each saga's failed first attempt */
    CHECK_INT(undo_before, 4);
    for (int i = 0; i < 4; i++)
        CHECK(wait_state(ports[1 + i % 2], ids[i], "compensated", LEASE_MS + INTERVAL_MS + 3000) >=
              0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS);
    CHECK_INT(load(&w.far.undo1), undo_before + 4); /* one successful attempt per saga */
    CHECK_INT(load(&w.far.step1), 4);
    CHECK_INT(load(&w.far.step2), 4);
    CHECK_INT(load(&w.far.undo2), 0);
    for (int i = 1; i < DAEMONS; i++)
        CHECK_INT(test_daemon_stop(pids[i]), 0);
    world_close(&w);
}

int main(void) {
    return RUN_TESTS(a_saga_whose_daemon_was_killed_inside_a_step_goes_to_review_after_a_restart,
                     a_compensation_left_waiting_by_a_killed_daemon_is_finished_after_a_restart,
                     three_daemons_one_killed_inside_a_step_another_takes_the_saga_once,
                     three_daemons_finish_a_killed_daemons_compensation_each_attempt_once);
}
