/* loopback.h — the socket plumbing shared by the test servers (http_sink, smtp_sink): a listener
 * on 127.0.0.1 with a free port, one thread per accepted connection, an interruptible sleep, and a
 * stop that wakes and joins everything. Test-only code. */
#ifndef MISSIVE_TEST_LOOPBACK_H
#define MISSIVE_TEST_LOOPBACK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct loopback loopback;

/* serve(ctx, fd, srv) runs on its own thread for each connection; the fd is closed after it
 * returns. */
typedef void (*loopback_serve_fn)(void *ctx, int fd, loopback *srv);

/* Listens on 127.0.0.1:<free port>; NULL on failure. */
loopback *loopback_start(loopback_serve_fn serve, void *ctx);
int loopback_port(const loopback *srv);
/* Stops accepting, shuts down open connections, wakes sleepers, joins every thread, frees. */
void loopback_stop(loopback *srv);
/* Sleeps up to ms; returns false early when the server is stopping. */
bool loopback_sleep(loopback *srv, int ms);
bool loopback_stopping(loopback *srv);

/* Reads one line ending in "\n" (CRLF or LF) into buf without the line ending, using a small
 * per-connection buffer. Returns the length, -1 on EOF/error/overlong. */
typedef struct loopback_reader {
    int fd;
    char buf[8192];
    size_t len, pos;
} loopback_reader;
long loopback_read_line(loopback_reader *r, char *out, size_t size);
/* Reads exactly n bytes (after any buffered ones). */
bool loopback_read_exact(loopback_reader *r, char *out, size_t n);
/* Writes everything (MSG_NOSIGNAL: a vanished client is not a crash). */
bool loopback_write(int fd, const char *data, size_t n);

/* Takes mu and waits until *count >= n, woken through cv; false after
 * timeout_ms. Used by the sinks' "wait until N requests arrived". */
bool loopback_wait_count(pthread_mutex_t *mu, pthread_cond_t *cv, const int *count, int n,
                         int timeout_ms);

#endif
