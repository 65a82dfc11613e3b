/* cmd/tls.h — the daemon's HTTPS certificate and key ("tls": {"certFile", "keyFile"}), held so
 * that a reload can replace them while connections are open.
 *
 * Credentials are loaded and checked (the key must match the certificate) before they are used;
 * the server asks for the current ones at each TLS handshake through mv_daemon_tls_callback. A
 * replaced set is kept until mv_daemon_tls_free, because a session may still refer to it. */
#ifndef MISSIVE_CMD_TLS_H
#define MISSIVE_CMD_TLS_H

#include <stdbool.h>

#include "missive/error.h"

typedef struct mv_daemon_tls mv_daemon_tls;
typedef struct mv_daemon_tls_creds mv_daemon_tls_creds;

/* Reads a PEM certificate chain and a PEM private key. Errors (MV_INVALID_CONFIG) name the file
 * and what is wrong with it; a key that does not belong to the certificate is one. *out owned by
 * the caller until given to mv_daemon_tls_use. */
mv_code mv_daemon_tls_creds_load(const char *cert_file, const char *key_file,
                                 mv_daemon_tls_creds **out, mv_err *err);
void mv_daemon_tls_creds_free(mv_daemon_tls_creds *creds); /* NULL-safe */

/* True when libmicrohttpd was built with TLS and the certificate callback (Debian's is). */
bool mv_daemon_tls_available(void);
/* The holder, starting with creds (taken). One per process: the handshake callback has no
 * context argument. NULL when out of memory (creds freed). */
mv_daemon_tls *mv_daemon_tls_new(mv_daemon_tls_creds *creds);
/* From the next handshake on, creds (taken) are served. */
void mv_daemon_tls_use(mv_daemon_tls *tls, mv_daemon_tls_creds *creds);
/* For mv_http_server_options.tls_cert_callback. */
void *mv_daemon_tls_callback(void);
void mv_daemon_tls_free(mv_daemon_tls *tls); /* NULL-safe, after the server stopped */

#endif
