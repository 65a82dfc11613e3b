/* gate.c — one thread with one epoll set: the listening socket, the connections whose first
 * request head is still arriving, and the ones being closed after an error answer.
 *
 * Invariants: a connection in the gate has never had a byte consumed (everything is peeked), so
 * the server reads the head itself after the hand-off; the pending list is in arrival order, so
 * the oldest head (first to time out, first to be dropped when the server is full) is at its
 * front; counts per client address cover the gate and the server, under one mutex because the
 * server's threads report closes. Edge-triggered epoll, because a peeked head stays readable:
 * level-triggered would spin until the head completes. */
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "http/gate.h"
#include "http/http_server.h"

#define CLOSE_LINGER_MS 1000 /* after an error answer: wait this long for the client's FIN */
#define STOP_HEAD_MS 1000    /* once no longer accepting: time left for heads still arriving */
#define STOP_SETTLE_MS 50    /* new connections refused: time for handshakes already under way */
#define IP_BUCKETS 4096

typedef enum { CONN_HEAD, CONN_CLOSING } conn_state;

typedef struct pending {
    struct pending *prev, *next;
    int fd;
    conn_state state;
    int64_t deadline_ms;
    struct sockaddr_storage addr;
    socklen_t addrlen;
} pending;

typedef struct pending_list {
    pending *head, *tail;
    int n;
} pending_list;

typedef struct ip_count {
    struct ip_count *next;
    unsigned char key[17]; /* family byte + up to 16 address bytes */
    int n;
} ip_count;

struct mv__gate {
    mv__gate_options o;
    int ep, wake_fd;
    pthread_t thread;
    bool thread_started;
    atomic_bool quit, stop_accepting;
    bool accepting_stopped;  /* guarded by mu */
    int64_t settle_until_ms; /* gate thread: when the listener closes, once refusing */
    pthread_cond_t stopped;
    pthread_mutex_t mu; /* guards ips, open */
    ip_count *ips[IP_BUCKETS];
    int open; /* in the gate + handed off */
    pending_list heads, closing;
    char *peek; /* max_head + 1 bytes, gate thread only */
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- counts per address ------------------------------------------------------------------ */

static size_t addr_key(const struct sockaddr *sa, unsigned char key[17]) {
    memset(key, 0, 17);
    if (sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 5;
    }
    if (sa->sa_family == AF_INET6) {
        key[0] = 6;
        memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 17;
    }
    return 1;
}

static ip_count **ip_slot(mv__gate *g, const unsigned char key[17]) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < 17; i++)
        h = (h ^ key[i]) * 16777619u;
    ip_count **p = &g->ips[h % IP_BUCKETS];
    while (*p && memcmp((*p)->key, key, 17) != 0)
        p = &(*p)->next;
    return p;
}

/* Counts a new connection from sa; false (nothing counted) when the address is at its limit. */
static bool count_open(mv__gate *g, const struct sockaddr *sa, bool enforce) {
    unsigned char key[17];
    addr_key(sa, key);
    bool ok = true;
    pthread_mutex_lock(&g->mu);
    ip_count **p = ip_slot(g, key);
    if (!*p) {
        *p = calloc(1, sizeof **p);
        if (*p) memcpy((*p)->key, key, 17);
    }
    if (!*p || (enforce && g->o.max_per_ip > 0 && (*p)->n >= g->o.max_per_ip)) {
        ok = false;
    } else {
        (*p)->n++;
        g->open++;
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void count_closed(mv__gate *g, const struct sockaddr *sa) {
    unsigned char key[17];
    addr_key(sa, key);
    pthread_mutex_lock(&g->mu);
    ip_count **p = ip_slot(g, key);
    if (*p) {
        g->open--;
        if (--(*p)->n <= 0) {
            ip_count *dead = *p;
            *p = dead->next;
            free(dead);
        }
    }
    pthread_mutex_unlock(&g->mu);
}

void mv__gate_conn_closed(mv__gate *gate, const struct sockaddr *addr) {
    if (gate && addr) count_closed(gate, addr);
}

int mv__gate_open_connections(mv__gate *gate) {
    pthread_mutex_lock(&gate->mu);
    int n = gate->open;
    pthread_mutex_unlock(&gate->mu);
    return n;
}

/* ---- lists ------------------------------------------------------------------------------- */

static void list_push(pending_list *l, pending *p) {
    p->next = NULL;
    p->prev = l->tail;
    if (l->tail)
        l->tail->next = p;
    else
        l->head = p;
    l->tail = p;
    l->n++;
}

static void list_remove(pending_list *l, pending *p) {
    if (p->prev)
        p->prev->next = p->next;
    else
        l->head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        l->tail = p->prev;
    p->prev = p->next = NULL;
    l->n--;
}

static void conn_drop(mv__gate *g, pending *p) {
    list_remove(p->state == CONN_HEAD ? &g->heads : &g->closing, p);
    close(p->fd); /* also removes it from the epoll set */
    count_closed(g, (struct sockaddr *)&p->addr);
    free(p);
}

/* ---- error answers ----------------------------------------------------------------------- */

static const char *reason(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

size_t mv__gate_error_response(int status, const char *msg, char *buf, size_t size) {
    char body[512];
    int bl = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
                      status == 503 ? "draining" : "invalid_argument", msg);
    if (bl < 0 || (size_t)bl >= sizeof body) bl = 0;
    int n = snprintf(buf, size,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, reason(status), bl, body);
    return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
}

/* Answers status and moves the connection to the closing list: what the client sent is read and
 * dropped (closing a socket with unread input would reset it and could destroy the answer). */
static void answer_and_close(mv__gate *g, pending *p, int status, const char *msg) {
    char out[1024];
    size_t n = mv__gate_error_response(status, msg, out, sizeof out);
    char sink[4096];
    while (recv(p->fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    ssize_t w = send(p->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w; /* a client that cannot take 300 bytes gets nothing: it is closed either way */
    shutdown(p->fd, SHUT_WR);
    list_remove(&g->heads, p);
    p->state = CONN_CLOSING;
    p->deadline_ms = now_ms() + CLOSE_LINGER_MS;
    list_push(&g->closing, p);
}

/* ---- head checks ------------------------------------------------------------------------- */

static bool is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *trim(const char *s, const char *e, size_t *len) {
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *len = (size_t)(e - s);
    return s;
}

#define FAIL(status, text)                                                                         \
    do {                                                                                           \
        snprintf(msg, msg_size, "%s", text);                                                       \
        return status;                                                                             \
    } while (0)

int mv__gate_check_head(const char *head, size_t len, size_t max_target, char *msg,
                        size_t msg_size) {
    const char *end = head + len;
    const char *eol = memchr(head, '\n', len);
    if (!eol) FAIL(400, "malformed request line");
    /* request line: METHOD SP TARGET SP HTTP/1.x */
    const char *sp1 = memchr(head, ' ', (size_t)(eol - head));
    if (!sp1 || sp1 == head) FAIL(400, "malformed request line");
    for (const char *c = head; c < sp1; c++)
        if (!is_tchar((unsigned char)*c)) FAIL(400, "malformed request method");
    const char *tgt = sp1 + 1;
    const char *sp2 = memchr(tgt, ' ', (size_t)(eol - tgt));
    if (!sp2 || sp2 == tgt) FAIL(400, "malformed request line");
    if ((size_t)(sp2 - tgt) > max_target) FAIL(414, "request target is too long");
    size_t nparams = 0;
    bool in_query = false;
    for (const char *c = tgt; c < sp2; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f) FAIL(400, "malformed request target");
        if (*c == '?' && !in_query)
            in_query = true, nparams = 1;
        else if (*c == '&' && in_query)
            nparams++;
    }
    if (nparams > MV_HTTP_MAX_QUERY_PARAMS) FAIL(400, "too many query parameters");
    const char *ver = sp2 + 1; /* exactly "HTTP/d.d", then CRLF or LF */
    size_t vlen = (size_t)(eol - ver);
    if (vlen && ver[vlen - 1] == '\r') vlen--;
    if (vlen != 8 || strncmp(ver, "HTTP/", 5) != 0 || ver[6] != '.' || ver[5] < '0' ||
        ver[5] > '9' || ver[7] < '0' || ver[7] > '9')
        FAIL(400, "malformed HTTP version");
    if (ver[5] != '1') FAIL(505, "only HTTP/1.0 and HTTP/1.1 are supported");
    /* header fields */
    bool chunked = false, has_te = false, has_cl = false;
    const char *cl_val = NULL;
    size_t cl_len = 0;
    for (const char *line = eol + 1; line < end;) {
        const char *le = memchr(line, '\n', (size_t)(end - line));
        if (!le) FAIL(400, "malformed header field");
        if (le == line || (le == line + 1 && line[0] == '\r')) break; /* the blank line */
        if (*line == ' ' || *line == '\t') FAIL(400, "folded header fields are not supported");
        const char *colon = memchr(line, ':', (size_t)(le - line));
        if (!colon || colon == line) FAIL(400, "malformed header field");
        for (const char *c = line; c < colon; c++)
            if (!is_tchar((unsigned char)*c)) FAIL(400, "malformed header field name");
        size_t nlen = (size_t)(colon - line), val_len;
        const char *val = trim(colon + 1, le, &val_len);
        for (size_t i = 0; i < val_len; i++)
            if ((unsigned char)val[i] < ' ' && val[i] != '\t')
                FAIL(400, "control character in a header field");
        if (nlen == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
            if (has_te) FAIL(400, "repeated Transfer-Encoding");
            has_te = true;
            if (val_len != 7 || strncasecmp(val, "chunked", 7) != 0)
                FAIL(501, "Transfer-Encoding other than chunked is not supported");
            chunked = true;
        } else if (nlen == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            if (val_len == 0 || val_len > 19) FAIL(400, "invalid Content-Length");
            for (size_t i = 0; i < val_len; i++)
                if (val[i] < '0' || val[i] > '9') FAIL(400, "invalid Content-Length");
            if (has_cl && (val_len != cl_len || memcmp(val, cl_val, cl_len) != 0))
                FAIL(400, "conflicting Content-Length");
            has_cl = true;
            cl_val = val;
            cl_len = val_len;
        }
        line = le + 1;
    }
    if (chunked && has_cl) FAIL(400, "both Transfer-Encoding and Content-Length");
    return 0;
}

#undef FAIL

/* ---- the gate thread --------------------------------------------------------------------- */

static const char *find_head_end(const char *buf, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (buf[i] != '\n') continue;
        if (buf[i + 1] == '\n') return buf + i + 2;
        if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n') return buf + i + 3;
    }
    return NULL;
}

/* The connection stays counted until the server reports it closed (mv__gate_conn_closed): a
 * connection on its way into the server is never "not open", or a drain could end under it. */
static void hand_off(mv__gate *g, pending *p) {
    list_remove(&g->heads, p);
    epoll_ctl(g->ep, EPOLL_CTL_DEL, p->fd, NULL);
    if (!g->o.hand_off(g->o.ctx, p->fd, (struct sockaddr *)&p->addr, p->addrlen))
        count_closed(g, (struct sockaddr *)&p->addr);
    free(p);
}

static void on_readable(mv__gate *g, pending *p) {
    if (p->state == CONN_CLOSING) {
        char sink[4096];
        ssize_t n;
        while ((n = recv(p->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) conn_drop(g, p);
        return;
    }
    ssize_t n = recv(p->fd, g->peek, g->o.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        conn_drop(g, p);
        return;
    }
    if (n < 0) return;
    if (g->o.opaque) {
        hand_off(g, p);
        return;
    }
    size_t len = (size_t)n;
    /* Leading empty lines before a request line are allowed (RFC 9112 2.2). */
    size_t skip = 0;
    while (skip < len && (g->peek[skip] == '\r' || g->peek[skip] == '\n'))
        skip++;
    const char *start = g->peek + skip;
    size_t avail = len - skip;
    const char *end = find_head_end(start, avail);
    char msg[128];
    if (!end) {
        const char *eol = memchr(start, '\n', avail);
        if (!eol && avail > g->o.max_target + 64)
            answer_and_close(g, p, 414, "request target is too long");
        else if (len > g->o.max_head)
            answer_and_close(g, p, 431, "request header fields are too large");
        return; /* more to come */
    }
    int status =
        mv__gate_check_head(start, (size_t)(end - start), g->o.max_target, msg, sizeof msg);
    if (status) {
        answer_and_close(g, p, status, msg);
        return;
    }
    hand_off(g, p);
}

static void accept_all(mv__gate *g) {
    for (;;) {
        struct sockaddr_storage ss = {0}; /* accept4 fills it; the analyzer cannot see that */
        socklen_t sl = sizeof ss;
        int fd = accept4(g->o.listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return; /* EAGAIN, or out of descriptors: the backlog waits for the next wake-up */
        }
        if (!count_open(g, (struct sockaddr *)&ss, true)) {
            close(fd); /* over the per-address limit */
            continue;
        }
        /* Full: drop the oldest connection still sending its head to make room. */
        if (mv__gate_open_connections(g) > g->o.max_connections) {
            if (g->heads.head) {
                conn_drop(g, g->heads.head);
            } else {
                count_closed(g, (struct sockaddr *)&ss);
                close(fd);
                continue;
            }
        }
        pending *p = calloc(1, sizeof *p);
        if (!p) {
            count_closed(g, (struct sockaddr *)&ss);
            close(fd);
            continue;
        }
        p->fd = fd;
        p->state = CONN_HEAD;
        p->addr = ss;
        p->addrlen = sl;
        p->deadline_ms = now_ms() + g->o.header_timeout_ms;
        list_push(&g->heads, p);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = p};
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) != 0) conn_drop(g, p);
    }
}

static void expire(mv__gate *g) {
    int64_t now = now_ms();
    while (g->heads.head && g->heads.head->deadline_ms <= now)
        answer_and_close(g, g->heads.head, 408, "the request head did not arrive in time");
    while (g->closing.head && g->closing.head->deadline_ms <= now)
        conn_drop(g, g->closing.head);
}

/* Stops accepting without resetting anyone who is already connected: a filter that drops every
 * packet is attached to the listening socket first, so new handshakes stall (the client sees
 * "refused" once the socket is closed, before it sent anything), then the connections the kernel
 * has already completed are accepted like any other, and only then is the socket closed. Heads
 * still arriving get a short deadline. */
/* Stopping happens in two steps so that no client is reset after the kernel completed its
 * handshake: first the listener drops new SYNs (a filter on the TCP flags; the client sees a
 * refused connection once the listener is gone), while connections whose handshake is under way
 * still complete and are accepted; STOP_SETTLE_MS later the listener closes. Sockets accepted
 * meanwhile inherit the filter, which drops only SYNs — never seen on an open connection. */
static void refuse_new_connections(mv__gate *g) {
    struct sock_filter drop_syn[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13), /* the TCP header's flags byte */
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x02, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0),
        BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
    };
    struct sock_fprog prog = {.len = sizeof drop_syn / sizeof drop_syn[0], .filter = drop_syn};
    setsockopt(g->o.listen_fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
    accept_all(g);
    g->settle_until_ms = now_ms() + STOP_SETTLE_MS;
}

static void do_stop_accepting(mv__gate *g) {
    if (g->o.listen_fd >= 0) {
        accept_all(g);
        close(g->o.listen_fd);
        g->o.listen_fd = -1;
        int64_t last = now_ms() + STOP_HEAD_MS;
        for (pending *p = g->heads.head; p; p = p->next)
            if (p->deadline_ms > last) p->deadline_ms = last;
    }
    pthread_mutex_lock(&g->mu);
    g->accepting_stopped = true;
    pthread_cond_broadcast(&g->stopped);
    pthread_mutex_unlock(&g->mu);
}

static void *gate_main(void *arg) {
    mv__gate *g = arg;
    struct epoll_event evs[64];
    while (!atomic_load(&g->quit)) {
        int n = epoll_wait(g->ep, evs, 64, g->settle_until_ms ? 5 : 100);
        for (int i = 0; i < n; i++) {
            void *ptr = evs[i].data.ptr;
            if (ptr == &g->o.listen_fd) {
                if (g->o.listen_fd >= 0) accept_all(g);
            } else if (ptr == &g->wake_fd) {
                uint64_t v;
                ssize_t r = read(g->wake_fd, &v, sizeof v);
                (void)r;
            } else {
                on_readable(g, ptr);
            }
        }
        if (atomic_load(&g->stop_accepting) && g->o.listen_fd >= 0) {
            if (!g->settle_until_ms)
                refuse_new_connections(g);
            else if (now_ms() >= g->settle_until_ms)
                do_stop_accepting(g);
        }
        expire(g);
    }
    if (g->o.listen_fd >= 0 || !g->accepting_stopped) do_stop_accepting(g);
    while (g->heads.head)
        conn_drop(g, g->heads.head);
    while (g->closing.head)
        conn_drop(g, g->closing.head);
    return NULL;
}

mv__gate *mv__gate_start(const mv__gate_options *opts) {
    mv__gate *g = calloc(1, sizeof *g);
    if (!g) {
        close(opts->listen_fd);
        return NULL;
    }
    g->o = *opts;
    g->wake_fd = -1;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g->peek = malloc(opts->max_head + 1);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->stopped, NULL);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &g->o.listen_fd};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &g->wake_fd};
    if (opts->self) *opts->self = g;
    if (g->ep < 0 || g->wake_fd < 0 || !g->peek ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->o.listen_fd, &lev) != 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake_fd, &wev) != 0 ||
        pthread_create(&g->thread, NULL, gate_main, g) != 0) {
        if (opts->self) *opts->self = NULL;
        mv__gate_free(g);
        return NULL;
    }
    g->thread_started = true;
    return g;
}

static void wake(mv__gate *g) {
    uint64_t one = 1;
    ssize_t r = write(g->wake_fd, &one, sizeof one);
    (void)r;
}

void mv__gate_stop_accepting(mv__gate *gate) {
    if (!gate || !gate->thread_started) return;
    atomic_store(&gate->stop_accepting, true);
    wake(gate);
    pthread_mutex_lock(&gate->mu);
    while (!gate->accepting_stopped)
        pthread_cond_wait(&gate->stopped, &gate->mu);
    pthread_mutex_unlock(&gate->mu);
}

void mv__gate_free(mv__gate *gate) {
    if (!gate) return;
    if (gate->thread_started) {
        atomic_store(&gate->quit, true);
        wake(gate);
        pthread_join(gate->thread, NULL);
    } else {
        if (gate->o.listen_fd >= 0) close(gate->o.listen_fd);
    }
    if (gate->ep >= 0) close(gate->ep);
    if (gate->wake_fd >= 0) close(gate->wake_fd);
    for (int i = 0; i < IP_BUCKETS; i++) {
        ip_count *c = gate->ips[i];
        while (c) {
            ip_count *next = c->next;
            free(c);
            c = next;
        }
    }
    pthread_cond_destroy(&gate->stopped);
    pthread_mutex_destroy(&gate->mu);
    free(gate->peek);
    free(gate);
}
