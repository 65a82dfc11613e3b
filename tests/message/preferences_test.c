/* preferences_test.c — each user's delivery preferences on every store kind: stored and read back
 * per tenant and user with the locale, bad sets refused naming the field with nothing written,
 * and the resolution order of missive/reach.h (user category × channel, user channel, tenant
 * default category × channel, tenant default channel, the template; inbox always; critical
 * ignores them). Also the config sections' errors. */
#include "missive/base.h"
#include "missive/reach.h"
#include "support/stores.h"

static mv_reach *reach_of(const char *channels, const char *preferences) {
    json_t *c = channels ? json_loads(channels, 0, NULL) : NULL;
    json_t *p = preferences ? json_loads(preferences, 0, NULL) : NULL;
    mv_reach *r = NULL;
    mv_err err = {0};
    if (mv_reach_new(c, p, true, &r, &err) != MV_OK) fprintf(stderr, "reach: %s\n", err.message);
    json_decref(c);
    json_decref(p);
    return r;
}

static const char SMS[] = "{\"sms\": {\"webhook\": \"http://127.0.0.1:9/sms\"}}";

STORE_TEST(a_stored_set_reads_back_with_its_locale_and_every_key_present) {
    mv_store *s = test_store_fresh(kind, "prefs_rw");
    REQUIRE(s);
    mv_reach *r = reach_of(SMS, NULL);
    REQUIRE(r);
    mv_user bob = {.id = "bob"};
    json_t *got = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_preferences_get(s, &bob, &got, &err), MV_OK, &err);
    char *text = mv_json_canonical(got);
    CHECK_STR(text, "{\"categories\":{},\"channels\":{},\"digest\":{},\"locale\":null}");
    free(text);
    json_decref(got);
    json_t *set = json_loads("{\"channels\": {\"email\": true}, \"categories\": {\"bookings\": "
                             "{\"email\": false, \"sms\": true}}, \"locale\": \"de-AT\"}",
                             0, NULL);
    CHECK_CODE(mv_preferences_put(s, r, &bob, set, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_preferences_get(s, &bob, &got, &err), MV_OK, &err);
    text = mv_json_canonical(got);
    CHECK_STR(text, "{\"categories\":{\"bookings\":{\"email\":false,\"sms\":true}},\"channels\":{"
                    "\"email\":true},\"digest\":{},\"locale\":\"de-AT\"}");
    free(text);
    json_decref(got);
    /* a second PUT replaces the whole set */
    json_decref(set);
    set = json_loads("{\"digest\": {\"email\": {\"everyMs\": 3600000}}}", 0, NULL);
    CHECK_CODE(mv_preferences_put(s, r, &bob, set, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_preferences_get(s, &bob, &got, &err), MV_OK, &err);
    text = mv_json_canonical(got);
    CHECK_STR(text, "{\"categories\":{},\"channels\":{},\"digest\":{\"email\":{\"everyMs\":3600000}"
                    "},\"locale\":null}");
    free(text);
    json_decref(got);
    json_decref(set);
    mv_reach_free(r);
    mv_store_close(s);
}

STORE_TEST(preferences_of_one_tenant_are_invisible_in_another) {
    mv_store *s = test_store_fresh(kind, "prefs_tenant");
    REQUIRE(s);
    mv_reach *r = reach_of(SMS, NULL);
    mv_user in_a = {.id = "bob", .tenant = "a"}, in_b = {.id = "bob", .tenant = "b"};
    json_t *set = json_loads("{\"channels\": {\"sms\": false}}", 0, NULL), *got = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_preferences_put(s, r, &in_a, set, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_preferences_get(s, &in_b, &got, &err), MV_OK, &err);
    CHECK_INT(json_object_size(json_object_get(got, "channels")), 0);
    json_decref(got);
    CHECK_CODE(mv_preferences_get(s, &in_a, &got, &err), MV_OK, &err);
    CHECK(json_is_false(json_object_get(json_object_get(got, "channels"), "sms")));
    json_decref(got);
    json_decref(set);
    mv_reach_free(r);
    mv_store_close(s);
}

/* Each bad set is refused with invalid_argument naming the field, and the stored set stays. */
STORE_TEST(a_malformed_set_or_unknown_channel_is_refused_naming_the_field_and_changes_nothing) {
    mv_store *s = test_store_fresh(kind, "prefs_bad");
    REQUIRE(s);
    mv_reach *r = reach_of(SMS, NULL);
    mv_user bob = {.id = "bob"};
    mv_err err = {0};
    json_t *good = json_loads("{\"channels\": {\"sms\": false}}", 0, NULL);
    CHECK_CODE(mv_preferences_put(s, r, &bob, good, NULL, &err), MV_OK, &err);
    static const struct {
        const char *body, *names;
    } cases[] = {
        {"{\"channels\": {\"fax\": true}}", "channels.fax: unknown channel"},
        {"{\"channels\": {\"sms\": 1}}", "channels.sms must be true or false"},
        {"{\"channels\": {\"inbox\": false}}", "channels.inbox"},
        {"{\"categories\": {\"bookings\": {\"pager\": true}}}", "categories.bookings.pager"},
        {"{\"categories\": []}", "categories must be an object"},
        {"{\"digest\": {\"email\": {\"everyMs\": 999}}}", "digest.email"},
        {"{\"digest\": {\"inbox\": {\"everyMs\": 5000}}}", "digest.inbox"},
        {"{\"locale\": \"not a tag\"}", "locale"},
        {"{\"colour\": \"blue\"}", "colour: unknown field"},
        {"[]", "body must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *bad = json_loads(cases[i].body, JSON_DECODE_ANY, NULL);
        mv_err_clear(&err);
        CHECK_CODE(mv_preferences_put(s, r, &bob, bad, NULL, &err), MV_INVALID_ARGUMENT, &err);
        if (!strstr(err.message, cases[i].names))
            test_failf_(__FILE__, __LINE__, "%s: \"%s\" does not name %s", cases[i].body,
                        err.message, cases[i].names);
        json_decref(bad);
    }
    json_t *got = NULL;
    CHECK_CODE(mv_preferences_get(s, &bob, &got, &err), MV_OK, &err);
    CHECK(json_is_false(json_object_get(json_object_get(got, "channels"), "sms")));
    json_decref(got);
    json_decref(good);
    mv_reach_free(r);
    mv_store_close(s);
}

TEST(resolution_takes_the_first_that_says_from_user_category_to_the_template) {
    mv_reach *r = reach_of(SMS, "{\"defaults\": {\"channels\": {\"sms\": false}, \"categories\": "
                                "{\"alerts\": {\"sms\": true}}},"
                                " \"tenants\": {\"quiet\": {\"channels\": {\"email\": false}}}}");
    REQUIRE(r);
    json_t *user = json_loads("{\"channels\": {\"email\": false}, \"categories\": {\"bookings\": "
                              "{\"email\": true}}}",
                              0, NULL);
    /* user category × channel beats user channel */
    CHECK(mv_reach_allows(r, NULL, user, "bookings", "email", true, false));
    CHECK(!mv_reach_allows(r, NULL, user, "other", "email", true, false));
    /* tenant default category × channel beats the default channel */
    CHECK(mv_reach_allows(r, NULL, user, "alerts", "sms", true, false));
    CHECK(!mv_reach_allows(r, NULL, user, "bookings", "sms", true, false));
    /* a tenant's own defaults replace the defaults for that tenant only */
    CHECK(mv_reach_allows(r, "quiet", NULL, "bookings", "sms", true, false));
    CHECK(!mv_reach_allows(r, "quiet", NULL, "bookings", "email", true, false));
    CHECK(mv_reach_allows(r, "default", NULL, "bookings", "email", true, false));
    /* nothing says: the template */
    CHECK(!mv_reach_allows(r, "quiet", NULL, "bookings", "sms", false, false));
    /* inbox always; critical ignores every preference */
    CHECK(mv_reach_allows(r, NULL, user, "other", "inbox", false, false));
    CHECK(mv_reach_allows(r, NULL, user, "other", "email", true, true));
    json_decref(user);
    mv_reach_free(r);
}

TEST(config_sections_with_a_bad_channel_or_default_name_the_key) {
    static const struct {
        const char *channels, *preferences, *names;
    } cases[] = {
        {"{\"Sms\": {\"webhook\": \"http://x\"}}", NULL, "channels.Sms"},
        {"{\"email\": {\"webhook\": \"http://x\"}}", NULL, "channels.email"},
        {"{\"inbox\": {\"webhook\": \"http://x\"}}", NULL, "channels.inbox"},
        {"{\"sms\": {\"webhook\": \"ftp://x\"}}", NULL, "channels.sms.webhook"},
        {"{\"sms\": {\"webhook\": \"http://x\", \"retries\": 3}}", NULL, "channels.sms.retries"},
        {NULL, "{\"defaults\": {\"channels\": {\"sms\": true}}}",
         "preferences.defaults.channels.sms: unknown channel"},
        {NULL, "{\"tenants\": {\"acme\": {\"digest\": {\"email\": {\"everyMs\": 5}}}}}",
         "preferences.tenants.acme.digest.email"},
        {NULL, "{\"default\": {}}", "preferences.default"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *c = cases[i].channels ? json_loads(cases[i].channels, 0, NULL) : NULL;
        json_t *p = cases[i].preferences ? json_loads(cases[i].preferences, 0, NULL) : NULL;
        mv_reach *r = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_reach_new(c, p, true, &r, &err), MV_INVALID_CONFIG, &err);
        CHECK(r == NULL);
        if (!strstr(err.message, cases[i].names))
            test_failf_(__FILE__, __LINE__, "\"%s\" does not name %s", err.message, cases[i].names);
        json_decref(c);
        json_decref(p);
    }
}

TEST(locale_tags_are_checked_as_bcp47) {
    const char *good[] = {"de", "de-AT", "en-US", "zh-Hant-TW", "es-419", "pt-BR"};
    const char *bad[] = {"", "d", "deutsch", "de-", "de--AT", "de_AT", "-de", "de-abcdefghi"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (!mv_valid_locale(good[i])) test_failf_(__FILE__, __LINE__, "refused %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (mv_valid_locale(bad[i])) test_failf_(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
}

/* Email is built in: a person may choose it before the operator configures email; an unknown
 * channel is still refused. */
TEST(an_email_preference_is_accepted_while_email_is_not_configured) {
    json_t *c = json_loads(SMS, 0, NULL);
    mv_reach *r = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_reach_new(c, NULL, false, &r, &err), MV_OK, &err);
    json_t *ok = json_loads("{\"channels\": {\"email\": false, \"sms\": true}, \"categories\": "
                            "{\"bookings\": {\"email\": true}}, \"digest\": {\"email\": "
                            "{\"everyMs\": 3600000}}}",
                            0, NULL);
    CHECK_CODE(mv_preferences_check(r, ok, NULL, &err), MV_OK, &err);
    json_t *bad = json_loads("{\"channels\": {\"fax\": true}}", 0, NULL);
    CHECK_CODE(mv_preferences_check(r, bad, NULL, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "channels.fax") != NULL);
    json_decref(ok);
    json_decref(bad);
    json_decref(c);
    mv_reach_free(r);
}

int main(void) {
    return RUN_TESTS(
        a_stored_set_reads_back_with_its_locale_and_every_key_present,
        preferences_of_one_tenant_are_invisible_in_another,
        a_malformed_set_or_unknown_channel_is_refused_naming_the_field_and_changes_nothing,
        resolution_takes_the_first_that_says_from_user_category_to_the_template,
        config_sections_with_a_bad_channel_or_default_name_the_key,
        locale_tags_are_checked_as_bcp47,
        an_email_preference_is_accepted_while_email_is_not_configured);
}
