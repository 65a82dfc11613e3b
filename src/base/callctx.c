/* callctx.c — the thread's call context (see callctx.h). One thread-local struct; no locks. */
#include <string.h>

#include "base/callctx.h"
#include "missive/error.h"

static _Thread_local mv_callctx current;

mv_callctx *mv__callctx(void) { return &current; }

void mv__callctx_reset(void) { memset(&current, 0, sizeof current); }

void mv__callctx_call(const char *kind, const char *message_id, const char *attempt_id,
                      const char *saga_id) {
    current.kind = kind;
    if (message_id) mv_strlcpy(current.message_id, message_id, sizeof current.message_id);
    if (attempt_id) mv_strlcpy(current.attempt_id, attempt_id, sizeof current.attempt_id);
    if (saga_id) mv_strlcpy(current.saga_id, saga_id, sizeof current.saga_id);
}

static bool hex_run(const char *s, size_t n, bool *all_zero) {
    *all_zero = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        if (c != '0') *all_zero = false;
    }
    return true;
}

bool mv__traceparent_valid(const char *s) {
    bool zero;
    if (!s || strlen(s) != 55 || strncmp(s, "00-", 3) != 0 || s[35] != '-' || s[52] != '-')
        return false;
    if (!hex_run(s + 3, 32, &zero) || zero) return false;
    if (!hex_run(s + 36, 16, &zero) || zero) return false;
    return hex_run(s + 53, 2, &zero);
}
