/* jwks_test.c — the JWKS refresh seen through a real server: a request whose kid the keys lack
 * waits for the refresh without holding a thread, so a flood of made-up kids while the identity
 * provider hangs never delays a request with a known kid; a token with a freshly rotated kid
 * still verifies once the refresh lands. Tokens and keys come from tests/http/jwt_fixtures.mjs
 * (Node's crypto); the made-up ones need no signature (an unknown kid is refused before it). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/auth.h"
#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"
#include "support/http_sink.h"
#include "support/jwt_fixtures.h"
#include "test.h"

static char *jwks_a, *jwks_b;

static bool fixtures(void) {
    if (!jwt_fixtures_make(test_tmp_path("jwks"))) return false;
    if (!jwks_a) jwks_a = jwt_fixture_text("jwks-a.json");
    if (!jwks_b) jwks_b = jwt_fixture_text("jwks-b.json");
    return jwks_a && jwks_b;
}

/* ---- the identity provider: the first fetch answers key set A, later ones `later` ---------- */

static pthread_mutex_t idp_mu = PTHREAD_MUTEX_INITIALIZER;
static int idp_fetches;
static const char *idp_later; /* body of later answers */
static int idp_later_delay_ms;

static void idp(void *ctx, const http_sink_request *req, http_sink_response *res) {
    (void)ctx;
    (void)req;
    pthread_mutex_lock(&idp_mu);
    res->body = idp_fetches++ == 0 ? jwks_a : idp_later;
    if (idp_fetches > 1) res->delay_ms = idp_later_delay_ms;
    pthread_mutex_unlock(&idp_mu);
}

static int fetches(void) {
    pthread_mutex_lock(&idp_mu);
    int n = idp_fetches;
    pthread_mutex_unlock(&idp_mu);
    return n;
}

/* ---- the server under test ------------------------------------------------------------------ */

static void whoami(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_json(res, 200, json_pack("{s:s}", "user", req->principal->user_id));
}

typedef struct rig {
    http_sink *idp;
    mv_webhook_config http;
    mv_auth *auth;
    mv_router *router;
    mv_http_server *server;
    int port;
} rig;

static bool rig_start(rig *r, const char *later, int later_delay_ms, int fetch_timeout_ms,
                      int read_threads) {
    memset(r, 0, sizeof *r);
    pthread_mutex_lock(&idp_mu);
    idp_fetches = 0;
    idp_later = later;
    idp_later_delay_ms = later_delay_ms;
    pthread_mutex_unlock(&idp_mu);
    if (!(r->idp = http_sink_start())) return false;
    http_sink_set_handler(r->idp, idp, NULL);
    char url[256];
    snprintf(url, sizeof url, "%s/jwks", http_sink_url(r->idp));
    r->http = (mv_webhook_config){.connect_timeout_ms = 500, .timeout_ms = fetch_timeout_ms};
    mv_jwt_options jo = {.algorithms = 1u << MV_JWT_RS256,
                         .jwks_url = url,
                         .jwks_kid_interval_ms = 300, /* a new refresh soon after each one */
                         .http = &r->http,
                         .leeway_s = -1};
    mv_auth_options ao = {.mode = MV_AUTH_JWT, .jwt = &jo};
    mv_err err = {0};
    if (mv_auth_new(&ao, &r->auth, &err) != MV_OK) return false;
    r->router = mv_router_new(NULL);
    mv_router_set_auth(r->router, r->auth);
    mv_route route = {.method = "GET", .pattern = "/whoami", .handler = whoami};
    mv_router_add(r->router, &route, NULL);
    mv_http_server_options so = {.listen = "127.0.0.1:0", .read_threads = read_threads};
    if (mv_http_server_start(&so, r->router, &r->server, &err) != MV_OK) return false;
    r->port = mv_http_server_port(r->server);
    return fetches() == 1; /* key set A is loaded */
}

static void rig_stop(rig *r) {
    http_sink_stop(r->idp); /* a hanging fetch ends now */
    if (r->server) mv_http_server_drain(r->server, 5000);
    mv_http_server_free(r->server);
    mv_router_free(r->router);
    mv_auth_free(r->auth);
}

/* GET /whoami with the token on a new connection; the status (0: no answer within 10 s). */
static int get(int port, const char *token) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    char req[4096], resp[1024];
    int n = snprintf(req, sizeof req,
                     "GET /whoami HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                     "Authorization: Bearer %s\r\n\r\n",
                     token);
    int status = 0;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) == n) {
        size_t len = 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        while (len < 12 && poll(&p, 1, 10000) > 0) {
            ssize_t got = recv(fd, resp + len, sizeof resp - 1 - len, 0);
            if (got <= 0) break;
            len += (size_t)got;
        }
        resp[len] = '\0';
        if (len >= 12 && strncmp(resp, "HTTP/1.1 ", 9) == 0) status = atoi(resp + 9);
    }
    close(fd);
    return status;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- a flood of made-up kids ---------------------------------------------------------------- */

typedef struct flooder {
    pthread_t t;
    int port, id;
    atomic_bool *stop;
    int sent, refused, other;
} flooder;

static void *flood(void *arg) {
    flooder *f = arg;
    while (!atomic_load(f->stop)) {
        /* header {"alg":"RS256","kid":"made-up-<id>-<n>"}, real-looking claims, no signature */
        char header[96], h64[160], token[400];
        int hl = snprintf(header, sizeof header, "{\"alg\":\"RS256\",\"kid\":\"made-up-%d-%d\"}",
                          f->id, f->sent);
        mv_b64url_encode(header, (size_t)hl, h64);
        snprintf(token, sizeof token, "%s.eyJzdWIiOiJtYWxsb3J5IiwiZXhwIjo0MTAyNDQ0ODAwfQ.AAAA",
                 h64);
        int st = get(f->port, token);
        f->sent++;
        if (st == 401)
            f->refused++;
        else
            f->other++;
    }
    return NULL;
}

TEST(a_flood_of_unknown_kids_while_the_jwks_url_hangs_never_delays_a_known_kid) {
    REQUIRE(fixtures());
    rig r;
    /* every fetch after the first hangs for the whole fetch timeout (1.5 s); four read threads */
    REQUIRE(rig_start(&r, jwks_a, 60000, 1500, 4));
    atomic_bool stop = false;
    enum { FLOODERS = 8, LEGIT = 60 };
    flooder fl[FLOODERS];
    for (int i = 0; i < FLOODERS; i++) {
        fl[i] = (flooder){.port = r.port, .id = i, .stop = &stop};
        pthread_create(&fl[i].t, NULL, flood, &fl[i]);
    }
    int64_t began = mono_ms();
    mv_sleep_ms(200); /* the flood has started a refresh, which hangs */
    int64_t worst = 0;
    int slow = 0, ok = 0;
    for (int i = 0; i < LEGIT; i++) {
        int64_t t0 = mono_ms();
        ok += get(r.port, jwt_fixture_token("rs256")) == 200;
        int64_t took = mono_ms() - t0;
        if (took > worst) worst = took;
        slow += took >= 500;
        mv_sleep_ms(50); /* spread over about four hanging refreshes */
    }
    atomic_store(&stop, true);
    int sent = 0, refused = 0, other = 0;
    for (int i = 0; i < FLOODERS; i++) {
        pthread_join(fl[i].t, NULL);
        sent += fl[i].sent;
        refused += fl[i].refused;
        other += fl[i].other;
    }
    int n = fetches();
    int64_t elapsed = mono_ms() - began;
    rig_stop(&r);
    fprintf(stderr,
            "legit: %d/%d ok, %d took >= 500 ms, worst %lld ms; flood: %d sent, %d 401, "
            "%d other; JWKS fetches %d\n",
            ok, LEGIT, slow, (long long)worst, sent, refused, other, n);
    CHECK_INT(ok, LEGIT);
    CHECK_INT(slow, 0); /* before: 1.5 s each while a refresh hung */
    CHECK(sent > 0);
    CHECK_INT(other, 0); /* every made-up kid is 401, none is dropped or 5xx */
    /* single-flight: one fetch at a time, each hanging its 1.5 s, back to back at most (plus the
     * first, at start, and one begun as the flood stops) */
    CHECK(n >= 2 && n <= 3 + elapsed / 1500);
}

/* ---- a rotation through the server ---------------------------------------------------------- */

typedef struct rotated_get {
    pthread_t t;
    int port, status;
} rotated_get;

static void *get_rotated(void *arg) {
    rotated_get *g = arg;
    g->status = get(g->port, jwt_fixture_token("rotated"));
    return NULL;
}

TEST(tokens_with_a_new_kid_wait_for_the_refresh_without_a_thread_and_verify) {
    REQUIRE(fixtures());
    rig r;
    /* the provider rotated to key set B; its answer takes 600 ms; ONE read thread */
    REQUIRE(rig_start(&r, jwks_b, 600, 3000, 1));
    rotated_get g[3];
    for (int i = 0; i < 3; i++) {
        g[i] = (rotated_get){.port = r.port};
        pthread_create(&g[i].t, NULL, get_rotated, &g[i]);
    }
    mv_sleep_ms(150); /* all three wait for the refresh */
    /* the only read thread is free: a known kid answers at once (key set A is still current) */
    int64_t t0 = mono_ms();
    CHECK_INT(get(r.port, jwt_fixture_token("rs256")), 200);
    int64_t took = mono_ms() - t0;
    CHECK(took < 300);
    for (int i = 0; i < 3; i++) {
        pthread_join(g[i].t, NULL);
        CHECK_INT(g[i].status, 200); /* verified with the refreshed keys */
    }
    CHECK_INT(fetches(), 2); /* one refresh for the three */
    CHECK_INT(get(r.port, jwt_fixture_token("rotated")), 200);
    CHECK_INT(get(r.port, jwt_fixture_token("wrong_kid")), 401);
    rig_stop(&r);
}

int main(void) {
    mv_log_set_fd(-1);
    int rc = RUN_TESTS(a_flood_of_unknown_kids_while_the_jwks_url_hangs_never_delays_a_known_kid,
                       tokens_with_a_new_kid_wait_for_the_refresh_without_a_thread_and_verify);
    jwt_fixtures_free();
    free(jwks_a);
    free(jwks_b);
    return rc;
}
