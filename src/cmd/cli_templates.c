/* cli_templates.c — `missive templates check [--sagas DIR] [--config FILE] PATH...`: parses and
 * validates templates exactly as the daemon does at start, one line per file on stdout ("ok FILE"
 * or "FILE: <error>"; an ok line ends with the payload fields the template requires, if any);
 * exit 1 when any file failed, 2 on a usage error.
 *
 * A PATH that is a directory is checked as the daemon's "templates" directory: every *.json in
 * name order, and a templateCd defined by two of its files is an error on the second. With
 * --sagas, every {"saga": NAME} handler must name a definition in that directory, as the daemon
 * requires at start. Every channel a template names must be configured: by the "channels" of
 * --config FILE, else only inbox and email exist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json_files.h"
#include "cmd/cli.h"
#include "cmd/daemon.h"
#include "missive/template.h"

static int usage(void) {
    fprintf(stderr, "usage: missive templates check [--sagas DIR] [--config FILE] PATH...\n");
    return 2;
}

/* What one invocation has seen: the saga book (NULL without --sagas) and, per directory, the
 * codes already defined and the files that defined them. */
typedef struct {
    const mv_saga_book *book;
    const char *sagas_dir;
    const mv_reach *reach; /* --config's channels; NULL: inbox and email only */
    json_t *defined;       /* templateCd → file, reset for every directory */
} check_ctx;

/* Checks one file; prints its line; returns 1 when it failed. */
static int check_file(check_ctx *c, const char *path) {
    mv_template *t = NULL;
    mv_err err;
    mv_err_clear(&err);
    mv_code rc = mv_template_load_file(path, &t, &err);
    if (rc == MV_OK && c->book) rc = mv_daemon_check_template_sagas(t, c->book, c->sagas_dir, &err);
    if (rc == MV_OK) rc = mv_reach_check_template(c->reach, t, &err);
    if (rc == MV_OK && c->defined) {
        const char *first = json_string_value(json_object_get(c->defined, t->template_cd));
        if (first)
            rc = mv_err_set(&err, MV_INVALID_TEMPLATE, "template \"%s\" is already defined in %s",
                            t->template_cd, first);
        else
            json_object_set_new(c->defined, t->template_cd, json_string(path));
    }
    if (rc == MV_OK) {
        printf("ok %s", path);
        for (size_t i = 0; i < t->nrequired; i++)
            printf("%s%s", i ? ", " : " (required: ", t->required[i]);
        printf(t->nrequired ? ")\n" : "\n");
    } else if (strncmp(err.message, path, strlen(path)) == 0)
        printf("%s\n", err.message); /* template load errors already start with the file name */
    else
        printf("%s: %s\n", path, err.message);
    mv_template_release(t);
    return rc != MV_OK;
}

/* Every *.json of dir (not hidden), in name order, as the daemon loads them. */
static int check_dir(check_ctx *c, const char *dir) {
    mv__json_files files;
    mv_err err = {0};
    if (mv__json_files_list(dir, "template directory", &files, &err) != MV_OK) {
        printf("%s\n", err.message);
        return 1;
    }
    int failed = 0;
    c->defined = json_object();
    for (size_t i = 0; i < files.n; i++)
        failed |= check_file(c, files.paths[i]);
    json_decref(c->defined);
    c->defined = NULL;
    mv__json_files_free(&files);
    return failed;
}

int cli_templates(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "check") != 0) return usage();
    static const char *const FLAGS[] = {"--sagas", "--config", NULL};
    if (!cli_flags_ok(argc, argv, FLAGS, NULL)) return usage();
    check_ctx c = {.sagas_dir = cli_flag(argc, argv, "--sagas")};
    mv_saga_book *book = NULL;
    int failed = 0, paths = 0;
    if (c.sagas_dir) {
        mv_err err;
        mv_err_clear(&err);
        book = mv_saga_book_new(NULL);
        if (!book || mv_saga_book_load_dir(book, c.sagas_dir, &err) != MV_OK) {
            printf("%s: %s\n", c.sagas_dir, book ? err.message : "out of memory");
            mv_saga_book_free(book);
            return 1;
        }
        c.book = book;
    }
    const char *config_path = cli_flag(argc, argv, "--config");
    mv_config *cfg = NULL;
    if (config_path) {
        mv_err err = {0};
        if (mv_config_load(config_path, NULL, &cfg, &err) != MV_OK) {
            printf("%s\n", err.message);
            mv_saga_book_free(book);
            return 1;
        }
        c.reach = cfg->reach;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--sagas") == 0 || strcmp(argv[i], "--config") == 0) {
            i++; /* its value */
            continue;
        }
        if (strncmp(argv[i], "--sagas=", 8) == 0 || strncmp(argv[i], "--config=", 9) == 0) continue;
        paths++;
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            failed |= check_dir(&c, argv[i]);
        else
            failed |= check_file(&c, argv[i]);
    }
    mv_saga_book_free(book);
    mv_config_free(cfg);
    fflush(stdout);
    if (!paths) return usage();
    return failed;
}
