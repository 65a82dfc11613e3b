/* smtp_sink.c — see smtp_sink.h. Enough of RFC 5321 for libcurl's client: no TLS, no AUTH, no
 * pipelining. A message is recorded when its DATA ends, before the (possibly delayed) reply, so a
 * test can kill the client while the server "is thinking". */
#include "support/smtp_sink.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "support/loopback.h"

struct smtp_sink {
    loopback *srv;
    char url[64];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    smtp_sink_mode mode;
    int delay_ms;
    smtp_sink_message *msgs;
    int n, cap;
};

void smtp_sink_message_free(smtp_sink_message *m) {
    if (!m) return;
    free(m->from);
    for (int i = 0; i < m->nto; i++)
        free(m->to[i]);
    free(m->to);
    free(m->data);
    memset(m, 0, sizeof *m);
}

static void copy_message(const smtp_sink_message *in, smtp_sink_message *out) {
    out->from = strdup(in->from ? in->from : "");
    out->nto = in->nto;
    out->to = calloc((size_t)in->nto + 1, sizeof *out->to);
    for (int i = 0; i < in->nto; i++)
        out->to[i] = strdup(in->to[i]);
    out->data = strdup(in->data ? in->data : "");
    out->accepted = in->accepted;
}

static bool say(int fd, const char *line) {
    char buf[600];
    int n = snprintf(buf, sizeof buf, "%s\r\n", line);
    return loopback_write(fd, buf, (size_t)n);
}

/* "MAIL FROM:<a@b> SIZE=12" → "a@b" */
static char *angle_addr(const char *arg) {
    const char *lt = strchr(arg, '<'), *gt = lt ? strchr(lt, '>') : NULL;
    if (!lt || !gt) return NULL;
    return strndup(lt + 1, (size_t)(gt - lt - 1));
}

static void serve(void *ctx, int fd, loopback *srv) {
    smtp_sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    smtp_sink_mode mode = s->mode;
    pthread_mutex_unlock(&s->mu);
    if (mode == SMTP_SINK_REFUSE) {
        say(fd, "554 smtp_sink refuses service");
        return;
    }
    if (!say(fd, "220 smtp_sink ESMTP ready")) return;
    loopback_reader rd = {.fd = fd};
    smtp_sink_message cur = {0};
    char line[4096];
    for (;;) {
        if (loopback_read_line(&rd, line, sizeof line) < 0) break;
        if (strncasecmp(line, "EHLO", 4) == 0) {
            if (!say(fd, "250-smtp_sink") || !say(fd, "250-8BITMIME") ||
                !say(fd, "250 SIZE 10485760"))
                break;
        } else if (strncasecmp(line, "HELO", 4) == 0) {
            say(fd, "250 smtp_sink");
        } else if (strncasecmp(line, "MAIL FROM:", 10) == 0) {
            smtp_sink_message_free(&cur);
            cur.from = angle_addr(line + 10);
            say(fd, cur.from ? "250 OK" : "501 bad address");
        } else if (strncasecmp(line, "RCPT TO:", 8) == 0) {
            char *a = angle_addr(line + 8);
            if (!cur.from || !a) {
                free(a);
                say(fd, "503 need MAIL FROM and an address");
                continue;
            }
            cur.to = realloc(cur.to, (size_t)(cur.nto + 1) * sizeof *cur.to);
            cur.to[cur.nto++] = a;
            say(fd, "250 OK");
        } else if (strcasecmp(line, "DATA") == 0) {
            if (!cur.nto) {
                say(fd, "503 need RCPT TO");
                continue;
            }
            say(fd, "354 end with <CRLF>.<CRLF>");
            size_t len = 0, cap = 4096;
            char *data = malloc(cap);
            bool ok = false;
            for (;;) {
                long n = loopback_read_line(&rd, line, sizeof line);
                if (n < 0) break;
                if (strcmp(line, ".") == 0) {
                    ok = true;
                    break;
                }
                const char *l = line[0] == '.' ? line + 1 : line; /* undo dot-stuffing */
                size_t ln = strlen(l);
                while (len + ln + 3 > cap)
                    data = realloc(data, cap *= 2);
                memcpy(data + len, l, ln);
                memcpy(data + len + ln, "\r\n", 2);
                len += ln + 2;
            }
            data[len] = '\0';
            cur.data = data;
            if (!ok) break;
            pthread_mutex_lock(&s->mu);
            mode = s->mode;
            int delay = s->delay_ms;
            cur.accepted = mode == SMTP_SINK_ACCEPT;
            if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 16;
                s->msgs = realloc(s->msgs, (size_t)s->cap * sizeof *s->msgs);
            }
            copy_message(&cur, &s->msgs[s->n++]);
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            if (delay > 0 && !loopback_sleep(srv, delay)) break;
            say(fd, mode == SMTP_SINK_ACCEPT          ? "250 OK queued"
                    : mode == SMTP_SINK_FAIL_DATA_451 ? "451 try again later"
                                                      : "554 transaction failed");
            smtp_sink_message_free(&cur);
        } else if (strcasecmp(line, "RSET") == 0) {
            smtp_sink_message_free(&cur);
            say(fd, "250 OK");
        } else if (strcasecmp(line, "NOOP") == 0) {
            say(fd, "250 OK");
        } else if (strcasecmp(line, "QUIT") == 0) {
            say(fd, "221 bye");
            break;
        } else {
            say(fd, "502 command not implemented");
        }
    }
    smtp_sink_message_free(&cur);
}

smtp_sink *smtp_sink_start(void) {
    smtp_sink *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->srv = loopback_start(serve, s);
    if (!s->srv) {
        free(s);
        return NULL;
    }
    snprintf(s->url, sizeof s->url, "smtp://127.0.0.1:%d", loopback_port(s->srv));
    return s;
}

void smtp_sink_stop(smtp_sink *s) {
    if (!s) return;
    loopback_stop(s->srv);
    for (int i = 0; i < s->n; i++)
        smtp_sink_message_free(&s->msgs[i]);
    free(s->msgs);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int smtp_sink_port(const smtp_sink *s) { return loopback_port(s->srv); }
const char *smtp_sink_url(const smtp_sink *s) { return s->url; }

void smtp_sink_set_mode(smtp_sink *s, smtp_sink_mode mode) {
    pthread_mutex_lock(&s->mu);
    s->mode = mode;
    pthread_mutex_unlock(&s->mu);
}

void smtp_sink_set_delay(smtp_sink *s, int delay_ms) {
    pthread_mutex_lock(&s->mu);
    s->delay_ms = delay_ms;
    pthread_mutex_unlock(&s->mu);
}

int smtp_sink_received(smtp_sink *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int smtp_sink_accepted(smtp_sink *s) {
    pthread_mutex_lock(&s->mu);
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->msgs[i].accepted;
    pthread_mutex_unlock(&s->mu);
    return n;
}

bool smtp_sink_wait(smtp_sink *s, int n, int timeout_ms) {
    return loopback_wait_count(&s->mu, &s->cv, &s->n, n, timeout_ms);
}

bool smtp_sink_get(smtp_sink *s, int i, smtp_sink_message *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    bool ok = i >= 0 && i < s->n;
    if (ok) copy_message(&s->msgs[i], out);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

char *smtp_sink_header(const smtp_sink_message *m, const char *name) {
    size_t nl = strlen(name);
    const char *p = m->data;
    while (p && *p && !(p[0] == '\r' && p[1] == '\n')) { /* headers end at the empty line */
        const char *eol = strstr(p, "\r\n");
        if (!eol) break;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t cap = 256, len = 0;
            char *out = malloc(cap);
            for (;;) { /* unfold continuation lines */
                size_t seg = (size_t)(eol - v);
                while (len + seg + 1 > cap)
                    out = realloc(out, cap *= 2);
                memcpy(out + len, v, seg);
                len += seg;
                if (eol[2] != ' ' && eol[2] != '\t') break;
                v = eol + 2;
                while (*v == ' ' || *v == '\t')
                    v++;
                eol = strstr(v, "\r\n");
                if (!eol) break;
            }
            out[len] = '\0';
            return out;
        }
        p = eol + 2;
    }
    return NULL;
}
