/* victim.h — a second server in its own process for kill -9 tests, forked before the test starts
 * any thread. A child forked from a threaded parent may inherit a lock some other thread held at
 * that moment (an allocator's, a library's) and hang on it; under a sanitizer it does. So the
 * victim is forked first and learns its job later, as lines over a pipe. */
#ifndef MV_TEST_VICTIM_H
#define MV_TEST_VICTIM_H

#include <stdbool.h>
#include <sys/types.h>

#include "support/http_sink.h"

/* What the victim runs once it has its job: the lines the test sent (at most 8; each
 * NUL-terminated), then it exits. */
typedef void (*victim_fn)(char **lines, int n, void *arg);

typedef struct victim {
    pid_t pid;
    int job_fd; /* the test's end of the pipe, until victim_send */
} victim;

/* Forks the victim (call before any thread starts); false when fork or pipe fails. */
bool victim_fork(victim *v, victim_fn fn, void *arg);
/* Sends the victim its job, one line per string (no newlines inside), and closes the pipe. */
bool victim_send(victim *v, const char *const *lines, int n);
/* Waits up to timeout_ms for the sink's first request; false at once (saying why on stderr)
 * when the victim exits before it. */
bool victim_reached(const victim *v, http_sink *sink, int timeout_ms);
/* kill -9 and reaps it; true when it died of the signal. */
bool victim_kill(victim *v);

#endif
