/* store/pg_batch.h — group commit for PostgreSQL (pg_batch.c) and what it needs of store.c. */
#ifndef MISSIVE_STORE_PG_BATCH_H
#define MISSIVE_STORE_PG_BATCH_H

#include "store/driver.h"

typedef struct mv_pg_batch mv_pg_batch;

/* NULL when out of memory (the store then writes one transaction per call). */
mv_pg_batch *mv__pg_batch_new(mv_store *store);
/* NULL-safe. No write may be running. */
void mv__pg_batch_free(mv_pg_batch *b);
/* mv__store_write_rerunnable on PostgreSQL (db.h). */
mv_code mv__pg_batch_write(mv_pg_batch *b, mv_tx_fn fn, void *ctx, mv_err *err);

/* store.c's own steps, for the batch: a pooled connection, the write's bookkeeping (failing
 * state, commit hook, round trips), and one plain write transaction. */
mv_code mv__store_acquire(mv_store *s, mv_db **out, mv_err *err);
void mv__store_release(mv_store *s, mv_db *db, uint64_t trips_before);
void mv__store_wrote(mv_store *s, mv_code rc);
void mv__store_committed(mv_store *s);
mv_code mv__store_write_alone(mv_store *s, mv_tx_fn fn, void *ctx, mv_err *err);

#endif
