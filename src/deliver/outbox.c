/* outbox.c — the transactional outbox: rows added inside the caller's transaction, delivered
 * afterwards by workers, at least once, with retries.
 *
 * Life of a row: pending → (claim) delivering → sent | skipped | pending again (retry, with
 * backoff) | failed (after max_attempts, or at once when retrying cannot help). Every transition
 * is one conditional UPDATE: the claim succeeds only while the row is pending and due, or
 * delivering with an expired lease (its worker died); the outcome is written only while the lease
 * owner is still ours. So two workers never deliver a row at once, and a row whose worker was
 * killed is delivered again after its lease — with the same Idempotency-Key / Message-ID, so the
 * far side can tell it is a repeat. The network call always happens between two transactions. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/callctx.h"
#include "base/mono.h"
#include "deliver/outbox_text.h"
#include "deliver/transport.h"
#include "missive/deliver.h"
#include "store/db.h"
#include "store/write_async.h"

#define MAX_DURATION_MS INT64_C(9007199254740991) /* 2^53 - 1: any clock value plus it fits */

static const char SQL_INSERT[] =
    "INSERT INTO outbox (id, kind, payload, state, attempts, next_attempt_at, created_at, "
    "updated_at) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)";
/* Due rows are found in two bounded walks of outbox_due (state, next_attempt_at): the rows whose
 * lease ended (few), then the pending rows oldest first. One statement with an OR over both
 * states cannot walk the index in order: it sorted every pending row to return the first few,
 * which made each poll cost the whole backlog. */
static const char SQL_DUE_LEASES[] =
    "SELECT id, kind FROM outbox WHERE state = 'delivering' AND lease_expires_at <= ? "
    "AND kind IN (?, ?) LIMIT ?";
static const char SQL_DUE[] = "SELECT id, kind FROM outbox WHERE state = 'pending' AND "
                              "next_attempt_at <= ? AND kind IN (?, ?) "
                              "ORDER BY next_attempt_at LIMIT ?";
static const char SQL_CLAIM[] =
    "UPDATE outbox SET state = 'delivering', lease_owner = ?, lease_expires_at = ?, "
    "attempts = attempts + 1, updated_at = ? WHERE id = ? AND ((state = 'pending' AND "
    "next_attempt_at <= ?) OR (state = 'delivering' AND lease_expires_at <= ?))";
static const char SQL_CLAIMED_ROW[] = "SELECT kind, payload, attempts FROM outbox WHERE id = ?";
static const char SQL_FINISH[] =
    "UPDATE outbox SET state = ?, lease_owner = NULL, lease_expires_at = NULL, last_error = ?, "
    "failure_stage = ?, updated_at = ? WHERE id = ? AND state = 'delivering' AND lease_owner = ?";
static const char SQL_RETRY[] =
    "UPDATE outbox SET state = 'pending', next_attempt_at = ?, lease_owner = NULL, "
    "lease_expires_at = NULL, last_error = ?, failure_stage = ?, updated_at = ? "
    "WHERE id = ? AND state = 'delivering' AND lease_owner = ?";
/* A claimed row handed back untried (its worker ran out of lease to try it in): due again at
 * once, its claim not counted as an attempt. */
static const char SQL_RELEASE[] =
    "UPDATE outbox SET state = 'pending', attempts = attempts - 1, lease_owner = NULL, "
    "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND state = 'delivering' AND "
    "lease_owner = ?";
static const char SQL_DEPTH[] =
    "SELECT (SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'delivering')), "
    "(SELECT COUNT(*) FROM outbox WHERE state = 'failed')";
static const char SQL_GET[] =
    "SELECT id, kind, payload, state, attempts, next_attempt_at, lease_expires_at, created_at, "
    "updated_at, lease_owner, last_error, failure_stage FROM outbox WHERE id = ?";
static const char SQL_SCAN[] =
    "SELECT id, kind, payload, state, attempts, next_attempt_at, lease_expires_at, created_at, "
    "updated_at, lease_owner, last_error, failure_stage FROM outbox "
    "WHERE (state = 'failed' OR (state = 'delivering' AND lease_expires_at <= ?)) AND id > ? "
    "ORDER BY id LIMIT ?";

static const char *kind_name(mv_outbox_kind k) {
    return k == MV_OUTBOX_EMAIL ? "email" : "webhook";
}

static mv_outbox_kind kind_of(const char *name) {
    return name && strcmp(name, "email") == 0 ? MV_OUTBOX_EMAIL : MV_OUTBOX_WEBHOOK;
}

/* ---- adding rows ------------------------------------------------------------------------- */

static mv_code check_payload(mv_outbox_kind kind, const json_t *p, mv_err *err) {
    if (!json_is_object(p))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "outbox payload must be a JSON object");
    if (kind == MV_OUTBOX_EMAIL) {
        static const char *fields[] = {"messageId", "toUser", "title", "body"};
        for (size_t i = 0; i < 4; i++)
            if (!mv_json_str(p, fields[i]))
                return mv_err_set(err, MV_INVALID_ARGUMENT,
                                  "email outbox payload needs a string \"%s\"", fields[i]);
        if (!*mv_json_str(p, "toUser"))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "email outbox payload has an empty \"toUser\"");
        return MV_OK;
    }
    const char *url = mv_json_str(p, "url");
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
        return mv_err_set(
            err, MV_INVALID_ARGUMENT,
            "webhook outbox payload needs a \"url\" starting with http:// or https://");
    if (!json_object_get(p, "body"))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "webhook outbox payload needs a \"body\"");
    json_t *key = json_object_get(p, "idempotencyKey");
    if (key && !(json_is_string(key) && mv_valid_token(json_string_value(key), 255)))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "webhook outbox \"idempotencyKey\" must be 1..255 printable characters");
    return MV_OK;
}

static mv_code insert_row(mv_db *db, mv_outbox_kind kind, const char *text, int64_t now,
                          char id_out[37], mv_err *err) {
    /* time-ordered (v7): the primary key's index grows at its end instead of taking a write on a
     * random page of it per row, inside the create's transaction */
    char id[37];
    mv_code rc = mv_id_uuid7(id, err);
    if (rc) return rc;
    /* deferred (store/db.h): nothing reads its result, so on PostgreSQL it rides with the next
     * statement or the commit instead of costing a round trip of its own */
    rc = mv_db_execf_later(db, SQL_INSERT, err, "sssiii", id, kind_name(kind), text, now, now, now);
    if (rc == MV_OK && id_out) memcpy(id_out, id, 37);
    return rc;
}

mv_code mv_outbox_add_tx_id(mv_db *db, mv_outbox_kind kind, const json_t *payload, int64_t now,
                            char id_out[37], mv_err *err) {
    if (kind != MV_OUTBOX_EMAIL && kind != MV_OUTBOX_WEBHOOK)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown outbox kind %d", (int)kind);
    mv_code rc = check_payload(kind, payload, err);
    if (rc) return rc;
    char *text = mv_json_compact(payload);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory serialising an outbox payload");
    rc = insert_row(db, kind, text, now, id_out, err);
    free(text);
    return rc;
}

mv_code mv__outbox_add_text_tx(mv_db *db, mv_outbox_kind kind, const char *payload, int64_t now,
                               mv_err *err) {
    return insert_row(db, kind, payload, now, NULL, err);
}

mv_code mv_outbox_add_tx(mv_db *db, mv_outbox_kind kind, const json_t *payload, int64_t now,
                         mv_err *err) {
    return mv_outbox_add_tx_id(db, kind, payload, now, NULL, err);
}

/* ---- planning (outbox_text.h) ------------------------------------------------------------ */

#define MAX_PLANNERS 16

static pthread_mutex_t planners_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    mv_store *store;
    mv__outbox_planner fn;
    void *ctx;
} planners[MAX_PLANNERS];

void mv__outbox_set_planner(mv_store *store, mv__outbox_planner fn, void *ctx) {
    pthread_mutex_lock(&planners_mu);
    int free_slot = -1;
    for (int i = 0; i < MAX_PLANNERS; i++) {
        if (planners[i].store == store && (fn || planners[i].ctx == ctx)) {
            planners[i].fn = fn;
            planners[i].ctx = ctx;
            if (!fn) planners[i].store = NULL;
            pthread_mutex_unlock(&planners_mu);
            return;
        }
        if (!planners[i].store && free_slot < 0) free_slot = i;
    }
    if (fn && free_slot >= 0) {
        planners[free_slot].store = store;
        planners[free_slot].fn = fn;
        planners[free_slot].ctx = ctx;
    }
    pthread_mutex_unlock(&planners_mu);
}

static bool planner_of(mv_store *store, mv__outbox_planner *fn, void **ctx) {
    pthread_mutex_lock(&planners_mu);
    bool found = false;
    for (int i = 0; i < MAX_PLANNERS && !found; i++)
        if (planners[i].store == store && planners[i].fn) {
            *fn = planners[i].fn;
            *ctx = planners[i].ctx;
            found = true;
        }
    pthread_mutex_unlock(&planners_mu);
    return found;
}

/* Lets store's planner decide up to max due plans. Returns only store failures. */
static mv_code plan_due(mv_store *store, const mv_outbox_config *cfg, int max, mv_err *err) {
    mv__outbox_planner fn;
    void *fn_ctx;
    if (!planner_of(store, &fn, &fn_ctx)) return MV_OK;
    return fn(fn_ctx, store, mv_clock_now(cfg->clock), max, err);
}

/* ---- claiming ---------------------------------------------------------------------------- */

typedef struct due_ctx {
    int64_t now;
    int limit;
    bool email;
    char (*ids)[37];
    bool *emails; /* per id: an email row */
    int n;
} due_ctx;

static mv_code find_some(mv_db *db, due_ctx *c, const char *sql, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, sql, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "issi", c->now, "webhook", c->email ? "email" : "webhook",
                  (int64_t)(c->limit - c->n));
    int r = 0;
    while (c->n < c->limit && (r = mv_stmt_step(st, err)) == 1) {
        const char *kind = mv_stmt_text(st, 1);
        c->emails[c->n] = kind && strcmp(kind, "email") == 0;
        mv_strlcpy(c->ids[c->n++], mv_stmt_text(st, 0), 37);
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

static mv_code find_due(mv_db *db, void *ctx, mv_err *err) {
    due_ctx *c = ctx;
    c->n = 0;
    mv_code rc = find_some(db, c, SQL_DUE_LEASES, err);
    if (rc == MV_OK && c->n < c->limit) rc = find_some(db, c, SQL_DUE, err);
    return rc;
}

typedef struct claim_ctx {
    const char *id;
    const char *owner;
    int64_t now, lease_until;
    bool won;
    mv_outbox_kind kind;
    json_t *payload;
    int attempts;
} claim_ctx;

static mv_code claim_row(mv_db *db, void *ctx, mv_err *err) {
    claim_ctx *c = ctx;
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_CLAIM, &changes, err, "siisii", c->owner, c->lease_until,
                             c->now, c->id, c->now, c->now);
    if (rc) return rc;
    c->won = changes == 1;
    if (!c->won) return MV_OK;
    mv_stmt *st;
    if ((rc = mv_db_row(db, SQL_CLAIMED_ROW, &st, err, "s", c->id))) return rc;
    if (!st) return mv_err_set(err, MV_INTERNAL, "claimed outbox row %s vanished", c->id);
    {
        const char *kind = mv_stmt_text(st, 0);
        const char *payload = mv_stmt_text(st, 1);
        c->kind = kind_of(kind);
        c->payload = payload ? json_loads(payload, JSON_DECODE_ANY, NULL) : NULL;
        c->attempts = (int)mv_stmt_int64(st, 2);
    }
    mv_stmt_done(st);
    return MV_OK;
}

/* ---- recording the outcome --------------------------------------------------------------- */

typedef struct finish_ctx {
    const char *id, *owner;
    const char *state; /* sent, skipped, failed; NULL → retry (or release) */
    bool release;      /* not tried: pending again, the attempt not counted */
    const char *error, *stage;
    int64_t now, next_at;
    bool kept; /* false: our lease was taken over, nothing written */
} finish_ctx;

static mv_code finish_row(mv_db *db, void *ctx, mv_err *err) {
    finish_ctx *c = ctx;
    int64_t changes = 0;
    mv_code rc;
    if (c->release)
        rc = mv_db_execf(db, SQL_RELEASE, &changes, err, "iss", c->now, c->id, c->owner);
    else if (c->state)
        rc = mv_db_execf(db, SQL_FINISH, &changes, err, "sssiss", c->state, c->error, c->stage,
                         c->now, c->id, c->owner);
    else
        rc = mv_db_execf(db, SQL_RETRY, &changes, err, "ississ", c->next_at, c->error, c->stage,
                         c->now, c->id, c->owner);
    c->kept = changes == 1;
    return rc;
}

/* ---- delivering one row ------------------------------------------------------------------ */

typedef enum verdict { DONE_SENT, DONE_SKIPPED, RETRY, GIVE_UP, UNTRIED } verdict;

typedef struct attempt {
    verdict v;
    const char *stage;
    mv_err err;
} attempt;

static bool permanent(mv_code c) { return c == MV_INVALID_ARGUMENT || c == MV_INVALID_CONFIG; }

static void deliver_email(const mv_outbox_config *cfg, const char *row_id, const json_t *p,
                          attempt *a) {
    const mv_email_config *ec = cfg->email;
    const char *to_user = mv_json_str(p, "toUser");
    char *address = NULL;
    a->stage = "recipientLookup";
    mv_code rc = mv_directory_lookup(ec->directory, to_user, &address, &a->err);
    if (rc) {
        a->v = permanent(rc) ? GIVE_UP : RETRY;
        return;
    }
    if (!address) {
        a->v = DONE_SKIPPED;
        return;
    }
    a->stage = "notifier";
    const char *title = mv_json_str(p, "title");
    const char *body = mv_json_str(p, "body");
    /* The subject is the trimmed title, case preserved (SEMANTICS §1.10). */
    while (*title == ' ' || *title == '\t' || *title == '\r' || *title == '\n')
        title++;
    size_t tn = strlen(title);
    while (tn > 0 && (title[tn - 1] == ' ' || title[tn - 1] == '\t' || title[tn - 1] == '\r' ||
                      title[tn - 1] == '\n'))
        tn--;
    char *subject = strndup(title, tn);
    if (!subject) {
        free(address);
        mv_err_set(&a->err, MV_NO_MEMORY, "out of memory");
        a->v = RETRY;
        return;
    }
    if (ec->webhook_url) {
        json_t *req =
            json_pack("{s:{s:s, s:s, s:s, s:s, s:s}}", "email", "to", address, "subject", subject,
                      "body", body, "messageId", mv_json_str(p, "messageId"), "toUser", to_user);
        mv_webhook_response res;
        mv__callctx_call("email", mv_json_str(p, "messageId"), NULL, NULL);
        rc = req ? mv_webhook_post(cfg->webhook, ec->webhook_url, req, row_id, &res, &a->err)
                 : mv_err_set(&a->err, MV_NO_MEMORY, "out of memory");
        if (req) mv_webhook_response_free(&res);
        json_decref(req);
    } else {
        rc = mv_smtp_send(&ec->smtp, address, subject, body, row_id, &a->err);
    }
    free(subject);
    free(address);
    a->v = rc == MV_OK ? DONE_SENT : permanent(rc) ? GIVE_UP : RETRY;
}

/* What a webhook delivery's outcome means for its row. */
static void webhook_verdict(attempt *a, mv_code rc, const mv_webhook_response *res) {
    if (rc == MV_OK)
        a->v = DONE_SENT;
    else if (res->outcome == MV_WEBHOOK_REJECTED && res->status != 408 && res->status != 429)
        a->v = GIVE_UP; /* 4xx: the receiver refuses it; asking again will not change that */
    else
        a->v = permanent(rc) ? GIVE_UP : RETRY;
}

/* A channel delivery names the user whose contact the directory gives (channels.c): asked now,
 * outside any transaction, and written into the body's "to" (null without a directory or an
 * answer). False when the lookup failed (a->v says whether to retry). */
static bool fill_contact(const mv_outbox_config *cfg, json_t *p, attempt *a) {
    const char *user = mv_json_str(p, "contactOf");
    json_t *to = json_object_get(json_object_get(p, "body"), "to");
    if (!user || !json_is_object(to) || !cfg->directory) return true;
    char *contact = NULL;
    a->stage = "recipientLookup";
    mv_code rc = mv_directory_lookup(cfg->directory, user, &contact, &a->err);
    if (rc != MV_OK) {
        a->v = permanent(rc) ? GIVE_UP : RETRY;
        return false;
    }
    json_object_set_new(to, "contact", contact ? json_string(contact) : json_null());
    free(contact);
    a->stage = "webhook";
    return true;
}

static void deliver_webhook(const mv_outbox_config *cfg, const char *row_id, json_t *p,
                            attempt *a) {
    if (!fill_contact(cfg, p, a)) return;
    a->stage = "webhook";
    const char *key = mv_json_str(p, "idempotencyKey");
    mv_webhook_response res;
    mv__callctx_call("outbox", NULL, NULL, NULL);
    mv_code rc = mv_webhook_post(cfg->webhook, mv_json_str(p, "url"), json_object_get(p, "body"),
                                 key ? key : row_id, &res, &a->err);
    webhook_verdict(a, rc, &res);
    mv_webhook_response_free(&res);
}

static int64_t backoff_ms(const mv_outbox_config *cfg, int attempts) {
    int64_t d = cfg->backoff_base_ms;
    for (int i = 1; i < attempts && d < cfg->backoff_cap_ms; i++)
        d = d > cfg->backoff_cap_ms / 2 ? cfg->backoff_cap_ms : d * 2;
    if (d > cfg->backoff_cap_ms) d = cfg->backoff_cap_ms;
    uint64_t r = 0;
    mv_random_bytes(&r, sizeof r, NULL);
    return d - d / 2 + (int64_t)(r % ((uint64_t)(d / 2) + 1)); /* in [d/2, d]: spreads retries */
}

static mv_outbox_config with_defaults(const mv_outbox_config *in) {
    mv_outbox_config c = in ? *in : (mv_outbox_config){0};
    if (c.max_attempts <= 0) c.max_attempts = MV_DEFAULT_OUTBOX_MAX_ATTEMPTS;
    if (c.backoff_base_ms <= 0) c.backoff_base_ms = MV_DEFAULT_OUTBOX_BACKOFF_MS;
    if (c.backoff_cap_ms <= 0) c.backoff_cap_ms = MV_DEFAULT_OUTBOX_BACKOFF_CAP_MS;
    if (c.backoff_cap_ms < c.backoff_base_ms) c.backoff_cap_ms = c.backoff_base_ms;
    if (c.lease_ms <= 0) c.lease_ms = MV_DEFAULT_OUTBOX_LEASE_MS;
    /* capped so that now + lease or now + backoff cannot overflow into the past */
    if (c.backoff_cap_ms > MAX_DURATION_MS) c.backoff_cap_ms = MAX_DURATION_MS;
    if (c.backoff_base_ms > c.backoff_cap_ms) c.backoff_base_ms = c.backoff_cap_ms;
    if (c.lease_ms > MAX_DURATION_MS) c.lease_ms = MAX_DURATION_MS;
    return c;
}

/* One row being delivered: its claim, then its attempt's verdict. */
typedef struct row_job {
    char id[37], owner[37];
    claim_ctx cc;
    attempt a;
    struct batch *batch; /* deliveries waiting on the loop */
    bool alone;          /* an email: delivered on the worker's thread, not on the loop */
} row_job;

/* Claims row id for r. Only store failures are errors; r->cc.won says whether we got it. */
static mv_code claim_one(mv_store *store, const mv_outbox_config *cfg, const char *id, row_job *r,
                         mv_err *err) {
    memset(r, 0, sizeof *r);
    mv_strlcpy(r->id, id, sizeof r->id);
    mv_code rc = mv_id_uuid(r->owner, err);
    if (rc) return rc;
    int64_t now = mv_clock_now(cfg->clock);
    r->cc =
        (claim_ctx){.id = r->id, .owner = r->owner, .now = now, .lease_until = now + cfg->lease_ms};
    if ((rc = mv_store_write(store, claim_row, &r->cc, err))) {
        json_decref(r->cc.payload);
        r->cc.payload = NULL;
        return rc;
    }
    r->a = (attempt){.v = GIVE_UP, .stage = r->cc.kind == MV_OUTBOX_EMAIL ? "notifier" : "webhook"};
    if (r->cc.won && !json_is_object(r->cc.payload))
        mv_err_set(&r->a.err, MV_INTERNAL, "outbox row %s has an unreadable payload", id);
    return MV_OK;
}

/* Delivers a claimed row on this thread. */
static void deliver_one(const mv_outbox_config *cfg, row_job *r) {
    mv__callctx_reset(); /* this row's calls carry no ids of an earlier one */
    if (!json_is_object(r->cc.payload)) return;
    if (r->cc.kind == MV_OUTBOX_EMAIL) {
        if (cfg->email)
            deliver_email(cfg, r->id, r->cc.payload, &r->a);
        else
            mv_err_set(&r->a.err, MV_INVALID_CONFIG,
                       "email is not configured"); /* not claimed normally */
    } else {
        deliver_webhook(cfg, r->id, r->cc.payload, &r->a);
    }
}

/* The write that records r's verdict (r->cc's lease still held). */
static finish_ctx finish_of(const mv_outbox_config *cfg, row_job *r) {
    attempt *a = &r->a;
    finish_ctx fc = {.id = r->id, .owner = r->owner, .now = mv_clock_now(cfg->clock)};
    switch (a->v) {
    case DONE_SENT: fc.state = "sent"; break;
    case UNTRIED: fc.release = true; break;
    case DONE_SKIPPED:
        fc.state = "skipped";
        fc.error = "no_address: the recipient has no email address";
        break;
    case RETRY:
    case GIVE_UP:
        fc.error = a->err.message;
        fc.stage = a->stage;
        if (a->v == GIVE_UP || r->cc.attempts >= cfg->max_attempts)
            fc.state = "failed";
        else
            fc.next_at = fc.now + backoff_ms(cfg, r->cc.attempts);
        break;
    }
    return fc;
}

/* After the verdict committed: whether r was delivered, and its failure reported. Frees r's
 * payload. */
static void finished(const mv_outbox_config *cfg, row_job *r, const finish_ctx *fc,
                     bool *delivered) {
    claim_ctx *cc = &r->cc;
    attempt *a = &r->a;
    if (fc->kept) {
        *delivered = a->v == DONE_SENT || a->v == DONE_SKIPPED;
        if ((a->v == RETRY || a->v == GIVE_UP) && cfg->on_event) {
            mv_outbox_event ev = {.row_id = r->id,
                                  .kind = cc->kind,
                                  .stage = a->stage,
                                  .error = a->err.message,
                                  .attempt = cc->attempts,
                                  .final = fc->state != NULL};
            if (cc->kind == MV_OUTBOX_EMAIL && json_is_object(cc->payload)) {
                ev.message_id = mv_json_str(cc->payload, "messageId");
                ev.recipient = mv_json_str(cc->payload, "toUser");
            }
            cfg->on_event(cfg->on_event_ctx, &ev);
        }
    }
    json_decref(cc->payload);
    cc->payload = NULL;
}

/* Records r's verdict while we still hold its lease, and reports a failure. */
static mv_code finish_one(mv_store *store, const mv_outbox_config *cfg, row_job *r, bool *delivered,
                          mv_err *err) {
    finish_ctx fc = finish_of(cfg, r);
    mv_code rc = mv_store_write(store, finish_row, &fc, err);
    if (rc != MV_OK) fc.kept = false;
    finished(cfg, r, &fc, delivered);
    return rc;
}

/* Claims, delivers and records one row. *claimed tells whether we won it; *delivered whether it
 * reached sent/skipped. Only store failures are returned as errors. */
static mv_code process_row(mv_store *store, const mv_outbox_config *cfg, const char *id,
                           bool *claimed, bool *delivered, mv_err *err) {
    *claimed = *delivered = false;
    row_job r;
    mv_code rc = claim_one(store, cfg, id, &r, err);
    if (rc || !r.cc.won) return rc;
    *claimed = true;
    deliver_one(cfg, &r);
    return finish_one(store, cfg, &r, delivered, err);
}

/* ---- a batch of webhook deliveries on the loop -------------------------------------------
 * With a loop, the rows of one batch are claimed in one transaction, the webhooks then all sent
 * at once, then everything recorded in one transaction: N slow receivers cost one delivery's wait
 * instead of N in a row, and N rows cost two commits instead of 2N, still on the worker's one
 * thread — two writes per batch that the creates' writer has to make room for, not two per row.
 * Emails (directory lookup, SMTP) are sent one by one meanwhile, each only while half of the
 * batch's lease is left; the others go back untried (SQL_RELEASE) with the batch's verdicts. */

typedef struct batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int waiting;
} batch;

static void delivered_on_loop(void *ctx, mv_code rc, mv_webhook_response *res, const mv_err *e) {
    row_job *r = ctx;
    webhook_verdict(&r->a, rc, res);
    mv_err_copy(&r->a.err, e);
    mv_webhook_response_free(res);
    batch *b = r->batch;
    pthread_mutex_lock(&b->mu);
    if (--b->waiting == 0) pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* The claims of a batch's rows, in one transaction (one commit for the batch, not one per row). */
typedef struct claims_ctx {
    row_job *rows;
    int n;
} claims_ctx;

static mv_code claim_rows(mv_db *db, void *ctx, mv_err *err) {
    claims_ctx *c = ctx;
    for (int i = 0; i < c->n; i++) {
        json_decref(c->rows[i].cc.payload); /* a rerun of the transaction claims anew */
        c->rows[i].cc.payload = NULL;
        c->rows[i].cc.won = false;
        mv_code rc = claim_row(db, &c->rows[i].cc, err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static mv_code claim_all(mv_store *store, const mv_outbox_config *cfg, char (*ids)[37],
                         const bool *emails, row_job *rows, int n, mv_err *err) {
    int64_t now = mv_clock_now(cfg->clock);
    for (int i = 0; i < n; i++) {
        row_job *r = &rows[i];
        mv_strlcpy(r->id, ids[i], sizeof r->id);
        r->alone = emails[i];
        mv_code rc = mv_id_uuid(r->owner, err);
        if (rc != MV_OK) return rc;
        r->cc = (claim_ctx){
            .id = r->id, .owner = r->owner, .now = now, .lease_until = now + cfg->lease_ms};
    }
    claims_ctx c = {rows, n};
    mv_code rc = mv_store_write(store, claim_rows, &c, err);
    for (int i = 0; i < n; i++) {
        row_job *r = &rows[i];
        if (rc != MV_OK) {
            json_decref(r->cc.payload);
            r->cc.payload = NULL;
            r->cc.won = false;
            continue;
        }
        r->a = (attempt){.v = GIVE_UP,
                         .stage = r->cc.kind == MV_OUTBOX_EMAIL ? "notifier" : "webhook"};
        if (r->cc.won && !json_is_object(r->cc.payload))
            mv_err_set(&r->a.err, MV_INTERNAL, "outbox row %s has an unreadable payload", r->id);
    }
    return rc;
}

/* The verdicts of a batch's claimed rows, in one transaction. */
typedef struct finishes_ctx {
    finish_ctx *fc;
    int n;
} finishes_ctx;

static mv_code finish_rows(mv_db *db, void *ctx, mv_err *err) {
    finishes_ctx *c = ctx;
    for (int i = 0; i < c->n; i++) {
        if (!c->fc[i].id) continue;
        mv_code rc = finish_row(db, &c->fc[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static mv_code finish_all(mv_store *store, const mv_outbox_config *cfg, row_job *rows, int n,
                          int *delivered, mv_err *err) {
    if (n <= 0) return MV_OK;
    finish_ctx *fc = calloc((size_t)n, sizeof *fc);
    mv_code rc = fc ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    for (int i = 0; fc && i < n; i++)
        if (rows[i].cc.won) fc[i] = finish_of(cfg, &rows[i]);
    finishes_ctx c = {fc, n};
    if (rc == MV_OK) rc = mv_store_write(store, finish_rows, &c, err);
    for (int i = 0; i < n; i++) {
        bool d = false;
        if (!rows[i].cc.won) continue;
        finish_ctx none = {0};
        finish_ctx *f = fc && rc == MV_OK ? &fc[i] : &none; /* not recorded: left to the lease */
        finished(cfg, &rows[i], f, &d);
        *delivered += d;
    }
    free(fc);
    return rc;
}

static mv_code run_batch_on_loop(mv_store *store, const mv_outbox_config *cfg, char (*ids)[37],
                                 const bool *emails, int n, int *claimed, int *delivered,
                                 mv_err *err) {
    row_job *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    batch b = {.waiting = 0};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    int got = n;
    mv_code rc = claim_all(store, cfg, ids, emails, rows, n, err);
    if (rc != MV_OK) got = 0; /* nothing was claimed */
    for (int i = 0; i < got; i++) {
        row_job *r = &rows[i];
        if (!r->cc.won) continue;
        (*claimed)++;
        if (r->alone) continue; /* an email: below, on this thread */
        if (!json_is_object(r->cc.payload)) {
            deliver_one(cfg, r);
            continue;
        }
        json_t *p = r->cc.payload;
        if (!fill_contact(cfg, p, &r->a)) continue;
        const char *key = mv_json_str(p, "idempotencyKey");
        mv__callctx_reset();
        mv__callctx_call("outbox", NULL, NULL, NULL);
        r->batch = &b;
        pthread_mutex_lock(&b.mu);
        b.waiting++;
        pthread_mutex_unlock(&b.mu);
        /* a delivery carries its Idempotency-Key: a kept-alive connection may be reused */
        mv_code sent = mv__webhook_post_async_reusing(
            cfg->loop, cfg->webhook, mv_json_str(p, "url"), json_object_get(p, "body"),
            key ? key : r->id, delivered_on_loop, r, &r->a.err);
        if (sent != MV_OK) { /* never started: a bad URL gives up, a stopping loop retries */
            pthread_mutex_lock(&b.mu);
            b.waiting--;
            pthread_mutex_unlock(&b.mu);
            r->a.v = permanent(sent) ? GIVE_UP : RETRY;
        }
    }
    /* emails one by one (directory, SMTP) while the webhooks are on the wire, claimed with the
     * batch (one commit for all its claims). One is tried only while at least half of the
     * batch's lease is left, so that it ends before the lease does (a lookup and a send each
     * have a timeout well below it); the rest are handed back untried with the batch's verdicts
     * and picked up by the next pass */
    int64_t try_until = got ? rows[0].cc.lease_until - cfg->lease_ms / 2 : 0; /* claimed + ½ */
    for (int i = 0; rc == MV_OK && i < got; i++) {
        if (!rows[i].alone || !rows[i].cc.won) continue;
        if (mv_clock_now(cfg->clock) > try_until)
            rows[i].a.v = UNTRIED;
        else
            deliver_one(cfg, &rows[i]);
    }
    pthread_mutex_lock(&b.mu);
    while (b.waiting > 0)
        pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    if (got) {
        mv_code frc = finish_all(store, cfg, rows, got, delivered, err);
        if (rc == MV_OK) rc = frc;
    }
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    free(rows);
    return rc;
}

mv_code mv__outbox_plan_due(mv_store *store, const mv_outbox_config *cfg, int max, mv_err *err) {
    mv_outbox_config c = with_defaults(cfg);
    return plan_due(store, &c, max < 1 ? 1 : max > 1000 ? 1000 : max, err);
}

static mv_code run_due(mv_store *store, const mv_outbox_config *in, int max_rows, int *claimed_out,
                       int *delivered_out, mv_err *err) {
    if (delivered_out) *delivered_out = 0;
    if (claimed_out) *claimed_out = 0;
    if (max_rows <= 0) return MV_OK;
    if (max_rows > 1000) max_rows = 1000;
    mv_outbox_config cfg = with_defaults(in);
    mv_code prc = plan_due(store, &cfg, max_rows, err);
    if (prc != MV_OK) return prc;
    due_ctx dc = {.now = mv_clock_now(cfg.clock), .limit = max_rows, .email = cfg.email != NULL};
    dc.ids = calloc((size_t)max_rows, sizeof *dc.ids);
    dc.emails = calloc((size_t)max_rows, sizeof *dc.emails);
    if (!dc.ids || !dc.emails) {
        free(dc.ids);
        free(dc.emails);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    mv_code rc = mv_store_read(store, find_due, &dc, err);
    int claimed = 0, delivered = 0;
    if (rc == MV_OK && cfg.loop) {
        rc = run_batch_on_loop(store, &cfg, dc.ids, dc.emails, dc.n, &claimed, &delivered, err);
        dc.n = 0;
    }
    for (int i = 0; rc == MV_OK && i < dc.n; i++) {
        bool c, d;
        rc = process_row(store, &cfg, dc.ids[i], &c, &d, err);
        claimed += c;
        delivered += d;
    }
    free(dc.ids);
    free(dc.emails);
    if (claimed_out) *claimed_out = claimed;
    if (delivered_out) *delivered_out = delivered;
    return rc;
}

mv_code mv_outbox_run_due(mv_store *store, const mv_outbox_config *cfg, int max_rows,
                          int *delivered, mv_err *err) {
    return run_due(store, cfg, max_rows, NULL, delivered, err);
}

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct depth_ctx {
    int64_t pending, failed;
} depth_ctx;

static mv_code read_depth(mv_db *db, void *ctx, mv_err *err) {
    depth_ctx *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_DEPTH, &st, err, "");
    if (st) {
        c->pending = mv_stmt_int64(st, 0);
        c->failed = mv_stmt_int64(st, 1);
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_outbox_depth(mv_store *store, int64_t *pending, int64_t *failed, mv_err *err) {
    depth_ctx c = {0};
    mv_code rc = mv_store_read(store, read_depth, &c, err);
    if (pending) *pending = c.pending;
    if (failed) *failed = c.failed;
    return rc;
}

void mv_outbox_row_free(mv_outbox_row *row) {
    if (!row) return;
    json_decref(row->payload);
    free(row->lease_owner);
    free(row->last_error);
    free(row->failure_stage);
    memset(row, 0, sizeof *row);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void read_row(mv_stmt *st, mv_outbox_row *r) {
    memset(r, 0, sizeof *r);
    mv_strlcpy(r->id, mv_stmt_text(st, 0), sizeof r->id);
    const char *kind = mv_stmt_text(st, 1);
    r->kind = kind_of(kind);
    const char *payload = mv_stmt_text(st, 2);
    r->payload = payload ? json_loads(payload, JSON_DECODE_ANY, NULL) : NULL;
    mv_strlcpy(r->state, mv_stmt_text(st, 3), sizeof r->state);
    r->attempts = (int)mv_stmt_int64(st, 4);
    r->next_attempt_at = mv_stmt_int64(st, 5);
    r->lease_expires_at = mv_stmt_is_null(st, 6) ? 0 : mv_stmt_int64(st, 6);
    r->created_at = mv_stmt_int64(st, 7);
    r->updated_at = mv_stmt_int64(st, 8);
    r->lease_owner = dup_or_null(mv_stmt_text(st, 9));
    r->last_error = dup_or_null(mv_stmt_text(st, 10));
    r->failure_stage = dup_or_null(mv_stmt_text(st, 11));
}

typedef struct get_ctx {
    const char *id;
    mv_outbox_row *out;
    bool found;
} get_ctx;

static mv_code get_row(mv_db *db, void *ctx, mv_err *err) {
    get_ctx *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GET, &st, err, "s", c->id);
    if (st) {
        read_row(st, c->out);
        c->found = true;
    }
    mv_stmt_done(st);
    return rc;
}

mv_code mv_outbox_get(mv_store *store, const char *id, mv_outbox_row *out, mv_err *err) {
    memset(out, 0, sizeof *out);
    get_ctx c = {.id = id, .out = out};
    mv_code rc = mv_store_read(store, get_row, &c, err);
    if (rc) return rc;
    if (!c.found) return mv_err_set(err, MV_NOT_FOUND, "outbox row \"%.64s\" not found", id);
    return MV_OK;
}

typedef struct scan_ctx {
    int64_t older_than;
    const char *after;
    int limit, count;
    void (*fn)(void *ctx, const mv_outbox_row *row);
    void *ctx;
    mv_outbox_row *rows;
} scan_ctx;

static mv_code scan_rows(mv_db *db, void *ctx, mv_err *err) {
    scan_ctx *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_SCAN, &st, err);
    if (rc) return rc;
    mv_stmt_bindf(st, "isi", c->older_than, c->after, (int64_t)c->limit);
    int r = 0;
    c->count = 0;
    while (c->count < c->limit && (r = mv_stmt_step(st, err)) == 1)
        read_row(st, &c->rows[c->count++]);
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

mv_code mv_outbox_scan(mv_store *store, int64_t now, int64_t stale_ms, const char *after_id,
                       int limit, void (*fn)(void *ctx, const mv_outbox_row *row), void *ctx,
                       int *count, mv_err *err) {
    if (count) *count = 0;
    if (limit < 1 || limit > 1000)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "limit must be between 1 and 1000");
    scan_ctx c = {.older_than = now - (stale_ms > 0 ? stale_ms : 0),
                  .after = after_id ? after_id : "",
                  .limit = limit,
                  .fn = fn,
                  .ctx = ctx};
    c.rows = calloc((size_t)limit, sizeof *c.rows);
    if (!c.rows) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    /* Rows are copied out and fn runs after the transaction: a callback may do anything. */
    mv_code rc = mv_store_read(store, scan_rows, &c, err);
    for (int i = 0; i < c.count; i++) {
        if (rc == MV_OK && fn) fn(ctx, &c.rows[i]);
        mv_outbox_row_free(&c.rows[i]);
    }
    free(c.rows);
    if (count && rc == MV_OK) *count = c.count;
    return rc;
}

/* ---- background worker ------------------------------------------------------------------- */

/* rows per pass: with the loop, webhooks on the wire at once and the rows one commit records */
#define WORKER_BATCH 128
/* while requests write: a pause of this many times the last pass after each full batch */
#define YIELD_FACTOR 3

struct mv_outbox_worker {
    mv_store *store;
    mv_outbox_config cfg;
    int poll_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, wake;
};

/* Waits ms (or until woken or stopped). */
static void worker_wait(mv_outbox_worker *w, int64_t ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->stop && !w->wake)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) != 0) break;
    pthread_mutex_unlock(&w->mu);
}

/* A full batch means more rows are due at once. Then the worker goes on right away — unless
 * requests wrote to the store during the pass (creates queue deliveries, and they share the
 * store's one writer and the machine's cores with the outbox): then it first waits YIELD_FACTOR
 * times as long as the pass took, so that a backlog is drained at a quarter or more of the
 * worker's full speed while the requests go on, in batches as large as before (two commits each),
 * and at full speed once they stop. Rows are never lost: they stay pending and due. */
static void *worker_main(void *arg) {
    mv_outbox_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        bool stop = w->stop;
        w->wake = false;
        pthread_mutex_unlock(&w->mu);
        if (stop) break;
        int claimed = 0;
        mv_err err = {0};
        uint64_t writes = mv__store_async_writes(w->store);
        int64_t t0 = mv__mono_ms();
        /* A store error is retried on the next poll; the rows themselves are safe. */
        mv_code rc = run_due(w->store, &w->cfg, WORKER_BATCH, &claimed, NULL, &err);
        int64_t wait_ms = w->poll_ms;
        if (rc == MV_OK && claimed == WORKER_BATCH) {
            if (mv__store_async_writes(w->store) == writes) continue; /* more may be due now */
            int64_t took = mv__mono_ms() - t0;
            int64_t pause = took * YIELD_FACTOR;
            wait_ms = pause < 1 ? 1 : pause < w->poll_ms ? pause : w->poll_ms;
        }
        worker_wait(w, wait_ms);
    }
    return NULL;
}

mv_code mv_outbox_worker_start(mv_store *store, const mv_outbox_config *cfg, int poll_ms,
                               mv_outbox_worker **out, mv_err *err) {
    *out = NULL;
    mv_outbox_worker *w = calloc(1, sizeof *w);
    if (!w) return mv_err_set(err, MV_NO_MEMORY, "out of memory starting the outbox worker");
    w->store = store;
    w->cfg = cfg ? *cfg : (mv_outbox_config){0};
    w->poll_ms = poll_ms > 0 ? poll_ms : 1000;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return mv_err_set(err, MV_INTERNAL, "cannot start the outbox worker thread");
    }
    *out = w;
    return MV_OK;
}

void mv_outbox_worker_wake(mv_outbox_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->wake = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void mv_outbox_worker_stop(mv_outbox_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
