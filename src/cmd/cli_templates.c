/* cli_templates.c — `missive templates check FILE...`: parses and validates each template file
 * exactly as the daemon does at start, one line per file on stdout ("ok FILE" or
 * "FILE: <error>"); exit 1 when any file failed, 2 on a usage error. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/template.h"

static int usage(void) {
    fprintf(stderr, "usage: missive templates check FILE...\n");
    return 2;
}

int cli_templates(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "check") != 0) return usage();
    if (argc < 3) return usage();
    int failed = 0;
    for (int i = 2; i < argc; i++) {
        mv_template *t = NULL;
        mv_err err;
        mv_err_clear(&err);
        if (mv_template_load_file(argv[i], &t, &err) == MV_OK) {
            printf("ok %s\n", argv[i]);
        } else {
            /* Every load error already starts with the file name. */
            printf("%s\n", err.message);
            failed = 1;
        }
        mv_template_release(t);
    }
    fflush(stdout);
    return failed;
}
