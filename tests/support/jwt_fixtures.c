/* jwt_fixtures.c — runs tests/http/jwt_fixtures.mjs once and serves what it wrote. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "support/jwt_fixtures.h"

static char fx_dir[512];
static json_t *tokens;

bool jwt_fixtures_make(const char *dir) {
    if (tokens) return true;
    snprintf(fx_dir, sizeof fx_dir, "%s", dir);
    mkdir(fx_dir, 0700);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "node tests/http/jwt_fixtures.mjs %s %lld", fx_dir,
             (long long)time(NULL));
    if (system(cmd) != 0) return false;
    tokens = json_load_file(jwt_fixture_path("tokens.json"), 0, NULL);
    return tokens != NULL;
}

const char *jwt_fixture_token(const char *name) {
    const char *t = json_string_value(json_object_get(tokens, name));
    if (!t) fprintf(stderr, "no fixture token %s\n", name);
    return t ? t : "";
}

const char *jwt_fixture_path(const char *name) {
    static char bufs[4][600];
    static int slot;
    char *b = bufs[slot++ % 4];
    snprintf(b, 600, "%s/%s", fx_dir, name);
    return b;
}

char *jwt_fixture_text(const char *name) {
    FILE *f = fopen(jwt_fixture_path(name), "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

void jwt_fixtures_free(void) {
    json_decref(tokens);
    tokens = NULL;
}
