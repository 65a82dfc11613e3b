/* template_fuzz.c — libFuzzer harness for template validation (the file the daemon loads from
 * its templates directory): any JSON text either parses into a template or fails with
 * MV_INVALID_TEMPLATE naming the source, and a parsed template answers its lookups. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "missive/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t jerr;
    json_t *json = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!json) return 0;
    mv_template *t = NULL;
    mv_err err = {0};
    mv_code rc = mv_template_parse(json, "fuzz.json", &t, &err);
    if (rc == MV_OK) {
        if (!t || !t->template_cd) abort();
        for (size_t i = 0; i < t->nactions; i++)
            if (mv_template_action(t, t->actions[i].action_cd) != &t->actions[i]) abort();
        (void)mv_template_ui(t, MV_SENDER);
        (void)mv_template_ui(t, MV_RECEIVER);
        mv_template_release(t);
    } else {
        if (t) abort();
        if (rc != MV_INVALID_TEMPLATE && rc != MV_NO_MEMORY) abort();
        if (strncmp(err.message, "fuzz.json: ", 11) != 0) abort();
    }
    json_decref(json);
    return 0;
}
