/* template_test.c — parsing and validation of template files (SEMANTICS §1.3 / §2.1 plus
 * missive's own checks), the registry, directory loading and `missive templates check`. */
#include <pthread.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "missive/template.h"
#include "test.h"

/* JSON written with single quotes for readability: J("{'a': 1}"). Caller decrefs. */
static json_t *J(const char *text) {
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    json_error_t je;
    json_t *v = json_loads(s, 0, &je);
    if (!v) fprintf(stderr, "bad test JSON: %s: %s\n", je.text, s);
    free(s);
    return v;
}

/* Parses single-quoted JSON as "t.json"; returns the code, fills err. */
static mv_code parse(const char *text, mv_template **out, mv_err *err) {
    json_t *v = J(text);
    mv_err_clear(err);
    *out = NULL;
    mv_code rc = mv_template_parse(v, "t.json", out, err);
    json_decref(v);
    return rc;
}

/* The error message for a template that must be rejected ("" when it was accepted). */
static const char *rejection(const char *text) {
    static mv_err err;
    mv_template *t;
    if (parse(text, &t, &err) == MV_OK) {
        mv_template_release(t);
        return "";
    }
    if (err.code != MV_INVALID_TEMPLATE) return "(wrong code)";
    return err.message;
}

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The reference's fixture (SEMANTICS §2.1). */
static const char TEST_REQUEST[] =
    "{'templateCd': 'test-request', 'type': 'request', 'description': 'A test request',"
    " 'senderContent': {'title': 'Test Request',"
    "   'long': 'You submitted a request for \\'{{itemName}}\\'.', 'short': 'Request for "
    "{{itemName}}'},"
    " 'receiverContent': {'title': 'New Request',"
    "   'long': '\\'{{displayName}}\\' submitted a request for \\'{{itemName}}\\'.', 'short': "
    "'Request'},"
    " 'uiTemplate': 'default-message',"
    " 'actions': ["
    "  {'actionCd': 'approved', 'name': 'Approve', 'variant': 'success', 'sender': false,"
    "   'receiver': true, 'isDefault': true},"
    "  {'actionCd': 'rejected', 'name': 'Reject', 'variant': 'danger', 'sender': false,"
    "   'receiver': true},"
    "  {'actionCd': 'revoked', 'name': 'Revoke', 'variant': 'dark', 'sender': true,"
    "   'receiver': false, 'isDefault': true}]}";

static mv_template *fixture(void) {
    mv_template *t;
    mv_err err;
    if (parse(TEST_REQUEST, &t, &err) != MV_OK) fprintf(stderr, "fixture: %s\n", err.message);
    return t;
}

/* A template with one action whose JSON body is `action` (single quotes). */
static const char *one_action(const char *action) {
    static char buf[2048];
    snprintf(buf, sizeof buf, "{'templateCd': 'x', 'actions': [%s]}", action);
    return buf;
}

static char *render(const mv_tpl *tpl, const char *data) {
    json_t *d = J(data);
    char *s = NULL;
    mv_err err;
    if (mv_tpl_render(tpl, d, MV_ESCAPE_NONE, &s, NULL, &err) != MV_OK) s = strdup("(error)");
    json_decref(d);
    return s;
}

#define CHECK_RENDER(tpl, data, want)                                                              \
    do {                                                                                           \
        char *r_ = render((tpl), (data));                                                          \
        CHECK_STR(r_, want);                                                                       \
        free(r_);                                                                                  \
    } while (0)

/* ---- parsing ------------------------------------------------------------------------------ */

TEST(fixture_parses_with_its_fields) {
    mv_template *t = fixture();
    REQUIRE(t);
    CHECK_STR(t->template_cd, "test-request");
    CHECK_STR(t->type, "request");
    CHECK_STR(t->description, "A test request");
    CHECK_STR(t->payment_cd, "");
    CHECK_INT(t->nactions, 3);
    CHECK_STR(t->actions[0].action_cd, "approved");
    CHECK(t->actions[0].receiver && !t->actions[0].sender);
    CHECK(t->actions[0].is_default && t->actions[0].has_is_default);
    CHECK(!t->actions[1].is_default && !t->actions[1].has_is_default);
    CHECK_STR(t->actions[2].variant, "dark");
    CHECK(t->actions[2].handler == MV_HANDLER_NONE);
    CHECK(t->prepare == MV_PREPARE_DECLARATIVE);
    CHECK(t->prepare_to_user == NULL);
    CHECK_INT(json_array_size(t->prepare_to_roles), 0);
    CHECK(t->prepare_fan_out == NULL);
    CHECK_STR(mv_template_ui(t, MV_SENDER), "default-message");
    CHECK(mv_template_action(t, "rejected") == &t->actions[1]);
    CHECK(mv_template_action(t, "nope") == NULL);
    CHECK_RENDER(t->sender_content.short_text, "{'itemName': 'Widget'}", "Request for Widget");
    CHECK(t->source && json_is_object(t->source));
    mv_template_release(t);
}

TEST(design_example_with_webhook_handler_parses) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(
        parse(
            "{'templateCd': 'booking-request', 'type': 'request', 'paymentCd': 'deposit',"
            " 'senderContent': {'title': 'You asked to book {{listing}}', 'short': '', 'long': ''},"
            " 'receiverContent': {'title': '{{guestName}} wants {{listing}}', 'short': '{{note}}',"
            "   'long': ''},"
            " 'uiTemplate': 'booking-card',"
            " 'prepare': {'toUser': '{{hostId}}', 'toRoles': [], 'fanOut': null},"
            " 'actions': ["
            "  {'actionCd': 'accept', 'name': 'Accept', 'variant': 'primary', 'receiver': true,"
            "   'isDefault': true, 'permission': null,"
            "   'condition': {'==': [{'var': 'payload.status'}, 'open']},"
            "   'confirmation': {'title': 'Accept {{listing}}?', 'message': 'The guest is charged "
            "now.'},"
            "   'handler': {'webhook': 'http://127.0.0.1:9000/hooks/accept'},"
            "   'senderNotification': {'title': 'Your booking of {{listing}} was accepted'}},"
            "  {'actionCd': 'withdraw', 'name': 'Withdraw', 'variant': 'secondary', 'sender': true,"
            "   'handler': null}]}",
            &t, &err),
        MV_OK, &err);
    REQUIRE(t);
    const mv_action_def *a = mv_template_action(t, "accept");
    REQUIRE(a);
    CHECK(a->handler == MV_HANDLER_WEBHOOK);
    CHECK_STR(a->handler_target, "http://127.0.0.1:9000/hooks/accept");
    CHECK(a->permission == NULL);
    CHECK(a->confirm_notes_label == NULL && a->confirm_require_notes == NULL);
    CHECK_RENDER(a->notify_title, "{'listing': 'Flat 3'}", "Your booking of Flat 3 was accepted");
    CHECK_RENDER(a->notify_long, "{}", "");
    char *cond = mv_json_canonical(a->condition_json);
    CHECK_STR(cond, "{\"==\":[{\"var\":\"payload.status\"},\"open\"]}");
    free(cond);
    mv_template_release(t);
}

TEST(empty_actions_array_is_a_valid_notification_template) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse("{'templateCd': 'hello', 'actions': []}", &t, &err), MV_OK, &err);
    REQUIRE(t);
    CHECK_INT(t->nactions, 0);
    CHECK_STR(mv_template_ui(t, MV_RECEIVER), "");
    CHECK_RENDER(t->receiver_content.title, "{}", "");
    mv_template_release(t);
}

TEST(reference_validation_messages_are_exact) {
    CHECK_STR(rejection("{'actions': []}"), "t.json: templateCd must be a non-empty string");
    CHECK_STR(rejection("{'templateCd': '   ', 'actions': []}"),
              "t.json: templateCd must be a non-empty string");
    CHECK_STR(rejection("{'templateCd': 7, 'actions': []}"),
              "t.json: templateCd must be a non-empty string");
    CHECK_STR(rejection("{'templateCd': 'x'}"), "t.json: template \"x\" actions must be an array");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': {}}"),
              "t.json: template \"x\" actions must be an array");
    CHECK_STR(
        rejection(one_action("{'actionCd': '', 'name': 'A', 'variant': 'v', 'sender': true}")),
        "t.json: template \"x\" actionCd must be a non-empty string");
    CHECK_STR(
        rejection(one_action("{'actionCd': 'a', 'name': ' ', 'variant': 'v', 'sender': true}")),
        "t.json: template \"x\" action \"a\" name must be a non-empty string");
    CHECK_STR(rejection(one_action("{'actionCd': 'a', 'name': 'A', 'sender': true}")),
              "t.json: template \"x\" action \"a\" variant must be a non-empty string");
}

TEST(duplicate_action_code_is_rejected_with_the_reference_message) {
    char text[4096];
    snprintf(text, sizeof text, "%s", TEST_REQUEST);
    char *p = strstr(text, "'rejected'");
    memcpy(p, "'approved'", 10);
    CHECK_STR(rejection(text),
              "t.json: template \"test-request\" has duplicate actionCd \"approved\"");
}

TEST(two_default_receiver_actions_are_rejected_naming_both) {
    const char *text2 =
        "{'templateCd': 'test-request', 'actions': ["
        " {'actionCd': 'approved', 'name': 'Approve', 'variant': 'success', 'receiver': true,"
        "  'isDefault': true},"
        " {'actionCd': 'rejected', 'name': 'Reject', 'variant': 'danger', 'receiver': true,"
        "  'isDefault': true}]}";
    CHECK_STR(rejection(text2), "t.json: template \"test-request\" has multiple default receiver "
                                "actions: \"approved\" and \"rejected\"");
    /* One default sender and one default receiver are fine. */
    CHECK_STR(rejection(TEST_REQUEST), "");
}

TEST(action_for_nobody_is_rejected_with_the_reference_message) {
    CHECK_STR(rejection("{'templateCd': 'test-request', 'actions': [{'actionCd': 'approved',"
                        " 'name': 'Approve', 'variant': 'success', 'sender': false,"
                        " 'receiver': false}]}"),
              "t.json: template \"test-request\" action \"approved\" must be available to sender "
              "or receiver");
    CHECK_STR(rejection(one_action("{'actionCd': 'a', 'name': 'A', 'variant': 'v'}")),
              "t.json: template \"x\" action \"a\" must be available to sender or receiver");
}

TEST(a_misspelled_receiver_flag_is_named_as_an_unknown_key) {
    CHECK_STR(
        rejection(one_action("{'actionCd': 'a', 'name': 'A', 'variant': 'v', 'reciever': true}")),
        "t.json: template \"x\" action \"a\" has unknown key \"reciever\" and must be "
        "available to sender or receiver");
}

TEST(reference_checks_come_before_missive_checks_in_reference_order) {
    /* An unknown key on a later action does not hide the earlier reference error. */
    CHECK_STR(rejection("{'templateCd': 'x', 'bogus': 1, 'actions': ["
                        " {'actionCd': 'a', 'name': 'A', 'variant': 'v', 'sender': true, 'zz': 1},"
                        " {'actionCd': 'a', 'name': 'A', 'variant': 'v', 'sender': true}]}"),
              "t.json: template \"x\" has duplicate actionCd \"a\"");
    /* The name check comes before the variant check, and both before availability. */
    CHECK_STR(rejection(one_action("{'actionCd': 'a'}")),
              "t.json: template \"x\" action \"a\" name must be a non-empty string");
    /* Truthy non-boolean flags satisfy the reference check, then fail missive's type check. */
    CHECK_STR(rejection(one_action("{'actionCd': 'a', 'name': 'A', 'variant': 'v', 'sender': 1}")),
              "t.json: template \"x\" action \"a\" sender must be true or false");
}

TEST(unknown_keys_are_rejected_naming_the_key) {
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'paymentRequired': true}"),
              "t.json: template \"x\" has unknown key \"paymentRequired\"");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'foo': 1}")),
              "t.json: template \"x\" action \"y\" has unknown key \"foo\"");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'senderContent': {'titel': 'a'}}"),
              "t.json: template \"x\" senderContent has unknown key \"titel\"");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'confirmation': {'title': 'a', 'message': 'b', 'ok': 1}}")),
              "t.json: template \"x\" action \"y\" confirmation has unknown key \"ok\"");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'prepare': {'to': 'a'}}"),
              "t.json: template \"x\" prepare has unknown key \"to\"");
}

TEST(codes_must_match_their_route_patterns) {
    CHECK_STR(rejection("{'templateCd': 'a b', 'actions': []}"),
              "t.json: template \"a b\" templateCd must match [A-Za-z0-9_.-]{1,128}");
    char longcd[200];
    memset(longcd, 'a', 129);
    longcd[129] = '\0';
    char text[400];
    snprintf(text, sizeof text, "{'templateCd': '%s', 'actions': []}", longcd);
    CHECK(strstr(rejection(text), "templateCd must match") != NULL);
    longcd[128] = '\0';
    snprintf(text, sizeof text, "{'templateCd': '%s.v2', 'actions': []}", longcd + 3);
    CHECK_STR(rejection(text), "");
    CHECK_STR(
        rejection(one_action("{'actionCd': 'a.b', 'name': 'A', 'variant': 'v', 'sender': true}")),
        "t.json: template \"x\" action \"a.b\" actionCd must match [A-Za-z0-9_-]{1,128}");
}

TEST(mustache_that_does_not_compile_is_rejected_naming_template_and_field) {
    const char *m = rejection("{'templateCd': 'x', 'actions': [],"
                              " 'receiverContent': {'title': 'Broken {{name'}}");
    CHECK_STR(m, "t.json: template \"x\" receiverContent.title: unclosed tag at line 1, column 8");
    m = rejection(
        one_action("{'actionCd': 'y', 'name': 'Go {{#a}}', 'variant': 'v', 'sender': true}"));
    CHECK(starts_with(m, "t.json: template \"x\" action \"y\" name: "));
    m = rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                             " 'confirmation': {'title': 'ok', 'message': 'x {{'}}"));
    CHECK(starts_with(m, "t.json: template \"x\" action \"y\" confirmation.message: "));
    m = rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                             " 'senderNotification': {'long': '{{/z}}'}}"));
    CHECK(starts_with(m, "t.json: template \"x\" action \"y\" senderNotification.long: "));
    m = rejection("{'templateCd': 'x', 'actions': [], 'prepare': {'toUser': '{{host'}}");
    CHECK(starts_with(m, "t.json: template \"x\" prepare.toUser: "));
}

TEST(condition_that_is_not_valid_jsonlogic_is_rejected) {
    const char *m = rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v',"
                                         " 'receiver': true, 'condition': {'foo': [1, 2]}}"));
    CHECK(starts_with(m, "t.json: template \"x\" action \"y\" condition: "));
    CHECK(strstr(m, "foo") != NULL);
    CHECK_STR(
        rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'receiver': true,"
                             " 'condition': {'==': [{'var': 'payload.status'}, 'open']}}")),
        "");
}

TEST(wrong_json_types_are_rejected_naming_the_field) {
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'type': 3}"),
              "t.json: template \"x\" type must be a string");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'senderContent': 'hi'}"),
              "t.json: template \"x\" senderContent must be an object");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'receiverContent': {'long': 5}}"),
              "t.json: template \"x\" receiverContent.long must be a string");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'uiTemplate': 5}"),
              "t.json: template \"x\" uiTemplate must be a string or an object with sender and "
              "receiver");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'uiTemplate': {'sender': 1}}"),
              "t.json: template \"x\" uiTemplate.sender must be a string");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'prepare': {'toRoles': 'finance'}}"),
              "t.json: template \"x\" prepare.toRoles must be an array");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'prepare': {'toRoles': ['a', 2]}}"),
              "t.json: template \"x\" prepare.toRoles[1] must be a non-empty string");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': ['accept']}"),
              "t.json: template \"x\" actions[0] must be an object");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'isDefault': 'yes'}")),
              "t.json: template \"x\" action \"y\" isDefault must be true or false");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'permission': 5}")),
              "t.json: template \"x\" action \"y\" permission must be a non-empty string or null");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'payload': [1]}")),
              "t.json: template \"x\" action \"y\" payload must be an object");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'confirmation': {'title': 'a'}}")),
              "t.json: template \"x\" action \"y\" confirmation.message must be a string");
    CHECK_STR(
        rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                             " 'confirmation': {'title': 'a', 'message': 'b',"
                             " 'requireNotes': 'yes'}}")),
        "t.json: template \"x\" action \"y\" confirmation.requireNotes must be true or false");
    CHECK_STR(rejection("[1, 2]"), "t.json: a template must be a JSON object");
}

TEST(handler_shapes_are_checked) {
#define WITH_HANDLER(h)                                                                            \
    one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true, 'handler': " h "}")
    CHECK_STR(rejection(WITH_HANDLER("{'webhook': 'ftp://host/x'}")),
              "t.json: template \"x\" action \"y\" handler.webhook must be an http:// or https:// "
              "URL, got \"ftp://host/x\"");
    CHECK_STR(rejection(WITH_HANDLER("{'webhook': 'http://'}")),
              "t.json: template \"x\" action \"y\" handler.webhook must be an http:// or https:// "
              "URL, got \"http://\"");
    CHECK_STR(
        rejection(WITH_HANDLER("{'payment': 'charge'}")),
        "t.json: template \"x\" action \"y\" handler.payment must be \"refund\" or \"expire\"");
    CHECK(strstr(rejection(WITH_HANDLER("{'saga': 'a b'}")), "handler.saga must be a saga name"));
    CHECK(strstr(rejection(WITH_HANDLER("{'webhook': 'http://a', 'saga': 'b'}")),
                 "action \"y\" handler must be null, {\"webhook\": URL}"));
    CHECK_STR(rejection(WITH_HANDLER("{'script': 'rm'}")),
              "t.json: template \"x\" action \"y\" handler has unknown key \"script\" (expected "
              "webhook, payment or saga)");
    CHECK(strstr(rejection(WITH_HANDLER("'http://a'")), "handler must be null"));

    mv_template *t;
    mv_err err;
    const char *kinds[] = {"null", "{'webhook': 'https://hooks.example.com/a?x=1'}",
                           "{'payment': 'refund'}", "{'payment': 'expire'}",
                           "{'saga': 'checkout'}"};
    mv_handler_kind want[] = {MV_HANDLER_NONE, MV_HANDLER_WEBHOOK, MV_HANDLER_PAYMENT,
                              MV_HANDLER_PAYMENT, MV_HANDLER_SAGA};
    const char *target[] = {NULL, "https://hooks.example.com/a?x=1", "refund", "expire",
                            "checkout"};
    for (int i = 0; i < 5; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{'templateCd': 'x', 'actions': [{'actionCd': 'y', 'name': 'A', 'variant': 'v',"
                 " 'sender': true, 'handler': %s}]}",
                 kinds[i]);
        CHECK_CODE(parse(text, &t, &err), MV_OK, &err);
        if (!t) continue;
        CHECK(t->actions[0].handler == want[i]);
        if (target[i])
            CHECK_STR(t->actions[0].handler_target, target[i]);
        else
            CHECK(t->actions[0].handler_target == NULL);
        mv_template_release(t);
    }
#undef WITH_HANDLER
}

TEST(prepare_shapes_are_checked) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse("{'templateCd': 'x', 'actions': [],"
                     " 'prepare': {'webhook': 'http://127.0.0.1:9000/prepare'}}",
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK(t->prepare == MV_PREPARE_WEBHOOK);
    CHECK_STR(t->prepare_webhook, "http://127.0.0.1:9000/prepare");
    mv_template_release(t);

    CHECK_CODE(parse("{'templateCd': 'x', 'actions': [],"
                     " 'prepare': {'toUser': '{{hostId}}', 'toRoles': ['a', 'b'],"
                     " 'fanOut': 'guests'}}",
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK(t->prepare == MV_PREPARE_DECLARATIVE);
    CHECK_RENDER(t->prepare_to_user, "{'hostId': 'h1'}", "h1");
    CHECK_INT(json_array_size(t->prepare_to_roles), 2);
    CHECK_STR(t->prepare_fan_out, "guests");
    mv_template_release(t);

    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [],"
                        " 'prepare': {'webhook': 'http://a', 'toUser': 'u'}}"),
              "t.json: template \"x\" prepare.webhook cannot be combined with \"toUser\"");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'prepare': {'webhook': 'localhost'}}"),
              "t.json: template \"x\" prepare.webhook must be an http:// or https:// URL, got "
              "\"localhost\"");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'prepare': {'fanOut': 3}}"),
              "t.json: template \"x\" prepare.fanOut must be a dotted path (a non-empty string) or "
              "null");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'prepare': 'hook'}"),
              "t.json: template \"x\" prepare must be an object ({toUser, toRoles, fanOut} or "
              "{webhook})");
}

TEST(required_lists_dotted_paths_and_bad_lists_are_rejected_naming_the_entry) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse("{'templateCd': 'x', 'actions': [],"
                     " 'required': ['listing', 'guest.name', 'items.0.sku']}",
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK_INT(t->nrequired, 3);
    CHECK_STR(t->required[1], "guest.name");
    json_t *ok = J("{'listing': '', 'guest': {'name': 0}, 'items': [{'sku': false}]}");
    CHECK_CODE(mv_template_check_payload(t, ok, &err), MV_OK, &err);
    json_t *bad = J("{'listing': 'Flat', 'guest': {'name': 'Ana'}, 'items': [{'sku': null}]}");
    CHECK(mv_template_check_payload(t, bad, &err) == MV_INVALID_ARGUMENT);
    CHECK_STR(err.message,
              "\"items.0.sku\" is required by template \"x\" (missing or null in the payload)");
    json_decref(ok);
    json_decref(bad);
    mv_template_release(t);

    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'required': 'listing'}"),
              "t.json: template \"x\" required must be an array of dotted paths into the payload, "
              "such as [\"listing\", \"guest.name\"]");
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'required': ['a', 3]}"),
              "t.json: template \"x\" required[1] must be a string");
    static const char *const paths[] = {"", ".a", "a.", "a..b", "a\\tb"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char text[200], want[300];
        snprintf(text, sizeof text, "{'templateCd': 'x', 'actions': [], 'required': ['%s']}",
                 paths[i]);
        snprintf(want, sizeof want,
                 "t.json: template \"x\" required[0] \"%s\" is not a dotted path",
                 paths[i][0] == 'a' && paths[i][1] == '\\' ? "a\tb" : paths[i]);
        CHECK(starts_with(rejection(text), want));
    }
    CHECK_STR(rejection("{'templateCd': 'x', 'actions': [], 'required': ['a', 'b', 'a']}"),
              "t.json: template \"x\" required lists \"a\" twice");
    char many[2048] = "{'templateCd': 'x', 'actions': [], 'required': [";
    for (int i = 0; i <= MV_TEMPLATE_MAX_REQUIRED; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s'f%d'", i ? ", " : "", i);
    strcat(many, "]}");
    CHECK_STR(rejection(many), "t.json: template \"x\" required lists 65 fields; at most 64 are "
                               "allowed");
    char longest[400];
    snprintf(longest, sizeof longest, "{'templateCd': 'x', 'actions': [], 'required': ['%0*d']}",
             MV_TEMPLATE_MAX_REQUIRED_PATH + 1, 0);
    CHECK(starts_with(rejection(longest), "t.json: template \"x\" required[0] \"0"));
    longest[strlen(longest) - 4] = '\0'; /* one digit less: the longest allowed */
    strcat(longest, "']}");
    CHECK_STR(rejection(longest), "");
}

TEST(approval_shapes_are_checked) {
#define WITH_APPROVAL(a)                                                                           \
    one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true, 'approval': " a "}")
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse(WITH_APPROVAL("{'capability': 'refunds.large', 'ttlMs': 60000}"), &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK_STR(t->actions[0].approval_capability, "refunds.large");
    CHECK_INT(t->actions[0].approval_ttl_ms, 60000);
    mv_template_release(t);
    CHECK_CODE(parse(WITH_APPROVAL("{'capability': 'refunds'}"), &t, &err), MV_OK, &err);
    REQUIRE(t);
    CHECK_INT(t->actions[0].approval_ttl_ms, 0);
    mv_template_release(t);
    CHECK(strstr(rejection(WITH_APPROVAL("{'capability': 'Refunds'}")),
                 "action \"y\" approval.capability \"Refunds\" is not a capability id"));
    CHECK_STR(rejection(WITH_APPROVAL("{'capability': 'a', 'ttlMs': 0}")),
              "t.json: template \"x\" action \"y\" approval.ttlMs must be a positive integer "
              "(milliseconds)");
    CHECK(strstr(rejection(WITH_APPROVAL("{'capability': 'a', 'ttlMs': 1.5}")), "ttlMs"));
    CHECK_STR(rejection(WITH_APPROVAL("{'ttlMs': 5}")),
              "t.json: template \"x\" action \"y\" approval.capability must be a string");
    CHECK_STR(rejection(WITH_APPROVAL("{'capability': 'a', 'who': 'b'}")),
              "t.json: template \"x\" action \"y\" approval has unknown key \"who\"");
#undef WITH_APPROVAL
}

TEST(a_label_and_an_action_result_template_are_strings_kept_in_the_source) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse("{'templateCd': 'x', 'label': 'Booking request', 'actions': [{'actionCd': 'y',"
                     " 'name': 'A', 'variant': 'v', 'sender': true,"
                     " 'resultTemplate': 'Confirmed: {{confirmation}}'}]}",
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK_STR(mv_json_str(t->source, "label"), "Booking request");
    mv_template_release(t);
    CHECK_STR(rejection("{'templateCd': 'x', 'label': 7, 'actions': []}"),
              "t.json: template \"x\" label must be a non-empty string or null");
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'resultTemplate': {'en': 'x'}}")),
              "t.json: template \"x\" action \"y\" resultTemplate must be a string or null");
}

TEST(null_optional_keys_count_as_absent) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse("{'templateCd': 'x', 'type': null, 'uiTemplate': null, 'prepare': null,"
                     " 'senderContent': null, 'actions': [{'actionCd': 'y', 'name': 'A',"
                     " 'variant': 'v', 'sender': true, 'receiver': null, 'isDefault': null,"
                     " 'confirmation': {'title': 't', 'message': 'm', 'notesLabel': null,"
                     " 'requireNotes': null, 'documents': null}, 'payload': null,"
                     " 'senderNotification': null, 'approval': null}]}",
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    const mv_action_def *a = &t->actions[0];
    CHECK(!a->receiver && !a->has_is_default && a->has_confirmation);
    CHECK(!a->confirm_notes_label && !a->confirm_require_notes && !a->confirm_documents);
    CHECK(!a->payload && !a->has_sender_notification && !a->approval_capability);
    CHECK_STR(t->type, "");
    mv_template_release(t);
}

TEST(sender_notification_string_fills_short_and_long) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                " 'senderNotification': 'Done with {{thing}}'}"),
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    const mv_action_def *a = &t->actions[0];
    CHECK(a->has_sender_notification);
    CHECK(a->notify_title == NULL);
    CHECK_RENDER(a->notify_long, "{'thing': 'it'}", "Done with it");
    CHECK_RENDER(a->notify_short, "{'thing': 'it'}", "Done with it");
    mv_template_release(t);

    CHECK_CODE(parse(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                " 'senderNotification': {'title': 'T {{n}}', 'long': 'L {{n}}'}}"),
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    a = &t->actions[0];
    CHECK_RENDER(a->notify_title, "{'n': 1}", "T 1");
    CHECK_RENDER(a->notify_long, "{'n': 1}", "L 1");
    CHECK_RENDER(a->notify_short, "{'n': 1}", "L 1"); /* short || long, as the reference */
    mv_template_release(t);

    CHECK_CODE(parse(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true}"),
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK(!t->actions[0].has_sender_notification);
    mv_template_release(t);
    CHECK_STR(rejection(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true,"
                                   " 'senderNotification': {}}")),
              "t.json: template \"x\" action \"y\" senderNotification must have at least one of "
              "title, short and long");
}

TEST(mutating_the_source_json_after_parse_has_no_effect) {
    json_t *src = J(TEST_REQUEST);
    mv_template *t;
    mv_err err;
    REQUIRE(mv_template_parse(src, "t.json", &t, &err) == MV_OK);
    json_t *actions = json_object_get(src, "actions");
    json_object_set_new(json_array_get(actions, 0), "receiver", json_false());
    json_array_append_new(actions,
                          J("{'actionCd': 'extra', 'name': 'E', 'variant': 'v', 'sender': true}"));
    json_object_set_new(json_object_get(src, "senderContent"), "title", json_string("Changed"));
    json_object_set_new(src, "uiTemplate", json_string("other"));
    CHECK_INT(t->nactions, 3);
    CHECK(t->actions[0].receiver);
    CHECK(mv_template_action(t, "extra") == NULL);
    CHECK_RENDER(t->sender_content.title, "{}", "Test Request");
    CHECK_STR(mv_template_ui(t, MV_SENDER), "default-message");
    CHECK_STR(
        json_string_value(json_object_get(json_object_get(t->source, "senderContent"), "title")),
        "Test Request");
    CHECK_INT(json_array_size(json_object_get(t->source, "actions")), 3);
    json_decref(src);
    mv_template_release(t);
}

TEST(ui_template_object_resolves_per_usertype_with_fallbacks) {
    mv_template *t;
    mv_err err;
    CHECK_CODE(parse("{'templateCd': 'x', 'actions': [],"
                     " 'uiTemplate': {'sender': 'sender-view', 'receiver': 'receiver-view'}}",
                     &t, &err),
               MV_OK, &err);
    REQUIRE(t);
    CHECK_STR(mv_template_ui(t, MV_SENDER), "sender-view");
    CHECK_STR(mv_template_ui(t, MV_RECEIVER), "receiver-view");
    mv_template_release(t);
    CHECK_CODE(
        parse("{'templateCd': 'x', 'actions': [], 'uiTemplate': {'receiver': 'r'}}", &t, &err),
        MV_OK, &err);
    REQUIRE(t);
    CHECK_STR(mv_template_ui(t, MV_SENDER), "r");
    mv_template_release(t);
    CHECK_CODE(
        parse("{'templateCd': 'x', 'actions': [], 'uiTemplate': {'sender': 's', 'receiver': ''}}",
              &t, &err),
        MV_OK, &err);
    REQUIRE(t);
    CHECK_STR(mv_template_ui(t, MV_RECEIVER), "s");
    mv_template_release(t);
    CHECK_CODE(parse("{'templateCd': 'x', 'actions': [], 'uiTemplate': {}}", &t, &err), MV_OK,
               &err);
    REQUIRE(t);
    CHECK_STR(mv_template_ui(t, MV_RECEIVER), "");
    mv_template_release(t);
}

/* ---- registry ------------------------------------------------------------------------------ */

static mv_code reg_add(mv_registry *reg, const char *text) {
    json_t *v = J(text);
    mv_err err;
    mv_code rc = mv_registry_register(reg, v, "<inline>", &err);
    json_decref(v);
    return rc;
}

static char *codes_of(mv_registry *reg) {
    json_t *codes = mv_registry_codes(reg);
    char *s = mv_json_compact(codes);
    json_decref(codes);
    return s;
}

#define CHECK_CODES(reg, want)                                                                     \
    do {                                                                                           \
        char *c_ = codes_of(reg);                                                                  \
        CHECK_STR(c_, want);                                                                       \
        free(c_);                                                                                  \
    } while (0)

TEST(registry_find_has_codes_remove_and_clear) {
    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    CHECK(!mv_registry_has(reg, "test-request"));
    CHECK(mv_registry_find(reg, "test-request") == NULL);
    CHECK_INT(reg_add(reg, TEST_REQUEST), MV_OK);
    CHECK(mv_registry_has(reg, "test-request"));
    mv_template *t = mv_registry_find(reg, "test-request");
    REQUIRE(t);
    CHECK_STR(t->template_cd, "test-request");
    mv_template_release(t);
    CHECK(mv_registry_find(reg, "unknown") == NULL);
    CHECK_CODES(reg, "[\"test-request\"]");
    CHECK_INT(mv_registry_count(reg), 1);
    CHECK(mv_registry_remove(reg, "test-request"));
    CHECK(!mv_registry_remove(reg, "test-request"));
    CHECK(mv_registry_find(reg, "test-request") == NULL);
    CHECK_INT(reg_add(reg, TEST_REQUEST), MV_OK);
    CHECK_INT(reg_add(reg, "{'templateCd': 'test-2', 'actions': []}"), MV_OK);
    CHECK_CODES(reg, "[\"test-request\",\"test-2\"]");
    mv_registry_clear(reg);
    CHECK_CODES(reg, "[]");
    CHECK_INT(mv_registry_count(reg), 0);
    mv_registry_free(reg);
    mv_registry_free(NULL);
}

TEST(registry_replace_keeps_the_original_position) {
    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    CHECK_INT(reg_add(reg, "{'templateCd': 'a', 'description': 'first', 'actions': []}"), MV_OK);
    CHECK_INT(reg_add(reg, "{'templateCd': 'b', 'actions': []}"), MV_OK);
    CHECK_INT(reg_add(reg, "{'templateCd': 'c', 'actions': []}"), MV_OK);
    CHECK_INT(reg_add(reg, "{'templateCd': 'a', 'description': 'updated', 'actions': []}"), MV_OK);
    CHECK_CODES(reg, "[\"a\",\"b\",\"c\"]");
    mv_template *t = mv_registry_find(reg, "a");
    REQUIRE(t);
    CHECK_STR(t->description, "updated");
    mv_template_release(t);
    CHECK(mv_registry_remove(reg, "b"));
    CHECK_CODES(reg, "[\"a\",\"c\"]");
    mv_registry_free(reg);
}

TEST(invalid_template_changes_nothing_in_the_registry) {
    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    CHECK_INT(reg_add(reg, "{'templateCd': 'a', 'description': 'good', 'actions': []}"), MV_OK);
    CHECK_INT(reg_add(reg, "{'templateCd': 'a', 'description': 'bad', 'actions': 3}"),
              MV_INVALID_TEMPLATE);
    mv_template *t = mv_registry_find(reg, "a");
    REQUIRE(t);
    CHECK_STR(t->description, "good");
    mv_template_release(t);
    mv_registry_free(reg);
}

TEST(template_found_before_removal_stays_valid_until_released) {
    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    CHECK_INT(reg_add(reg, TEST_REQUEST), MV_OK);
    mv_template *held = mv_registry_find(reg, "test-request");
    REQUIRE(held);
    CHECK_INT(reg_add(reg, "{'templateCd': 'test-request', 'description': 'v2', 'actions': []}"),
              MV_OK);
    mv_registry_clear(reg);
    mv_registry_free(reg);
    /* Still ours: the registry only dropped its own reference. */
    CHECK_INT(held->nactions, 3);
    CHECK_RENDER(held->sender_content.long_text, "{'itemName': 'W'}",
                 "You submitted a request for \"W\".");
    mv_template_release(held);
}

typedef struct {
    mv_registry *reg;
    mv_template *versions[2];
    int id;
    int bad;
} race_arg;

static void *race_worker(void *p) {
    race_arg *a = p;
    for (int i = 0; i < 3000; i++) {
        if (a->id == 0) {
            mv_registry_put(a->reg, a->versions[i % 2]);
        } else if (a->id == 1 && i % 10 == 0) {
            mv_registry_remove(a->reg, "race");
        } else {
            mv_template *t = mv_registry_find(a->reg, "race");
            if (t && strcmp(t->template_cd, "race") != 0) a->bad++;
            if (t && t->nactions != 0 && t->nactions != 1) a->bad++;
            mv_template_release(t);
            json_t *codes = mv_registry_codes(a->reg);
            if (json_array_size(codes) > 2) a->bad++;
            json_decref(codes);
        }
    }
    return NULL;
}

TEST(registry_survives_concurrent_put_find_and_remove) {
    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    mv_template *v1, *v2;
    mv_err err;
    REQUIRE(parse("{'templateCd': 'race', 'actions': []}", &v1, &err) == MV_OK);
    REQUIRE(parse(one_action("{'actionCd': 'y', 'name': 'A', 'variant': 'v', 'sender': true}"), &v2,
                  &err) == MV_OK);
    mv_template_release(v2); /* one_action's code is "x": build the second "race" version */
    REQUIRE(parse("{'templateCd': 'race', 'actions': [{'actionCd': 'y', 'name': 'A',"
                  " 'variant': 'v', 'sender': true}]}",
                  &v2, &err) == MV_OK);
    CHECK_INT(reg_add(reg, "{'templateCd': 'other', 'actions': []}"), MV_OK);
    pthread_t th[4];
    race_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (race_arg){reg, {v1, v2}, i, 0};
        pthread_create(&th[i], NULL, race_worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(args[i].bad, 0);
    }
    CHECK(mv_registry_has(reg, "other"));
    mv_registry_free(reg);
    /* The registry released exactly its references: ours are the last ones. */
    CHECK_INT(v1->refs_, 1);
    CHECK_INT(v2->refs_, 1);
    mv_template_release(v1);
    mv_template_release(v2);
}

/* ---- files and directories ------------------------------------------------------------------ */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (const char *p = text; *p; p++)
        fputc(*p == '\'' ? '"' : *p, f);
    fclose(f);
}

static const char *tmp_dir(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s", test_tmp_path(name));
    mkdir(buf, 0700);
    return buf;
}

static const char GOOD_A[] = "{'templateCd': 'alpha', 'actions': []}";
static const char GOOD_B[] = "{'templateCd': 'beta', 'actions': []}";

TEST(load_file_names_the_file_in_every_error) {
    const char *path = test_tmp_path("dup.json");
    write_file(path, "{'templateCd': 'x', 'actions': ["
                     " {'actionCd': 'a', 'name': 'A', 'variant': 'v', 'sender': true},"
                     " {'actionCd': 'a', 'name': 'A', 'variant': 'v', 'sender': true}]}");
    mv_template *t;
    mv_err err;
    CHECK_INT(mv_template_load_file(path, &t, &err), MV_INVALID_TEMPLATE);
    char want[600];
    snprintf(want, sizeof want, "%s: template \"x\" has duplicate actionCd \"a\"", path);
    CHECK_STR(err.message, want);
    write_file(path, "{'templateCd': 'x', ");
    CHECK(mv_template_load_file(path, &t, &err) != MV_OK);
    CHECK(strncmp(err.message, path, strlen(path)) == 0);
    CHECK(strstr(err.message, "invalid JSON") != NULL);
    unlink(path);
    CHECK_INT(mv_template_load_file(path, &t, &err), MV_IO);
    CHECK(strncmp(err.message, path, strlen(path)) == 0);
}

TEST(load_dir_registers_good_files_in_name_order_and_reports_every_bad_one) {
    const char *dir = tmp_dir("tpl-dir");
    char p[600];
    snprintf(p, sizeof p, "%s/b.json", dir);
    write_file(p, GOOD_B);
    snprintf(p, sizeof p, "%s/a.json", dir);
    write_file(p, GOOD_A);
    snprintf(p, sizeof p, "%s/c-unclosed.json", dir);
    write_file(p, "{'templateCd': 'c', 'actions': [], 'senderContent': {'title': 'Hi {{name'}}");
    snprintf(p, sizeof p, "%s/d-nobody.json", dir);
    write_file(
        p, "{'templateCd': 'd', 'actions': [{'actionCd': 'go', 'name': 'Go', 'variant': 'v'}]}");
    snprintf(p, sizeof p, "%s/e-same-code.json", dir);
    write_file(p, GOOD_A);
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    write_file(p, "not a template");
    snprintf(p, sizeof p, "%s/.hidden.json", dir);
    write_file(p, "garbage");

    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    mv_err err;
    mv_err_clear(&err);
    CHECK_INT(mv_registry_load_dir(reg, dir, &err), MV_INVALID_TEMPLATE);
    CHECK_CODES(reg, "[\"alpha\",\"beta\"]");
    char want[1024];
    snprintf(want, sizeof want, "%s/c-unclosed.json: template \"c\" senderContent.title: ", dir);
    CHECK(strncmp(err.message, want, strlen(want)) == 0);
    char *second = strchr(err.message, '\n');
    REQUIRE(second);
    snprintf(want, sizeof want,
             "\n%s/d-nobody.json: template \"d\" action \"go\" must be available to sender or "
             "receiver\n%s/e-same-code.json: template \"alpha\" is already defined in a.json",
             dir, dir);
    CHECK_STR(second, want);
    mv_registry_free(reg);

    /* A directory of good files loads without error; a trailing slash is fine. */
    const char *good = tmp_dir("tpl-good");
    snprintf(p, sizeof p, "%s/one.json", good);
    write_file(p, GOOD_A);
    reg = mv_registry_new();
    snprintf(p, sizeof p, "%s/", good);
    CHECK_CODE(mv_registry_load_dir(reg, p, &err), MV_OK, &err);
    CHECK_CODES(reg, "[\"alpha\"]");
    CHECK_INT(mv_registry_load_dir(reg, "/nonexistent/templates", &err), MV_IO);
    CHECK(strstr(err.message, "/nonexistent/templates") != NULL);
    mv_registry_free(reg);
}

TEST(example_templates_load) {
    mv_registry *reg = mv_registry_new();
    REQUIRE(reg);
    mv_err err;
    CHECK_CODE(mv_registry_load_dir(reg, "examples/templates", &err), MV_OK, &err);
    CHECK_CODES(reg, "[\"booking-request\",\"expense-approval\",\"welcome\"]");
    mv_template *t = mv_registry_find(reg, "booking-request");
    REQUIRE(t);
    CHECK_STR(t->payment_cd, "deposit");
    const mv_action_def *accept = mv_template_action(t, "accept");
    REQUIRE(accept);
    CHECK(accept->condition != NULL && accept->is_default && accept->receiver);
    CHECK(accept->handler == MV_HANDLER_NONE);
    CHECK(accept->has_sender_notification);
    const mv_action_def *decline = mv_template_action(t, "decline");
    REQUIRE(decline);
    CHECK(decline->handler == MV_HANDLER_PAYMENT);
    CHECK_STR(decline->handler_target, "expire");
    const mv_action_def *withdraw = mv_template_action(t, "withdraw");
    REQUIRE(withdraw);
    CHECK(withdraw->sender && !withdraw->receiver && withdraw->handler == MV_HANDLER_NONE);
    CHECK_RENDER(t->prepare_to_user, "{'hostId': ' host-7 '}", " host-7 ");
    mv_template_release(t);
    t = mv_registry_find(reg, "expense-approval");
    REQUIRE(t);
    CHECK_STR(json_string_value(json_array_get(t->prepare_to_roles, 0)), "finance");
    CHECK(t->prepare_to_user == NULL);
    const mv_action_def *approve = mv_template_action(t, "approve");
    REQUIRE(approve);
    CHECK_STR(approve->permission, "expenses.approve");
    CHECK(approve->condition != NULL);
    CHECK(mv_template_action(t, "reject") != NULL);
    mv_template_release(t);
    t = mv_registry_find(reg, "welcome");
    REQUIRE(t);
    CHECK_INT(t->nactions, 0);
    mv_template_release(t);
    mv_registry_free(reg);
}

/* ---- the CLI ----------------------------------------------------------------------------------
 */

/* Runs a shell command from the repository root; returns its exit status, output in out. */
static int run(const char *cmd, char *out, size_t size) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *missive_bin(void) {
    static char buf[512];
    const char *build = getenv("BUILD");
    snprintf(buf, sizeof buf, "%s/missive", build && *build ? build : "build");
    return buf;
}

TEST(templates_check_passes_on_the_examples) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s templates check examples/templates/*", missive_bin());
    CHECK_INT(run(cmd, out, sizeof out), 0);
    CHECK_STR(out, "ok examples/templates/booking-request.json (required: hostId, listing)\n"
                   "ok examples/templates/expense-approval.json (required: title, amount, "
                   "currency)\n"
                   "ok examples/templates/welcome.json (required: userId, name)\n");
}

TEST(templates_check_fails_naming_file_template_and_problem) {
    const char *bad = test_tmp_path("two-defaults.json");
    write_file(
        bad,
        "{'templateCd': 'bad', 'actions': ["
        " {'actionCd': 'a', 'name': 'A', 'variant': 'v', 'receiver': true, 'isDefault': true},"
        " {'actionCd': 'b', 'name': 'B', 'variant': 'v', 'receiver': true, 'isDefault': true}]}");
    char cmd[1024], out[4096], want[2048];
    snprintf(cmd, sizeof cmd, "%s templates check examples/templates/welcome.json %s",
             missive_bin(), bad);
    CHECK_INT(run(cmd, out, sizeof out), 1);
    snprintf(want, sizeof want,
             "ok examples/templates/welcome.json (required: userId, name)\n"
             "%s: template \"bad\" has multiple default receiver actions: \"a\" and \"b\"\n",
             bad);
    CHECK_STR(out, want);
    snprintf(cmd, sizeof cmd, "%s templates check 2>/dev/null", missive_bin());
    CHECK_INT(run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s templates check /nonexistent.json", missive_bin());
    CHECK_INT(run(cmd, out, sizeof out), 1);
    CHECK(strncmp(out, "/nonexistent.json: ", 19) == 0);
}

TEST(templates_check_takes_a_directory_and_reports_duplicate_codes_across_its_files) {
    char cmd[2048], out[4096], want[4096];
    snprintf(cmd, sizeof cmd, "%s templates check examples/templates", missive_bin());
    CHECK_INT(run(cmd, out, sizeof out), 0);
    CHECK_STR(out, "ok examples/templates/booking-request.json (required: hostId, listing)\n"
                   "ok examples/templates/expense-approval.json (required: title, amount, "
                   "currency)\n"
                   "ok examples/templates/welcome.json (required: userId, name)\n");
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_dir("check-dir"));
    char a[700], b[700], c[700];
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    snprintf(c, sizeof c, "%s/notes.txt", dir);
    write_file(a, "{'templateCd': 'same', 'actions': []}");
    write_file(b, "{'templateCd': 'same', 'actions': []}");
    write_file(c, "not a template");
    snprintf(cmd, sizeof cmd, "%s templates check %s/", missive_bin(), dir);
    CHECK_INT(run(cmd, out, sizeof out), 1);
    snprintf(want, sizeof want,
             "ok %s/a.json\n%s/b.json: template \"same\" is already defined in %s/a.json\n", dir,
             dir, dir);
    CHECK_STR(out, want);
}

TEST(templates_check_with_sagas_names_template_action_and_unknown_saga) {
    char dir[600], file[700], cmd[1600], out[4096], want[2048];
    snprintf(dir, sizeof dir, "%s", tmp_dir("check-sagas"));
    snprintf(file, sizeof file, "%s/order.json", dir);
    write_file(file, "{'templateCd': 'order', 'actions': [{'actionCd': 'buy', 'name': 'Buy',"
                     " 'variant': 'v', 'receiver': true, 'handler': {'saga': 'chekout'}}]}");
    snprintf(cmd, sizeof cmd, "%s templates check --sagas examples/sagas %s", missive_bin(), dir);
    CHECK_INT(run(cmd, out, sizeof out), 1);
    snprintf(want, sizeof want,
             "%s: template \"order\" action \"buy\" runs unknown saga \"chekout\" (not defined in "
             "examples/sagas)\n",
             file);
    CHECK_STR(out, want);
    write_file(file, "{'templateCd': 'order', 'actions': [{'actionCd': 'buy', 'name': 'Buy',"
                     " 'variant': 'v', 'receiver': true, 'handler': {'saga': 'checkout'}}]}");
    CHECK_INT(run(cmd, out, sizeof out), 0);
    snprintf(want, sizeof want, "ok %s/order.json\n", dir);
    CHECK_STR(out, want);
    snprintf(cmd, sizeof cmd, "%s templates check --sagaz examples/sagas %s 2>/dev/null",
             missive_bin(), dir);
    CHECK_INT(run(cmd, out, sizeof out), 2);
}

int main(void) {
    return RUN_TESTS(
        fixture_parses_with_its_fields, design_example_with_webhook_handler_parses,
        empty_actions_array_is_a_valid_notification_template,
        reference_validation_messages_are_exact,
        duplicate_action_code_is_rejected_with_the_reference_message,
        two_default_receiver_actions_are_rejected_naming_both,
        action_for_nobody_is_rejected_with_the_reference_message,
        a_misspelled_receiver_flag_is_named_as_an_unknown_key,
        templates_check_takes_a_directory_and_reports_duplicate_codes_across_its_files,
        templates_check_with_sagas_names_template_action_and_unknown_saga,
        reference_checks_come_before_missive_checks_in_reference_order,
        unknown_keys_are_rejected_naming_the_key, codes_must_match_their_route_patterns,
        mustache_that_does_not_compile_is_rejected_naming_template_and_field,
        condition_that_is_not_valid_jsonlogic_is_rejected,
        wrong_json_types_are_rejected_naming_the_field, handler_shapes_are_checked,
        prepare_shapes_are_checked,
        required_lists_dotted_paths_and_bad_lists_are_rejected_naming_the_entry,
        approval_shapes_are_checked, null_optional_keys_count_as_absent,
        a_label_and_an_action_result_template_are_strings_kept_in_the_source,
        sender_notification_string_fills_short_and_long,
        mutating_the_source_json_after_parse_has_no_effect,
        ui_template_object_resolves_per_usertype_with_fallbacks,
        registry_find_has_codes_remove_and_clear, registry_replace_keeps_the_original_position,
        invalid_template_changes_nothing_in_the_registry,
        template_found_before_removal_stays_valid_until_released,
        registry_survives_concurrent_put_find_and_remove, load_file_names_the_file_in_every_error,
        load_dir_registers_good_files_in_name_order_and_reports_every_bad_one,
        example_templates_load, templates_check_passes_on_the_examples,
        templates_check_fails_naming_file_template_and_problem);
}
