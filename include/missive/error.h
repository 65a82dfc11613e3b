/* missive/error.h — one error enum for the whole library.
 *
 * Every fallible function returns an mv_code (MV_OK == 0) and, when given a non-NULL mv_err *,
 * fills it with the code, a message a user can act on, and the structured fields some errors
 * carry (attempt id, approval id, saga id, ...). The table behind mv_code_name() and
 * mv_code_http_status() is the single mapping used by the daemon and the CLI. */
#ifndef MISSIVE_ERROR_H
#define MISSIVE_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, "snake_name", http_status) — the order is the numbering; never reorder. */
#define MV_CODE_TABLE(X)                                                                           \
    X(MV_OK, "ok", 200)                                                                            \
    X(MV_INVALID_ARGUMENT, "invalid_argument", 400)                                                \
    X(MV_INVALID_JSON, "invalid_json", 400)                                                        \
    X(MV_INVALID_CLIENT_REQUEST_ID, "invalid_client_request_id", 400)                              \
    X(MV_INVALID_PAGINATION, "invalid_pagination", 400)                                            \
    X(MV_APPROVAL_TOKEN_INVALID, "approval_token_invalid", 400)                                    \
    X(MV_UNAUTHENTICATED, "unauthenticated", 401)                                                  \
    X(MV_INVALID_USER, "unauthenticated", 401)                                                     \
    X(MV_ACTION_NOT_ALLOWED, "action_not_allowed", 403)                                            \
    X(MV_APPROVAL_BINDING, "approval_binding", 403)                                                \
    X(MV_APPROVAL_DENIED, "approval_denied", 403)                                                  \
    X(MV_FORBIDDEN, "forbidden", 403)                                                              \
    X(MV_NOT_FOUND, "not_found", 404)                                                              \
    X(MV_MESSAGE_NOT_FOUND, "message_not_found", 404)                                              \
    X(MV_TEMPLATE_NOT_FOUND, "template_not_found", 404)                                            \
    X(MV_ACTION_NOT_FOUND, "action_not_found", 404)                                                \
    X(MV_APPROVAL_NOT_FOUND, "approval_not_found", 404)                                            \
    X(MV_SAGA_NOT_FOUND, "saga_not_found", 404)                                                    \
    X(MV_SAGA_DEFINITION_NOT_FOUND, "saga_definition_not_found", 404)                              \
    X(MV_ACTION_CONFLICT, "action_conflict", 409)                                                  \
    X(MV_ACTION_RETRYABLE, "action_retryable", 409)                                                \
    X(MV_ACTION_COMPENSATED, "action_compensated", 409)                                            \
    X(MV_ACTION_NEEDS_REVIEW, "action_needs_review", 409)                                          \
    X(MV_CLIENT_REQUEST_PENDING, "client_request_pending", 409)                                    \
    X(MV_CLIENT_REQUEST_FAILED, "client_request_failed", 409)                                      \
    X(MV_APPROVAL_PENDING, "approval_pending", 409)                                                \
    X(MV_APPROVAL_TOKEN_REPLAY, "approval_token_replay", 409)                                      \
    X(MV_APPROVAL_TOKEN_EXPIRED, "approval_token_expired", 409)                                    \
    X(MV_APPROVAL_DECISION_REJECTED, "approval_decision_rejected", 409)                            \
    X(MV_SAGA_AMBIGUOUS_STEP, "saga_ambiguous_step", 409)                                          \
    X(MV_SAGA_RESOLUTION, "saga_resolution", 409)                                                  \
    X(MV_SAGA_CONCURRENCY, "saga_concurrency", 409)                                                \
    X(MV_SAGA_EXISTS, "saga_exists", 409)                                                          \
    X(MV_SAGA_STEP_FAILED, "saga_step_failed", 409)                                                \
    X(MV_ABORTED, "aborted", 409)                                                                  \
    X(MV_EFFECT_TRANSITION, "effect_transition_rejected", 409)                                     \
    X(MV_MESSAGE_ARCHIVED, "message_archived", 410)                                                \
    X(MV_PAYLOAD_TOO_LARGE, "payload_too_large", 413)                                              \
    X(MV_CLIENT_REQUEST_MISMATCH, "client_request_mismatch", 422)                                  \
    X(MV_SAGA_MISMATCH, "saga_mismatch", 422)                                                      \
    X(MV_INTERNAL, "internal", 500)                                                                \
    X(MV_NO_MEMORY, "internal", 500)                                                               \
    X(MV_IO, "internal", 500)                                                                      \
    X(MV_SCHEMA_TOO_NEW, "internal", 500)                                                          \
    X(MV_ACTION_TEMPLATE_MISMATCH, "action_template_mismatch", 500)                                \
    X(MV_CLIENT_REQUEST_INCONSISTENT, "client_request_inconsistent", 500)                          \
    X(MV_PAYMENT_COMPENSATION_FAILED, "payment_compensation_failed", 500)                          \
    X(MV_PREPARE_FAILED, "prepare_failed", 502)                                                    \
    X(MV_PAYMENT_FAILED, "payment_failed", 502)                                                    \
    X(MV_UPSTREAM_FAILED, "upstream_failed", 502)                                                  \
    X(MV_STORE_UNAVAILABLE, "store_unavailable", 503)                                              \
    X(MV_APPROVAL_REQUIRED, "approval_required", 202)                                              \
    X(MV_INVALID_TEMPLATE, "invalid_template", 400)                                                \
    X(MV_INVALID_CONFIG, "invalid_config", 400)                                                    \
    X(MV_PREPARE_UNAVAILABLE, "prepare_failed", 502)                                               \
    X(MV_PAYMENT_UNAVAILABLE, "payment_failed", 502)                                               \
    X(MV_DRAINING, "draining", 503)                                                                \
    X(MV_STREAM_CAPACITY, "stream_capacity", 503)                                                  \
    X(MV_LINK_INVALID, "link_invalid", 400)                                                        \
    X(MV_MESSAGE_ALREADY_SENT, "message_already_sent", 409)                                        \
    X(MV_SAGA_DELAYED, "saga_delayed", 202)

typedef enum mv_code {
#define MV_X_ENUM(e, name, status) e,
    MV_CODE_TABLE(MV_X_ENUM)
#undef MV_X_ENUM
        MV_CODE_COUNT
} mv_code;

/* Structured error. All fields are fixed-size buffers: filling an error never allocates, so it
 * works when memory is exhausted. Empty strings mean "not set". */
typedef struct mv_err {
    mv_code code;
    char message[512];
    char attempt_id[64];    /* action_retryable, action_needs_review */
    char approval_id[64];   /* approval_required */
    char resume_token[512]; /* approval_required */
    int64_t expires_at;     /* approval_required, ms since epoch */
    char saga_id[160];      /* action_needs_review, saga_* */
    char session_id[160];   /* payment_compensation_failed */
    char operation[16];     /* payment_compensation_failed: "expire" */
    char cause[512];        /* the original error, when one error wraps another */
    int retry_after_s;      /* client_request_pending */
    char failure_code[65];  /* a failed handler's own error code (lastFailure), "" when none */
} mv_err;

/* Resets every field of err (NULL-safe). */
void mv_err_clear(mv_err *err);

/* Sets err->code and formats err->message (printf-style); other fields are left untouched.
 * NULL-safe. Returns code, so `return mv_err_set(err, MV_X, "...")` reads naturally. */
mv_code mv_err_set(mv_err *err, mv_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
mv_code mv_err_setv(mv_err *err, mv_code code, const char *fmt, va_list ap);
#ifdef __clang_analyzer__
/* The analyzer sees one file at a time, so it cannot know that mv_err_set returns its code and
 * explores "error set, yet MV_OK returned" paths that cannot happen. This spells the contract out
 * for the analyzer only; compiled code calls the function above unchanged. */
static inline mv_code mv_err_returns_(mv_code ignored, mv_code code) {
    (void)ignored;
    return code;
}
#define mv_err_set(err, code, ...) mv_err_returns_(mv_err_set(err, code, __VA_ARGS__), code)
#endif

/* Copies src into dst (NULL-safe on both sides). Returns src->code. */
mv_code mv_err_copy(mv_err *dst, const mv_err *src);

/* Prefixes err->message with "<prefix>: " (keeps the code). */
void mv_err_prefix(mv_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* snake_case name of a code, as used in HTTP error bodies ("action_conflict"). Never NULL. */
const char *mv_code_name(mv_code code);

/* HTTP status for a code (500 for unknown codes). */
int mv_code_http_status(mv_code code);

/* The contract's words for a code whose message may carry internal details (a URL, a host, a
 * socket path, driver or library text): "prepare failed", "payment session creation failed",
 * "the store is unavailable; try again", … — what a client is told instead of err->message (the
 * log keeps the message). NULL when the code's messages are written for clients already. */
const char *mv_code_public_message(mv_code code);

/* True for a failure that is definitive for an idempotent create — the prepare hook or payment
 * provider refused, an item is invalid, a message is too large — as opposed to one that says
 * nothing about the request (store unavailable, a timeout, a lost connection, no answer): only
 * the former may mark a client request failed (DESIGN "Only definitive outcomes fail a key"). */
bool mv_code_is_definitive(mv_code code);

/* Copies text into out (NUL-terminated, truncated to size) with every URL redacted for a log:
 * userinfo ("user:password@") and query string or fragment removed. */
void mv_redact_urls(const char *text, char *out, size_t size);

/* Copies a string into a fixed buffer, always NUL-terminating (truncates). */
void mv_strlcpy(char *dst, const char *src, size_t size);

#ifdef __cplusplus
}
#endif

#endif
