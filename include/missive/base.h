/* missive/base.h — small building blocks every layer uses: clock, ids, crypto, JSON, validation.
 *
 * Nothing here touches global mutable state except the id counter and the OS random source;
 * time comes from an injectable clock so tests move time instead of sleeping. */
#ifndef MISSIVE_BASE_H
#define MISSIVE_BASE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "missive/defaults.h"
#include "missive/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- clock ------------------------------------------------------------------------------- */

/* A clock returns milliseconds since the epoch. A NULL mv_clock * means the real clock. */
typedef struct mv_clock {
    int64_t (*now)(void *ctx);
    void *ctx;
} mv_clock;

/* Wall-clock milliseconds since the epoch. */
int64_t mv_now_ms(void);
/* clock ? clock->now(clock->ctx) : mv_now_ms(). */
int64_t mv_clock_now(const mv_clock *clock);
/* Sleeps ms milliseconds (real time). */
void mv_sleep_ms(int64_t ms);

/* A settable clock for tests: mv_clock c = mv_manual_clock(&t); then change t. */
mv_clock mv_manual_clock(int64_t *now_ms);

/* ---- ids --------------------------------------------------------------------------------- */

/* Message id: 24 lowercase hex chars (4-byte seconds, 5 random bytes per process, 3-byte
 * counter), time-ordered. out must hold 25 bytes. Thread-safe. */
void mv_id_message(char out[25]);
/* Random UUID v4 from the OS source, lowercase with dashes. out must hold 37 bytes. */
mv_code mv_id_uuid(char out[37], mv_err *err);
/* UUID v7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. Ids drawn later sort
 * after earlier ones (to the millisecond), so an index on them grows at its end. */
mv_code mv_id_uuid7(char out[37], mv_err *err);

/* ---- crypto (OpenSSL libcrypto) ---------------------------------------------------------- */

/* SHA-256 of len bytes into out (raw digest). */
void mv_sha256(const void *data, size_t len, unsigned char out[32]);
/* Lowercase hex SHA-256; out must hold 65 bytes. */
void mv_sha256_hex(const void *data, size_t len, char out[65]);
void mv_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                    unsigned char out[32]);
/* Lowercase hex of n bytes into out (2n+1 bytes). */
void mv_hex(const unsigned char *bytes, size_t n, char *out);
/* Constant-time equality of two byte strings (time depends only on the lengths). */
bool mv_ct_equal(const void *a, size_t alen, const void *b, size_t blen);
/* Fills buf with n bytes from the OS random source. */
mv_code mv_random_bytes(void *buf, size_t n, mv_err *err);
/* base64url without padding. Encoded length for n bytes: mv_b64url_len(n) (without NUL).
 * out must hold mv_b64url_len(n) + 1 bytes. */
size_t mv_b64url_len(size_t n);
void mv_b64url_encode(const void *data, size_t n, char *out);
/* Decodes base64url (no padding accepted; rejects any other character and impossible lengths).
 * out must hold at least len*3/4+1 bytes. Returns false on malformed input. */
bool mv_b64url_decode(const char *in, size_t len, unsigned char *out, size_t *out_len);

/* ---- JSON helpers (jansson) ------------------------------------------------------------- */

/* Strict parse of a whole buffer: one JSON value (any type), UTF-8, no trailing data.
 * On error: MV_INVALID_JSON with "invalid JSON at line L, column C: <reason>".
 * *out is a new reference owned by the caller. */
mv_code mv_json_parse(const char *buf, size_t len, json_t **out, mv_err *err);
/* Reads and parses a file; errors name the path. */
mv_code mv_json_load_file(const char *path, json_t **out, mv_err *err);
/* Canonical serialisation: compact, object keys sorted, no trailing newline. Caller frees. NULL
 * on allocation failure. */
char *mv_json_canonical(const json_t *v);
/* SHA-256 hex of the canonical serialisation (fingerprints, digests). */
void mv_json_fingerprint(const json_t *v, char out[65]);
/* Compact serialisation with keys in insertion order. Caller frees. */
char *mv_json_compact(const json_t *v);
/* Object member as a string, or NULL when absent or not a string. */
const char *mv_json_str(const json_t *obj, const char *key);
/* Dotted path lookup ("a.b.c") through objects (own members only) and arrays (numeric
 * segments). Borrowed reference or NULL. */
json_t *mv_json_path(const json_t *root, const char *path);

/* ---- validation -------------------------------------------------------------------------- */

/* Printable ASCII 0x21..0x7E, length 1..max. */
bool mv_valid_token(const char *s, size_t max);
/* [A-Za-z0-9_.-]{1,128} — template codes. */
bool mv_valid_template_cd(const char *s);
/* [A-Za-z0-9_-]{1,128} — action codes. */
bool mv_valid_action_cd(const char *s);
/* ^[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*$ — capability ids. */
bool mv_valid_capability(const char *s);
/* ^[a-z][a-z0-9_.-]{0,63}$ — error codes. */
bool mv_valid_error_code(const char *s);
/* ^[0-9a-f]{64}$ — SHA-256 hex digests. */
bool mv_valid_digest(const char *s);
/* 24 hex characters (either case) — message ids. */
bool mv_valid_message_id(const char *s);
/* 8-4-4-4-12 hex UUID (either case). */
bool mv_valid_uuid(const char *s);

/* The one length limit for what names a party or a scope — user ids (a message's fromUser and
 * toUser, X-User-Id, the JWT subject), role names (toRoles, X-User-Roles, adminRoles), tenant
 * ids — in bytes, after trimming. Every column that holds one is indexed, and an index entry
 * must stay far below PostgreSQL's B-tree limit (about 2.7 kB), so the same value is accepted
 * or refused on both stores. Codes (templateCd, actionCd), saga ids and client request ids have
 * their own, shorter limits (128). */
#define MV_MAX_ID_BYTES 255
/* MV_OK when len (an id's length in bytes) is at most MV_MAX_ID_BYTES, else MV_INVALID_ARGUMENT
 * "<field> must be at most 255 bytes (it has N)"; field names what the caller sent
 * ("toRoles[3]", "X-User-Id"). */
mv_code mv_check_id_length(const char *field, size_t len, mv_err *err);

#ifdef __cplusplus
}
#endif

#endif
