/* rules_test.c — who is sender/receiver (SEMANTICS §1.5 with its pinned sentinels), permissions,
 * isActionAllowed / filterActions (§1.4, §2.1) and plain-text content rendering. */
#include "missive/base.h"
#include "missive/template.h"
#include "test.h"

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

static mv_template *tpl(const char *text) {
    json_t *v = J(text);
    mv_template *t = NULL;
    mv_err err;
    if (mv_template_parse(v, "<inline>", &t, &err) != MV_OK) fprintf(stderr, "%s\n", err.message);
    json_decref(v);
    return t;
}

/* The reference fixture (SEMANTICS §2.1), with the confirmation of the filterActions test. */
static const char TEST_REQUEST[] =
    "{'templateCd': 'test-request', 'type': 'request',"
    " 'senderContent': {'title': 'Test Request',"
    "   'long': 'You submitted a request for \\'{{itemName}}\\'.', 'short': 'Request for "
    "{{itemName}}'},"
    " 'receiverContent': {'title': 'New Request',"
    "   'long': '\\'{{displayName}}\\' submitted a request for \\'{{itemName}}\\'.', 'short': "
    "'Request'},"
    " 'uiTemplate': 'default-message',"
    " 'actions': ["
    "  {'actionCd': 'approved', 'name': 'Approve {{itemName}}', 'variant': 'success',"
    "   'receiver': true, 'isDefault': true},"
    "  {'actionCd': 'rejected', 'name': 'Reject', 'variant': 'danger', 'receiver': true,"
    "   'confirmation': {'title': 'Reject {{itemName}}', 'message': 'Are you sure about "
    "{{itemName}}?',"
    "     'notesLabel': 'Reason for rejecting {{itemName}}'}},"
    "  {'actionCd': 'revoked', 'name': 'Revoke', 'variant': 'dark', 'sender': true,"
    "   'isDefault': true}]}";

static mv_user user_named(const char *id) { return (mv_user){.id = id}; }

static char *filter_json(const mv_template *t, mv_usertype ut, const mv_user *u,
                         const char *message, const char *data) {
    json_t *m = message ? J(message) : NULL, *d = data ? J(data) : NULL, *out = NULL;
    mv_err err;
    char *s = NULL;
    if (mv_actions_filter(t, ut, u, m, d, &out, &err) == MV_OK)
        s = mv_json_compact(out);
    else
        s = strdup(err.message);
    json_decref(out);
    json_decref(m);
    json_decref(d);
    return s;
}

#define CHECK_FILTER(t, ut, u, message, data, want)                                                \
    do {                                                                                           \
        char *f_ = filter_json((t), (ut), (u), (message), (data));                                 \
        CHECK_STR(f_, want);                                                                       \
        free(f_);                                                                                  \
    } while (0)

/* Action codes only, comma-joined. */
static char *filter_codes(const mv_template *t, mv_usertype ut, const mv_user *u,
                          const char *message) {
    json_t *m = message ? J(message) : NULL, *out = NULL;
    mv_err err;
    char buf[sizeof((mv_err *)0)->message + 16] = "";
    if (mv_actions_filter(t, ut, u, m, NULL, &out, &err) == MV_OK) {
        size_t i;
        json_t *a;
        json_array_foreach(out, i, a) {
            if (i) strcat(buf, ",");
            strcat(buf, json_string_value(json_object_get(a, "actionCd")));
        }
    } else {
        snprintf(buf, sizeof buf, "error: %s", err.message);
    }
    json_decref(out);
    json_decref(m);
    return strdup(buf);
}

#define CHECK_CODES(t, ut, u, message, want)                                                       \
    do {                                                                                           \
        char *c_ = filter_codes((t), (ut), (u), (message));                                        \
        CHECK_STR(c_, want);                                                                       \
        free(c_);                                                                                  \
    } while (0)

static char *content_json(const mv_content_tpl *c, const char *data) {
    json_t *d = data ? J(data) : NULL, *out = NULL;
    mv_err err;
    char *s =
        mv_content_render(c, d, &out, &err) == MV_OK ? mv_json_compact(out) : strdup(err.message);
    json_decref(out);
    json_decref(d);
    return s;
}

#define CHECK_CONTENT(c, data, want)                                                               \
    do {                                                                                           \
        char *c_ = content_json((c), (data));                                                      \
        CHECK_STR(c_, want);                                                                       \
        free(c_);                                                                                  \
    } while (0)

/* ---- identity ------------------------------------------------------------------------------ */

TEST(user_id_is_trimmed_and_empty_means_no_user) {
    char buf[64];
    mv_user u = user_named("  u1\t");
    CHECK(mv_user_id(&u, buf, sizeof buf));
    CHECK_STR(buf, "u1");
    u.id = "   ";
    CHECK(!mv_user_id(&u, buf, sizeof buf));
    u.id = "";
    CHECK(!mv_user_id(&u, buf, sizeof buf));
    u.id = NULL;
    CHECK(!mv_user_id(&u, buf, sizeof buf));
    CHECK(!mv_user_id(NULL, buf, sizeof buf));
    u.id = "abcdef";
    CHECK(!mv_user_id(&u, buf, 4)); /* does not fit: no truncated id */
}

TEST(sender_and_receiver_compare_trimmed_ids) {
    json_t *m = J("{'fromUser': ' sender1 ', 'toUser': 'receiver1', 'toRoles': ['finance']}");
    mv_user s = user_named("sender1"), r = user_named(" receiver1"), x = user_named("other");
    CHECK(mv_user_is_sender(&s, m));
    CHECK(!mv_user_is_receiver(&s, m));
    CHECK(mv_user_is_receiver(&r, m));
    CHECK(!mv_user_is_sender(&r, m));
    CHECK(!mv_user_is_sender(&x, m));
    CHECK(!mv_user_is_receiver(&x, m));
    const char *roles[] = {"staff", "finance"};
    x.roles = roles;
    x.nroles = 2;
    CHECK(mv_user_is_receiver(&x, m));
    CHECK(!mv_user_is_sender(&x, m));
    x.nroles = 1;
    CHECK(!mv_user_is_receiver(&x, m));
    CHECK(!mv_user_is_sender(NULL, m));
    CHECK(!mv_user_is_receiver(NULL, m));
    json_decref(m);
}

TEST(stored_null_does_not_match_a_user_called_null) {
    json_t *m = J("{'fromUser': null, 'toUser': null, 'toRoles': []}");
    mv_user u = user_named("null");
    CHECK(!mv_user_is_sender(&u, m));
    CHECK(!mv_user_is_receiver(&u, m));
    json_decref(m);
}

TEST(empty_stored_id_does_not_match_an_empty_user_id) {
    json_t *m = J("{'fromUser': '', 'toUser': '  '}");
    mv_user u = user_named("");
    CHECK(!mv_user_is_sender(&u, m));
    CHECK(!mv_user_is_receiver(&u, m));
    u.id = " ";
    CHECK(!mv_user_is_sender(&u, m));
    CHECK(!mv_user_is_receiver(&u, m));
    json_decref(m);
    m = J("{}");
    CHECK(!mv_user_is_sender(&u, m));
    json_decref(m);
}

TEST(numeric_stored_id_matches_its_text) {
    json_t *m = J("{'fromUser': 42}");
    mv_user u = user_named("42");
    CHECK(mv_user_is_sender(&u, m));
    json_decref(m);
}

TEST(permission_follows_javascript_truthiness) {
    json_t *perms = J("{'t': true, 'one': 1, 's': 'yes', 'obj': {}, 'arr': [],"
                      " 'f': false, 'zero': 0, 'empty': '', 'nul': null, 'real0': 0.0}");
    mv_user u = {.id = "u", .permissions = perms};
    const char *yes[] = {"t", "one", "s", "obj", "arr"};
    const char *no[] = {"f", "zero", "empty", "nul", "real0", "absent"};
    for (int i = 0; i < 5; i++)
        CHECK(mv_user_has_permission(&u, yes[i]));
    for (int i = 0; i < 6; i++)
        CHECK(!mv_user_has_permission(&u, no[i]));
    u.permissions = NULL;
    CHECK(!mv_user_has_permission(&u, "t"));
    CHECK(!mv_user_has_permission(NULL, "t"));
    json_decref(perms);
}

/* ---- isActionAllowed ------------------------------------------------------------------------ */

TEST(action_allowed_matrix_matches_the_reference) {
    mv_template *t = tpl(TEST_REQUEST);
    REQUIRE(t);
    json_t *m = J("{'fromUser': 'sender1', 'toUser': 'receiver1'}");
    mv_user s = user_named("sender1"), r = user_named("receiver1"), x = user_named("x");
    const mv_action_def *approved = mv_template_action(t, "approved");
    const mv_action_def *revoked = mv_template_action(t, "revoked");
    CHECK(mv_action_allowed(revoked, &s, m));
    CHECK(!mv_action_allowed(approved, &s, m));
    CHECK(mv_action_allowed(approved, &r, m));
    CHECK(!mv_action_allowed(revoked, &r, m));
    CHECK(!mv_action_allowed(approved, &x, m));
    CHECK(!mv_action_allowed(NULL, &r, m));
    json_decref(m);
    mv_template_release(t);
}

TEST(action_allowed_checks_permission_then_condition) {
    mv_template *t = tpl("{'templateCd': 'p', 'actions': ["
                         " {'actionCd': 'admin', 'name': 'A', 'variant': 'v', 'receiver': true,"
                         "  'permission': 'is.admin'},"
                         " {'actionCd': 'paid', 'name': 'P', 'variant': 'v', 'receiver': true,"
                         "  'condition': {'===': [{'var': 'isPaid'}, true]}}]}");
    REQUIRE(t);
    json_t *perms = J("{'is.admin': true}");
    mv_user r = user_named("r1");
    json_t *unpaid = J("{'toUser': 'r1', 'isPaid': false}"),
           *paid = J("{'toUser': 'r1', 'isPaid': true}");
    const mv_action_def *admin = mv_template_action(t, "admin"), *p = mv_template_action(t, "paid");
    CHECK(!mv_action_allowed(admin, &r, unpaid));
    r.permissions = perms;
    CHECK(mv_action_allowed(admin, &r, unpaid));
    CHECK(!mv_action_allowed(p, &r, unpaid));
    CHECK(mv_action_allowed(p, &r, paid));
    json_decref(perms);
    json_decref(unpaid);
    json_decref(paid);
    mv_template_release(t);
}

/* ---- filterActions -------------------------------------------------------------------------- */

TEST(filter_keeps_actions_of_the_usertype_in_order) {
    mv_template *t = tpl(TEST_REQUEST);
    REQUIRE(t);
    mv_user u = user_named("anyone");
    CHECK_CODES(t, MV_SENDER, &u, NULL, "revoked");
    CHECK_CODES(t, MV_RECEIVER, &u, NULL, "approved,rejected");
    /* filterActions does not check the relation to the message, only the flag. */
    CHECK_CODES(t, MV_RECEIVER, &u, "{'fromUser': 'a', 'toUser': 'b'}", "approved,rejected");
    CHECK_CODES(t, MV_RECEIVER, NULL, NULL, "approved,rejected");
    mv_template_release(t);
}

TEST(filter_output_is_exactly_the_interpolated_action_shape) {
    mv_template *t = tpl(TEST_REQUEST);
    REQUIRE(t);
    mv_user u = user_named("u");
    CHECK_FILTER(t, MV_SENDER, &u, NULL, "{'itemName': 'Widget'}",
                 "[{\"actionCd\":\"revoked\",\"isDefault\":true,\"name\":\"Revoke\","
                 "\"variant\":\"dark\"}]");
    CHECK_FILTER(t, MV_RECEIVER, &u, NULL, "{'itemName': 'Widget'}",
                 "[{\"actionCd\":\"approved\",\"isDefault\":true,\"name\":\"Approve Widget\","
                 "\"variant\":\"success\"},"
                 "{\"actionCd\":\"rejected\",\"name\":\"Reject\",\"variant\":\"danger\","
                 "\"confirmation\":{\"title\":\"Reject Widget\",\"message\":\"Are you sure about "
                 "Widget?\",\"notesLabel\":\"Reason for rejecting Widget\"}}]");
    mv_template_release(t);
}

TEST(filter_hides_actions_without_permission_or_with_false_condition) {
    mv_template *t = tpl("{'templateCd': 'p', 'actions': ["
                         " {'actionCd': 'admin', 'name': 'A', 'variant': 'v', 'receiver': true,"
                         "  'permission': 'is.admin'},"
                         " {'actionCd': 'paid', 'name': 'P', 'variant': 'v', 'receiver': true,"
                         "  'condition': {'===': [{'var': 'isPaid'}, true]}},"
                         " {'actionCd': 'plain', 'name': 'N', 'variant': 'v', 'receiver': true}]}");
    REQUIRE(t);
    json_t *perms = J("{'is.admin': true}");
    mv_user u = user_named("u");
    CHECK_CODES(t, MV_RECEIVER, &u, "{'isPaid': false}", "plain");
    CHECK_CODES(t, MV_RECEIVER, &u, NULL, "plain");
    CHECK_CODES(t, MV_RECEIVER, &u, "{'isPaid': true}", "paid,plain");
    u.permissions = perms;
    CHECK_CODES(t, MV_RECEIVER, &u, "{'isPaid': true}", "admin,paid,plain");
    CHECK_CODES(t, MV_SENDER, &u, "{'isPaid': true}", "");
    json_decref(perms);
    mv_template_release(t);
}

TEST(filter_confirmation_keeps_only_present_optional_keys) {
    mv_template *t = tpl("{'templateCd': 'c', 'actions': ["
                         " {'actionCd': 'a', 'name': 'A {{x}}', 'variant': 'v', 'sender': true,"
                         "  'isDefault': false,"
                         "  'confirmation': {'title': 'T {{x}}', 'message': 'M', 'notesLabel': '',"
                         "   'requireNotes': true, 'documents': false},"
                         "  'payload': {'label': '{{x}}', 'n': [1, {'k': null}]},"
                         "  'permission': null, 'condition': null, 'handler': null}]}");
    REQUIRE(t);
    CHECK_FILTER(t, MV_SENDER, NULL, NULL, "{'x': '<b>&'}",
                 "[{\"actionCd\":\"a\",\"isDefault\":false,\"name\":\"A <b>&\",\"variant\":\"v\","
                 "\"confirmation\":{\"title\":\"T <b>&\",\"message\":\"M\",\"requireNotes\":true,"
                 "\"documents\":false},\"payload\":{\"label\":\"{{x}}\",\"n\":[1,{\"k\":null}]}}]");
    mv_template_release(t);
}

TEST(filter_with_no_data_renders_missing_names_empty) {
    mv_template *t = tpl(TEST_REQUEST);
    REQUIRE(t);
    CHECK_FILTER(t, MV_RECEIVER, NULL, NULL, NULL,
                 "[{\"actionCd\":\"approved\",\"isDefault\":true,\"name\":\"Approve \","
                 "\"variant\":\"success\"},"
                 "{\"actionCd\":\"rejected\",\"name\":\"Reject\",\"variant\":\"danger\","
                 "\"confirmation\":{\"title\":\"Reject \",\"message\":\"Are you sure about ?\","
                 "\"notesLabel\":\"Reason for rejecting \"}}]");
    mv_template_release(t);
}

/* ---- content -------------------------------------------------------------------------------- */

TEST(content_renders_sender_and_receiver_texts) {
    mv_template *t = tpl(TEST_REQUEST);
    REQUIRE(t);
    CHECK_CONTENT(&t->sender_content, "{'itemName': 'Widget'}",
                  "{\"title\":\"Test Request\",\"short\":\"Request for Widget\","
                  "\"long\":\"You submitted a request for \\\"Widget\\\".\"}");
    CHECK_CONTENT(&t->receiver_content, "{'itemName': 'Widget', 'displayName': 'John'}",
                  "{\"title\":\"New Request\",\"short\":\"Request\","
                  "\"long\":\"\\\"John\\\" submitted a request for \\\"Widget\\\".\"}");
    CHECK_CONTENT(&t->sender_content, NULL,
                  "{\"title\":\"Test Request\",\"short\":\"Request for \","
                  "\"long\":\"You submitted a request for \\\"\\\".\"}");
    mv_template_release(t);
}

static char *render_title(const char *title, const char *data) {
    char text[512];
    snprintf(text, sizeof text,
             "{'templateCd': 'r', 'actions': [], 'senderContent': {'title': '%s'}}", title);
    mv_template *t = tpl(text);
    if (!t) return strdup("(rejected)");
    json_t *out = NULL;
    char *s = NULL;
    mv_err err;
    json_t *d = J(data);
    if (mv_content_render(&t->sender_content, d, &out, &err) == MV_OK)
        s = strdup(json_string_value(json_object_get(out, "title")));
    else
        s = strdup(err.message);
    json_decref(d);
    json_decref(out);
    mv_template_release(t);
    return s;
}

#define CHECK_TITLE(title, data, want)                                                             \
    do {                                                                                           \
        char *t_ = render_title((title), (data));                                                  \
        CHECK_STR(t_, want);                                                                       \
        free(t_);                                                                                  \
    } while (0)

TEST(content_is_not_html_escaped) {
    const char *markup = "{'x': '<img src=x onerror=alert(1)> & \\'quoted\\''}";
    CHECK_TITLE("{{x}}", markup, "<img src=x onerror=alert(1)> & \"quoted\"");
    CHECK_TITLE("{{{x}}}", markup, "<img src=x onerror=alert(1)> & \"quoted\"");
}

TEST(prototype_like_names_render_empty) {
    CHECK_TITLE("{{__proto__.polluted}}|{{constructor.name}}", "{'a': 1}", "|");
    CHECK_TITLE("{{toString}}", "{}", "");
    CHECK_TITLE("{{prototype.value}}", "{}", "");
}

TEST(missing_names_render_empty_and_values_coerce_as_javascript) {
    CHECK_TITLE("{{a.b.c}}", "{'a': {}}", "");
    CHECK_TITLE("before {{missing}} after", "{}", "before  after");
    CHECK_TITLE("{{n}}|{{b}}", "{'n': 3, 'b': true}", "3|true");
    CHECK_TITLE("{{list}}", "{'list': ['a', 'b']}", "a,b");
    CHECK_TITLE("{{x}}|{{y}}", "{'x': null}", "|");
    CHECK_TITLE("{{a.b.c}}", "{'a': {'b': {'c': 'deep'}}}", "deep");
}

TEST(malformed_content_is_rejected_at_load_not_at_render) {
    CHECK_TITLE("Broken {{name", "{}", "(rejected)");
}

TEST(booking_example_host_sees_accept_and_decline_as_the_readme_shows) {
    mv_template *t = NULL;
    mv_err err;
    CHECK_CODE(mv_template_load_file("examples/templates/booking-request.json", &t, &err), MV_OK,
               &err);
    REQUIRE(t);
    mv_user host = user_named("host-7");
    const char *open = "{'fromUser': 'guest-1', 'toUser': 'host-7',"
                       " 'payload': {'status': 'open', 'listing': 'Flat 3', 'guestName': 'Ana'}}";
    const char *data = "{'status': 'open', 'listing': 'Flat 3', 'guestName': 'Ana'}";
    CHECK_FILTER(t, MV_RECEIVER, &host, open, data,
                 "[{\"actionCd\":\"accept\",\"isDefault\":true,\"name\":\"Accept\","
                 "\"variant\":\"primary\",\"confirmation\":{\"title\":\"Accept Flat 3?\","
                 "\"message\":\"The guest is charged now.\"}},"
                 "{\"actionCd\":\"decline\",\"name\":\"Decline\",\"variant\":\"danger\","
                 "\"confirmation\":{\"title\":\"Decline Ana?\",\"message\":\"The deposit hold "
                 "is released.\",\"notesLabel\":\"Reason for declining Ana\","
                 "\"requireNotes\":false}}]");
    CHECK_CODES(t, MV_RECEIVER, &host, "{'payload': {'status': 'closed'}}", "decline");
    CHECK_CODES(t, MV_SENDER, &host, open, "withdraw");
    json_t *m = J(open);
    CHECK(mv_action_allowed(mv_template_action(t, "accept"), &host, m));
    CHECK(!mv_action_allowed(mv_template_action(t, "withdraw"), &host, m));
    json_decref(m);
    CHECK_STR(mv_template_ui(t, MV_RECEIVER), "booking-card");
    mv_template_release(t);
}

int main(void) {
    return RUN_TESTS(
        user_id_is_trimmed_and_empty_means_no_user, sender_and_receiver_compare_trimmed_ids,
        stored_null_does_not_match_a_user_called_null,
        empty_stored_id_does_not_match_an_empty_user_id, numeric_stored_id_matches_its_text,
        permission_follows_javascript_truthiness, action_allowed_matrix_matches_the_reference,
        action_allowed_checks_permission_then_condition,
        filter_keeps_actions_of_the_usertype_in_order,
        filter_output_is_exactly_the_interpolated_action_shape,
        filter_hides_actions_without_permission_or_with_false_condition,
        filter_confirmation_keeps_only_present_optional_keys,
        filter_with_no_data_renders_missing_names_empty, content_renders_sender_and_receiver_texts,
        content_is_not_html_escaped, prototype_like_names_render_empty,
        missing_names_render_empty_and_values_coerce_as_javascript,
        malformed_content_is_rejected_at_load_not_at_render,
        booking_example_host_sees_accept_and_decline_as_the_readme_shows);
}
