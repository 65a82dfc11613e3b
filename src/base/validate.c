/* validate.c — the shapes accepted at every boundary (route parameters, tokens, codes).
 * Hand-written matchers instead of regex: each pattern is a few lines and allocation-free. */
#include <string.h>

#include "missive/base.h"
#include "missive/error.h"

/* The codes and ids with their own limit fit in the one for users, roles and tenants, so a key
 * made of several (a reservation: tenant, owner, templateCd, client request id) stays small. */
_Static_assert(128 <= MV_MAX_ID_BYTES, "codes, saga ids and client request ids fit an id");
_Static_assert(2 * MV_MAX_ID_BYTES + 2 * 128 < 2704 / 2,
               "the widest key stays far below PostgreSQL's B-tree entry limit");

mv_code mv_check_id_length(const char *field, size_t len, mv_err *err) {
    if (len <= MV_MAX_ID_BYTES) return MV_OK;
    return mv_err_set(err, MV_INVALID_ARGUMENT, "%s must be at most %d bytes (it has %zu)", field,
                      MV_MAX_ID_BYTES, len);
}

static bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alnum(char c) { return is_lower(c) || is_digit(c) || (c >= 'A' && c <= 'Z'); }
static bool is_hex(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool mv_valid_token(const char *s, size_t max) {
    if (!s || !*s) return false;
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e || n >= max) return false;
    return true;
}

static bool code_chars(const char *s, const char *extra) {
    if (!s || !*s) return false;
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= 128 || !(is_alnum(s[n]) || strchr(extra, s[n]))) return false;
    return true;
}

bool mv_valid_template_cd(const char *s) { return code_chars(s, "_.-"); }
bool mv_valid_action_cd(const char *s) { return code_chars(s, "_-"); }

bool mv_valid_capability(const char *s) {
    if (!s || !is_lower(*s)) return false;
    bool after_sep = false;
    for (const char *p = s + 1; *p; p++) {
        if (*p == '.' || *p == '-') {
            if (after_sep) return false;
            after_sep = true;
        } else if (is_lower(*p) || is_digit(*p)) {
            after_sep = false;
        } else {
            return false;
        }
    }
    return !after_sep;
}

bool mv_valid_error_code(const char *s) {
    if (!s || !is_lower(*s)) return false;
    size_t n = 1;
    for (; s[n]; n++)
        if (n > 63 ||
            !(is_lower(s[n]) || is_digit(s[n]) || s[n] == '_' || s[n] == '.' || s[n] == '-'))
            return false;
    return true;
}

bool mv_valid_digest(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!(is_digit(s[i]) || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

bool mv_valid_message_id(const char *s) {
    if (!s || strlen(s) != 24) return false;
    for (int i = 0; i < 24; i++)
        if (!is_hex(s[i])) return false;
    return true;
}

bool mv_valid_uuid(const char *s) {
    if (!s || strlen(s) != 36) return false;
    for (int i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !is_hex(s[i])) return false;
    }
    return true;
}
