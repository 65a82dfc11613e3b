/* tls.c — HTTPS credentials for libmicrohttpd through GnuTLS's certificate callback.
 *
 * libmicrohttpd reads MHD_OPTION_HTTPS_MEM_CERT/KEY once, when the daemon starts; to change the
 * certificate without restarting (and so without closing a connection), the server is given
 * MHD_OPTION_HTTPS_CERT_CALLBACK instead, and each handshake asks this file for the current
 * credentials. They are one atomic pointer: a reload loads and checks a new set, then swaps it
 * in; a handshake reads the pointer once. GnuTLS does not copy what the callback hands out, and a
 * session may keep using it, so a replaced set is kept until the holder is freed (a few
 * kilobytes per reload). */
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cmd/tls.h"

#define MAX_CHAIN 16

struct mv_daemon_tls_creds {
    mv_daemon_tls_creds *next_retired;
    gnutls_pcert_st chain[MAX_CHAIN];
    unsigned nchain;
    gnutls_privkey_t key;
};

struct mv_daemon_tls {
    mv_daemon_tls_creds *retired; /* the main thread only (reloads) */
};

static _Atomic(mv_daemon_tls_creds *) current;

void mv_daemon_tls_creds_free(mv_daemon_tls_creds *c) {
    if (!c) return;
    for (unsigned i = 0; i < c->nchain; i++)
        gnutls_pcert_deinit(&c->chain[i]);
    if (c->key) gnutls_privkey_deinit(c->key);
    free(c);
}

/* The pair as GnuTLS would take it for a server: this is where a key that belongs to another
 * certificate is caught. */
static mv_code check_pair(const gnutls_datum_t *cert, const gnutls_datum_t *key,
                          const char *cert_file, const char *key_file, mv_err *err) {
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    int g = gnutls_certificate_set_x509_key_mem2(cred, cert, key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (g >= 0) return MV_OK;
    return mv_err_set(err, MV_INVALID_CONFIG,
                      "\"tls\": %s and %s do not form a certificate and its key: %s", cert_file,
                      key_file, gnutls_strerror(g));
}

mv_code mv_daemon_tls_creds_load(const char *cert_file, const char *key_file,
                                 mv_daemon_tls_creds **out, mv_err *err) {
    *out = NULL;
    gnutls_datum_t cert = {0}, key = {0};
    mv_code rc = MV_OK;
    mv_daemon_tls_creds *c = calloc(1, sizeof *c);
    if (!c) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (gnutls_load_file(cert_file, &cert) < 0) {
        rc = mv_err_set(err, MV_INVALID_CONFIG, "\"tls.certFile\": cannot read %s", cert_file);
        goto done;
    }
    if (gnutls_load_file(key_file, &key) < 0) {
        rc = mv_err_set(err, MV_INVALID_CONFIG, "\"tls.keyFile\": cannot read %s", key_file);
        goto done;
    }
    if ((rc = check_pair(&cert, &key, cert_file, key_file, err)) != MV_OK) goto done;
    c->nchain = MAX_CHAIN;
    int g = gnutls_pcert_list_import_x509_raw(c->chain, &c->nchain, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (g < 0) {
        c->nchain = 0;
        rc = mv_err_set(err, MV_INVALID_CONFIG, "\"tls.certFile\": %s: %s", cert_file,
                        gnutls_strerror(g));
        goto done;
    }
    if (gnutls_privkey_init(&c->key) < 0 ||
        (g = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0)
        rc = mv_err_set(err, MV_INVALID_CONFIG, "\"tls.keyFile\": %s: %s", key_file,
                        gnutls_strerror(g));
done:
    gnutls_free(cert.data);
    if (key.data) gnutls_memset(key.data, 0, key.size);
    gnutls_free(key.data);
    if (rc == MV_OK)
        *out = c;
    else
        mv_daemon_tls_creds_free(c);
    return rc;
}

bool mv_daemon_tls_available(void) {
    return MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) == MHD_YES;
}

mv_daemon_tls *mv_daemon_tls_new(mv_daemon_tls_creds *creds) {
    mv_daemon_tls *t = calloc(1, sizeof *t);
    if (!t) {
        mv_daemon_tls_creds_free(creds);
        return NULL;
    }
    mv_daemon_tls_use(t, creds);
    return t;
}

void mv_daemon_tls_use(mv_daemon_tls *t, mv_daemon_tls_creds *creds) {
    mv_daemon_tls_creds *old = atomic_exchange(&current, creds);
    if (old) {
        old->next_retired = t->retired;
        t->retired = old;
    }
}

static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                    gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey) {
    (void)session, (void)req_ca_dn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    mv_daemon_tls_creds *c = atomic_load(&current);
    if (!c) return -1;
    *pcert = c->chain;
    *pcert_length = c->nchain;
    *pkey = c->key;
    return 0;
}

void *mv_daemon_tls_callback(void) {
    static gnutls_certificate_retrieve_function2 *const fn = retrieve;
    return (void *)fn;
}

void mv_daemon_tls_free(mv_daemon_tls *t) {
    if (!t) return;
    mv_daemon_tls_creds_free(atomic_exchange(&current, NULL));
    for (mv_daemon_tls_creds *c = t->retired, *next; c; c = next) {
        next = c->next_retired;
        mv_daemon_tls_creds_free(c);
    }
    free(t);
}
