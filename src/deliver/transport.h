/* deliver/transport.h — what webhook.c and smtp.c share: libcurl's one-time global setup and
 * URL redaction for error messages (credentials in a URL never reach a log). */
#ifndef MISSIVE_DELIVER_TRANSPORT_H
#define MISSIVE_DELIVER_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

/* Runs curl_global_init once per process (thread-safe); false if it failed. */
bool mv_curl_ready(void);
/* Copies url into out without any "user:password@" part. */
void mv_url_redacted(const char *url, char *out, size_t size);

#endif
