/* mustache_test.c — the renderer: the Mustache spec suites (each case counted), the behaviours the
 * reference pinned (SEMANTICS §1.4, §2.1), the Handlebars blocks, value printing, malformed
 * templates, limits, concurrent rendering, and the `missive render` command. */
#include <pthread.h>
#include <sys/wait.h>

#include "missive/base.h"
#include "missive/mustache.h"
#include "test.h"

/* Renders src with data given as JSON text; returns a malloc'd string or NULL (err filled). */
static char *render_json(const char *src, const char *data_json, mv_escape escape, mv_err *err) {
    json_t *data = NULL;
    if (data_json && mv_json_parse(data_json, strlen(data_json), &data, err) != MV_OK) return NULL;
    char *out = NULL;
    mv_render_string(src, data, escape, &out, err);
    json_decref(data);
    return out;
}

/* Checks that src renders to `want` (both escapings unless it matters, see callers). */
#define CHECK_RENDER(src, data, escape, want)                                                      \
    do {                                                                                           \
        mv_err me_;                                                                                \
        mv_err_clear(&me_);                                                                        \
        char *got_ = render_json((src), (data), (escape), &me_);                                   \
        if (!got_) fprintf(stderr, "  render error: %s\n", me_.message);                           \
        CHECK_STR(got_, (want));                                                                   \
        free(got_);                                                                                \
    } while (0)

/* Checks that src fails to compile with MV_INVALID_TEMPLATE and a message containing `want`. */
#define CHECK_MALFORMED(src, want)                                                                 \
    do {                                                                                           \
        mv_err me_;                                                                                \
        mv_err_clear(&me_);                                                                        \
        mv_tpl *t_ = NULL;                                                                         \
        CHECK_CODE(mv_tpl_compile((src), strlen(src), &t_, &me_), MV_INVALID_TEMPLATE, &me_);      \
        CHECK(t_ == NULL);                                                                         \
        if (!strstr(me_.message, (want))) {                                                        \
            fprintf(stderr, "  message: %s\n", me_.message);                                       \
            CHECK(strstr(me_.message, (want)) != NULL);                                            \
        }                                                                                          \
        mv_tpl_free(t_);                                                                           \
    } while (0)

/* ---- the Mustache spec suites -------------------------------------------------------------- */

static const char *spec_dir(void) {
    static char dir[512];
    const char *env = getenv("MISSIVE_SPEC_DIR");
    struct stat st;
    if (env && *env)
        snprintf(dir, sizeof dir, "%s/mustache", env);
    else if (stat("../shared/spec", &st) == 0)
        snprintf(dir, sizeof dir, "../shared/spec/mustache");
    else
        return NULL;
    return dir;
}

static void run_spec_suite(const char *dir, const char *suite) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s.json", dir, suite);
    json_t *doc = NULL;
    mv_err err;
    if (mv_json_load_file(path, &doc, &err) != MV_OK) {
        test_case(0, suite, "load", err.message);
        return;
    }
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(doc, "tests"), i, tc) {
        const char *name = mv_json_str(tc, "name");
        char *data_text = mv_json_compact(json_object_get(tc, "data"));
        bool lambda = data_text && strstr(data_text, "\"~lambda\"");
        free(data_text);
        if (json_object_get(tc, "partials") || lambda) {
            printf("SKIP mustache %s: %s (%s are not supported)\n", suite, name,
                   lambda ? "lambdas" : "partials");
            continue;
        }
        const char *src = mv_json_str(tc, "template"), *want = mv_json_str(tc, "expected");
        char *out = NULL;
        mv_err_clear(&err);
        mv_code rc = mv_render_string(src, json_object_get(tc, "data"), MV_ESCAPE_HTML, &out, &err);
        char detail[1024];
        snprintf(detail, sizeof detail, "got \"%s\", want \"%s\" %s", out ? out : "(error)", want,
                 rc == MV_OK ? "" : err.message);
        test_case(rc == MV_OK && strcmp(out, want) == 0, suite, name, detail);
        free(out);
    }
    json_decref(doc);
}

/* Runs outside RUN_TESTS so that only the cases count: a skipped run adds nothing to the totals. */
static void run_spec_suites(void) {
    const char *dir = spec_dir();
    if (!dir) {
        printf("SKIP mustache spec suites: ../shared/spec not found\n");
        return;
    }
    const char *suites[] = {"interpolation", "sections", "inverted", "comments", "delimiters"};
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        run_spec_suite(dir, suites[i]);
}

/* ---- reference-pinned behaviour (SEMANTICS §1.4, §2.1) -------------------------------------- */

TEST(markup_is_not_escaped_with_escape_none_in_double_or_triple_braces) {
    const char *data = "{\"x\": \"<img src=x onerror=alert(1)> & \\\"quoted\\\"\"}";
    CHECK_RENDER("{{x}}", data, MV_ESCAPE_NONE, "<img src=x onerror=alert(1)> & \"quoted\"");
    CHECK_RENDER("{{{x}}}", data, MV_ESCAPE_NONE, "<img src=x onerror=alert(1)> & \"quoted\"");
    CHECK_RENDER("{{& x}}", data, MV_ESCAPE_NONE, "<img src=x onerror=alert(1)> & \"quoted\"");
}

TEST(html_escaping_escapes_exactly_amp_lt_gt_quot_and_only_double_braces) {
    const char *data = "{\"x\": \"<a href='y'>&\\\"</a>\"}";
    CHECK_RENDER("{{x}}", data, MV_ESCAPE_HTML, "&lt;a href='y'&gt;&amp;&quot;&lt;/a&gt;");
    CHECK_RENDER("{{{x}}}", data, MV_ESCAPE_HTML, "<a href='y'>&\"</a>");
    CHECK_RENDER("{{&x}}", data, MV_ESCAPE_HTML, "<a href='y'>&\"</a>");
    CHECK_RENDER("<b>{{x}}", "{\"x\": \"ok\"}", MV_ESCAPE_HTML,
                 "<b>ok"); /* text is never escaped */
}

TEST(prototype_like_names_render_empty) {
    CHECK_RENDER("{{__proto__.polluted}}|{{constructor.name}}", "{\"a\": 1}", MV_ESCAPE_NONE, "|");
    CHECK_RENDER("{{toString}}", "{}", MV_ESCAPE_NONE, "");
    CHECK_RENDER("{{prototype.value}}", "{}", MV_ESCAPE_NONE, "");
    CHECK_RENDER("{{xs.length}}", "{\"xs\": [1, 2]}", MV_ESCAPE_NONE, "");
}

TEST(missing_names_at_any_level_render_empty) {
    CHECK_RENDER("{{a.b.c}}", "{\"a\": {\"b\": {}}}", MV_ESCAPE_NONE, "");
    CHECK_RENDER("{{a.b.c}}", "{\"a\": \"text\"}", MV_ESCAPE_NONE, "");
    CHECK_RENDER("before {{missing}} after", "{}", MV_ESCAPE_NONE, "before  after");
    CHECK_RENDER("[{{x}}]", NULL, MV_ESCAPE_NONE, "[]");
    CHECK_RENDER("{{a.b.c}}", "{\"a\": {\"b\": {\"c\": \"deep\"}}}", MV_ESCAPE_NONE, "deep");
}

TEST(scalars_print_as_javascript_string_conversion) {
    CHECK_RENDER("{{n}}|{{t}}|{{z}}", "{\"n\": 3, \"t\": true, \"z\": null}", MV_ESCAPE_NONE,
                 "3|true|");
    CHECK_RENDER("{{f}}", "{\"f\": false}", MV_ESCAPE_NONE, "false");
    CHECK_RENDER("{{xs}}", "{\"xs\": [\"a\", \"b\"]}", MV_ESCAPE_NONE, "a,b");
    CHECK_RENDER("{{big}}", "{\"big\": 9007199254740993}", MV_ESCAPE_NONE, "9007199254740993");
    CHECK_RENDER("{{n}}", "{\"n\": -42}", MV_ESCAPE_NONE, "-42");
}

TEST(reals_print_as_javascript_numbers) {
    const char *cases[][2] = {
        {"1.5", "1.5"},
        {"1.0", "1"},
        {"-0.0", "0"},
        {"0.1", "0.1"},
        {"1.21", "1.21"},
        {"100.0", "100"},
        {"1e20", "100000000000000000000"},
        {"1e21", "1e+21"},
        {"1.5e300", "1.5e+300"},
        {"0.000001", "0.000001"},
        {"1e-7", "1e-7"},
        {"-2.5e-8", "-2.5e-8"},
        {"123456789.125", "123456789.125"},
        {"0.30000000000000004", "0.30000000000000004"},
        {"1.2345678901234567e20", "123456789012345670000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char data[128];
        snprintf(data, sizeof data, "{\"x\": %s}", cases[i][0]);
        CHECK_RENDER("{{x}}", data, MV_ESCAPE_NONE, cases[i][1]);
    }
}

TEST(arrays_join_with_commas_flattening_nested_arrays) {
    CHECK_RENDER("{{xs}}", "{\"xs\": [1, [2, [3, 4]], \"five\", 6.5, true]}", MV_ESCAPE_NONE,
                 "1,2,3,4,five,6.5,true");
    CHECK_RENDER("[{{xs}}]", "{\"xs\": [null, 1, null]}", MV_ESCAPE_NONE, "[,1,]");
    CHECK_RENDER("[{{xs}}]", "{\"xs\": []}", MV_ESCAPE_NONE, "[]");
    CHECK_RENDER("{{xs}}", "{\"xs\": [\"<\", {\"a\": 1}]}", MV_ESCAPE_HTML,
                 "&lt;,{&quot;a&quot;:1}");
}

TEST(objects_print_as_compact_json_in_insertion_order) {
    CHECK_RENDER("{{o}}",
                 "{\"o\": {\"b\": 1, \"a\": [1.0, \"x\\n\\\"y\\\"\"], \"c\": null, \"d\": {}, "
                 "\"e\": 0.1}}",
                 MV_ESCAPE_NONE,
                 "{\"b\":1,\"a\":[1,\"x\\n\\\"y\\\"\"],\"c\":null,\"d\":{},\"e\":0.1}");
    CHECK_RENDER("{{o}}", "{\"o\": {\"k\": \"<&>\"}}", MV_ESCAPE_HTML,
                 "{&quot;k&quot;:&quot;&lt;&amp;&gt;&quot;}");
    CHECK_RENDER("{{{o}}}", "{\"o\": {\"tab\": \"\\t\\u0001\"}}", MV_ESCAPE_HTML,
                 "{\"tab\":\"\\t\\u0001\"}");
}

TEST(malformed_templates_fail_naming_line_and_column) {
    CHECK_MALFORMED("Broken {{name", "unclosed tag at line 1, column 8");
    CHECK_MALFORMED("ok\n  {{{name}}", "unclosed tag at line 2, column 3");
    CHECK_MALFORMED("a\n{{#list}}\nx", "unclosed section \"list\" at line 2, column 1");
    CHECK_MALFORMED("{{#a}}{{#b}}{{/a}}{{/b}}",
                    "mismatched closing tag \"/a\" (section \"b\" opened at line 1, column 7) at "
                    "line 1, column 13");
    CHECK_MALFORMED("text {{/a}}",
                    "closing tag \"/a\" without an open section at line 1, column 6");
    CHECK_MALFORMED("{{#if x}}y{{/with}}", "mismatched closing tag \"/with\"");
    CHECK_MALFORMED("{{=<% %>}}", "bad delimiter tag at line 1, column 1");
    CHECK_MALFORMED("{{=<%=}}", "bad delimiter tag");
    CHECK_MALFORMED("{{= a b c =}}", "bad delimiter tag");
    CHECK_MALFORMED("x{{else}}", "\"else\" outside a section at line 1, column 2");
    CHECK_MALFORMED("{{#if a}}1{{else}}2{{else}}3{{/if}}", "second \"else\"");
    CHECK_MALFORMED("{{> header}}", "partials are not supported");
    CHECK_MALFORMED("{{#if}}x{{/if}}", "\"#if\" needs a name");
    CHECK_MALFORMED("{{a..b}}", "invalid name at line 1, column 1");
    CHECK_MALFORMED("{{}}", "missing name");
    CHECK_MALFORMED("{{a b}}", "invalid name");
    CHECK_MALFORMED("{{@nope}}", "invalid name");
    CHECK_MALFORMED("{{this.}}", "invalid name");
    CHECK_MALFORMED("{{a.}}", "invalid name");
    /* A string that renders fine must also fail the one-call API the same way. */
    char *out = (char *)"untouched";
    mv_err err;
    CHECK_CODE(mv_render_string("Broken {{name", NULL, MV_ESCAPE_NONE, &out, &err),
               MV_INVALID_TEMPLATE, &err);
    CHECK(out == NULL);
}

/* ---- Handlebars blocks ---------------------------------------------------------------------- */

TEST(if_renders_body_when_truthy_and_else_branch_otherwise) {
    const char *t = "{{#if x}}yes{{else}}no{{/if}}";
    CHECK_RENDER(t, "{\"x\": true}", MV_ESCAPE_NONE, "yes");
    CHECK_RENDER(t, "{\"x\": \"s\"}", MV_ESCAPE_NONE, "yes");
    CHECK_RENDER(t, "{\"x\": 2}", MV_ESCAPE_NONE, "yes");
    CHECK_RENDER(t, "{\"x\": {}}", MV_ESCAPE_NONE, "yes");
    CHECK_RENDER(t, "{\"x\": [0]}", MV_ESCAPE_NONE, "yes");
    const char *falsy[] = {"{\"x\": false}", "{\"x\": null}", "{}",         "{\"x\": \"\"}",
                           "{\"x\": 0}",     "{\"x\": 0.0}",  "{\"x\": []}"};
    for (size_t i = 0; i < sizeof falsy / sizeof falsy[0]; i++)
        CHECK_RENDER(t, falsy[i], MV_ESCAPE_NONE, "no");
    CHECK_RENDER("{{#if x}}yes{{/if}}", "{}", MV_ESCAPE_NONE, "");
    /* if does not change the context */
    CHECK_RENDER("{{#if user}}{{name}}{{/if}}", "{\"user\": {\"name\": \"in\"}, \"name\": \"out\"}",
                 MV_ESCAPE_NONE, "out");
}

TEST(unless_renders_body_when_falsy_and_else_branch_otherwise) {
    const char *t = "{{#unless x}}none{{else}}some{{/unless}}";
    CHECK_RENDER(t, "{\"x\": []}", MV_ESCAPE_NONE, "none");
    CHECK_RENDER(t, "{}", MV_ESCAPE_NONE, "none");
    CHECK_RENDER(t, "{\"x\": [1]}", MV_ESCAPE_NONE, "some");
    CHECK_RENDER("{{#unless x}}none{{/unless}}", "{\"x\": 1}", MV_ESCAPE_NONE, "");
}

TEST(each_iterates_arrays_with_this_and_index) {
    CHECK_RENDER("{{#each xs}}{{@index}}={{this}};{{/each}}", "{\"xs\": [\"a\", \"b\", \"c\"]}",
                 MV_ESCAPE_NONE, "0=a;1=b;2=c;");
    CHECK_RENDER("{{#each people}}{{#if @first}}[{{/if}}{{this.name}} ({{age}}){{#if @last}}]"
                 "{{else}}, {{/if}}{{/each}}",
                 "{\"people\": [{\"name\": \"Ann\", \"age\": 30}, {\"name\": \"Bo\", \"age\": 4}]}",
                 MV_ESCAPE_NONE, "[Ann (30), Bo (4)]");
    /* names not found in the element come from the enclosing contexts; ../ names the parent */
    CHECK_RENDER("{{#each xs}}{{.}}{{sep}}{{../sep}}{{/each}}", "{\"xs\": [1, 2], \"sep\": \"-\"}",
                 MV_ESCAPE_NONE, "1--2--");
    /* nested loops: @index is the innermost loop's */
    CHECK_RENDER("{{#each rows}}{{#each this}}{{@index}}{{.}} {{/each}}|{{/each}}",
                 "{\"rows\": [[\"a\", \"b\"], [\"c\"]]}", MV_ESCAPE_NONE, "0a 1b |0c |");
    CHECK_RENDER("{{#each xs}}{{this}}{{/each}}", "{\"xs\": [\"<\"]}", MV_ESCAPE_HTML, "&lt;");
}

TEST(each_iterates_object_values_with_key) {
    CHECK_RENDER("{{#each o}}{{@key}}={{this}}@{{@index}} {{/each}}",
                 "{\"o\": {\"z\": 1, \"a\": \"two\", \"m\": [3, 4]}}", MV_ESCAPE_NONE,
                 "z=1@0 a=two@1 m=3,4@2 ");
}

TEST(each_renders_else_branch_when_nothing_to_iterate) {
    const char *t = "{{#each xs}}{{.}}{{else}}empty{{/each}}";
    CHECK_RENDER(t, "{\"xs\": []}", MV_ESCAPE_NONE, "empty");
    CHECK_RENDER(t, "{\"xs\": {}}", MV_ESCAPE_NONE, "empty");
    CHECK_RENDER(t, "{}", MV_ESCAPE_NONE, "empty");
    CHECK_RENDER(t, "{\"xs\": \"abc\"}", MV_ESCAPE_NONE, "empty");
    CHECK_RENDER(t, "{\"xs\": [7]}", MV_ESCAPE_NONE, "7");
}

TEST(with_enters_an_object_and_else_branch_when_missing) {
    const char *t = "{{#with user}}{{name}} <{{this.email}}> {{title}}{{else}}nobody{{/with}}";
    CHECK_RENDER(t, "{\"user\": {\"name\": \"Ann\", \"email\": \"a@x\"}, \"title\": \"Dr\"}",
                 MV_ESCAPE_NONE, "Ann <a@x> Dr");
    CHECK_RENDER(t, "{}", MV_ESCAPE_NONE, "nobody");
    CHECK_RENDER(t, "{\"user\": null}", MV_ESCAPE_NONE, "nobody");
    /* this.x looks only in the current context, never outward */
    CHECK_RENDER("{{#with a}}[{{this.t}}][{{t}}]{{/with}}", "{\"a\": {}, \"t\": \"out\"}",
                 MV_ESCAPE_NONE, "[][out]");
    CHECK_RENDER("{{#with n}}{{.}}{{/with}}", "{\"n\": 0}", MV_ESCAPE_NONE, "0");
    CHECK_RENDER("{{#with a}}[{{./t}}][{{../t}}][{{..}}]{{/with}}", "{\"a\": {\"t\": 1}, \"t\": 2}",
                 MV_ESCAPE_NONE, "[1][2][{\"a\":{\"t\":1},\"t\":2}]");
}

TEST(mustache_sections_take_else_and_keyword_tags_are_standalone) {
    CHECK_RENDER("{{#xs}}{{.}}{{else}}none{{/xs}}", "{\"xs\": []}", MV_ESCAPE_NONE, "none");
    CHECK_RENDER("{{^xs}}none{{else}}some{{/xs}}", "{\"xs\": [1]}", MV_ESCAPE_NONE, "some");
    CHECK_RENDER("<ul>\n  {{#each xs}}\n  <li>{{.}}</li>\n  {{else}}\n  <li>-</li>\n  {{/each}}\n"
                 "</ul>\n",
                 "{\"xs\": [1, 2]}", MV_ESCAPE_NONE, "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>\n");
    CHECK_RENDER("{{!-- a comment with }} inside --}}x", "{}", MV_ESCAPE_NONE, "x");
}

TEST(compiled_template_renders_many_times_without_reparsing) {
    mv_tpl *tpl = NULL;
    mv_err err;
    const char *src = "Hi {{name}}!";
    REQUIRE(mv_tpl_compile(src, strlen(src), &tpl, &err) == MV_OK);
    CHECK_STR(mv_tpl_source(tpl), src);
    const char *names[] = {"Ann", "Bo", ""};
    const char *want[] = {"Hi Ann!", "Hi Bo!", "Hi !"};
    for (int i = 0; i < 3; i++) {
        json_t *data = json_pack("{ss}", "name", names[i]);
        char *out = NULL;
        size_t len = 0;
        CHECK_CODE(mv_tpl_render(tpl, data, MV_ESCAPE_HTML, &out, &len, &err), MV_OK, &err);
        CHECK_STR(out, want[i]);
        CHECK_INT(len, strlen(want[i]));
        free(out);
        json_decref(data);
    }
    char *out = NULL;
    CHECK_CODE(mv_tpl_render(tpl, NULL, MV_ESCAPE_HTML, &out, NULL, &err), MV_OK, &err);
    CHECK_STR(out, "Hi !");
    free(out);
    mv_tpl_free(tpl);
    mv_tpl_free(NULL);
}

TEST(compile_reads_exactly_len_bytes) {
    mv_tpl *tpl = NULL;
    mv_err err;
    REQUIRE(mv_tpl_compile("{{a}}{{b", 5, &tpl, &err) == MV_OK);
    char *out = NULL;
    json_t *data = json_pack("{si}", "a", 1);
    CHECK_CODE(mv_tpl_render(tpl, data, MV_ESCAPE_NONE, &out, NULL, &err), MV_OK, &err);
    CHECK_STR(out, "1");
    free(out);
    json_decref(data);
    mv_tpl_free(tpl);
}

/* ---- limits ---------------------------------------------------------------------------------- */

static char *nested_sections(int depth) {
    char *s = malloc((size_t)depth * 12 + 8), *p = s;
    for (int i = 0; i < depth; i++)
        p += sprintf(p, "{{#a}}");
    p += sprintf(p, "{{v}}");
    for (int i = 0; i < depth; i++)
        p += sprintf(p, "{{/a}}");
    return s;
}

TEST(nesting_deeper_than_the_limit_is_rejected_and_the_limit_itself_renders) {
    char *ok = nested_sections(MV_TPL_MAX_DEPTH);
    CHECK_RENDER(ok, "{\"a\": {\"v\": \"deep\"}}", MV_ESCAPE_NONE, "deep");
    free(ok);
    char *deep = nested_sections(MV_TPL_MAX_DEPTH + 1);
    char want[64];
    snprintf(want, sizeof want, "sections nested deeper than %d at line 1, column %d",
             MV_TPL_MAX_DEPTH, MV_TPL_MAX_DEPTH * 6 + 1);
    CHECK_MALFORMED(deep, want);
    free(deep);
    char *huge = malloc(40000 * 6 + 1), *p = huge;
    for (int i = 0; i < 40000; i++)
        p += sprintf(p, "{{#a}}");
    CHECK_MALFORMED(huge, "sections nested deeper than");
    free(huge);
}

TEST(source_larger_than_the_limit_is_rejected) {
    size_t n = MV_TPL_MAX_SOURCE + 1;
    char *src = malloc(n);
    memset(src, 'x', n);
    mv_tpl *tpl = NULL;
    mv_err err;
    CHECK_CODE(mv_tpl_compile(src, n, &tpl, &err), MV_INVALID_TEMPLATE, &err);
    CHECK(strstr(err.message, "more than the 262144 allowed") != NULL);
    CHECK_CODE(mv_tpl_compile(src, n - 1, &tpl, &err), MV_OK, &err);
    mv_tpl_free(tpl);
    free(src);
}

TEST(output_larger_than_the_limit_fails_cleanly) {
    /* 1000 × 1000 × 2 bytes = 2 MB > 1 MB */
    json_t *row = json_array(), *data = json_object();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(row, json_integer(i % 10));
    json_object_set_new(data, "rows", json_array());
    for (int i = 0; i < 1000; i++)
        json_array_append(json_object_get(data, "rows"), row);
    json_decref(row);
    mv_tpl *tpl = NULL;
    mv_err err;
    const char *src = "{{#each rows}}{{#each this}}{{.}},{{/each}}{{/each}}";
    REQUIRE(mv_tpl_compile(src, strlen(src), &tpl, &err) == MV_OK);
    char *out = (char *)"untouched";
    CHECK_CODE(mv_tpl_render(tpl, data, MV_ESCAPE_NONE, &out, NULL, &err), MV_INVALID_TEMPLATE,
               &err);
    CHECK(out == NULL);
    CHECK(strstr(err.message, "rendered output exceeds 1048576 bytes") != NULL);
    /* one huge value counts too */
    char *big = malloc(MV_TPL_MAX_OUTPUT + 2);
    memset(big, 'a', MV_TPL_MAX_OUTPUT + 1);
    big[MV_TPL_MAX_OUTPUT + 1] = '\0';
    json_t *d2 = json_pack("{ss}", "s", big);
    CHECK_CODE(mv_render_string("{{s}}", d2, MV_ESCAPE_NONE, &out, &err), MV_INVALID_TEMPLATE,
               &err);
    big[MV_TPL_MAX_OUTPUT] = '\0';
    json_object_set_new(d2, "s", json_string(big));
    CHECK_CODE(mv_render_string("{{s}}", d2, MV_ESCAPE_NONE, &out, &err), MV_OK, &err);
    CHECK_INT(out ? strlen(out) : 0, MV_TPL_MAX_OUTPUT);
    free(out);
    json_decref(d2);
    free(big);
    mv_tpl_free(tpl);
    json_decref(data);
}

TEST(nested_loops_that_print_nothing_stop_after_a_bounded_number_of_steps) {
    json_t *xs = json_array(), *data = json_object();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(xs, json_true());
    json_object_set_new(data, "xs", xs);
    char *out = NULL;
    mv_err err;
    CHECK_CODE(mv_render_string("{{#xs}}{{#xs}}{{#xs}}{{/xs}}{{/xs}}{{/xs}}", data, MV_ESCAPE_NONE,
                                &out, &err),
               MV_INVALID_TEMPLATE, &err);
    CHECK(strstr(err.message, "rendering stopped after") != NULL);
    json_decref(data);
}

/* ---- concurrency ---------------------------------------------------------------------------- */

typedef struct render_job {
    const mv_tpl *tpl;
    int id, failures;
} render_job;

static void *render_many(void *arg) {
    render_job *job = arg;
    for (int i = 0; i < 500; i++) {
        json_t *data =
            json_pack("{si s[sss] s{si}}", "id", job->id, "xs", "a", "<b>", "c", "o", "n", i);
        char want[128], *out = NULL;
        snprintf(want, sizeof want, "id=%d 0:a 1:&lt;b&gt; 2:c n=%d yes", job->id, i);
        mv_err err;
        if (mv_tpl_render(job->tpl, data, MV_ESCAPE_HTML, &out, NULL, &err) != MV_OK ||
            strcmp(out, want) != 0)
            job->failures++;
        free(out);
        json_decref(data);
    }
    return NULL;
}

TEST(one_compiled_template_renders_correctly_from_four_threads_at_once) {
    const char *src = "id={{id}}{{#each xs}} {{@index}}:{{.}}{{/each}}{{#with o}} n={{n}}{{/with}}"
                      "{{#if xs}} yes{{else}} no{{/if}}";
    mv_tpl *tpl = NULL;
    mv_err err;
    REQUIRE(mv_tpl_compile(src, strlen(src), &tpl, &err) == MV_OK);
    pthread_t th[4];
    render_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (render_job){tpl, i, 0};
        REQUIRE(pthread_create(&th[i], NULL, render_many, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(jobs[i].failures, 0);
    }
    mv_tpl_free(tpl);
}

/* ---- the CLI -------------------------------------------------------------------------------- */

/* Runs `<build>/missive ARGS`, capturing stdout and stderr together; returns the exit status. */
static int run_cli(const char *args, char *out, size_t cap) {
    const char *build = getenv("BUILD");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/missive %s 2>&1", build && *build ? build : "build", args);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(cli_render_prints_the_rendering_without_a_newline) {
    const char *path = test_tmp_path("render-data.json");
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("{\"name\": \"Ann & Bo\", \"xs\": [1, 2.5]}", f);
    fclose(f);
    char args[1024], out[1024];
    snprintf(args, sizeof args,
             "render --text 'Hi {{name}}: {{#each xs}}[{{.}}]{{/each}}' --data %s", path);
    CHECK_INT(run_cli(args, out, sizeof out), 0);
    CHECK_STR(out, "Hi Ann &amp; Bo: [1][2.5]");
    snprintf(args, sizeof args, "render --plain --text 'Hi {{name}}' --data=%s", path);
    CHECK_INT(run_cli(args, out, sizeof out), 0);
    CHECK_STR(out, "Hi Ann & Bo");
    CHECK_INT(run_cli("render --text 'no data: [{{x}}]'", out, sizeof out), 0);
    CHECK_STR(out, "no data: []");
    unlink(path);
}

TEST(cli_render_exits_1_naming_the_position_of_a_malformed_template_or_bad_data) {
    char out[1024];
    CHECK_INT(run_cli("render --text 'Broken {{name'", out, sizeof out), 1);
    CHECK(strstr(out, "unclosed tag at line 1, column 8") != NULL);
    const char *path = test_tmp_path("bad-data.json");
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("{\"name\": ", f);
    fclose(f);
    char args[600];
    snprintf(args, sizeof args, "render --text '{{name}}' --data %s", path);
    CHECK_INT(run_cli(args, out, sizeof out), 1);
    CHECK(strstr(out, path) != NULL && strstr(out, "invalid JSON") != NULL);
    CHECK_INT(run_cli("render --text x --data /nonexistent/missive.json", out, sizeof out), 1);
    CHECK(strstr(out, "cannot open") != NULL);
    CHECK_INT(run_cli("render", out, sizeof out), 2);
    unlink(path);
}

int main(void) {
    run_spec_suites();
    return RUN_TESTS(
        markup_is_not_escaped_with_escape_none_in_double_or_triple_braces,
        html_escaping_escapes_exactly_amp_lt_gt_quot_and_only_double_braces,
        prototype_like_names_render_empty, missing_names_at_any_level_render_empty,
        scalars_print_as_javascript_string_conversion, reals_print_as_javascript_numbers,
        arrays_join_with_commas_flattening_nested_arrays,
        objects_print_as_compact_json_in_insertion_order,
        malformed_templates_fail_naming_line_and_column,
        if_renders_body_when_truthy_and_else_branch_otherwise,
        unless_renders_body_when_falsy_and_else_branch_otherwise,
        each_iterates_arrays_with_this_and_index, each_iterates_object_values_with_key,
        each_renders_else_branch_when_nothing_to_iterate,
        with_enters_an_object_and_else_branch_when_missing,
        mustache_sections_take_else_and_keyword_tags_are_standalone,
        compiled_template_renders_many_times_without_reparsing, compile_reads_exactly_len_bytes,
        nesting_deeper_than_the_limit_is_rejected_and_the_limit_itself_renders,
        source_larger_than_the_limit_is_rejected, output_larger_than_the_limit_fails_cleanly,
        nested_loops_that_print_nothing_stop_after_a_bounded_number_of_steps,
        one_compiled_template_renders_correctly_from_four_threads_at_once,
        cli_render_prints_the_rendering_without_a_newline,
        cli_render_exits_1_naming_the_position_of_a_malformed_template_or_bad_data);
}
