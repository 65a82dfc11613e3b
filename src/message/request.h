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
/* pending → completed, only while lease_owner still holds it (else MV_CLIENT_REQUEST_PENDING). */
mv_code mv__request_complete_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                                int64_t item_count, int64_t now, mv_err *err);
/* pending → failed with the reason, only while lease_owner holds it. */
mv_code mv__request_fail_tx(mv_db *db, const request_scope *s, const char *lease_owner,
                            const char *failure, int64_t now, mv_err *err);
/* Deletes completed reservations completed at or before the bound. */
mv_code mv__request_gc_tx(mv_db *db, int64_t completed_before, int64_t *removed, mv_err *err);

#endif
