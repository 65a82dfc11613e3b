/* readiness_test.c — /readyz of a real missived follows its store: 503 store_unavailable while its
 * PostgreSQL server is stopped and 200 again once it is back (a private server started by this
 * test, never the shared one), and 503 while its SQLite file's disk is full (a 2 MiB tmpfs the
 * test mounts, as root), 200 once space is freed. /livez stays 200 throughout: the process is
 * alive, only not ready. */
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "test.h"

static long status_of(int port, const char *path, char code[64]) {
    test_reply r = test_http(port, "GET", path, NULL, NULL);
    if (code) snprintf(code, 64, "%s", test_reply_code(&r) ? test_reply_code(&r) : "");
    long s = r.status;
    test_reply_free(&r);
    return s;
}

/* Polls path until it answers want (at most timeout_ms); returns the last status. */
static long wait_status(int port, const char *path, long want, int timeout_ms) {
    long s = 0;
    for (int waited = 0; waited <= timeout_ms; waited += 50) {
        if ((s = status_of(port, path, NULL)) == want) return s;
        mv_sleep_ms(50);
    }
    return s;
}

static int run(const char *cmd) {
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

/* ---- PostgreSQL: a server of our own, stopped and started under the daemon ---------------- */

typedef struct {
    char dir[256], bindir[256], as_owner[64];
    int port;
} pg_server;

static bool pg_start(pg_server *pg) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s%s/pg_ctl -D %s/data -l %s/server.log -w -t 30 -o '-c listen_addresses=127.0.0.1 "
             "-c port=%d -c unix_socket_directories=%s -c fsync=off' start >/dev/null",
             pg->as_owner, pg->bindir, pg->dir, pg->dir, pg->port, pg->dir);
    return run(cmd) == 0;
}

static bool pg_stop(pg_server *pg) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s%s/pg_ctl -D %s/data -m fast -w stop >/dev/null", pg->as_owner,
             pg->bindir, pg->dir);
    return run(cmd) == 0;
}

/* A fresh cluster through scripts/pg-test-cluster (which knows how to run initdb as root). */
static bool pg_create(pg_server *pg) {
    memset(pg, 0, sizeof *pg);
    FILE *p = popen("scripts/pg-test-cluster start 2>/dev/null", "r");
    if (!p) return false;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        char *at = strstr(line, "MISSIVE_PG_CLUSTER='");
        if (at) sscanf(at + 20, "%255[^']", pg->dir);
    }
    if (pclose(p) != 0 || !pg->dir[0]) return false;
    char path[512];
    snprintf(path, sizeof path, "%s/port", pg->dir);
    FILE *f = fopen(path, "r");
    if (!f || fscanf(f, "%d", &pg->port) != 1) {
        if (f) fclose(f);
        return false;
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/bindir", pg->dir);
    if (!(f = fopen(path, "r")) || !fgets(pg->bindir, sizeof pg->bindir, f)) {
        if (f) fclose(f);
        return false;
    }
    fclose(f);
    pg->bindir[strcspn(pg->bindir, "\n")] = '\0';
    if (getuid() == 0)
        snprintf(pg->as_owner, sizeof pg->as_owner, "cd / && runuser -u postgres -- ");
    return true;
}

static void pg_remove(pg_server *pg) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "scripts/pg-test-cluster stop %s", pg->dir);
    run(cmd);
}

static bool write_config(const char *dir, char *config, size_t size) {
    snprintf(config, size, "%s/missived.json", dir);
    return test_write_file(config, "{\"auth\": {\"mode\": \"headers\"},"
                                   " \"storeOptions\": {\"statementTimeoutMs\": 2000}}");
}

TEST(readyz_is_503_while_postgresql_is_stopped_and_200_when_it_returns) {
    if (!getenv("MISSIVE_TEST_PG")) {
        /* the same condition as every PostgreSQL test: not run, not counted */
        test_passed_--;
        return;
    }
    pg_server pg;
    REQUIRE(pg_create(&pg));
    char dir[600], config[700], store[512], log[700];
    mv_strlcpy(dir, test_tmp_path("ready-pg"), sizeof dir);
    REQUIRE(mkdir(dir, 0700) == 0);
    REQUIRE(write_config(dir, config, sizeof config));
    snprintf(store, sizeof store,
             "postgresql:///postgres?host=%s&port=%d&user=postgres&connect_timeout=2", pg.dir,
             pg.port);
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, store, log);
    REQUIRE(pid > 0);
    CHECK_INT(status_of(port, "/readyz", NULL), 200);
    CHECK_INT(status_of(port, "/healthz", NULL), 200);

    REQUIRE(pg_stop(&pg));
    char code[64];
    CHECK_INT(wait_status(port, "/readyz", 503, 5000), 503);
    CHECK_INT(status_of(port, "/readyz", code), 503);
    CHECK_STR(code, "store_unavailable");
    CHECK_INT(status_of(port, "/healthz", code), 503);
    CHECK_INT(status_of(port, "/livez", NULL), 200);

    REQUIRE(pg_start(&pg));
    CHECK_INT(wait_status(port, "/readyz", 200, 10000), 200);
    CHECK_INT(status_of(port, "/healthz", NULL), 200);
    CHECK_INT(test_daemon_stop(pid), 0);
    pg_remove(&pg);
}

/* ---- SQLite: a disk that fills up under the daemon ------------------------------------------ */

TEST(readyz_is_503_while_the_sqlite_disk_is_full_and_200_once_space_is_freed) {
    char mnt[600];
    mv_strlcpy(mnt, test_tmp_path("ready-full"), sizeof mnt);
    REQUIRE(mkdir(mnt, 0700) == 0);
    if (geteuid() != 0 || mount("tmpfs", mnt, "tmpfs", 0, "size=2m") != 0) {
        /* mounting needs root (as CI and the dev machines run); without it the test cannot
         * make a disk full reliably, so it is not run and not counted */
        fprintf(stderr, "SKIP %s: cannot mount a tmpfs (not root?)\n", __func__);
        test_passed_--;
        return;
    }
    char dir[700], config[800], store[800], log[700], filler[800];
    mv_strlcpy(dir, test_tmp_path("ready-full-config"), sizeof dir);
    REQUIRE(mkdir(dir, 0700) == 0);
    REQUIRE(write_config(dir, config, sizeof config));
    snprintf(store, sizeof store, "sqlite:%s/m.db", mnt);
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, store, log);
    REQUIRE(pid > 0);
    CHECK_INT(status_of(port, "/readyz", NULL), 200);

    /* fill every free byte (dd stops at ENOSPC), then a create cannot commit: not ready */
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "dd if=/dev/zero of=%s bs=64k 2>/dev/null; sync", filler);
    (void)system(cmd);
    char code[64];
    CHECK_INT(wait_status(port, "/readyz", 503, 3000), 503);
    CHECK_INT(status_of(port, "/readyz", code), 503);
    CHECK_STR(code, "store_unavailable");
    CHECK_INT(status_of(port, "/livez", NULL), 200);

    REQUIRE(unlink(filler) == 0);
    CHECK_INT(wait_status(port, "/readyz", 200, 3000), 200);
    CHECK_INT(test_daemon_stop(pid), 0);
    CHECK(umount2(mnt, MNT_DETACH) == 0);
}

int main(void) {
    return RUN_TESTS(readyz_is_503_while_postgresql_is_stopped_and_200_when_it_returns,
                     readyz_is_503_while_the_sqlite_disk_is_full_and_200_once_space_is_freed);
}
