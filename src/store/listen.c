/* listen.c — the wake-up channel of store/listen.h.
 *
 * PostgreSQL delivers NOTIFY only after the notifying transaction commits (and never for one that
 * rolled back), which makes it a safe wake-up for a reader of a change log: a wake-up never
 * announces uncommitted rows. It is only a wake-up — a missed one (a connection lost between
 * commit and delivery) costs at most the caller's timeout, because the caller re-reads the log
 * after every wait anyway. */
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "missive/base.h"
#include "store/listen.h"

struct mv__listener {
    mv_store_kind kind;
    char *url;
    char channel[64];
    PGconn *pg;
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

static bool connect_listen(mv__listener *l) {
    const char *keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *vals[] = {"5", "missive-listen", l->url, NULL};
    l->pg = PQconnectdbParams(keys, vals, 1);
    if (!l->pg || PQstatus(l->pg) != CONNECTION_OK) {
        disconnect(l);
        return false;
    }
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
    l->kind = mv_store_kind_of(store);
    mv_strlcpy(l->channel, channel, sizeof l->channel);
    if (l->kind == MV_STORE_POSTGRES) {
        l->url = strdup(mv__store_url(store));
        if (!l->url) {
            free(l);
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

bool mv__listener_wait(mv__listener *l, int timeout_ms) {
    if (l->kind != MV_STORE_POSTGRES) {
        mv_sleep_ms(timeout_ms);
        return false;
    }
    if (!l->pg && !connect_listen(l)) {
        mv_sleep_ms(timeout_ms);
        return false;
    }
    if (PQconsumeInput(l->pg) && drain_notifies(l)) return true;
    struct pollfd p = {.fd = PQsocket(l->pg), .events = POLLIN};
    int r = p.fd >= 0 ? poll(&p, 1, timeout_ms) : -1;
    if (r < 0 || !PQconsumeInput(l->pg) || PQstatus(l->pg) != CONNECTION_OK) {
        disconnect(l); /* reconnect next time; the caller re-reads the log anyway */
        if (r < 0) mv_sleep_ms(timeout_ms);
        return false;
    }
    return drain_notifies(l);
}

void mv__listener_free(mv__listener *l) {
    if (!l) return;
    disconnect(l);
    free(l->url);
    free(l);
}
