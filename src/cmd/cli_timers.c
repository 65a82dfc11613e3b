/* cli_timers.c — `missive timers list`: the durable timers in a store, in due order, for
 * operators (every tenant unless --tenant). A page at a time (--limit, --cursor); --json prints
 * the page as the library returns it, otherwise one aligned line per timer and the next cursor.
 * Also the timers finding of `missive reconcile` (cli_durable.c): pending timers whose lease ran
 * out at least once (claimed twice or more) and timers given up after repeated failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/base.h"
#include "missive/timers.h"

static void print_text(const json_t *page) {
    size_t i;
    json_t *t;
    printf("%-40s %-10s %-9s %13s %6s %s\n", "ID", "KIND", "STATE", "DUE_AT", "CLAIMS", "TENANT");
    json_array_foreach(json_object_get(page, "timers"), i, t) {
        printf("%-40s %-10s %-9s %13lld %6lld %s\n", mv_json_str(t, "id"), mv_json_str(t, "kind"),
               mv_json_str(t, "state"), (long long)json_integer_value(json_object_get(t, "dueAt")),
               (long long)json_integer_value(json_object_get(t, "claims")),
               mv_json_str(t, "tenantId"));
    }
    const char *next = mv_json_str(page, "nextCursor");
    if (next) printf("next cursor: %s\n", next);
}

int cli_timers(int argc, char **argv) {
    const char *verb = argc > 1 ? argv[1] : NULL, *url = cli_flag(argc, argv, "--store");
    const char *limit = cli_flag(argc, argv, "--limit");
    static const char *const FLAGS[] = {"--store", "--tenant", "--state", "--kind",
                                        "--limit", "--cursor", NULL};
    static const char *const BARE[] = {"--json", NULL};
    char *end = NULL;
    long n = limit ? strtol(limit, &end, 10) : 100;
    if (!cli_flags_ok(argc, argv, FLAGS, BARE) || !verb || strcmp(verb, "list") != 0 || !url ||
        (limit && (!*limit || *end || n < 1 || n > 1000))) {
        fprintf(stderr, "usage: missive timers list --store URL [--tenant T] "
                        "[--state pending|fired|cancelled|failed] [--kind K] [--limit 1..1000] "
                        "[--cursor C] [--json]\n");
        return 2;
    }
    mv_timers_filter f = {.tenant_id = cli_flag(argc, argv, "--tenant"),
                          .state = cli_flag(argc, argv, "--state"),
                          .kind = cli_flag(argc, argv, "--kind"),
                          .cursor = cli_flag(argc, argv, "--cursor"),
                          .limit = (int)n};
    mv_store *store = NULL;
    mv_err err = {0};
    json_t *page = NULL;
    mv_code rc = mv_store_open(url, NULL, &store, &err);
    if (rc == MV_OK) rc = mv_store_check_schema(store, &err);
    if (rc == MV_OK) rc = mv_timers_list(store, &f, &page, &err);
    if (rc == MV_OK && cli_has(argc, argv, "--json")) {
        char *s = json_dumps(page, JSON_COMPACT);
        if (s) printf("%s\n", s);
        free(s);
    } else if (rc == MV_OK) {
        print_text(page);
    } else {
        fprintf(stderr, "missive timers list: %s\n", err.message);
    }
    json_decref(page);
    mv_store_close(store);
    fflush(stdout);
    return rc == MV_OK ? 0 : 1;
}

/* One reconcile finding per timer of the page: {"kind": "timer", …the timer…, "reason"}. */
static void print_findings(const json_t *page, const char *reason) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(page, "timers"), i, t) {
        json_t *line = json_pack("{s:s}", "kind", "timer");
        json_object_update(line, t);
        json_object_set(line, "timerKind", json_object_get(t, "kind"));
        json_object_set_new(line, "kind", json_string("timer"));
        json_object_set_new(line, "reason", json_string(reason));
        char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s) printf("%s\n", s);
        free(s);
        json_decref(line);
    }
}

mv_code cli_reconcile_timers(mv_store *store, mv_err *err) {
    static const struct {
        const char *state, *reason;
        int min_claims;
    } scans[] = {{"pending", "lease_expired", 2}, {"failed", "failed", 0}};
    for (size_t k = 0; k < 2; k++) {
        char cursor[300] = "";
        for (;;) {
            mv_timers_filter f = {.state = scans[k].state,
                                  .min_claims = scans[k].min_claims,
                                  .limit = 1000,
                                  .cursor = cursor[0] ? cursor : NULL};
            json_t *page = NULL;
            mv_code rc = mv_timers_list(store, &f, &page, err);
            if (rc != MV_OK) return rc;
            print_findings(page, scans[k].reason);
            const char *next = mv_json_str(page, "nextCursor");
            mv_strlcpy(cursor, next ? next : "", sizeof cursor);
            json_decref(page);
            if (!cursor[0]) break;
        }
    }
    return MV_OK;
}
