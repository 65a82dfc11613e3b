/* cmd/cli.h — the `missive` subcommands. Each takes the arguments after its own name
 * (argv[0] is the subcommand) and returns the process exit status. */
#ifndef MISSIVE_CMD_CLI_H
#define MISSIVE_CMD_CLI_H

#include <stdbool.h>

#include "missive/store.h"

int cli_migrate(int argc, char **argv);   /* cli_store.c */
int cli_gc(int argc, char **argv);        /* cli_store.c */
int cli_templates(int argc, char **argv); /* cli_templates.c */
int cli_render(int argc, char **argv);    /* cli_render.c */
int cli_logic(int argc, char **argv);     /* cli_logic.c */
int cli_reconcile(int argc, char **argv); /* cli_durable.c */
int cli_approvals(int argc, char **argv); /* cli_durable.c */
int cli_saga(int argc, char **argv);      /* cli_durable.c */
int cli_outbox(int argc, char **argv);    /* cli_outbox.c */
int cli_backup(int argc, char **argv);    /* cli_backup.c */
int cli_restore(int argc, char **argv);   /* cli_backup.c */
int cli_messages(int argc, char **argv);  /* cli_lists.c: messages list|get */
int cli_sagas(int argc, char **argv);     /* cli_lists.c: sagas list */
/* cli_lists.c: the "list" verbs of approvals and outbox (argv[1] is "list") */
int cli_approvals_list(int argc, char **argv);
int cli_outbox_list(int argc, char **argv);
int cli_timers(int argc, char **argv); /* cli_timers.c */
/* cli_timers.c: prints reconcile's timer findings (one JSON object per line). */
mv_code cli_reconcile_timers(mv_store *store, mv_err *err);

/* Returns the value of "--name VALUE" / "--name=VALUE" in argv, or NULL. */
const char *cli_flag(int argc, char **argv, const char *name);
/* True when "--name" is present. */
bool cli_has(int argc, char **argv, const char *name);
/* True when every "--" argument is one of valued (followed by its value, or "--name=VALUE") or
 * bare (NULL-terminated lists, either may be NULL); else says which one on stderr and returns
 * false, so a misspelled flag is a usage error instead of being ignored. */
bool cli_flags_ok(int argc, char **argv, const char *const *valued, const char *const *bare);

#endif
