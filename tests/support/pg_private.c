/* pg_private.c — see pg_private.h. The cluster is made by scripts/pg-test-cluster (the same
 * settings as the shared test server: fsync off, a socket in its own directory); pg_ctl runs as
 * the cluster's owner, which is `postgres` when the tests run as root. */
#include "support/pg_private.h"

#include "missive/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The value of NAME='…' in the script's output line, into out. */
static bool env_value(const char *line, const char *name, char *out, size_t size) {
    const char *p = strstr(line, name);
    if (!p || p[strlen(name)] != '=' || p[strlen(name) + 1] != '\'') return false;
    p += strlen(name) + 2;
    const char *end = strchr(p, '\'');
    if (!end || (size_t)(end - p) >= size) return false;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return true;
}

/* Runs scripts/pg-test-cluster with args and reads the cluster it prints into pg. */
static bool run_script(pg_private *pg, const char *args) {
    memset(pg, 0, sizeof *pg);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "scripts/pg-test-cluster %s 2>/dev/null", args);
    FILE *f = popen(cmd, "r");
    if (!f) return false;
    char line[1024], port[32] = "";
    while (fgets(line, sizeof line, f)) {
        env_value(line, "MISSIVE_TEST_PG", pg->url, sizeof pg->url);
        env_value(line, "MISSIVE_PG_CLUSTER", pg->dir, sizeof pg->dir);
    }
    bool ok = pclose(f) == 0 && pg->url[0] && pg->dir[0];
    const char *p = strstr(pg->url, "port=");
    if (p) mv_strlcpy(port, p + 5, sizeof port);
    pg->port = atoi(port);
    return ok;
}

bool pg_private_available(void) {
    return system("scripts/pg-test-cluster bindir >/dev/null 2>&1") == 0;
}

bool pg_private_start(pg_private *pg) { return run_script(pg, "start"); }

bool pg_private_start_sync(pg_private *pg) { return run_script(pg, "start --sync"); }

bool pg_private_start_standby(const pg_private *primary, pg_private *standby) {
    char args[300];
    snprintf(args, sizeof args, "standby '%s'", primary->dir);
    return run_script(standby, args);
}

/* Runs pg_ctl with args as the cluster's owner; true on exit status 0. */
static bool pg_ctl(const pg_private *pg, const char *args) {
    char bindir[512] = "", path[300];
    snprintf(path, sizeof path, "%s/bindir", pg->dir);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    if (!fgets(bindir, sizeof bindir, f)) bindir[0] = '\0';
    fclose(f);
    bindir[strcspn(bindir, "\n")] = '\0';
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd / && %s%s/pg_ctl -D %s/data -w -t 60 %s >/dev/null 2>&1",
             geteuid() == 0 ? "runuser -u postgres -- " : "", bindir, pg->dir, args);
    return system(cmd) == 0;
}

bool pg_private_restart(pg_private *pg) { return pg_ctl(pg, "-m fast restart"); }

bool pg_private_stop_server(pg_private *pg) { return pg_ctl(pg, "-m fast stop"); }

bool pg_private_kill_server(pg_private *pg) { return pg_ctl(pg, "-m immediate stop"); }

bool pg_private_promote(pg_private *pg) { return pg_ctl(pg, "promote"); }

bool pg_private_start_server(pg_private *pg) {
    char path[300], port[32] = "";
    snprintf(path, sizeof path, "%s/port", pg->dir);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    if (!fgets(port, sizeof port, f)) port[0] = '\0';
    fclose(f);
    port[strcspn(port, "\n")] = '\0';
    char args[1024];
    snprintf(args, sizeof args,
             "-l %s/server.log -o \"-c listen_addresses=127.0.0.1 -c port=%s"
             " -c unix_socket_directories=%s -c fsync=off -c synchronous_commit=off\" start",
             pg->dir, port, pg->dir);
    return pg_ctl(pg, args);
}

void pg_private_remove(pg_private *pg) {
    if (!pg->dir[0]) return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "scripts/pg-test-cluster stop '%s' >/dev/null 2>&1", pg->dir);
    if (system(cmd) != 0) fprintf(stderr, "pg_private: could not remove %s\n", pg->dir);
    pg->dir[0] = '\0';
}
