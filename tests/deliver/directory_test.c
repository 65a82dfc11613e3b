/* directory_test.c — recipient lookup from a webhook (via http_sink) and from a JSON file, and
 * the `"email"` config section. */
#include "missive/deliver.h"
#include "support/http_sink.h"
#include "test.h"

static void users(void *ctx, const http_sink_request *req, http_sink_response *res) {
    (void)ctx;
    if (strcmp(req->path, "/users/u1") == 0)
        res->body = "{\"email\": \" ana@example.org \"}";
    else if (strcmp(req->path, "/users/u3") == 0)
        res->body = "{\"email\": \"\"}";
    else if (strcmp(req->path, "/users/u4") == 0)
        res->body = "{\"name\": \"no email\"}";
    else if (strcmp(req->path, "/users/u5") == 0)
        res->status = 500;
    else if (strcmp(req->path, "/users/u6") == 0)
        res->body = "[1]";
    else if (strcmp(req->path, "/users/a%20b%2Fc%3F") == 0)
        res->body = "{\"email\": \"ab@example.org\"}";
    else
        res->status = 404;
}

TEST(webhook_directory_answers_address_none_or_error) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_set_handler(s, users, NULL);
    char url[128];
    snprintf(url, sizeof url, "%s/users/", http_sink_url(s));
    mv_directory *d;
    mv_err err = {0};
    REQUIRE(mv_directory_open_webhook(url, NULL, &d, &err) == MV_OK);
    char *email = (char *)"unset";
    CHECK_CODE(mv_directory_lookup(d, "u1", &email, &err), MV_OK, &err);
    CHECK_STR(email, "ana@example.org");
    free(email);
    const char *none[] = {"u2", "u3", "u4"};
    for (int i = 0; i < 3; i++) {
        email = (char *)"unset";
        CHECK_CODE(mv_directory_lookup(d, none[i], &email, &err), MV_OK, &err);
        CHECK(email == NULL);
    }
    CHECK_CODE(mv_directory_lookup(d, "u5", &email, &err), MV_UPSTREAM_FAILED, &err);
    CHECK(strstr(err.message, "u5") && strstr(err.message, "500"));
    CHECK_CODE(mv_directory_lookup(d, "u6", &email, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_CODE(mv_directory_lookup(d, "a b/c?", &email, &err), MV_OK, &err);
    CHECK_STR(email, "ab@example.org");
    free(email);
    http_sink_request r;
    REQUIRE(http_sink_get(s, 0, &r));
    CHECK_STR(r.method, "GET");
    CHECK_STR(r.path, "/users/u1");
    http_sink_request_free(&r);
    mv_directory_close(d);
    http_sink_stop(s);
}

TEST(file_directory_is_loaded_once_and_validated) {
    const char *path = test_tmp_path("dir.json");
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"u1\": \"ana@example.org\", \"u2\": \"  \"}", f);
    fclose(f);
    mv_directory *d;
    mv_err err = {0};
    REQUIRE(mv_directory_open_file(path, &d, &err) == MV_OK);
    unlink(path); /* loaded at start: later changes are not seen */
    char *email = NULL;
    CHECK_CODE(mv_directory_lookup(d, "u1", &email, &err), MV_OK, &err);
    CHECK_STR(email, "ana@example.org");
    free(email);
    email = (char *)"unset";
    CHECK_CODE(mv_directory_lookup(d, "u2", &email, &err), MV_OK, &err);
    CHECK(email == NULL);
    email = (char *)"unset";
    CHECK_CODE(mv_directory_lookup(d, "nobody", &email, &err), MV_OK, &err);
    CHECK(email == NULL);
    mv_directory_close(d);

    f = fopen(path, "w");
    fputs("{\"u1\": 42}", f);
    fclose(f);
    CHECK_CODE(mv_directory_open_file(path, &d, &err), MV_INVALID_CONFIG, &err);
    CHECK(strstr(err.message, path) && strstr(err.message, "u1"));
    CHECK(d == NULL);
    CHECK(mv_directory_open_file("/nonexistent/dir.json", &d, &err) != MV_OK);
    CHECK(strstr(err.message, "/nonexistent/dir.json") != NULL);
    unlink(path);
}

TEST(email_section_is_parsed_with_relative_paths_and_unknown_keys_refused) {
    const char *path = test_tmp_path("users.json");
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"u1\": \"ana@example.org\"}", f);
    fclose(f);
    char dir[512];
    mv_strlcpy(dir, path, sizeof dir);
    *strrchr(dir, '/') = '\0';
    json_t *sec = json_pack("{s:s, s:s, s:{s:s}, s:[s]}", "smtp", "smtp://127.0.0.1:2525", "from",
                            "noreply@example.com", "directory", "file", "users.json", "exclusions",
                            "Welcome");
    mv_email_settings *st;
    mv_err err = {0};
    CHECK_CODE(mv_email_settings_load(sec, dir, NULL, &st, &err), MV_OK, &err);
    REQUIRE(st);
    CHECK_STR(st->email.smtp.url, "smtp://127.0.0.1:2525");
    CHECK_STR(st->email.smtp.from, "noreply@example.com");
    CHECK(st->email.webhook_url == NULL);
    CHECK_INT(json_array_size(st->exclusions), 1);
    char *email = NULL;
    CHECK_CODE(mv_directory_lookup(st->email.directory, "u1", &email, &err), MV_OK, &err);
    CHECK_STR(email, "ana@example.org");
    free(email);
    mv_email_settings_free(st);

    json_object_set_new(sec, "smtpp", json_string("x"));
    CHECK_CODE(mv_email_settings_load(sec, dir, NULL, &st, &err), MV_INVALID_CONFIG, &err);
    CHECK(strstr(err.message, "email.smtpp") != NULL);
    json_object_del(sec, "smtpp");
    json_object_set_new(sec, "directory", json_pack("{s:s, s:s}", "file", "a", "webhook", "b"));
    CHECK_CODE(mv_email_settings_load(sec, dir, NULL, &st, &err), MV_INVALID_CONFIG, &err);
    json_object_set_new(sec, "directory",
                        json_pack("{s:s}", "webhook", "http://127.0.0.1:9/users"));
    json_object_set_new(sec, "from", json_string("Name <a@b>"));
    CHECK_CODE(mv_email_settings_load(sec, dir, NULL, &st, &err), MV_INVALID_CONFIG, &err);
    CHECK(strstr(err.message, "email.from") != NULL);
    json_object_set_new(sec, "from", json_string("a@b.c"));
    json_object_set_new(sec, "exclusions", json_pack("[i]", 1));
    CHECK_CODE(mv_email_settings_load(sec, dir, NULL, &st, &err), MV_INVALID_CONFIG, &err);
    json_object_del(sec, "exclusions");
    CHECK_CODE(mv_email_settings_load(sec, dir, NULL, &st, &err), MV_OK, &err);
    CHECK(json_is_array(st->exclusions));
    mv_email_settings_free(st);
    json_decref(sec);
    unlink(path);
}

int main(void) {
    return RUN_TESTS(webhook_directory_answers_address_none_or_error,
                     file_directory_is_loaded_once_and_validated,
                     email_section_is_parsed_with_relative_paths_and_unknown_keys_refused);
}
