/*
 * Minimal test runner for the unit tests (one executable per file).
 *
 *   TEST(name) { CHECK(cond); CHECK_EQ(a, b); CHECK_STR(a, b); }
 *   int main(void) { return RUN_TESTS(); }
 *
 * Tests register themselves via constructors; RUN_TESTS runs each, prints one
 * line per test and a closing "N passed, N failed" line, and returns non-zero
 * when any check failed.
 */
#ifndef CCO_TESTS_TEST_H_
#define CCO_TESTS_TEST_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*cco_test_fn)(void);
typedef struct {
  const char* name;
  cco_test_fn fn;
} cco_test_case;

#define CCO_TEST_MAX 256
static cco_test_case cco_tests_[CCO_TEST_MAX];
static int cco_ntests_;
static int cco_test_failed_;

static inline void cco_test_register_(const char* name, cco_test_fn fn) {
  if (cco_ntests_ < CCO_TEST_MAX) cco_tests_[cco_ntests_++] = (cco_test_case){name, fn};
}

#define TEST(name)                                                              \
  static void test_##name(void);                                                \
  __attribute__((constructor)) static void register_##name(void) {              \
    cco_test_register_(#name, test_##name);                                     \
  }                                                                             \
  static void test_##name(void)

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      cco_test_failed_ = 1;                                                     \
    }                                                                           \
  } while (0)

#define CHECK_EQ(a, b)                                                          \
  do {                                                                          \
    long long cco_a_ = (long long)(a), cco_b_ = (long long)(b);                 \
    if (cco_a_ != cco_b_) {                                                     \
      fprintf(stderr, "  %s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, \
              __LINE__, #a, #b, cco_a_, cco_b_);                                \
      cco_test_failed_ = 1;                                                     \
    }                                                                           \
  } while (0)

#define CHECK_STR(a, b)                                                         \
  do {                                                                          \
    const char *cco_a_ = (a), *cco_b_ = (b);                                    \
    if (!cco_a_ || !cco_b_ || strcmp(cco_a_, cco_b_) != 0) {                    \
      fprintf(stderr, "  %s:%d: CHECK_STR(%s, %s) failed: '%s' != '%s'\n", __FILE__, \
              __LINE__, #a, #b, cco_a_ ? cco_a_ : "(null)", cco_b_ ? cco_b_ : "(null)"); \
      cco_test_failed_ = 1;                                                     \
    }                                                                           \
  } while (0)

static inline int cco_run_tests_(const char* file) {
  int passed = 0, failed = 0;
  for (int i = 0; i < cco_ntests_; i++) {
    cco_test_failed_ = 0;
    cco_tests_[i].fn();
    printf("%s %s\n", cco_test_failed_ ? "FAIL" : "ok  ", cco_tests_[i].name);
    fflush(stdout);
    if (cco_test_failed_) failed++;
    else passed++;
  }
  printf("%s: %d passed, %d failed\n", file, passed, failed);
  return failed ? 1 : 0;
}
#define RUN_TESTS() cco_run_tests_(__FILE__)

#endif /* CCO_TESTS_TEST_H_ */
