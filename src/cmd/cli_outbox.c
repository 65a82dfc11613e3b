/* cli_outbox.c — `missive outbox run --config FILE`: delivers the outbox rows that are due now,
 * with the daemon's configuration (store, webhook limits and secret, email settings), then exits.
 *
 * For operators and cron jobs when no daemon is running, or to push a backlog through by hand.
 * It is safe next to running daemons: every row is claimed with a lease before delivery, so a row
 * is delivered by one claimant at a time. A row that fails is rescheduled after its backoff, so
 * the loop below ends: it stops at the first batch that delivered nothing. Each failed attempt
 * is reported on stderr as one JSON object per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/config.h"
#include "missive/deliver.h"

#define BATCH 1000

static void report_failure(void *ctx, const mv_outbox_event *ev) {
    (void)ctx;
    json_t *line =
        json_pack("{s:s, s:s, s:s, s:i, s:b, s:s}", "row", ev->row_id, "outboxKind",
                  ev->kind == MV_OUTBOX_EMAIL ? "email" : "webhook", "stage", ev->stage, "attempt",
                  ev->attempt, "final", ev->final, "error", ev->error ? ev->error : "");
    char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
    if (s) fprintf(stderr, "%s\n", s);
    free(s);
    json_decref(line);
}

/* The daemon's email section as mv_email_settings_load reads it (as daemon.c's start_outbox). */
static mv_code load_email(const mv_config *cfg, const mv_webhook_config *wh,
                          mv_email_settings **out, mv_err *err) {
    json_t *section = json_pack("{s:s?, s:s?}", "smtp", cfg->email.smtp, "from", cfg->email.from);
    json_t *dir = cfg->email.directory_webhook
                      ? json_pack("{s:s}", "webhook", cfg->email.directory_webhook)
                      : json_pack("{s:s}", "file", cfg->email.directory_file);
    if (!section || !dir) {
        json_decref(section);
        json_decref(dir);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    json_object_set_new(section, "directory", dir);
    if (cfg->email.n_exclusions) {
        json_t *ex = json_array();
        for (size_t i = 0; i < cfg->email.n_exclusions; i++)
            json_array_append_new(ex, json_string(cfg->email.exclusions[i]));
        json_object_set_new(section, "exclusions", ex);
    }
    mv_code rc = mv_email_settings_load(section, cfg->dir, wh, out, err);
    json_decref(section);
    return rc;
}

int cli_outbox(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "list") == 0) return cli_outbox_list(argc, argv);
    const char *verb = argc > 1 ? argv[1] : NULL, *path = cli_flag(argc, argv, "--config");
    static const char *const FLAGS[] = {"--config", NULL};
    if (!cli_flags_ok(argc, argv, FLAGS, NULL) || !verb || strcmp(verb, "run") != 0 || !path) {
        fprintf(stderr, "usage: missive outbox run --config FILE\n       missive outbox list "
                        "--store URL [--state S] [--kind K] [--limit N] [--cursor C] [--json]\n");
        return 2;
    }
    mv_err err = {0};
    mv_config *cfg = NULL;
    mv_store *store = NULL;
    mv_email_settings *email = NULL;
    int total = 0;
    mv_code rc = mv_config_load(path, NULL, &cfg, &err);
    mv_webhook_config wh = {0};
    if (rc == MV_OK) {
        wh = (mv_webhook_config){.secret = cfg->webhook_secret.bytes,
                                 .secret_len = cfg->webhook_secret.len,
                                 .secrets = cfg->webhook_keys,
                                 .nsecrets = cfg->n_webhook_keys,
                                 .connect_timeout_ms = cfg->webhooks.connect_timeout_ms,
                                 .timeout_ms = cfg->webhooks.timeout_ms,
                                 .max_response_bytes = cfg->webhooks.max_response_bytes};
        mv_store_options so = {.pool_size = 1,
                               .synchronous = cfg->store_options.synchronous,
                               .busy_timeout_ms = cfg->store_options.busy_timeout_ms,
                               .statement_timeout_ms = cfg->store_options.statement_timeout_ms};
        rc = mv_store_open(cfg->store, &so, &store, &err);
    }
    if (rc == MV_OK) rc = mv_store_check_schema(store, &err);
    if (rc == MV_OK && cfg->email.enabled) rc = load_email(cfg, &wh, &email, &err);
    if (rc == MV_OK) {
        mv_outbox_config oc = {.webhook = &wh,
                               .email = email ? &email->email : NULL,
                               .max_attempts = cfg->outbox.max_attempts,
                               .backoff_base_ms = cfg->outbox.backoff_ms,
                               .on_event = report_failure};
        int delivered;
        do {
            delivered = 0;
            rc = mv_outbox_run_due(store, &oc, BATCH, &delivered, &err);
            total += delivered;
        } while (rc == MV_OK && delivered > 0);
    }
    if (rc == MV_OK)
        printf("delivered %d outbox row%s\n", total, total == 1 ? "" : "s");
    else
        fprintf(stderr, "missive outbox run: %s\n", err.message);
    mv_email_settings_free(email);
    mv_store_close(store);
    mv_config_free(cfg);
    fflush(stdout);
    return rc == MV_OK ? 0 : 1;
}
