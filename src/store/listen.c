/* listen.c — the wake-up channel of store/listen.h.
 *
 * PostgreSQL delivers NOTIFY only after the notifying transaction commits (and never for one that
 * rolled back), which makes it a safe wake-up for a reader of a change log: a wake-up never
 * announces uncommitted rows. It is only a wake-up — a missed one (a connection lost between
 * commit and delivery) costs at most the caller's timeout, because the caller re-reads the log
 * after every wait anyway. */
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "missive/base.h"
#include "store/listen.h"

struct mv__listener {
    mv_store_kind kind;
    char *url;
    char channel[64];
    PGconn *pg;
    int wake[2]; /* self-pipe: a commit in this process wakes the waiter at once */
};

static bool valid_channel(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

static void disconnect(mv__listener *l) {
    if (l->pg) PQfinish(l->pg);
    l->pg = NULL;
}

/* The server's notices ("terminating connection due to immediate shutdown" in a failover) are
 * not the daemon's log lines. */
static void silence_notices(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static bool connect_listen(mv__listener *l) {
    const char *keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *vals[] = {"5", "missive-listen", l->url, NULL};
    l->pg = PQconnectdbParams(keys, vals, 1);
    if (!l->pg || PQstatus(l->pg) != CONNECTION_OK) {
        disconnect(l);
        return false;
    }
    PQsetNoticeProcessor(l->pg, silence_notices, NULL);
    char sql[96];
    snprintf(sql, sizeof sql, "LISTEN %s", l->channel);
    PGresult *res = PQexec(l->pg, sql);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (!ok) disconnect(l);
    return ok;
}

mv_code mv__listener_new(mv_store *store, const char *channel, mv__listener **out, mv_err *err) {
    *out = NULL;
    if (!valid_channel(channel))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "listen channel must be a lowercase identifier");
    mv__listener *l = calloc(1, sizeof *l);
    if (!l) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (pipe2(l->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(l);
        return mv_err_set(err, MV_IO, "cannot create the wake-up pipe");
    }
    l->kind = mv_store_kind_of(store);
    mv_strlcpy(l->channel, channel, sizeof l->channel);
    if (l->kind == MV_STORE_POSTGRES) {
        l->url = strdup(mv__store_url(store));
        if (!l->url) {
            mv__listener_free(l);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        if (!connect_listen(l)) {
            mv__listener_free(l);
            return mv_err_set(err, MV_STORE_UNAVAILABLE,
                              "cannot open the change notification "
                              "connection to the store");
        }
    }
    *out = l;
    return MV_OK;
}

static bool drain_notifies(mv__listener *l) {
    bool any = false;
    PGnotify *n;
    while ((n = PQnotifies(l->pg)) != NULL) {
        any = true;
        PQfreemem(n);
    }
    return any;
}

void mv__listener_wake(mv__listener *l) {
    char b = 1;
    ssize_t r = write(l->wake[1], &b, 1); /* a full pipe already means "wake up" */
    (void)r;
}

/* Waits for the wake-up pipe (and fd, when >= 0); true when the pipe fired. */
static bool wait_fds(mv__listener *l, int fd, int timeout_ms, int *fd_ready) {
    struct pollfd p[2] = {{.fd = l->wake[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    int r = poll(p, fd >= 0 ? 2 : 1, timeout_ms);
    *fd_ready = r < 0 ? -1 : fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) ? 1 : 0;
    if (r > 0 && (p[0].revents & POLLIN)) {
        char buf[64];
        while (read(l->wake[0], buf, sizeof buf) > 0) {
        }
        return true;
    }
    return false;
}

bool mv__listener_wait(mv__listener *l, int timeout_ms) {
    int ready;
    if (l->kind != MV_STORE_POSTGRES || (!l->pg && !connect_listen(l)))
        return wait_fds(l, -1, timeout_ms, &ready);
    if (PQconsumeInput(l->pg) && drain_notifies(l)) return true;
    bool woken = wait_fds(l, PQsocket(l->pg), timeout_ms, &ready);
    if (ready < 0 || !PQconsumeInput(l->pg) || PQstatus(l->pg) != CONNECTION_OK) {
        disconnect(l); /* reconnect next time; the caller re-reads the log anyway */
        return woken;
    }
    return drain_notifies(l) || woken;
}

void mv__listener_free(mv__listener *l) {
    if (!l) return;
    disconnect(l);
    close(l->wake[0]);
    close(l->wake[1]);
    free(l->url);
    free(l);
}
