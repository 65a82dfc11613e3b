/* sse_client.c — the helpers of sse_client.h. */
#define MV_TEST_STORES_IMPL

#include "support/sse_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/stores.h"

int64_t sse_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool fill(sse *c, int timeout_ms) {
    if (c->eof || c->len >= sizeof c->buf - 1) return false;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
    if (n <= 0) {
        c->eof = true;
        return false;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    return true;
}

sse *sse_open_rcvbuf(int port, const char *path, const char *headers, int rcvbuf) {
    sse *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) return c;
    char req[2048];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s\r\n", path,
                     headers ? headers : "");
    if (write(c->fd, req, (size_t)n) != n) return c;
    int64_t end = sse_now_ms() + 3000;
    char *head_end;
    while (!(head_end = strstr(c->buf, "\r\n\r\n")) && sse_now_ms() < end)
        fill(c, 100);
    if (!head_end) return c;
    sscanf(c->buf, "HTTP/1.%*d %d", &c->status);
    size_t body = (size_t)(head_end + 4 - c->buf);
    memmove(c->buf, c->buf + body, c->len - body + 1);
    c->len -= body;
    return c;
}

/* The next event (comments and retry lines skipped) within timeout_ms; false when none. */
bool sse_next(sse *c, int timeout_ms, sse_event *ev) {
    int64_t end = sse_now_ms() + timeout_ms;
    for (;;) {
        char *sep;
        while ((sep = strstr(c->buf, "\n\n")) != NULL) {
            *sep = '\0';
            memset(ev, 0, sizeof *ev);
            ev->id = -1;
            for (char *line = c->buf, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next) *next++ = '\0';
                if (strncmp(line, "id: ", 4) == 0)
                    ev->id = strtoll(line + 4, NULL, 10);
                else if (strncmp(line, "event: ", 7) == 0)
                    snprintf(ev->name, sizeof ev->name, "%s", line + 7);
                else if (strncmp(line, "data: ", 6) == 0)
                    snprintf(ev->data, sizeof ev->data, "%s", line + 6);
            }
            if (strcmp(ev->name, "counts") == 0)
                mv_strlcpy(c->last_counts, ev->data, sizeof c->last_counts); /* counts are short */
            size_t used = (size_t)(sep + 2 - c->buf);
            memmove(c->buf, c->buf + used, c->len - used + 1);
            c->len -= used;
            if (ev->name[0]) return true;
        }
        int left = (int)(end - sse_now_ms());
        if (left <= 0 || c->eof) return false;
        fill(c, left);
    }
}

/* The next event named name (others skipped). */
bool sse_wait(sse *c, const char *name, int timeout_ms, sse_event *ev) {
    int64_t end = sse_now_ms() + timeout_ms;
    while (sse_now_ms() < end)
        if (sse_next(c, (int)(end - sse_now_ms()), ev) && strcmp(ev->name, name) == 0) return true;
    return false;
}

/* True when the server ended the stream within timeout_ms. */
bool sse_ended(sse *c, int timeout_ms) {
    int64_t end = sse_now_ms() + timeout_ms;
    while (!c->eof && sse_now_ms() < end) {
        fill(c, 50);
        c->len = 0;
        c->buf[0] = '\0';
    }
    return c->eof;
}

sse *sse_open(int port, const char *path, const char *headers) {
    return sse_open_rcvbuf(port, path, headers, 0);
}

void sse_close(sse *c) {
    if (!c) return;
    close(c->fd);
    free(c);
}

/* ---- daemons ------------------------------------------------------------------------------- */

bool sse_env_init(sse_env *e, const char *kind, const char *name, const char *stream_extra,
                  const char *top_extra) {
    memset(e, 0, sizeof *e);
    e->url = test_store_url(kind, name);
    if (!e->url) return false;
    snprintf(e->dir, sizeof e->dir, "/tmp/missive-test-%d", (int)getpid());
    mkdir(e->dir, 0700);
    snprintf(e->dir, sizeof e->dir, "/tmp/missive-test-%d/%s-%s", (int)getpid(), name, kind);
    char path[800];
    snprintf(path, sizeof path, "%s/templates", e->dir);
    if (mkdir(e->dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/templates/note.json", e->dir);
    if (!test_write_file(path, "{\"templateCd\": \"note\", \"type\": \"info\","
                               " \"receiverContent\": {\"title\": \"Note {{n}}\"},"
                               " \"prepare\": {\"toUser\": \"{{to}}\"}, \"actions\": []}"))
        return false;
    snprintf(e->config, sizeof e->config, "%s/missived.json", e->dir);
    snprintf(e->log, sizeof e->log, "%s/daemon.log", e->dir);
    setenv("MISSIVE_STREAM_SECRET", SSE_SECRET, 1);
    bool own_heartbeat = stream_extra && strstr(stream_extra, "\"heartbeatMs\"");
    return test_write_file(e->config,
                           "{\"templates\": \"%s/templates\", \"auth\": {\"mode\": \"headers\"},"
                           " \"stream\": {%s\"secretEnv\": \"MISSIVE_STREAM_SECRET\"%s}%s}",
                           e->dir, own_heartbeat ? "" : "\"heartbeatMs\": 200, ",
                           stream_extra ? stream_extra : "", top_extra ? top_extra : "");
}

pid_t sse_env_start(sse_env *e, int *port) {
    *port = test_free_port();
    return test_daemon_start(e->config, *port, e->url, e->log);
}

const char *sse_send_note(int port, const char *to, int n) {
    static char id[25];
    char body[128];
    snprintf(body, sizeof body, "{\"to\": \"%s\", \"n\": %d}", to, n);
    test_reply r = test_http(port, "POST", "/messages/new/note", "X-User-Id: ana\n", body);
    const char *got =
        r.status == 201 ? mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id")
                        : NULL;
    snprintf(id, sizeof id, "%s", got ? got : "");
    test_reply_free(&r);
    return id;
}

bool sse_data_has_id(const sse_event *ev, const char *id) {
    json_t *d = json_loads(ev->data, 0, NULL);
    bool ok = d && strcmp(mv_json_str(d, "id") ? mv_json_str(d, "id") : "", id) == 0;
    json_decref(d);
    return ok;
}

char *sse_sign_ticket(const char *claims) {
    size_t n = strlen(claims);
    char *t = malloc(3 + mv_b64url_len(n) + 1 + 44 + 1);
    memcpy(t, "v1.", 3);
    mv_b64url_encode(claims, n, t + 3);
    size_t head = strlen(t);
    unsigned char mac[32];
    mv_hmac_sha256(SSE_SECRET, strlen(SSE_SECRET), t, head, mac);
    t[head] = '.';
    mv_b64url_encode(mac, 32, t + head + 1);
    return t;
}
