/* daemon_test.c — missived as a real process on a free loopback port: start-up on a fresh SQLite
 * file, the message routes over sockets (create, replay header, 413, 401, GET on the action
 * route, accept), /metrics, a graceful SIGTERM exit, and --check-config on a bad template. */
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "test.h"

TEST(the_daemon_serves_messages_over_sockets_and_stops_on_sigterm) {
    char templates[PATH_MAX], config[600];
    REQUIRE(realpath("examples/templates", templates));
    mv_strlcpy(config, test_tmp_path("daemon.json"), sizeof config);
    REQUIRE(test_write_file(config,
                            "{\"store\": \"sqlite:%s\", \"templates\": \"%s\","
                            " \"auth\": {\"mode\": \"headers\"}}",
                            test_tmp_path("daemon.db"), templates));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);

    const char *body = "{\"hostId\": \"bob\", \"guestName\": \"Ana\", \"listing\": \"Flat\", "
                       "\"status\": \"open\"}";
    const char *ana = "X-User-Id: ana\nIdempotency-Key: k-1";
    test_reply a = test_http(port, "POST", "/messages/new/booking-request", ana, body);
    CHECK_INT(a.status, 201);
    CHECK(!a.replayed);
    test_reply b = test_http(port, "POST", "/messages/new/booking-request", ana, body);
    CHECK_INT(b.status, 201);
    CHECK(b.replayed);
    CHECK(json_equal(a.json, b.json));
    const char *id = mv_json_str(json_array_get(json_object_get(a.json, "messages"), 0), "id");
    REQUIRE(id);

    test_reply c = test_http(port, "GET", "/messages/count", NULL, NULL);
    CHECK_INT(c.status, 401);
    CHECK_STR(test_reply_code(&c), "unauthenticated");
    test_reply_free(&c);

    char *big = malloc(1100 * 1024);
    memset(big, ' ', 1100 * 1024);
    memcpy(big, "{\"x\": 1}", 8);
    big[1100 * 1024 - 1] = 0;
    c = test_http(port, "POST", "/messages/new/booking-request", "X-User-Id: ana", big);
    CHECK_INT(c.status, 413);
    CHECK_STR(test_reply_code(&c), "payload_too_large");
    test_reply_free(&c);
    free(big);

    char path[256];
    snprintf(path, sizeof path, "/messages/%s/action/accept", id);
    c = test_http(port, "GET", path, "X-User-Id: bob", NULL);
    CHECK_INT(c.status, 404);
    test_reply_free(&c);
    c = test_http(port, "POST", path, "X-User-Id: bob", "{}");
    CHECK_INT(c.status, 200);
    test_reply_free(&c);
    c = test_http(port, "POST", path, "X-User-Id: bob", "{}");
    CHECK_INT(c.status, 410);
    CHECK_STR(test_reply_code(&c), "message_archived");
    test_reply_free(&c);
    c = test_http(port, "GET", "/messages/count", "X-User-Id: ana", NULL);
    CHECK_INT(json_integer_value(json_object_get(c.json, "count")), 1); /* the notification */
    test_reply_free(&c);
    c = test_http(port, "GET", "/metrics", NULL, NULL);
    CHECK_INT(c.status, 200);
    test_reply_free(&c);

    CHECK_INT(test_daemon_stop(pid), 0);
    test_reply_free(&a);
    test_reply_free(&b);
}

TEST(check_config_reports_a_bad_template_directory) {
    char config[600], dir[600], file[700];
    mv_strlcpy(dir, test_tmp_path("badtemplates"), sizeof dir);
    mkdir(dir, 0700);
    snprintf(file, sizeof file, "%s/bad.json", dir);
    REQUIRE(test_write_file(file, "{\"templateCd\": \"bad\", \"actions\": [{\"actionCd\": \"a\", "
                                  "\"name\": \"A\", \"variant\": \"x\"}]}"));
    mv_strlcpy(config, test_tmp_path("check.json"), sizeof config);
    REQUIRE(test_write_file(config, "{\"store\": \"sqlite:%s/x.db\", \"templates\": \"%s\"}", dir,
                            dir));
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%s/missived --check-config %s 2>&1", build, config);
    FILE *p = popen(cmd, "r");
    char out[2048] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECK(WEXITSTATUS(st) == 1);
    CHECK(strstr(out, "must be available to sender or receiver") != NULL);
}

TEST(the_daemon_delivers_email_through_an_email_webhook_instead_of_smtp) {
    char templates[PATH_MAX], config[600], users[600];
    REQUIRE(realpath("examples/templates", templates));
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    mv_strlcpy(users, test_tmp_path("users.json"), sizeof users);
    REQUIRE(test_write_file(users, "{\"bob\": \"bob@example.com\"}"));
    mv_strlcpy(config, test_tmp_path("email-webhook.json"), sizeof config);
    REQUIRE(test_write_file(
        config,
        "{\"store\": \"sqlite:%s\", \"templates\": \"%s\","
        " \"auth\": {\"mode\": \"headers\"}, \"outbox\": {\"pollMs\": 20},"
        " \"email\": {\"webhook\": \"%s/email\", \"directory\": {\"file\": \"%s\"}}}",
        test_tmp_path("email-webhook.db"), templates, http_sink_url(sink), users));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);
    const char *body = "{\"hostId\": \"bob\", \"guestName\": \"Ana\", \"listing\": \"Flat\", "
                       "\"status\": \"open\"}";
    test_reply a = test_http(port, "POST", "/messages/new/booking-request", "X-User-Id: ana", body);
    CHECK_INT(a.status, 201);
    CHECK(http_sink_wait(sink, 1, 5000));
    http_sink_request r;
    if (http_sink_get(sink, 0, &r)) {
        CHECK_STR(r.method, "POST");
        CHECK_STR(r.path, "/email");
        json_t *j = json_loads(r.body, 0, NULL);
        json_t *email = json_object_get(j, "email");
        CHECK_STR(mv_json_str(email, "to"), "bob@example.com");
        CHECK_STR(mv_json_str(email, "subject"), "Ana wants Flat");
        CHECK_STR(mv_json_str(email, "toUser"), "bob");
        CHECK(http_sink_header(&r, "Idempotency-Key") != NULL);
        json_decref(j);
        http_sink_request_free(&r);
    }
    CHECK_INT(test_daemon_stop(pid), 0);
    test_reply_free(&a);
    http_sink_stop(sink);
}

/* Runs missived with args (killed after 5 s, status 124, should it start serving instead). */
static int missived(const char *args, char *out, size_t size) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "timeout 5 %s/missived %s 2>&1", build, args);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    return WEXITSTATUS(pclose(p));
}

TEST(an_unknown_flag_or_a_flag_without_its_value_is_a_usage_error_not_ignored) {
    char config[600], args[1000], out[2048];
    mv_strlcpy(config, test_tmp_path("flags.json"), sizeof config);
    REQUIRE(test_write_file(config, "{\"listen\": \"127.0.0.1:0\", \"store\": \"sqlite:%s\"}",
                            test_tmp_path("flags.db")));
    snprintf(args, sizeof args, "--config %s --stor sqlite:%s", config, test_tmp_path("other.db"));
    CHECK_INT(missived(args, out, sizeof out), 1);
    CHECK(strstr(out, "--stor") && strstr(out, "usage"));
    snprintf(args, sizeof args, "--config %s --no-migrat", config);
    CHECK_INT(missived(args, out, sizeof out), 1);
    snprintf(args, sizeof args, "--config %s --listen", config);
    CHECK_INT(missived(args, out, sizeof out), 1);
    CHECK(strstr(out, "usage") != NULL);
    snprintf(args, sizeof args, "--check-config %s --listen=127.0.0.1:9", config);
    CHECK_INT(missived(args, out, sizeof out), 0); /* known flags in either form still work */
}

TEST(a_template_naming_an_unknown_saga_fails_check_config_and_the_daemon_refuses_to_start) {
    char sagas[PATH_MAX], dir[600], file[700], config[600], args[1000], out[4096];
    REQUIRE(realpath("examples/sagas", sagas));
    mv_strlcpy(dir, test_tmp_path("saga-templates"), sizeof dir);
    mkdir(dir, 0700);
    snprintf(file, sizeof file, "%s/order.json", dir);
    REQUIRE(test_write_file(file,
                            "{\"templateCd\": \"order\", \"actions\": [{\"actionCd\": \"buy\", "
                            "\"name\": \"Buy\", \"variant\": \"v\", \"receiver\": true, "
                            "\"handler\": {\"saga\": \"chekout\"}}]}"));
    mv_strlcpy(config, test_tmp_path("saga-check.json"), sizeof config);
    REQUIRE(test_write_file(config,
                            "{\"listen\": \"127.0.0.1:0\", \"store\": \"sqlite:%s/x.db\", "
                            "\"templates\": \"%s\", \"sagas\": \"%s\"}",
                            dir, dir, sagas));
    snprintf(args, sizeof args, "--check-config %s", config);
    CHECK_INT(missived(args, out, sizeof out), 1);
    CHECK(strstr(out, "template \"order\" action \"buy\" runs unknown saga \"chekout\"") != NULL);
    snprintf(args, sizeof args, "--config %s", config);
    CHECK_INT(missived(args, out, sizeof out), 1);
    CHECK(strstr(out, "cannot start") &&
          strstr(out, "unknown saga \\\"chekout\\\"")); /* JSON log */
    /* no "sagas" directory at all: the same template is refused too */
    REQUIRE(test_write_file(config,
                            "{\"listen\": \"127.0.0.1:0\", \"store\": \"sqlite:%s/x.db\", "
                            "\"templates\": \"%s\"}",
                            dir, dir));
    snprintf(args, sizeof args, "--check-config %s", config);
    CHECK_INT(missived(args, out, sizeof out), 1);
    CHECK(strstr(out, "has no \"sagas\" directory") != NULL);
    /* spelled right, it passes */
    REQUIRE(test_write_file(file,
                            "{\"templateCd\": \"order\", \"actions\": [{\"actionCd\": \"buy\", "
                            "\"name\": \"Buy\", \"variant\": \"v\", \"receiver\": true, "
                            "\"handler\": {\"saga\": \"checkout\"}}]}"));
    REQUIRE(test_write_file(config,
                            "{\"listen\": \"127.0.0.1:0\", \"store\": \"sqlite:%s/x.db\", "
                            "\"templates\": \"%s\", \"sagas\": \"%s\"}",
                            dir, dir, sagas));
    snprintf(args, sizeof args, "--check-config %s", config);
    CHECK_INT(missived(args, out, sizeof out), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        the_daemon_serves_messages_over_sockets_and_stops_on_sigterm,
        check_config_reports_a_bad_template_directory,
        the_daemon_delivers_email_through_an_email_webhook_instead_of_smtp,
        an_unknown_flag_or_a_flag_without_its_value_is_a_usage_error_not_ignored,
        a_template_naming_an_unknown_saga_fails_check_config_and_the_daemon_refuses_to_start);
}
