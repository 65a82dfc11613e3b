/* cli_lists.c — the admin listings:
 *   missive messages list --store URL --user U [--tenant T] [--roles R,…] [--template-cd C]
 *                         [--type Y] [--read B] [--seen B] [--dismissed B] [--archived]
 *                         [--limit N] [--skip N] [--cursor C] [--json]
 *   missive messages get --store URL ID [--json]
 *   missive sagas list --store URL [--tenant T] [--state S] [--definition D] [--limit N]
 *                      [--cursor C] [--json]
 *   missive approvals list --store URL [--tenant T] [--principal P] [--state S] [--limit N]
 *                          [--cursor C] [--json]
 *   missive outbox list --store URL [--state S] [--kind K] [--limit N] [--cursor C] [--json]
 *
 * Each makes the one library call behind the matching HTTP list (mv_message_list,
 * mv_saga_list, mv_approval_list; the outbox has no route, mv_outbox_list), with the same filters
 * and the same checks, so a listing here and a page over HTTP never disagree. Output is one line
 * per item (a few columns) and the next page's cursor, or with --json the HTTP shape:
 * {"messages"|"sagas"|"approvals"|"outbox": [...], "nextCursor": "…"|null}. Exit status: 0, 1 on
 * an error (on stderr, e.g. a bad filter), 2 on a usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/deliver.h"
#include "missive/inbox.h"
#include "missive/message.h"
#include "missive/operations.h"

#define MAX_ROLES 64

/* The value of --limit (default 50); false when it is not an integer. */
static bool limit_flag(int argc, char **argv, int *out) {
    const char *v = cli_flag(argc, argv, "--limit");
    *out = 50;
    if (!v) return true;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < -1000000 || n > 1000000) return false;
    *out = (int)n;
    return true;
}

static int usage(const char *text) {
    fprintf(stderr, "usage: %s\n", text);
    return 2;
}

static mv_store *open_store(const char *cmd, const char *url) {
    mv_store *store = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &store, &err) == MV_OK &&
        mv_store_check_schema(store, &err) == MV_OK)
        return store;
    fprintf(stderr, "missive %s: %s\n", cmd, err.message);
    mv_store_close(store);
    return NULL;
}

static void print_json(json_t *v) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    if (s) printf("%s\n", s);
    free(s);
}

/* Prints a page (steals items and next): the HTTP shape with --json, else one line per item with
 * the members named in cols (tab-separated, "-" for a missing one) and the cursor. */
static void print_page(bool json, const char *key, json_t *items, char *next,
                       const char *const *cols) {
    if (json) {
        json_t *page = json_pack("{s:o,s:o}", key, items, "nextCursor",
                                 next ? json_string(next) : json_null());
        print_json(page);
        json_decref(page);
    } else {
        size_t i;
        json_t *item;
        json_array_foreach(items, i, item) {
            for (size_t c = 0; cols[c]; c++) {
                json_t *v = json_object_get(item, cols[c]);
                char *s = json_is_string(v)       ? strdup(json_string_value(v))
                          : v && !json_is_null(v) ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT)
                                                  : strdup("-");
                printf("%s%s", c ? "\t" : "", s ? s : "-");
                free(s);
            }
            printf("\n");
        }
        if (next) printf("next cursor: %s\n", next);
        json_decref(items);
    }
    free(next);
}

static int list_failed(const char *cmd, mv_store *store, const mv_err *err) {
    fprintf(stderr, "missive %s: %s\n", cmd, err->message);
    mv_store_close(store);
    return 1;
}

/* ---- messages ------------------------------------------------------------------------------ */

/* "--read true|false" etc.: MV_FLAG_UNSET when absent; false on another value. */
static bool flag_value(int argc, char **argv, const char *name, mv_flag *out) {
    const char *v = cli_flag(argc, argv, name);
    *out = MV_FLAG_UNSET;
    if (!v) return true;
    if (strcmp(v, "true") == 0)
        *out = MV_FLAG_TRUE;
    else if (strcmp(v, "false") == 0)
        *out = MV_FLAG_FALSE;
    else {
        fprintf(stderr, "missive messages list: %s must be true or false\n", name);
        return false;
    }
    return true;
}

static const char MESSAGES_USAGE[] =
    "missive messages list --store URL --user U [--tenant T] [--roles R,...] [--template-cd C] "
    "[--type Y] [--read B] [--seen B] [--dismissed B] [--archived] [--limit N] [--skip N] "
    "[--cursor C] [--json]\n       missive messages get --store URL ID [--json]";

/* The first argument after the verb that is neither a flag nor a flag's value (every flag but
 * --json and --archived takes one). */
static const char *positional(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0) return argv[i];
        if (!strchr(argv[i], '=') && strcmp(argv[i], "--json") && strcmp(argv[i], "--archived"))
            i++;
    }
    return NULL;
}

static int messages_get(int argc, char **argv, const char *url) {
    const char *id = positional(argc, argv);
    if (!id) return usage(MESSAGES_USAGE);
    mv_store *store = open_store("messages get", url);
    if (!store) return 1;
    mv_registry *reg = mv_registry_new();
    mv_service *svc = NULL;
    mv_err err = {0};
    json_t *msg = NULL;
    mv_service_options o = {.store = store, .registry = reg};
    mv_code rc =
        reg ? mv_service_new(&o, &svc, &err) : mv_err_set(&err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) rc = mv_message_get(svc, id, NULL, &msg, &err); /* no viewer: any tenant */
    if (rc == MV_OK) print_json(msg);
    json_decref(msg);
    mv_service_free(svc);
    mv_registry_free(reg);
    if (rc != MV_OK) return list_failed("messages get", store, &err);
    mv_store_close(store);
    return 0;
}

static int messages_list(int argc, char **argv, const char *url) {
    const char *user = cli_flag(argc, argv, "--user"), *roles = cli_flag(argc, argv, "--roles");
    const char *skip_s = cli_flag(argc, argv, "--skip");
    int limit;
    mv_inbox_filter f = {.template_cd = cli_flag(argc, argv, "--template-cd"),
                         .type = cli_flag(argc, argv, "--type")};
    if (!user || !limit_flag(argc, argv, &limit)) return usage(MESSAGES_USAGE);
    if (!flag_value(argc, argv, "--read", &f.read) || !flag_value(argc, argv, "--seen", &f.seen) ||
        !flag_value(argc, argv, "--dismissed", &f.dismissed))
        return 1;
    char *role_buf = roles ? strdup(roles) : NULL;
    const char *role_list[MAX_ROLES];
    size_t nroles = 0;
    for (char *save = NULL, *r = role_buf ? strtok_r(role_buf, ",", &save) : NULL;
         r && nroles < MAX_ROLES; r = strtok_r(NULL, ",", &save))
        role_list[nroles++] = r;
    mv_user u = {.id = user,
                 .roles = role_list,
                 .nroles = nroles,
                 .tenant = cli_flag(argc, argv, "--tenant")};
    json_t *limit_j = json_integer(limit), *skip_j = NULL;
    if (skip_s) {
        char *end;
        long long n = strtoll(skip_s, &end, 10);
        if (!*skip_s || *end) {
            free(role_buf);
            json_decref(limit_j);
            return usage(MESSAGES_USAGE);
        }
        skip_j = json_integer(n);
    }
    mv_list_request req = {.user = &u,
                           .limit = limit_j,
                           .skip = skip_j,
                           .cursor = cli_flag(argc, argv, "--cursor"),
                           .archived = cli_has(argc, argv, "--archived"),
                           .filter = &f};
    mv_store *store = open_store("messages list", url);
    mv_registry *reg = store ? mv_registry_new() : NULL;
    mv_service *svc = NULL;
    mv_err err = {0};
    json_t *items = NULL;
    char *next = NULL;
    mv_service_options o = {.store = store, .registry = reg, .max_list_limit = 1000};
    mv_code rc = !store ? MV_STORE_UNAVAILABLE
                 : reg  ? mv_service_new(&o, &svc, &err)
                        : mv_err_set(&err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) rc = mv_message_list(svc, &req, &items, &next, &err);
    mv_service_free(svc);
    mv_registry_free(reg);
    free(role_buf);
    json_decref(limit_j);
    json_decref(skip_j);
    if (!store) return 1;
    if (rc != MV_OK) return list_failed("messages list", store, &err);
    static const char *const COLS[] = {"id",       "templateCd", "actionState", "createdAt",
                                       "fromUser", "toUser",     NULL};
    print_page(cli_has(argc, argv, "--json"), "messages", items, next, COLS);
    mv_store_close(store);
    return 0;
}

int cli_messages(int argc, char **argv) {
    static const char *const FLAGS[] = {
        "--store", "--user",      "--tenant", "--roles", "--template-cd", "--type", "--read",
        "--seen",  "--dismissed", "--limit",  "--skip",  "--cursor",      NULL};
    static const char *const BARE[] = {"--archived", "--json", NULL};
    const char *verb = argc > 1 ? argv[1] : NULL, *url = cli_flag(argc, argv, "--store");
    if (!cli_flags_ok(argc, argv, FLAGS, BARE) || !verb || !url) return usage(MESSAGES_USAGE);
    if (strcmp(verb, "list") == 0) return messages_list(argc, argv, url);
    if (strcmp(verb, "get") == 0) return messages_get(argc, argv, url);
    return usage(MESSAGES_USAGE);
}

/* ---- sagas, approvals, outbox -------------------------------------------------------------- */

static const char SAGAS_USAGE[] = "missive sagas list --store URL [--tenant T] [--state S] "
                                  "[--definition D] [--limit N] [--cursor C] [--json]";

int cli_sagas(int argc, char **argv) {
    static const char *const FLAGS[] = {"--store", "--tenant", "--state", "--definition",
                                        "--limit", "--cursor", NULL};
    static const char *const BARE[] = {"--json", NULL};
    const char *url = cli_flag(argc, argv, "--store"), *tenant = cli_flag(argc, argv, "--tenant");
    mv_saga_list_query q = {.tenant_id = tenant ? tenant : MV_DEFAULT_TENANT,
                            .state = cli_flag(argc, argv, "--state"),
                            .definition = cli_flag(argc, argv, "--definition"),
                            .cursor = cli_flag(argc, argv, "--cursor")};
    if (!cli_flags_ok(argc, argv, FLAGS, BARE) || argc < 2 || strcmp(argv[1], "list") != 0 ||
        !url || !limit_flag(argc, argv, &q.limit))
        return usage(SAGAS_USAGE);
    mv_store *store = open_store("sagas list", url);
    if (!store) return 1;
    mv_err err = {0};
    json_t *items = NULL;
    char *next = NULL;
    if (mv_saga_list(store, &q, &items, &next, &err) != MV_OK)
        return list_failed("sagas list", store, &err);
    static const char *const COLS[] = {"sagaId",    "definition", "state",
                                       "createdAt", "updatedAt",  NULL};
    print_page(cli_has(argc, argv, "--json"), "sagas", items, next, COLS);
    mv_store_close(store);
    return 0;
}

static const char APPROVALS_USAGE[] =
    "missive approvals list --store URL [--tenant T] [--principal P] [--state S] [--limit N] "
    "[--cursor C] [--json]";

int cli_approvals_list(int argc, char **argv) {
    static const char *const FLAGS[] = {"--store", "--tenant", "--principal", "--state",
                                        "--limit", "--cursor", NULL};
    static const char *const BARE[] = {"--json", NULL};
    const char *url = cli_flag(argc, argv, "--store"), *tenant = cli_flag(argc, argv, "--tenant");
    mv_approval_list_query q = {.tenant_id = tenant ? tenant : MV_DEFAULT_TENANT,
                                .principal_id = cli_flag(argc, argv, "--principal"),
                                .state = cli_flag(argc, argv, "--state"),
                                .now = mv_now_ms(),
                                .cursor = cli_flag(argc, argv, "--cursor")};
    if (!cli_flags_ok(argc, argv, FLAGS, BARE) || !url || !limit_flag(argc, argv, &q.limit))
        return usage(APPROVALS_USAGE);
    mv_store *store = open_store("approvals list", url);
    if (!store) return 1;
    mv_err err = {0};
    json_t *items = NULL;
    char *next = NULL;
    if (mv_approval_list(store, &q, &items, &next, &err) != MV_OK)
        return list_failed("approvals list", store, &err);
    static const char *const COLS[] = {"approvalId",  "state",     "capability",
                                       "principalId", "createdAt", NULL};
    print_page(cli_has(argc, argv, "--json"), "approvals", items, next, COLS);
    mv_store_close(store);
    return 0;
}

static const char OUTBOX_USAGE[] = "missive outbox list --store URL [--state S] [--kind K] "
                                   "[--limit N] [--cursor C] [--json]";

int cli_outbox_list(int argc, char **argv) {
    static const char *const FLAGS[] = {"--store", "--state",  "--kind",
                                        "--limit", "--cursor", NULL};
    static const char *const BARE[] = {"--json", NULL};
    const char *url = cli_flag(argc, argv, "--store");
    mv_outbox_list_query q = {.state = cli_flag(argc, argv, "--state"),
                              .kind = cli_flag(argc, argv, "--kind"),
                              .cursor = cli_flag(argc, argv, "--cursor")};
    if (!cli_flags_ok(argc, argv, FLAGS, BARE) || !url || !limit_flag(argc, argv, &q.limit))
        return usage(OUTBOX_USAGE);
    mv_store *store = open_store("outbox list", url);
    if (!store) return 1;
    mv_err err = {0};
    json_t *items = NULL;
    char *next = NULL;
    if (mv_outbox_list(store, &q, &items, &next, &err) != MV_OK)
        return list_failed("outbox list", store, &err);
    static const char *const COLS[] = {"id",        "kind",      "state", "attempts",
                                       "createdAt", "lastError", NULL};
    print_page(cli_has(argc, argv, "--json"), "outbox", items, next, COLS);
    mv_store_close(store);
    return 0;
}
