/* jsonlogic_fuzz.c — libFuzzer harness for the JsonLogic compiler and evaluator: any JSON text
 * as a rule either compiles or fails with MV_INVALID_ARGUMENT, and a compiled rule evaluates
 * (bounded in steps and bytes) over a small fixed message without crashing. */
#include <stdint.h>
#include <stdlib.h>

#include "missive/jsonlogic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *msg;
    if (!msg)
        msg = json_pack("{s:{s:s,s:i,s:[i,i,i]},s:s,s:n}", "payload", "status", "open", "amount",
                        42, "items", 1, 2, 3, "toUser", "bob", "display");
    json_error_t jerr;
    json_t *rule = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!rule) return 0;
    mv_logic *l = NULL;
    mv_err err = {0};
    mv_code rc = mv_logic_compile(rule, &l, &err);
    if (rc == MV_OK) {
        json_t *result = NULL;
        rc = mv_logic_eval(l, msg, &result, &err);
        if (rc == MV_OK && !result) abort();
        json_decref(result);
        (void)mv_logic_test(l, msg, &err);
        mv_logic_free(l);
    } else if (rc != MV_INVALID_ARGUMENT && rc != MV_NO_MEMORY) {
        abort();
    } else if (l) {
        abort();
    }
    json_decref(rule);
    return 0;
}
