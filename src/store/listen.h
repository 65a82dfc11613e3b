/* store/listen.h — waiting for a wake-up that another connection (in any process) sends on commit:
 * PostgreSQL LISTEN on a dedicated connection; on SQLite there is no such channel, so a wait is a
 * sleep (cut short by a commit in this process) and the caller polls. The store knows no domain
 * words: the channel name is the caller's. */
#ifndef MISSIVE_STORE_LISTEN_H
#define MISSIVE_STORE_LISTEN_H

#include <stdbool.h>

#include "missive/store.h"

typedef struct mv__listener mv__listener;

/* A listener on channel (an SQL identifier: lowercase letters, digits, underscores). On SQLite it
 * never connects anywhere. Free with mv__listener_free (NULL-safe). */
mv_code mv__listener_new(mv_store *store, const char *channel, mv__listener **out, mv_err *err);
/* Waits up to timeout_ms; true when a notification arrived (all pending ones are consumed). A
 * lost connection is reopened on a later call; until then this waits the timeout and says false. */
bool mv__listener_wait(mv__listener *l, int timeout_ms);
void mv__listener_free(mv__listener *l);

/* Wakes a waiter in mv__listener_wait now (thread-safe, async-signal-safe). */
void mv__listener_wake(mv__listener *l);

/* Calls fn(ctx) after every committed write transaction of this store, on the writer's thread
 * (fn must be quick and must not use the store). One hook per store; NULL removes it. */
void mv__store_on_commit(mv_store *store, void (*fn)(void *ctx), void *ctx);

/* True when a commit in another process can wake a listener (PostgreSQL's NOTIFY); false when
 * listeners must poll for other processes' writes (SQLite). */
bool mv__store_notifies(const mv_store *store);

/* The URL the store was opened with (for the listener's own connection). */
const char *mv__store_url(const mv_store *store);

#endif
