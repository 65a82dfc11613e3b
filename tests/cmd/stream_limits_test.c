/* stream_limits_test.c — GET /messages/stream at its limits, against real missived processes: a
 * message whose event is larger than 1 MiB never closes its recipient's stream; a role message
 * reaches a member of its 70th role; streams replaying a 64k-event log never delay another
 * user's live event past 1 s; a client that hangs up frees its slot at once; a stream ends with
 * `reauth` when its ticket expires; retention prunes on the recovery loop's interval; and on
 * PostgreSQL a change is not lost when the daemon's store connections drop under it. The
 * figures (live-event latencies) are printed to stderr. */
#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "message/inbox_internal.h"
#include "missive/base.h"
#include "missive/inbox.h"
#include "store/db.h"
#include "support/daemon_proc.h"
#include "support/sse_client.h"
#include "support/stores.h"

static bool write_template(const sse_env *e, const char *name, const char *json) {
    char path[800];
    snprintf(path, sizeof path, "%s/templates/%s.json", e->dir, name);
    return test_write_file(path, "%s", json);
}

/* Creates a message of template `cd` from ana with body; its id (static buffer) or "". */
static const char *create(int port, const char *cd, const char *body) {
    static char id[25];
    char path[128];
    snprintf(path, sizeof path, "/messages/new/%s", cd);
    test_reply r = test_http(port, "POST", path, "X-User-Id: ana\n", body);
    const char *got =
        r.status == 201 ? mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id")
                        : NULL;
    if (r.status != 201) fprintf(stderr, "create %s: %ld\n", cd, r.status);
    snprintf(id, sizeof id, "%s", got ? got : "");
    test_reply_free(&r);
    return id;
}

/* The next message event (created or updated) for message id within timeout_ms. */
static bool wait_message(sse *c, const char *id, int timeout_ms, sse_event *ev) {
    int64_t end = sse_now_ms() + timeout_ms;
    while (sse_now_ms() < end)
        if (sse_next(c, (int)(end - sse_now_ms()), ev) && strncmp(ev->name, "message.", 8) == 0 &&
            sse_data_has_id(ev, id))
            return true;
    return false;
}

/* ---- big events ---------------------------------------------------------------------------- */

STORE_TEST(a_message_whose_event_exceeds_a_mebibyte_never_closes_its_recipients_stream) {
    sse_env e;
    REQUIRE(
        sse_env_init(&e, kind, "stream_big", NULL, ", \"limits\": {\"messageBytes\": 8388608}"));
    REQUIRE(write_template(&e, "big",
                           "{\"templateCd\": \"big\", \"type\": \"info\", \"receiverContent\":"
                           " {\"title\": \"{{text}}\", \"short\": \"{{text}}\", \"long\":"
                           " \"{{text}}\"}, \"prepare\": {\"toUser\": \"{{to}}\"},"
                           " \"actions\": []}"));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *bob = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    CHECK_INT(bob->status, 200);
    sse_event ev;
    CHECK(sse_wait(bob, "counts", 2000, &ev));
    char first[25];
    snprintf(first, sizeof first, "%s", sse_send_note(port, "bob", 1));
    CHECK(wait_message(bob, first, 3000, &ev));
    int64_t before = ev.id;
    size_t n = 400 * 1024; /* the event carries it four times: 1.6 MB */
    char *body = malloc(n + 64);
    int k = snprintf(body, 64, "{\"to\": \"bob\", \"text\": \"");
    memset(body + k, 'a', n);
    strcpy(body + k + n, "\"}");
    char big[25], after[25];
    snprintf(big, sizeof big, "%s", create(port, "big", body));
    free(body);
    CHECK(big[0] != '\0');
    snprintf(after, sizeof after, "%s", sse_send_note(port, "bob", 2));
    /* the big one as a small stub the client refetches, then the next one, on the same stream */
    CHECK(wait_message(bob, big, 5000, &ev));
    CHECK_STR(ev.name, "message.updated");
    CHECK(strstr(ev.data, "\"truncated\":true") != NULL);
    CHECK(wait_message(bob, after, 3000, &ev));
    CHECK(!bob->eof);
    sse_close(bob);
    char path[128];
    snprintf(path, sizeof path, "/messages/%s", big);
    test_reply r = test_http(port, "GET", path, "X-User-Id: bob\n", NULL);
    CHECK_INT(r.status, 200); /* the refetch */
    test_reply_free(&r);
    /* a resume from before it replays it the same way and carries on */
    char hdr[96];
    snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\nLast-Event-ID: %lld\r\n", (long long)before);
    sse *again = sse_open(port, "/messages/stream", hdr);
    CHECK_INT(again->status, 200);
    CHECK(wait_message(again, big, 3000, &ev));
    CHECK(strstr(ev.data, "\"truncated\":true") != NULL);
    CHECK(wait_message(again, after, 3000, &ev));
    const char *live = sse_send_note(port, "bob", 3);
    CHECK(wait_message(again, live, 3000, &ev));
    sse_close(again);
    CHECK_INT(test_daemon_stop(pid), 0);
}

/* ---- roles --------------------------------------------------------------------------------- */

STORE_TEST(a_member_of_the_seventieth_role_of_a_message_gets_it_on_the_stream) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_roles", NULL, NULL));
    char tpl[2048];
    int k = snprintf(tpl, sizeof tpl,
                     "{\"templateCd\": \"roles70\", \"type\": \"info\", \"receiverContent\":"
                     " {\"title\": \"To many\"}, \"prepare\": {\"toRoles\": [");
    for (int i = 0; i < 70; i++)
        k += snprintf(tpl + k, sizeof tpl - (size_t)k, "%s\"role%d\"", i ? ", " : "", i);
    snprintf(tpl + k, sizeof tpl - (size_t)k, "]}, \"actions\": []}");
    REQUIRE(write_template(&e, "roles70", tpl));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    const int roles[] = {0, 63, 64, 69};
    sse *c[4];
    sse_event ev;
    for (int i = 0; i < 4; i++) {
        char hdr[96];
        snprintf(hdr, sizeof hdr, "X-User-Id: m%d\r\nX-User-Roles: other, role%d\r\n", roles[i],
                 roles[i]);
        c[i] = sse_open(port, "/messages/stream", hdr);
        CHECK_INT(c[i]->status, 200);
        CHECK(sse_wait(c[i], "counts", 2000, &ev));
    }
    char id[25];
    snprintf(id, sizeof id, "%s", create(port, "roles70", "{}"));
    CHECK(id[0] != '\0');
    for (int i = 0; i < 4; i++) {
        CHECK(sse_wait(c[i], "message.created", 3000, &ev));
        CHECK(sse_data_has_id(&ev, id));
        sse_close(c[i]);
    }
    /* the stream matches the list */
    test_reply r =
        test_http(port, "GET", "/messages", "X-User-Id: m69\nX-User-Roles: role69\n", NULL);
    CHECK_INT(r.status, 200);
    CHECK_INT((int)json_array_size(json_object_get(r.json, "messages")), 1);
    test_reply_free(&r);
    CHECK_INT(test_daemon_stop(pid), 0);
}

/* ---- replay does not hold up live delivery --------------------------------------------------- */

typedef struct {
    const char *message_id;
    int n;
} fill_arg;

static mv_code fill_tx(mv_db *db, void *ctx, mv_err *err) {
    fill_arg *a = ctx;
    int64_t now = mv_now_ms();
    for (int i = 0; i < a->n; i++) {
        mv_code rc =
            mv__change_add_tx(db, "default", a->message_id, MV_CHANGE_UPDATED, NULL, now, err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

/* Milliseconds until dave's stream shows a note sent to him now; -1 when none within 5 s. */
static int64_t live_latency(int port, sse *dave) {
    int64_t t0 = sse_now_ms();
    char id[25];
    snprintf(id, sizeof id, "%s", sse_send_note(port, "dave", 7));
    sse_event ev;
    return wait_message(dave, id, 5000, &ev) ? sse_now_ms() - t0 : -1;
}

STORE_TEST(streams_replaying_64k_events_do_not_delay_another_users_live_event_past_a_second) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_replay", NULL, NULL));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    /* 65,536 changes of a message the replaying users cannot see: every one is checked */
    char carols[25];
    snprintf(carols, sizeof carols, "%s", sse_send_note(port, "carol", 1));
    mv_store *store = NULL;
    mv_err err = {0};
    REQUIRE(mv_store_open(e.url, NULL, &store, &err) == MV_OK);
    fill_arg fa = {carols, 65536};
    CHECK_CODE(mv_store_write(store, fill_tx, &fa, &err), MV_OK, &err);
    mv_store_close(store);
    sse *dave = sse_open(port, "/messages/stream", "X-User-Id: dave\r\n");
    sse_event ev;
    CHECK(sse_wait(dave, "counts", 5000, &ev));
    int64_t worst = 0;
    int generation = 0;
    char report[512];
    int rk = 0;
    /* eight streams from 0, then every second eight new users from 0 again */
    sse *r[8] = {0};
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 8; i++) {
            sse_close(r[i]);
            char hdr[96];
            snprintf(hdr, sizeof hdr, "X-User-Id: r%d-%d\r\nLast-Event-ID: 0\r\n", generation, i);
            r[i] = sse_open(port, "/messages/stream", hdr);
            CHECK_INT(r[i]->status, 200);
        }
        generation++;
        for (int k = 0; k < 3; k++) {
            int64_t ms = live_latency(port, dave);
            CHECK(ms >= 0);
            if (ms < 0) ms = 5000;
            if (ms > worst) worst = ms;
            rk += snprintf(report + rk, sizeof report - (size_t)rk, " %lld", (long long)ms);
            usleep(300 * 1000);
        }
    }
    fprintf(stderr, "  [%s] live-event latency (ms) while 8 streams replay 64k events:%s\n", kind,
            report);
    CHECK(worst < 1000);
    /* and the replays themselves get to the end: a note to the last user, sent now, arrives */
    char hdr[64];
    snprintf(hdr, sizeof hdr, "r%d-0", generation - 1);
    int64_t t0 = sse_now_ms();
    char mine[25];
    snprintf(mine, sizeof mine, "%s", sse_send_note(port, hdr, 9));
    CHECK(wait_message(r[0], mine, 300000, &ev)); /* slow under sanitizers */
    fprintf(stderr, "  [%s] a replaying stream reached the head %lld ms later\n", kind,
            (long long)(sse_now_ms() - t0));
    for (int i = 0; i < 8; i++)
        sse_close(r[i]);
    sse_close(dave);
    CHECK_INT(test_daemon_stop(pid), 0);
}

/* ---- slots, credentials, retention --------------------------------------------------------- */

STORE_TEST(a_client_that_hangs_up_frees_its_stream_slot_at_once) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_slot", ", \"heartbeatMs\": 60000, \"maxConnections\": 2",
                         NULL));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *a = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse *b = sse_open(port, "/messages/stream", "X-User-Id: carol\r\n");
    CHECK_INT(a->status, 200);
    CHECK_INT(b->status, 200);
    sse_event ev;
    CHECK(sse_wait(a, "counts", 2000, &ev)); /* parked: nothing more to send for a minute */
    sse *full = sse_open(port, "/messages/stream", "X-User-Id: dave\r\n");
    CHECK_INT(full->status, 503);
    sse_close(full);
    sse_close(a);
    int64_t t0 = sse_now_ms();
    int status = 0;
    while (sse_now_ms() - t0 < 3000) {
        sse *c = sse_open(port, "/messages/stream", "X-User-Id: dave\r\n");
        status = c->status;
        sse_close(c);
        if (status == 200) break;
        usleep(50 * 1000);
    }
    CHECK_INT(status, 200);
    CHECK(sse_now_ms() - t0 < 1000);
    sse_close(b);
    CHECK_INT(test_daemon_stop(pid), 0);
}

STORE_TEST(a_stream_ends_with_reauth_when_its_ticket_expires) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_reauth", NULL, NULL));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    char claims[256];
    snprintf(claims, sizeof claims,
             "{\"sub\":\"bob\",\"roles\":[],\"perms\":{},\"tenant\":\"default\",\"exp\":%lld,"
             "\"use\":\"stream\"}",
             (long long)(mv_now_ms() + 1500));
    char *ticket = sse_sign_ticket(claims);
    char path[1024];
    snprintf(path, sizeof path, "/messages/stream?ticket=%s", ticket);
    free(ticket);
    sse *c = sse_open(port, path, NULL);
    CHECK_INT(c->status, 200);
    const char *id = sse_send_note(port, "bob", 1);
    sse_event ev;
    CHECK(wait_message(c, id, 2000, &ev)); /* live while the ticket is valid */
    int64_t last = ev.id;
    CHECK(sse_wait(c, "reauth", 5000, &ev));
    CHECK(ev.id >= last);
    CHECK(sse_ended(c, 2000));
    sse_close(c);
    CHECK_INT(test_daemon_stop(pid), 0);
}

#define JWT_SECRET "a-jwt-secret-for-the-stream-tests-0123456789"

/* An HS256 JWT signed with JWT_SECRET. */
static char *sign_jwt(const char *claims) {
    const char *header = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    size_t hn = strlen(header), cn = strlen(claims);
    char *t = malloc(mv_b64url_len(hn) + mv_b64url_len(cn) + 48 + 3);
    mv_b64url_encode(header, hn, t);
    size_t k = strlen(t);
    t[k++] = '.';
    mv_b64url_encode(claims, cn, t + k);
    k = strlen(t);
    unsigned char mac[32];
    mv_hmac_sha256(JWT_SECRET, strlen(JWT_SECRET), t, k, mac);
    t[k++] = '.';
    mv_b64url_encode(mac, 32, t + k);
    return t;
}

TEST(a_stream_opened_with_a_jwt_ends_with_reauth_when_the_token_expires) {
    sse_env e;
    REQUIRE(sse_env_init(&e, "sqlite", "stream_jwt", NULL, NULL));
    setenv("MISSIVE_TEST_JWT_SECRET", JWT_SECRET, 1);
    REQUIRE(test_write_file(e.config,
                            "{\"templates\": \"%s/templates\", \"auth\": {\"mode\": \"jwt\","
                            " \"secretEnv\": \"MISSIVE_TEST_JWT_SECRET\"},"
                            " \"stream\": {\"heartbeatMs\": 200}}",
                            e.dir));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    char claims[128];
    snprintf(claims, sizeof claims, "{\"sub\":\"bob\",\"exp\":%lld}",
             (long long)(mv_now_ms() / 1000 + 2));
    char *jwt = sign_jwt(claims);
    char hdr[1024];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", jwt);
    free(jwt);
    sse *c = sse_open(port, "/messages/stream", hdr);
    CHECK_INT(c->status, 200);
    sse_event ev;
    CHECK(sse_wait(c, "counts", 2000, &ev));
    CHECK(sse_wait(c, "reauth", 5000, &ev));
    CHECK(sse_ended(c, 2000));
    sse_close(c);
    CHECK_INT(test_daemon_stop(pid), 0);
}

STORE_TEST(the_change_log_is_pruned_on_the_recovery_loops_interval) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_prune", NULL,
                         ", \"recovery\": {\"intervalMs\": 100},"
                         " \"retention\": {\"streamEventsMs\": 1000}"));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *c = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    const char *id = sse_send_note(port, "bob", 1);
    CHECK(wait_message(c, id, 2000, &ev));
    int64_t first = ev.id;
    sse_close(c);
    usleep(2500 * 1000); /* past retention, and many recovery passes */
    char hdr[96];
    snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\nLast-Event-ID: %lld\r\n", (long long)first - 1);
    c = sse_open(port, "/messages/stream", hdr);
    CHECK_INT(c->status, 200);
    CHECK(sse_next(c, 2000, &ev));
    CHECK_STR(ev.name, "reset");
    const char *next = sse_send_note(port, "bob", 2);
    CHECK(wait_message(c, next, 2000, &ev));
    sse_close(c);
    CHECK_INT(test_daemon_stop(pid), 0);
}

/* ---- nothing committed is skipped ---------------------------------------------------------- */

/* Every connection daemon C has to the store breaks at once (as in an immediate PostgreSQL
 * restart): its hub reads the log again on a new connection, but the first message it loads goes
 * through a pooled connection that is still broken. That change used to be passed over as if
 * the user could not see it, and since later events went out, a resume never brought it back. */
POSTGRES_TEST(a_change_is_not_lost_when_the_daemons_store_connections_drop) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_drop", NULL, NULL));
    char url_c[1024];
    snprintf(url_c, sizeof url_c, "%s&application_name=mvstreamc", e.url);
    int pa, pc;
    pid_t a = sse_env_start(&e, &pa);
    pc = test_free_port();
    pid_t c = test_daemon_start(e.config, pc, url_c, e.log);
    REQUIRE(a > 0 && c > 0);
    for (int round = 0; round < 2; round++) {
        /* a request on a connection broken by the round before may fail (503): the next works */
        sse *bob = NULL;
        for (int tries = 0; tries < 20 && (!bob || bob->status != 200); tries++) {
            sse_close(bob);
            bob = sse_open(pc, "/messages/stream", "X-User-Id: bob\r\n");
        }
        CHECK_INT(bob->status, 200);
        sse_event ev;
        CHECK(sse_wait(bob, "counts", 2000, &ev));
        PGconn *pg = PQconnectdb(e.url);
        PGresult *res = PQexec(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                   " WHERE application_name = 'mvstreamc'");
        CHECK(PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0);
        PQclear(res);
        PQfinish(pg);
        char one[25], two[25];
        snprintf(one, sizeof one, "%s", sse_send_note(pa, "bob", 1)); /* through A */
        usleep(300 * 1000);
        snprintf(two, sizeof two, "%s", sse_send_note(pa, "bob", 2));
        CHECK(wait_message(bob, one, 5000, &ev));
        CHECK(wait_message(bob, two, 5000, &ev));
        sse_close(bob);
    }
    CHECK_INT(test_daemon_stop(a), 0);
    CHECK_INT(test_daemon_stop(c), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        a_message_whose_event_exceeds_a_mebibyte_never_closes_its_recipients_stream,
        a_member_of_the_seventieth_role_of_a_message_gets_it_on_the_stream,
        streams_replaying_64k_events_do_not_delay_another_users_live_event_past_a_second,
        a_client_that_hangs_up_frees_its_stream_slot_at_once,
        a_stream_ends_with_reauth_when_its_ticket_expires,
        a_stream_opened_with_a_jwt_ends_with_reauth_when_the_token_expires,
        the_change_log_is_pruned_on_the_recovery_loops_interval,
        a_change_is_not_lost_when_the_daemons_store_connections_drop);
}
