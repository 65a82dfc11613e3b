/* webhook_failure.c — a failed call in words a client may read (a message's lastFailure).
 *
 * The far side's own {"error": {"code", "message"}} is what an operator wants to see, but it is
 * text from outside: it is cut to a bounded length, control characters become spaces and
 * anything shaped like a URL (scheme://…) is replaced, so a handler that echoes its own address
 * cannot leak it. Without such a body the words come from the status or the transport failure,
 * never from libcurl's text, which names hosts and ports. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "missive/deliver.h"

#define MAX_WORDS 200

static bool snake_case(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 64 || !islower((unsigned char)s[0])) return false;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '_')
            return false;
    return true;
}

/* Start of a "scheme://" at s (letters, digits, + - . before "://"), else 0. */
static size_t url_scheme_len(const char *s) {
    size_t i = 0;
    if (!isalpha((unsigned char)s[0])) return 0;
    while (isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')
        i++;
    return strncmp(s + i, "://", 3) == 0 ? i + 3 : 0;
}

/* Copies text into out (size > 0) without control characters or URLs, at most MAX_WORDS bytes,
 * never cutting a UTF-8 sequence. */
static void clean_words(const char *text, char *out, size_t size) {
    size_t o = 0, limit = size - 1 < MAX_WORDS ? size - 1 : MAX_WORDS;
    const char *p = text;
    while (*p && o < limit) {
        bool word_start = p == text || isspace((unsigned char)p[-1]) || strchr("(<\"'[", p[-1]);
        size_t scheme = word_start ? url_scheme_len(p) : 0;
        if (scheme) {
            const char *tag = "[url]";
            if (o + strlen(tag) > limit) break;
            memcpy(out + o, tag, strlen(tag));
            o += strlen(tag);
            p += scheme;
            while (*p && !isspace((unsigned char)*p) && !strchr(")>\"']", *p))
                p++;
            continue;
        }
        unsigned char c = (unsigned char)*p;
        size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (o + n > limit) break;
        for (size_t k = 0; k < n; k++) {
            if (!p[k]) return (void)(out[o] = '\0');
            out[o + k] = c < 0x20 || c == 0x7F ? ' ' : p[k];
        }
        o += n;
        p += n;
    }
    out[o] = '\0';
}

void mv_webhook_public_text(const char *text, char *out, size_t size) {
    if (size == 0) return;
    clean_words(text ? text : "", out, size);
}

void mv_webhook_failure_words(const mv_webhook_response *res, char code[65], char message[256]) {
    const json_t *error = json_object_get(res ? res->json : NULL, "error");
    const char *their_code = json_string_value(json_object_get(error, "code"));
    const char *their_words = json_string_value(json_object_get(error, "message"));
    if (!their_words && json_is_string(error)) their_words = json_string_value(error);
    long status = res ? res->status : 0;
    const char *failure = res ? res->failure : "no answer";
    if (their_words && *their_words && status > 0) {
        clean_words(their_words, message, 256);
    } else if (failure) {
        snprintf(message, 256, "%s", failure);
    } else {
        snprintf(message, 256, "HTTP %ld", status);
    }
    if (snake_case(their_code) && status > 0)
        snprintf(code, 65, "%s", their_code);
    else if (!failure)
        snprintf(code, 65, "upstream_status");
    else if (strcmp(failure, "timed out") == 0)
        snprintf(code, 65, "upstream_timeout");
    else if (strcmp(failure, "connection refused") == 0 || strcmp(failure, "not sent") == 0)
        snprintf(code, 65, "upstream_unreachable");
    else
        snprintf(code, 65, "upstream_no_answer");
}
