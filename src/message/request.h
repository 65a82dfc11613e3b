/* message/request.h — client-request reservations (see request.c for the state machine). */
#ifndef MISSIVE_MESSAGE_REQUEST_H
#define MISSIVE_MESSAGE_REQUEST_H

#include "message/service.h"

typedef struct request_scope {
    const char *tenant; /* the requesting user's tenant */
    const char *owner;  /* the requesting user's trimmed id */
    const char *template_cd;
    const char *id;       /* the normalised client request id */
    char fingerprint[65]; /* SHA-256 of the canonical payload */
} request_scope;

/* Replay check: *replay = the messages of a completed reservation (new array) or NULL when there
 * is nothing to replay (no reservation, or pending). Fails with MV_CLIENT_REQUEST_FAILED,
 * _MISMATCH or _INCONSISTENT. *lease_left: ms until a pending lease expires. */
mv_code mv__request_replay_tx(mv_db *db, const request_scope *s, json_t **replay,
                              int64_t *lease_left, int64_t now, mv_err *err);
/* Creates the pending reservation, or takes over one whose lease expired. */
mv_code mv__request_acquire_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                               int64_t lease_ms, int64_t now, bool *acquired, mv_err *err);
/* The smallest and largest "id" of the documents docs (NULL, NULL for none): the range a
 * reservation keeps to find its messages (migration 24). The strings are the documents'. Byte
 * order, which both stores' text order agrees with for message ids (hexadecimal, one length). */
void mv__request_id_range(const json_t *docs, const char **first, const char **last);
/* pending → completed with the messages docs, only while lease_owner still holds it (else
 * MV_CLIENT_REQUEST_PENDING). */
mv_code mv__request_complete_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                                const json_t *docs, int64_t now, mv_err *err);
/* pending → failed with the reason, only while lease_owner holds it. */
mv_code mv__request_fail_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                            const char *failure, int64_t now, mv_err *err);
/* What mv__request_record_tx fails with when the key already has a reservation (whatever its
 * state): the caller rolls back and takes the reservation path (acquire, replay or wait). */
#define MV__REQUEST_KEY_TAKEN MV_CLIENT_REQUEST_PENDING
/* The one-shot create's blind write: the reservation inserted directly in its final state —
 * completed with the messages docs (failure NULL) or failed with the reason — held by
 * lease_owner. Deferred (store/db.h): a key that exists fails the transaction, at the latest at
 * its commit, with MV__REQUEST_KEY_TAKEN. */
mv_code mv__request_record_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                              const json_t *docs, const char *failure, int64_t now, mv_err *err);
/* Deletes completed reservations completed at or before the bound. */
mv_code mv__request_gc_tx(mv_db *db, int64_t completed_before, int64_t *removed, mv_err *err);

#endif
