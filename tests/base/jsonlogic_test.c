/* jsonlogic_test.c — the shared JsonLogic conformance suite (each case counted), plus the edges
 * the suite leaves out: compile errors, the depth bound, JS coercions, reentrancy and the CLI. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>

#include "base/js_value.h"
#include "missive/base.h"
#include "missive/jsonlogic.h"
#include "test.h"

/* JSON equality where 1 == 1.0. */
static bool json_same(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v) {
            if (!json_same(v, json_object_get(b, k))) return false;
        }
        return true;
    }
    return json_equal(a, b);
}

static json_t *parse(const char *s) {
    json_t *v = NULL;
    mv_json_parse(s, strlen(s), &v, NULL);
    return v;
}

/* Applies rule to data (both JSON text) and checks the result equals expected (JSON text). */
#define CHECK_LOGIC(rule, data, expected)                                                          \
    do {                                                                                           \
        json_t *r_ = parse(rule), *d_ = parse(data), *e_ = parse(expected), *got_ = NULL;          \
        mv_err err_ = {0};                                                                         \
        REQUIRE(r_ &&d_ &&e_);                                                                     \
        CHECK_CODE(mv_logic_apply(r_, d_, &got_, &err_), MV_OK, &err_);                            \
        char *g_ = got_ ? mv_json_compact(got_) : NULL;                                            \
        if (!got_ || !json_same(got_, e_)) {                                                       \
            char m_[600];                                                                          \
            snprintf(m_, sizeof m_, "%s over %s gave %s, expected %s", rule, data,                 \
                     g_ ? g_ : "(nothing)", expected);                                             \
            test_fail_(__FILE__, __LINE__, m_);                                                    \
        }                                                                                          \
        free(g_);                                                                                  \
        json_decref(got_);                                                                         \
        json_decref(r_);                                                                           \
        json_decref(d_);                                                                           \
        json_decref(e_);                                                                           \
    } while (0)

/* Compiles rule (JSON text), expecting MV_INVALID_ARGUMENT with message containing `part`. */
#define CHECK_COMPILE_FAILS(rule, part)                                                            \
    do {                                                                                           \
        json_t *r_ = parse(rule);                                                                  \
        REQUIRE(r_);                                                                               \
        mv_logic *l_ = NULL;                                                                       \
        mv_err err_ = {0};                                                                         \
        CHECK_CODE(mv_logic_compile(r_, &l_, &err_), MV_INVALID_ARGUMENT, &err_);                  \
        CHECK(l_ == NULL);                                                                         \
        if (!strstr(err_.message, part)) {                                                         \
            char m_[800];                                                                          \
            snprintf(m_, sizeof m_, "error \"%s\" does not mention \"%s\"", err_.message, part);   \
            test_fail_(__FILE__, __LINE__, m_);                                                    \
        }                                                                                          \
        mv_logic_free(l_);                                                                         \
        json_decref(r_);                                                                           \
    } while (0)

/* ---- the shared conformance suite --------------------------------------------------------- */

static json_t *load_spec(char *path, size_t size) {
    const char *env = getenv("MISSIVE_SPEC_DIR");
    snprintf(path, size, "%s/jsonlogic/tests.json", env && *env ? env : "../shared/spec");
    json_t *v = NULL;
    if (access(path, R_OK) == 0 && mv_json_load_file(path, &v, NULL) == MV_OK) return v;
    return NULL;
}

TEST(every_case_of_the_shared_jsonlogic_suite_passes) {
    char path[1024];
    json_t *suite = load_spec(path, sizeof path);
    if (!suite) {
        printf("SKIP jsonlogic spec suite: ../shared/spec not found\n");
        return;
    }
    REQUIRE(json_is_array(suite));
    size_t i, cases = 0;
    json_t *t;
    json_array_foreach(suite, i, t) {
        if (json_is_string(t)) continue; /* a section header */
        cases++;
        json_t *rule = json_array_get(t, 0), *data = json_array_get(t, 1);
        json_t *expected = json_array_get(t, 2), *got = NULL;
        mv_err err = {0};
        mv_code rc = mv_logic_apply(rule, data, &got, &err);
        bool ok = json_array_size(t) == 3 && rc == MV_OK && got && json_same(got, expected);
        char *r = mv_json_compact(rule), *d = mv_json_compact(data);
        char *e = mv_json_compact(expected), *g = got ? mv_json_compact(got) : NULL;
        char name[700], detail[1200];
        snprintf(name, sizeof name, "case %zu %s over %s", i, r ? r : "?", d ? d : "?");
        snprintf(detail, sizeof detail, "expected %s, got %s", e ? e : "?",
                 rc == MV_OK ? (g ? g : "?") : err.message);
        test_case(ok, "jsonlogic spec", name, ok ? NULL : detail);
        free(r);
        free(d);
        free(e);
        free(g);
        json_decref(got);
    }
    CHECK(cases > 250); /* the suite really was read */
    json_decref(suite);
}

/* ---- compile errors and the depth bound -------------------------------------------------- */

TEST(unknown_operator_is_rejected_at_compile_time_naming_it) {
    CHECK_COMPILE_FAILS("{\"foo\": [1, 2]}", "unknown operator \"foo\"");
    /* however deep it sits, and even in a branch that would never run */
    CHECK_COMPILE_FAILS("{\"if\": [true, 1, {\"cat\": [{\"bogus\": []}]}]}",
                        "unknown operator \"bogus\"");
    CHECK_COMPILE_FAILS("[1, {\"log\": \"x\"}]", "unknown operator \"log\"");
    json_t *got = (json_t *)1;
    mv_err err = {0};
    json_t *rule = parse("{\"nope\": 1}");
    CHECK_CODE(mv_logic_apply(rule, NULL, &got, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(got == NULL);
    json_decref(rule);
}

TEST(wrong_argument_counts_are_compile_errors) {
    CHECK_COMPILE_FAILS("{\"==\": [1]}", "operator \"==\" takes 2 arguments, got 1");
    CHECK_COMPILE_FAILS("{\">\": [1, 2, 3]}", "operator \">\" takes 2 arguments, got 3");
    CHECK_COMPILE_FAILS("{\"<\": [1, 2, 3, 4]}", "takes 2 to 3 arguments, got 4");
    CHECK_COMPILE_FAILS("{\"substr\": []}", "operator \"substr\" takes 1 to 3 arguments");
    CHECK_COMPILE_FAILS("{\"map\": [[1]]}", "operator \"map\" takes 2 arguments, got 1");
    CHECK_COMPILE_FAILS("{\"reduce\": [[1]]}", "operator \"reduce\" takes 2 to 3 arguments");
    CHECK_COMPILE_FAILS("{\"var\": [\"a\", 1, 2]}", "operator \"var\" takes 0 to 2 arguments");
    CHECK_COMPILE_FAILS("{\"and\": []}", "operator \"and\" takes at least 1 argument, got 0");
    CHECK_COMPILE_FAILS("{\"*\": []}", "operator \"*\" takes at least 1 argument");
    CHECK_COMPILE_FAILS("{\"!\": [1, 2]}", "operator \"!\" takes 1 argument, got 2");
    CHECK_COMPILE_FAILS("{\"missing_some\": [1]}", "\"missing_some\" takes 2 arguments");
}

/* {"!": {"!": ... true}} with `levels` operators. */
static json_t *nested_not(int levels) {
    json_t *v = json_true();
    for (int i = 0; i < levels; i++)
        v = json_pack("{s:o}", "!", v);
    return v;
}

TEST(nesting_deeper_than_the_depth_bound_is_an_error_not_a_crash) {
    json_t *ok = nested_not(MV_LOGIC_MAX_DEPTH), *deep = nested_not(MV_LOGIC_MAX_DEPTH + 1);
    json_t *got = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_logic_apply(ok, NULL, &got, &err), MV_OK, &err);
    CHECK(json_is_true(got)); /* an even number of negations */
    json_decref(got);
    got = NULL;
    CHECK_CODE(mv_logic_apply(deep, NULL, &got, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "deeper than 64") != NULL);
    CHECK(got == NULL);
    json_decref(ok);
    json_decref(deep);

    /* arrays count as levels too, and a pathological depth is still just an error */
    json_t *arr = json_integer(1);
    for (int i = 0; i < 5000; i++)
        arr = json_pack("[o]", arr);
    mv_logic *l = NULL;
    CHECK_CODE(mv_logic_compile(arr, &l, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(l == NULL);
    json_decref(arr);
}

/* ---- operators beyond the suite ---------------------------------------------------------- */

TEST(var_reads_dotted_paths_indexes_and_defaults) {
    const char *data = "{\"payload\": {\"status\": \"open\", \"items\": [{\"sku\": \"a\"}, "
                       "{\"sku\": \"b\"}], \"none\": null, \"zero\": 0}}";
    CHECK_LOGIC("{\"var\": \"payload.status\"}", data, "\"open\"");
    CHECK_LOGIC("{\"var\": \"payload.items.1.sku\"}", data, "\"b\"");
    CHECK_LOGIC("{\"var\": \"payload.items.2.sku\"}", data, "null");
    CHECK_LOGIC("{\"var\": [\"payload.missing.deeper\", \"fallback\"]}", data, "\"fallback\"");
    CHECK_LOGIC("{\"var\": [\"payload.items.01\", \"no\"]}", data, "\"no\"");
    CHECK_LOGIC("{\"var\": [\"payload.status.x\", 7]}", data, "7");
    /* what JS gives for arrays and strings: "length" and character indexes */
    CHECK_LOGIC("{\"var\": \"payload.items.length\"}", data, "2");
    CHECK_LOGIC("{\"var\": \"payload.status.length\"}", data, "4");
    CHECK_LOGIC("{\"var\": \"payload.status.0\"}", data, "\"o\"");
    CHECK_LOGIC("{\"var\": \"2\"}", "\"aéb\"", "\"b\"");
    /* a present null or 0 is returned as is; the default is only for missing paths */
    CHECK_LOGIC("{\"var\": [\"payload.none\", 5]}", data, "null");
    CHECK_LOGIC("{\"var\": [\"payload.zero\", 5]}", data, "0");
    CHECK_LOGIC("{\"var\": [\"payload.none.x\", 5]}", data, "5");
    CHECK_LOGIC("{\"var\": \"\"}", "[1, 2]", "[1, 2]");
    CHECK_LOGIC("{\"var\": [\"a\", {\"cat\": [\"x\", \"y\"]}]}", "null", "\"xy\"");
    CHECK_LOGIC("{\"missing\": [\"payload.status\", \"payload.nope\", \"payload.none\"]}", data,
                "[\"payload.nope\", \"payload.none\"]");
}

TEST(the_template_condition_example_tests_true_only_for_open_messages) {
    json_t *rule = parse("{\"==\": [{\"var\": \"payload.status\"}, \"open\"]}");
    json_t *open = parse("{\"payload\": {\"status\": \"open\"}}");
    json_t *closed = parse("{\"payload\": {\"status\": \"closed\"}}");
    mv_logic *l = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_logic_compile(rule, &l, &err), MV_OK, &err);
    json_decref(rule); /* the compiled form does not borrow the rule */
    REQUIRE(l);
    CHECK(mv_logic_test(l, open, &err));
    CHECK(!mv_logic_test(l, closed, &err));
    CHECK(!mv_logic_test(l, NULL, &err));
    mv_logic_free(l);
    mv_logic_free(NULL);
    json_decref(open);
    json_decref(closed);
}

TEST(truthiness_follows_javascript_except_empty_arrays) {
    const char *falsy[] = {"null", "false", "0", "0.0", "\"\"", "[]"};
    const char *truthy[] = {"true",  "1",   "-1",   "0.5", "\"0\"",     "\"false\"",
                            "\" \"", "[0]", "[[]]", "{}",  "{\"a\": 1}"};
    for (size_t i = 0; i < sizeof falsy / sizeof *falsy; i++) {
        json_t *v = parse(falsy[i]);
        CHECK(v && !mv_logic_truthy(v));
        json_decref(v);
    }
    for (size_t i = 0; i < sizeof truthy / sizeof *truthy; i++) {
        json_t *v = parse(truthy[i]);
        CHECK(v && mv_logic_truthy(v));
        json_decref(v);
    }
    CHECK(!mv_logic_truthy(NULL));
    CHECK_LOGIC("{\"!!\": [{\"var\": \"a\"}]}", "{\"a\": {}}", "true");
}

TEST(loose_equality_coerces_like_javascript) {
    CHECK_LOGIC("{\"==\": [\"1\", 1]}", "null", "true");
    CHECK_LOGIC("{\"==\": [null, 0]}", "null", "false");
    CHECK_LOGIC("{\"==\": [null, null]}", "null", "true");
    CHECK_LOGIC("{\"==\": [{\"var\": \"nope\"}, null]}", "{}", "true");
    CHECK_LOGIC("{\"==\": [false, 0]}", "null", "true");
    CHECK_LOGIC("{\"==\": [false, \"\"]}", "null", "true");
    CHECK_LOGIC("{\"==\": [true, \"1\"]}", "null", "true");
    CHECK_LOGIC("{\"==\": [true, \"true\"]}", "null", "false");
    CHECK_LOGIC("{\"==\": [\" 12 \", 12]}", "null", "true");
    CHECK_LOGIC("{\"==\": [\"0x10\", 16]}", "null", "true");
    CHECK_LOGIC("{\"==\": [\"1e3\", 1000]}", "null", "true");
    CHECK_LOGIC("{\"==\": [\"abc\", 0]}", "null", "false");
    CHECK_LOGIC("{\"==\": [[1], 1]}", "null", "true");
    CHECK_LOGIC("{\"==\": [[1, 2], \"1,2\"]}", "null", "true");
    CHECK_LOGIC("{\"==\": [[], false]}", "null", "true");
    CHECK_LOGIC("{\"==\": [[1], [1]]}", "null", "false"); /* two distinct arrays */
    CHECK_LOGIC("{\"==\": [{\"var\": \"a\"}, {\"var\": \"a\"}]}", "{\"a\": [1]}", "true");
    CHECK_LOGIC("{\"==\": [1, 1.0]}", "null", "true");
    CHECK_LOGIC("{\"===\": [1, 1.0]}", "null", "true");
    CHECK_LOGIC("{\"===\": [null, null]}", "null", "true");
    CHECK_LOGIC("{\"!==\": [\"a\", \"a\"]}", "null", "false");
    CHECK_LOGIC("{\"!=\": [null, false]}", "null", "true");
}

TEST(comparisons_coerce_and_support_between) {
    CHECK_LOGIC("{\"<\": [\"10\", \"9\"]}", "null", "true"); /* two strings: lexicographic */
    CHECK_LOGIC("{\"<\": [\"10\", 9]}", "null", "false");
    CHECK_LOGIC("{\"<\": [null, 1]}", "null", "true");
    CHECK_LOGIC("{\"<\": [\"a\", 1]}", "null", "false"); /* NaN */
    CHECK_LOGIC("{\">=\": [\"a\", 1]}", "null", "false");
    CHECK_LOGIC("{\"<=\": [1, 1, 1]}", "null", "true");
    CHECK_LOGIC("{\"<\": [1, 2, 2]}", "null", "false");
    CHECK_LOGIC("{\"<=\": [0, {\"var\": \"t\"}, 10]}", "{\"t\": 10}", "true");
    CHECK_LOGIC("{\">\": [\"b\", \"a\"]}", "null", "true");
}

TEST(arithmetic_coerces_strings_and_prints_numbers_like_javascript) {
    CHECK_LOGIC("{\"+\": \"3.5\"}", "null", "3.5");
    CHECK_LOGIC("{\"+\": [\"12px\", 1]}", "null", "13"); /* + uses parseFloat */
    CHECK_LOGIC("{\"-\": \"4\"}", "null", "-4");
    CHECK_LOGIC("{\"-\": [\"12px\", 1]}", "null", "null"); /* NaN has no JSON form */
    CHECK_LOGIC("{\"/\": [1, 0]}", "null", "null");
    CHECK_LOGIC("{\"%\": [-7, 3]}", "null", "-1");
    CHECK_LOGIC("{\"*\": [\"2\", \"2.5\"]}", "null", "5");
    CHECK_LOGIC("{\"max\": [1, \"7\", 3]}", "null", "7");
    CHECK_LOGIC("{\"min\": [1, \"x\"]}", "null", "null");
    CHECK_LOGIC("{\"+\": []}", "null", "0");
    CHECK_LOGIC("{\"cat\": [1.0, \"|\", 0.5, \"|\", {\"+\": [0.1, 0.2]}]}", "null",
                "\"1|0.5|0.30000000000000004\"");
    CHECK_LOGIC("{\"cat\": [1e21, \"|\", 1e-7, \"|\", 123456789012, \"|\", -0.0]}", "null",
                "\"1e+21|1e-7|123456789012|0\"");
    CHECK_LOGIC("{\"cat\": [null, true, [1, [2, null]], {\"a\": 1, \"b\": 2}]}", "null",
                "\"true1,2,[object Object]\"");
    char buf[32];
    mv_js_format_number(0.000001, buf);
    CHECK_STR(buf, "0.000001");
    mv_js_format_number(-1.5e300, buf);
    CHECK_STR(buf, "-1.5e+300");
    mv_js_format_number(1e20, buf);
    CHECK_STR(buf, "100000000000000000000");
    mv_js_format_number(NAN, buf);
    CHECK_STR(buf, "NaN");
    /* an integral result is a JSON integer, so it prints as "3" not "3.0" */
    json_t *r = parse("{\"+\": [1.5, 1.5]}"), *got = NULL;
    mv_logic_apply(r, NULL, &got, NULL);
    CHECK(json_is_integer(got));
    json_decref(got);
    json_decref(r);
}

TEST(strings_operators_count_characters_not_bytes) {
    CHECK_LOGIC("{\"substr\": [\"héllo wörld\", -5]}", "null", "\"wörld\"");
    CHECK_LOGIC("{\"substr\": [\"héllo\", 1, 3]}", "null", "\"éll\"");
    CHECK_LOGIC("{\"substr\": [\"héllo\", 1, -1]}", "null", "\"éll\"");
    CHECK_LOGIC("{\"substr\": [\"abc\", 10]}", "null", "\"\"");
    CHECK_LOGIC("{\"substr\": [\"abc\", -10, 2]}", "null", "\"ab\"");
    CHECK_LOGIC("{\"substr\": [12345, 1, 2]}", "null", "\"23\"");
    CHECK_LOGIC("{\"in\": [\"ö\", \"wörld\"]}", "null", "true");
    CHECK_LOGIC("{\"in\": [1, \"a1\"]}", "null", "true");
    CHECK_LOGIC("{\"in\": [\"1\", [1, 2]]}", "null", "false"); /* membership is strict */
    CHECK_LOGIC("{\"in\": [\"a\", 5]}", "null", "false");
}

TEST(array_operators_scope_data_to_each_element) {
    const char *data = "{\"orders\": [{\"qty\": 2, \"price\": 5}, {\"qty\": 1, \"price\": 7}],"
                       " \"min\": 1}";
    CHECK_LOGIC("{\"map\": [{\"var\": \"orders\"}, {\"*\": [{\"var\": \"qty\"}, "
                "{\"var\": \"price\"}]}]}",
                data, "[10, 7]");
    CHECK_LOGIC("{\"reduce\": [{\"var\": \"orders\"}, {\"+\": [{\"var\": \"accumulator\"}, "
                "{\"*\": [{\"var\": \"current.qty\"}, {\"var\": \"current.price\"}]}]}, 0]}",
                data, "17");
    CHECK_LOGIC("{\"reduce\": [[1, 2], {\"var\": \"current\"}]}", "null", "2");
    CHECK_LOGIC("{\"reduce\": [\"nope\", {\"var\": \"current\"}, 4]}", "null", "4");
    /* inside the scope the outer data is out of reach: "min" is read from the element */
    CHECK_LOGIC("{\"filter\": [{\"var\": \"orders\"}, {\">\": [{\"var\": \"qty\"}, "
                "{\"var\": [\"min\", 1]}]}]}",
                data, "[{\"qty\": 2, \"price\": 5}]");
    CHECK_LOGIC("{\"some\": [[1, 2, 3], {\">\": [{\"var\": \"\"}, 2]}]}", "null", "true");
    CHECK_LOGIC("{\"all\": [\"abc\", true]}", "null", "false");
    CHECK_LOGIC("{\"none\": [null, true]}", "null", "true");
    CHECK_LOGIC("{\"map\": [[[1, 2], [3]], {\"merge\": [{\"var\": \"\"}, 0]}]}", "null",
                "[[1, 2, 0], [3, 0]]");
    CHECK_LOGIC("{\"missing_some\": [1, [\"a\", \"b\"]]}", "{\"a\": \"\"}", "[\"a\", \"b\"]");
}

TEST(and_or_return_the_deciding_value_and_if_chains_else_ifs) {
    CHECK_LOGIC("{\"or\": [1, {\"var\": \"x\"}]}", "null", "1");
    CHECK_LOGIC("{\"and\": [0, {\"var\": \"x\"}]}", "null", "0");
    CHECK_LOGIC("{\"and\": [1, \"\", 2]}", "null", "\"\"");
    CHECK_LOGIC("{\"or\": [0, \"\", []]}", "null", "[]");
    CHECK_LOGIC("{\"?:\": [false, 1, false, 2, 3]}", "null", "3");
    CHECK_LOGIC("{\"if\": [{\"missing\": [\"a\"]}, \"need a\", {\"var\": \"a\"}]}", "{\"a\": 5}",
                "5");
}

TEST(literals_pass_through_and_results_never_alias_the_rule) {
    CHECK_LOGIC("{}", "null", "{}");
    CHECK_LOGIC("{\"a\": 1, \"b\": {\"var\": \"x\"}}", "null",
                "{\"a\": 1, \"b\": {\"var\": \"x\"}}");
    CHECK_LOGIC("[[{\"var\": \"x\"}], {\"+\": [1, 1]}]", "{\"x\": 9}", "[[9], 2]");
    json_t *rule = parse("{\"if\": [true, [1, 2], 0]}"), *got = NULL;
    mv_logic *l = NULL;
    REQUIRE(mv_logic_compile(rule, &l, NULL) == MV_OK);
    REQUIRE(mv_logic_eval(l, NULL, &got, NULL) == MV_OK);
    json_array_append_new(got, json_integer(3)); /* the caller owns and may change the result */
    json_decref(got);
    REQUIRE(mv_logic_eval(l, NULL, &got, NULL) == MV_OK);
    CHECK_INT(json_array_size(got), 2);
    json_decref(got);
    mv_logic_free(l);
    json_decref(rule);
}

/* ---- reentrancy -------------------------------------------------------------------------- */

typedef struct {
    const mv_logic *logic;
    int id, wrong;
} worker;

static void *evaluate_many(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 500; i++) {
        json_t *data = json_pack("{s:[i,i,i]}", "n", w->id, i, 1), *got = NULL;
        if (mv_logic_eval(w->logic, data, &got, NULL) != MV_OK ||
            json_integer_value(got) != w->id + i + 1)
            w->wrong++;
        json_decref(got);
        json_decref(data);
    }
    return NULL;
}

TEST(one_compiled_rule_evaluates_concurrently_from_several_threads) {
    json_t *rule = parse("{\"reduce\": [{\"var\": \"n\"}, {\"+\": [{\"var\": \"current\"}, "
                         "{\"var\": \"accumulator\"}]}, {\"cat\": [\"\", 0]}]}");
    mv_logic *l = NULL;
    REQUIRE(mv_logic_compile(rule, &l, NULL) == MV_OK);
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){l, i * 1000, 0};
        pthread_create(&t[i], NULL, evaluate_many, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(w[i].wrong, 0);
    }
    mv_logic_free(l);
    json_decref(rule);
}

/* ---- the CLI ----------------------------------------------------------------------------- */

/* Runs `build/missive logic ARGS` (with stderr folded in) and returns its exit status. */
static int run_cli(const char *args, char *out, size_t size) {
    const char *build = getenv("BUILD");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/missive logic %s 2>&1", build && *build ? build : "build", args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(cli_logic_prints_the_result_as_compact_json) {
    char out[512];
    CHECK_INT(run_cli("--rule '{\"==\": [{\"var\": \"payload.status\"}, \"open\"]}' "
                      "--data '{\"payload\": {\"status\": \"open\"}}'",
                      out, sizeof out),
              0);
    CHECK_STR(out, "true\n");
    CHECK_INT(run_cli("--rule='{\"map\": [{\"var\": \"\"}, {\"*\": [{\"var\": \"\"}, 2]}]}' "
                      "--data='[1, 2.5]'",
                      out, sizeof out),
              0);
    CHECK_STR(out, "[2,5]\n");
    CHECK_INT(run_cli("--rule '{\"cat\": [\"a\", {\"var\": \"x\"}]}'", out, sizeof out), 0);
    CHECK_STR(out, "\"a\"\n"); /* a missing variable is null, and null joins as "" */
}

TEST(cli_logic_exits_1_on_an_unknown_operator_or_bad_json) {
    char out[512];
    CHECK_INT(run_cli("--rule '{\"frobnicate\": [1]}'", out, sizeof out), 1);
    CHECK(strstr(out, "unknown operator \"frobnicate\"") != NULL);
    CHECK_INT(run_cli("--rule '{\"==\": [1'", out, sizeof out), 1);
    CHECK(strstr(out, "invalid JSON") != NULL);
    CHECK_INT(run_cli("--rule 1 --data '{'", out, sizeof out), 1);
    CHECK(strstr(out, "--data") != NULL);
    CHECK_INT(run_cli("", out, sizeof out), 2);
    CHECK(strstr(out, "usage") != NULL);
}

/* 30,000 elements of ten characters, as a payload an attacker can send. */
static json_t *big_items(size_t n) {
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, json_string("0123456789"));
    return json_pack("{s:o}", "items", items);
}

TEST(a_reduce_that_concatenates_a_large_payload_stops_at_the_byte_bound_quickly) {
    json_t *data = big_items(30000);
    json_t *rule = json_loads("{\"reduce\": [{\"var\": \"items\"},"
                              " {\"cat\": [{\"var\": \"accumulator\"}, {\"var\": \"current\"}]},"
                              " \"\"]}",
                              0, NULL);
    REQUIRE(rule);
    mv_logic *logic = NULL;
    mv_err err = {0};
    REQUIRE(mv_logic_compile(rule, &logic, &err) == MV_OK);
    int64_t t0 = mv_now_ms();
    json_t *r = NULL;
    CHECK_CODE(mv_logic_eval(logic, data, &r, &err), MV_PAYLOAD_TOO_LARGE, &err);
    CHECK(r == NULL);
    CHECK(strstr(err.message, "bytes") != NULL);
    CHECK(!mv_logic_test(logic, data, &err)); /* a condition that stops is false */
    CHECK(mv_now_ms() - t0 < 2000);
    mv_logic_free(logic);
    json_decref(rule);
    json_decref(data);
}

TEST(a_map_over_more_than_the_step_bound_stops_and_a_modest_one_runs) {
    json_t *rule = json_loads("{\"some\": [{\"map\": [{\"var\": \"items\"}, {\"+\": [1, 1]}]},"
                              " {\"==\": [{\"var\": \"\"}, 3]}]}",
                              0, NULL);
    mv_logic *logic = NULL;
    mv_err err = {0};
    REQUIRE(mv_logic_compile(rule, &logic, &err) == MV_OK);
    json_t *big = big_items(MV_LOGIC_MAX_STEPS / 3), *modest = big_items(30000);
    json_t *r = NULL;
    CHECK_CODE(mv_logic_eval(logic, big, &r, &err), MV_PAYLOAD_TOO_LARGE, &err);
    CHECK(strstr(err.message, "steps") != NULL);
    CHECK_CODE(mv_logic_eval(logic, modest, &r, &err), MV_OK, &err);
    CHECK(json_is_false(r)); /* 30,000 twos, none is 3 */
    json_decref(r);
    mv_logic_free(logic);
    json_decref(rule);
    json_decref(big);
    json_decref(modest);
}

int main(void) {
    return RUN_TESTS(a_reduce_that_concatenates_a_large_payload_stops_at_the_byte_bound_quickly,
                     a_map_over_more_than_the_step_bound_stops_and_a_modest_one_runs,
                     every_case_of_the_shared_jsonlogic_suite_passes,
                     unknown_operator_is_rejected_at_compile_time_naming_it,
                     wrong_argument_counts_are_compile_errors,
                     nesting_deeper_than_the_depth_bound_is_an_error_not_a_crash,
                     var_reads_dotted_paths_indexes_and_defaults,
                     the_template_condition_example_tests_true_only_for_open_messages,
                     truthiness_follows_javascript_except_empty_arrays,
                     loose_equality_coerces_like_javascript, comparisons_coerce_and_support_between,
                     arithmetic_coerces_strings_and_prints_numbers_like_javascript,
                     strings_operators_count_characters_not_bytes,
                     array_operators_scope_data_to_each_element,
                     and_or_return_the_deciding_value_and_if_chains_else_ifs,
                     literals_pass_through_and_results_never_alias_the_rule,
                     one_compiled_rule_evaluates_concurrently_from_several_threads,
                     cli_logic_prints_the_result_as_compact_json,
                     cli_logic_exits_1_on_an_unknown_operator_or_bad_json);
}
