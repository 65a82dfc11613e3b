/* json.c — jansson with the strictness missive wants at its boundaries: a whole buffer is exactly
 * one value, errors name line and column, and a canonical form (sorted keys, compact) gives stable
 * fingerprints and digests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "missive/base.h"

mv_code mv_json_parse(const char *buf, size_t len, json_t **out, mv_err *err) {
    json_error_t je;
    *out = NULL;
    json_t *v = json_loadb(buf, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return mv_err_set(err, MV_INVALID_JSON, "invalid JSON at line %d, column %d: %s", je.line,
                          je.column, je.text);
    *out = v;
    return MV_OK;
}

mv_code mv_json_load_file(const char *path, json_t **out, mv_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mv_err_set(err, MV_IO, "%s: cannot open file", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    mv_code rc = mv_json_parse(buf ? buf : "", len, out, err);
    free(buf);
    if (rc != MV_OK) mv_err_prefix(err, "%s", path);
    return rc;
}

char *mv_json_canonical(const json_t *v) {
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

char *mv_json_compact(const json_t *v) { return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY); }

void mv_json_fingerprint(const json_t *v, char out[65]) {
    char *s = mv_json_canonical(v);
    mv_sha256_hex(s ? s : "", s ? strlen(s) : 0, out);
    free(s);
}

const char *mv_json_str(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(obj, key));
}

json_t *mv_json_path(const json_t *root, const char *path) {
    const json_t *cur = root;
    const char *p = path;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, p, n);
        } else if (json_is_array(cur)) {
            char *end;
            char idx[32];
            if (n == 0 || n >= sizeof idx) return NULL;
            memcpy(idx, p, n);
            idx[n] = '\0';
            long i = strtol(idx, &end, 10);
            if (*end || i < 0) return NULL;
            cur = json_array_get(cur, (size_t)i);
        } else {
            return NULL;
        }
        p = dot ? dot + 1 : p + n;
    }
    return (json_t *)cur;
}
