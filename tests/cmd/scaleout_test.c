/* scaleout_test.c — three missived processes on one fresh PostgreSQL database, driven by 30
 * concurrent libcurl clients spread over them: one idempotent create gives one set of messages
 * and one payment session; one action pressed everywhere runs its webhook once; a daemon killed
 * with SIGKILL mid-action is finished by another after the lease, with the same Idempotency-Key;
 * a saga resumed from several daemons runs its next step once. PostgreSQL only (MISSIVE_TEST_PG):
 * several servers on one SQLite file is not a supported deployment. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "store/db.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"

#define DAEMONS 3
#define CLIENTS 30

typedef test_reply reply;

/* One request; user NULL = anonymous, admin adds the admin permission header. */
static reply http(int port, const char *method, const char *path, const char *user, bool admin,
                  const char *body, const char *idem) {
    char headers[512] = "";
    size_t n = 0;
    if (user) n += (size_t)snprintf(headers + n, sizeof headers - n, "X-User-Id: %s\n", user);
    if (admin)
        n += (size_t)snprintf(headers + n, sizeof headers - n, "X-User-Permissions: is.admin\n");
    if (idem) snprintf(headers + n, sizeof headers - n, "Idempotency-Key: %s\n", idem);
    return test_http(port, method, path, headers, body);
}

static const char *code_of(const reply *r) { return test_reply_code(r); }

/* ---- the sink behind every webhook: handlers, payment, saga steps ---------------------------- */

typedef struct {
    int actions, pay_creates, step1, step2;
    int action_delay_ms;   /* every action answer waits this long */
    int first_action_hang; /* the first action answer hangs (its daemon is killed meanwhile) */
} sink_state;

static void sink_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    sink_state *s = ctx;
    res->status = 200;
    res->body = "{}";
    if (strncmp(req->path, "/action", 7) == 0) {
        int n = __atomic_fetch_add(&s->actions, 1, __ATOMIC_SEQ_CST);
        res->body = "{\"done\": true}";
        res->delay_ms = n == 0 && s->first_action_hang ? 30000 : s->action_delay_ms;
    } else if (strcmp(req->path, "/pay") == 0) {
        json_t *b = json_loads(req->body, 0, NULL);
        if (strcmp(mv_json_str(b, "op") ? mv_json_str(b, "op") : "", "create") == 0) {
            __atomic_fetch_add(&s->pay_creates, 1, __ATOMIC_SEQ_CST);
            res->body = "{\"sessionId\": \"cs_scaleout\"}";
        }
        json_decref(b);
    } else if (strcmp(req->path, "/saga/step1") == 0) {
        __atomic_fetch_add(&s->step1, 1, __ATOMIC_SEQ_CST);
        res->status = 500; /* ambiguous: the saga stops for review */
    } else if (strcmp(req->path, "/saga/step2") == 0) {
        __atomic_fetch_add(&s->step2, 1, __ATOMIC_SEQ_CST);
        res->body = "{\"shipped\": true}";
        res->delay_ms = 300;
    }
}

/* ---- a cluster of daemons ------------------------------------------------------------------- */

typedef struct {
    const char *url; /* the store */
    char dir[600];   /* config, templates, sagas, daemon logs */
    int ports[DAEMONS];
    pid_t pids[DAEMONS];
    http_sink *sink;
    sink_state state;
} cluster;

static bool daemon_healthy(int port) {
    reply r = http(port, "GET", "/healthz", NULL, false, NULL, NULL);
    json_decref(r.json);
    return r.status == 200;
}

/* Writes the config and starts all daemons at once (so they also race the migration). */
static bool cluster_start(cluster *c, const char *name) {
    memset(c, 0, sizeof *c);
    c->url = test_store_url("postgres", name);
    if (!c->url) return false;
    c->sink = http_sink_start();
    if (!c->sink) return false;
    http_sink_set_handler(c->sink, sink_handler, &c->state);
    const char *sink = http_sink_url(c->sink);
    snprintf(c->dir, sizeof c->dir, "%s", test_tmp_path(name));
    char path[800];
    snprintf(path, sizeof path, "%s/templates", c->dir);
    if (mkdir(c->dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/templates/order.json", c->dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"order\", \"type\": \"request\", \"paymentCd\": \"deposit\","
            " \"receiverContent\": {\"title\": \"Order {{item}}\"},"
            " \"prepare\": {\"toUser\": \"{{sellerId}}\"},"
            " \"actions\": [{\"actionCd\": \"ship\", \"name\": \"Ship {{item}}\","
            "   \"variant\": \"primary\", \"receiver\": true,"
            "   \"handler\": {\"webhook\": \"%s/action/ship\"},"
            "   \"senderNotification\": \"{{item}} shipped\"}]}",
            sink))
        return false;
    snprintf(path, sizeof path, "%s/sagas", c->dir);
    if (mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/sagas/fulfil.json", c->dir);
    if (!test_write_file(
            path,
            "{\"name\": \"fulfil\", \"capability\": \"orders.fulfil\","
            " \"steps\": [{\"name\": \"step1\", \"run\": {\"webhook\": \"%s/saga/step1\"},"
            "   \"compensate\": {\"webhook\": \"%s/saga/undo1\"}},"
            "  {\"name\": \"step2\", \"run\": {\"webhook\": \"%s/saga/step2\"},"
            "   \"compensate\": {\"webhook\": \"%s/saga/undo2\"}}]}",
            sink, sink, sink, sink))
        return false;
    char config[800];
    snprintf(config, sizeof config, "%s/missived.json", c->dir);
    if (!test_write_file(config,
                         "{\"templates\": \"%s/templates\", \"sagas\": \"%s/sagas\","
                         " \"auth\": {\"mode\": \"headers\"},"
                         " \"leases\": {\"actionMs\": 1500, \"clientRequestPollMs\": 20,"
                         "             \"clientRequestWaitMs\": 10000},"
                         " \"webhooks\": {\"timeoutMs\": 1000, \"connectTimeoutMs\": 500},"
                         " \"payment\": {\"webhook\": \"%s/pay\"}}",
                         c->dir, c->dir, sink))
        return false;
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char exe[256];
    snprintf(exe, sizeof exe, "%s/missived", build);
    for (int i = 0; i < DAEMONS; i++) {
        c->ports[i] = test_free_port();
        char listen[64], log[900];
        snprintf(listen, sizeof listen, "127.0.0.1:%d", c->ports[i]);
        snprintf(log, sizeof log, "%s/daemon-%d.log", c->dir, i);
        c->pids[i] = fork();
        if (c->pids[i] == 0) {
            if (!freopen(log, "w", stderr)) _exit(126);
            execl(exe, exe, "--config", config, "--listen", listen, "--store", c->url,
                  (char *)NULL);
            _exit(127);
        }
    }
    for (int i = 0; i < DAEMONS; i++) {
        bool up = false;
        for (int t = 0; t < 200 && !up; t++) {
            if (!(up = daemon_healthy(c->ports[i]))) mv_sleep_ms(25);
        }
        if (!up) {
            fprintf(stderr, "daemon %d did not come up; see %s/daemon-%d.log\n", i, c->dir, i);
            return false;
        }
    }
    return true;
}

static void cluster_stop(cluster *c) {
    for (int i = 0; i < DAEMONS; i++) {
        if (c->pids[i] <= 0) continue;
        kill(c->pids[i], SIGTERM);
        int status = 0;
        waitpid(c->pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* SIGTERM: a clean exit */
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "daemon %d did not exit cleanly; see %s/daemon-%d.log\n", i, c->dir, i);
        c->pids[i] = 0;
    }
    http_sink_stop(c->sink);
    c->sink = NULL;
    if (test_current_failed_) return; /* keep the config and daemon logs to look at */
    static const char *const files[] = {
        "templates/order.json", "templates",    "sagas/fulfil.json", "sagas", "missived.json",
        "daemon-0.log",         "daemon-1.log", "daemon-2.log",      "" /* the directory */};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[900];
        snprintf(path, sizeof path, "%s/%s", c->dir, files[i]);
        remove(path);
    }
}

/* ---- counting rows -------------------------------------------------------------------------- */

typedef struct {
    const char *sql;
    int64_t n;
} count_arg;

static mv_code count_tx(mv_db *db, void *ctx, mv_err *err) {
    count_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, a->sql, &st, err);
    if (rc) return rc;
    if (mv_stmt_step(st, err) == 1) a->n = mv_stmt_int64(st, 0);
    mv_stmt_done(st);
    return MV_OK;
}

static int64_t rows(const char *url, const char *sql) {
    mv_store *s = NULL;
    count_arg a = {sql, -1};
    mv_err err = {0};
    if (mv_store_open(url, NULL, &s, &err) != MV_OK ||
        mv_store_read(s, count_tx, &a, &err) != MV_OK)
        fprintf(stderr, "rows: %s\n", err.message);
    mv_store_close(s);
    return a.n;
}

static const char SQL_COUNT_MESSAGES[] = "SELECT COUNT(*) FROM messages";
static const char SQL_COUNT_ORDERS[] = "SELECT COUNT(*) FROM messages WHERE template_cd = 'order'";
static const char SQL_COUNT_REQUESTS[] = "SELECT COUNT(*) FROM message_requests";

/* ---- concurrent clients --------------------------------------------------------------------- */

typedef struct {
    int port;
    const char *method, *path, *user, *body, *idem;
    bool admin;
    reply r;
} client;

static void *client_run(void *arg) {
    client *c = arg;
    c->r = http(c->port, c->method, c->path, c->user, c->admin, c->body, c->idem);
    return NULL;
}

/* Runs CLIENTS copies of the request at once, client i on daemon i % DAEMONS among the first
 * `live` daemons. */
static void run_clients(cluster *cl, client tmpl, client out[CLIENTS], int live) {
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        out[i] = tmpl;
        out[i].port = cl->ports[i % live];
        pthread_create(&th[i], NULL, client_run, &out[i]);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
}

static void free_clients(client c[CLIENTS]) {
    for (int i = 0; i < CLIENTS; i++)
        json_decref(c[i].r.json);
}

static const char ORDER_BODY[] = "{\"sellerId\": \"sam\", \"item\": \"Lamp\"}";

/* Creates one order message from ana to sam; returns its id (caller frees). */
static char *create_order(cluster *cl, int daemon, const char *idem) {
    reply r =
        http(cl->ports[daemon], "POST", "/messages/new/order", "ana", false, ORDER_BODY, idem);
    const char *id = mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id");
    char *out = r.status == 201 && id ? strdup(id) : NULL;
    if (!out) fprintf(stderr, "create: HTTP %ld\n", r.status);
    json_decref(r.json);
    return out;
}

/* ---- the scenarios -------------------------------------------------------------------------- */

POSTGRES_TEST(thirty_clients_on_three_daemons_with_one_idempotency_key_create_one_set) {
    (void)kind;
    cluster cl;
    REQUIRE(cluster_start(&cl, "idem"));
    client c[CLIENTS];
    run_clients(&cl,
                (client){.method = "POST",
                         .path = "/messages/new/order",
                         .user = "ana",
                         .body = ORDER_BODY,
                         .idem = "order-42"},
                c, DAEMONS);
    int created = 0, replayed = 0;
    const char *first =
        mv_json_str(json_array_get(json_object_get(c[0].r.json, "messages"), 0), "id");
    CHECK(first != NULL);
    for (int i = 0; i < CLIENTS; i++) {
        CHECK_INT(c[i].r.status, 201);
        if (c[i].r.status != 201) fprintf(stderr, "client %d: %s\n", i, code_of(&c[i].r));
        json_t *msgs = json_object_get(c[i].r.json, "messages");
        CHECK_INT(json_array_size(msgs), 1);
        CHECK_STR(mv_json_str(json_array_get(msgs, 0), "id"), first);
        if (c[i].r.replayed)
            replayed++;
        else
            created++;
    }
    CHECK_INT(created, 1);
    CHECK_INT(replayed, CLIENTS - 1);
    CHECK_INT(rows(cl.url, SQL_COUNT_MESSAGES), 1);
    CHECK_INT(rows(cl.url, SQL_COUNT_REQUESTS), 1);
    CHECK_INT(cl.state.pay_creates, 1); /* one payment session */
    free_clients(c);
    cluster_stop(&cl);
}

POSTGRES_TEST(thirty_presses_on_three_daemons_run_the_webhook_handler_once) {
    (void)kind;
    cluster cl;
    REQUIRE(cluster_start(&cl, "press"));
    cl.state.action_delay_ms = 300; /* presses overlap the running handler */
    char *id = create_order(&cl, 0, NULL);
    REQUIRE(id);
    char path[128];
    snprintf(path, sizeof path, "/messages/%s/action/ship", id);
    client c[CLIENTS];
    run_clients(&cl, (client){.method = "POST", .path = path, .user = "sam", .body = "{}"}, c,
                DAEMONS);
    int ok = 0, conflict = 0, archived = 0;
    for (int i = 0; i < CLIENTS; i++) {
        if (c[i].r.status == 200)
            ok++;
        else if (c[i].r.status == 409 && strcmp(code_of(&c[i].r), "action_conflict") == 0)
            conflict++;
        else if (c[i].r.status == 410 && strcmp(code_of(&c[i].r), "message_archived") == 0)
            archived++;
        else
            fprintf(stderr, "press %d: HTTP %ld %s\n", i, c[i].r.status, code_of(&c[i].r));
    }
    CHECK_INT(ok, 1);
    CHECK_INT(conflict + archived, CLIENTS - 1);
    CHECK_INT(cl.state.actions, 1);
    CHECK_INT(http_sink_count(cl.sink), 2);         /* the payment session and the handler */
    CHECK_INT(rows(cl.url, SQL_COUNT_MESSAGES), 2); /* the order and one notification */
    free_clients(c);
    free(id);
    cluster_stop(&cl);
}

POSTGRES_TEST(a_daemon_killed_mid_action_is_finished_by_another_after_the_lease) {
    (void)kind;
    cluster cl;
    REQUIRE(cluster_start(&cl, "kill"));
    cl.state.first_action_hang = 1;
    char *id = create_order(&cl, 0, NULL);
    REQUIRE(id);
    char path[128];
    snprintf(path, sizeof path, "/messages/%s/action/ship", id);
    /* the victim claims the action and calls the webhook, which hangs */
    client victim = {
        .port = cl.ports[0], .method = "POST", .path = path, .user = "sam", .body = "{}"};
    pthread_t th;
    pthread_create(&th, NULL, client_run, &victim);
    REQUIRE(http_sink_wait(cl.sink, 2, 10000)); /* payment session, then the handler call */
    int64_t killed_at = mv_now_ms();
    kill(cl.pids[0], SIGKILL);
    int status = 0;
    waitpid(cl.pids[0], &status, 0);
    cl.pids[0] = 0;
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    pthread_join(th, NULL);
    CHECK(victim.r.status == 0); /* the connection died with its daemon */
    json_decref(victim.r.json);
    /* while the lease is live the others refuse; once it expires one takes the attempt over */
    reply r = http(cl.ports[1], "POST", path, "sam", false, "{}", NULL);
    CHECK_INT(r.status, 409);
    CHECK_STR(code_of(&r), "action_conflict");
    json_decref(r.json);
    int done = 0, conflicts = 0;
    for (int i = 0; i < 100 && !done; i++) {
        r = http(cl.ports[1 + i % 2], "POST", path, "sam", false, "{}", NULL);
        if (r.status == 200)
            done = 1;
        else if (r.status == 409)
            conflicts++, mv_sleep_ms(50);
        else
            fprintf(stderr, "retry: HTTP %ld %s\n", r.status, code_of(&r));
        json_decref(r.json);
        if (r.status != 200 && r.status != 409) break;
    }
    CHECK(done);
    CHECK(mv_now_ms() - killed_at >= 1000); /* not before the 1.5 s lease ran out (less slack) */
    CHECK_INT(cl.state.actions, 2);
    http_sink_request a, b;
    REQUIRE(http_sink_get(cl.sink, 1, &a) && http_sink_get(cl.sink, 2, &b));
    CHECK_STR(a.path, "/action/ship");
    CHECK_STR(b.path, "/action/ship");
    CHECK(http_sink_header(&a, "Idempotency-Key") != NULL);
    CHECK_STR(http_sink_header(&a, "Idempotency-Key"), http_sink_header(&b, "Idempotency-Key"));
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    r = http(cl.ports[2], "POST", path, "sam", false, "{}", NULL);
    CHECK_INT(r.status, 410);
    json_decref(r.json);
    r = http(cl.ports[2], "GET", "/messages/count", "ana", false, NULL, NULL);
    CHECK_INT(json_integer_value(json_object_get(r.json, "count")), 1); /* the notification */
    json_decref(r.json);
    snprintf(path, sizeof path, "/messages/%s", id);
    r = http(cl.ports[1], "GET", path, "sam", false, NULL, NULL);
    CHECK_STR(mv_json_str(r.json, "actionState"), "archived");
    CHECK_STR(mv_json_str(r.json, "archivedBy"), "sam");
    json_decref(r.json);
    CHECK_INT(rows(cl.url, SQL_COUNT_ORDERS), 1);
    CHECK_INT(rows(cl.url, SQL_COUNT_MESSAGES), 2);
    free(id);
    cluster_stop(&cl);
}

POSTGRES_TEST(a_saga_resumed_from_three_daemons_runs_its_next_step_once) {
    (void)kind;
    cluster cl;
    REQUIRE(cluster_start(&cl, "saga"));
    const char *body = "{\"sagaId\": \"saga-1\", \"input\": {\"order\": 42}}";
    reply r = http(cl.ports[0], "POST", "/sagas/fulfil", "ops", true, body, NULL);
    if (r.status == 404 && code_of(&r) && strcmp(code_of(&r), "not_found") == 0) {
        /* the daemon does not serve the saga routes (yet): nothing to test */
        json_decref(r.json);
        cluster_stop(&cl);
        printf("SKIP saga resume: missived does not serve POST /sagas/{definition}\n");
        test_passed_--; /* the runner adds one back */
        return;
    }
    CHECK_INT(r.status, 200);
    CHECK_STR(mv_json_str(r.json, "state"), "manual-review"); /* step1 answered 500 */
    json_decref(r.json);
    r = http(cl.ports[1], "GET", "/sagas/saga-1", "ops", true, NULL, NULL);
    CHECK_INT(r.status, 200);
    json_t *step1 = json_array_get(json_object_get(r.json, "steps"), 0);
    char resolve[512];
    snprintf(resolve, sizeof resolve,
             "{\"kind\": \"execution\", \"step\": \"step1\", \"effectId\": \"%s\","
             " \"outcome\": \"committed\", \"result\": {\"reserved\": true}}",
             mv_json_str(step1, "effectId") ? mv_json_str(step1, "effectId") : "");
    json_decref(r.json);
    r = http(cl.ports[2], "POST", "/sagas/saga-1/resolve", "ops", true, resolve, NULL);
    CHECK_INT(r.status, 200);
    json_decref(r.json);
    client c[CLIENTS];
    run_clients(&cl,
                (client){.method = "POST",
                         .path = "/sagas/saga-1/resume",
                         .user = "ops",
                         .admin = true,
                         .body = "{}"},
                c, DAEMONS);
    int ok = 0, busy = 0;
    for (int i = 0; i < CLIENTS; i++) {
        if (c[i].r.status == 200)
            ok++;
        else if (c[i].r.status == 409 && strcmp(code_of(&c[i].r), "saga_concurrency") == 0)
            busy++;
        else
            fprintf(stderr, "resume %d: HTTP %ld %s\n", i, c[i].r.status, code_of(&c[i].r));
    }
    CHECK(ok >= 1);
    CHECK_INT(ok + busy, CLIENTS);
    CHECK_INT(cl.state.step1, 1); /* resolved, never re-run */
    CHECK_INT(cl.state.step2, 1);
    r = http(cl.ports[0], "GET", "/sagas/saga-1", "ops", true, NULL, NULL);
    CHECK_STR(mv_json_str(r.json, "state"), "completed");
    json_decref(r.json);
    free_clients(c);
    cluster_stop(&cl);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(thirty_clients_on_three_daemons_with_one_idempotency_key_create_one_set,
                       thirty_presses_on_three_daemons_run_the_webhook_handler_once,
                       a_daemon_killed_mid_action_is_finished_by_another_after_the_lease,
                       a_saga_resumed_from_three_daemons_runs_its_next_step_once);
    curl_global_cleanup();
    return rc;
}
