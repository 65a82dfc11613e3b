/* sse_client.h — end-to-end helpers for GET /messages/stream tests: a tiny raw-socket SSE client
 * (HTTP/1.0, so the body is not chunked) and a daemon environment (a temporary directory with a
 * `note` template and a config in headers mode).
 *
 *   sse_env e; REQUIRE(sse_env_init(&e, kind, "name", NULL, NULL));
 *   int port; pid_t pid = sse_env_start(&e, &port);
 *   sse *c = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
 *   sse_event ev; CHECK(sse_wait(c, "message.created", 2000, &ev));
 *   sse_close(c); test_daemon_stop(pid); */
#ifndef MISSIVE_TEST_SSE_CLIENT_H
#define MISSIVE_TEST_SSE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SSE_SECRET "0123456789abcdef0123456789abcdef-stream-secret"

typedef struct sse {
    int fd;
    int status;
    char buf[1 << 16];
    size_t len;
    bool eof;
    char last_counts[256]; /* the data of the newest counts event read so far */
} sse;

typedef struct sse_event {
    int64_t id;
    char name[32];
    char data[8192];
} sse_event;

int64_t sse_now_ms(void);
/* Opens path with extra header lines ("Name: value\r\n"...). status 0 when nothing answered. */
sse *sse_open(int port, const char *path, const char *headers);
/* sse_open with the socket's receive buffer set to rcvbuf bytes first (0: the default). */
sse *sse_open_rcvbuf(int port, const char *path, const char *headers, int rcvbuf);
/* The next event (comments and retry lines skipped) within timeout_ms; false when none. */
bool sse_next(sse *c, int timeout_ms, sse_event *ev);
/* The next event named name (others skipped). */
bool sse_wait(sse *c, const char *name, int timeout_ms, sse_event *ev);
/* True when the server ended the stream within timeout_ms (what arrives meanwhile is dropped). */
bool sse_ended(sse *c, int timeout_ms);
void sse_close(sse *c);

typedef struct sse_env {
    char dir[600], config[700], log[700];
    const char *url;
} sse_env;

/* A fresh store of kind and a config: stream_extra goes inside "stream" (heartbeatMs is 200
 * unless it sets one), top_extra at the top level (both may be NULL; each starts with ", "). */
bool sse_env_init(sse_env *e, const char *kind, const char *name, const char *stream_extra,
                  const char *top_extra);
pid_t sse_env_start(sse_env *e, int *port);
/* Creates a note from ana to `to`; returns its id (static buffer) or "" on failure. */
const char *sse_send_note(int port, const char *to, int n);
/* True when the event's data is a message (or stub) with this id. */
bool sse_data_has_id(const sse_event *ev, const char *id);
/* A stream ticket signed with SSE_SECRET from its claims (JSON text); malloc'd. */
char *sse_sign_ticket(const char *claims);

#endif
