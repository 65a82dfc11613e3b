/* reach_fuzz.c — libFuzzer harness for the parsers of untrusted text in reach: an action-link
 * token (any bytes verify as a link or fail with MV_LINK_INVALID, and a verified link's fields
 * are NUL-terminated within their buffers), an Accept-Language value (the pick is NULL or one of
 * the rendered tags), and a preferences body (MV_OK or MV_INVALID_ARGUMENT, never anything else). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "missive/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mv_reach *reach;
    static json_t *rendered;
    if (!reach) {
        json_t *ch = json_pack("{s:{s:s}}", "sms", "webhook", "http://127.0.0.1:9/sms");
        if (mv_reach_new(ch, NULL, true, &reach, NULL) != MV_OK ||
            mv_reach_set_links(reach, "https://m.example", "0123456789abcdef0123456789abcdef", 32,
                               60000, NULL) != MV_OK)
            abort();
        json_decref(ch);
        rendered = json_pack("{s:{},s:{},s:{}}", "de", "de-AT", "pt-BR");
    }
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    mv_link link;
    mv_err err = {0};
    mv_code rc = mv_link_verify(reach, text, mv_now_ms(), &link, &err);
    if (rc != MV_OK && rc != MV_LINK_INVALID) abort();
    if (rc == MV_OK && (strnlen(link.user_id, sizeof link.user_id) == sizeof link.user_id ||
                        strnlen(link.tenant, sizeof link.tenant) == sizeof link.tenant))
        abort();
    const char *tag = mv__locale_pick(rendered, text);
    if (tag && !json_object_get(rendered, tag)) abort();
    json_t *body = json_loadb(text, size, JSON_DECODE_ANY, NULL);
    if (body) {
        rc = mv_preferences_check(reach, body, "", &err);
        if (rc != MV_OK && rc != MV_INVALID_ARGUMENT) abort();
        json_decref(body);
    }
    free(text);
    return 0;
}
