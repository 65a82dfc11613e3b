/* missive.c — the command-line tool: a table of subcommands, each in its own cli_*.c file. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "missive/version.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} commands[] = {
    {"migrate", cli_migrate, "migrate --store URL"},
    {"gc", cli_gc, "gc --store URL [--older-than-ms N]"},
    {"templates", cli_templates, "templates check [--sagas DIR] PATH..."},
    {"render", cli_render, "render --text TEMPLATE [--data FILE.json] [--plain]"},
    {"logic", cli_logic, "logic --rule JSON [--data JSON]"},
    {"reconcile", cli_reconcile,
     "reconcile --store URL [--kind effects|sagas|actions|requests|outbox|timers] [--stale-ms N]"},
    {"approvals", cli_approvals,
     "approvals decide --store URL ID approved|denied --tenant T --by U\n"
     "  missive approvals list --store URL [--tenant T] [--principal P] [--state S] [--limit N] "
     "[--cursor C] [--json]"},
    {"saga", cli_saga,
     "saga resolve --config FILE --saga ID --kind K --step S --effect E --outcome O "
     "[--result JSON] [--error-code C]"},
    {"outbox", cli_outbox,
     "outbox run --config FILE\n"
     "  missive outbox list --store URL [--state S] [--kind K] [--limit N] [--cursor C] [--json]"},
    {"backup", cli_backup, "backup --store URL --to FILE"},
    {"restore", cli_restore, "restore --from FILE --store URL [--force]"},
    {"messages", cli_messages,
     "messages list --store URL --user U [--tenant T] [--roles R,...] [--template-cd C] "
     "[--type Y] [--read B] [--seen B] [--dismissed B] [--archived] [--limit N] [--skip N] "
     "[--cursor C] [--json]\n"
     "  missive messages get --store URL ID [--json]"},
    {"sagas", cli_sagas,
     "sagas list --store URL [--tenant T] [--state S] [--definition D] [--limit N] [--cursor C] "
     "[--json]"},
    {"timers", cli_timers,
     "timers list --store URL [--tenant T] [--state S] [--kind K] [--limit N] [--cursor C] "
     "[--json]"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: missive COMMAND [ARGS]\n       missive --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  missive %s\n", commands[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("missive %s\n", mv_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "missive: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
