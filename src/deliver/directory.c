/* directory.c — who has which email address.
 *
 * Two sources, one question: a webhook (`GET {url}/{userId}` → `{"email": …}`) asked on every
 * lookup, or a JSON map loaded once and immutable afterwards (so lookups need no lock). "This user
 * has no address" (404, missing/empty email) is an answer, not an error: the outbox skips such
 * emails. A directory that cannot answer is an error, and the outbox retries it (stage
 * recipientLookup). */
#include <stdlib.h>
#include <string.h>

#include "base/callctx.h"
#include "deliver/transport.h"
#include "missive/deliver.h"

struct mv_directory {
    char *url;            /* webhook source, or NULL */
    mv_webhook_config wh; /* secret borrowed */
    json_t *map;          /* file/map source, or NULL */
};

mv_code mv_directory_open_webhook(const char *url, const mv_webhook_config *wh, mv_directory **out,
                                  mv_err *err) {
    *out = NULL;
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "email.directory.webhook must be an http:// or https:// URL");
    mv_directory *d = calloc(1, sizeof *d);
    if (!d || !(d->url = strdup(url))) {
        free(d);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory opening the directory");
    }
    size_t n = strlen(d->url);
    while (n > 0 && d->url[n - 1] == '/')
        d->url[--n] = '\0'; /* we add the separator */
    if (wh) d->wh = *wh;
    *out = d;
    return MV_OK;
}

static mv_code open_map(json_t *map, const char *what, mv_directory **out, mv_err *err) {
    if (!json_is_object(map)) {
        json_decref(map);
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "%s must be a JSON object {\"userId\": \"address\"}", what);
    }
    const char *k;
    json_t *v;
    json_object_foreach(map, k, v) {
        if (!json_is_string(v)) {
            mv_err_set(err, MV_INVALID_CONFIG,
                       "%s: the address of user \"%.100s\" must be a string", what,
                       k); /* before the decref: k lives in map */
            json_decref(map);
            return MV_INVALID_CONFIG;
        }
    }
    mv_directory *d = calloc(1, sizeof *d);
    if (!d) {
        json_decref(map);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory opening the directory");
    }
    d->map = map;
    *out = d;
    return MV_OK;
}

mv_code mv_directory_open_file(const char *path, mv_directory **out, mv_err *err) {
    *out = NULL;
    json_t *map = NULL;
    mv_code rc = mv_json_load_file(path, &map, err);
    if (rc) return rc;
    char what[600];
    snprintf(what, sizeof what, "directory file %s", path);
    return open_map(map, what, out, err);
}

mv_code mv_directory_open_map(const json_t *map, mv_directory **out, mv_err *err) {
    *out = NULL;
    json_t *copy = json_deep_copy(map);
    if (map && !copy) return mv_err_set(err, MV_NO_MEMORY, "out of memory opening the directory");
    return open_map(copy, "directory map", out, err);
}

void mv_directory_close(mv_directory *dir) {
    if (!dir) return;
    free(dir->url);
    json_decref(dir->map);
    free(dir);
}

static char *dup_address(const char *s) {
    /* Surrounding whitespace is not part of an address; an empty one means "no address". */
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    return n ? strndup(s, n) : NULL;
}

static void percent_encode(const char *in, char *out, size_t size) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < size; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

mv_code mv_directory_lookup(mv_directory *dir, const char *user_id, char **email, mv_err *err) {
    *email = NULL;
    if (!dir) return mv_err_set(err, MV_INVALID_CONFIG, "no recipient directory is configured");
    if (!user_id || !*user_id) return MV_OK;
    if (dir->map) {
        const char *a = mv_json_str(dir->map, user_id);
        if (a && !(*email = dup_address(a)) && *a) {
            /* all blanks → no address; otherwise strndup failed */
            for (const char *p = a; *p; p++)
                if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
                    return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        return MV_OK;
    }
    if (strlen(user_id) > 512)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "user id longer than 512 bytes");
    char enc[1600], url[2200];
    percent_encode(user_id, enc, sizeof enc);
    snprintf(url, sizeof url, "%s/%s", dir->url, enc);
    mv_webhook_response res;
    mv_err e = {0};
    mv__callctx_call("directory", NULL, NULL, NULL);
    mv_code rc = mv_webhook_get(&dir->wh, url, &res, &e);
    if (res.status == 404) {
        mv_webhook_response_free(&res);
        return MV_OK;
    }
    if (rc) {
        mv_webhook_response_free(&res);
        mv_err_copy(err, &e);
        mv_err_prefix(err, "recipient lookup for user \"%.100s\"", user_id);
        return rc;
    }
    if (!json_is_object(res.json)) {
        char shown[512];
        mv_url_redacted(dir->url, shown, sizeof shown);
        mv_webhook_response_free(&res);
        return mv_err_set(err, MV_UPSTREAM_FAILED,
                          "recipient lookup for user \"%.100s\": %s answered without a JSON object",
                          user_id, shown);
    }
    const char *a = mv_json_str(res.json, "email");
    if (a) *email = dup_address(a);
    mv_webhook_response_free(&res);
    return MV_OK;
}
