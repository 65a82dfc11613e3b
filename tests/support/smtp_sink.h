/* smtp_sink.h — a minimal SMTP server on 127.0.0.1 for tests (EHLO/HELO, MAIL FROM, RCPT TO,
 * DATA, RSET, NOOP, QUIT). It records every message whose DATA it received — accepted or
 * refused — and can be told to fail, for retry tests. Thread-safe; one thread per connection.
 *
 *   smtp_sink *s = smtp_sink_start();
 *   cfg.url = smtp_sink_url(s);                 // "smtp://127.0.0.1:PORT"
 *   smtp_sink_set_mode(s, SMTP_SINK_FAIL_DATA_451);
 *   smtp_sink_message m; if (smtp_sink_get(s, 0, &m)) { ...m.data...; smtp_sink_message_free(&m); }
 *   smtp_sink_stop(s);
 */
#ifndef MISSIVE_TEST_SMTP_SINK_H
#define MISSIVE_TEST_SMTP_SINK_H

#include <stdbool.h>

typedef enum smtp_sink_mode {
    SMTP_SINK_ACCEPT,        /* 250 after DATA */
    SMTP_SINK_FAIL_DATA_451, /* 451 (transient) after DATA */
    SMTP_SINK_FAIL_DATA_554, /* 554 (permanent) after DATA */
    SMTP_SINK_REFUSE,        /* 554 greeting, then close: no transaction at all */
} smtp_sink_mode;

typedef struct smtp_sink smtp_sink;

typedef struct smtp_sink_message {
    char *from; /* MAIL FROM address, without <> */
    char **to;  /* RCPT TO addresses, without <> */
    int nto;
    char *data; /* the message as sent (headers + body), dot-stuffing removed, CRLF kept */
    bool accepted;
} smtp_sink_message;

smtp_sink *smtp_sink_start(void);
void smtp_sink_stop(smtp_sink *s); /* NULL-safe */
int smtp_sink_port(const smtp_sink *s);
const char *smtp_sink_url(const smtp_sink *s);

void smtp_sink_set_mode(smtp_sink *s, smtp_sink_mode mode);
/* Waits this long before answering the end of DATA (cut short by stop). */
void smtp_sink_set_delay(smtp_sink *s, int delay_ms);

/* Messages received (DATA complete), accepted or not / only accepted. */
int smtp_sink_received(smtp_sink *s);
int smtp_sink_accepted(smtp_sink *s);
/* Waits until at least n messages were received; false after timeout_ms. */
bool smtp_sink_wait(smtp_sink *s, int n, int timeout_ms);
/* Copy of message i (arrival order); free with smtp_sink_message_free(). */
bool smtp_sink_get(smtp_sink *s, int i, smtp_sink_message *out);
void smtp_sink_message_free(smtp_sink_message *m);
/* The value of header `name` in a message's data (case-insensitive, unfolded), malloc'd, or NULL.
 */
char *smtp_sink_header(const smtp_sink_message *m, const char *name);

#endif
