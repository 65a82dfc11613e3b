/* reload_test.c — SIGHUP against a real missived: while a live-update stream is open and an
 * action's slow handler is still running, a reload brings in a new template, a new message size
 * limit and the UI switch, and both the stream and the request complete; a bad template or a bad
 * config is refused and the old set keeps serving; keys that need a restart are named in the log.
 * Over HTTPS, a reload replaces the certificate (checked with curl --cacert against certificates
 * made by openssl during the test). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "test.h"

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* True once the log file holds needle (waits up to timeout_ms). */
static bool log_has(const char *log, const char *needle, int timeout_ms) {
    int64_t end = now_ms() + timeout_ms;
    do {
        FILE *f = fopen(log, "r");
        char line[4096];
        bool found = false;
        while (f && !found && fgets(line, sizeof line, f))
            found = strstr(line, needle) != NULL;
        if (f) fclose(f);
        if (found) return true;
        usleep(20000);
    } while (now_ms() < end);
    return false;
}

/* How many lines of the log hold needle. */
static int log_count(const char *log, const char *needle) {
    FILE *f = fopen(log, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f) fclose(f);
    return n;
}

static bool write_template(const char *dir, const char *code, const char *handler_url) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s.json", dir, code);
    return test_write_file(
        path,
        "{\"templateCd\": \"%s\", \"senderContent\": {\"title\": \"to {{x}}\"},"
        " \"receiverContent\": {\"title\": \"from {{x}}\"},"
        " \"prepare\": {\"toUser\": \"bob\", \"toRoles\": []},"
        " \"actions\": [{\"actionCd\": \"go\", \"name\": \"Go\", \"variant\": \"primary\","
        " \"receiver\": true, \"handler\": {\"webhook\": \"%s/slow\"}}]}",
        code, handler_url);
}

/* ---- a raw live-update stream (HTTP/1.0: the body is not chunked) ------------------------- */

typedef struct stream {
    int fd;
    char buf[1 << 16];
    size_t len;
} stream;

static bool stream_open(stream *s, int port, const char *user) {
    memset(s, 0, sizeof *s);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s->fd, (struct sockaddr *)&a, sizeof a) != 0) return false;
    char req[256];
    int n =
        snprintf(req, sizeof req, "GET /messages/stream HTTP/1.0\r\nX-User-Id: %s\r\n\r\n", user);
    return write(s->fd, req, (size_t)n) == n;
}

/* True once the stream's bytes hold needle; false on timeout or when the server closed it. */
static bool stream_wait(stream *s, const char *needle, int timeout_ms) {
    int64_t end = now_ms() + timeout_ms;
    while (!strstr(s->buf, needle)) {
        int left = (int)(end - now_ms());
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0) return false;
        if (s->len >= sizeof s->buf - 1) s->len = 0; /* keep reading: only the new bytes matter */
        ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
        if (n <= 0) return false;
        s->len += (size_t)n;
        s->buf[s->len] = '\0';
    }
    return true;
}

/* ---- the action whose handler is slow, on a thread ------------------------------------------ */

typedef struct slow_call {
    pthread_t thread;
    int port;
    char path[256];
    long status;
} slow_call;

static void *run_slow(void *arg) {
    slow_call *c = arg;
    test_reply r = test_http(c->port, "POST", c->path, "X-User-Id: bob", "{}");
    c->status = r.status;
    test_reply_free(&r);
    return NULL;
}

static long create(int port, const char *code, const char *body, char *id, size_t idsize) {
    char path[128];
    snprintf(path, sizeof path, "/messages/new/%s", code);
    test_reply r = test_http(port, "POST", path, "X-User-Id: ana", body);
    const char *mid = mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id");
    if (id) mv_strlcpy(id, mid ? mid : "", idsize);
    long status = r.status;
    test_reply_free(&r);
    return status;
}

static long status_of(int port, const char *path) {
    test_reply r = test_http(port, "GET", path, NULL, NULL);
    long status = r.status;
    test_reply_free(&r);
    return status;
}

/* True when a request from origin gets Access-Control-Allow-Origin naming it. */
static bool cors_allows(int port, const char *origin) {
    char cmd[512], out[4096] = "";
    snprintf(cmd, sizeof cmd, "curl -s -D - -o /dev/null -H 'Origin: %s' http://127.0.0.1:%d/livez",
             origin, port);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    if (p) pclose(p);
    char want[300];
    snprintf(want, sizeof want, "Access-Control-Allow-Origin: %s", origin);
    return strcasestr(out, want) != NULL;
}

static bool write_config(const char *config, const char *db, const char *templates,
                         const char *extra) {
    return test_write_file(config,
                           "{\"store\": \"sqlite:%s\", \"templates\": \"%s\","
                           " \"auth\": {\"mode\": \"headers\"}%s}",
                           db, templates, extra);
}

TEST(sighup_reloads_templates_and_config_while_a_stream_and_a_slow_request_stay_open) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_default(sink, &(http_sink_response){.status = 200, .delay_ms = 3000});
    char dir[600], config[600], db[600], log[600];
    mv_strlcpy(dir, test_tmp_path("reload-templates"), sizeof dir);
    mkdir(dir, 0700);
    mv_strlcpy(config, test_tmp_path("reload.json"), sizeof config);
    mv_strlcpy(db, test_tmp_path("reload.db"), sizeof db);
    mv_strlcpy(log, test_tmp_path("reload.log"), sizeof log);
    REQUIRE(write_template(dir, "t1", http_sink_url(sink)));
    REQUIRE(write_config(config, db, dir, ""));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, log);
    REQUIRE(pid > 0);

    char id[64];
    CHECK_INT(create(port, "t1", "{\"x\": \"first\"}", id, sizeof id), 201);
    CHECK_INT(create(port, "t2", "{\"x\": \"early\"}", NULL, 0), 404); /* not yet loaded */
    CHECK_INT(status_of(port, "/ui/"), 200); /* on by default (loopback) */
    test_reply oidc = test_http(port, "GET", "/ui/oidc.json", NULL, NULL);
    CHECK_INT(oidc.status, 200); /* no "ui.oidc": the console has no sign-in to offer */
    CHECK(json_is_null(json_object_get(oidc.json, "issuer")));
    test_reply_free(&oidc);
    CHECK(!cors_allows(port, "https://app.example.com"));
    stream s;
    REQUIRE(stream_open(&s, port, "bob"));
    REQUIRE(stream_wait(&s, "event: counts", 5000));
    slow_call call = {.port = port};
    snprintf(call.path, sizeof call.path, "/messages/%s/action/go", id);
    REQUIRE(pthread_create(&call.thread, NULL, run_slow, &call) == 0);
    REQUIRE(http_sink_wait(sink, 1, 5000)); /* the handler is running, for 3 s */

    /* the new set: a second template, a lower size limit, the UI off */
    REQUIRE(write_template(dir, "t2", http_sink_url(sink)));
    REQUIRE(write_config(config, db, dir,
                         ", \"limits\": {\"messageBytes\": 2000}, \"ui\": {\"enabled\": false},"
                         " \"log\": {\"level\": \"info\"},"
                         " \"cors\": {\"allowedOrigins\": [\"https://app.example.com\"]}"));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: ok (templates 2, sagas 0)", 5000));
    CHECK_INT(log_count(log, "not applied until a restart"), 0);
    CHECK_INT(create(port, "t2", "{\"x\": \"new\"}", NULL, 0), 201);
    char big[4000];
    snprintf(big, sizeof big, "{\"x\": \"%03000d\"}", 7);
    CHECK_INT(create(port, "t2", big, NULL, 0), 413);
    CHECK_INT(status_of(port, "/ui/"), 404);
    CHECK(cors_allows(port, "https://app.example.com"));
    CHECK(!cors_allows(port, "https://elsewhere.example.com"));
    CHECK(stream_wait(&s, "from new", 5000)); /* the stream opened before the reload goes on */
    pthread_join(call.thread, NULL);
    CHECK_INT(call.status, 200); /* the request in flight finished */

    /* a bad template: refused, the two good ones keep serving, the limit stays */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/t3.json", dir);
    REQUIRE(test_write_file(bad, "{\"templateCd\": \"t3\", \"actions\": [{\"actionCd\": \"a\"}]}"));
    REQUIRE(write_config(config, db, dir, ""));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: refused: ", 5000));
    CHECK(log_has(log, "t3.json", 100));
    CHECK_INT(create(port, "t3", "{\"x\": \"bad\"}", NULL, 0), 404);
    CHECK_INT(create(port, "t1", "{\"x\": \"still\"}", NULL, 0), 201);
    CHECK_INT(create(port, "t2", big, NULL, 0), 413); /* the refused config changed nothing */
    CHECK_INT(status_of(port, "/ui/"), 404);

    /* a config that does not load: refused as well */
    unlink(bad);
    REQUIRE(test_write_file(config,
                            "{\"store\": \"sqlite:%s\", \"templates\": \"%s\", "
                            "\"limits\": {\"messageBytes\": \"many\"}}",
                            db, dir));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "limits.messageBytes", 5000));
    CHECK_INT(log_count(log, "reload: refused: "), 2);
    CHECK_INT(create(port, "t2", big, NULL, 0), 413);

    /* keys only a restart changes are named, the rest applies */
    REQUIRE(write_config(config, db, dir, ", \"threads\": 7, \"shutdownTimeoutMs\": 1000"));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: not applied until a restart: threads, shutdownTimeoutMs", 5000));
    CHECK(log_has(log, "reload: ok (templates 2, sagas 0)", 100));
    CHECK_INT(log_count(log, "reload: ok"), 2);
    CHECK_INT(create(port, "t2", big, NULL, 0), 201); /* back to the default limit */
    CHECK_INT(status_of(port, "/ui/"), 200);
    CHECK(!cors_allows(port, "https://app.example.com")); /* the new config has no cors */
    CHECK(stream_wait(&s, "from still", 100));            /* the same stream, still open */

    close(s.fd);
    CHECK_INT(test_daemon_stop(pid), 0);
    http_sink_stop(sink);
}

static bool write_saga(const char *dir, const char *name, const char *url) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    return test_write_file(
        path,
        "{\"name\": \"%s\", \"steps\": [{\"name\": \"do\", \"run\": "
        "{\"webhook\": \"%s/do\"}, \"compensate\": {\"webhook\": \"%s/undo\"}}]}",
        name, url, url);
}

/* POST /sagas/{name} as an admin: the status, and the saga's state into state. */
static long start_saga(int port, const char *name, const char *id, char *state, size_t size) {
    char path[128], body[128];
    snprintf(path, sizeof path, "/sagas/%s", name);
    snprintf(body, sizeof body, "{\"sagaId\": \"%s\", \"input\": {}}", id);
    test_reply r =
        test_http(port, "POST", path, "X-User-Id: ops\nX-User-Permissions: is.admin", body);
    mv_strlcpy(state, mv_json_str(r.json, "state") ? mv_json_str(r.json, "state") : "", size);
    long status = r.status;
    test_reply_free(&r);
    return status;
}

TEST(sighup_reloads_saga_definitions_and_refuses_a_template_whose_saga_is_missing) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    char templates[600], sagas[600], config[600], db[600], log[600], tpl[700], state[32];
    mv_strlcpy(templates, test_tmp_path("reload-saga-templates"), sizeof templates);
    mv_strlcpy(sagas, test_tmp_path("reload-sagas"), sizeof sagas);
    mv_strlcpy(config, test_tmp_path("reload-sagas.json"), sizeof config);
    mv_strlcpy(db, test_tmp_path("reload-sagas.db"), sizeof db);
    mv_strlcpy(log, test_tmp_path("reload-sagas.log"), sizeof log);
    mkdir(templates, 0700);
    mkdir(sagas, 0700);
    REQUIRE(write_template(templates, "t1", http_sink_url(sink)));
    REQUIRE(write_saga(sagas, "one", http_sink_url(sink)));
    REQUIRE(test_write_file(
        config,
        "{\"store\": \"sqlite:%s\", \"templates\": \"%s\", \"sagas\": \"%s\","
        " \"auth\": {\"mode\": \"headers\"}, \"limits\": {\"messageBytes\": 100000}}",
        db, templates, sagas));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, log);
    REQUIRE(pid > 0);
    CHECK_INT(start_saga(port, "one", "a1", state, sizeof state), 200);
    CHECK_STR(state, "completed");
    CHECK_INT(start_saga(port, "two", "b1", state, sizeof state), 404);

    /* a template running saga "two" before "two" is defined: refused */
    snprintf(tpl, sizeof tpl, "%s/t2.json", templates);
    REQUIRE(test_write_file(
        tpl, "{\"templateCd\": \"t2\", \"senderContent\": {\"title\": \"s\"},"
             " \"receiverContent\": {\"title\": \"r\"}, \"prepare\": {\"toUser\": \"bob\"},"
             " \"actions\": [{\"actionCd\": \"go\", \"name\": \"Go\", \"variant\": \"primary\","
             " \"receiver\": true, \"handler\": {\"saga\": \"two\"}}]}"));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: refused: ", 5000));
    CHECK(log_has(log, "unknown saga", 100));
    CHECK_INT(create(port, "t2", "{}", NULL, 0), 404);

    /* with its definition: both arrive at once */
    REQUIRE(write_saga(sagas, "two", http_sink_url(sink)));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: ok (templates 2, sagas 2)", 5000));
    CHECK_INT(create(port, "t2", "{}", NULL, 0), 201);
    CHECK_INT(start_saga(port, "two", "b2", state, sizeof state), 200);
    CHECK_STR(state, "completed");
    CHECK_INT(start_saga(port, "one", "a2", state, sizeof state), 200);

    /* an unknown key in a reloadable section: refused, as at start */
    REQUIRE(test_write_file(config,
                            "{\"store\": \"sqlite:%s\", \"templates\": \"%s\","
                            " \"auth\": {\"mode\": \"headers\"},"
                            " \"limits\": {\"messageBytes\": 100000, \"futureLimit\": 1}}",
                            db, templates));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "unknown key \\\"limits.futureLimit\\\"", 5000));
    CHECK_INT(log_count(log, "reload: refused: "), 2);
    REQUIRE(test_write_file(
        config,
        "{\"store\": \"sqlite:%s\", \"templates\": \"%s\","
        " \"auth\": {\"mode\": \"headers\"}, \"limits\": {\"messageBytes\": 100000}}",
        db, templates));
    /* sagas cannot be switched off live: named, and the definitions stay */
    unlink(tpl); /* its saga handler would need the sagas section */
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: not applied until a restart: sagas", 5000));
    CHECK_INT(start_saga(port, "two", "b3", state, sizeof state), 200);
    CHECK_INT(test_daemon_stop(pid), 0);
    http_sink_stop(sink);
}

/* ---- HTTPS ----------------------------------------------------------------------------------- */

static bool make_cert(const char *cert, const char *key, const char *cn) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 -subj /CN=%s "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             key, cert, cn);
    return system(cmd) == 0;
}

/* curl --cacert: the HTTP status, 0 when the TLS handshake or verification failed. */
static int curl_status(int port, const char *cacert) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "curl -s -o /dev/null -w '%%{http_code}' --max-time 10 --cacert %s "
             "https://127.0.0.1:%d/healthz",
             cacert, port);
    FILE *p = popen(cmd, "r");
    char out[32] = "";
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    if (p) pclose(p);
    return atoi(out);
}

static pid_t start_https(const char *config, int port, const char *log, const char *cacert) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char exe[256], listen[64];
    snprintf(exe, sizeof exe, "%s/missived", build);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        (void)f;
        execl(exe, exe, "--config", config, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 100; i++) {
        if (curl_status(port, cacert) == 200) return pid;
        usleep(100000);
    }
    return -1;
}

TEST(https_is_served_and_sighup_replaces_the_certificate) {
    char c1[600], k1[600], c2[600], k2[600], cert[600], key[600], config[600], log[600];
    mv_strlcpy(c1, test_tmp_path("tls-c1.pem"), sizeof c1);
    mv_strlcpy(k1, test_tmp_path("tls-k1.pem"), sizeof k1);
    mv_strlcpy(c2, test_tmp_path("tls-c2.pem"), sizeof c2);
    mv_strlcpy(k2, test_tmp_path("tls-k2.pem"), sizeof k2);
    mv_strlcpy(cert, test_tmp_path("tls-cert.pem"), sizeof cert);
    mv_strlcpy(key, test_tmp_path("tls-key.pem"), sizeof key);
    mv_strlcpy(config, test_tmp_path("tls.json"), sizeof config);
    mv_strlcpy(log, test_tmp_path("tls.log"), sizeof log);
    REQUIRE(make_cert(c1, k1, "first"));
    REQUIRE(make_cert(c2, k2, "second"));
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp %s %s && cp %s %s", c1, cert, k1, key);
    REQUIRE(system(cmd) == 0);
    char dir[600], stream_out[600];
    mv_strlcpy(dir, test_tmp_path("tls-templates"), sizeof dir);
    mv_strlcpy(stream_out, test_tmp_path("tls-stream.txt"), sizeof stream_out);
    mkdir(dir, 0700);
    REQUIRE(write_template(dir, "t1", "http://127.0.0.1:9"));
    REQUIRE(test_write_file(config,
                            "{\"store\": \"sqlite:%s\", \"auth\": {\"mode\": \"headers\"},"
                            " \"templates\": \"%s\","
                            " \"tls\": {\"certFile\": \"%s\", \"keyFile\": \"%s\"}}",
                            test_tmp_path("tls.db"), dir, cert, key));
    int port = test_free_port();
    pid_t pid = start_https(config, port, log, c1);
    REQUIRE(pid > 0);
    CHECK_INT(curl_status(port, c1), 200);
    CHECK_INT(curl_status(port, c2), 0); /* the second certificate is not served yet */
    test_reply plain = test_http(port, "GET", "/healthz", NULL, NULL);
    CHECK(plain.status != 200); /* plain HTTP is not answered on an HTTPS port */
    test_reply_free(&plain);
    /* a live-update stream over HTTPS, open across both reloads below */
    snprintf(cmd, sizeof cmd,
             "curl -sN --max-time 60 --cacert %s -H 'X-User-Id: bob' "
             "https://127.0.0.1:%d/messages/stream > %s 2>&1 & echo $!",
             c1, port, stream_out);
    FILE *bg = popen(cmd, "r");
    int curl_pid = 0;
    REQUIRE(bg && fscanf(bg, "%d", &curl_pid) == 1);
    pclose(bg);
    CHECK(log_has(stream_out, "event: counts", 5000));

    /* a key that does not belong to the certificate: refused, the first pair keeps serving */
    snprintf(cmd, sizeof cmd, "cp %s %s", c2, cert);
    REQUIRE(system(cmd) == 0);
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: refused: ", 5000));
    CHECK_INT(curl_status(port, c1), 200);

    snprintf(cmd, sizeof cmd, "cp %s %s", k2, key);
    REQUIRE(system(cmd) == 0);
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: ok", 5000));
    CHECK_INT(curl_status(port, c2), 200);
    CHECK_INT(curl_status(port, c1), 0);
    snprintf(cmd, sizeof cmd,
             "curl -s -o /dev/null --cacert %s -H 'X-User-Id: ana' -H 'Content-Type: "
             "application/json' -d '{\"x\": \"over tls\"}' https://127.0.0.1:%d/messages/new/t1",
             c2, port);
    CHECK(system(cmd) == 0);
    CHECK(log_has(stream_out, "from over tls", 5000)); /* the stream opened before the reloads */
    if (curl_pid > 0) kill(curl_pid, SIGTERM);
    CHECK_INT(test_daemon_stop(pid), 0);
}

TEST(a_config_with_half_a_tls_section_is_refused_at_start) {
    char config[600];
    mv_strlcpy(config, test_tmp_path("tls-half.json"), sizeof config);
    REQUIRE(test_write_file(config,
                            "{\"store\": \"sqlite:%s\", \"tls\": {\"certFile\": \"c.pem\"}}",
                            test_tmp_path("tls-half.db")));
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%s/missived --check-config %s 2>&1", build, config);
    FILE *p = popen(cmd, "r");
    char out[2048] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK(WEXITSTATUS(pclose(p)) == 1);
    CHECK(strstr(out, "\"tls\" needs both \"certFile\" and \"keyFile\"") != NULL);
}

/* "channels" reloads too: deliveries of messages created after the reload go to the new webhook,
 * and a template naming a channel the new config lacks is refused with everything kept. */
TEST(sighup_reloads_the_channels_and_refuses_templates_naming_a_channel_it_lacks) {
    http_sink *a = http_sink_start(), *b = http_sink_start();
    REQUIRE(a && b);
    char dir[600], config[600], db[600], log[600], tpl[700], extra[600];
    mv_strlcpy(dir, test_tmp_path("reload-channels"), sizeof dir);
    mkdir(dir, 0700);
    mv_strlcpy(config, test_tmp_path("reload-channels.json"), sizeof config);
    mv_strlcpy(db, test_tmp_path("reload-channels.db"), sizeof db);
    mv_strlcpy(log, test_tmp_path("reload-channels.log"), sizeof log);
    snprintf(tpl, sizeof tpl, "%s/ping.json", dir);
    REQUIRE(test_write_file(tpl, "{\"templateCd\": \"ping\", \"receiverContent\": {\"title\": "
                                 "\"ping {{x}}\"}, \"prepare\": {\"toUser\": \"bob\"},"
                                 " \"channels\": {\"sms\": true}, \"actions\": []}"));
    snprintf(extra, sizeof extra, ", \"channels\": {\"sms\": {\"webhook\": \"%s/sms\"}}",
             http_sink_url(a));
    REQUIRE(write_config(config, db, dir, extra));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, log);
    REQUIRE(pid > 0);
    CHECK_INT(create(port, "ping", "{\"x\": \"one\"}", NULL, 0), 201);
    CHECK(http_sink_wait(a, 1, 10000));

    snprintf(extra, sizeof extra, ", \"channels\": {\"sms\": {\"webhook\": \"%s/sms\"}}",
             http_sink_url(b));
    REQUIRE(write_config(config, db, dir, extra));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: ok (templates 1, sagas 0)", 5000));
    CHECK_INT(log_count(log, "not applied until a restart"), 0);
    CHECK_INT(create(port, "ping", "{\"x\": \"two\"}", NULL, 0), 201);
    CHECK(http_sink_wait(b, 1, 10000));
    usleep(300 * 1000);
    CHECK_INT(http_sink_count(a), 1); /* the old webhook got only the message before the reload */

    /* a config without the sms channel while a template still names it: refused, sms still on */
    REQUIRE(write_config(config, db, dir, ""));
    REQUIRE(kill(pid, SIGHUP) == 0);
    CHECK(log_has(log, "reload: refused: ", 5000));
    CHECK(log_has(log, "sms", 100));
    CHECK_INT(create(port, "ping", "{\"x\": \"three\"}", NULL, 0), 201);
    CHECK(http_sink_wait(b, 2, 10000));

    CHECK_INT(test_daemon_stop(pid), 0);
    http_sink_stop(a);
    http_sink_stop(b);
}

int main(void) {
    return RUN_TESTS(
        sighup_reloads_templates_and_config_while_a_stream_and_a_slow_request_stay_open,
        sighup_reloads_saga_definitions_and_refuses_a_template_whose_saga_is_missing,
        https_is_served_and_sighup_replaces_the_certificate,
        a_config_with_half_a_tls_section_is_refused_at_start,
        sighup_reloads_the_channels_and_refuses_templates_naming_a_channel_it_lacks);
}
