/* saga_seal.c — saga values encrypted at rest (AES-256-GCM, the saga id as associated data) and
 * the input fingerprint. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "durable/saga_internal.h"
#include "store/db.h"

/* ---- encryption at rest ------------------------------------------------------------------ */

/* "enc:v1:" + b64url(nonce(12) | ciphertext | tag(16)), the saga id as associated data so a
 * value cannot be moved to another saga's row. Caller frees. */
static char *seal(const mv_saga_engine *e, const char *saga_id, const char *plain) {
    size_t n = strlen(plain);
    unsigned char *buf = malloc(12 + n + 16);
    char *out = NULL;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0;
    if (!buf || !c || mv_random_bytes(buf, 12, NULL) != MV_OK) goto done;
    if (EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, e->key, buf) != 1 ||
        EVP_EncryptUpdate(c, NULL, &len, (const unsigned char *)saga_id, (int)strlen(saga_id)) !=
            1 ||
        EVP_EncryptUpdate(c, buf + 12, &len, (const unsigned char *)plain, (int)n) != 1 ||
        EVP_EncryptFinal_ex(c, buf + 12 + len, &fin) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, buf + 12 + n) != 1)
        goto done;
    out = malloc(sizeof ENC_PREFIX + mv_b64url_len(12 + n + 16));
    if (!out) goto done;
    memcpy(out, ENC_PREFIX, sizeof ENC_PREFIX - 1);
    mv_b64url_encode(buf, 12 + n + 16, out + sizeof ENC_PREFIX - 1);
done:
    EVP_CIPHER_CTX_free(c);
    free(buf);
    return out;
}

/* Inverse of seal; NULL when the value was tampered with or the key is wrong. Caller frees. */
static char *open_sealed(const mv_saga_engine *e, const char *saga_id, const char *sealed) {
    const char *b = sealed + sizeof ENC_PREFIX - 1;
    size_t blen = strlen(b), n = 0;
    unsigned char *buf = malloc(blen * 3 / 4 + 1);
    char *plain = NULL;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0;
    if (!buf || !c || !mv_b64url_decode(b, blen, buf, &n) || n < 28) goto fail;
    plain = malloc(n - 28 + 1);
    if (!plain) goto fail;
    if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, e->key, buf) != 1 ||
        EVP_DecryptUpdate(c, NULL, &len, (const unsigned char *)saga_id, (int)strlen(saga_id)) !=
            1 ||
        EVP_DecryptUpdate(c, (unsigned char *)plain, &len, buf + 12, (int)(n - 28)) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, buf + n - 16) != 1 ||
        EVP_DecryptFinal_ex(c, (unsigned char *)plain + len, &fin) != 1)
        goto fail;
    plain[n - 28] = '\0';
    EVP_CIPHER_CTX_free(c);
    free(buf);
    return plain;
fail:
    EVP_CIPHER_CTX_free(c);
    free(buf);
    free(plain);
    return NULL;
}

/* A stored value → JSON (a new reference, NULL on failure). */
json_t *mv__saga_unseal_value(const mv_saga_engine *e, const char *saga_id, const char *text) {
    json_t *v = NULL;
    if (e->has_key && strncmp(text, ENC_PREFIX, sizeof ENC_PREFIX - 1) == 0) {
        char *plain = open_sealed(e, saga_id, text);
        if (plain) mv_json_parse(plain, strlen(plain), &v, NULL);
        free(plain);
    } else {
        mv_json_parse(text, strlen(text), &v, NULL);
    }
    return v;
}

/* JSON → stored text (caller frees). */
char *mv__saga_seal_value(const mv_saga_engine *e, const char *saga_id, const json_t *v) {
    char *text = mv_json_compact(v);
    if (!text || !e->has_key) return text;
    char *sealed = seal(e, saga_id, text);
    free(text);
    return sealed;
}

/* The input's fingerprint; keyed when encryption is on, so it reveals nothing about the input. */
void mv__saga_input_fingerprint(const mv_saga_engine *e, const json_t *input, char out[65]) {
    if (!e->has_key) {
        mv_json_fingerprint(input, out);
        return;
    }
    char *c = mv_json_canonical(input);
    unsigned char mac[32];
    mv_hmac_sha256(e->key, MV_SAGA_KEY_BYTES, c ? c : "", c ? strlen(c) : 0, mac);
    mv_hex(mac, 32, out);
    free(c);
}
