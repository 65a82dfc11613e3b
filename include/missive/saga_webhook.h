/* missive/saga_webhook.h — saga definitions from JSON files whose steps and compensations are
 * webhooks (DESIGN.md "Sagas and approvals over HTTP"), kept in a book by name.
 *
 * File format:
 *   {"name": "checkout", "capability": "orders.checkout",
 *    "retry": {"maxAttempts": 3, "backoffMs": {"initial": 100, "max": 60000}},
 *    "steps": [{"name": "reserve", "run": {"webhook": URL}, "compensate": {"webhook": URL}}, …]}
 * A step call POSTs {"sagaId","step","input","results": {earlier step: result},"effectId"} with
 * Idempotency-Key: effectId — 2xx → committed (the JSON body is the result; null when empty or
 * not JSON); 4xx or connection refused → conclusively not committed (step errorCode
 * "step_rejected" / "step_not_sent"; the saga compensates); 5xx, timeout or a connection dropped
 * after sending → ambiguous (manual review). A compensation POSTs {"sagaId","step","input",
 * "result","compensationEffectId","attempt"} with Idempotency-Key: compensationEffectId — 2xx →
 * compensated, anything else → a failed attempt retried after initial·2^(n−1) capped at max.
 * Defaults: maxAttempts 3, backoffMs {"initial": 100, "max": 60000}; capability optional. The
 * saga input is kept as each step's compensation arguments ({"input": …}).
 *
 * A book is filled once (not thread-safe while adding) and read-only afterwards: lookups and the
 * definitions it hands out may be used from any number of threads. */
#ifndef MISSIVE_SAGA_WEBHOOK_H
#define MISSIVE_SAGA_WEBHOOK_H

#include <jansson.h>

#include "missive/deliver.h"
#include "missive/durable.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_saga_book mv_saga_book;

/* A new, empty book. wh (may be NULL: defaults, unsigned) stays borrowed: it must outlive the
 * book. Free with mv_saga_book_free (NULL-safe). */
mv_saga_book *mv_saga_book_new(const mv_webhook_config *wh);
void mv_saga_book_free(mv_saga_book *book);
/* Parses and validates one definition (unknown keys, names, capability, URLs, retry values are
 * errors naming the file and key: MV_INVALID_CONFIG) and adds it (a second definition with the
 * same name is an error). */
mv_code mv_saga_book_add_json(mv_saga_book *book, const json_t *json, const char *source_name,
                              mv_err *err);
mv_code mv_saga_book_load_file(mv_saga_book *book, const char *path, mv_err *err);
/* Every *.json in name order; every bad file is reported (one per line in err->message). */
mv_code mv_saga_book_load_dir(mv_saga_book *book, const char *dir, mv_err *err);
/* The definition, or NULL. Borrowed: valid as long as the book. */
const mv_saga_definition *mv_saga_book_find(const mv_saga_book *book, const char *name);

#ifdef __cplusplus
}
#endif

#endif
