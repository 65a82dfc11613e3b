/* cli_render.c — `missive render --text TEMPLATE [--data FILE.json] [--plain]`: renders one
 * template and prints the result exactly (no newline added), HTML-escaped as the Mustache spec
 * unless --plain (the escaping message content uses). Exit 1 on a malformed template or bad
 * data file, with the error (line and column for templates) on stderr; 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/base.h"
#include "missive/mustache.h"

int cli_render(int argc, char **argv) {
    const char *text = cli_flag(argc, argv, "--text");
    const char *data_path = cli_flag(argc, argv, "--data");
    if (!text) {
        fprintf(stderr, "usage: missive render --text TEMPLATE [--data FILE.json] [--plain]\n");
        return 2;
    }
    mv_escape escape = cli_has(argc, argv, "--plain") ? MV_ESCAPE_NONE : MV_ESCAPE_HTML;
    mv_err err;
    mv_err_clear(&err);
    json_t *data = NULL;
    mv_tpl *tpl = NULL;
    char *out = NULL;
    size_t len = 0;
    int status = 1;
    if (data_path && mv_json_load_file(data_path, &data, &err) != MV_OK) goto done;
    if (mv_tpl_compile(text, strlen(text), &tpl, &err) != MV_OK) goto done;
    if (mv_tpl_render(tpl, data, escape, &out, &len, &err) != MV_OK) goto done;
    status = fwrite(out, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : 1;
    if (status) mv_strlcpy(err.message, "cannot write the output", sizeof err.message);
done:
    if (status) fprintf(stderr, "missive render: %s\n", err.message);
    free(out);
    mv_tpl_free(tpl);
    json_decref(data);
    return status;
}
