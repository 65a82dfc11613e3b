/* cli_args.c — the two flag helpers every subcommand uses; flags are "--name VALUE" or
 * "--name=VALUE", in any order. */
#include <stdbool.h>
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
