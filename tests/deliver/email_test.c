/* email_test.c — who gets an email and with which body (SEMANTICS §1.10), as a table. */
#include "missive/deliver.h"
#include "test.h"

TEST(eligibility_follows_recipient_title_and_exclusions) {
    json_t *ex = json_pack("[s, s, i]", "  Welcome ", "Password reset", 7);
    struct {
        const char *to, *title;
        bool expect;
    } cases[] = {
        {"u1", "Ana wants your flat", true},
        {"u1", "  padded title  ", true},
        {NULL, "Title", false},
        {"", "Title", false},
        {"   ", "Title", false},
        {"u1", NULL, false},
        {"u1", "", false},
        {"u1", " \t\n ", false},
        {"u1", "welcome", false},
        {"u1", "  WELCOME\t", false},
        {"u1", "Welcome!", true},
        {"u1", "password RESET", false},
        {"u1", "7", true}, /* non-string exclusions are ignored */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool got = mv_email_should_send(cases[i].to, cases[i].title, ex);
        char name[128];
        snprintf(name, sizeof name, "case %zu (%s, %s)", i, cases[i].to ? cases[i].to : "NULL",
                 cases[i].title ? cases[i].title : "NULL");
        if (got != cases[i].expect) test_fail_(__FILE__, __LINE__, name);
    }
    CHECK(mv_email_should_send("u1", "welcome", NULL));
    json_decref(ex);
}

TEST(body_is_the_longer_text_and_a_tie_goes_to_short) {
    const char *l = "a longer text", *s = "short";
    CHECK(mv_email_body(l, s) == l);
    CHECK(mv_email_body(s, l) == l);
    const char *a = "same1", *b = "same2";
    CHECK(mv_email_body(a, b) == b);
    CHECK_STR(mv_email_body(NULL, NULL), "");
    CHECK(mv_email_body(NULL, s) == s);
    CHECK(mv_email_body(l, NULL) == l);
    CHECK(mv_email_body("", "") != NULL);
    /* length in UTF-16 units: "é" (2 bytes) is 1 unit, "😀" (4 bytes) is 2 units */
    const char *e3 = "ééé", *x4 = "xxxx";
    CHECK(mv_email_body(e3, x4) == x4);
    const char *emoji = "😀", *two = "ab";
    CHECK(mv_email_body(emoji, two) == two); /* 2 == 2 → short */
    const char *three = "abc";
    CHECK(mv_email_body(three, emoji) == three);
}

int main(void) {
    return RUN_TESTS(eligibility_follows_recipient_title_and_exclusions,
                     body_is_the_longer_text_and_a_tie_goes_to_short);
}
