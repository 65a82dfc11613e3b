/* sse.c — the queue behind one event stream, and the two ways its bytes reach the client.
 *
 * Taken over (plain HTTP, the usual case): once the handler answered, server.c gives the socket
 * to the stream (mv_sse_take_connection) while libmicrohttpd has it suspended and out of its
 * epoll set. The stream keeps a duplicate of the descriptor, an unconnected socket takes the old
 * number (so libmicrohttpd's shutdown and close of "its" connection touch nothing of ours), the
 * stream writes the response head itself and libmicrohttpd drops the connection and its memory
 * pool. From then on the producer's writes go straight to the socket (non-blocking); what the
 * socket does not take waits in the queue and the loop (mv_sse_loop: one thread, one epoll for
 * every taken stream) sends it when the socket drains, notices a client that hung up, and is the
 * only one that closes a taken descriptor (so no event can arrive for a freed stream). An idle
 * taken stream costs this struct and no buffer. The body is delimited by the close
 * ("Connection: close", not chunked): one framing for HTTP/1.0 and 1.1 clients alike.
 *
 * Served by libmicrohttpd (TLS, whose session state cannot leave libmicrohttpd; or no loop): the
 * content-reader callback runs on the connection's polling thread. With bytes queued it copies
 * them out; with none it suspends the connection and returns 0, and mv_sse_write resumes it —
 * both under the stream's mutex, so a write can never slip between "queue is empty" and
 * "suspended" and be left unsent. Closing resumes too, and the reader then ends the response
 * (chunked: the terminating chunk), which is how SIGTERM drains streams cleanly. A parked
 * connection is not polled by libmicrohttpd, so mv_sse_close_hung_up lets the producer look at
 * every parked socket in one poll.
 *
 * Memory, both ways: the producer asks mv_sse_has_room before each event and stops at a
 * low-water mark, so a client that does not read holds one small queue, not everything it was
 * sent; the rest stays in the change log until it reads again (the reader or the loop then calls
 * the producer back). A drained buffer is freed, so an idle stream keeps no buffer at all. */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/mono.h"
#include "http/http_server.h"
#include "http/sse.h"

#define CHUNK 4096 /* the most bytes handed to libmicrohttpd per call */

struct mv_sse_stream {
    pthread_mutex_t mu;
    char *buf;
    size_t off, len, cap, max;
    atomic_bool closed; /* written under mu; read without it by mv_sse_is_open */
    bool suspended;
    int refs;
    int fd;     /* the connection's socket while the server streams it, or the taken one; else -1 */
    bool taken; /* fd is the stream's own (mv_sse_take_connection), watched by loop */
    bool shut;  /* taken: shutdown(2) done, the loop closes it */
    mv_sse_loop *loop;          /* where a taken socket goes (NULL: the stream is never taken) */
    mv_sse_stream *prev, *next; /* in loop's list while taken (guarded by the loop's mutex) */
    int64_t last_write_ms;
    struct MHD_Connection *conn; /* set once the server streams it */
    /* mv_sse_has_room found the queue full: call on_room once it drains below low_water */
    bool want_room;
    size_t low_water;
    void (*on_room)(void *ctx);
    void *room_ctx;
    void (*on_close)(void *ctx); /* called once, when closed turns true */
    void *close_ctx;
};

mv_sse_stream *mv_sse_stream_new(size_t max_queued) {
    mv_sse_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->max = max_queued ? max_queued : 1024 * 1024;
    s->refs = 1;
    s->fd = -1;
    s->last_write_ms = mv__mono_ms();
    return s;
}

/* mu held: the stream is closed from now on; the producer hears of it once (mv_sse_on_close). */
static void mark_closed(mv_sse_stream *s) {
    bool was = atomic_exchange(&s->closed, true);
    void (*fn)(void *) = s->on_close;
    s->on_close = NULL;
    if (!was && fn) fn(s->close_ctx);
}

/* mu held: wake the connection if the reader parked it. */
static void wake(mv_sse_stream *s) {
    if (s->suspended && s->conn) {
        s->suspended = false;
        MHD_resume_connection(s->conn);
    }
}

/* mu held: bytes left the queue. A drained buffer is freed (an idle stream has none), and a
 * producer waiting for room is told once there is. */
static void consumed(mv_sse_stream *s) {
    if (s->off == s->len) {
        s->off = s->len = 0;
        free(s->buf);
        s->buf = NULL;
        s->cap = 0;
    }
    if (s->want_room && s->len - s->off < s->low_water) {
        s->want_room = false;
        s->on_room(s->room_ctx);
    }
}

/* mu held, taken: ends the connection. The loop sees the hang-up and closes the descriptor; what
 * the kernel still holds for the client is sent before the FIN. */
static void shut(mv_sse_stream *s) {
    if (s->fd >= 0 && !s->shut) shutdown(s->fd, SHUT_RDWR);
    s->shut = true;
}

/* mu held, taken: as much of the queue as the socket takes now; the loop sends the rest when the
 * socket drains. A closed stream is shut once its queue is out. */
static void flush(mv_sse_stream *s) {
    if (!s->taken || s->fd < 0 || s->shut) return;
    while (s->len > s->off) {
        ssize_t n = send(s->fd, s->buf + s->off, s->len - s->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            s->off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else { /* the client is gone */
            mark_closed(s);
            s->off = s->len;
            break;
        }
    }
    consumed(s);
    if (s->closed && s->len == s->off) shut(s);
}

bool mv_sse_write(mv_sse_stream *s, const char *data, size_t n) {
    pthread_mutex_lock(&s->mu);
    bool ok = !s->closed;
    if (ok && s->len - s->off + n > s->max) {
        mark_closed(s); /* too far behind: let it reconnect and replay from the log */
        ok = false;
    }
    if (ok && s->len + n > s->cap) {
        if (s->off) { /* compact before growing */
            memmove(s->buf, s->buf + s->off, s->len - s->off);
            s->len -= s->off;
            s->off = 0;
        }
        if (s->len + n > s->cap) {
            size_t ncap = s->cap ? s->cap : 512;
            while (ncap < s->len + n)
                ncap *= 2;
            char *nb = realloc(s->buf, ncap);
            if (!nb) {
                mark_closed(s);
                ok = false;
            } else {
                s->buf = nb;
                s->cap = ncap;
            }
        }
    }
    if (ok) {
        memcpy(s->buf + s->len, data, n);
        s->len += n;
        s->last_write_ms = mv__mono_ms();
    }
    wake(s);
    flush(s);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

bool mv_sse_event(mv_sse_stream *s, int64_t id, const char *event, const char *data) {
    size_t n = strlen(event) + strlen(data) + 64;
    char stackbuf[4096];
    char *line = n <= sizeof stackbuf ? stackbuf : malloc(n);
    if (!line) return false;
    int len = snprintf(line, n, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, event, data);
    bool ok = len > 0 && mv_sse_write(s, line, (size_t)len);
    if (line != stackbuf) free(line);
    return ok;
}

void mv_sse_close(mv_sse_stream *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    mark_closed(s);
    s->want_room = false; /* the producer may be gone once it closed the stream */
    wake(s);
    flush(s);
    pthread_mutex_unlock(&s->mu);
}

size_t mv_sse_queued(mv_sse_stream *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->len - s->off;
    pthread_mutex_unlock(&s->mu);
    return n;
}

bool mv_sse_has_room(mv_sse_stream *s, size_t low_water, void (*on_room)(void *ctx), void *ctx) {
    pthread_mutex_lock(&s->mu);
    bool room = s->len - s->off < low_water;
    if (!room) {
        s->want_room = true;
        s->low_water = low_water;
        s->on_room = on_room;
        s->room_ctx = ctx;
    }
    /* What the kernel holds for the client counts too: a client that does not read fills the
     * socket's send buffer first, and what would be written after that would only wait here, in
     * this process's memory. The producer looks again on its next turn. (Under the mutex: the
     * loop closes a taken descriptor under it.) */
    int unsent = 0;
    if (room && s->fd >= 0 && ioctl(s->fd, TIOCOUTQ, &unsent) == 0 &&
        (size_t)unsent >= low_water * 4)
        room = false;
    pthread_mutex_unlock(&s->mu);
    return room;
}

void mv_sse_close_hung_up(mv_sse_stream *const *s, int n) {
    if (n <= 0) return;
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    if (!p) return;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&s[i]->mu);
        /* poll ignores negative descriptors; the loop watches taken ones */
        p[i].fd = s[i]->closed || s[i]->taken ? -1 : s[i]->fd;
        pthread_mutex_unlock(&s[i]->mu);
        p[i].events = POLLRDHUP;
    }
    if (poll(p, (nfds_t)n, 0) > 0)
        for (int i = 0; i < n; i++)
            if (p[i].fd >= 0 && (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
                pthread_mutex_lock(&s[i]->mu);
                if (s[i]->fd == p[i].fd) { /* still the same connection */
                    mark_closed(s[i]);
                    wake(s[i]);
                }
                pthread_mutex_unlock(&s[i]->mu);
            }
    free(p);
}

void mv_sse_on_close(mv_sse_stream *s, void (*fn)(void *ctx), void *ctx) {
    pthread_mutex_lock(&s->mu);
    bool closed = atomic_load(&s->closed);
    s->on_close = closed ? NULL : fn;
    s->close_ctx = ctx;
    if (closed && fn) fn(ctx);
    pthread_mutex_unlock(&s->mu);
}

bool mv_sse_is_taken(mv_sse_stream *s) {
    pthread_mutex_lock(&s->mu);
    bool taken = s->taken;
    pthread_mutex_unlock(&s->mu);
    return taken;
}

bool mv_sse_is_open(mv_sse_stream *s) {
    return !atomic_load(&s->closed); /* the hub asks for every stream on every turn */
}

int64_t mv_sse_last_write_ms(mv_sse_stream *s) {
    pthread_mutex_lock(&s->mu);
    int64_t t = s->last_write_ms;
    pthread_mutex_unlock(&s->mu);
    return t;
}

void mv_sse_retain(mv_sse_stream *s) {
    pthread_mutex_lock(&s->mu);
    s->refs++;
    pthread_mutex_unlock(&s->mu);
}

void mv_sse_release(mv_sse_stream *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last) return;
    pthread_mutex_destroy(&s->mu);
    free(s->buf);
    free(s);
}

/* ---- libmicrohttpd ----------------------------------------------------------------------- */

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    mv_sse_stream *s = cls;
    pthread_mutex_lock(&s->mu);
    ssize_t n;
    if (s->len > s->off) {
        /* at most one page per call: libmicrohttpd's write buffer (half of the connection's
         * memory) is then only touched for its first page, whatever the burst */
        size_t k = s->len - s->off < max ? s->len - s->off : max;
        if (k > CHUNK) k = CHUNK;
        memcpy(out, s->buf + s->off, k);
        s->off += k;
        consumed(s);
        n = (ssize_t)k;
    } else if (s->closed) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        s->suspended = true;
        MHD_suspend_connection(s->conn);
        n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void reader_done(void *cls) {
    mv_sse_stream *s = cls;
    pthread_mutex_lock(&s->mu);
    mark_closed(s); /* the client went away or the response ended */
    s->conn = NULL;
    s->fd = -1;
    s->want_room = false;
    s->suspended = false;
    pthread_mutex_unlock(&s->mu);
    mv_sse_release(s);
}

struct MHD_Response *mv_sse_mhd_response(mv_sse_stream *s, struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&s->mu);
    s->conn = c;
    s->fd = ci ? ci->connect_fd : -1;
    s->refs++;
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, CHUNK, reader, s, reader_done);
    if (!r) reader_done(s);
    return r;
}

/* ---- taken streams: the loop --------------------------------------------------------------- */

struct mv_sse_loop {
    int ep, wake_fd; /* wake_fd (an eventfd) stops the thread */
    pthread_t thread;
    pthread_mutex_t mu; /* guards streams, n */
    mv_sse_stream *streams;
    int n;
};

#define LOOP_EVENTS 256

static void loop_link(mv_sse_loop *l, mv_sse_stream *s) {
    pthread_mutex_lock(&l->mu);
    s->prev = NULL;
    s->next = l->streams;
    if (l->streams) l->streams->prev = s;
    l->streams = s;
    l->n++;
    pthread_mutex_unlock(&l->mu);
}

static void loop_unlink(mv_sse_loop *l, mv_sse_stream *s) {
    pthread_mutex_lock(&l->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        l->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
    l->n--;
    pthread_mutex_unlock(&l->mu);
}

/* mu held: the client sent bytes after its request (nothing it may send means anything): read
 * and dropped. False when it hung up. */
static bool discard_input(int fd) {
    char buf[256];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
}

/* The loop's thread: one taken socket became writable, readable or hung up. Only here is a taken
 * descriptor closed (removed from the epoll set first), so no later event can name a freed
 * stream: epoll reports a descriptor at most once per wait. */
static void on_socket(mv_sse_loop *l, mv_sse_stream *s, uint32_t events) {
    pthread_mutex_lock(&s->mu);
    bool gone = s->fd < 0 || (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP));
    if (!gone && (events & EPOLLIN)) gone = !discard_input(s->fd);
    if (!gone && (events & EPOLLOUT)) flush(s);
    bool drop = gone && s->fd >= 0;
    if (drop) {
        epoll_ctl(l->ep, EPOLL_CTL_DEL, s->fd, NULL);
        close(s->fd);
        s->fd = -1;
        mark_closed(s);
        s->want_room = false;
        s->off = s->len;
        consumed(s);
    }
    pthread_mutex_unlock(&s->mu);
    if (drop) {
        loop_unlink(l, s);
        mv_sse_release(s); /* the loop's reference */
    }
}

static void *loop_run(void *arg) {
    mv_sse_loop *l = arg;
    pthread_setname_np(pthread_self(), "mv-sse-loop");
    struct epoll_event ev[LOOP_EVENTS];
    for (;;) {
        int n = epoll_wait(l->ep, ev, LOOP_EVENTS, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return NULL;
        for (int i = 0; i < n; i++) {
            if (!ev[i].data.ptr) return NULL; /* mv_sse_loop_free */
            on_socket(l, ev[i].data.ptr, ev[i].events);
        }
    }
}

mv_sse_loop *mv_sse_loop_new(void) {
    mv_sse_loop *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    pthread_mutex_init(&l->mu, NULL);
    if (l->ep < 0 || l->wake_fd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake_fd, &ev) != 0 ||
        pthread_create(&l->thread, NULL, loop_run, l) != 0) {
        if (l->ep >= 0) close(l->ep);
        if (l->wake_fd >= 0) close(l->wake_fd);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return NULL;
    }
    return l;
}

void mv_sse_loop_free(mv_sse_loop *l) {
    if (!l) return;
    uint64_t one = 1;
    if (write(l->wake_fd, &one, sizeof one) < 0) { /* cannot fail: a fresh eventfd */
    }
    pthread_join(l->thread, NULL);
    for (;;) {
        pthread_mutex_lock(&l->mu);
        mv_sse_stream *s = l->streams;
        pthread_mutex_unlock(&l->mu);
        if (!s) break;
        pthread_mutex_lock(&s->mu);
        if (s->fd >= 0) close(s->fd);
        s->fd = -1;
        mark_closed(s);
        s->want_room = false;
        pthread_mutex_unlock(&s->mu);
        loop_unlink(l, s);
        mv_sse_release(s);
    }
    close(l->ep);
    close(l->wake_fd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int mv_sse_loop_streams(mv_sse_loop *l) {
    pthread_mutex_lock(&l->mu);
    int n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

void mv_sse_set_loop(mv_sse_stream *s, mv_sse_loop *loop) {
    pthread_mutex_lock(&s->mu);
    s->loop = loop;
    pthread_mutex_unlock(&s->mu);
}

/* "HTTP/1.1 200 OK", the handler's headers, Date and Connection: close. */
static char *render_head(int status, const mv_http_header *h, size_t nh, size_t *len) {
    size_t cap = 160;
    for (size_t i = 0; i < nh; i++)
        cap += strlen(h[i].name) + strlen(h[i].value) + 4;
    char *out = malloc(cap);
    if (!out) return NULL;
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    size_t n = (size_t)snprintf(out, cap, "HTTP/1.1 %d %s\r\n", status, reason ? reason : "");
    for (size_t i = 0; i < nh; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s: %s\r\n", h[i].name, h[i].value);
    char date[64];
    struct tm tm;
    time_t now = time(NULL);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
    n += (size_t)snprintf(out + n, cap - n, "Date: %s\r\nConnection: close\r\n\r\n", date);
    *len = n;
    return out;
}

/* mu held: head goes in front of whatever the producer queued already. */
static bool queue_head(mv_sse_stream *s, const char *head, size_t n) {
    size_t queued = s->len - s->off;
    char *nb = malloc(n + queued);
    if (!nb) return false;
    memcpy(nb, head, n);
    if (queued) memcpy(nb + n, s->buf + s->off, queued);
    free(s->buf);
    s->buf = nb;
    s->off = 0;
    s->len = s->cap = n + queued;
    return true;
}

bool mv_sse_take_connection(mv_sse_stream *s, struct MHD_Connection *c, int status,
                            const mv_http_header *headers, size_t nheaders) {
    pthread_mutex_lock(&s->mu);
    mv_sse_loop *l = s->loop;
    pthread_mutex_unlock(&s->mu);
    /* TLS: the session (keys, sequence numbers) lives in libmicrohttpd's GnuTLS state and cannot
     * be moved; such a stream stays on libmicrohttpd's connection */
    if (!l || MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION)) return false;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd < 0) return false;
    size_t hn = 0;
    char *head = render_head(status, headers, nheaders, &hn);
    if (!head) return false;
    int fd = ci->connect_fd;
    int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    int stand_in = mine >= 0 ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
    /* dup3 swaps atomically: fd never names nothing, so no other thread's open can take it */
    if (stand_in < 0 || dup3(stand_in, fd, O_CLOEXEC) < 0) {
        if (mine >= 0) close(mine);
        if (stand_in >= 0) close(stand_in);
        free(head); /* out of descriptors: libmicrohttpd keeps serving it */
        return false;
    }
    close(stand_in);
    int fl = fcntl(mine, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK)) fcntl(mine, F_SETFL, fl | O_NONBLOCK);
    pthread_mutex_lock(&s->mu);
    bool ok = queue_head(s, head, hn);
    s->fd = mine;
    s->taken = true;
    s->refs++; /* the loop's */
    pthread_mutex_unlock(&s->mu);
    free(head);
    loop_link(l, s);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = s};
    if (!ok || epoll_ctl(l->ep, EPOLL_CTL_ADD, mine, &ev) != 0) {
        pthread_mutex_lock(&s->mu); /* not watched: closed here, the client reconnects */
        close(s->fd);
        s->fd = -1;
        mark_closed(s);
        pthread_mutex_unlock(&s->mu);
        loop_unlink(l, s);
        mv_sse_release(s);
        return true;
    }
    pthread_mutex_lock(&s->mu);
    flush(s);
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* ---- descriptors ------------------------------------------------------------------------- */

/* A taken stream is a descriptor libmicrohttpd's connection limit no longer counts: the hubs say
 * how many they may hold, and the server's limit leaves room for them. */
static atomic_int reserved_descriptors;

#define SERVER_DEFAULT_CONNECTIONS 10000
#define SPARE_DESCRIPTORS 256 /* the store, webhooks, logs */

void mv_sse_reserve_descriptors(int n) {
    if (n > 0) {
        struct rlimit rl;
        rlim_t need = (rlim_t)n + SERVER_DEFAULT_CONNECTIONS + 2 * SPARE_DESCRIPTORS;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur < need) {
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl); /* as far as the hard limit allows */
        }
    }
    atomic_fetch_add(&reserved_descriptors, n);
}

int mv_sse_share_descriptors(int server_limit) {
    struct rlimit rl;
    int streams = atomic_load(&reserved_descriptors);
    if (streams <= 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return server_limit;
    long left = (long)rl.rlim_cur - SPARE_DESCRIPTORS - streams;
    if (left >= server_limit) return server_limit;
    /* not enough for both at their limits: the server keeps at least half */
    long half = (long)rl.rlim_cur / 2;
    long limit = left > half ? left : half;
    return limit < server_limit ? (int)limit : server_limit;
}
