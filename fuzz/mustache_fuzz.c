/* mustache_fuzz.c — libFuzzer harness for the Mustache compiler and renderer: any bytes as a
 * template either compile or fail with MV_INVALID_TEMPLATE (never anything else), and a compiled
 * template renders within MV_TPL_MAX_OUTPUT with both escapings over a small fixed data set. */
#include <stdint.h>
#include <stdlib.h>

#include "missive/mustache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx)
        ctx = json_pack("{s:s,s:i,s:b,s:[s,s],s:{s:{s:s}},s:n}", "name", "Ana", "n", 3, "yes", 1,
                        "list", "a", "b", "deep", "er", "x", "<&>", "none");
    mv_tpl *t = NULL;
    mv_err err = {0};
    mv_code rc = mv_tpl_compile((const char *)data, size, &t, &err);
    if (rc != MV_OK) {
        if (rc != MV_INVALID_TEMPLATE && rc != MV_NO_MEMORY) abort();
        if (t) abort();
        return 0;
    }
    for (int e = 0; e < 2; e++) {
        char *out = NULL;
        size_t len = 0;
        rc = mv_tpl_render(t, ctx, e ? MV_ESCAPE_HTML : MV_ESCAPE_NONE, &out, &len, &err);
        if (rc == MV_OK && (!out || len > MV_TPL_MAX_OUTPUT)) abort();
        if (rc != MV_OK && rc != MV_INVALID_TEMPLATE && rc != MV_NO_MEMORY) abort();
        free(out);
    }
    mv_tpl_free(t);
    return 0;
}
