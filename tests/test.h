/* test.h — the whole test framework: one header, no magic.
 *
 *   TEST(second_claim_is_conflict) { CHECK(x == 1); CHECK_STR(a, "b"); REQUIRE(p != NULL); }
 *   int main(void) { return RUN_TESTS(second_claim_is_conflict, other_test); }
 *
 * A test passes when none of its checks failed. Failures print file:line. Suites that run a data
 * file of cases (the Mustache and JsonLogic specs) count each case with test_case(). The binary
 * ends with the line "N passed, M failed" that `make test` adds up. */
#ifndef MISSIVE_TEST_H
#define MISSIVE_TEST_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_, test_current_failed_;
static const char *test_current_name_ = "";

static inline void test_fail_(const char *file, int line, const char *what) {
    fprintf(stderr, "FAIL %s (%s:%d): %s\n", test_current_name_, file, line, what);
    test_current_failed_ = 1;
}

/* test_fail_ with a printf-style message, printed whole (no buffer to truncate it). */
static inline void test_failf_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void test_failf_(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s (%s:%d): ", test_current_name_, file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    test_current_failed_ = 1;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) test_fail_(__FILE__, __LINE__, #cond);                                        \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_fail_(__FILE__, __LINE__, #cond);                                                 \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            test_failf_(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a, #b, a_, b_);            \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            test_failf_(__FILE__, __LINE__, "%s == %s (\"%s\" != \"%s\")", #a, #b,                 \
                        a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                   \
        }                                                                                          \
    } while (0)

/* Checks that a call returned `code`; prints the error message otherwise. */
#define CHECK_CODE(call, code, errp)                                                               \
    do {                                                                                           \
        int c_ = (int)(call);                                                                      \
        if (c_ != (int)(code)) {                                                                   \
            const mv_err *e_ = (errp);                                                             \
            test_failf_(__FILE__, __LINE__, "%s returned %d, expected %s (%s)", #call, c_, #code,  \
                        e_ ? e_->message : "");                                                    \
        }                                                                                          \
    } while (0)

/* Counts one data-driven case (e.g. a spec suite entry) in the totals. */
static inline void test_case(int ok, const char *suite, const char *name, const char *detail) {
    if (ok) {
        test_passed_++;
    } else {
        test_failed_++;
        fprintf(stderr, "FAIL %s: %s%s%s\n", suite, name, detail ? " — " : "",
                detail ? detail : "");
    }
}

/* A fresh path under a per-process temporary directory (removed files are the test's job):
 * test_tmp_path("a.db") → "/tmp/missive-test-<pid>/a.db". Returns a static buffer per call slot. */
#include <sys/stat.h>
#include <unistd.h>
static inline const char *test_tmp_path(const char *name) {
    static char bufs[8][512];
    static int slot;
    char *b = bufs[slot++ % 8];
    snprintf(b, 512, "/tmp/missive-test-%d", (int)getpid());
    mkdir(b, 0700);
    snprintf(b, 512, "/tmp/missive-test-%d/%s", (int)getpid(), name);
    unlink(b);
    return b;
}

typedef struct {
    const char *name;
    void (*fn)(void);
} test_entry_;

#define TEST(name) static void name(void)

static inline int test_run_(const test_entry_ *tests, size_t n, const char *prog) {
    const char *only = getenv("TEST_ONLY");
    for (size_t i = 0; i < n; i++) {
        if (only && !strstr(tests[i].name, only)) continue;
        test_current_name_ = tests[i].name;
        test_current_failed_ = 0;
        tests[i].fn();
        if (test_current_failed_)
            test_failed_++;
        else
            test_passed_++;
    }
    printf("%s: %d passed, %d failed\n", prog, test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

/* RUN_TESTS(a, b, c) — runs the listed test functions in order. */
#define RUN_TESTS(...)                                                                             \
    ({                                                                                             \
        void (*fns_[])(void) = {__VA_ARGS__};                                                      \
        const char *names_ = #__VA_ARGS__;                                                         \
        test_entry_ entries_[sizeof fns_ / sizeof fns_[0]];                                        \
        static char namebuf_[sizeof(#__VA_ARGS__)];                                                \
        memcpy(namebuf_, names_, sizeof namebuf_);                                                 \
        char *p_ = namebuf_;                                                                       \
        for (size_t i_ = 0; i_ < sizeof fns_ / sizeof fns_[0]; i_++) {                             \
            while (*p_ == ' ' || *p_ == '\n' || *p_ == '\t')                                       \
                p_++;                                                                              \
            entries_[i_].name = p_;                                                                \
            entries_[i_].fn = fns_[i_];                                                            \
            char *c_ = strchr(p_, ',');                                                            \
            if (c_) {                                                                              \
                *c_ = '\0';                                                                        \
                p_ = c_ + 1;                                                                       \
            }                                                                                      \
        }                                                                                          \
        test_run_(entries_, sizeof fns_ / sizeof fns_[0], __FILE__);                               \
    })

#endif
