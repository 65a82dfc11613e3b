/* keyset_cursor.c — encoding and strict decoding of the lists' keyset cursor (keyset_cursor.h). */
#include "base/keyset_cursor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "missive/base.h"
#include "missive/error.h"

char *mv__keyset_cursor_encode(int64_t created_at, const char *id) {
    char raw[160];
    int n = snprintf(raw, sizeof raw, "%lld:%s", (long long)created_at, id);
    if (n < 0 || (size_t)n >= sizeof raw) return NULL;
    char *out = malloc(mv_b64url_len((size_t)n) + 1);
    if (out) mv_b64url_encode(raw, (size_t)n, out);
    return out;
}

bool mv__keyset_cursor_decode(const char *cursor, int64_t *created_at, char *id, size_t id_size) {
    if (!cursor) {
        *created_at = MV_CURSOR_MAX_TIME;
        id[0] = '\0';
        return true;
    }
    size_t len = strlen(cursor);
    unsigned char raw[200];
    size_t n;
    if (len == 0 || len > 240 || !mv_b64url_decode(cursor, len, raw, &n) || n >= sizeof raw)
        return false;
    raw[n] = '\0';
    char *colon = strchr((char *)raw, ':');
    if (!colon) return false;
    *colon = '\0';
    char *end;
    long long t = strtoll((char *)raw, &end, 10);
    if (*end || end == (char *)raw || t < 0 || t > MV_CURSOR_MAX_TIME ||
        !mv_valid_token(colon + 1, id_size - 1))
        return false;
    *created_at = t;
    mv_strlcpy(id, colon + 1, id_size);
    return true;
}

mv_code mv__list_finish(json_t *rows, int limit, const char *id_key, char **next_cursor,
                        mv_err *err) {
    *next_cursor = NULL;
    if (json_array_size(rows) <= (size_t)limit) return MV_OK;
    while (json_array_size(rows) > (size_t)limit)
        json_array_remove(rows, json_array_size(rows) - 1);
    json_t *last = json_array_get(rows, json_array_size(rows) - 1);
    *next_cursor = mv__keyset_cursor_encode(json_integer_value(json_object_get(last, "createdAt")),
                                            json_string_value(json_object_get(last, id_key)));
    return *next_cursor ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}
