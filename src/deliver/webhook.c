/* webhook.c — signed JSON calls to the outside world over libcurl.
 *
 * One easy handle per call keeps the client trivially thread-safe; libcurl's global state is set
 * up exactly once (pthread_once). The point of this file is the outcome classification: callers
 * that journal side effects (sagas, actions) must know whether the far side may have acted.
 * "Not sent" is claimed only when libcurl never finished connecting (pretransfer time is zero);
 * anything that fails after that is ambiguous, because the request may have been processed.
 * Every call is signed twice when secrets are configured: the Standard Webhooks headers (id,
 * timestamp, one `v1,` signature per secret, so keys rotate without a flag day) and the older
 * X-Missive-Signature over the body alone, keyed with the first secret. */
#include <ctype.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/callctx.h"
#include "deliver/transport.h"
#include "missive/deliver.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_global_rc = CURLE_OK;

static void curl_init_once(void) { curl_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

bool mv_curl_ready(void) {
    pthread_once(&curl_once, curl_init_once);
    return curl_global_rc == CURLE_OK;
}

void mv_url_redacted(const char *url, char *out, size_t size) {
    /* Drop any "user:password@" so credentials never reach an error message. */
    const char *scheme = strstr(url, "://");
    const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
    const char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
    if (scheme && at && (!slash || at < slash)) {
        snprintf(out, size, "%.*s://%s", (int)(scheme - url), url, at + 1);
    } else {
        mv_strlcpy(out, url, size);
    }
}

const char *mv_webhook_outcome_name(mv_webhook_outcome o) {
    switch (o) {
    case MV_WEBHOOK_OK: return "ok";
    case MV_WEBHOOK_REJECTED: return "rejected";
    case MV_WEBHOOK_AMBIGUOUS: return "ambiguous";
    case MV_WEBHOOK_NOT_SENT: return "not_sent";
    }
    return "unknown";
}

void mv_webhook_response_free(mv_webhook_response *r) {
    if (!r) return;
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

void mv_webhook_signature(const void *secret, size_t secret_len, const void *body, size_t len,
                          char out[72]) {
    unsigned char mac[32];
    mv_hmac_sha256(secret, secret_len, body, len, mac);
    memcpy(out, "sha256=", 7);
    mv_hex(mac, 32, out + 7);
}

/* The active keys: the list when given, else the single secret. */
static size_t active_secrets(const mv_webhook_config *c, mv_webhook_secret *one,
                             const mv_webhook_secret **list) {
    if (c && c->nsecrets > 0 && c->secrets) {
        *list = c->secrets;
        return c->nsecrets;
    }
    if (c && c->secret && c->secret_len > 0) {
        *one = (mv_webhook_secret){.bytes = c->secret, .len = c->secret_len};
        *list = one;
        return 1;
    }
    *list = NULL;
    return 0;
}

char *mv_webhook_sign_v1(const mv_webhook_config *cfg, const char *id, int64_t timestamp_s,
                         const void *body, size_t len) {
    mv_webhook_secret one;
    const mv_webhook_secret *keys;
    size_t n = active_secrets(cfg, &one, &keys);
    char head[160];
    int hn = snprintf(head, sizeof head, "%s.%lld.", id ? id : "", (long long)timestamp_s);
    if (hn < 0 || (size_t)hn >= sizeof head) return NULL;
    char *msg = malloc((size_t)hn + len + 1);
    /* each entry: "v1," + 44 base64 characters + a separator */
    char *out = malloc(n * 49 + 1);
    if (!msg || !out) {
        free(msg);
        free(out);
        return NULL;
    }
    memcpy(msg, head, (size_t)hn);
    if (len) memcpy(msg + hn, body, len);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char mac[32];
        mv_hmac_sha256(keys[i].bytes, keys[i].len, msg, (size_t)hn + len, mac);
        if (i) out[o++] = ' ';
        memcpy(out + o, "v1,", 3);
        o += 3;
        o += (size_t)EVP_EncodeBlock((unsigned char *)out + o, mac, 32);
    }
    out[o] = '\0';
    free(msg);
    return out;
}

/* Adds webhook-id, webhook-timestamp, webhook-signature (when keyed) and, for a POST, the
 * X-Missive-Signature header. Returns false when out of memory. */
static bool add_signatures(struct curl_slist **hdrs, const mv_webhook_config *c, const char *key,
                           const char *body, size_t body_len, bool post) {
    char fresh[37], line[600];
    const char *id = key;
    if (!id && mv_id_uuid(fresh, NULL) != MV_OK) return false;
    if (!id) id = fresh;
    int64_t ts = mv_clock_now(c->clock) / 1000;
    snprintf(line, sizeof line, "webhook-id: %s", id);
    struct curl_slist *h = curl_slist_append(*hdrs, line);
    if (!h) return false;
    *hdrs = h;
    snprintf(line, sizeof line, "webhook-timestamp: %lld", (long long)ts);
    if (!(h = curl_slist_append(*hdrs, line))) return false;
    mv_webhook_secret one;
    const mv_webhook_secret *keys;
    if (active_secrets(c, &one, &keys) == 0) return true;
    char *sig = mv_webhook_sign_v1(c, id, ts, body ? body : "", body ? body_len : 0);
    size_t n = sig ? strlen(sig) + 32 : 0;
    char *hl = sig ? malloc(n) : NULL;
    if (hl) {
        snprintf(hl, n, "webhook-signature: %s", sig);
        h = curl_slist_append(*hdrs, hl);
    }
    free(hl);
    free(sig);
    if (!hl || !h) return false;
    if (post) {
        char xs[72];
        mv_webhook_signature(keys[0].bytes, keys[0].len, body, body_len, xs);
        snprintf(line, sizeof line, "X-Missive-Signature: %s", xs);
        if (!curl_slist_append(*hdrs, line)) return false;
    }
    return true;
}

static size_t on_body(char *ptr, size_t size, size_t n, void *ud) {
    sink_buf *b = ud;
    size_t add = size * n;
    if (b->len + add > b->max) {
        b->too_large = true;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

static mv_webhook_outcome classify_status(long status) {
    if (status >= 200 && status < 300) return MV_WEBHOOK_OK;
    if (status >= 400 && status < 500) return MV_WEBHOOK_REJECTED;
    return MV_WEBHOOK_AMBIGUOUS;
}

static bool http_url(const char *url) {
    return url && (strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0);
}

/* The URL as logs show it: no credentials, no query string, no fragment. */
static void url_for_log(const char *url, char *out, size_t size) {
    mv_url_redacted(url, out, size);
    out[strcspn(out, "?#")] = '\0';
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Tells cfg's observer (if any) how the call went, labelled from the call context captured when
 * the call was set up (the caller's thread; an asynchronous call concludes on the loop's). */
static void observe(const mv__webhook_call *w, const mv_webhook_response *res, double duration_s) {
    const mv_webhook_config *cfg = w->cfg;
    if (!cfg || !cfg->on_call) return;
    const mv_callctx *cx = &w->cx;
    char shown[512];
    url_for_log(w->url, shown, sizeof shown);
    char status_words[32];
    const char *failure = res->failure;
    if (!failure && res->outcome != MV_WEBHOOK_OK) {
        snprintf(status_words, sizeof status_words, "HTTP %ld", res->status);
        failure = status_words;
    }
    mv_webhook_call_info info = {.kind = cx->kind ? cx->kind : "webhook",
                                 .method = w->method,
                                 .url = shown,
                                 .status = res->status,
                                 .outcome = (int)res->outcome,
                                 .duration_s = duration_s,
                                 .failure = failure,
                                 .message_id = cx->message_id,
                                 .attempt_id = cx->attempt_id,
                                 .saga_id = cx->saga_id,
                                 .traceparent = cx->traceparent};
    cfg->on_call(cfg->on_call_ctx, &info);
}

void mv__webhook_call_cleanup(mv__webhook_call *w) {
    if (!w) return;
    free(w->buf.data);
    curl_slist_free_all(w->hdrs);
    if (w->h) curl_easy_cleanup(w->h);
    free(w->url);
    free(w->body);
    memset(w, 0, sizeof *w);
}

/* The shared half of POST and GET, synchronous or not: one easy handle with every limit, header
 * and signature. body (NULL means GET) is taken over: freed by the cleanup. */
mv_code mv__webhook_call_setup(mv__webhook_call *w, const mv_webhook_config *cfg, const char *url,
                               char *body, size_t body_len, const char *key, mv_err *err) {
    memset(w, 0, sizeof *w);
    w->body = body;
    w->body_len = body_len;
    w->cfg = cfg;
    w->method = body ? "POST" : "GET";
    w->cx = *mv__callctx();
    char shown[512];
    url_for_log(url ? url : "", shown, sizeof shown);
    if (!http_url(url)) {
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "webhook URL \"%s\" must start with http:// or https://", shown);
    }
    if (!mv_curl_ready()) return mv_err_set(err, MV_INTERNAL, "libcurl failed to initialise");
    if (!(w->url = strdup(url))) return mv_err_set(err, MV_NO_MEMORY, "out of memory");

    mv_webhook_config c = cfg ? *cfg : (mv_webhook_config){0};
    if (c.connect_timeout_ms <= 0) c.connect_timeout_ms = MV_DEFAULT_WEBHOOK_CONNECT_TIMEOUT_MS;
    if (c.timeout_ms <= 0) c.timeout_ms = MV_DEFAULT_WEBHOOK_TIMEOUT_MS;
    if (c.max_response_bytes == 0) c.max_response_bytes = MV_DEFAULT_WEBHOOK_MAX_RESPONSE_BYTES;
    w->max_response_bytes = c.max_response_bytes;
    w->buf.max = c.max_response_bytes;

    CURL *h = w->h = curl_easy_init();
    if (!h) return mv_err_set(err, MV_NO_MEMORY, "out of memory creating an HTTP handle");

    char line[600];
    w->hdrs = curl_slist_append(w->hdrs, "Accept: application/json");
    w->hdrs = curl_slist_append(w->hdrs, "Expect:"); /* no 100-continue round trip */
    if (body) {
        w->hdrs = curl_slist_append(w->hdrs, "Content-Type: application/json");
        if (key) {
            snprintf(line, sizeof line, "Idempotency-Key: %s", key);
            w->hdrs = curl_slist_append(w->hdrs, line);
        }
    }
    if (w->cx.traceparent[0]) { /* W3C trace context: the request that caused this */
        snprintf(line, sizeof line, "traceparent: %s", w->cx.traceparent);
        w->hdrs = curl_slist_append(w->hdrs, line);
    }
    if (!w->hdrs || !add_signatures(&w->hdrs, &c, key, body, body_len, body != NULL))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory building HTTP headers");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c.timeout_ms);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c.max_response_bytes);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, w->hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "missive");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w->buf);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, w->errbuf);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_PRIVATE, w);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    clock_gettime(CLOCK_MONOTONIC, &w->t0);
    w->ready = true;
    return MV_OK;
}

/* Classifies a finished transfer (cc: what libcurl said) into res and err, and tells the
 * observer. Called once per call that was set up; res is filled in every case. */
mv_code mv__webhook_call_conclude(mv__webhook_call *w, CURLcode cc, mv_webhook_response *res,
                                  mv_err *err) {
    memset(res, 0, sizeof *res);
    res->outcome = MV_WEBHOOK_NOT_SENT;
    if (!w->ready) return err ? err->code : MV_INTERNAL; /* the setup failed: err is set */
    const char *method = w->method;
    char shown[512];
    url_for_log(w->url, shown, sizeof shown);
    mv_code rc = MV_OK;
    double duration_s = seconds_since(&w->t0);
    long status = 0;
    curl_off_t pretransfer = 0;
    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(w->h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
    res->status = status;

    if (w->aborted) {
        /* the loop shut down before the answer came: as a timeout, the far side may have
         * acted once the request went out */
        res->outcome = w->started && pretransfer > 0 ? MV_WEBHOOK_AMBIGUOUS : MV_WEBHOOK_NOT_SENT;
        res->failure = "shutting down";
        rc = mv_err_set(err, MV_DRAINING, "%s %s: abandoned, the server is shutting down", method,
                        shown);
        goto done;
    } else if (cc == CURLE_OK) {
        res->outcome = classify_status(status);
    } else if (w->buf.too_large || cc == CURLE_FILESIZE_EXCEEDED) {
        res->outcome = MV_WEBHOOK_AMBIGUOUS;
        res->failure = "response too large";
        rc = mv_err_set(err, MV_UPSTREAM_FAILED, "%s %s: response larger than %zu bytes (HTTP %ld)",
                        method, shown, w->max_response_bytes, status);
        goto done;
    } else {
        /* CURLE_UNSUPPORTED_PROTOCOL is not in the list: libcurl also answers it to a reply
         * without a status line (HTTP/0.9), after the request went out; before that,
         * pretransfer is still zero. */
        bool not_sent = cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY ||
                        cc == CURLE_COULDNT_CONNECT || cc == CURLE_URL_MALFORMAT ||
                        pretransfer == 0;
        res->outcome = not_sent ? MV_WEBHOOK_NOT_SENT : MV_WEBHOOK_AMBIGUOUS;
        res->failure = cc == CURLE_OPERATION_TIMEDOUT ? "timed out"
                       : cc == CURLE_COULDNT_CONNECT  ? "connection refused"
                       : not_sent                     ? "not sent"
                                                      : "no answer";
        rc = mv_err_set(err, MV_UPSTREAM_FAILED, "%s %s: %s (%s)", method, shown,
                        not_sent ? "not sent" : "no complete answer",
                        w->errbuf[0] ? w->errbuf : curl_easy_strerror(cc));
        goto done;
    }

    res->body = w->buf.data ? w->buf.data : strdup("");
    res->body_len = w->buf.len;
    w->buf.data = NULL;
    if (!res->body) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory reading the response of %s", shown);
        goto done;
    }
    size_t i = 0;
    while (i < res->body_len && isspace((unsigned char)res->body[i]))
        i++;
    if (i < res->body_len) {
        json_error_t je;
        res->json = json_loadb(res->body, res->body_len, JSON_DECODE_ANY, &je);
        res->json_invalid = res->json == NULL;
    }
    if (res->outcome != MV_WEBHOOK_OK) {
        rc = mv_err_set(err, MV_UPSTREAM_FAILED, "%s %s: HTTP %ld", method, shown, status);
    }

done:
    observe(w, res, duration_s);
    return rc;
}

/* A call on the calling thread: setup, curl_easy_perform, conclude. */
static mv_code call(const mv_webhook_config *cfg, const char *url, char *body, size_t body_len,
                    const char *key, mv_webhook_response *out, mv_err *err) {
    mv_webhook_response local = {0};
    mv_webhook_response *res = out ? out : &local;
    mv__webhook_call w;
    mv_code rc = mv__webhook_call_setup(&w, cfg, url, body, body_len, key, err);
    if (rc == MV_OK) {
        w.started = true;
        rc = mv__webhook_call_conclude(&w, curl_easy_perform(w.h), res, err);
    } else {
        memset(res, 0, sizeof *res);
        res->outcome = MV_WEBHOOK_NOT_SENT;
    }
    mv__webhook_call_cleanup(&w);
    if (!out) mv_webhook_response_free(&local);
    return rc;
}

mv_code mv_webhook_post(const mv_webhook_config *cfg, const char *url, const json_t *body,
                        const char *idempotency_key, mv_webhook_response *out, mv_err *err) {
    char *text = body ? mv_json_compact(body) : strdup("null");
    if (!text) {
        if (out) memset(out, 0, sizeof *out), out->outcome = MV_WEBHOOK_NOT_SENT;
        return mv_err_set(err, MV_NO_MEMORY, "out of memory serialising a webhook body");
    }
    return call(cfg, url, text, strlen(text), idempotency_key, out, err);
}

mv_code mv_webhook_get(const mv_webhook_config *cfg, const char *url, mv_webhook_response *out,
                       mv_err *err) {
    return call(cfg, url, NULL, 0, NULL, out, err);
}
