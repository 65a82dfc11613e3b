/* mhd_errors.c — what to answer instead of libmicrohttpd's own HTML error pages.
 *
 * libmicrohttpd queues such an answer once it has given up on a request: its status says which
 * limit or rule was broken, and the connection says how far the request got (a head that was
 * complete means the body or a header's value was at fault). That is enough to name the problem
 * as the gate (gate.c) and the dispatch name theirs; nothing of the request is echoed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#include "http/http_server.h"
#include "http/mhd_errors.h"
#include "missive/base.h"

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

static queue_fn real_queue;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve(void) {
    /* the next definition after the caller's object: libmicrohttpd's, past any interposer */
    *(void **)&real_queue = dlsym(RTLD_NEXT, "MHD_queue_response");
}

enum MHD_Result mv__mhd_queue_response(struct MHD_Connection *c, unsigned int status,
                                       struct MHD_Response *r) {
    pthread_once(&resolve_once, resolve);
    return real_queue ? real_queue(c, status, r) : MHD_NO;
}

/* What a 400 is about: the head, or (once the head was read) the body's framing. */
static const char *bad_request(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (!ci || ci->header_size == 0) return "malformed request line or header field";
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    return te && strcasecmp(te, "chunked") == 0 ? "malformed chunked request body"
                                                : "invalid Content-Length";
}

struct MHD_Response *mv__mhd_error_response(struct MHD_Connection *c, unsigned int status) {
    if (status < 400) return NULL;
    const char *code = "invalid_argument", *msg = "malformed request";
    char big[64];
    switch (status) {
    case 400: msg = bad_request(c); break;
    case 413:
        code = "payload_too_large";
        snprintf(big, sizeof big, "request body is larger than %d bytes", MV_HTTP_MAX_BODY);
        msg = big;
        break;
    case 414: msg = "request target is too long"; break;
    case 431: msg = "request header fields are too large"; break;
    case 505: msg = "only HTTP/1.0 and HTTP/1.1 are supported"; break;
    default:
        if (status >= 500) code = "internal", msg = "internal error";
    }
    char body[256];
    int n =
        snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, msg);
    struct MHD_Response *r =
        MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
    char id[37];
    if (r && (MHD_add_response_header(r, "Content-Type", "application/json") != MHD_YES ||
              (mv_id_uuid(id, NULL) == MV_OK &&
               MHD_add_response_header(r, "X-Request-Id", id) != MHD_YES))) {
        MHD_destroy_response(r);
        r = NULL;
    }
    return r;
}
