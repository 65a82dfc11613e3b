/* cli_logic.c — `missive logic --rule JSON [--data JSON]`: evaluates a JsonLogic rule and prints
 * the result as compact JSON on one line. Exit 1 when the rule or data is not valid JSON or the
 * rule does not compile (unknown operator, wrong arguments), 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/base.h"
#include "missive/jsonlogic.h"

int cli_logic(int argc, char **argv) {
    const char *rule_text = cli_flag(argc, argv, "--rule");
    const char *data_text = cli_flag(argc, argv, "--data");
    if (!rule_text) {
        fprintf(stderr, "usage: missive logic --rule JSON [--data JSON]\n");
        return 2;
    }
    json_t *rule = NULL, *data = NULL, *result = NULL;
    char *out = NULL;
    mv_err err = {0};
    int status = 1;
    if (mv_json_parse(rule_text, strlen(rule_text), &rule, &err) != MV_OK) {
        fprintf(stderr, "missive logic: --rule: %s\n", err.message);
        goto done;
    }
    if (data_text && mv_json_parse(data_text, strlen(data_text), &data, &err) != MV_OK) {
        fprintf(stderr, "missive logic: --data: %s\n", err.message);
        goto done;
    }
    if (mv_logic_apply(rule, data, &result, &err) != MV_OK) {
        fprintf(stderr, "missive logic: %s\n", err.message);
        goto done;
    }
    if (!(out = mv_json_compact(result))) {
        fprintf(stderr, "missive logic: out of memory\n");
        goto done;
    }
    printf("%s\n", out);
    status = 0;
done:
    free(out);
    json_decref(result);
    json_decref(data);
    json_decref(rule);
    return status;
}
