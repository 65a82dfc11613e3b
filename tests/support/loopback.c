/* loopback.c — see loopback.h. Connections get their own thread so a delayed answer on one never
 * holds up another (the kill -9 and lease tests need a second client served while the first
 * waits). */
#include "support/loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
    pthread_t thread;
    int fd;
    loopback *srv;
    struct conn *next;
} conn;

struct loopback {
    int listen_fd, wake[2], port;
    loopback_serve_fn serve;
    void *ctx;
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    conn *conns;
};

static void *conn_main(void *arg) {
    conn *c = arg;
    c->srv->serve(c->srv->ctx, c->fd, c->srv);
    shutdown(c->fd, SHUT_RDWR);
    return NULL;
}

static void *accept_main(void *arg) {
    loopback *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                              {.fd = s->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents) break;
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) continue;
        struct timeval tv = {.tv_sec = 15};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->srv = s;
        pthread_mutex_lock(&s->mu);
        bool stopping = s->stopping;
        if (!stopping) {
            c->next = s->conns;
            s->conns = c;
            if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
                s->conns = c->next;
                stopping = true;
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (stopping) {
            close(fd);
            free(c);
        }
    }
    return NULL;
}

loopback *loopback_start(loopback_serve_fn serve, void *ctx) {
    loopback *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->serve = serve;
    s->ctx = ctx;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(s->listen_fd, 64) != 0 ||
        getsockname(s->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
        pipe2(s->wake, O_CLOEXEC) != 0) {
        if (s->listen_fd >= 0) close(s->listen_fd);
        free(s);
        return NULL;
    }
    s->port = ntohs(a.sin_port);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->acceptor, NULL, accept_main, s) != 0) {
        close(s->listen_fd);
        close(s->wake[0]);
        close(s->wake[1]);
        free(s);
        return NULL;
    }
    return s;
}

int loopback_port(const loopback *srv) { return srv->port; }

bool loopback_stopping(loopback *srv) {
    pthread_mutex_lock(&srv->mu);
    bool st = srv->stopping;
    pthread_mutex_unlock(&srv->mu);
    return st;
}

bool loopback_sleep(loopback *srv, int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&srv->mu);
    while (!srv->stopping)
        if (pthread_cond_timedwait(&srv->cv, &srv->mu, &until) != 0) break;
    bool ok = !srv->stopping;
    pthread_mutex_unlock(&srv->mu);
    return ok;
}

void loopback_stop(loopback *srv) {
    if (!srv) return;
    pthread_mutex_lock(&srv->mu);
    srv->stopping = true;
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    if (write(srv->wake[1], "x", 1) < 0) {
    }
    pthread_join(srv->acceptor, NULL);
    close(srv->listen_fd); /* from here on the port refuses connections */
    pthread_mutex_lock(&srv->mu);
    conn *list = srv->conns;
    srv->conns = NULL;
    for (conn *c = list; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&srv->mu);
    while (list) {
        conn *next = list->next;
        pthread_join(list->thread, NULL);
        close(list->fd);
        free(list);
        list = next;
    }
    close(srv->wake[0]);
    close(srv->wake[1]);
    pthread_mutex_destroy(&srv->mu);
    pthread_cond_destroy(&srv->cv);
    free(srv);
}

static bool fill(loopback_reader *r) {
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len == sizeof r->buf) return false;
    ssize_t n = recv(r->fd, r->buf + r->len, sizeof r->buf - r->len, 0);
    if (n <= 0) return false;
    r->len += (size_t)n;
    return true;
}

long loopback_read_line(loopback_reader *r, char *out, size_t size) {
    for (;;) {
        char *nl = memchr(r->buf + r->pos, '\n', r->len - r->pos);
        if (nl) {
            size_t n = (size_t)(nl - (r->buf + r->pos));
            size_t keep = n > 0 && nl[-1] == '\r' ? n - 1 : n;
            if (keep + 1 > size) return -1;
            memcpy(out, r->buf + r->pos, keep);
            out[keep] = '\0';
            r->pos += n + 1;
            return (long)keep;
        }
        if (!fill(r)) return -1;
    }
}

bool loopback_read_exact(loopback_reader *r, char *out, size_t n) {
    size_t got = 0;
    while (got < n) {
        if (r->pos == r->len && !fill(r)) return false;
        size_t take = r->len - r->pos;
        if (take > n - got) take = n - got;
        memcpy(out + got, r->buf + r->pos, take);
        r->pos += take;
        got += take;
    }
    return true;
}

bool loopback_write(int fd, const char *data, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        data += w;
        n -= (size_t)w;
    }
    return true;
}

bool loopback_wait_count(pthread_mutex_t *mu, pthread_cond_t *cv, const int *count, int n,
                         int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(mu);
    while (*count < n)
        if (pthread_cond_timedwait(cv, mu, &until) != 0) break;
    bool ok = *count >= n;
    pthread_mutex_unlock(mu);
    return ok;
}
