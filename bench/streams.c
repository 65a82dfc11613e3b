/* streams.c — event-stream load for the live-updates rows of `make bench`.
 *
 *   streams hold PORT N      opens N idle GET /messages/stream connections (one user each, so
 *                            the per-user limit does not apply), from source addresses
 *                            127.0.0.2, .3, … (PER_SOURCE each: one address has too few
 *                            ephemeral ports for 20,000), prints {"opened": N, "seconds": S}
 *                            once all answered 200, then reads and discards until SIGTERM
 *   streams latency PORT K   one stream for "bench-latency"; K times: POST a message to that user
 *                            and time until its message.created event arrives; prints p50/p99
 *
 * One thread and poll() for all held streams: the client must cost less than the server. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig) {
    (void)sig;
    stop = 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#define PER_SOURCE 5000

/* Connects (from 127.0.0.<source>, when source > 0) and sends the stream request; -1 on
 * failure. */
static int open_stream_from(int port, const char *user, int source) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sockaddr_in from = {.sin_family = AF_INET};
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)source);
    int one = 1; /* the port is picked at connect, not searched for at bind */
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (source > 0 && bind(fd, (struct sockaddr *)&from, sizeof from) != 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /messages/stream HTTP/1.0\r\nHost: 127.0.0.1\r\nX-User-Id: %s\r\n\r\n", user);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    return fd;
}

static int open_stream(int port, const char *user) { return open_stream_from(port, user, 0); }

/* Reads until the status line is in; true for 200. */
static bool answered_ok(int fd) {
    char buf[512];
    size_t len = 0;
    double end = now_ms() + 10000;
    while (len < sizeof buf - 1 && now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r <= 0) return false;
        len += (size_t)r;
        buf[len] = '\0';
        if (strstr(buf, "\r\n")) return strncmp(buf, "HTTP/1.1 200", 12) == 0 ||
                                        strncmp(buf, "HTTP/1.0 200", 12) == 0;
    }
    return false;
}

static int hold(int port, int n) {
    struct pollfd *fds = calloc((size_t)n, sizeof *fds);
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        char user[64];
        snprintf(user, sizeof user, "bench-watcher-%d", i);
        fds[i].fd = open_stream_from(port, user, 1 + i / PER_SOURCE);
        fds[i].events = POLLIN;
        if (fds[i].fd < 0 || !answered_ok(fds[i].fd)) {
            fprintf(stderr, "streams: stream %d did not open\n", i);
            return 1;
        }
    }
    printf("{\"opened\": %d, \"seconds\": %.1f}\n", n, (now_ms() - t0) / 1000);
    fflush(stdout);
    /* epoll, not poll: the client must not scan 20,000 descriptors per wake-up on the CPUs the
     * daemon is measured on */
    int ep = epoll_create1(0);
    for (int i = 0; ep >= 0 && i < n; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i].fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i].fd, &ev);
    }
    char buf[4096];
    struct epoll_event evs[256];
    while (!stop && ep >= 0) {
        int k = epoll_wait(ep, evs, 256, 200);
        for (int i = 0; i < k; i++)
            if (read(evs[i].data.fd, buf, sizeof buf) <= 0)
                epoll_ctl(ep, EPOLL_CTL_DEL, evs[i].data.fd, NULL);
    }
    if (ep >= 0) close(ep);
    for (int i = 0; i < n; i++) close(fds[i].fd);
    free(fds);
    return 0;
}

static size_t keep_body(char *p, size_t size, size_t n, void *ctx) {
    char *out = ctx;
    size_t have = strlen(out), k = size * n;
    if (have + k < 4096) {
        memcpy(out + have, p, k);
        out[have + k] = '\0';
    }
    return size * n;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int latency(int port, int count) {
    int fd = open_stream(port, "bench-latency");
    if (fd < 0 || !answered_ok(fd)) {
        fprintf(stderr, "streams: the latency stream did not open\n");
        return 1;
    }
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/messages/new/bench-note", port);
    struct curl_slist *h = curl_slist_append(NULL, "X-User-Id: bench-sender");
    h = curl_slist_append(h, "Content-Type: application/json");
    double *ms = calloc((size_t)count, sizeof *ms);
    char *pending = calloc(1, 1 << 20);
    size_t plen = 0;
    int got = 0;
    for (int i = 0; i < count; i++) {
        char body[256], reply[4096] = "";
        snprintf(body, sizeof body,
                 "{\"to\": \"bench-latency\", \"from\": \"bench-sender\", \"n\": %d, \"text\": \"t\"}", i);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, reply);
        double t0 = now_ms();
        if (curl_easy_perform(c) != CURLE_OK) continue;
        const char *idp = strstr(reply, "\"id\":\"");
        if (!idp) continue;
        char id[25];
        memcpy(id, idp + 6, 24);
        id[24] = '\0';
        double end = t0 + 5000;
        bool seen = false;
        while (!seen && now_ms() < end) {
            char needle[40];
            snprintf(needle, sizeof needle, "\"id\":\"%s\"", id);
            char *hit = strstr(pending, needle);
            if (hit) {
                seen = true;
                size_t used = (size_t)(hit - pending) + strlen(needle);
                memmove(pending, pending + used, plen - used + 1);
                plen -= used;
                break;
            }
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 50) <= 0) continue;
            if (plen > (1 << 20) - 8192) { /* keep only the tail */
                memmove(pending, pending + plen - 4096, 4096);
                plen = 4096;
            }
            ssize_t r = read(fd, pending + plen, 8192);
            if (r <= 0) break;
            plen += (size_t)r;
            pending[plen] = '\0';
        }
        if (seen) ms[got++] = now_ms() - t0;
    }
    qsort(ms, (size_t)got, sizeof *ms, cmp);
    double p50 = got ? ms[got / 2] : 0, p99 = got ? ms[(got * 99) / 100 < got ? (got * 99) / 100 : got - 1] : 0;
    printf("{\"bench\": \"stream-latency\", \"events\": %d, \"errors\": %d, \"p50_ms\": %.3f, "
           "\"p99_ms\": %.3f}\n",
           got, count - got, p50, p99);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(ms);
    free(pending);
    close(fd);
    return got == count ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fputs("usage: streams hold PORT N | streams latency PORT COUNT\n", stderr);
        return 2;
    }
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    int port = atoi(argv[2]), n = atoi(argv[3]);
    if (strcmp(argv[1], "hold") == 0) return hold(port, n);
    if (strcmp(argv[1], "latency") == 0) return latency(port, n);
    fputs("streams: mode must be hold or latency\n", stderr);
    return 2;
}
