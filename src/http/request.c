/* request.c — building a request from a raw target, reading and writing headers and JSON bodies,
 * the single error-body function and the JSON log line. Everything a request holds is in its
 * arena (base/arena.h), so handlers never free. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "http/request.h"
#include "missive/base.h"

/* ---- request ----------------------------------------------------------------------------- */

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into the arena; plus_space turns '+' into ' ' (query strings). A
 * malformed escape is kept literally. */
static char *decode(mv_arena *arena, const char *s, size_t n, bool plus_space, size_t *out_len) {
    char *out = mv_arena_alloc(arena, n + 1);
    if (!out) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
            hexval((unsigned char)s[i + 2]) >= 0) {
            out[j++] =
                (char)(hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2]));
            i += 2;
        } else if (plus_space && s[i] == '+') {
            out[j++] = ' ';
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    if (out_len) *out_len = j;
    return out;
}

char *mv_http_decode_segment(mv_arena *arena, const char *s, size_t n, size_t *out_len) {
    return decode(arena, s, n, false, out_len);
}

mv_code mv_http_request_init(mv_http_request *req, mv_arena *arena, const char *method,
                             const char *target, mv_err *err) {
    memset(req, 0, sizeof *req);
    req->arena = arena;
    req->method = mv_arena_strdup(arena, method ? method : "");
    size_t len = target ? strlen(target) : 0;
    if (!req->method) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (len == 0 || target[0] != '/')
        return mv_err_set(err, MV_INVALID_ARGUMENT, "request target must start with '/'");
    if (len > MV_HTTP_MAX_TARGET)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "request target is longer than %d bytes",
                          MV_HTTP_MAX_TARGET);
    const char *q = strchr(target, '?');
    size_t plen = q ? (size_t)(q - target) : len;
    const char *hash = memchr(target, '#', plen);
    if (hash) plen = (size_t)(hash - target);
    req->path = mv_arena_strndup(arena, target, plen);
    if (!req->path) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (!q) return MV_OK;
    const char *qs = q + 1;
    const char *qend = strchr(qs, '#');
    size_t qlen = qend ? (size_t)(qend - qs) : strlen(qs);
    size_t count = 1;
    for (size_t i = 0; i < qlen; i++)
        if (qs[i] == '&') count++;
    req->query = mv_arena_alloc(arena, count * sizeof *req->query);
    if (!req->query) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    size_t i = 0;
    while (i <= qlen) {
        size_t j = i;
        while (j < qlen && qs[j] != '&')
            j++;
        if (j > i) {
            const char *eq = memchr(qs + i, '=', j - i);
            size_t klen = eq ? (size_t)(eq - (qs + i)) : j - i;
            mv_http_header *h = &req->query[req->nquery++];
            h->name = decode(arena, qs + i, klen, true, NULL);
            h->value = eq ? decode(arena, eq + 1, (size_t)(qs + j - eq - 1), true, NULL)
                          : mv_arena_strdup(arena, "");
            if (!h->name || !h->value) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        i = j + 1;
    }
    return MV_OK;
}

static bool grow_headers(mv_arena *arena, mv_http_header **arr, size_t n, size_t *cap) {
    if (n < *cap) return true;
    size_t ncap = *cap ? *cap * 2 : 16;
    mv_http_header *na = mv_arena_alloc(arena, ncap * sizeof *na);
    if (!na) return false;
    if (n) memcpy(na, *arr, n * sizeof *na);
    *arr = na;
    *cap = ncap;
    return true;
}

mv_code mv_http_request_add_header(mv_http_request *req, const char *name, const char *value,
                                   mv_err *err) {
    if (!grow_headers(req->arena, &req->headers, req->nheaders, &req->cap_headers))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_http_header *h = &req->headers[req->nheaders];
    h->name = mv_arena_strdup(req->arena, name ? name : "");
    h->value = mv_arena_strdup(req->arena, value ? value : "");
    if (!h->name || !h->value) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    req->nheaders++;
    return MV_OK;
}

void mv_http_response_init(mv_http_response *res, mv_arena *arena) {
    memset(res, 0, sizeof *res);
    res->arena = arena;
}

const char *mv_http_header_get(const mv_http_request *req, const char *name) {
    for (size_t i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->headers[i].name, name) == 0) return req->headers[i].value;
    return NULL;
}

size_t mv_http_header_count(const mv_http_request *req, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < req->nheaders; i++)
        n += strcasecmp(req->headers[i].name, name) == 0;
    return n;
}

const char *mv_http_query_get(const mv_http_request *req, const char *name) {
    for (size_t i = 0; i < req->nquery; i++)
        if (strcmp(req->query[i].name, name) == 0) return req->query[i].value;
    return NULL;
}

const char *mv_http_param(const mv_http_request *req, const char *name) {
    for (size_t i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].name, name) == 0) return req->params[i].value;
    return NULL;
}

/* application/json, optionally followed by parameters ("; charset=utf-8"). */
static bool content_type_is_json(const char *ct) {
    while (*ct == ' ' || *ct == '\t')
        ct++;
    static const char JSON_TYPE[] = "application/json";
    size_t n = sizeof JSON_TYPE - 1;
    if (strncasecmp(ct, JSON_TYPE, n) != 0) return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

mv_code mv_http_read_json_body(mv_http_request *req, json_t **out, mv_err *err) {
    *out = NULL;
    if (req->body_too_large)
        return mv_err_set(err, MV_PAYLOAD_TOO_LARGE, "request body is larger than %d bytes",
                          MV_HTTP_MAX_BODY);
    if (req->body_len == 0) {
        *out = mv_arena_json(req->arena, json_object());
        return *out ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    const char *ct = mv_http_header_get(req, "Content-Type");
    if (ct && !content_type_is_json(ct))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "Content-Type must be application/json");
    json_t *v;
    mv_code rc = mv_json_parse(req->body, req->body_len, &v, err);
    if (rc != MV_OK) return rc;
    *out = mv_arena_json(req->arena, v);
    return MV_OK;
}

/* ---- response ---------------------------------------------------------------------------- */

void mv_http_set_header(mv_http_response *res, const char *name, const char *value) {
    if (!grow_headers(res->arena, &res->headers, res->nheaders, &res->cap_headers)) return;
    mv_http_header *h = &res->headers[res->nheaders];
    h->name = mv_arena_strdup(res->arena, name);
    h->value = mv_arena_strdup(res->arena, value);
    if (h->name && h->value) res->nheaders++;
}

const char *mv_http_response_header(const mv_http_response *res, const char *name) {
    for (size_t i = 0; i < res->nheaders; i++)
        if (strcasecmp(res->headers[i].name, name) == 0) return res->headers[i].value;
    return NULL;
}

static void set_content_type(mv_http_response *res, const char *ct) {
    for (size_t i = 0; i < res->nheaders; i++)
        if (strcasecmp(res->headers[i].name, "Content-Type") == 0) {
            res->headers[i].value = mv_arena_strdup(res->arena, ct);
            return;
        }
    mv_http_set_header(res, "Content-Type", ct);
}

void mv_http_text(mv_http_response *res, int status, const char *content_type, const char *text,
                  size_t len) {
    res->status = status;
    res->body = mv_arena_strndup(res->arena, text, len);
    res->body_len = res->body ? len : 0;
    set_content_type(res, content_type);
}

static void out_of_memory(mv_http_response *res, const char *detail) {
    static const char OOM[] = "{\"error\":{\"code\":\"internal\",\"message\":\"internal error\"}}";
    res->status = 500;
    res->detail = mv_arena_exhausted(res->arena) ? "the request's arena limit was reached" : detail;
    res->body = OOM;
    res->body_len = sizeof OOM - 1;
    set_content_type(res, "application/json");
}

void mv_http_adopt(mv_http_response *res, int status, const char *content_type, char *body,
                   size_t len) {
    if (!body || !mv_arena_defer(res->arena, free, body)) {
        free(body);
        out_of_memory(res, "out of memory keeping a response body");
        return;
    }
    res->status = status;
    res->body = body;
    res->body_len = len;
    set_content_type(res, content_type);
}

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_ok;

static void scratch_free(void *p) {
    mv_strbuf *b = p;
    free(b->data);
    free(b);
}

static void scratch_init(void) { scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

/* This thread's response buffer (freed when the thread ends), or NULL when out of memory. */
static mv_strbuf *thread_scratch(void) {
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_ok) return NULL;
    mv_strbuf *b = pthread_getspecific(scratch_key);
    if (!b && (b = calloc(1, sizeof *b)) && pthread_setspecific(scratch_key, b) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

static pthread_key_t line_key;
static pthread_once_t line_once = PTHREAD_ONCE_INIT;
static bool line_ok;

static void line_init(void) { line_ok = pthread_key_create(&line_key, scratch_free) == 0; }

/* This thread's access-log line buffer (freed when the thread ends), or NULL. */
static mv_strbuf *thread_line(void) {
    pthread_once(&line_once, line_init);
    if (!line_ok) return NULL;
    mv_strbuf *b = pthread_getspecific(line_key);
    if (!b && (b = calloc(1, sizeof *b)) && pthread_setspecific(line_key, b) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

void mv_http_json_page(mv_http_response *res, mv_code rc, const char *key, json_t *items,
                       char *next, const mv_err *err) {
    if (rc != MV_OK) {
        json_decref(items);
        mv_http_error(res, err);
    } else {
        mv_http_json(res, 200,
                     json_pack("{s:o,s:o}", key, items, "nextCursor",
                               next ? json_string(next) : json_null()));
    }
    free(next);
}

void mv_http_json(mv_http_response *res, int status, json_t *body) {
    if (!body) {
        mv_http_text(res, status, "application/json", "null", 4);
        return;
    }
    /* Written into this thread's scratch buffer (kept between requests, so no growing through
     * realloc — a request of 1 KiB or more makes glibc consolidate its fast bins every time),
     * then copied into the request's arena, whose block is reused too. */
    mv_strbuf tmp = {0}, *scratch = thread_scratch();
    if (!scratch) scratch = &tmp; /* no per-thread buffer: a plain one for this call */
    scratch->len = 0;
    bool ok = mv_json_write(scratch, body);
    json_decref(body);
    size_t len = scratch->len;
    char *s = NULL;
    if (ok && (scratch == &tmp || len > 64 * 1024)) {
        /* a large body is not copied: the buffer itself becomes the body (freed with the arena) */
        s = mv_strbuf_take(scratch, NULL);
        if (s && !mv_arena_defer(res->arena, free, s)) {
            free(s);
            s = NULL;
        }
    } else if (ok) {
        s = mv_arena_strndup(res->arena, scratch->data, len);
    }
    if (scratch == &tmp || scratch->oom || scratch->cap > 256 * 1024) { /* large: not kept */
        free(scratch->data);
        *scratch = (mv_strbuf){0};
    }
    if (!s) {
        out_of_memory(res, "out of memory serialising the response");
        return;
    }
    res->status = status;
    res->body = s;
    res->body_len = len;
    set_content_type(res, "application/json");
}

/* A JSON string even from bytes that are not UTF-8 (those become '?'). */
static json_t *string_lossy(const char *s) {
    json_t *v = json_string(s);
    if (v) return v;
    size_t n = strlen(s);
    char *copy = malloc(n + 1);
    if (!copy) return NULL;
    for (size_t i = 0; i <= n; i++)
        copy[i] = (unsigned char)s[i] >= 0x80 ? '?' : s[i];
    v = json_string(copy);
    free(copy);
    return v;
}

static bool code_is_internal(mv_code code) {
    return code == MV_INTERNAL || code == MV_NO_MEMORY || code == MV_IO ||
           code == MV_SCHEMA_TOO_NEW || (int)code < 0 || code >= MV_CODE_COUNT;
}

void mv_http_error(mv_http_response *res, const mv_err *err) {
    mv_err fallback = {.code = MV_INTERNAL};
    if (!err || err->code == MV_OK) {
        mv_strlcpy(fallback.message, "error response without an error", sizeof fallback.message);
        err = &fallback;
    }
    json_t *e = json_object();
    json_t *body = json_pack("{s:o}", "error", e);
    res->error_code = mv_code_name(err->code);
    if (code_is_internal(err->code)) {
        char detail_internal[sizeof err->message];
        json_object_set_new(e, "code", json_string("internal"));
        json_object_set_new(e, "message", json_string("internal error"));
        mv_redact_urls(err->message, detail_internal, sizeof detail_internal);
        res->detail = mv_arena_strdup(res->arena, detail_internal);
        mv_http_json(res, 500, body);
        return;
    }
    json_object_set_new(e, "code", json_string(mv_code_name(err->code)));
    /* Codes whose messages may name a URL, host, socket path or driver text answer the
     * contract's words; the detail goes to the request log with its URLs redacted. */
    const char *public_message = mv_code_public_message(err->code);
    json_object_set_new(e, "message", string_lossy(public_message ? public_message : err->message));
    char detail[sizeof err->message + sizeof err->cause + 16];
    static const struct {
        const char *key;
        size_t off;
    } fields[] = {
        {"actionAttemptId", offsetof(mv_err, attempt_id)},
        {"approvalId", offsetof(mv_err, approval_id)},
        {"resumeToken", offsetof(mv_err, resume_token)},
        {"sagaId", offsetof(mv_err, saga_id)},
        {"sessionId", offsetof(mv_err, session_id)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *v = (const char *)err + fields[i].off;
        if (v[0]) json_object_set_new(e, fields[i].key, string_lossy(v));
    }
    if (err->expires_at) json_object_set_new(e, "expiresAt", json_integer(err->expires_at));
    int status = mv_code_http_status(err->code);
    if (public_message || (status >= 500 && err->cause[0])) {
        char raw[sizeof detail];
        snprintf(raw, sizeof raw, "%s%s%s", public_message ? err->message : "",
                 public_message && err->cause[0] ? "; cause: " : "", err->cause);
        mv_redact_urls(raw, detail, sizeof detail);
        res->detail = mv_arena_strdup(res->arena, detail);
    }
    if (err->code == MV_CLIENT_REQUEST_PENDING) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", err->retry_after_s > 1 ? err->retry_after_s : 1);
        mv_http_set_header(res, "Retry-After", ra);
    }
    mv_http_json(res, status, body);
}

void mv_http_errorf(mv_http_response *res, mv_code code, const char *fmt, ...) {
    mv_err err = {0};
    va_list ap;
    va_start(ap, fmt);
    mv_err_setv(&err, code, fmt, ap);
    va_end(ap);
    mv_http_error(res, &err);
}

/* ---- logging ----------------------------------------------------------------------------- */

static atomic_int log_fd = 2;
static atomic_int log_min = 1;

static int level_rank(const char *level) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (level && strcmp(level, names[i]) == 0) return i;
    return 3; /* an unknown level is never dropped */
}

void mv_log_set_level(int level) { atomic_store(&log_min, level); }

bool mv_log_enabled(const char *level) { return level_rank(level) >= atomic_load(&log_min); }

int mv_log_set_fd(int fd) { return atomic_exchange(&log_fd, fd); }

void mv_log(const char *level, const char *msg, json_t *fields) {
    int fd = atomic_load(&log_fd);
    if (fd < 0 || !mv_log_enabled(level)) {
        json_decref(fields);
        return;
    }
    json_t *line = json_pack("{s:I,s:s,s:s}", "ts", (json_int_t)mv_now_ms(), "level", level, "msg",
                             msg ? msg : "");
    if (!line) {
        json_decref(fields);
        return;
    }
    if (fields) json_object_update(line, fields);
    json_decref(fields);
    /* URLs in any field lose their credentials and query string (DESIGN "Security rules") */
    const char *key;
    json_t *v;
    json_object_foreach(line, key, v) {
        if (!json_is_string(v) || !strstr(json_string_value(v), "://")) continue;
        size_t n = json_string_length(v) + 1;
        char *clean = malloc(n);
        if (!clean) continue;
        mv_redact_urls(json_string_value(v), clean, n);
        json_string_set(v, clean);
        free(clean);
    }
    char *s = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(line);
    if (!s) return;
    size_t n = strlen(s);
    s[n] = '\n'; /* replaces the NUL; the buffer is written by length */
    const char *p = s;
    size_t left = n + 1;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    free(s);
}

/* ---- the direct line writer ---------------------------------------------------------------
 * Writes what json_dumps(JSON_COMPACT | JSON_REAL_PRECISION(9)) writes for the same object:
 * strings escaped as jansson escapes them (\" \\ \b \f \n \r \t, other control characters
 * as \u00XX, everything else verbatim), reals as %.9g with ".0" added to integral values and
 * the exponent without '+' or leading zeros. A string that is not valid UTF-8 is left out, as
 * json_string() refuses it. */

static void put_json_string(mv_strbuf *b, const char *s) { mv_json_write_string(b, s, strlen(s)); }

/* ,"key":"value" — or nothing when value is not valid UTF-8 */
static void put_field_str(mv_strbuf *b, const char *key, const char *value) {
    size_t mark = b->len;
    mv_strbuf_add(b, ",", 1);
    put_json_string(b, key);
    mv_strbuf_add(b, ":", 1);
    bool ok;
    if (!strstr(value, "://")) {
        ok = mv_json_write_string(b, value, strlen(value));
    } else { /* URLs lose their credentials and query string, as in mv_log */
        size_t n = strlen(value) + 1;
        char *clean = malloc(n);
        ok = clean != NULL;
        if (clean) {
            mv_redact_urls(value, clean, n);
            ok = mv_json_write_string(b, clean, strlen(clean));
        }
        free(clean);
    }
    if (!ok && !b->oom) b->len = mark;
}

void mv_log_fields(const char *level, const char *msg, const mv_log_field *fields, size_t n) {
    int fd = atomic_load(&log_fd);
    if (fd < 0 || !mv_log_enabled(level)) return;
    /* this thread's line buffer (kept, like the response buffer): no allocation per line */
    mv_strbuf tmp = {0}, *line = thread_line();
    if (!line) line = &tmp;
    mv_strbuf b = *line;
    b.len = 0;
    b.oom = false;
    char num[32];
    snprintf(num, sizeof num, "{\"ts\":%lld", (long long)mv_now_ms());
    mv_strbuf_adds(&b, num);
    put_field_str(&b, "level", level);
    put_field_str(&b, "msg", msg ? msg : "");
    for (size_t i = 0; i < n; i++) {
        const mv_log_field *f = &fields[i];
        if (f->type == MV_LOG_STR) {
            if (f->s) put_field_str(&b, f->key, f->s);
            continue;
        }
        mv_strbuf_add(&b, ",", 1);
        put_json_string(&b, f->key);
        mv_strbuf_add(&b, ":", 1);
        if (f->type == MV_LOG_INT) {
            snprintf(num, sizeof num, "%lld", f->i);
            mv_strbuf_adds(&b, num);
        } else {
            mv_json_write_real(&b, f->d, 9);
        }
    }
    mv_strbuf_add(&b, "}\n", 2);
    if (!b.oom) {
        const char *p = b.data;
        size_t left = b.len;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
    }
    if (line == &tmp || b.oom || b.cap > 64 * 1024) { /* a huge line's buffer is not kept */
        free(b.data);
        b = (mv_strbuf){0};
    }
    if (line != &tmp) *line = b;
}
