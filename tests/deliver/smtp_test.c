/* smtp_test.c — mv_smtp_send against smtp_sink: envelope, headers, encodings that survive any
 * content, header injection refused, failing servers reported. */
#include <openssl/evp.h>

#include "missive/deliver.h"
#include "support/smtp_sink.h"
#include "test.h"

/* Decodes quoted-printable (soft breaks removed) and turns CRLF into LF. */
static char *qp_decode(const char *in) {
    char *out = malloc(strlen(in) + 1), *o = out;
    for (const char *p = in; *p;) {
        if (p[0] == '=' && p[1] == '\r' && p[2] == '\n') {
            p += 3;
        } else if (p[0] == '=' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            p += 3;
        } else if (p[0] == '\r' && p[1] == '\n') {
            *o++ = '\n';
            p += 2;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static const char *body_of(const smtp_sink_message *m) {
    const char *b = strstr(m->data, "\r\n\r\n");
    return b ? b + 4 : "";
}

TEST(message_reaches_the_server_with_envelope_and_headers) {
    smtp_sink *s = smtp_sink_start();
    REQUIRE(s);
    mv_smtp_config cfg = {.url = smtp_sink_url(s), .from = "noreply@example.com"};
    mv_err err = {0};
    CHECK_CODE(
        mv_smtp_send(&cfg, "ana@example.org", "Ana wants your flat", "Hello Bob", "row-1", &err),
        MV_OK, &err);
    CHECK_INT(smtp_sink_accepted(s), 1);
    smtp_sink_message m;
    REQUIRE(smtp_sink_get(s, 0, &m));
    CHECK_STR(m.from, "noreply@example.com");
    REQUIRE(m.nto == 1);
    CHECK_STR(m.to[0], "ana@example.org");
    const char *names[] = {"From", "To", "Subject", "Message-ID", "Content-Type", "MIME-Version"};
    const char *values[] = {"noreply@example.com",       "ana@example.org",
                            "Ana wants your flat",       "<row-1@example.com>",
                            "text/plain; charset=utf-8", "1.0"};
    for (int i = 0; i < 6; i++) {
        char *v = smtp_sink_header(&m, names[i]);
        CHECK_STR(v, values[i]);
        free(v);
    }
    char *date = smtp_sink_header(&m, "Date");
    CHECK(date && strstr(date, "+0000") && strlen(date) >= 29);
    free(date);
    char *body = qp_decode(body_of(&m));
    CHECK_STR(body, "Hello Bob\n");
    free(body);
    smtp_sink_message_free(&m);
    smtp_sink_stop(s);
}

TEST(utf8_subject_is_encoded_and_any_body_survives_the_trip) {
    smtp_sink *s = smtp_sink_start();
    REQUIRE(s);
    mv_smtp_config cfg = {.url = smtp_sink_url(s), .from = "noreply@example.com"};
    char long_line[400];
    memset(long_line, 'y', sizeof long_line - 1);
    long_line[sizeof long_line - 1] = '\0';
    char text[1200];
    snprintf(text, sizeof text,
             ".leading dot\n..two\n.\nünïcödé = equals \ntrailing space \t\n%s\nend", long_line);
    const char *subject =
        "Réservation confirmée pour l'appartement « Belle Vue » — merci beaucoup !";
    mv_err err = {0};
    CHECK_CODE(mv_smtp_send(&cfg, "bob@example.org", subject, text, "x@y", &err), MV_OK, &err);
    smtp_sink_message m;
    REQUIRE(smtp_sink_get(s, 0, &m));
    /* every line of the wire form is short, even the 399-character one */
    for (const char *p = m.data; *p;) {
        const char *eol = strstr(p, "\r\n");
        REQUIRE(eol);
        CHECK(eol - p <= 78);
        p = eol + 2;
    }
    char *got = qp_decode(body_of(&m));
    char expect[1300];
    snprintf(expect, sizeof expect, "%s\n", text);
    CHECK_STR(got, expect);
    free(got);
    char *subj = smtp_sink_header(&m, "Subject");
    REQUIRE(subj);
    /* decode each encoded-word and join */
    char joined[512] = "";
    for (char *w = strstr(subj, "=?UTF-8?B?"); w; w = strstr(w, "=?UTF-8?B?")) {
        w += 10;
        char *end = strstr(w, "?=");
        REQUIRE(end);
        unsigned char dec[128];
        int n = EVP_DecodeBlock(dec, (unsigned char *)w, (int)(end - w));
        if (end[-1] == '=') n--; /* EVP_DecodeBlock counts padding as zero bytes */
        if (end[-2] == '=') n--;
        strncat(joined, (char *)dec, (size_t)n);
        w = end + 2;
    }
    CHECK_STR(joined, subject);
    free(subj);
    char *mid = smtp_sink_header(&m, "Message-ID");
    CHECK_STR(mid, "<x@y>");
    free(mid);
    smtp_sink_message_free(&m);
    smtp_sink_stop(s);
}

TEST(header_injection_is_refused_or_neutralised) {
    smtp_sink *s = smtp_sink_start();
    REQUIRE(s);
    mv_smtp_config cfg = {.url = smtp_sink_url(s), .from = "noreply@example.com"};
    mv_err err = {0};
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c\r\nBcc: evil@x.y", "t", "b", NULL, &err),
               MV_INVALID_ARGUMENT, &err);
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c, evil@x.y", "t", "b", NULL, &err), MV_INVALID_ARGUMENT,
               &err);
    CHECK_CODE(mv_smtp_send(&cfg, "no-at-sign", "t", "b", NULL, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c", "t", "b", "bad id>", &err), MV_INVALID_ARGUMENT, &err);
    CHECK_INT(smtp_sink_received(s), 0);
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c", "Hi\r\nBcc: evil@x.y", "b", NULL, &err), MV_OK, &err);
    smtp_sink_message m;
    REQUIRE(smtp_sink_get(s, 0, &m));
    char *bcc = smtp_sink_header(&m, "Bcc");
    CHECK(bcc == NULL);
    free(bcc);
    char *subj = smtp_sink_header(&m, "Subject");
    CHECK_STR(subj, "Hi  Bcc: evil@x.y");
    free(subj);
    CHECK_INT(m.nto, 1);
    smtp_sink_message_free(&m);
    mv_smtp_config bad = {.url = "http://x", .from = "a@b"};
    CHECK_CODE(mv_smtp_send(&bad, "a@b.c", "t", "b", NULL, &err), MV_INVALID_CONFIG, &err);
    smtp_sink_stop(s);
}

TEST(failing_or_refusing_server_is_upstream_failed_with_the_reply) {
    smtp_sink *s = smtp_sink_start();
    REQUIRE(s);
    mv_smtp_config cfg = {.url = smtp_sink_url(s), .from = "noreply@example.com"};
    mv_err err = {0};
    smtp_sink_set_mode(s, SMTP_SINK_FAIL_DATA_451);
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c", "t", "b", NULL, &err), MV_UPSTREAM_FAILED, &err);
    CHECK(strstr(err.message, "451") != NULL);
    CHECK(strstr(err.message, smtp_sink_url(s)) != NULL);
    smtp_sink_set_mode(s, SMTP_SINK_FAIL_DATA_554);
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c", "t", "b", NULL, &err), MV_UPSTREAM_FAILED, &err);
    CHECK(strstr(err.message, "554") != NULL);
    smtp_sink_set_mode(s, SMTP_SINK_REFUSE);
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c", "t", "b", NULL, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_INT(smtp_sink_received(s), 2);
    CHECK_INT(smtp_sink_accepted(s), 0);
    char url[64];
    mv_strlcpy(url, smtp_sink_url(s), sizeof url);
    smtp_sink_stop(s);
    cfg.url = url;
    CHECK_CODE(mv_smtp_send(&cfg, "a@b.c", "t", "b", NULL, &err), MV_UPSTREAM_FAILED, &err);
}

TEST(credentials_in_the_smtp_url_never_reach_the_error) {
    smtp_sink *s = smtp_sink_start();
    REQUIRE(s);
    char url[128];
    snprintf(url, sizeof url, "smtp://user:topsecret@127.0.0.1:%d", smtp_sink_port(s));
    smtp_sink_set_mode(s, SMTP_SINK_FAIL_DATA_451);
    mv_smtp_config cfg = {.url = url, .from = "noreply@example.com"};
    mv_err err = {0};
    CHECK(mv_smtp_send(&cfg, "a@b.c", "t", "b", NULL, &err) != MV_OK);
    CHECK(strstr(err.message, "topsecret") == NULL);
    smtp_sink_stop(s);
}

int main(void) {
    return RUN_TESTS(message_reaches_the_server_with_envelope_and_headers,
                     utf8_subject_is_encoded_and_any_body_survives_the_trip,
                     header_injection_is_refused_or_neutralised,
                     failing_or_refusing_server_is_upstream_failed_with_the_reply,
                     credentials_in_the_smtp_url_never_reach_the_error);
}
