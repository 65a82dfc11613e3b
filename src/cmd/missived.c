/* missived.c — the daemon's entry point: flags, config, signals, server.
 *
 * SIGINT, SIGTERM and SIGHUP are blocked before any thread starts, so every thread inherits the
 * mask and the main thread alone receives them through sigwait(): no async-signal-safety puzzles.
 * SIGHUP reloads (daemon_reload.c) between two waits, on this thread, while the server runs. On
 * SIGINT or SIGTERM the server stops accepting, in-flight requests get up to shutdownTimeoutMs, and
 * the process exits 0 — even when it had to abandon a request (its action lease expires and the
 * action can be retried). Every line on stderr is one JSON object. Under systemd (Type=notify,
 * NOTIFY_SOCKET set) it reports READY=1 once it listens and STOPPING=1 when the drain starts;
 * without NOTIFY_SOCKET sd_notify does nothing. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#ifdef __GLIBC__ /* defined by the headers above */
#include <malloc.h>
#endif

#include "cmd/cli.h"
#include "cmd/config.h"
#include "cmd/daemon.h"
#include "cmd/tls.h"
#include "http/http_server.h"
#include "http/request.h"
#include "http/router.h"
#include "missive/version.h"

static const char USAGE[] =
    "usage: missived --config FILE [--listen HOST:PORT] [--store URL] [--no-migrate]\n"
    "       missived --check-config FILE\n"
    "       missived --version\n";

/* NULL when every argument is a known flag (with its value where it takes one), else the first
 * one that is not: a mistyped flag must not be silently ignored (a daemon on the wrong store). */
static const char *unknown_arg(int argc, char **argv) {
    static const char *const VALUED[] = {"--config", "--check-config", "--listen", "--store", NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-migrate") == 0) continue;
        bool ok = false;
        for (size_t k = 0; VALUED[k] && !ok; k++) {
            size_t n = strlen(VALUED[k]);
            if (strncmp(argv[i], VALUED[k], n) != 0) continue;
            if (argv[i][n] == '=')
                ok = true;
            else if (argv[i][n] == '\0' && i + 1 < argc)
                ok = true, i++;
        }
        if (!ok) return argv[i];
    }
    return NULL;
}

static int log_error(const char *msg, const mv_err *err) {
    mv_log("error", msg,
           json_pack("{s:s,s:s}", "code", mv_code_name(err->code), "error", err->message));
    return 1;
}

static int check_config(const char *path) {
    mv_config *cfg = NULL;
    mv_err err = {0};
    mv_code rc = mv_config_load(path, NULL, &cfg, &err);
    if (rc == MV_OK) rc = mv_daemon_check(cfg, &err);
    mv_config_free(cfg);
    if (rc != MV_OK) {
        /* the message already names the file */
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    printf("ok %s\n", path);
    return 0;
}

static int serve(const mv_config *cfg, const mv_config_overrides *ov, bool migrate) {
    mv_err err = {0};
    mv_daemon d;
    if (mv_daemon_open(&d, cfg, migrate, &err) != MV_OK) return log_error("cannot start", &err);
    int status = 1;
    mv_http_server *server = NULL;
    mv_router *router = mv_router_new(&d);
    if (!router) {
        mv_err_set(&err, MV_NO_MEMORY, "out of memory");
        log_error("cannot start", &err);
        goto done;
    }
    mv_router_set_logging(router, true);
    if (mv_daemon_routes(router, &d, &err) != MV_OK) {
        log_error("cannot start", &err);
        goto done;
    }
    mv_http_server_options so = {.listen = cfg->listen,
                                 .threads = cfg->threads,
                                 .max_connections = cfg->max_connections,
                                 .connection_timeout_ms = cfg->connection_timeout_ms,
                                 .max_connections_per_ip =
                                     cfg->max_connections_per_ip ? cfg->max_connections_per_ip : -1,
                                 .header_timeout_ms = cfg->header_timeout_ms,
                                 .tls_cert_callback = d.tls ? mv_daemon_tls_callback() : NULL};
    if (mv_http_server_start(&so, router, &server, &err) != MV_OK) {
        log_error("cannot start", &err);
        goto done;
    }
    mv_log("info", "listening",
           json_pack("{s:s,s:i,s:s,s:s,s:s}", "listen", cfg->listen, "port",
                     mv_http_server_port(server), "auth", cfg->auth.jwt ? "jwt" : "headers",
                     "config", cfg->path, "scheme", d.tls ? "https" : "http"));
    sd_notifyf(0, "READY=1\nSTATUS=listening on port %d", mv_http_server_port(server));

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    int sig = 0;
    for (;;) {
        if (sigwait(&set, &sig) != 0) continue;
        if (sig != SIGHUP) break;
        sd_notify(0, "RELOADING=1\nSTATUS=reloading");
        mv_daemon_reload(&d, router, cfg->path, ov);
        sd_notifyf(0, "READY=1\nSTATUS=listening on port %d", mv_http_server_port(server));
    }
    sd_notify(0, "STOPPING=1\nSTATUS=draining in-flight requests");
    mv_log("info", "stopping",
           json_pack("{s:s,s:i,s:I}", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM", "inFlight",
                     mv_http_server_in_flight(server), "timeoutMs",
                     (json_int_t)cfg->shutdown_timeout_ms));
    atomic_store(&d.draining, true); /* /readyz answers 503 on connections still open */
    mv_stream_hub_drain(d.streams);  /* event streams end cleanly; clients reconnect elsewhere */
    /* sagas on the loop start no further step: each ends after the call in flight, its commit
     * written and its lease dropped, answered 503 draining, and recovery resumes it */
    mv_abort_fire(&d.saga_stop, "the server is shutting down");
    /* outgoing calls still waiting shortly before the deadline are abandoned (their actions left
     * retryable, answered 503 draining), so that every accepted request is answered in time */
    int64_t margin = cfg->shutdown_timeout_ms / 5 < 500 ? cfg->shutdown_timeout_ms / 5 : 500;
    mv_loop_stop_after(d.loop, cfg->shutdown_timeout_ms - margin);
    if (!mv_http_server_drain(server, cfg->shutdown_timeout_ms)) {
        /* Handlers still running cannot be interrupted; leave without joining them. */
        mv_log("warn", "abandoning in-flight requests",
               json_pack("{s:i}", "inFlight", mv_http_server_in_flight(server)));
        _exit(0);
    }
    status = 0;
done:
    mv_loop_stop(d.loop); /* its completions answer on the server's pool: before the server */
    mv_http_server_free(server);
    mv_router_free(router);
    mv_daemon_close(&d);
    if (status == 0) mv_log("info", "stopped", NULL);
    return status;
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
    /* Large blocks (a message's payload, a page of messages) always get their own mapping and go
     * back to the system when freed. glibc's default raises this threshold after the first such
     * free, after which every request's big blocks stay in a per-thread heap: with a few I/O
     * threads listing large pages that multiplied the peak RSS (issue 12 item 7). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
    if (argc < 2 || cli_has(argc, argv, "--help") || cli_has(argc, argv, "-h")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    if (cli_has(argc, argv, "--version")) {
        printf("missive %s\n", mv_version());
        return 0;
    }
    const char *bad = unknown_arg(argc, argv);
    if (bad) {
        fprintf(stderr, "missived: unknown argument or missing value: \"%s\"\n%s", bad, USAGE);
        return 1;
    }
    const char *check = cli_flag(argc, argv, "--check-config");
    if (check) return check_config(check);
    const char *path = cli_flag(argc, argv, "--config");
    if (!path) {
        fputs(USAGE, stderr);
        return 1;
    }

    /* Before any thread exists: the signals go to sigwait() in serve(), never to a worker. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file that may not grow (RLIMIT_FSIZE, a quota) is a write error the store reports as
     * store_unavailable, not a reason to die. */
    signal(SIGXFSZ, SIG_IGN);
    /* Every connection is a descriptor: take all the kernel allows (maxConnections is capped
     * to fit what is left after the store and outgoing calls). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    mv_config_overrides ov = {.listen = cli_flag(argc, argv, "--listen"),
                              .store = cli_flag(argc, argv, "--store")};
    mv_config *cfg = NULL;
    mv_err err = {0};
    if (mv_config_load(path, &ov, &cfg, &err) != MV_OK)
        return log_error("invalid configuration", &err);
    int status = serve(cfg, &ov, !cli_has(argc, argv, "--no-migrate"));
    mv_config_free(cfg);
    return status;
}
