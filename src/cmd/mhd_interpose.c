/* mhd_interpose.c — libmicrohttpd's own error answers in the JSON error shape (a last resort,
 * on purpose).
 *
 * libmicrohttpd 0.9.75 answers a malformed chunk size, a keep-alive request's malformed head, an
 * unparsable Content-Length with a built-in HTML page, before any callback of
 * ours runs, and offers no option to replace it. It queues that page through
 * MHD_queue_response, which it calls through its PLT: a definition in the program comes first.
 * This is that definition. Every call that reaches it is libmicrohttpd's own (the server queues
 * through mv__mhd_queue_response, which goes straight to libmicrohttpd), and an error status is
 * answered with the JSON body instead of the page. It lives in the programs' objects, not in
 * libmissive, because only a program may claim another library's name; a program without it
 * keeps libmicrohttpd's pages. */
#include "http/mhd_errors.h"

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response) {
    struct MHD_Response *json = mv__mhd_error_response(connection, status_code);
    enum MHD_Result rc = mv__mhd_queue_response(connection, status_code, json ? json : response);
    if (json) MHD_destroy_response(json); /* queued: libmicrohttpd holds its own reference */
    return rc;
}
