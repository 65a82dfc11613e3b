/* cli_store.c — `missive migrate` and `missive gc`: schema and retention operations on a store. */
#include <stdio.h>
#include <stdlib.h>

#include "cmd/cli.h"
#include "missive/message.h"
#include "missive/store.h"

int cli_migrate(int argc, char **argv) {
    static const char *const FLAGS[] = {"--store", NULL};
    const char *url = cli_flag(argc, argv, "--store");
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !url) {
        fprintf(stderr, "usage: missive migrate --store URL\n");
        return 2;
    }
    mv_err err = {0};
    mv_store *store = NULL;
    int applied = 0, version = 0;
    if (mv_store_open(url, NULL, &store, &err) != MV_OK ||
        mv_store_migrate(store, &applied, &err) != MV_OK ||
        mv_store_schema_version(store, &version, &err) != MV_OK) {
        fprintf(stderr, "missive migrate: %s\n", err.message);
        mv_store_close(store);
        return 1;
    }
    if (applied)
        printf("applied %d migration%s; schema is at version %d\n", applied,
               applied == 1 ? "" : "s", version);
    else
        printf("schema is up to date (version %d); nothing to do\n", version);
    mv_store_close(store);
    return 0;
}

/* Completed client-request reservations are kept for replays; after the retention (default 24 h,
 * --older-than-ms) a retry of that key is a new request. */
int cli_gc(int argc, char **argv) {
    const char *url = cli_flag(argc, argv, "--store");
    const char *older = cli_flag(argc, argv, "--older-than-ms");
    char *end = NULL;
    long long retention = older ? strtoll(older, &end, 10) : 86400000LL;
    static const char *const FLAGS[] = {"--store", "--older-than-ms", NULL};
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !url ||
        (older && (!*older || *end || retention < 0))) {
        fprintf(stderr, "usage: missive gc --store URL [--older-than-ms N]\n");
        return 2;
    }
    mv_err err = {0};
    mv_store *store = NULL;
    int64_t removed = 0;
    if (mv_store_open(url, NULL, &store, &err) != MV_OK ||
        mv_store_check_schema(store, &err) != MV_OK ||
        mv_requests_gc(store, mv_now_ms() - retention, &removed, &err) != MV_OK) {
        fprintf(stderr, "missive gc: %s\n", err.message);
        mv_store_close(store);
        return 1;
    }
    printf("removed %lld completed client request%s older than %lld ms\n", (long long)removed,
           removed == 1 ? "" : "s", retention);
    mv_store_close(store);
    return 0;
}
