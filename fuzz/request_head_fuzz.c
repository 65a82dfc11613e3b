/* request_head_fuzz.c — libFuzzer harness for the first parser a client's bytes meet: the gate's
 * check of a request head (request line and header fields, http/gate.c) and the error response it
 * writes. Whatever the bytes, the check answers 0 or one of the statuses the gate uses with a
 * message, a head it passes has a request line of three parts ending in HTTP/1.x, and every error
 * response is complete HTTP with a Content-Length that matches its JSON body. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/gate.h"
#include "http/http_server.h"

static void check_response(int status, const char *msg) {
    char out[1024];
    size_t n = mv__gate_error_response(status, msg, out, sizeof out);
    const char *body = strstr(out, "\r\n\r\n");
    const char *cl = strstr(out, "Content-Length: ");
    if (!n || !body || !cl || strncmp(out, "HTTP/1.1 ", 9) != 0) abort();
    body += 4;
    if ((size_t)atoi(cl + 16) != strlen(body)) abort();
    json_t *j = json_loads(body, 0, NULL);
    if (!j || !json_is_string(json_object_get(json_object_get(j, "error"), "code"))) abort();
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char msg[128] = "";
    int status = mv__gate_check_head((const char *)data, size, MV_HTTP_MAX_TARGET, msg, sizeof msg);
    switch (status) {
    case 0: {
        const char *eol = memchr(data, '\n', size);
        if (!eol) abort();
        size_t line = (size_t)(eol - (const char *)data);
        if (line > 0 && eol[-1] == '\r') line--;
        const char *sp = memchr(data, ' ', line);
        if (!sp || line < 8 || memcmp((const char *)data + line - 8, "HTTP/1.", 7) != 0) abort();
        break;
    }
    case 400:
    case 414:
    case 501:
    case 505:
        if (!msg[0]) abort();
        check_response(status, msg);
        break;
    default: abort();
    }
    return 0;
}
