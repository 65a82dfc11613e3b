/* saga_delay_daemon_test.c — a saga step with "delayMs" through real daemons: POST /sagas answers
 * with the saga waiting and its wakeAt; the daemon that started it is killed -9 while it waits;
 * another daemon sharing the store (on PostgreSQL one running all along, on SQLite a restart)
 * wakes it at wakeAt and completes it, each step called once — counted by the Idempotency-Key
 * the far side saw. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"

#define DELAY_MS 1500

/* The far side's calls, by step and by key (on the heap: it may outlive a failed test). */
typedef struct {
    int reserve, ship;
    char keys[8][64];
    int nkeys, repeated;
} far_side;

static void handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    far_side *f = ctx;
    *res = (http_sink_response){.status = 200, .body = "{\"ok\": true}"};
    const char *key = http_sink_header(req, "Idempotency-Key");
    for (int i = 0; key && i < f->nkeys; i++)
        if (strcmp(f->keys[i], key) == 0) __atomic_fetch_add(&f->repeated, 1, __ATOMIC_SEQ_CST);
    if (key && f->nkeys < 8) snprintf(f->keys[f->nkeys++], 64, "%s", key);
    if (strcmp(req->path, "/reserve") == 0) __atomic_fetch_add(&f->reserve, 1, __ATOMIC_SEQ_CST);
    if (strcmp(req->path, "/ship") == 0) __atomic_fetch_add(&f->ship, 1, __ATOMIC_SEQ_CST);
}

static int load(int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

static const char ADMIN[] = "X-User-Id: ops\nX-User-Permissions: is.admin\n";

static bool write_world(const char *dir, const char *u, char *config, size_t size) {
    char path[800];
    snprintf(path, sizeof path, "%s/sagas", dir);
    if (mkdir(dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/sagas/deliver.json", dir);
    if (!test_write_file(path,
                         "{\"name\": \"deliver\", \"steps\": ["
                         " {\"name\": \"reserve\", \"run\": {\"webhook\": \"%s/reserve\"},"
                         "  \"compensate\": {\"webhook\": \"%s/release\"}},"
                         " {\"name\": \"ship\", \"delayMs\": %d,"
                         "  \"run\": {\"webhook\": \"%s/ship\"},"
                         "  \"compensate\": {\"webhook\": \"%s/unship\"}}]}",
                         u, u, DELAY_MS, u, u))
        return false;
    snprintf(config, size, "%s/missived.json", dir);
    return test_write_file(config,
                           "{\"sagas\": \"%s/sagas\", \"auth\": {\"mode\": \"headers\"},"
                           " \"leases\": {\"actionMs\": 1500},"
                           " \"timers\": {\"pollMs\": 50, \"leaseMs\": 1000},"
                           " \"webhooks\": {\"timeoutMs\": 1000, \"connectTimeoutMs\": 500}}",
                           dir);
}

static const char *saga_state(int port, const char *id, char out[32]) {
    char path[256];
    snprintf(path, sizeof path, "/sagas/%s", id);
    test_reply r = test_http(port, "GET", path, ADMIN, NULL);
    snprintf(out, 32, "%s", mv_json_str(r.json, "state") ? mv_json_str(r.json, "state") : "");
    test_reply_free(&r);
    return out;
}

static void kill9(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

STORE_TEST(a_daemon_killed_while_its_saga_waits_leaves_it_to_another_that_wakes_it_once) {
    far_side *f = calloc(1, sizeof *f);
    REQUIRE(f);
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, handler, f);
    const char *store = test_store_url(kind, "sagadelay");
    REQUIRE(store);
    char label[64], config[800];
    snprintf(label, sizeof label, "sagadelay-%s", kind);
    const char *dir = test_tmp_path(label);
    REQUIRE(write_world(dir, http_sink_url(sink), config, sizeof config));
    bool shared = strcmp(kind, "postgres") == 0; /* two daemons at once on one database */
    int port1 = test_free_port(), port2 = shared ? test_free_port() : port1;
    pid_t d1 = test_daemon_start(config, port1, store, NULL);
    REQUIRE(d1 > 0);
    pid_t d2 = shared ? test_daemon_start(config, port2, store, NULL) : -1;
    if (shared) REQUIRE(d2 > 0);

    int64_t started = mv_now_ms();
    test_reply r = test_http(port1, "POST", "/sagas/deliver", ADMIN,
                             "{\"sagaId\": \"order-1\", \"input\": {\"order\": 1}}");
    CHECK_INT(r.status, 200);
    CHECK_STR(mv_json_str(r.json, "state"), "waiting");
    int64_t wake_at = json_integer_value(json_object_get(r.json, "wakeAt"));
    CHECK(wake_at >= started + DELAY_MS && wake_at <= mv_now_ms() + DELAY_MS);
    CHECK_INT((int)json_array_size(json_object_get(r.json, "steps")), 1);
    test_reply_free(&r);
    CHECK_INT(load(&f->reserve), 1);
    kill9(d1); /* while the saga waits: nothing of it is held in that process */

    if (!shared) d2 = test_daemon_start(config, port2, store, NULL);
    REQUIRE(d2 > 0);
    char state[32];
    CHECK_STR(saga_state(port2, "order-1", state), "waiting");
    r = test_http(port2, "GET", "/sagas/order-1", ADMIN, NULL);
    CHECK_INT(json_integer_value(json_object_get(r.json, "wakeAt")), wake_at);
    test_reply_free(&r);
    /* not before wakeAt */
    while (mv_now_ms() < wake_at - 300)
        if (load(&f->ship)) break;
    CHECK_INT(load(&f->ship), 0);
    /* woken by the other daemon's timer engine, within a few polls of wakeAt */
    for (int i = 0; i < 200 && strcmp(saga_state(port2, "order-1", state), "completed") != 0; i++)
        mv_sleep_ms(50);
    CHECK_STR(state, "completed");
    CHECK(mv_now_ms() >= wake_at);
    mv_sleep_ms(300); /* no late second call */
    CHECK_INT(load(&f->reserve), 1);
    CHECK_INT(load(&f->ship), 1);
    CHECK_INT(load(&f->repeated), 0);
    CHECK_INT(f->nkeys, 2);
    CHECK_INT(test_daemon_stop(d2), 0);
    http_sink_stop(sink);
    free(f);
}

int main(void) {
    return RUN_TESTS(a_daemon_killed_while_its_saga_waits_leaves_it_to_another_that_wakes_it_once);
}
