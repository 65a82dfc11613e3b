/* loadgen.c — our own HTTP/1.1 load generator for missived (`make bench`), over raw sockets.
 *
 * N threads, one keep-alive connection each, for a fixed duration. Modes:
 *   create  POST /messages/new/<template> with a fresh Idempotency-Key and a small JSON body
 *   action  create a message to a recipient, read its id, POST /messages/<id>/action/<actionCd>
 *           as the recipient (one operation = one create + one action)
 *   get     GET <path> repeatedly
 *   cursor  (single request chain) walk GET <path>&cursor=… <pages> times and print the cursor
 *           reached, for the deep-page benchmark
 *   saga    POST /sagas/<template> as an admin with a fresh sagaId; the record must come back
 *           "completed" (saga3 over HTTP: its webhook steps against a no-op receiver)
 * Hostile-load options: --fresh 1 opens a new connection for every request (a fresh client);
 * --slowloris N first opens N connections that send a request head one byte per second and never
 * finish it (from 127.0.0.2, 127.0.0.3, … 250 per address, as N attackers would) and reports how
 * many the server still holds at the end; --drain 1 runs until the server refuses connections
 * (it is being stopped with SIGTERM meanwhile) and counts requests answered 503 draining and
 * requests reset — sent, but the connection closed without an answer.
 * Every response status is checked (201 for creates, 200 otherwise); anything else is an error,
 * counted and reported with the first offending status and body, and makes the exit status 1.
 * Latencies (one per operation) are kept in per-thread arrays, merged and sorted for p50/p99.
 * Output: one JSON line per run on stdout. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef enum { MODE_CREATE, MODE_ACTION, MODE_GET, MODE_CURSOR, MODE_SAGA } mode_t_;

typedef struct {
    const char *host;
    int port;
    mode_t_ mode;
    int threads;
    double seconds;
    const char *template_cd;
    const char *action_cd;
    const char *path;
    const char *user;
    const char *roles; /* X-User-Roles of get and cursor requests (NULL: none) */
    int pages;
    const char *label;
    bool fresh;
    int slowloris;
    bool drain;
    const char *bearer; /* --bearer: creates authenticate with this token (JWT mode) */
} options;

static options opt = {.host = "127.0.0.1",
                      .port = 8080,
                      .mode = MODE_CREATE,
                      .threads = 32,
                      .seconds = 20,
                      .template_cd = "bench-note",
                      .action_cd = "ack",
                      .path = "/messages?limit=50",
                      .user = "bench-reader",
                      .pages = 200,
                      .label = NULL};

static atomic_bool stop_flag;
static atomic_long total_errors;
static atomic_long total_resets, total_draining;
static atomic_int workers_done;
static pthread_mutex_t first_error_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_error[512];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void record_error(const char *fmt, ...) {
    atomic_fetch_add(&total_errors, 1);
    pthread_mutex_lock(&first_error_mu);
    if (!first_error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(first_error, sizeof first_error, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&first_error_mu);
}

/* ---- one keep-alive connection ----------------------------------------------------------- */

typedef struct {
    int fd;
    char *buf; /* received bytes: [0, len) */
    size_t len, cap;
    char *body; /* the last response's body (NUL-terminated copy) */
    size_t body_cap;
} conn;

static int conn_open(conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = 15}; /* a server that never answers is an error, not a hang */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    inet_pton(AF_INET, opt.host, &sa.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    c->len = 0;
    return 0;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int fill(conn *c) {
    if (c->cap - c->len < 4096) {
        c->cap = c->cap ? c->cap * 2 : 65536;
        c->buf = realloc(c->buf, c->cap);
        if (!c->buf) abort();
    }
    ssize_t r;
    do r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) return -1;
    c->len += (size_t)r;
    return 0;
}

static void set_body(conn *c, const char *p, size_t n) {
    if (n + 1 > c->body_cap) {
        c->body_cap = n + 1 > 65536 ? n + 1 : 65536;
        c->body = realloc(c->body, c->body_cap);
        if (!c->body) abort();
    }
    memcpy(c->body, p, n);
    c->body[n] = '\0';
}

/* Case-insensitive header lookup in [hdr, end): the value's start, or NULL. */
static const char *header_value(const char *hdr, const char *end, const char *name) {
    size_t n = strlen(name);
    for (const char *p = hdr; p && p < end;) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) break;
        if ((size_t)(eol - p) > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ') v++;
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

/* Reads one response: its status (or -1 on a broken connection); body in c->body. Supports
 * Content-Length and chunked bodies; consumed bytes are removed from the buffer. */
static int read_response(conn *c, bool *closes) {
    char *hend;
    while (!(c->len >= 4 && (c->buf[c->len] = '\0', hend = strstr(c->buf, "\r\n\r\n"))))
        if (fill(c) != 0) return -1;
    size_t hlen = (size_t)(hend - c->buf) + 4;
    int status = 0;
    if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    const char *cl = header_value(c->buf, hend + 2, "Content-Length");
    const char *te = header_value(c->buf, hend + 2, "Transfer-Encoding");
    const char *cn = header_value(c->buf, hend + 2, "Connection");
    *closes = cn && strncasecmp(cn, "close", 5) == 0;
    if (cl) {
        size_t n = strtoul(cl, NULL, 10);
        while (c->len < hlen + n)
            if (fill(c) != 0) return -1;
        set_body(c, c->buf + hlen, n);
        memmove(c->buf, c->buf + hlen + n, c->len - hlen - n);
        c->len -= hlen + n;
    } else if (te && strncasecmp(te, "chunked", 7) == 0) {
        size_t pos = hlen, out = 0;
        char *tmp = NULL;
        for (;;) {
            char *eol;
            while (!(c->buf[c->len] = '\0', eol = strstr(c->buf + pos, "\r\n")))
                if (fill(c) != 0) return free(tmp), -1;
            size_t n = strtoul(c->buf + pos, NULL, 16);
            size_t data = (size_t)(eol - c->buf) + 2;
            while (c->len < data + n + 2)
                if (fill(c) != 0) return free(tmp), -1;
            if (n == 0) { /* no trailers expected */
                pos = data + 2;
                break;
            }
            tmp = realloc(tmp, out + n + 1);
            memcpy(tmp + out, c->buf + data, n);
            out += n;
            pos = data + n + 2;
        }
        set_body(c, tmp ? tmp : "", out);
        free(tmp);
        memmove(c->buf, c->buf + pos, c->len - pos);
        c->len -= pos;
    } else {
        set_body(c, "", 0);
        memmove(c->buf, c->buf + hlen, c->len - hlen);
        c->len -= hlen;
    }
    return status;
}

#define REFUSED (-2) /* connect refused: in --drain mode, the server has stopped */

/* One request/response on the connection, reconnecting once if the server had closed it (in
 * --drain mode every request sent without an answer is counted as a reset, retried or not). */
static int roundtrip(conn *c, const char *req, size_t n) {
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && conn_open(c) != 0) return opt.drain ? REFUSED : -1;
        bool closes = false;
        int status = send_all(c->fd, req, n) == 0 ? read_response(c, &closes) : -1;
        if (status > 0) {
            if (closes || opt.fresh) {
                close(c->fd);
                c->fd = -1;
            }
            return status;
        }
        close(c->fd);
        c->fd = -1;
        if (opt.drain) atomic_fetch_add(&total_resets, 1);
        if (attempt == 0 && c->len == 0) continue; /* a keep-alive close between requests */
    }
    return -1;
}

/* ---- operations ------------------------------------------------------------------------- */

typedef struct {
    int index;
    conn c;
    uint32_t *lat_us;
    size_t nlat, cap;
    long ops;
    char cursor[256];
} worker;

static void add_latency(worker *w, double seconds) {
    if (w->nlat == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 16384;
        w->lat_us = realloc(w->lat_us, w->cap * sizeof *w->lat_us);
        if (!w->lat_us) abort();
    }
    double us = seconds * 1e6;
    w->lat_us[w->nlat++] = us > 4e9 ? 4000000000u : (uint32_t)us;
}

static bool check(worker *w, int status, int want, const char *what) {
    if (status == want) return true;
    if (opt.drain && status == 503 && strstr(w->c.body, "\"draining\"")) {
        atomic_fetch_add(&total_draining, 1);
        return false;
    }
    if (opt.drain && status == REFUSED) return false;
    if (status < 0) record_error("%s: connection failed or response malformed", what);
    else record_error("%s: status %d (wanted %d): %.300s", what, status, want, w->c.body);
    return false;
}

static unsigned long long seq_counter(void) {
    static atomic_ullong n;
    return atomic_fetch_add(&n, 1);
}

/* POST a create as user from to recipient to; the created id into id (25 bytes) when asked. */
static bool do_create(worker *w, const char *from, const char *to, char *id) {
    char body[256], req[2048], who[1200];
    unsigned long long n = seq_counter();
    int blen = snprintf(body, sizeof body,
                        "{\"to\": \"%s\", \"from\": \"%s\", \"n\": %llu, \"text\": \"benchmark note "
                        "number %llu\"}",
                        to, from, n, n);
    /* --bearer: the token names the sender (JWT mode), else the X-User-Id header does */
    if (opt.bearer) snprintf(who, sizeof who, "Authorization: Bearer %s", opt.bearer);
    else snprintf(who, sizeof who, "X-User-Id: %s", from);
    int len = snprintf(req, sizeof req,
                       "POST /messages/new/%s HTTP/1.1\r\nHost: bench\r\n%s\r\n"
                       "Idempotency-Key: bench-%d-%ld-%llu-%d\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\n\r\n%s",
                       opt.template_cd, who, (int)getpid(), (long)time(NULL), n, w->index, blen,
                       body);
    int status = roundtrip(&w->c, req, (size_t)len);
    if (!check(w, status, 201, "create")) return false;
    if (!id) return true;
    const char *p = strstr(w->c.body, "\"id\"");
    if (p) p = strchr(p + 4, '"');
    if (!p || strspn(p + 1, "0123456789abcdef") != 24) {
        record_error("create: no message id in %.300s", w->c.body);
        return false;
    }
    memcpy(id, p + 1, 24);
    id[24] = '\0';
    return true;
}

static bool do_action(worker *w, const char *id, const char *user) {
    char req[512];
    int len = snprintf(req, sizeof req,
                       "POST /messages/%s/action/%s HTTP/1.1\r\nHost: bench\r\nX-User-Id: %s\r\n"
                       "Content-Length: 0\r\n\r\n",
                       id, opt.action_cd, user);
    return check(w, roundtrip(&w->c, req, (size_t)len), 200, "action");
}

/* POST /sagas/<template> as an admin with a fresh saga id; the answer must be 200 with the saga
 * record in state "completed" (a saga that stopped anywhere else is an error). */
static bool do_saga(worker *w) {
    char body[256], req[1024];
    unsigned long long n = seq_counter();
    int blen = snprintf(body, sizeof body, "{\"sagaId\": \"bench-%d-%ld-%llu-%d\", \"input\": {\"n\": %llu}}",
                        (int)getpid(), (long)time(NULL), n, w->index, n);
    int len = snprintf(req, sizeof req,
                       "POST /sagas/%s HTTP/1.1\r\nHost: bench\r\nX-User-Id: %s\r\n"
                       "X-User-Permissions: is.admin\r\nContent-Type: application/json\r\n"
                       "Content-Length: %d\r\n\r\n%s",
                       opt.template_cd, opt.user, blen, body);
    if (!check(w, roundtrip(&w->c, req, (size_t)len), 200, "saga")) return false;
    const char *p = strstr(w->c.body, "\"state\"");
    if (p) p += strspn(p + 7, ": ") + 7;
    if (!p || strncmp(p, "\"completed\"", 11) != 0) {
        record_error("saga: not completed: %.300s", w->c.body);
        return false;
    }
    return true;
}

static bool do_get(worker *w, const char *path) {
    char req[8192];
    int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: bench\r\nX-User-Id: %s\r\n%s%s%s\r\n",
                       path, opt.user, opt.roles ? "X-User-Roles: " : "", opt.roles ? opt.roles : "",
                       opt.roles ? "\r\n" : "");
    if (len < 0 || (size_t)len >= sizeof req) return false;
    return check(w, roundtrip(&w->c, req, (size_t)len), 200, "get");
}

static void *run_worker(void *arg) {
    worker *w = arg;
    char from[64], to[64], id[25];
    snprintf(from, sizeof from, "bench-sender-%d", w->index);
    snprintf(to, sizeof to, "bench-recipient-%d", w->index);
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        double t0 = now_s();
        bool ok;
        switch (opt.mode) {
        case MODE_CREATE: ok = do_create(w, from, to, NULL); break;
        case MODE_ACTION: ok = do_create(w, from, to, id) && do_action(w, id, to); break;
        case MODE_SAGA: ok = do_saga(w); break;
        default: ok = do_get(w, opt.path); break;
        }
        if (ok) {
            add_latency(w, now_s() - t0);
            w->ops++;
        } else if (opt.drain && w->c.fd < 0 && conn_open(&w->c) != 0) {
            break; /* the server stopped accepting: this client is done */
        }
    }
    atomic_fetch_add(&workers_done, 1);
    return NULL;
}

/* ---- slowloris --------------------------------------------------------------------------- */

static int slow_fds[20000];
static int nslow;

static void *slowloris_trickle(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_flag)) {
        for (int i = 0; i < nslow; i++)
            if (slow_fds[i] >= 0 && send(slow_fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
                errno != EAGAIN) {
                close(slow_fds[i]);
                slow_fds[i] = -1;
            }
        for (int t = 0; t < 10 && !atomic_load(&stop_flag); t++) usleep(100000);
    }
    return NULL;
}

static void slowloris_open(int n) {
    static const char head[] = "GET /messages HTTP/1.1\r\nHost: bench\r\nX-Slow: ";
    for (int i = 0; i < n && i < (int)(sizeof slow_fds / sizeof slow_fds[0]); i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) break;
        struct sockaddr_in src = {.sin_family = AF_INET};
        src.sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)(i / 250)); /* 127.0.0.2, … */
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
        inet_pton(AF_INET, opt.host, &sa.sin_addr);
        if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
            connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            continue;
        }
        send(fd, head, sizeof head - 1, MSG_NOSIGNAL);
        slow_fds[nslow++] = fd;
    }
}

/* Slow connections the server still holds open (not closed or reset). */
static int slowloris_open_count(void) {
    int open = 0;
    for (int i = 0; i < nslow; i++) {
        if (slow_fds[i] < 0) continue;
        struct pollfd p = {.fd = slow_fds[i], .events = POLLIN};
        if (poll(&p, 1, 0) == 0) open++;
    }
    return open;
}

/* Walks opt.pages pages from opt.path; the cursor for the next page is left in w->cursor. */
static bool walk_cursor(worker *w) {
    char path[1024];
    snprintf(path, sizeof path, "%s", opt.path);
    for (int page = 0; page < opt.pages; page++) {
        if (!do_get(w, path)) return false;
        const char *p = strstr(w->c.body, "\"nextCursor\"");
        if (p) p = strchr(p + 12, ':');
        if (p) p += strspn(p + 1, " ") + 1;
        if (!p || *p != '"') {
            record_error("cursor: page %d has no nextCursor: %.200s", page + 1,
                         p ? p : w->c.body);
            return false;
        }
        size_t n = strcspn(p + 1, "\"");
        if (n >= sizeof w->cursor) return false;
        memcpy(w->cursor, p + 1, n);
        w->cursor[n] = '\0';
        snprintf(path, sizeof path, "%s%scursor=%s", opt.path, strchr(opt.path, '?') ? "&" : "?",
                 w->cursor);
        w->ops++;
    }
    return true;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const uint32_t *v, size_t n, double p) {
    if (!n) return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i] / 1000.0;
}

static const char *mode_name(mode_t_ m) {
    static const char *names[] = {"create", "action", "get", "cursor", "saga"};
    return names[m];
}

static void usage(void) {
    fputs("usage: loadgen [--host H] [--port P] [--mode create|action|get|cursor|saga] [--threads N]\n"
          "               [--seconds S] [--template CD] [--action CD] [--path PATH] [--user ID]\n"
          "               [--roles R1,R2,...] [--pages N] [--label NAME] [--fresh 0|1]\n"
          "               [--slowloris N] [--drain 0|1] [--bearer TOKEN]\n",
          stderr);
    exit(2);
}

static void json_escape_print(const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        i++;
        if (!strcmp(a, "--host")) opt.host = v;
        else if (!strcmp(a, "--port")) opt.port = atoi(v);
        else if (!strcmp(a, "--threads")) opt.threads = atoi(v);
        else if (!strcmp(a, "--seconds")) opt.seconds = atof(v);
        else if (!strcmp(a, "--template")) opt.template_cd = v;
        else if (!strcmp(a, "--action")) opt.action_cd = v;
        else if (!strcmp(a, "--path")) opt.path = v;
        else if (!strcmp(a, "--user")) opt.user = v;
        else if (!strcmp(a, "--bearer")) opt.bearer = v;
        else if (!strcmp(a, "--roles")) opt.roles = v;
        else if (!strcmp(a, "--pages")) opt.pages = atoi(v);
        else if (!strcmp(a, "--label")) opt.label = v;
        else if (!strcmp(a, "--fresh")) opt.fresh = atoi(v) != 0;
        else if (!strcmp(a, "--slowloris")) opt.slowloris = atoi(v);
        else if (!strcmp(a, "--drain")) opt.drain = atoi(v) != 0;
        else if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "create")) opt.mode = MODE_CREATE;
            else if (!strcmp(v, "action")) opt.mode = MODE_ACTION;
            else if (!strcmp(v, "get")) opt.mode = MODE_GET;
            else if (!strcmp(v, "cursor")) opt.mode = MODE_CURSOR;
            else if (!strcmp(v, "saga")) opt.mode = MODE_SAGA; /* --template names the saga */
            else usage();
        } else usage();
    }
    if (opt.threads < 1 || opt.seconds <= 0 || opt.port <= 0) usage();

    if (opt.mode == MODE_CURSOR) {
        worker w = {.c = {.fd = -1}};
        bool ok = walk_cursor(&w);
        if (ok) printf("%s\n", w.cursor);
        else fprintf(stderr, "loadgen: %s\n", first_error);
        free(w.c.buf);
        free(w.c.body);
        if (w.c.fd >= 0) close(w.c.fd);
        return ok ? 0 : 1;
    }

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    pthread_t trickle;
    if (opt.slowloris > 0) {
        slowloris_open(opt.slowloris);
        pthread_create(&trickle, NULL, slowloris_trickle, NULL);
        usleep(500000); /* let the server see them all */
    }
    worker *ws = calloc((size_t)opt.threads, sizeof *ws);
    pthread_t *tids = calloc((size_t)opt.threads, sizeof *tids);
    if (!ws || !tids) return 1;
    double t0 = now_s();
    for (int i = 0; i < opt.threads; i++) {
        ws[i].index = i;
        ws[i].c.fd = -1;
        pthread_create(&tids[i], NULL, run_worker, &ws[i]);
    }
    struct timespec ts = {(time_t)opt.seconds,
                          (long)((opt.seconds - (double)(time_t)opt.seconds) * 1e9)};
    if (opt.drain) {
        while (atomic_load(&workers_done) < opt.threads && now_s() - t0 < opt.seconds)
            usleep(20000);
    } else {
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    int slow_open = opt.slowloris > 0 ? slowloris_open_count() : 0;
    atomic_store(&stop_flag, true);
    if (opt.slowloris > 0) pthread_join(trickle, NULL);
    size_t n = 0;
    long ops = 0;
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(tids[i], NULL);
        n += ws[i].nlat;
        ops += ws[i].ops;
    }
    double elapsed = now_s() - t0;
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < opt.threads; i++) {
        if (ws[i].nlat) memcpy(all + k, ws[i].lat_us, ws[i].nlat * sizeof *all);
        k += ws[i].nlat;
        free(ws[i].lat_us);
        free(ws[i].c.buf);
        free(ws[i].c.body);
        if (ws[i].c.fd >= 0) close(ws[i].c.fd);
    }
    qsort(all, n, sizeof *all, cmp_u32);
    long errors = atomic_load(&total_errors);
    printf("{\"bench\": \"%s\", \"mode\": \"%s\", \"threads\": %d, \"seconds\": %.2f, "
           "\"ops\": %ld, \"errors\": %ld, \"rate\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
           "\"max_ms\": %.3f",
           opt.label ? opt.label : mode_name(opt.mode), mode_name(opt.mode), opt.threads, elapsed,
           ops, errors, (double)ops / elapsed, pct_ms(all, n, 0.50), pct_ms(all, n, 0.99),
           n ? all[n - 1] / 1000.0 : 0.0);
    if (opt.slowloris > 0) printf(", \"slow_connections\": %d, \"slow_open\": %d", nslow, slow_open);
    if (opt.drain)
        printf(", \"draining_503\": %ld, \"resets\": %ld", atomic_load(&total_draining),
               atomic_load(&total_resets));
    if (errors) {
        printf(", \"first_error\": \"");
        json_escape_print(first_error);
        printf("\"");
    }
    printf("}\n");
    free(all);
    free(ws);
    free(tids);
    for (int i = 0; i < nslow; i++)
        if (slow_fds[i] >= 0) close(slow_fds[i]);
    return errors || ops == 0 || atomic_load(&total_resets) ? 1 : 0;
}
