/* outbox_loop_test.c — outbox webhook rows sent on the outgoing-call loop (mv_outbox_config.loop):
 * a batch of slow receivers costs one wait instead of one each, every row keeps its key and its
 * verdict (sent, given up on 4xx, retried on 5xx), racing workers deliver each row once, and a
 * loop that stops leaves its rows to be retried — on both stores. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "missive/deliver.h"
#include "store/db.h"
#include "store/write_async.h"
#include "support/http_sink.h"
#include "support/stores.h"

static mv_store *open_store(const char *kind, const char *name) {
    const char *url = test_store_url(kind, name);
    mv_store *s = NULL;
    mv_err err = {0};
    if (!url || mv_store_open(url, NULL, &s, &err) != MV_OK ||
        mv_store_migrate(s, NULL, &err) != MV_OK) {
        fprintf(stderr, "store: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

typedef struct add_ctx {
    json_t *payload;
    int64_t now;
    char id[37];
} add_ctx;

static mv_code add_cb(mv_db *db, void *ctx, mv_err *err) {
    add_ctx *c = ctx;
    return mv_outbox_add_tx_id(db, MV_OUTBOX_WEBHOOK, c->payload, c->now, c->id, err);
}

/* Adds a webhook row {"url", "body": {"n": n}} due at now; its id into id. */
static bool add_row(mv_store *s, const char *url, int n, int64_t now, char id[37]) {
    add_ctx c = {.payload = json_pack("{s:s, s:{s:i}}", "url", url, "body", "n", n), .now = now};
    mv_err err = {0};
    mv_code rc = mv_store_write(s, add_cb, &c, &err);
    json_decref(c.payload);
    if (rc) fprintf(stderr, "add: %s\n", err.message);
    memcpy(id, c.id, 37);
    return rc == MV_OK;
}

static char *row_state(mv_store *s, const char *id) {
    static char state[16];
    mv_outbox_row r;
    if (mv_outbox_get(s, id, &r, NULL) != MV_OK) return "?";
    mv_strlcpy(state, r.state, sizeof state);
    mv_outbox_row_free(&r);
    return state;
}

STORE_TEST(ten_slow_webhook_rows_are_sent_at_once_each_with_its_key_and_verdict) {
    mv_store *s = open_store(kind, "olbatch.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    http_sink_set_default(hook, &(http_sink_response){.delay_ms = 800});
    http_sink_push(hook, &(http_sink_response){.path = "/four", .status = 422, .delay_ms = 800});
    http_sink_push(hook, &(http_sink_response){.path = "/five", .status = 502, .delay_ms = 800});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    char url[128], url4[128], url5[128], ids[10][37], id4[37], id5[37];
    snprintf(url, sizeof url, "%s/events", http_sink_url(hook));
    snprintf(url4, sizeof url4, "%s/four", http_sink_url(hook));
    snprintf(url5, sizeof url5, "%s/five", http_sink_url(hook));
    for (int i = 0; i < 8; i++)
        REQUIRE(add_row(s, url, i, now, ids[i]));
    REQUIRE(add_row(s, url4, 4, now, id4));
    REQUIRE(add_row(s, url5, 5, now, id5));
    mv_outbox_config cfg = {.clock = &clk, .loop = loop};
    int delivered = 0;
    mv_err err = {0};
    int64_t t0 = mv_now_ms();
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 16, &delivered, &err), MV_OK, &err);
    int64_t took = mv_now_ms() - t0;
    CHECK(took < 2500); /* one after another: 8 s */
    CHECK_INT(delivered, 8);
    for (int i = 0; i < 8; i++)
        CHECK_STR(row_state(s, ids[i]), "sent");
    CHECK_STR(row_state(s, id4), "failed");  /* 4xx: given up */
    CHECK_STR(row_state(s, id5), "pending"); /* 5xx: retried later */
    int keyed = 0;
    for (int i = 0; i < http_sink_count(hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(hook, i, &q));
        json_t *b = json_loads(q.body, 0, NULL);
        int n = (int)json_integer_value(json_object_get(b, "n"));
        const char *key = http_sink_header(&q, "Idempotency-Key");
        if (strcmp(q.path, "/events") == 0 && n >= 0 && n < 8 && key && !strcmp(key, ids[n]))
            keyed++;
        json_decref(b);
        http_sink_request_free(&q);
    }
    CHECK_INT(keyed, 8);
    CHECK_INT(http_sink_count(hook), 10);
    mv_loop_free(loop);
    http_sink_stop(hook);
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

STORE_TEST(two_workers_on_loops_racing_over_forty_rows_deliver_each_exactly_once) {
    mv_store *s = open_store(kind, "olrace.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    mv_loop *loops[2] = {NULL, NULL};
    REQUIRE(mv_loop_new(NULL, &loops[0], NULL) == MV_OK);
    REQUIRE(mv_loop_new(NULL, &loops[1], NULL) == MV_OK);
    char url[128], ids[40][37];
    snprintf(url, sizeof url, "%s/events", http_sink_url(hook));
    for (int i = 0; i < 40; i++)
        REQUIRE(add_row(s, url, i, mv_now_ms(), ids[i]));
    mv_outbox_config cfg[2] = {{.loop = loops[0]}, {.loop = loops[1]}};
    pthread_t t[2];
    race r[2] = {{.store = s, .cfg = &cfg[0]}, {.store = s, .cfg = &cfg[1]}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, race_worker, &r[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(r[0].rc, MV_OK);
    CHECK_INT(r[1].rc, MV_OK);
    CHECK_INT(r[0].delivered + r[1].delivered, 40);
    CHECK_INT(http_sink_count(hook), 40);
    int seen[40] = {0};
    for (int i = 0; i < http_sink_count(hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(hook, i, &q));
        json_t *b = json_loads(q.body, 0, NULL);
        int n = (int)json_integer_value(json_object_get(b, "n"));
        if (n >= 0 && n < 40) {
            seen[n]++;
            CHECK_STR(http_sink_header(&q, "Idempotency-Key"), ids[n]);
        }
        json_decref(b);
        http_sink_request_free(&q);
    }
    for (int i = 0; i < 40; i++)
        CHECK_INT(seen[i], 1);
    mv_loop_free(loops[0]);
    mv_loop_free(loops[1]);
    http_sink_stop(hook);
    mv_store_close(s);
}

typedef struct runner {
    mv_store *store;
    const mv_outbox_config *cfg;
    mv_code rc;
} runner;

static void *run_once(void *arg) {
    runner *r = arg;
    mv_err err = {0};
    r->rc = mv_outbox_run_due(r->store, r->cfg, 10, NULL, &err);
    return NULL;
}

STORE_TEST(rows_of_a_loop_that_stops_mid_delivery_are_retried_later_with_the_same_key) {
    mv_store *s = open_store(kind, "olstop.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    http_sink_push(hook, &(http_sink_response){.delay_ms = 5000});
    http_sink_push(hook, &(http_sink_response){.delay_ms = 5000});
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    int64_t now = 1700000000000;
    mv_clock clk = mv_manual_clock(&now);
    char url[128], a[37], b[37];
    snprintf(url, sizeof url, "%s/events", http_sink_url(hook));
    REQUIRE(add_row(s, url, 1, now, a));
    REQUIRE(add_row(s, url, 2, now, b));
    mv_outbox_config cfg = {.clock = &clk, .loop = loop};
    runner r = {.store = s, .cfg = &cfg};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, run_once, &r) == 0);
    REQUIRE(http_sink_wait(hook, 2, 5000));
    int64_t t0 = mv_now_ms();
    mv_loop_stop(loop);
    pthread_join(t, NULL);
    CHECK(mv_now_ms() - t0 < 2000);
    CHECK_INT(r.rc, MV_OK);
    CHECK_STR(row_state(s, a), "pending");
    CHECK_STR(row_state(s, b), "pending");
    mv_outbox_row row;
    REQUIRE(mv_outbox_get(s, a, &row, NULL) == MV_OK);
    CHECK(row.last_error && strstr(row.last_error, "shutting down"));
    mv_outbox_row_free(&row);
    /* later, without a loop: both delivered, with the keys of the first attempt */
    now += 3600 * 1000;
    mv_outbox_config plain = {.clock = &clk};
    int delivered = 0;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &plain, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 2);
    int same = 0;
    for (int i = 0; i < 4; i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(hook, i, &q));
        const char *key = http_sink_header(&q, "Idempotency-Key");
        same += key && (!strcmp(key, a) || !strcmp(key, b));
        http_sink_request_free(&q);
    }
    CHECK_INT(same, 4);
    mv_loop_free(loop);
    http_sink_stop(hook);
    mv_store_close(s);
}

/* ---- emails in a batch ------------------------------------------------------------------ */

static mv_code add_email_cb(mv_db *db, void *ctx, mv_err *err) {
    add_ctx *c = ctx;
    return mv_outbox_add_tx_id(db, MV_OUTBOX_EMAIL, c->payload, c->now, c->id, err);
}

/* Adds an email row for user u1, due at now; its id into id. */
static bool add_email(mv_store *s, int n, int64_t now, char id[37]) {
    add_ctx c = {.payload =
                     json_pack("{s:s, s:s, s:s, s:s}", "messageId", "65a1b2c3d4e5f60718293a4b",
                               "toUser", "u1", "title", "Hi", "body", n % 2 ? "odd" : "even"),
                 .now = now};
    mv_err err = {0};
    mv_code rc = mv_store_write(s, add_email_cb, &c, &err);
    json_decref(c.payload);
    if (rc) fprintf(stderr, "add: %s\n", err.message);
    memcpy(id, c.id, 37);
    return rc == MV_OK;
}

typedef struct mail_world {
    http_sink *hook;
    char mail_url[128], events_url[128];
    mv_directory *dir;
    mv_email_config ec;
    mv_webhook_config wh;
} mail_world;

/* Email goes through a webhook (/mail) of hook, u1's address from a map. */
static bool mail_open(mail_world *m, int delay_ms) {
    memset(m, 0, sizeof *m);
    if (!(m->hook = http_sink_start())) return false;
    http_sink_set_default(m->hook, &(http_sink_response){.delay_ms = delay_ms});
    snprintf(m->mail_url, sizeof m->mail_url, "%s/mail", http_sink_url(m->hook));
    snprintf(m->events_url, sizeof m->events_url, "%s/events", http_sink_url(m->hook));
    json_t *map = json_pack("{s:s}", "u1", "ana@example.org");
    mv_directory_open_map(map, &m->dir, NULL);
    json_decref(map);
    m->ec = (mv_email_config){.webhook_url = m->mail_url, .directory = m->dir};
    m->wh = (mv_webhook_config){.secret = "secret", .secret_len = 6};
    return m->dir != NULL;
}

static void mail_close(mail_world *m) {
    mv_directory_close(m->dir);
    http_sink_stop(m->hook);
}

static int in_state(mv_store *s, char (*ids)[37], int n, const char *state) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += !strcmp(row_state(s, ids[i]), state);
    return k;
}

/* A batch's claims are one transaction, emails included (they used to be claimed one commit
 * each, as their turn came), and its verdicts another: while the batch's last email is still on
 * the wire, every row of it is delivering, none recorded on its own. */
STORE_TEST(a_batch_claims_its_emails_with_its_webhooks_at_once_and_records_them_together) {
    mv_store *s = open_store(kind, "olmail.db");
    mail_world m;
    REQUIRE(s && mail_open(&m, 300));
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    char ids[8][37];
    for (int i = 0; i < 4; i++) {
        REQUIRE(add_email(s, i, mv_now_ms(), ids[i]));
        REQUIRE(add_row(s, m.events_url, i, mv_now_ms(), ids[4 + i]));
    }
    mv_outbox_config cfg = {.email = &m.ec, .webhook = &m.wh, .loop = loop};
    runner r = {.store = s, .cfg = &cfg};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, run_once, &r) == 0);
    REQUIRE(http_sink_wait(m.hook, 1, 5000)); /* the first call is on the wire: all claimed */
    CHECK_INT(in_state(s, ids, 8, "delivering"), 8);
    REQUIRE(http_sink_wait(m.hook, 4 + 4, 5000)); /* the last email is on the wire */
    CHECK_INT(in_state(s, ids, 8, "delivering"), 8);
    pthread_join(t, NULL);
    CHECK_INT(r.rc, MV_OK);
    CHECK_INT(in_state(s, ids, 8, "sent"), 8);
    for (int i = 0; i < 8; i++) {
        mv_outbox_row row;
        REQUIRE(mv_outbox_get(s, ids[i], &row, NULL) == MV_OK);
        CHECK_INT(row.attempts, 1);
        mv_outbox_row_free(&row);
    }
    CHECK_INT(http_sink_count(m.hook), 8);
    mv_loop_free(loop);
    mail_close(&m);
    mv_store_close(s);
}

/* Emails of a batch are tried one after another within the first half of the batch's lease (so
 * that each ends before the lease can pass to another worker); the rest go back untried — pending,
 * the claim not counted — and the next passes send each exactly once. */
STORE_TEST(emails_left_when_half_the_lease_is_spent_go_back_untried_and_are_sent_once_later) {
    mv_store *s = open_store(kind, "olhalf.db");
    mail_world m;
    REQUIRE(s && mail_open(&m, 300));
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    char ids[5][37];
    for (int i = 0; i < 5; i++)
        REQUIRE(add_email(s, i, mv_now_ms(), ids[i]));
    mv_outbox_config cfg = {.email = &m.ec, .webhook = &m.wh, .loop = loop, .lease_ms = 1000};
    int delivered = 0;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
    CHECK(delivered >= 1 && delivered <= 2); /* tried at ≈ 0 and ≈ 300 ms; not at ≈ 600 */
    CHECK_INT(http_sink_count(m.hook), delivered);
    CHECK_INT(in_state(s, ids, 5, "sent"), delivered);
    CHECK_INT(in_state(s, ids, 5, "pending"), 5 - delivered);
    for (int i = 0; i < 5; i++) {
        mv_outbox_row row;
        REQUIRE(mv_outbox_get(s, ids[i], &row, NULL) == MV_OK);
        CHECK_INT(row.attempts, !strcmp(row.state, "sent") ? 1 : 0);
        CHECK(!row.last_error); /* untried: nothing went wrong */
        mv_outbox_row_free(&row);
    }
    int total = delivered;
    for (int pass = 0; pass < 10 && total < 5; pass++) {
        CHECK_CODE(mv_outbox_run_due(s, &cfg, 10, &delivered, &err), MV_OK, &err);
        total += delivered;
    }
    CHECK_INT(total, 5);
    CHECK_INT(http_sink_count(m.hook), 5);
    int seen[5] = {0};
    for (int i = 0; i < http_sink_count(m.hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(m.hook, i, &q));
        const char *key = http_sink_header(&q, "Idempotency-Key");
        for (int j = 0; key && j < 5; j++)
            seen[j] += !strcmp(key, ids[j]);
        http_sink_request_free(&q);
    }
    for (int i = 0; i < 5; i++)
        CHECK_INT(seen[i], 1);
    mv_loop_free(loop);
    mail_close(&m);
    mv_store_close(s);
}

/* Two daemons' workers sharing a store, each with its loop, over emails and webhooks mixed: each
 * row is sent exactly once (its Idempotency-Key is its id, for emails too). */
STORE_TEST(two_workers_racing_over_emails_and_webhooks_send_each_exactly_once) {
    mv_store *s = open_store(kind, "olmailrace.db");
    mail_world m;
    REQUIRE(s && mail_open(&m, 0));
    mv_loop *loops[2] = {NULL, NULL};
    REQUIRE(mv_loop_new(NULL, &loops[0], NULL) == MV_OK);
    REQUIRE(mv_loop_new(NULL, &loops[1], NULL) == MV_OK);
    char ids[40][37];
    for (int i = 0; i < 20; i++) {
        REQUIRE(add_email(s, i, mv_now_ms(), ids[i]));
        REQUIRE(add_row(s, m.events_url, i, mv_now_ms(), ids[20 + i]));
    }
    mv_outbox_config cfg[2] = {{.email = &m.ec, .webhook = &m.wh, .loop = loops[0]},
                               {.email = &m.ec, .webhook = &m.wh, .loop = loops[1]}};
    pthread_t t[2];
    race r[2] = {{.store = s, .cfg = &cfg[0]}, {.store = s, .cfg = &cfg[1]}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, race_worker, &r[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(r[0].rc, MV_OK);
    CHECK_INT(r[1].rc, MV_OK);
    CHECK_INT(r[0].delivered + r[1].delivered, 40);
    CHECK_INT(http_sink_count(m.hook), 40);
    int seen[40] = {0};
    for (int i = 0; i < http_sink_count(m.hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(m.hook, i, &q));
        const char *key = http_sink_header(&q, "Idempotency-Key");
        for (int j = 0; key && j < 40; j++)
            seen[j] += !strcmp(key, ids[j]);
        http_sink_request_free(&q);
    }
    for (int i = 0; i < 40; i++)
        CHECK_INT(seen[i], 1);
    CHECK_INT(in_state(s, ids, 40, "sent"), 40);
    mv_loop_free(loops[0]);
    mv_loop_free(loops[1]);
    mail_close(&m);
    mv_store_close(s);
}

/* ---- the daemon's worker while requests write --------------------------------------------- */

typedef struct writer_load {
    mv_store *store;
    atomic_bool stop;
    atomic_int done;
} writer_load;

static mv_code nothing_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db, "CREATE TEMP TABLE IF NOT EXISTS load_probe (x INTEGER)", err);
}

static void load_done(mv_code rc, const mv_err *err, void *ctx) {
    (void)rc;
    (void)err;
    atomic_fetch_add(&((writer_load *)ctx)->done, 1);
}

/* Requests' writes, as creates queue them: asynchronous, back to back, a few in flight. */
static void *write_load(void *arg) {
    writer_load *l = arg;
    int queued = 0;
    while (!atomic_load(&l->stop)) {
        if (queued - atomic_load(&l->done) < 8) {
            mv__store_write_async(l->store, nothing_tx, NULL, load_done, l);
            queued++;
        } else {
            usleep(200);
        }
    }
    while (atomic_load(&l->done) < queued)
        usleep(1000);
    return NULL;
}

/* While requests keep writing, the worker pauses after each full batch (it leaves the writer and
 * the cores to them) but never stops: a backlog of several batches is still sent, each row once,
 * and with the writes gone it finishes at full speed. */
STORE_TEST(the_worker_keeps_delivering_each_row_once_while_requests_write) {
    mv_store *s = open_store(kind, "olyield.db");
    http_sink *hook = http_sink_start();
    REQUIRE(s && hook);
    mv_loop *loop = NULL;
    REQUIRE(mv_loop_new(NULL, &loop, NULL) == MV_OK);
    enum { N = 400 };
    static char ids[N][37];
    char url[128];
    snprintf(url, sizeof url, "%s/events", http_sink_url(hook));
    for (int i = 0; i < N; i++)
        REQUIRE(add_row(s, url, i, mv_now_ms(), ids[i]));
    writer_load l = {.store = s};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, write_load, &l) == 0);
    uint64_t writes0 = mv__store_async_writes(s);
    mv_outbox_config cfg = {.loop = loop};
    mv_outbox_worker *w = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_outbox_worker_start(s, &cfg, 50, &w, &err), MV_OK, &err);
    bool all = http_sink_wait(hook, N, 30000); /* with the writes still going on */
    atomic_store(&l.stop, true);
    pthread_join(t, NULL);
    mv_outbox_worker_stop(w);
    CHECK(all);
    CHECK(mv__store_async_writes(s) - writes0 > 100); /* the requests did write meanwhile */
    CHECK_INT(http_sink_count(hook), N);
    static int seen[N];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < http_sink_count(hook); i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(hook, i, &q));
        json_t *b = json_loads(q.body, 0, NULL);
        int n = (int)json_integer_value(json_object_get(b, "n"));
        if (n >= 0 && n < N) seen[n]++;
        json_decref(b);
        http_sink_request_free(&q);
    }
    int once = 0;
    for (int i = 0; i < N; i++)
        once += seen[i] == 1;
    CHECK_INT(once, N);
    CHECK_INT(in_state(s, ids, N, "sent"), N);
    mv_loop_free(loop);
    http_sink_stop(hook);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(
        ten_slow_webhook_rows_are_sent_at_once_each_with_its_key_and_verdict,
        two_workers_on_loops_racing_over_forty_rows_deliver_each_exactly_once,
        rows_of_a_loop_that_stops_mid_delivery_are_retried_later_with_the_same_key,
        a_batch_claims_its_emails_with_its_webhooks_at_once_and_records_them_together,
        emails_left_when_half_the_lease_is_spent_go_back_untried_and_are_sent_once_later,
        two_workers_racing_over_emails_and_webhooks_send_each_exactly_once,
        the_worker_keeps_delivering_each_row_once_while_requests_write);
}
