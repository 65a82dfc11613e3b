/* cli_durable.c — the operator's side of the durable primitives:
 *   missive reconcile --store URL [--kind effects|sagas] [--stale-ms N]
 *   missive approvals decide --store URL ID approved|denied --tenant T --by U
 *   missive saga resolve --store URL --saga ID --kind K --step S --effect E --outcome O
 *                        [--result JSON] [--error-code C]
 * Findings and records are printed as JSON, one object per line; errors go to stderr. Exit
 * status: 0 success, 1 an error, 2 a usage error. The commands work on the store directly, so
 * they need no daemon configuration (the `--config FILE` form of saga resolve is the daemon's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/durable.h"

/* The n-th argument (0-based, after argv[0]) that is neither a flag nor a flag's value. Every
 * flag of these commands takes a value, except the ones listed in `bare`. */
static const char *positional(int argc, char **argv, int n) {
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) {
            if (!strchr(argv[i], '=')) i++; /* skip its value */
            continue;
        }
        if (n-- == 0) return argv[i];
    }
    return NULL;
}

static void print_json(const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    if (s) printf("%s\n", s);
    free(s);
}

static mv_store *open_store(const char *cmd, const char *url) {
    mv_store *store = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &store, &err) != MV_OK) {
        fprintf(stderr, "missive %s: %s\n", cmd, err.message);
        return NULL;
    }
    return store;
}

/* ---- reconcile ---------------------------------------------------------------------------- */

typedef mv_code (*page_fn)(mv_store *, const mv_reconcile_options *, mv_reconcile_page *, mv_err *);

static const struct {
    const char *name;  /* --kind value */
    const char *label; /* the `kind` field of each finding */
    page_fn page;
} reconcilers[] = {
    {"effects", "effect", mv_reconcile_effects_page},
    {"sagas", "saga", mv_reconcile_sagas_page},
};

/* Prints every finding of one kind, page by page. */
static mv_code print_findings(mv_store *store, int which, int64_t stale_before, mv_err *err) {
    char cursor[256] = "";
    do {
        mv_reconcile_options o = {
            .stale_before = stale_before, .limit = 1000, .cursor = cursor[0] ? cursor : NULL};
        mv_reconcile_page page;
        mv_code rc = reconcilers[which].page(store, &o, &page, err);
        if (rc) return rc;
        size_t i;
        json_t *f;
        json_array_foreach(page.findings, i, f) {
            json_t *line = json_pack("{s:s}", "kind", reconcilers[which].label);
            json_object_update(line, f);
            print_json(line);
            json_decref(line);
        }
        snprintf(cursor, sizeof cursor, "%s", page.cursor);
        mv_reconcile_page_clear(&page);
    } while (cursor[0]);
    return MV_OK;
}

int cli_reconcile(int argc, char **argv) {
    const char *url = cli_flag(argc, argv, "--store"), *kind = cli_flag(argc, argv, "--kind");
    const char *stale = cli_flag(argc, argv, "--stale-ms");
    int n = (int)(sizeof reconcilers / sizeof reconcilers[0]), only = -1;
    char *end = NULL;
    long long stale_ms = stale ? strtoll(stale, &end, 10) : 60000;
    if (!url || (stale && (*end || stale_ms < 0))) {
        fprintf(stderr, "usage: missive reconcile --store URL [--kind effects|sagas] "
                        "[--stale-ms N]\n");
        return 2;
    }
    for (int i = 0; kind && i < n; i++)
        if (strcmp(kind, reconcilers[i].name) == 0) only = i;
    if (kind && only < 0) {
        fprintf(stderr, "missive reconcile: unknown --kind \"%s\" (this build knows:", kind);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %s", reconcilers[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    mv_store *store = open_store("reconcile", url);
    if (!store) return 1;
    int64_t stale_before = mv_now_ms() - stale_ms;
    if (stale_before < 0) stale_before = 0;
    mv_err err = {0};
    int status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        if (only >= 0 && i != only) continue;
        if (print_findings(store, i, stale_before, &err) != MV_OK) {
            fprintf(stderr, "missive reconcile: %s\n", err.message);
            status = 1;
        }
    }
    mv_store_close(store);
    fflush(stdout);
    return status;
}

/* ---- approvals decide --------------------------------------------------------------------- */

int cli_approvals(int argc, char **argv) {
    const char *verb = positional(argc, argv, 0), *id = positional(argc, argv, 1),
               *decision = positional(argc, argv, 2);
    const char *url = cli_flag(argc, argv, "--store"), *tenant = cli_flag(argc, argv, "--tenant"),
               *by = cli_flag(argc, argv, "--by");
    if (!verb || strcmp(verb, "decide") != 0 || !id || !decision || !url || !tenant || !by) {
        fprintf(stderr, "usage: missive approvals decide --store URL ID approved|denied "
                        "--tenant T --by U\n");
        return 2;
    }
    mv_store *store = open_store("approvals decide", url);
    if (!store) return 1;
    /* Deciding and reading never touch tokens, so no signing secret is needed: a random one
     * satisfies the coordinator and can sign nothing anybody holds. */
    unsigned char secret[32];
    mv_err err = {0};
    mv_approvals *a = NULL;
    mv_approval_record rec;
    int status = 1;
    mv_approvals_options o = {.secret = secret, .secret_len = sizeof secret};
    if (mv_random_bytes(secret, sizeof secret, &err) == MV_OK &&
        mv_approvals_new(store, &o, &a, &err) == MV_OK &&
        mv_approval_decide(a, id, tenant, decision, by, &err) == MV_OK &&
        mv_approval_get(a, id, tenant, &rec, &err) == MV_OK) {
        json_t *j = mv_approval_to_json(&rec);
        print_json(j);
        json_decref(j);
        status = 0;
    } else {
        fprintf(stderr, "missive approvals decide: %s\n", err.message);
    }
    mv_approvals_free(a);
    mv_store_close(store);
    fflush(stdout);
    return status;
}

/* ---- saga resolve ------------------------------------------------------------------------- */

int cli_saga(int argc, char **argv) {
    const char *verb = positional(argc, argv, 0);
    const char *url = cli_flag(argc, argv, "--store"), *saga = cli_flag(argc, argv, "--saga");
    const char *result_text = cli_flag(argc, argv, "--result");
    mv_saga_resolution res = {.kind = cli_flag(argc, argv, "--kind"),
                              .step = cli_flag(argc, argv, "--step"),
                              .effect_id = cli_flag(argc, argv, "--effect"),
                              .outcome = cli_flag(argc, argv, "--outcome"),
                              .error_code = cli_flag(argc, argv, "--error-code")};
    if (!verb || strcmp(verb, "resolve") != 0 || !saga || !res.kind || !res.step ||
        !res.effect_id || !res.outcome || (!url && !cli_flag(argc, argv, "--config"))) {
        fprintf(stderr, "usage: missive saga resolve --store URL --saga ID --kind "
                        "execution|compensation --step S --effect E --outcome O [--result JSON] "
                        "[--error-code C]\n");
        return 2;
    }
    if (!url) {
        fprintf(stderr, "missive saga resolve: --config is not available in this build; use "
                        "--store URL\n");
        return 2;
    }
    mv_err err = {0};
    json_t *result = NULL;
    if (result_text && mv_json_parse(result_text, strlen(result_text), &result, &err) != MV_OK) {
        fprintf(stderr, "missive saga resolve: --result: %s\n", err.message);
        return 1;
    }
    res.result = result;
    mv_store *store = open_store("saga resolve", url);
    if (!store) {
        json_decref(result);
        return 1;
    }
    mv_saga_engine *engine = NULL;
    json_t *record = NULL;
    int status = 1;
    if (mv_saga_engine_new(store, NULL, &engine, &err) == MV_OK &&
        mv_saga_resolve(engine, NULL, saga, &res, &record, &err) == MV_OK) {
        print_json(record);
        status = 0;
    } else {
        fprintf(stderr, "missive saga resolve: %s\n", err.message);
    }
    json_decref(record);
    json_decref(result);
    mv_saga_engine_free(engine);
    mv_store_close(store);
    fflush(stdout);
    return status;
}
