/* json_files.h — the *.json files of a directory in name order: how the daemon and the CLI load
 * templates and saga definitions, so every loader sees the same files in the same order. */
#ifndef MV_BASE_JSON_FILES_H
#define MV_BASE_JSON_FILES_H

#include <stddef.h>

#include "missive/error.h"

typedef struct mv__json_files {
    char **paths; /* "dir/name.json", owned */
    size_t n;
} mv__json_files;

/* Lists dir's *.json files (hidden ones skipped), sorted by name, as paths joined to dir.
 * MV_IO "<dir>: cannot open <what>" or MV_NO_MEMORY; on error *out is empty. */
mv_code mv__json_files_list(const char *dir, const char *what, mv__json_files *out, mv_err *err);
/* Frees the list; accepts an empty or zeroed one. */
void mv__json_files_free(mv__json_files *files);

#endif
