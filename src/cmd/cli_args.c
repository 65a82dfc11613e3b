/* cli_args.c — the flag helpers every subcommand uses; flags are "--name VALUE" or
 * "--name=VALUE", in any order. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"

const char *cli_flag(int argc, char **argv, const char *name) {
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], name, n) != 0) continue;
        if (argv[i][n] == '=') return argv[i] + n + 1;
        if (argv[i][n] == '\0' && i + 1 < argc) return argv[i + 1];
    }
    return NULL;
}

bool cli_has(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return true;
    return false;
}

bool cli_flags_ok(int argc, char **argv, const char *const *valued, const char *const *bare) {
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0) continue; /* a positional argument */
        bool ok = false;
        for (size_t k = 0; bare && bare[k] && !ok; k++)
            ok = strcmp(argv[i], bare[k]) == 0;
        for (size_t k = 0; valued && valued[k] && !ok; k++) {
            size_t n = strlen(valued[k]);
            if (strncmp(argv[i], valued[k], n) != 0) continue;
            if (argv[i][n] == '=')
                ok = true;
            else if (argv[i][n] == '\0' && i + 1 < argc)
                ok = true, i++; /* skips its value */
        }
        if (!ok) {
            fprintf(stderr, "missive %s: unknown flag or missing value: \"%s\"\n", argv[0],
                    argv[i]);
            return false;
        }
    }
    return true;
}
