/* crypto.c — the few primitives missive needs, over OpenSSL's libcrypto: SHA-256, HMAC-SHA256,
 * OS randomness, constant-time comparison and unpadded base64url (RFC 4648 §5). */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <string.h>

#include "missive/base.h"

void mv_sha256(const void *data, size_t len, unsigned char out[32]) {
    SHA256((const unsigned char *)data, len, out);
}

void mv_hex(const unsigned char *bytes, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

void mv_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char d[32];
    mv_sha256(data, len, d);
    mv_hex(d, 32, out);
}

void mv_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                    unsigned char out[32]) {
    unsigned int out_len = 32;
    HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)data, len, out, &out_len);
}

bool mv_ct_equal(const void *a, size_t alen, const void *b, size_t blen) {
    if (alen != blen) return false;
    const unsigned char *x = a, *y = b;
    unsigned char acc = 0;
    for (size_t i = 0; i < alen; i++)
        acc |= (unsigned char)(x[i] ^ y[i]);
    return acc == 0;
}

mv_code mv_random_bytes(void *buf, size_t n, mv_err *err) {
    if (RAND_bytes((unsigned char *)buf, (int)n) != 1)
        return mv_err_set(err, MV_INTERNAL, "the OS random source failed");
    return MV_OK;
}

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t mv_b64url_len(size_t n) { return (n / 3) * 4 + (n % 3 ? n % 3 + 1 : 0); }

void mv_b64url_encode(const void *data, size_t n, char *out) {
    const unsigned char *in = data;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64url_alphabet[v >> 18];
        out[o++] = b64url_alphabet[(v >> 12) & 63];
        out[o++] = b64url_alphabet[(v >> 6) & 63];
        out[o++] = b64url_alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = b64url_alphabet[v >> 18];
        out[o++] = b64url_alphabet[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = b64url_alphabet[v >> 18];
        out[o++] = b64url_alphabet[(v >> 12) & 63];
        out[o++] = b64url_alphabet[(v >> 6) & 63];
    }
    out[o] = '\0';
}

static int b64url_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

bool mv_b64url_decode(const char *in, size_t len, unsigned char *out, size_t *out_len) {
    if (len % 4 == 1) return false;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value(in[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) return false; /* non-canonical trailing bits */
    *out_len = o;
    return true;
}
