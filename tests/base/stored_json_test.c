/* stored_json_test.c — mv_json_write_stored: what the writer wrote is copied as it is (the fast
 * path is taken), and whatever the text, the bytes equal json_loads + mv_json_write (or the
 * fallback when it does not parse). Random documents, then random edits of their text. */
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "missive/base.h"
#include "test.h"

static unsigned rnd_state = 12345;
static unsigned rnd(void) {
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 16) & 0x7fff;
}

static json_t *random_string(void) {
    static const char *const pieces[] = {"a",   "Z",    " ",    "\"",   "\\", "/", "\n",
                                         "\t",  "\x01", "\x1f", "\x7f", "é",  "☃", "😀",
                                         "key", "0",    "\r",   "\b",   "\f"};
    char buf[64] = "";
    int n = (int)(rnd() % 6);
    for (int i = 0; i < n; i++)
        strcat(buf, pieces[rnd() % (sizeof pieces / sizeof pieces[0])]);
    return json_string(buf);
}

static json_t *random_value(int depth) {
    switch (rnd() % (depth > 4 ? 6 : 8)) {
    case 0: return json_null();
    case 1: return json_boolean(rnd() % 2);
    case 2:
        return json_integer((json_int_t)rnd() * (rnd() % 2 ? 1 : -1) * (rnd() % 3 ? 1 : 1000003));
    case 3: {
        static const double reals[] = {0.1, -0.0, 1e300, 2.5, 1e-7, 123456789.125, -3.0, 5e-324};
        return json_real(reals[rnd() % 8]);
    }
    case 4:
    case 5: return random_string();
    case 6: {
        json_t *a = json_array();
        int n = (int)(rnd() % 5);
        for (int i = 0; i < n; i++)
            json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        int n = (int)(rnd() % 5);
        for (int i = 0; i < n; i++) {
            json_t *k = random_string();
            json_object_set_new(o, json_string_value(k), random_value(depth + 1));
            json_decref(k);
        }
        return o;
    }
    }
}

/* The slow path's bytes: what the document path writes for this stored text. */
static char *expected(const char *text, const char *fallback) {
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    mv_strbuf b = {0};
    if (!v || !mv_json_write(&b, v)) mv_strbuf_adds(&b, fallback);
    json_decref(v);
    return mv_strbuf_take(&b, NULL);
}

static bool same_as_round_trip(const char *text) {
    char *want = expected(text, "{}");
    mv_strbuf b = {0};
    bool ok = mv_json_write_stored(&b, text, "{}");
    char *got = mv_strbuf_take(&b, NULL);
    bool same = ok && want && got && strcmp(want, got) == 0;
    if (!same) fprintf(stderr, "text %s\nwant %s\ngot  %s\n", text, want, got);
    free(want);
    free(got);
    return same;
}

TEST(what_the_writer_wrote_is_copied_as_it_is) {
    int fast = 0;
    for (int i = 0; i < 3000; i++) {
        json_t *v = random_value(0);
        char *text = mv_json_compact(v);
        REQUIRE(text);
        fast += mv_json_stored_is_written(text, strlen(text));
        CHECK(same_as_round_trip(text));
        free(text);
        json_decref(v);
    }
    CHECK_INT(fast, 3000); /* every one on the fast path */
}

TEST(any_other_text_gives_the_bytes_of_the_round_trip) {
    static const char *const fixed[] = {"",
                                        " {}",
                                        "{} ",
                                        "{\"a\":1,\"a\":2}",
                                        "[1,]",
                                        "[01]",
                                        "-0",
                                        "1e5",
                                        "1E5",
                                        "1.50",
                                        "0.1",
                                        "-",
                                        "1.",
                                        ".5",
                                        "+1",
                                        "12345678901234567890",
                                        "123456789012345678",
                                        "\"\\u00e9\"",
                                        "\"\\u001F\"",
                                        "\"\\u001f\"",
                                        "\"\\u0000\"",
                                        "\"\\/\"",
                                        "\"\\n\"",
                                        "\"\\u000A\"",
                                        "\"\x01\"",
                                        "\"\xff\"",
                                        "\"\xed\xa0\x80\"",
                                        "nul",
                                        "true",
                                        "[true,false,null]",
                                        "{\"\":\"\"}",
                                        "1e400",
                                        "tru",
                                        "[[[[[[]]]]]]",
                                        "{\"a\"}",
                                        "{\"a\":}",
                                        "[\"a\"\"b\"]",
                                        "1.0e+5",
                                        "2.5e-07",
                                        "1e-07",
                                        "5e-324"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        CHECK(same_as_round_trip(fixed[i]));
    /* deep and wide: past the scan's limits, still the same bytes */
    char deep[300];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[200] = '\0';
    CHECK(same_as_round_trip(deep));
    CHECK(!mv_json_stored_is_written(deep, 200));
    mv_strbuf wide = {0};
    mv_strbuf_adds(&wide, "{");
    for (int i = 0; i < 100; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s\"k%d\":%d", i ? "," : "", i, i);
        mv_strbuf_adds(&wide, k);
    }
    mv_strbuf_adds(&wide, "}");
    CHECK(same_as_round_trip(wide.data));
    free(wide.data);
    /* random edits of written text: a byte replaced, dropped or doubled */
    static const char edits[] = " \t\"\\/{}[],:0123456789.eE-+tfnu\x01\xc3\xa9";
    for (int i = 0; i < 4000; i++) {
        json_t *v = random_value(0);
        char *text = mv_json_compact(v);
        json_decref(v);
        REQUIRE(text);
        size_t n = strlen(text), at = rnd() % (n + 1);
        char *e = malloc(n + 2);
        REQUIRE(e);
        switch (rnd() % 3) {
        case 0:
            memcpy(e, text, n + 1);
            if (at < n) e[at] = edits[rnd() % (sizeof edits - 1)];
            break;
        case 1:
            memcpy(e, text, at);
            memcpy(e + at, text + at + (at < n), n - at + (at == n));
            break;
        default:
            memcpy(e, text, at);
            e[at] = at < n ? text[at] : ' ';
            memcpy(e + at + 1, text + at, n - at + 1);
        }
        CHECK(same_as_round_trip(e));
        free(e);
        free(text);
    }
}

TEST(a_null_text_writes_the_fallback) {
    mv_strbuf b = {0};
    CHECK(mv_json_write_stored(&b, NULL, "[]"));
    CHECK_STR(b.data, "[]");
    free(b.data);
}

int main(void) {
    return RUN_TESTS(what_the_writer_wrote_is_copied_as_it_is,
                     any_other_text_gives_the_bytes_of_the_round_trip,
                     a_null_text_writes_the_fallback);
}
