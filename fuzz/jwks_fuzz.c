/* jwks_fuzz.c — libFuzzer harness for the key sets a JWKS URL may answer (http/jwk.c): any
 * bytes, parsed as JSON and then as a JWKS, must give a usable set or a clear error, never a
 * crash or a leak; every key of an accepted set is then used once to verify a junk signature
 * with each algorithm (which must fail). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/jwk.h"
#include "missive/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *doc = NULL;
    if (mv_json_parse((const char *)data, size, &doc, NULL) != MV_OK) return 0;
    mv_jwks *set = NULL;
    mv_err err = {0};
    mv_code rc = mv_jwks_parse(doc, &set, &err);
    if (rc != MV_OK && (set || !err.message[0])) abort();
    if (rc == MV_OK) {
        if (mv_jwks_count(set) == 0) abort();
        const mv_jwk *key = mv_jwks_find(set, NULL);
        unsigned char sig[64] = {1};
        for (int alg = 0; key && alg < MV_JWT_NONE_; alg++)
            if (mv_jwk_verify(key, (mv_jwt_alg)alg, "a.b", 3, sig, sizeof sig)) abort();
    }
    mv_jwks_release(set);
    json_decref(doc);
    return 0;
}
