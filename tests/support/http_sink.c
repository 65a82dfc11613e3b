/* http_sink.c — see http_sink.h. Just enough HTTP/1.1 for our own clients: a request line,
 * headers, a Content-Length body (with `Expect: 100-continue` honoured); chunked bodies get 411. */
#include "support/http_sink.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "support/loopback.h"

typedef struct queued {
    http_sink_response r;
    struct queued *next;
} queued;

struct http_sink {
    loopback *srv;
    char url[64];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    http_sink_request *reqs;
    int nreqs, cap;
    queued *head, *tail;
    http_sink_response def;
    http_sink_handler handler;
    void *handler_ctx;
};

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

void http_sink_request_free(http_sink_request *r) {
    if (!r) return;
    for (int i = 0; i < r->nheaders; i++) {
        free(r->names[i]);
        free(r->values[i]);
    }
    free(r->names);
    free(r->values);
    free(r->method);
    free(r->path);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static void copy_request(const http_sink_request *in, http_sink_request *out) {
    memset(out, 0, sizeof *out);
    out->method = dup0(in->method);
    out->path = dup0(in->path);
    out->nheaders = in->nheaders;
    out->names = calloc((size_t)in->nheaders + 1, sizeof *out->names);
    out->values = calloc((size_t)in->nheaders + 1, sizeof *out->values);
    for (int i = 0; i < in->nheaders; i++) {
        out->names[i] = dup0(in->names[i]);
        out->values[i] = dup0(in->values[i]);
    }
    out->body = malloc(in->body_len + 1);
    memcpy(out->body, in->body, in->body_len + 1);
    out->body_len = in->body_len;
}

const char *http_sink_header(const http_sink_request *r, const char *name) {
    for (int i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->names[i], name) == 0) return r->values[i];
    return NULL;
}

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

static void answer(int fd, int status, const char *body) {
    if (status == 0) status = 200;
    size_t n = body ? strlen(body) : 0;
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, reason(status), n);
    if (loopback_write(fd, head, (size_t)hn) && n) loopback_write(fd, body, n);
}

/* Reads one request into req; false on a malformed or truncated one. */
static bool read_request(int fd, loopback_reader *rd, http_sink_request *req, bool *chunked) {
    char line[8192];
    if (loopback_read_line(rd, line, sizeof line) <= 0) return false;
    char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2) return false;
    req->method = strndup(line, (size_t)(sp1 - line));
    req->path = strndup(sp1 + 1, (size_t)(sp2 - sp1 - 1));
    size_t content_length = 0;
    bool expect = false;
    int cap = 0;
    for (;;) {
        long n = loopback_read_line(rd, line, sizeof line);
        if (n < 0) return false;
        if (n == 0) break;
        char *colon = strchr(line, ':');
        if (!colon) return false;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (req->nheaders == cap) {
            cap = cap ? cap * 2 : 16;
            req->names = realloc(req->names, (size_t)cap * sizeof *req->names);
            req->values = realloc(req->values, (size_t)cap * sizeof *req->values);
        }
        req->names[req->nheaders] = strndup(line, (size_t)(colon - line));
        req->values[req->nheaders++] = strdup(v);
        if (strncasecmp(line, "Content-Length:", 15) == 0) content_length = strtoul(v, NULL, 10);
        if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 && strstr(v, "chunked"))
            *chunked = true;
        if (strncasecmp(line, "Expect:", 7) == 0 && strcasecmp(v, "100-continue") == 0)
            expect = true;
    }
    if (*chunked) return true;
    if (content_length > 64u * 1024 * 1024) return false;
    if (expect && !loopback_write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25)) return false;
    req->body = malloc(content_length + 1);
    if (!req->body || !loopback_read_exact(rd, req->body, content_length)) return false;
    req->body[content_length] = '\0';
    req->body_len = content_length;
    return true;
}

static bool path_matches(const char *prefix, const char *path) {
    return !prefix || strncmp(path, prefix, strlen(prefix)) == 0;
}

static void serve(void *ctx, int fd, loopback *srv) {
    http_sink *s = ctx;
    loopback_reader rd = {.fd = fd};
    http_sink_request req = {0};
    bool chunked = false;
    if (!read_request(fd, &rd, &req, &chunked)) {
        http_sink_request_free(&req);
        return;
    }
    if (chunked) {
        answer(fd, 411, "{\"error\":\"chunked bodies are not supported by http_sink\"}");
        http_sink_request_free(&req);
        return;
    }
    /* Record first: a test may wait for the request and then kill the client mid-answer. */
    http_sink_response res = {0};
    char *body = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->nreqs == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->reqs = realloc(s->reqs, (size_t)s->cap * sizeof *s->reqs);
    }
    copy_request(&req, &s->reqs[s->nreqs++]);
    pthread_cond_broadcast(&s->cv);
    http_sink_handler handler = s->handler;
    void *hctx = s->handler_ctx;
    if (!handler) {
        queued *prev = NULL, *q = s->head;
        while (q && !path_matches(q->r.path, req.path)) {
            prev = q;
            q = q->next;
        }
        if (q) {
            if (prev)
                prev->next = q->next;
            else
                s->head = q->next;
            if (s->tail == q) s->tail = prev;
            res = q->r;
            body = (char *)q->r.body; /* owned copy, freed below */
            free((char *)q->r.path);
            res.path = NULL;
            free(q);
        } else {
            res = s->def;
            body = dup0(s->def.body);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (handler) {
        handler(hctx, &req, &res);
        body = dup0(res.body);
    }
    if (res.delay_ms > 0 && !loopback_sleep(srv, res.delay_ms)) res.close_without_answer = true;
    if (!res.close_without_answer) answer(fd, res.status, body);
    free(body);
    http_sink_request_free(&req);
}

http_sink *http_sink_start(void) {
    http_sink *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->def = (http_sink_response){.status = 200, .body = "{}"};
    s->def.body = strdup("{}");
    s->srv = loopback_start(serve, s);
    if (!s->srv) {
        free((char *)s->def.body);
        free(s);
        return NULL;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", loopback_port(s->srv));
    return s;
}

void http_sink_stop(http_sink *s) {
    if (!s) return;
    loopback_stop(s->srv);
    for (int i = 0; i < s->nreqs; i++)
        http_sink_request_free(&s->reqs[i]);
    free(s->reqs);
    while (s->head) {
        queued *q = s->head;
        s->head = q->next;
        free((char *)q->r.body);
        free((char *)q->r.path);
        free(q);
    }
    free((char *)s->def.body);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int http_sink_port(const http_sink *s) { return loopback_port(s->srv); }
const char *http_sink_url(const http_sink *s) { return s->url; }

void http_sink_push(http_sink *s, const http_sink_response *r) {
    queued *q = calloc(1, sizeof *q);
    q->r = *r;
    q->r.body = dup0(r->body);
    q->r.path = dup0(r->path);
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = q;
    else
        s->head = q;
    s->tail = q;
    pthread_mutex_unlock(&s->mu);
}

void http_sink_set_default(http_sink *s, const http_sink_response *r) {
    pthread_mutex_lock(&s->mu);
    free((char *)s->def.body);
    s->def = *r;
    s->def.body = dup0(r->body);
    s->def.path = NULL;
    pthread_mutex_unlock(&s->mu);
}

void http_sink_set_handler(http_sink *s, http_sink_handler fn, void *ctx) {
    pthread_mutex_lock(&s->mu);
    s->handler = fn;
    s->handler_ctx = ctx;
    pthread_mutex_unlock(&s->mu);
}

int http_sink_count(http_sink *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

bool http_sink_wait(http_sink *s, int n, int timeout_ms) {
    return loopback_wait_count(&s->mu, &s->cv, &s->nreqs, n, timeout_ms);
}

bool http_sink_get(http_sink *s, int i, http_sink_request *out) {
    pthread_mutex_lock(&s->mu);
    bool ok = i >= 0 && i < s->nreqs;
    if (ok) copy_request(&s->reqs[i], out);
    pthread_mutex_unlock(&s->mu);
    return ok;
}
