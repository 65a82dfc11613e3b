/* daemon_proc.c — see daemon_proc.h. */
#include "support/daemon_proc.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "missive/base.h"

int test_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    close(fd);
    return ntohs(a.sin_port);
}

typedef struct {
    char *data;
    size_t len;
} buffer;

static size_t collect(char *p, size_t size, size_t n, void *ud) {
    buffer *b = ud;
    char *grown = realloc(b->data, b->len + size * n + 1);
    if (!grown) return 0;
    b->data = grown;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = 0;
    return size * n;
}

typedef struct {
    test_reply *r;
    char content_type[128];
} head_state;

static size_t header_cb(char *p, size_t size, size_t n, void *ud) {
    head_state *h = ud;
    size_t len = size * n;
    if (len >= 25 && strncasecmp(p, "Idempotent-Replayed: true", 25) == 0) h->r->replayed = true;
    if (len > 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
        size_t b = 13, e = len;
        while (b < e && p[b] == ' ')
            b++;
        while (e > b && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' '))
            e--;
        snprintf(h->content_type, sizeof h->content_type, "%.*s", (int)(e - b), p + b);
    }
    return len;
}

/* Under make test (BUILD set) or with MISSIVE_TEST_RECORD_DIR, every exchange is appended as one
 * JSON line to DIR/c-<pid>.jsonl (DIR default $BUILD/responses); the TypeScript suite, which runs
 * after the C tests, validates them all against api/openapi.json. */
static void record(const char *method, const char *path, long status, const char *content_type,
                   const char *body) {
    const char *dir = getenv("MISSIVE_TEST_RECORD_DIR");
    char fallback[600];
    if ((!dir || !*dir) && getenv("BUILD") && *getenv("BUILD")) {
        snprintf(fallback, sizeof fallback, "%s/responses", getenv("BUILD"));
        mkdir(fallback, 0755);
        dir = fallback;
    }
    if (!dir || !*dir || status == 0) return;
    json_t *line = json_pack("{s:s,s:s,s:i,s:s,s:s}", "method", method, "path", path, "status",
                             (int)status, "contentType", content_type, "source", "c");
    json_object_set_new(line, "body", body ? json_string(body) : json_null());
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (!text) return;
    char file[1024];
    snprintf(file, sizeof file, "%s/c-%d.jsonl", dir, (int)getpid());
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    FILE *f = fopen(file, "a");
    if (f) {
        fprintf(f, "%s\n", text);
        fclose(f);
    }
    pthread_mutex_unlock(&mu);
    free(text);
}

/* headers ('\n'-separated lines, may be NULL) and the JSON content type as a curl list. */
static struct curl_slist *header_list(const char *headers) {
    struct curl_slist *h = NULL;
    for (const char *p = headers; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        if (n) h = curl_slist_append(h, line);
        p += n + (nl ? 1 : 0);
    }
    h = curl_slist_append(h, "Content-Type: application/json");
    return curl_slist_append(h, "Expect:");
}

test_reply test_http(int port, const char *method, const char *path, const char *headers,
                     const char *body) {
    CURL *c = curl_easy_init();
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *h = header_list(headers);
    buffer b = {0};
    test_reply r = {0};
    head_state hs = {.r = &r};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hs);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
    /* the status even when sending failed after it arrived: a server may answer an oversized
     * request (413) and close while the body is still on its way */
    curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    if (b.data) r.json = json_loads(b.data, JSON_DECODE_ANY, NULL);
    record(method, path, r.status, hs.content_type, b.data ? b.data : "");
    free(b.data);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

int test_threads_of(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

int64_t test_http_many(int port, int n, const char *method, const char *const *paths,
                       const char *const *headers, const char *const *body, long *status,
                       char **bodies) {
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)n, sizeof *h);
    struct curl_slist **lists = calloc((size_t)n, sizeof *lists);
    buffer *b = calloc((size_t)n, sizeof *b);
    int64_t t0 = mv_now_ms();
    for (int i = 0; i < n; i++) {
        char url[1024];
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, paths[i]);
        lists[i] = header_list(headers ? headers[i] : NULL);
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_CUSTOMREQUEST, method);
        if (body && body[i]) curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, body[i]);
        curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, lists[i]);
        curl_easy_setopt(h[i], CURLOPT_TIMEOUT_MS, 60000L);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &b[i]);
        curl_multi_add_handle(m, h[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    int64_t took = mv_now_ms() - t0;
    for (int i = 0; i < n; i++) {
        status[i] = 0;
        curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &status[i]);
        bodies[i] = b[i].data;
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
        curl_slist_free_all(lists[i]);
    }
    free(b);
    free(lists);
    free(h);
    curl_multi_cleanup(m);
    return took;
}

void test_reply_free(test_reply *r) {
    json_decref(r->json);
    r->json = NULL;
}

const char *test_reply_code(const test_reply *r) {
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
}

pid_t test_daemon_start(const char *config, int port, const char *store, const char *log) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char exe[256], listen[64];
    snprintf(exe, sizeof exe, "%s/missived", build);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(log ? log : "/dev/null", "w", stderr)) _exit(126);
        if (store)
            execl(exe, exe, "--config", config, "--listen", listen, "--store", store, (char *)NULL);
        else
            execl(exe, exe, "--config", config, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    if (pid < 0) return -1;
    for (int i = 0; i < 200; i++) {
        test_reply r = test_http(port, "GET", "/healthz", NULL, NULL);
        test_reply_free(&r);
        if (r.status == 200) return pid;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) return -1; /* it exited: bad config */
        mv_sleep_ms(25);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int test_daemon_stop(pid_t pid) {
    if (pid <= 0) return -1;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool test_write_file(const char *path, const char *fmt, ...) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    return fclose(f) == 0;
}
