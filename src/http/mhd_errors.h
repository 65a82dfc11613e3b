/* http/mhd_errors.h — the answers libmicrohttpd makes on its own (a malformed chunk size, a
 * keep-alive request's malformed or oversized head, an unparsable Content-Length), in the JSON
 * error shape of every other answer.
 *
 * libmicrohttpd 0.9.75 has no option to replace those HTML pages; it queues them through
 * MHD_queue_response, called across the library boundary (its PLT), so a program may interpose
 * that symbol: src/cmd/mhd_interpose.c does, for missived and the tests, and calls
 * mv__mhd_error_response here. The server itself queues through mv__mhd_queue_response, the
 * real function, so only libmicrohttpd's own answers take the detour. */
#ifndef MISSIVE_HTTP_MHD_ERRORS_H
#define MISSIVE_HTTP_MHD_ERRORS_H

#include <microhttpd.h>

/* libmicrohttpd's MHD_queue_response, whoever interposes it. */
enum MHD_Result mv__mhd_queue_response(struct MHD_Connection *c, unsigned int status,
                                       struct MHD_Response *r);

/* A JSON error response (Content-Type, X-Request-Id) for an error status libmicrohttpd queues on
 * its own, the message chosen by what it found wrong; NULL for a status below 400 or when out
 * of memory. The caller destroys it. */
struct MHD_Response *mv__mhd_error_response(struct MHD_Connection *c, unsigned int status);

#endif
