/* outbox_test.c — the transactional outbox on every store kind: rows live and die with the caller's
 * transaction; workers (threads and a killed process) deliver each row once per lease; retries
 * back off on an injected clock and end in `failed` with the right stage. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "missive/deliver.h"
#include "store/db.h"
#include "support/http_sink.h"
#include "support/smtp_sink.h"
#include "support/stores.h"

static char store_url[600];

/* A fresh migrated store of that kind per test; its URL stays in store_url for forked workers. */
static mv_store *open_store(const char *kind, const char *name) {
    const char *url = test_store_url(kind, name);
    if (!url) return NULL;
    snprintf(store_url, sizeof store_url, "%s", url);
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(store_url, NULL, &s, &err) != MV_OK ||
        mv_store_migrate(s, NULL, &err) != MV_OK) {
        fprintf(stderr, "store: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

typedef struct add_ctx {
    mv_outbox_kind kind;
    json_t *payload;
    int64_t now;
    char id[37];
    bool fail_after;
} add_ctx;

static mv_code add_cb(mv_db *db, void *ctx, mv_err *err) {
    add_ctx *c = ctx;
    mv_code rc = mv_outbox_add_tx_id(db, c->kind, c->payload, c->now, c->id, err);
    if (rc) return rc;
    return c->fail_after ? mv_err_set(err, MV_ABORTED, "caller changed its mind") : MV_OK;
}

/* Adds a row in its own transaction; returns its id in a static slot. */
static const char *add_row(mv_store *s, mv_outbox_kind kind, json_t *payload, int64_t now) {
    static char ids[8][37];
    static int slot;
    add_ctx c = {.kind = kind, .payload = payload, .now = now};
    mv_err err = {0};
    mv_code rc = mv_store_write(s, add_cb, &c, &err);
    json_decref(payload);
    if (rc) {
        fprintf(stderr, "add: %s\n", err.message);
        return NULL;
    }
    char *out = ids[slot++ % 8];
    memcpy(out, c.id, 37);
    return out;
}

static json_t *email_payload(const char *to_user, const char *title) {
    return json_pack("{s:s, s:s, s:s, s:s}", "messageId", "65a1b2c3d4e5f60718293a4b", "toUser",
                     to_user, "title", title, "body", "Ana asks for 3 nights.");
}

static json_t *webhook_payload(const char *url, int n) {
    return json_pack("{s:s, s:{s:i}}", "url", url, "body", "n", n);
}

static mv_directory *map_directory(void) {
    json_t *m = json_pack("{s:s, s:s}", "u1", "ana@example.org", "u2", "bob@example.org");
    mv_directory *d = NULL;
    mv_directory_open_map(m, &d, NULL);
    json_decref(m);
    return d;
}

static mv_outbox_row get_row(mv_store *s, const char *id) {
    mv_outbox_row r;
    mv_err err = {0};
    if (mv_outbox_get(s, id, &r, &err) != MV_OK) fprintf(stderr, "get: %s\n", err.message);
    return r;
}

STORE_TEST(row_added_in_a_rolled_back_transaction_does_not_exist) {
    mv_store *s = open_store(kind, "rollback.db");
    REQUIRE(s);
    add_ctx c = {.kind = MV_OUTBOX_EMAIL,
                 .payload = email_payload("u1", "Hi"),
                 .now = 1000,
                 .fail_after = true};
    mv_err err = {0};
    CHECK_CODE(mv_store_write(s, add_cb, &c, &err), MV_ABORTED, &err);
    json_decref(c.payload);
    int64_t pending = -1, failed = -1;
    CHECK_CODE(mv_outbox_depth(s, &pending, &failed, &err), MV_OK, &err);
    CHECK_INT(pending, 0);
    mv_outbox_row r;
    CHECK_CODE(mv_outbox_get(s, c.id, &r, &err), MV_NOT_FOUND, &err);
    c.fail_after = false;
    c.payload = email_payload("u1", "Hi");
    CHECK_CODE(mv_store_write(s, add_cb, &c, &err), MV_OK, &err);
    json_decref(c.payload);
    CHECK_CODE(mv_outbox_depth(s, &pending, &failed, &err), MV_OK, &err);
    CHECK_INT(pending, 1);
    CHECK_INT(failed, 0);
    mv_store_close(s);
}

/* Row ids are UUID v7: a row added a millisecond later sorts after every earlier one, so the
 * primary key's index grows at its end (a random id cost a write on a random page of it). */
STORE_TEST(rows_added_later_get_uuid_v7_ids_that_sort_after_earlier_ones) {
    mv_store *s = open_store(kind, "ids.db");
    REQUIRE(s);
    char prev[37] = "";
    for (int i = 0; i < 20; i++) {
        const char *id = add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload("http://x.test/h", i), 1000);
        REQUIRE(id);
        CHECK(mv_valid_uuid(id));
        CHECK_INT(id[14], '7');
        CHECK(strchr("89ab", id[19]) != NULL);
        if (*prev) CHECK(strcmp(prev, id) < 0);
        memcpy(prev, id, 37);
        usleep(1500); /* the next id's millisecond is a later one */
    }
    mv_store_close(s);
}

STORE_TEST(payloads_of_the_wrong_shape_are_refused_naming_the_field) {
    mv_store *s = open_store(kind, "shape.db");
    REQUIRE(s);
    mv_err err = {0};
    json_t *bad[] = {json_pack("{s:s, s:s, s:s}", "messageId", "m", "title", "t", "body", "b"),
                     json_pack("{s:s, s:s, s:s, s:s}", "messageId", "m", "toUser", "", "title", "t",
                               "body", "b"),
                     json_pack("{s:s, s:{}}", "url", "ftp://x", "body"),
                     json_pack("{s:s}", "url", "http://x")};
    const char *field[] = {"toUser", "toUser", "url", "body"};
    mv_outbox_kind kinds[] = {MV_OUTBOX_EMAIL, MV_OUTBOX_EMAIL, MV_OUTBOX_WEBHOOK,
                              MV_OUTBOX_WEBHOOK};
    for (int i = 0; i < 4; i++) {
        add_ctx c = {.kind = kinds[i], .payload = bad[i]};
        CHECK_CODE(mv_store_write(s, add_cb, &c, &err), MV_INVALID_ARGUMENT, &err);
        CHECK(strstr(err.message, field[i]) != NULL);
        json_decref(bad[i]);
    }
    mv_store_close(s);
}

STORE_TEST(email_row_is_sent_once_with_trimmed_subject_and_stable_message_id) {
    mv_store *s = open_store(kind, "email.db");
    smtp_sink *sink = smtp_sink_start();
    REQUIRE(s && sink);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    mv_email_config ec = {.smtp = {.url = smtp_sink_url(sink), .from = "noreply@example.com"},
                          .directory = map_directory()};
    mv_outbox_config cfg = {.clock = &clk, .email = &ec};
    const char *id =
        add_row(s, MV_OUTBOX_EMAIL, email_payload("u1", "  Ana wants your flat \n"), now);
    REQUIRE(id);
    char row_id[37];
    strcpy(row_id, id);
    int delivered = -1;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    CHECK_INT(smtp_sink_received(sink), 1);
    smtp_sink_message m;
    REQUIRE(smtp_sink_get(sink, 0, &m));
    CHECK_STR(m.to[0], "ana@example.org");
    char *subj = smtp_sink_header(&m, "Subject"), *mid = smtp_sink_header(&m, "Message-ID");
    CHECK_STR(subj, "Ana wants your flat");
    char expect[80];
    snprintf(expect, sizeof expect, "<%s@example.com>", row_id);
    CHECK_STR(mid, expect);
    CHECK(strstr(m.data, "Ana asks for 3 nights.") != NULL);
    free(subj);
    free(mid);
    smtp_sink_message_free(&m);
    mv_outbox_row r = get_row(s, row_id);
    CHECK_STR(r.state, "sent");
    CHECK_INT(r.attempts, 1);
    CHECK(r.lease_owner == NULL && r.last_error == NULL);
    mv_outbox_row_free(&r);
    mv_directory_close(ec.directory);
    smtp_sink_stop(sink);
    mv_store_close(s);
}

STORE_TEST(recipient_without_address_is_skipped_without_sending) {
    mv_store *s = open_store(kind, "skip.db");
    smtp_sink *sink = smtp_sink_start();
    REQUIRE(s && sink);
    mv_email_config ec = {.smtp = {.url = smtp_sink_url(sink), .from = "noreply@example.com"},
                          .directory = map_directory()};
    mv_outbox_config cfg = {.email = &ec};
    const char *id = add_row(s, MV_OUTBOX_EMAIL, email_payload("stranger", "Hello"), mv_now_ms());
    REQUIRE(id);
    int delivered = -1;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    CHECK_INT(smtp_sink_received(sink), 0);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "skipped");
    CHECK(r.last_error && strstr(r.last_error, "no_address"));
    mv_outbox_row_free(&r);
    mv_directory_close(ec.directory);
    smtp_sink_stop(sink);
    mv_store_close(s);
}

typedef struct events {
    int n, finals;
    char stage[32];
} events;

static void on_event(void *ctx, const mv_outbox_event *ev) {
    events *e = ctx;
    e->n++;
    e->finals += ev->final;
    mv_strlcpy(e->stage, ev->stage, sizeof e->stage);
}

STORE_TEST(failing_smtp_is_retried_with_growing_backoff_then_failed_at_stage_notifier) {
    mv_store *s = open_store(kind, "retry.db");
    smtp_sink *sink = smtp_sink_start();
    REQUIRE(s && sink);
    smtp_sink_set_mode(sink, SMTP_SINK_FAIL_DATA_451);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    mv_email_config ec = {.smtp = {.url = smtp_sink_url(sink), .from = "noreply@example.com"},
                          .directory = map_directory()};
    events ev = {0};
    mv_outbox_config cfg = {.clock = &clk,
                            .email = &ec,
                            .max_attempts = 3,
                            .backoff_base_ms = 1000,
                            .backoff_cap_ms = 1500,
                            .on_event = on_event,
                            .on_event_ctx = &ev};
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_EMAIL, email_payload("u2", "Reminder"), now));
    mv_err err = {0};
    int delivered;
    /* attempt 1 → retry in [500, 1000] */
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "pending");
    CHECK_INT(r.attempts, 1);
    CHECK(r.next_attempt_at >= now + 500 && r.next_attempt_at <= now + 1000);
    CHECK_STR(r.failure_stage, "notifier");
    CHECK(r.last_error && strstr(r.last_error, "451"));
    int64_t next = r.next_attempt_at;
    mv_outbox_row_free(&r);
    /* not due yet: nothing happens */
    now = next - 1;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(smtp_sink_received(sink), 1);
    /* attempt 2 → retry in [750, 1500] (2000 capped at 1500) */
    now = next;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(smtp_sink_received(sink), 2);
    r = get_row(s, id);
    CHECK_STR(r.state, "pending");
    CHECK_INT(r.attempts, 2);
    CHECK(r.next_attempt_at >= now + 750 && r.next_attempt_at <= now + 1500);
    now = r.next_attempt_at;
    mv_outbox_row_free(&r);
    /* attempt 3 = max → failed */
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    r = get_row(s, id);
    CHECK_STR(r.state, "failed");
    CHECK_INT(r.attempts, 3);
    CHECK_STR(r.failure_stage, "notifier");
    CHECK(r.last_error && strstr(r.last_error, "451"));
    mv_outbox_row_free(&r);
    CHECK_INT(ev.n, 3);
    CHECK_INT(ev.finals, 1);
    CHECK_STR(ev.stage, "notifier");
    now += 10000000;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(smtp_sink_received(sink), 3); /* failed rows stay failed */
    int64_t pending, failed;
    CHECK_CODE(mv_outbox_depth(s, &pending, &failed, &err), MV_OK, &err);
    CHECK_INT(pending, 0);
    CHECK_INT(failed, 1);
    mv_directory_close(ec.directory);
    smtp_sink_stop(sink);
    mv_store_close(s);
}

STORE_TEST(directory_failure_is_recorded_at_stage_recipient_lookup) {
    mv_store *s = open_store(kind, "lookup.db");
    http_sink *users = http_sink_start();
    smtp_sink *sink = smtp_sink_start();
    REQUIRE(s && users && sink);
    http_sink_set_default(users, &(http_sink_response){.status = 503});
    mv_directory *dir;
    mv_err err = {0};
    REQUIRE(mv_directory_open_webhook(http_sink_url(users), NULL, &dir, &err) == MV_OK);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    mv_email_config ec = {.smtp = {.url = smtp_sink_url(sink), .from = "noreply@example.com"},
                          .directory = dir};
    mv_outbox_config cfg = {.clock = &clk, .email = &ec, .max_attempts = 2};
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_EMAIL, email_payload("u1", "Hello"), now));
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, NULL, &err), MV_OK, &err);
    now += 10 * 60 * 1000;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, NULL, &err), MV_OK, &err);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "failed");
    CHECK_STR(r.failure_stage, "recipientLookup");
    CHECK(r.last_error && strstr(r.last_error, "503") && strstr(r.last_error, "u1"));
    mv_outbox_row_free(&r);
    CHECK_INT(http_sink_count(users), 2);
    CHECK_INT(smtp_sink_received(sink), 0);
    mv_directory_close(dir);
    smtp_sink_stop(sink);
    http_sink_stop(users);
    mv_store_close(s);
}

typedef struct race {
    mv_store *store;
    const mv_outbox_config *cfg;
    int delivered;
    mv_code rc;
} race;

static void *race_worker(void *arg) {
    race *r = arg;
    for (int round = 0; round < 200; round++) {
        int d = 0;
        mv_err err = {0};
        r->rc = mv_outbox_run_due(r->store, r->cfg, 7, &d, &err);
        if (r->rc) break;
        r->delivered += d;
        int64_t pending = 0;
        mv_outbox_depth(r->store, &pending, NULL, NULL);
        if (pending == 0) break;
    }
    return NULL;
}

STORE_TEST(two_workers_racing_over_fifty_rows_deliver_each_exactly_once) {
    mv_store *s = open_store(kind, "race.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    char url[128];
    snprintf(url, sizeof url, "%s/events", http_sink_url(hook));
    char ids[50][37];
    for (int i = 0; i < 50; i++)
        strcpy(ids[i], add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(url, i), mv_now_ms()));
    mv_outbox_config cfg = {0};
    pthread_t t[2];
    race r[2] = {{.store = s, .cfg = &cfg}, {.store = s, .cfg = &cfg}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, race_worker, &r[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(r[0].rc, MV_OK);
    CHECK_INT(r[1].rc, MV_OK);
    CHECK_INT(r[0].delivered + r[1].delivered, 50);
    CHECK_INT(http_sink_count(hook), 50);
    int seen[50] = {0};
    for (int i = 0; i < http_sink_count(hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(hook, i, &q));
        json_t *b = json_loads(q.body, 0, NULL);
        int n = (int)json_integer_value(json_object_get(b, "n"));
        if (n >= 0 && n < 50) {
            seen[n]++;
            CHECK_STR(http_sink_header(&q, "Idempotency-Key"), ids[n]);
        }
        json_decref(b);
        http_sink_request_free(&q);
    }
    for (int i = 0; i < 50; i++)
        CHECK_INT(seen[i], 1);
    fprintf(stderr, "race split: %d / %d\n", r[0].delivered, r[1].delivered);
    http_sink_stop(hook);
    mv_store_close(s);
}

static const char SQL_ABANDON[] =
    "UPDATE outbox SET state = 'delivering', lease_owner = 'dead-worker', lease_expires_at = ?, "
    "attempts = 1 WHERE id = ?";

typedef struct abandon_ctx {
    const char *id;
    int64_t until;
} abandon_ctx;

static mv_code abandon_cb(mv_db *db, void *ctx, mv_err *err) {
    abandon_ctx *c = ctx;
    return mv_db_execf(db, SQL_ABANDON, NULL, err, "is", c->until, c->id);
}

STORE_TEST(row_of_a_dead_worker_is_redelivered_only_after_its_lease) {
    mv_store *s = open_store(kind, "lease.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(http_sink_url(hook), 1), now));
    abandon_ctx a = {.id = id, .until = now + 60000};
    mv_err err = {0};
    REQUIRE(mv_store_write(s, abandon_cb, &a, &err) == MV_OK);
    mv_outbox_config cfg = {.clock = &clk};
    int delivered = -1;
    now += 59999;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    CHECK_INT(http_sink_count(hook), 0);
    now += 1;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    CHECK_INT(http_sink_count(hook), 1);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "sent");
    CHECK_INT(r.attempts, 2);
    mv_outbox_row_free(&r);
    http_sink_stop(hook);
    mv_store_close(s);
}

/* While the first delivery is in flight, someone else takes the row over (as after a lease
 * expiry): the first worker's outcome must not overwrite the new owner's state. */
static const char SQL_STEAL[] =
    "UPDATE outbox SET lease_owner = 'thief', lease_expires_at = 1 WHERE state = 'delivering'";

static mv_code steal_cb(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_execf(db, SQL_STEAL, NULL, err, "");
}

static void stealing_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    (void)req;
    mv_store_write((mv_store *)ctx, steal_cb, NULL, NULL);
    res->status = 200;
}

STORE_TEST(outcome_is_not_recorded_when_the_lease_was_taken_over) {
    mv_store *s = open_store(kind, "steal.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    http_sink_set_handler(hook, stealing_handler, s);
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(http_sink_url(hook), 1), mv_now_ms()));
    int delivered = -1;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, NULL, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "delivering");
    CHECK_STR(r.lease_owner, "thief");
    mv_outbox_row_free(&r);
    http_sink_stop(hook);
    mv_store_close(s);
}

STORE_TEST(webhook_rows_give_up_on_4xx_and_retry_on_5xx) {
    mv_store *s = open_store(kind, "hook.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    char url4[128], url5[128];
    snprintf(url4, sizeof url4, "%s/four", http_sink_url(hook));
    snprintf(url5, sizeof url5, "%s/five", http_sink_url(hook));
    http_sink_push(hook, &(http_sink_response){.path = "/four", .status = 422});
    http_sink_push(hook, &(http_sink_response){.path = "/five", .status = 502});
    char id4[37], id5[37];
    strcpy(id4, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(url4, 4), now));
    json_t *p5 = webhook_payload(url5, 5);
    json_object_set_new(p5, "idempotencyKey", json_string("caller-key-5"));
    strcpy(id5, add_row(s, MV_OUTBOX_WEBHOOK, p5, now));
    mv_webhook_config wh = {.secret = "k", .secret_len = 1};
    mv_outbox_config cfg = {.clock = &clk, .webhook = &wh};
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, NULL, &err), MV_OK, &err);
    mv_outbox_row r4 = get_row(s, id4), r5 = get_row(s, id5);
    CHECK_STR(r4.state, "failed");
    CHECK_STR(r4.failure_stage, "webhook");
    CHECK(r4.last_error && strstr(r4.last_error, "422"));
    CHECK_STR(r5.state, "pending");
    mv_outbox_row_free(&r4);
    mv_outbox_row_free(&r5);
    now += 3600 * 1000;
    int delivered = 0;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    r5 = get_row(s, id5);
    CHECK_STR(r5.state, "sent");
    mv_outbox_row_free(&r5);
    /* both attempts of row 5 carried the caller's key and a signature */
    int with_key = 0;
    for (int i = 0; i < http_sink_count(hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(hook, i, &q));
        if (strcmp(q.path, "/five") == 0) {
            with_key += strcmp(http_sink_header(&q, "Idempotency-Key"), "caller-key-5") == 0;
            CHECK(http_sink_header(&q, "X-Missive-Signature") != NULL);
        }
        http_sink_request_free(&q);
    }
    CHECK_INT(with_key, 2);
    http_sink_stop(hook);
    mv_store_close(s);
}

STORE_TEST(email_rows_wait_while_email_is_not_configured) {
    mv_store *s = open_store(kind, "noemail.db");
    REQUIRE(s);
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_EMAIL, email_payload("u1", "Hi"), mv_now_ms()));
    int delivered = -1;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, NULL, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "pending");
    CHECK_INT(r.attempts, 0);
    mv_outbox_row_free(&r);
    mv_store_close(s);
}

STORE_TEST(email_can_go_through_a_signed_webhook_instead_of_smtp) {
    mv_store *s = open_store(kind, "emailhook.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    char url[128];
    snprintf(url, sizeof url, "%s/mail", http_sink_url(hook));
    mv_email_config ec = {.webhook_url = url, .directory = map_directory()};
    mv_webhook_config wh = {.secret = "secret", .secret_len = 6};
    mv_outbox_config cfg = {.email = &ec, .webhook = &wh};
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_EMAIL, email_payload("u2", " Hello "), mv_now_ms()));
    mv_err err = {0};
    int delivered = 0;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    http_sink_request q;
    REQUIRE(http_sink_get(hook, 0, &q));
    json_t *b = json_loads(q.body, 0, NULL);
    json_t *e = json_object_get(b, "email");
    CHECK_STR(mv_json_str(e, "to"), "bob@example.org");
    CHECK_STR(mv_json_str(e, "subject"), "Hello");
    CHECK_STR(mv_json_str(e, "toUser"), "u2");
    CHECK_STR(http_sink_header(&q, "Idempotency-Key"), id);
    char sig[72];
    mv_webhook_signature("secret", 6, q.body, q.body_len, sig);
    CHECK_STR(http_sink_header(&q, "X-Missive-Signature"), sig);
    json_decref(b);
    http_sink_request_free(&q);
    mv_directory_close(ec.directory);
    http_sink_stop(hook);
    mv_store_close(s);
}

STORE_TEST(background_worker_delivers_on_wake_and_stops_promptly) {
    mv_store *s = open_store(kind, "worker.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    mv_outbox_worker *w;
    mv_err err = {0};
    REQUIRE(mv_outbox_worker_start(s, NULL, 60000, &w, &err) == MV_OK);
    mv_sleep_ms(50); /* let it finish its first (empty) pass and go to sleep for a minute */
    add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(http_sink_url(hook), 1), mv_now_ms());
    mv_outbox_worker_wake(w);
    CHECK(http_sink_wait(hook, 1, 5000));
    int64_t t0 = mv_now_ms();
    mv_outbox_worker_stop(w);
    CHECK(mv_now_ms() - t0 < 1000);
    mv_outbox_worker_stop(NULL);
    http_sink_stop(hook);
    mv_store_close(s);
}

static int scan_count;
static void count_row(void *ctx, const mv_outbox_row *row) {
    (void)ctx;
    if (strcmp(row->state, "failed") == 0 || strcmp(row->state, "delivering") == 0) scan_count++;
}

STORE_TEST(scan_lists_failed_rows_and_stale_deliveries) {
    mv_store *s = open_store(kind, "scan.db");
    REQUIRE(s);
    int64_t now = 1700000000000;
    char a[37], b[37];
    strcpy(a, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload("http://127.0.0.1:1/x", 1), now));
    strcpy(b, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload("http://127.0.0.1:1/x", 2), now));
    add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload("http://127.0.0.1:1/x", 3), now);
    abandon_ctx ab = {.id = a, .until = now - 120000};
    mv_err err = {0};
    REQUIRE(mv_store_write(s, abandon_cb, &ab, &err) == MV_OK);
    ab = (abandon_ctx){.id = b, .until = now - 1000}; /* expired, but not stale yet */
    REQUIRE(mv_store_write(s, abandon_cb, &ab, &err) == MV_OK);
    int n = -1;
    scan_count = 0;
    CHECK_CODE(mv_outbox_scan(s, now, 60000, NULL, 100, count_row, NULL, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    CHECK_INT(scan_count, 1);
    CHECK_CODE(mv_outbox_scan(s, now, 60000, NULL, 0, count_row, NULL, &n, &err),
               MV_INVALID_ARGUMENT, &err);
    mv_store_close(s);
}

/* ---- kill -9 ---------------------------------------------------------------------------- */

/* The child claims the row with a 1 s lease and blocks on the sink's delayed answer; it is killed
 * there. The parent then runs a worker whose clock is past the lease. */
static pid_t spawn_worker(const mv_outbox_config *cfg) {
    pid_t pid = fork();
    if (pid == 0) {
        mv_store *s = NULL;
        if (mv_store_open(store_url, NULL, &s, NULL) != MV_OK) _exit(3);
        mv_outbox_run_due(s, cfg, 10, NULL, NULL);
        _exit(0); /* not reached when killed in time */
    }
    return pid;
}

STORE_TEST(webhook_row_of_a_killed_worker_is_redelivered_with_the_same_idempotency_key) {
    mv_store *s = open_store(kind, "kill-hook.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    http_sink_push(hook, &(http_sink_response){.delay_ms = 30000});
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(http_sink_url(hook), 7), mv_now_ms()));
    mv_outbox_config child_cfg = {.lease_ms = 1000};
    pid_t pid = spawn_worker(&child_cfg);
    REQUIRE(pid > 0);
    CHECK(http_sink_wait(hook, 1, 10000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "delivering");
    int64_t now = r.lease_expires_at;
    mv_outbox_row_free(&r);
    mv_clock clk = mv_manual_clock(&now);
    mv_outbox_config cfg = {.clock = &clk};
    int delivered = 0;
    mv_err err = {0};
    now -= 1; /* still leased: untouched */
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    now += 1;
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    REQUIRE(http_sink_count(hook) == 2);
    http_sink_request q1, q2;
    REQUIRE(http_sink_get(hook, 0, &q1) && http_sink_get(hook, 1, &q2));
    CHECK_STR(http_sink_header(&q1, "Idempotency-Key"), id);
    CHECK_STR(http_sink_header(&q2, "Idempotency-Key"), id);
    CHECK_STR(q1.body, q2.body);
    http_sink_request_free(&q1);
    http_sink_request_free(&q2);
    r = get_row(s, id);
    CHECK_STR(r.state, "sent");
    CHECK_INT(r.attempts, 2);
    mv_outbox_row_free(&r);
    http_sink_stop(hook);
    mv_store_close(s);
}

STORE_TEST(email_of_a_killed_worker_is_resent_with_the_same_message_id) {
    mv_store *s = open_store(kind, "kill-mail.db");
    smtp_sink *sink = smtp_sink_start();
    REQUIRE(s && sink);
    smtp_sink_set_delay(sink, 30000);
    mv_email_config ec = {
        .smtp = {.url = smtp_sink_url(sink), .from = "noreply@example.com", .timeout_ms = 60000},
        .directory = map_directory()};
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_EMAIL, email_payload("u1", "Booking"), mv_now_ms()));
    mv_outbox_config child_cfg = {.email = &ec, .lease_ms = 1000};
    pid_t pid = spawn_worker(&child_cfg);
    REQUIRE(pid > 0);
    CHECK(smtp_sink_wait(sink, 1, 10000));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    smtp_sink_set_delay(sink, 0);
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "delivering");
    int64_t now = r.lease_expires_at;
    mv_outbox_row_free(&r);
    mv_clock clk = mv_manual_clock(&now);
    mv_outbox_config cfg = {.clock = &clk, .email = &ec};
    int delivered = 0;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    REQUIRE(smtp_sink_received(sink) == 2);
    smtp_sink_message m1, m2;
    REQUIRE(smtp_sink_get(sink, 0, &m1) && smtp_sink_get(sink, 1, &m2));
    char *id1 = smtp_sink_header(&m1, "Message-ID"), *id2 = smtp_sink_header(&m2, "Message-ID");
    CHECK(id1 && strstr(id1, id));
    CHECK_STR(id1, id2);
    free(id1);
    free(id2);
    smtp_sink_message_free(&m1);
    smtp_sink_message_free(&m2);
    mv_directory_close(ec.directory);
    smtp_sink_stop(sink);
    mv_store_close(s);
}

typedef struct second_worker {
    mv_store *store;
    const mv_outbox_config *cfg;
    http_sink *hook;
    int delivered;
    mv_code rc;
} second_worker;

static void *second_worker_main(void *arg) {
    second_worker *w = arg;
    if (!http_sink_wait(w->hook, 1, 5000)) return NULL; /* the first delivery is in flight */
    mv_err err = {0};
    w->rc = mv_outbox_run_due(w->store, w->cfg, 10, &w->delivered, &err);
    return NULL;
}

STORE_TEST(huge_lease_and_backoff_settings_neither_wrap_nor_crash) {
    mv_store *s = open_store(kind, "huge.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    char url[128];
    snprintf(url, sizeof url, "%s/slow", http_sink_url(hook));
    http_sink_push(hook, &(http_sink_response){.path = "/slow", .status = 502, .delay_ms = 600});
    char id[37];
    strcpy(id, add_row(s, MV_OUTBOX_WEBHOOK, webhook_payload(url, 1), now));
    /* a lease "for ever" and a backoff of about 99 days (d/2 + 1 == 2^32) */
    mv_outbox_config cfg = {.clock = &clk,
                            .lease_ms = INT64_MAX,
                            .backoff_base_ms = INT64_C(8589934590),
                            .backoff_cap_ms = INT64_C(8589934590)};
    second_worker w = {.store = s, .cfg = &cfg, .hook = hook};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, second_worker_main, &w) == 0);
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, NULL, &err), MV_OK, &err);
    pthread_join(t, NULL);
    CHECK_INT(w.rc, MV_OK);
    CHECK_INT(http_sink_count(hook), 1); /* the live lease was not taken over */
    mv_outbox_row r = get_row(s, id);
    CHECK_STR(r.state, "pending");
    CHECK(r.next_attempt_at >= now + INT64_C(8589934590) / 2);
    mv_outbox_row_free(&r);
    http_sink_stop(hook);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(row_added_in_a_rolled_back_transaction_does_not_exist,
                     rows_added_later_get_uuid_v7_ids_that_sort_after_earlier_ones,
                     payloads_of_the_wrong_shape_are_refused_naming_the_field,
                     email_row_is_sent_once_with_trimmed_subject_and_stable_message_id,
                     recipient_without_address_is_skipped_without_sending,
                     failing_smtp_is_retried_with_growing_backoff_then_failed_at_stage_notifier,
                     directory_failure_is_recorded_at_stage_recipient_lookup,
                     two_workers_racing_over_fifty_rows_deliver_each_exactly_once,
                     row_of_a_dead_worker_is_redelivered_only_after_its_lease,
                     outcome_is_not_recorded_when_the_lease_was_taken_over,
                     webhook_rows_give_up_on_4xx_and_retry_on_5xx,
                     email_rows_wait_while_email_is_not_configured,
                     email_can_go_through_a_signed_webhook_instead_of_smtp,
                     background_worker_delivers_on_wake_and_stops_promptly,
                     scan_lists_failed_rows_and_stale_deliveries,
                     webhook_row_of_a_killed_worker_is_redelivered_with_the_same_idempotency_key,
                     email_of_a_killed_worker_is_resent_with_the_same_message_id,
                     huge_lease_and_backoff_settings_neither_wrap_nor_crash);
}
