/* cli_durable.c — placeholder until its module lands. */
#include <stdio.h>

#include "cmd/cli.h"

int cli_reconcile(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "missive %s: not available in this build\n", argv[0]);
    return 2;
}

int cli_approvals(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "missive %s: not available in this build\n", argv[0]);
    return 2;
}

int cli_saga(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "missive %s: not available in this build\n", argv[0]);
    return 2;
}

