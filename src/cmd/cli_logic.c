/* cli_logic.c — placeholder until its module lands. */
#include <stdio.h>

#include "cmd/cli.h"

int cli_logic(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "missive %s: not available in this build\n", argv[0]);
    return 2;
}

