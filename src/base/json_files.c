/* json_files.c — one directory walk for every loader of JSON files (templates, saga definitions,
 * `missive templates check DIR`): hidden files are skipped and the order is the names' byte order,
 * so a duplicate definition is always reported against the same, earlier file. */
#include "base/json_files.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_paths(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_json_file(const char *name) {
    size_t n = strlen(name);
    return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

mv_code mv__json_files_list(const char *dir, const char *what, mv__json_files *out, mv_err *err) {
    out->paths = NULL;
    out->n = 0;
    DIR *d = opendir(dir);
    if (!d) return mv_err_set(err, MV_IO, "%s: cannot open %s", dir, what);
    const char *sep = dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/";
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_json_file(de->d_name)) continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 32;
            char **grown = realloc(out->paths, cap * sizeof *grown);
            if (!grown) goto nomem;
            out->paths = grown;
        }
        size_t len = strlen(dir) + strlen(sep) + strlen(de->d_name) + 1;
        if (!(out->paths[out->n] = malloc(len))) goto nomem;
        snprintf(out->paths[out->n++], len, "%s%s%s", dir, sep, de->d_name);
    }
    closedir(d);
    /* names differ only after the shared "dir/" prefix, so sorting paths sorts names */
    if (out->n) qsort(out->paths, out->n, sizeof *out->paths, cmp_paths);
    return MV_OK;
nomem:
    closedir(d);
    mv__json_files_free(out);
    return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory listing %s", dir, what);
}

void mv__json_files_free(mv__json_files *files) {
    if (!files) return;
    for (size_t i = 0; i < files->n; i++)
        free(files->paths[i]);
    free(files->paths);
    files->paths = NULL;
    files->n = 0;
}
