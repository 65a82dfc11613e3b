/* cli_durable.c — the operator's side of the durable primitives and of what is left in doubt:
 *   missive reconcile --store URL [--kind effects|sagas|actions|requests|outbox] [--stale-ms N]
 *   missive approvals decide --store URL ID approved|denied --tenant T --by U
 *   missive saga resolve --config FILE|--store URL --saga ID --kind K --step S --effect E
 *                        --outcome O [--result JSON] [--error-code C]
 * Findings and records are printed as JSON, one object per line; errors go to stderr. Exit
 * status: 0 success, 1 an error, 2 a usage error. Most commands work on the store alone; saga
 * resolve --config reads the daemon's config to use the saga's own definition (its retry limit
 * decides whether a failed compensation goes to manual review). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/config.h"
#include "missive/deliver.h"
#include "missive/durable.h"
#include "missive/reconcile.h"
#include "missive/saga_webhook.h"

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

typedef struct scan_args {
    mv_store *store;
    const char *label; /* the `kind` field of each finding */
    int64_t now, stale_ms;
} scan_args;

/* Prints finding f (an object) with "kind" first. */
static void print_finding(const char *label, json_t *f) {
    json_t *line = json_pack("{s:s}", "kind", label);
    json_object_update(line, f);
    print_json(line);
    json_decref(line);
}

typedef mv_code (*page_fn)(mv_store *, const mv_reconcile_options *, mv_reconcile_page *, mv_err *);

/* Effects and sagas (durable.h), page by page. */
static mv_code print_durable(const scan_args *a, page_fn page_of, mv_err *err) {
    char cursor[256] = "";
    int64_t stale_before = a->now - a->stale_ms < 0 ? 0 : a->now - a->stale_ms;
    do {
        mv_reconcile_options o = {
            .stale_before = stale_before, .limit = 1000, .cursor = cursor[0] ? cursor : NULL};
        mv_reconcile_page page;
        mv_code rc = page_of(a->store, &o, &page, err);
        if (rc) return rc;
        size_t i;
        json_t *f;
        json_array_foreach(page.findings, i, f) print_finding(a->label, f);
        snprintf(cursor, sizeof cursor, "%s", page.cursor);
        mv_reconcile_page_clear(&page);
    } while (cursor[0]);
    return MV_OK;
}

static mv_code print_effects(const scan_args *a, mv_err *err) {
    return print_durable(a, mv_reconcile_effects_page, err);
}

static mv_code print_sagas(const scan_args *a, mv_err *err) {
    return print_durable(a, mv_reconcile_sagas_page, err);
}

typedef mv_code (*results_fn)(mv_store *, const mv_reconcile_scan *, mv_reconcile_results *,
                              mv_err *);

/* Actions and client requests (reconcile.h), page by page. */
static mv_code print_message_scan(const scan_args *a, results_fn page_of, mv_err *err) {
    char *cursor = NULL;
    mv_code rc = MV_OK;
    do {
        mv_reconcile_scan s = {.now = a->now,
                               .stale_before = a->now - a->stale_ms < 0 ? 0 : a->now - a->stale_ms,
                               .cursor = cursor,
                               .limit = 1000};
        mv_reconcile_results page;
        rc = page_of(a->store, &s, &page, err);
        free(cursor);
        cursor = NULL;
        if (rc) break;
        size_t i;
        json_t *f;
        json_array_foreach(page.findings, i, f) print_finding(a->label, f);
        cursor = page.next_cursor; /* taken over */
        page.next_cursor = NULL;
        mv_reconcile_results_clear(&page);
    } while (cursor);
    return rc;
}

static mv_code print_actions(const scan_args *a, mv_err *err) {
    return print_message_scan(a, mv_reconcile_actions_page, err);
}

static mv_code print_requests(const scan_args *a, mv_err *err) {
    return print_message_scan(a, mv_reconcile_requests_page, err);
}

typedef struct outbox_ctx {
    const char *label;
    int64_t now;
    char last_id[37];
} outbox_ctx;

static void print_outbox_row(void *p, const mv_outbox_row *row) {
    outbox_ctx *c = p;
    bool failed = strcmp(row->state, "failed") == 0;
    json_t *f = json_pack("{s:s, s:s, s:s, s:i, s:s?, s:s?}", "id", row->id, "outboxKind",
                          row->kind == MV_OUTBOX_EMAIL ? "email" : "webhook", "state", row->state,
                          "attempts", row->attempts, "lastError", row->last_error, "failureStage",
                          row->failure_stage);
    if (f && !failed) json_object_set_new(f, "leaseExpiresAt", json_integer(row->lease_expires_at));
    if (f) {
        json_object_set_new(f, "updatedAt", json_integer(row->updated_at));
        json_object_set_new(f, "reason", json_string(failed ? "failed" : "stale-lease"));
        print_finding(c->label, f);
    }
    json_decref(f);
    mv_strlcpy(c->last_id, row->id, sizeof c->last_id);
}

/* Failed rows and rows whose delivery lease expired more than stale_ms ago (deliver.h). */
static mv_code print_outbox(const scan_args *a, mv_err *err) {
    outbox_ctx c = {.label = a->label, .now = a->now};
    int count = 0;
    do {
        mv_code rc = mv_outbox_scan(a->store, a->now, a->stale_ms, c.last_id[0] ? c.last_id : NULL,
                                    1000, print_outbox_row, &c, &count, err);
        if (rc) return rc;
    } while (count == 1000);
    return MV_OK;
}

/* Pending timers whose lease ran out at least once, and timers given up (cli_timers.c). */
static mv_code print_timers(const scan_args *a, mv_err *err) {
    return cli_reconcile_timers(a->store, err);
}

static const struct {
    const char *name;  /* --kind value */
    const char *label; /* the `kind` field of each finding */
    mv_code (*print)(const scan_args *a, mv_err *err);
} reconcilers[] = {
    {"effects", "effect", print_effects}, {"sagas", "saga", print_sagas},
    {"actions", "action", print_actions}, {"requests", "request", print_requests},
    {"outbox", "outbox", print_outbox},   {"timers", "timer", print_timers},
};

int cli_reconcile(int argc, char **argv) {
    const char *url = cli_flag(argc, argv, "--store"), *kind = cli_flag(argc, argv, "--kind");
    const char *stale = cli_flag(argc, argv, "--stale-ms");
    int n = (int)(sizeof reconcilers / sizeof reconcilers[0]), only = -1;
    char *end = NULL;
    long long stale_ms = stale ? strtoll(stale, &end, 10) : MV_DEFAULT_RECONCILE_STALE_MS;
    static const char *const FLAGS[] = {"--store", "--kind", "--stale-ms", NULL};
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !url ||
        (stale && (!*stale || *end || stale_ms < 0))) {
        fprintf(stderr, "usage: missive reconcile --store URL "
                        "[--kind effects|sagas|actions|requests|outbox|timers] [--stale-ms N]\n");
        return 2;
    }
    for (int i = 0; kind && i < n; i++)
        if (strcmp(kind, reconcilers[i].name) == 0) only = i;
    if (kind && only < 0) {
        fprintf(stderr, "missive reconcile: unknown --kind \"%s\" (known:", kind);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %s", reconcilers[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    mv_store *store = open_store("reconcile", url);
    if (!store) return 1;
    scan_args a = {.store = store, .now = mv_now_ms(), .stale_ms = stale_ms};
    mv_err err = {0};
    int status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        if (only >= 0 && i != only) continue;
        a.label = reconcilers[i].label;
        if (reconcilers[i].print(&a, &err) != MV_OK) {
            fprintf(stderr, "missive reconcile: %s: %s\n", reconcilers[i].name, err.message);
            status = 1;
        }
    }
    mv_store_close(store);
    fflush(stdout);
    return status;
}

/* ---- approvals decide --------------------------------------------------------------------- */

int cli_approvals(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "list") == 0) return cli_approvals_list(argc, argv);
    const char *verb = positional(argc, argv, 0), *id = positional(argc, argv, 1),
               *decision = positional(argc, argv, 2);
    const char *url = cli_flag(argc, argv, "--store"), *tenant = cli_flag(argc, argv, "--tenant"),
               *by = cli_flag(argc, argv, "--by");
    static const char *const FLAGS[] = {"--store", "--tenant", "--by", NULL};
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !verb || strcmp(verb, "decide") != 0 || !id ||
        !decision || !url || !tenant || !by) {
        fprintf(stderr, "usage: missive approvals decide --store URL ID approved|denied "
                        "--tenant T --by U\n       missive approvals list --store URL [--tenant T] "
                        "[--principal P] [--state S] [--limit N] [--cursor C] [--json]\n");
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

/* The daemon's view for `saga resolve --config`: its store and the saga definitions it loads. */
typedef struct daemon_view {
    mv_config *cfg;
    mv_store *store;
    mv_webhook_config wh;
    mv_saga_book *book;
} daemon_view;

static void daemon_view_close(daemon_view *v) {
    mv_saga_book_free(v->book);
    mv_store_close(v->store);
    mv_config_free(v->cfg);
}

static mv_code daemon_view_open(daemon_view *v, const char *path, mv_err *err) {
    memset(v, 0, sizeof *v);
    mv_code rc = mv_config_load(path, NULL, &v->cfg, err);
    if (rc) return rc;
    const mv_config *c = v->cfg;
    if (!c->sagas)
        return mv_err_set(err, MV_INVALID_CONFIG, "%s: no \"sagas\" directory is configured", path);
    v->wh = (mv_webhook_config){.secret = c->webhook_secret.bytes,
                                .secret_len = c->webhook_secret.len,
                                .secrets = c->webhook_keys,
                                .nsecrets = c->n_webhook_keys,
                                .connect_timeout_ms = c->webhooks.connect_timeout_ms,
                                .timeout_ms = c->webhooks.timeout_ms,
                                .max_response_bytes = c->webhooks.max_response_bytes};
    if (!(v->book = mv_saga_book_new(&v->wh)))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if ((rc = mv_saga_book_load_dir(v->book, c->sagas, err))) return rc;
    mv_store_options so = {.pool_size = 1,
                           .synchronous = c->store_options.synchronous,
                           .busy_timeout_ms = c->store_options.busy_timeout_ms,
                           .statement_timeout_ms = c->store_options.statement_timeout_ms};
    return mv_store_open(c->store, &so, &v->store, err);
}

/* Resolves with the definition the saga names (its retry limit decides manual review), or with
 * none (the limit stored with the saga) when only a store URL is given. */
static mv_code resolve(mv_store *store, const mv_saga_book *book, const char *saga,
                       const mv_saga_resolution *res, json_t **record, mv_err *err) {
    mv_saga_engine *engine = NULL;
    json_t *current = NULL;
    mv_code rc = mv_saga_engine_new(store, NULL, &engine, err);
    const mv_saga_definition *def = NULL;
    if (rc == MV_OK && book && (rc = mv_saga_get(engine, saga, &current, err)) == MV_OK) {
        const char *name = mv_json_str(current, "definition");
        if (!(def = mv_saga_book_find(book, name)))
            rc = mv_err_set(err, MV_SAGA_DEFINITION_NOT_FOUND,
                            "saga %s names the definition \"%s\", which the configured sagas "
                            "directory does not define",
                            saga, name ? name : "");
    }
    if (rc == MV_OK) rc = mv_saga_resolve(engine, def, saga, res, record, err);
    json_decref(current);
    mv_saga_engine_free(engine);
    return rc;
}

int cli_saga(int argc, char **argv) {
    const char *verb = positional(argc, argv, 0);
    const char *url = cli_flag(argc, argv, "--store"), *config = cli_flag(argc, argv, "--config"),
               *saga = cli_flag(argc, argv, "--saga");
    const char *result_text = cli_flag(argc, argv, "--result");
    mv_saga_resolution res = {.kind = cli_flag(argc, argv, "--kind"),
                              .step = cli_flag(argc, argv, "--step"),
                              .effect_id = cli_flag(argc, argv, "--effect"),
                              .outcome = cli_flag(argc, argv, "--outcome"),
                              .error_code = cli_flag(argc, argv, "--error-code")};
    static const char *const FLAGS[] = {"--store",      "--config", "--saga",    "--kind",
                                        "--step",       "--effect", "--outcome", "--result",
                                        "--error-code", NULL};
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !verb || strcmp(verb, "resolve") != 0 || !saga ||
        !res.kind || !res.step || !res.effect_id || !res.outcome || !url == !config) {
        fprintf(stderr, "usage: missive saga resolve --config FILE|--store URL --saga ID --kind "
                        "execution|compensation --step S --effect E --outcome O [--result JSON] "
                        "[--error-code C]\n");
        return 2;
    }
    mv_err err = {0};
    json_t *result = NULL, *record = NULL;
    if (result_text && mv_json_parse(result_text, strlen(result_text), &result, &err) != MV_OK) {
        fprintf(stderr, "missive saga resolve: --result: %s\n", err.message);
        return 1;
    }
    res.result = result;
    daemon_view v = {0};
    mv_code rc;
    if (config) {
        if ((rc = daemon_view_open(&v, config, &err)) == MV_OK)
            rc = resolve(v.store, v.book, saga, &res, &record, &err);
    } else if ((rc = mv_store_open(url, NULL, &v.store, &err)) == MV_OK) {
        rc = resolve(v.store, NULL, saga, &res, &record, &err);
    }
    if (rc == MV_OK)
        print_json(record);
    else
        fprintf(stderr, "missive saga resolve: %s\n", err.message);
    json_decref(record);
    json_decref(result);
    daemon_view_close(&v);
    fflush(stdout);
    return rc == MV_OK ? 0 : 1;
}
