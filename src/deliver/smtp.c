/* smtp.c — one plain-text email through libcurl's SMTP client.
 *
 * The message is built here, not by libcurl: header fields are fixed (From, To, Subject, Date,
 * Message-ID, MIME headers) and every user-supplied piece is made header-safe — addresses with
 * CR/LF or angle brackets are refused, subject control characters become spaces and a non-ASCII
 * subject is RFC 2047-encoded — so no template content can inject a header. The body is
 * quoted-printable, which keeps lines short and any UTF-8 text intact. Message-ID is the caller's
 * stable id, so a retried send is recognisable as the same message. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "deliver/transport.h"
#include "missive/deliver.h"

static bool header_safe_address(const char *a) {
    if (!a || !*a || !strchr(a, '@')) return false;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        if (*p <= ' ' || *p == '<' || *p == '>' || *p == 0x7f || *p == ',' || *p == ';')
            return false;
    return true;
}

static bool header_safe_token(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '<' || *p == '>' || *p == 0x7f) return false;
    return *s != '\0';
}

/* Subject: control characters → spaces; ASCII stays as is, anything else becomes a folded
 * sequence of RFC 2047 base64 encoded-words, each cut on a UTF-8 character boundary. */
static void add_subject(mv_strbuf *b, const char *subject) {
    size_t n = strlen(subject);
    char *clean = malloc(n + 1);
    if (!clean) {
        b->oom = true;
        return;
    }
    bool ascii = n <= 900;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)subject[i];
        clean[i] = (c < ' ' || c == 0x7f) ? ' ' : (char)c;
        if (c >= 0x80) ascii = false;
    }
    clean[n] = '\0';
    if (strstr(clean, "=?")) ascii = false;
    mv_strbuf_adds(b, "Subject: ");
    if (ascii) {
        mv_strbuf_adds(b, clean);
    } else {
        size_t i = 0;
        while (i < n) {
            size_t end = i + 39 < n ? i + 39 : n; /* 52 base64 chars: lines stay under 78 */
            while (end > i + 1 && end < n && ((unsigned char)clean[end] & 0xC0) == 0x80)
                end--;
            unsigned char enc[64];
            int len = EVP_EncodeBlock(enc, (const unsigned char *)clean + i, (int)(end - i));
            if (i > 0) mv_strbuf_adds(b, "\r\n ");
            mv_strbuf_adds(b, "=?UTF-8?B?");
            mv_strbuf_add(b, (const char *)enc, (size_t)len);
            mv_strbuf_adds(b, "?=");
            i = end;
        }
    }
    mv_strbuf_adds(b, "\r\n");
    free(clean);
}

/* Quoted-printable (RFC 2045 §6.7) with every kind of newline turned into CRLF. */
static void add_qp_body(mv_strbuf *b, const char *body) {
    static const char hex[] = "0123456789ABCDEF";
    size_t col = 0;
    for (const unsigned char *p = (const unsigned char *)body; *p; p++) {
        if (*p == '\r' || *p == '\n') {
            if (*p == '\r' && p[1] == '\n') p++;
            mv_strbuf_adds(b, "\r\n");
            col = 0;
            continue;
        }
        bool at_eol = p[1] == '\0' || p[1] == '\r' || p[1] == '\n';
        bool literal =
            (*p >= 33 && *p <= 126 && *p != '=') || ((*p == ' ' || *p == '\t') && !at_eol);
        char enc[3] = {'=', hex[*p >> 4], hex[*p & 15]};
        size_t w = literal ? 1 : 3;
        if (col + w > 75) {
            mv_strbuf_adds(b, "=\r\n");
            col = 0;
        }
        if (literal)
            mv_strbuf_add(b, (const char *)p, 1);
        else
            mv_strbuf_add(b, enc, 3);
        col += w;
    }
    mv_strbuf_adds(b, "\r\n");
}

static void add_date(mv_strbuf *b) {
    static const char *days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char line[64];
    snprintf(line, sizeof line, "Date: %s, %02d %s %04d %02d:%02d:%02d +0000\r\n", days[tm.tm_wday],
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    mv_strbuf_adds(b, line);
}

typedef struct reader {
    const char *data;
    size_t len, pos;
} reader;

static size_t on_read(char *buf, size_t size, size_t n, void *ud) {
    reader *r = ud;
    size_t want = size * n, left = r->len - r->pos;
    if (want > left) want = left;
    memcpy(buf, r->data + r->pos, want);
    r->pos += want;
    return want;
}

mv_code mv_smtp_send(const mv_smtp_config *cfg, const char *to, const char *subject,
                     const char *body, const char *message_id, mv_err *err) {
    if (!cfg || !cfg->url ||
        (strncasecmp(cfg->url, "smtp://", 7) != 0 && strncasecmp(cfg->url, "smtps://", 8) != 0))
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "email smtp URL must start with smtp:// or smtps://");
    if (!header_safe_address(cfg->from))
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "email from address \"%s\" is not a plain addr@domain",
                          cfg->from ? cfg->from : "");
    if (!header_safe_address(to))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "recipient address \"%.200s\" is not a plain addr@domain", to ? to : "");
    char fresh_id[37];
    if (!message_id) {
        mv_code rc = mv_id_uuid(fresh_id, err);
        if (rc) return rc;
        message_id = fresh_id;
    }
    if (!header_safe_token(message_id))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "Message-ID must be printable without spaces or <>");
    if (!mv_curl_ready()) return mv_err_set(err, MV_INTERNAL, "libcurl failed to initialise");

    char shown[512];
    mv_url_redacted(cfg->url, shown, sizeof shown);
    const char *domain = strchr(cfg->from, '@') + 1;
    mv_strbuf msg = {0};
    add_date(&msg);
    mv_strbuf_adds(&msg, "From: ");
    mv_strbuf_adds(&msg, cfg->from);
    mv_strbuf_adds(&msg, "\r\nTo: ");
    mv_strbuf_adds(&msg, to);
    mv_strbuf_adds(&msg, "\r\n");
    add_subject(&msg, subject ? subject : "");
    mv_strbuf_adds(&msg, "Message-ID: <");
    mv_strbuf_adds(&msg, message_id);
    if (!strchr(message_id, '@')) {
        mv_strbuf_adds(&msg, "@");
        mv_strbuf_adds(&msg, domain);
    }
    mv_strbuf_adds(&msg, ">\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         "Content-Transfer-Encoding: quoted-printable\r\n\r\n");
    add_qp_body(&msg, body ? body : "");
    if (msg.oom) {
        free(msg.data);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory building an email");
    }

    mv_code rc = MV_OK;
    char from_env[320], to_env[320], errbuf[CURL_ERROR_SIZE] = "";
    snprintf(from_env, sizeof from_env, "<%s>", cfg->from);
    snprintf(to_env, sizeof to_env, "<%s>", to);
    struct curl_slist *rcpt = curl_slist_append(NULL, to_env);
    CURL *h = curl_easy_init();
    if (!h || !rcpt) {
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory creating an SMTP handle");
        goto done;
    }
    reader rd = {.data = msg.data, .len = msg.len};
    curl_easy_setopt(h, CURLOPT_URL, cfg->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms
                                                        : MV_DEFAULT_WEBHOOK_CONNECT_TIMEOUT_MS));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     (long)(cfg->timeout_ms > 0 ? cfg->timeout_ms : MV_DEFAULT_WEBHOOK_TIMEOUT_MS));
    curl_easy_setopt(h, CURLOPT_MAIL_FROM, from_env);
    curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &rd);
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        long reply = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply);
        rc = mv_err_set(err, MV_UPSTREAM_FAILED, "SMTP %s: %s (last reply %ld)", shown,
                        errbuf[0] ? errbuf : curl_easy_strerror(cc), reply);
    }
done:
    curl_easy_cleanup(h);
    curl_slist_free_all(rcpt);
    free(msg.data);
    return rc;
}
