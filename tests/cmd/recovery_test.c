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

#define MAX_SAGAS 4

/* What the far side saw, counted per saga of this test. It lives on the heap and outlives a test
 * that stops early (a failed REQUIRE leaves its sink and daemons behind): a sink context on the
 * stack would be the next test's `world` (same frame), which then counted the other test's calls.
 */
typedef struct {
    int step1, step2, undo1, undo2;
    int step1_delay_ms;      /* hang step1 (the daemon is killed meanwhile) */
    bool step2_rejects;      /* 400: the saga compensates */
    char ids[MAX_SAGAS][32]; /* the sagas this test starts (copied: the sink may outlive it) */
    int step1_of[MAX_SAGAS], step2_of[MAX_SAGAS], undo1_of[MAX_SAGAS];
    int strays; /* calls for a saga this test did not start */
} far_side;

static int saga_index(far_side *f, const http_sink_request *req) {
    json_t *b = json_loads(req->body ? req->body : "", 0, NULL);
    const char *id = json_string_value(json_object_get(b, "sagaId"));
    int found = -1;
    for (int i = 0; id && i < MAX_SAGAS && found < 0; i++)
        if (f->ids[i][0] && strcmp(f->ids[i], id) == 0) found = i;
    json_decref(b);
    return found;
}

static void sink_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    far_side *f = ctx;
    res->status = 200;
    res->body = "{\"ok\": true}";
    int k = saga_index(f, req);
    if (k < 0) {
        __atomic_fetch_add(&f->strays, 1, __ATOMIC_SEQ_CST);
        return;
    }
    if (strcmp(req->path, "/step1") == 0) {
        __atomic_fetch_add(&f->step1_of[k], 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&f->step1, 1, __ATOMIC_SEQ_CST);
        res->delay_ms = f->step1_delay_ms;
    } else if (strcmp(req->path, "/step2") == 0) {
        __atomic_fetch_add(&f->step2_of[k], 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&f->step2, 1, __ATOMIC_SEQ_CST);
        if (f->step2_rejects) res->status = 400;
    } else if (strcmp(req->path, "/undo1") == 0) {
        /* every saga's first compensation attempt fails: it waits for its backoff */
        __atomic_fetch_add(&f->undo1_of[k], 1, __ATOMIC_SEQ_CST);
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
    far_side *far;
} world;

/* The daemons started by the current test: a test that stops early (failed REQUIRE) leaves them
 * running, and the next test's world_open kills them before anything else starts. */
static pid_t live[8];
static int nlive;

static pid_t daemon_start(const world *w, int port, const char *log) {
    pid_t pid = test_daemon_start(w->config, port, w->store, log);
    if (pid > 0 && nlive < 8) live[nlive++] = pid;
    return pid;
}

static void kill_leftovers(void) {
    for (int i = 0; i < nlive; i++)
        if (kill(live[i], 0) == 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
        }
    nlive = 0;
}

/* ids: the sagas the test starts (NULL-terminated, at most MAX_SAGAS). */
static bool world_open(world *w, const char *kind, const char *name, const char *const *ids) {
    kill_leftovers();
    memset(w, 0, sizeof *w);
    if (!(w->far = calloc(1, sizeof *w->far))) return false; /* freed by world_close only */
    for (int i = 0; ids[i] && i < MAX_SAGAS; i++)
        mv_strlcpy(w->far->ids[i], ids[i], sizeof w->far->ids[i]);
    if (!(w->store = test_store_url(kind, name))) return false;
    if (!(w->sink = http_sink_start())) return false;
    http_sink_set_handler(w->sink, sink_handler, w->far);
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

static void world_close(world *w) {
    http_sink_stop(w->sink);
    free(w->far);
    nlive = 0; /* every daemon was stopped or killed and reaped */
}

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
    REQUIRE(world_open(&w, kind, "recover1", (const char *const[]){"order-7", NULL}));
    w.far->step1_delay_ms = 800; /* answered after the kill: the call is in doubt */
    int port = test_free_port();
    char log[700];
    snprintf(log, sizeof log, "%s/d1.log", w.dir);
    pid_t pid = daemon_start(&w, port, log);
    REQUIRE(pid > 0);
    pthread_t t;
    start_arg a = {port, "order-7"};
    pthread_create(&t, NULL, start_saga, &a);
    REQUIRE(http_sink_wait(w.sink, 1, 5000)); /* step1 is on the wire */
    kill9(pid);
    pthread_join(t, NULL);

    int64_t killed_at = mv_now_ms();
    snprintf(log, sizeof log, "%s/d2.log", w.dir);
    pid = daemon_start(&w, port, log);
    REQUIRE(pid > 0);
    char state[32];
    CHECK_STR(saga_state(port, "order-7", state), "running"); /* the lease still holds it */
    CHECK(wait_state(port, "order-7", "manual-review", LEASE_MS + INTERVAL_MS + 3000) >= 0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS); /* later passes leave a saga in review alone */
    CHECK_INT(load(&w.far->step1), 1);
    CHECK_INT(load(&w.far->step2), 0);
    CHECK_INT(load(&w.far->undo1), 0);
    /* the operator's list shows it */
    test_reply r = test_http(port, "GET", "/sagas?state=manual-review", ADMIN, NULL);
    CHECK_INT(load(&w.far->strays), 0);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(r.json, "sagas"), 0), "sagaId"),
              "order-7");
    test_reply_free(&r);
    CHECK_INT(test_daemon_stop(pid), 0);
    world_close(&w);
}

STORE_TEST(a_compensation_left_waiting_by_a_killed_daemon_is_finished_after_a_restart) {
    world w;
    REQUIRE(world_open(&w, kind, "recover2", (const char *const[]){"order-8", NULL}));
    w.far->step2_rejects = true;
    int port = test_free_port();
    pid_t pid = daemon_start(&w, port, NULL);
    REQUIRE(pid > 0);
    start_arg a = {port, "order-8"};
    start_saga(&a); /* step1 ok, step2 400, undo1 500: compensating, next attempt in 300 ms */
    char state[32];
    CHECK_STR(saga_state(port, "order-8", state), "compensating");
    kill9(pid);
    int64_t killed_at = mv_now_ms();
    pid = daemon_start(&w, port, NULL);
    REQUIRE(pid > 0);
    CHECK(wait_state(port, "order-8", "compensated", LEASE_MS + INTERVAL_MS + 3000) >= 0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS);
    CHECK_INT(load(&w.far->step1), 1);
    CHECK_INT(load(&w.far->step2), 1);
    CHECK_INT(load(&w.far->undo1), 2); /* the failed attempt, then the one recovery sent */
    CHECK_INT(load(&w.far->strays), 0);
    CHECK_INT(load(&w.far->undo2), 0); /* step2 never committed */
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
        if ((pids[i] = daemon_start(w, ports[i], log)) <= 0) return false;
    }
    return true;
}

POSTGRES_TEST(three_daemons_one_killed_inside_a_step_another_takes_the_saga_once) {
    world w;
    REQUIRE(world_open(&w, kind, "recover3", (const char *const[]){"order-9", NULL}));
    w.far->step1_delay_ms = 800;
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
    CHECK_INT(load(&w.far->step1), 1);
    CHECK_INT(load(&w.far->step2), 0);
    char state[32];
    CHECK_INT(load(&w.far->strays), 0);
    CHECK_STR(saga_state(ports[2], "order-9", state), "manual-review");
    for (int i = 1; i < DAEMONS; i++)
        CHECK_INT(test_daemon_stop(pids[i]), 0);
    world_close(&w);
}

POSTGRES_TEST(three_daemons_finish_a_killed_daemons_compensation_each_attempt_once) {
    world w;
    /* several sagas at once, so the three loops race for each of them */
    const char *ids[] = {"order-a", "order-b", "order-c", "order-d", NULL};
    REQUIRE(world_open(&w, kind, "recover4", ids));
    w.far->step2_rejects = true;
    int ports[DAEMONS];
    pid_t pids[DAEMONS];
    REQUIRE(start_all(&w, ports, pids));
    for (int i = 0; i < 4; i++) {
        start_arg a = {ports[0], ids[i]};
        start_saga(&a);
        char state[32];
        CHECK_STR(saga_state(ports[0], ids[i], state), "compensating");
    }
    kill9(pids[0]);
    int64_t killed_at = mv_now_ms();
    int undo_before = load(&w.far->undo1); /* each saga's failed first attempt */
    CHECK_INT(undo_before, 4);
    for (int i = 0; i < 4; i++)
        CHECK(wait_state(ports[1 + i % 2], ids[i], "compensated", LEASE_MS + INTERVAL_MS + 3000) >=
              0);
    CHECK(mv_now_ms() - killed_at <= LEASE_MS + INTERVAL_MS + 3000);
    mv_sleep_ms(3 * INTERVAL_MS);
    CHECK_INT(load(&w.far->undo1), undo_before + 4); /* one successful attempt per saga */
    CHECK_INT(load(&w.far->step1), 4);
    CHECK_INT(load(&w.far->step2), 4);
    CHECK_INT(load(&w.far->undo2), 0);
    for (int i = 0; i < 4; i++) { /* and so for each saga */
        CHECK_INT(load(&w.far->step1_of[i]), 1);
        CHECK_INT(load(&w.far->step2_of[i]), 1);
        CHECK_INT(load(&w.far->undo1_of[i]), 2);
    }
    CHECK_INT(load(&w.far->strays), 0);
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
