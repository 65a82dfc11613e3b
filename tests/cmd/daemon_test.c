/* daemon_test.c — missived as a real process on a free loopback port: start-up on a fresh SQLite
 * file, the message routes over sockets with libcurl (create, replay header, 413, 401, GET on the
 * action route, accept), /healthz and /metrics, and a graceful SIGTERM exit. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "test.h"

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

typedef struct {
    char *data;
    size_t len;
} buf;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
    buf *b = ud;
    b->data = realloc(b->data, b->len + size * n + 1);
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = 0;
    return size * n;
}

typedef struct {
    long status;
    json_t *json;
    bool replayed;
} reply;

static size_t header_cb(char *p, size_t size, size_t n, void *ud) {
    reply *r = ud;
    if (strncasecmp(p, "Idempotent-Replayed: true", 25) == 0) r->replayed = true;
    return size * n;
}

static reply http(int port, const char *method, const char *path, const char *user,
                  const char *body, const char *idem) {
    CURL *c = curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *h = NULL;
    char line[300];
    if (user) {
        snprintf(line, sizeof line, "X-User-Id: %s", user);
        h = curl_slist_append(h, line);
    }
    if (idem) {
        snprintf(line, sizeof line, "Idempotency-Key: %s", idem);
        h = curl_slist_append(h, line);
    }
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    buf b = {0};
    reply r = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    if (b.data) r.json = json_loads(b.data, JSON_DECODE_ANY, NULL);
    free(b.data);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

static const char *code_of(const reply *r) {
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
}

static pid_t start_daemon(const char *config, int port) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char exe[256], listen[64];
    snprintf(exe, sizeof exe, "%s/missived", build);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        execl(exe, exe, "--config", config, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100; i++) {
        reply r = http(port, "GET", "/healthz", NULL, NULL, NULL);
        json_decref(r.json);
        if (r.status == 200) return pid;
        mv_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

TEST(the_daemon_serves_messages_over_sockets_and_stops_on_sigterm) {
    char templates[PATH_MAX], config[600], dbpath[600];
    REQUIRE(realpath("examples/templates", templates));
    mv_strlcpy(dbpath, test_tmp_path("daemon.db"), sizeof dbpath);
    mv_strlcpy(config, test_tmp_path("daemon.json"), sizeof config);
    FILE *f = fopen(config, "w");
    REQUIRE(f);
    fprintf(f, "{\"store\": \"sqlite:%s\", \"templates\": \"%s\", \"auth\": {\"mode\": \"headers\"}}",
            dbpath, templates);
    fclose(f);
    int port = free_port();
    pid_t pid = start_daemon(config, port);
    REQUIRE(pid > 0);

    const char *body = "{\"hostId\": \"bob\", \"guestName\": \"Ana\", \"listing\": \"Flat\", "
                       "\"status\": \"open\"}";
    reply a = http(port, "POST", "/messages/new/booking-request", "ana", body, "k-1");
    CHECK_INT(a.status, 201);
    CHECK(!a.replayed);
    reply b = http(port, "POST", "/messages/new/booking-request", "ana", body, "k-1");
    CHECK_INT(b.status, 201);
    CHECK(b.replayed);
    CHECK(json_equal(a.json, b.json));
    const char *id = mv_json_str(json_array_get(json_object_get(a.json, "messages"), 0), "id");
    REQUIRE(id);
    char path[256];

    reply c = http(port, "GET", "/messages/count", NULL, NULL, NULL);
    CHECK_INT(c.status, 401);
    CHECK_STR(code_of(&c), "unauthenticated");
    json_decref(c.json);

    char *big = malloc(1100 * 1024);
    memset(big, ' ', 1100 * 1024);
    memcpy(big, "{\"x\": 1}", 8);
    big[1100 * 1024 - 1] = 0;
    c = http(port, "POST", "/messages/new/booking-request", "ana", big, NULL);
    CHECK_INT(c.status, 413);
    json_decref(c.json);
    free(big);

    snprintf(path, sizeof path, "/messages/%s/action/accept", id);
    c = http(port, "GET", path, "bob", NULL, NULL);
    CHECK_INT(c.status, 404);
    json_decref(c.json);
    c = http(port, "POST", path, "bob", "{}", NULL);
    CHECK_INT(c.status, 200);
    json_decref(c.json);
    c = http(port, "POST", path, "bob", "{}", NULL);
    CHECK_INT(c.status, 410);
    CHECK_STR(code_of(&c), "message_archived");
    json_decref(c.json);
    c = http(port, "GET", "/messages/count", "ana", NULL, NULL);
    CHECK_INT(json_integer_value(json_object_get(c.json, "count")), 1); /* the notification */
    json_decref(c.json);
    c = http(port, "GET", "/metrics", NULL, NULL, NULL);
    CHECK_INT(c.status, 200);

    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    json_decref(a.json);
    json_decref(b.json);
}

TEST(check_config_reports_a_bad_template_directory) {
    char config[600], dir[600];
    mv_strlcpy(dir, test_tmp_path("badtemplates"), sizeof dir);
    mkdir(dir, 0700);
    char file[700];
    snprintf(file, sizeof file, "%s/bad.json", dir);
    FILE *f = fopen(file, "w");
    fputs("{\"templateCd\": \"bad\", \"actions\": [{\"actionCd\": \"a\", \"name\": \"A\", "
          "\"variant\": \"x\"}]}", f);
    fclose(f);
    mv_strlcpy(config, test_tmp_path("check.json"), sizeof config);
    f = fopen(config, "w");
    fprintf(f, "{\"store\": \"sqlite:%s/x.db\", \"templates\": \"%s\"}", dir, dir);
    fclose(f);
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%s/missived --check-config %s 2>&1", build, config);
    FILE *p = popen(cmd, "r");
    char out[2048] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECK(WEXITSTATUS(st) == 1);
    CHECK(strstr(out, "must be available to sender or receiver") != NULL);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(the_daemon_serves_messages_over_sockets_and_stops_on_sigterm,
                       check_config_reports_a_bad_template_directory);
    curl_global_cleanup();
    return rc;
}
