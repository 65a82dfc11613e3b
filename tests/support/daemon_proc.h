/* daemon_proc.h — missived as a real process, for end-to-end tests: a free loopback port, a
 * started daemon that answers /healthz, one HTTP exchange over a socket with libcurl, and small
 * file helpers for the config and template files a test writes.
 *
 *   int port = test_free_port();
 *   pid_t pid = test_daemon_start(config, port, NULL, log);   // NULL store: the config's
 *   test_reply r = test_http(port, "POST", "/messages/new/t", "X-User-Id: ana\n", "{}");
 *   CHECK_INT(r.status, 201); test_reply_free(&r);
 *   test_daemon_stop(pid);                                      // SIGTERM; exit status */
#ifndef MISSIVE_TEST_DAEMON_PROC_H
#define MISSIVE_TEST_DAEMON_PROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct test_reply {
    long status;   /* 0 when no answer came */
    json_t *json;  /* the parsed body, NULL when empty or not JSON */
    bool replayed; /* Idempotent-Replayed: true */
} test_reply;

/* A loopback port that was free a moment ago. */
int test_free_port(void);
/* Starts $BUILD/missived --config config --listen 127.0.0.1:port [--store store] with stderr
 * to log (NULL: /dev/null) and waits up to 5 s for /healthz. Returns the pid, or -1. */
pid_t test_daemon_start(const char *config, int port, const char *store, const char *log);
/* SIGTERM and wait; returns the exit status (-1 when it died of a signal). */
int test_daemon_stop(pid_t pid);
/* One request. headers: "Name: value" lines separated by '\n' (may be NULL); body may be NULL.
 * Content-Type: application/json is always sent. */
test_reply test_http(int port, const char *method, const char *path, const char *headers,
                     const char *body);
void test_reply_free(test_reply *r);
/* The thread count of a process (/proc/PID/status), -1 when unknown. */
int test_threads_of(pid_t pid);
/* n requests at once over libcurl's multi interface, one connection each: request i is method
 * to paths[i] with headers[i] (as test_http's) and body[i] (headers and body may be NULL).
 * status[i] (0: no answer) and bodies[i] (malloc'd or NULL) receive the answers. Returns the
 * milliseconds until the last one. */
int64_t test_http_many(int port, int n, const char *method, const char *const *paths,
                       const char *const *headers, const char *const *body, long *status,
                       char **bodies);
/* The "error.code" of an error body, or NULL. */
const char *test_reply_code(const test_reply *r);
/* Writes a file from a printf format; false on failure. */
bool test_write_file(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
