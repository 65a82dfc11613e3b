/* sse.c — the queue behind one event stream, and its libmicrohttpd glue.
 *
 * The content-reader callback runs on the connection's polling thread. With bytes queued it
 * copies them out; with none it suspends the connection and returns 0, and mv_sse_write (from
 * the hub's thread) resumes it — both under the stream's mutex, so a write can never slip
 * between "queue is empty" and "suspended" and be left unsent. Closing resumes too, and the
 * reader then ends the response (chunked: the terminating chunk), which is how SIGTERM drains
 * streams cleanly.
 *
 * Memory: the producer asks mv_sse_has_room before each event and stops at a low-water mark, so
 * a client that does not read holds one small queue, not everything it was sent; the rest stays
 * in the change log until it reads again (the reader then calls the producer back). A drained
 * buffer is freed, so an idle stream keeps no buffer at all.
 *
 * A parked (suspended) connection is not polled by libmicrohttpd, so a client that hangs up while
 * parked would only be noticed at the next write (a heartbeat, 15 s by default) and keep its slot
 * until then: mv_sse_close_hung_up lets the producer look at every parked socket in one poll. */
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "http/sse.h"

#define CHUNK 4096 /* the most bytes handed to libmicrohttpd per call */

struct mv_sse_stream {
    pthread_mutex_t mu;
    char *buf;
    size_t off, len, cap, max;
    bool closed, suspended;
    int refs;
    int fd; /* the connection's socket while the server streams it, else -1 */
    int64_t last_write_ms;
    struct MHD_Connection *conn; /* set once the server streams it */
    /* mv_sse_has_room found the queue full: call on_room once it drains below low_water */
    bool want_room;
    size_t low_water;
    void (*on_room)(void *ctx);
    void *room_ctx;
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

mv_sse_stream *mv_sse_stream_new(size_t max_queued) {
    mv_sse_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->max = max_queued ? max_queued : 1024 * 1024;
    s->refs = 1;
    s->fd = -1;
    s->last_write_ms = mono_ms();
    return s;
}

/* mu held: wake the connection if the reader parked it. */
static void wake(mv_sse_stream *s) {
    if (s->suspended && s->conn) {
        s->suspended = false;
        MHD_resume_connection(s->conn);
    }
}

bool mv_sse_write(mv_sse_stream *s, const char *data, size_t n) {
    pthread_mutex_lock(&s->mu);
    bool ok = !s->closed;
    if (ok && s->len - s->off + n > s->max) {
        s->closed = true; /* too far behind: let it reconnect and replay from the log */
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
                s->closed = true;
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
        s->last_write_ms = mono_ms();
    }
    wake(s);
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
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    s->want_room = false; /* the producer may be gone once it closed the stream */
    wake(s);
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
    int fd = s->fd;
    if (!room) {
        s->want_room = true;
        s->low_water = low_water;
        s->on_room = on_room;
        s->room_ctx = ctx;
    }
    pthread_mutex_unlock(&s->mu);
    /* What the kernel holds for the client counts too: a client that does not read fills the
     * socket's send buffer first, and what would be written after that would only wait here, in
     * this process's memory. The producer looks again on its next turn. */
    int unsent = 0;
    if (room && fd >= 0 && ioctl(fd, TIOCOUTQ, &unsent) == 0 && (size_t)unsent >= low_water * 4)
        room = false;
    return room;
}

void mv_sse_close_hung_up(mv_sse_stream *const *s, int n) {
    if (n <= 0) return;
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    if (!p) return;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&s[i]->mu);
        p[i].fd = s[i]->closed ? -1 : s[i]->fd; /* poll ignores negative descriptors */
        pthread_mutex_unlock(&s[i]->mu);
        p[i].events = POLLRDHUP;
    }
    if (poll(p, (nfds_t)n, 0) > 0)
        for (int i = 0; i < n; i++)
            if (p[i].fd >= 0 && (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
                pthread_mutex_lock(&s[i]->mu);
                if (s[i]->fd == p[i].fd) { /* still the same connection */
                    s[i]->closed = true;
                    wake(s[i]);
                }
                pthread_mutex_unlock(&s[i]->mu);
            }
    free(p);
}

bool mv_sse_is_open(mv_sse_stream *s) {
    pthread_mutex_lock(&s->mu);
    bool open = !s->closed;
    pthread_mutex_unlock(&s->mu);
    return open;
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
        if (s->off == s->len) { /* drained: give the memory back (an idle stream has none) */
            s->off = s->len = 0;
            free(s->buf);
            s->buf = NULL;
            s->cap = 0;
        }
        if (s->want_room && s->len - s->off < s->low_water) {
            s->want_room = false;
            s->on_room(s->room_ctx);
        }
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
    s->closed = true; /* the client went away or the response ended */
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
