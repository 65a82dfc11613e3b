/* torture_test.c — allocation-failure ("torture") runs of the parsers, as curl's torture tests:
 * each parser run is repeated failing its 1st, 2nd, … Nth allocation until a run needs no more
 * than N; every run must end with MV_OK or a clean error, and free everything it allocated.
 *
 * The library's allocations reach this file's counting allocator two ways: the Makefile links
 * this binary with -Wl,--wrap for malloc, calloc, realloc, free, strdup and strndup (every call
 * from missive's own objects), and jansson's allocations go through json_set_alloc_funcs. */
#include "missive/base.h"
#include "missive/jsonlogic.h"
#include "missive/mustache.h"
#include "missive/template.h"
#include "test.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

/* ---- the counting allocator ----------------------------------------------------------------- */

#define LIVE_SLOTS (1u << 16)
static void *live[LIVE_SLOTS]; /* allocations made while armed and not yet freed */
static size_t nlive;
static bool armed;
static long calls, fail_at; /* fail_at 0: never */
static void *const TOMBSTONE = (void *)1;

static size_t slot_of(const void *p) { return ((uintptr_t)p >> 4) * 2654435761u % LIVE_SLOTS; }

static void track(void *p) {
    if (!armed || !p) return;
    size_t i = slot_of(p);
    while (live[i] && live[i] != TOMBSTONE)
        i = (i + 1) % LIVE_SLOTS;
    live[i] = p;
    nlive++;
}

static void untrack(void *p) {
    if (!p) return;
    for (size_t i = slot_of(p), n = 0; live[i] && n < LIVE_SLOTS; i = (i + 1) % LIVE_SLOTS, n++)
        if (live[i] == p) {
            live[i] = TOMBSTONE;
            nlive--;
            return;
        }
}

static bool fail_now(void) { return armed && ++calls == fail_at; }

void *__wrap_malloc(size_t n) {
    if (fail_now()) return NULL;
    void *p = __real_malloc(n);
    track(p);
    return p;
}

void *__wrap_calloc(size_t n, size_t size) {
    if (fail_now()) return NULL;
    void *p = __real_calloc(n, size);
    track(p);
    return p;
}

void *__wrap_realloc(void *old, size_t n) {
    if (fail_now()) return NULL;
    void *p = __real_realloc(old, n);
    if (p) {
        untrack(old);
        track(p);
    }
    return p;
}

void __wrap_free(void *p) {
    untrack(p);
    __real_free(p);
}

char *__wrap_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = __wrap_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

char *__wrap_strndup(const char *s, size_t max) {
    size_t n = strnlen(s, max);
    char *p = __wrap_malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static void *json_malloc(size_t n) { return __wrap_malloc(n); }
static void json_free(void *p) { __wrap_free(p); }

/* ---- the runs ------------------------------------------------------------------------------- */

typedef mv_code (*parser_run)(const void *input);

/* Runs fn(input) failing allocation 1, 2, … until a run completes without hitting the failure;
 * each run must return a code (not crash) and leave nothing allocated, and the complete run must
 * return want. Returns the number of allocations a complete run makes (-1 after a failure). */
static long torture(const char *what, parser_run fn, const void *input, mv_code want) {
    for (long n = 1; n < 1000000; n++) {
        memset(live, 0, sizeof live);
        nlive = 0;
        calls = 0;
        fail_at = n;
        armed = true;
        mv_code rc = fn(input);
        armed = false;
        if (nlive) {
            test_failf_(__FILE__, __LINE__, "%s: failing allocation %ld leaks %zu allocations",
                        what, n, nlive);
            return -1;
        }
        if (calls < n) { /* nothing failed: the run is complete */
            if (rc != want) {
                test_failf_(__FILE__, __LINE__, "%s: a run with enough memory returned %d, not %d",
                            what, (int)rc, (int)want);
                return -1;
            }
            if (getenv("TORTURE_VERBOSE")) fprintf(stderr, "%s: %ld allocations\n", what, calls);
            return calls;
        }
    }
    test_failf_(__FILE__, __LINE__, "%s: never completed", what);
    return -1;
}

static mv_code run_mustache(const void *input) {
    mv_tpl *t = NULL;
    mv_code rc = mv_tpl_compile(input, strlen(input), &t, NULL);
    if (rc != MV_OK) return rc;
    json_t *data = json_pack("{s:s,s:[s,s],s:{s:i},s:b}", "name", "Ana", "list", "a", "b", "deep",
                             "n", 3, "yes", 1);
    char *out = NULL;
    rc = data ? mv_tpl_render(t, data, MV_ESCAPE_HTML, &out, NULL, NULL) : MV_NO_MEMORY;
    free(out);
    json_decref(data);
    mv_tpl_free(t);
    return rc;
}

/* JSON text is parsed before the run (jansson's own parser is not what is tested here). */
static mv_code run_logic(const void *input) {
    const json_t *rule = input;
    json_t *result = NULL;
    mv_logic *l = NULL;
    mv_code rc = mv_logic_compile(rule, &l, NULL);
    json_t *data = rc == MV_OK ? json_pack("{s:{s:s,s:[i,i,i]}}", "payload", "status", "open",
                                           "items", 1, 2, 3)
                               : NULL;
    if (rc == MV_OK) rc = data ? mv_logic_eval(l, data, &result, NULL) : MV_NO_MEMORY;
    json_decref(result);
    json_decref(data);
    mv_logic_free(l);
    return rc;
}

static mv_code run_template(const void *input) {
    mv_template *t = NULL;
    mv_code rc = mv_template_parse(input, "torture.json", &t, NULL);
    mv_template_release(t);
    return rc;
}

/* torture() over the JSON value of text. */
static long torture_json(const char *what, parser_run fn, const char *text, mv_code want) {
    json_t *json = json_loads(text, 0, NULL);
    if (!json) {
        test_failf_(__FILE__, __LINE__, "%s: the test's JSON does not parse", what);
        return -1;
    }
    long n = torture(what, fn, json, want);
    json_decref(json);
    return n;
}

TEST(mustache_compile_and_render_survive_every_failed_allocation) {
    const char *src = "Hi {{name}}! {{#list}}[{{.}}]{{/list}}{{^none}}-{{/none}}{{deep.n}} "
                      "{{#if yes}}y{{else}}n{{/if}}{{#each list}}{{this}}{{/each}}"
                      "{{#with deep}}{{n}}{{/with}}{{! note }}{{=<% %>=}}<% name %>";
    CHECK(torture("mustache", run_mustache, src, MV_OK) > 10);
}

TEST(jsonlogic_compile_and_eval_survive_every_failed_allocation) {
    const char *rule =
        "{\"and\": [{\"==\": [{\"var\": \"payload.status\"}, \"open\"]},"
        " {\"in\": [2, {\"map\": [{\"var\": \"payload.items\"}, {\"+\": [{\"var\": \"\"}, 1]}]}]},"
        " {\"if\": [{\"missing\": [\"a\"]}, {\"cat\": [\"x\", \"y\"]}, false]},"
        " {\"reduce\": [{\"var\": \"payload.items\"}, {\"+\": [{\"var\": \"current\"},"
        " {\"var\": \"accumulator\"}]}, 0]}]}";
    CHECK(torture_json("jsonlogic", run_logic, rule, MV_OK) > 10);
}

TEST(template_validation_survives_every_failed_allocation) {
    const char *text =
        "{\"templateCd\": \"booking\", \"type\": \"request\", \"paymentCd\": \"deposit\","
        " \"senderContent\": {\"title\": \"You asked for {{listing}}\", \"short\": \"\", \"long\": "
        "\"\"},"
        " \"receiverContent\": {\"title\": \"{{guest}} wants {{listing}}\", \"short\": "
        "\"{{note}}\"},"
        " \"uiTemplate\": {\"sender\": \"card\", \"receiver\": \"card-r\"},"
        " \"prepare\": {\"toUser\": \"{{hostId}}\", \"toRoles\": [\"hosts\"]},"
        " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept {{listing}}\", \"variant\": "
        "\"primary\","
        "  \"receiver\": true, \"isDefault\": true, \"permission\": \"bookings.accept\","
        "  \"condition\": {\"==\": [{\"var\": \"payload.status\"}, \"open\"]},"
        "  \"confirmation\": {\"title\": \"Accept?\", \"message\": \"Charged {{amount}}\"},"
        "  \"handler\": {\"webhook\": \"http://127.0.0.1:9/accept\"},"
        "  \"senderNotification\": {\"title\": \"Accepted {{listing}}\"}},"
        " {\"actionCd\": \"withdraw\", \"name\": \"Withdraw\", \"variant\": \"secondary\", "
        "\"sender\": true,"
        "  \"handler\": {\"saga\": \"checkout\"}, \"approval\": {\"capability\": "
        "\"refunds.large\"}}]}";
    CHECK(torture_json("template", run_template, text, MV_OK) > 10);
}

TEST(a_malformed_input_fails_cleanly_under_every_failed_allocation_too) {
    CHECK(torture("bad mustache", run_mustache, "{{#a}}x{{/b}}", MV_INVALID_TEMPLATE) > 0);
    CHECK(torture_json("bad rule", run_logic, "{\"nope\": [1]}", MV_INVALID_ARGUMENT) > 0);
    CHECK(
        torture_json("bad template", run_template,
                     "{\"templateCd\": \"x\", \"actions\": [{\"actionCd\": \"a\", \"name\": \"A\","
                     " \"variant\": \"v\", \"reciever\": true}]}",
                     MV_INVALID_TEMPLATE) >= 0); /* the reference's checks allocate nothing */
}

int main(void) {
    json_set_alloc_funcs(json_malloc, json_free);
    return RUN_TESTS(mustache_compile_and_render_survive_every_failed_allocation,
                     jsonlogic_compile_and_eval_survive_every_failed_allocation,
                     template_validation_survives_every_failed_allocation,
                     a_malformed_input_fails_cleanly_under_every_failed_allocation_too);
}
