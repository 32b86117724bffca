/* Unit tests for the progress threads' idle policy (src/base/clock.h): the
 * spin window that follows the gaps between bursts, the poll phase at its
 * start, and their settings. */
#include <string.h>

#include "base/clock.h"
#include "test.h"

#define US 1000ull
#define MS 1000000ull

TEST(starts_at_the_base_window) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 0, 1000 * MS);
  CHECK_EQ(s.spinNs, (uint64_t)CCO_IDLE_YIELD_NS);
  CHECK(!cco_idle_past_window(&s, 1000 * MS + 199 * US));
  CHECK(cco_idle_past_window(&s, 1000 * MS + 200 * US));
}

TEST(work_inside_the_window_keeps_it) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 0, 0);
  cco_idle_work(&s, 150 * US);
  CHECK_EQ(s.spinNs, (uint64_t)CCO_IDLE_YIELD_NS);
  CHECK_EQ(s.idleSince, 150 * US);
}

TEST(a_gap_that_napped_widens_the_window_to_twice_the_gap) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 0, 0);
  cco_idle_work(&s, 300 * US); /* 300 us of quiet: past the 200 us window */
  CHECK_EQ(s.spinNs, 600 * US);
  /* The same rhythm again now finds the thread awake. */
  CHECK(!cco_idle_past_window(&s, 300 * US + 300 * US));
  cco_idle_work(&s, 600 * US);
  CHECK_EQ(s.spinNs, 600 * US);
}

TEST(the_window_stops_at_the_cap) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 0, 0);
  cco_idle_work(&s, 4 * MS);
  CHECK_EQ(s.spinNs, 5 * MS);
}

TEST(a_gap_past_the_cap_sets_it_back) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 0, 0);
  cco_idle_work(&s, 1 * MS);
  CHECK_EQ(s.spinNs, 2 * MS);
  cco_idle_work(&s, 1 * MS + 30 * MS); /* a quiet communicator: naps again */
  CHECK_EQ(s.spinNs, (uint64_t)CCO_IDLE_YIELD_NS);
}

TEST(cap_zero_keeps_the_base_window) {
  cco_idle s;
  cco_idle_init(&s, 0, 0, 0);
  cco_idle_work(&s, 300 * US);
  CHECK_EQ(s.spinNs, (uint64_t)CCO_IDLE_YIELD_NS);
}

TEST(keep_awake_gives_half_a_window) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 0, 0);
  cco_idle_keep_awake(&s, 1 * MS);
  CHECK(!cco_idle_past_window(&s, 1 * MS + 99 * US));
  CHECK(cco_idle_past_window(&s, 1 * MS + 100 * US));
}

TEST(steps_yield_inside_and_nap_past_the_window) {
  cco_idle s;
  uint64_t t0 = cco_now_ns();
  cco_idle_init(&s, 5 * MS, 0, t0);
  cco_idle_step(&s, t0 + 10 * US, 100000);
  CHECK_EQ(s.naps, 0ull);
  cco_idle_step(&s, t0 + 250 * US, 100000); /* one 20 us nap */
  CHECK_EQ(s.naps, 1ull);
  cco_idle_work(&s, t0 + 300 * US);
  CHECK_EQ(s.napWakes, 1ull);
  cco_idle_work(&s, t0 + 310 * US);
  CHECK_EQ(s.napWakes, 1ull); /* a yield before it, no nap */
}

TEST(polls_first_then_yields_then_naps) {
  cco_idle s;
  cco_idle_init(&s, 5 * MS, 50 * US, 0);
  CHECK_EQ(cco_idle_next(&s, 0), CCO_IDLE_POLL);
  CHECK_EQ(cco_idle_next(&s, 49 * US), CCO_IDLE_POLL);
  CHECK_EQ(cco_idle_next(&s, 50 * US), CCO_IDLE_YIELD);
  CHECK_EQ(cco_idle_next(&s, 199 * US), CCO_IDLE_YIELD);
  CHECK_EQ(cco_idle_next(&s, 200 * US), CCO_IDLE_NAP);
  /* The poll phase restarts at every work. */
  cco_idle_work(&s, 120 * US);
  CHECK_EQ(cco_idle_next(&s, 150 * US), CCO_IDLE_POLL);
  CHECK_EQ(cco_idle_next(&s, 170 * US), CCO_IDLE_YIELD);
  /* A poll phase longer than the window never postpones the nap. */
  cco_idle_init(&s, 0, 1 * MS, 0);
  CHECK_EQ(cco_idle_next(&s, 199 * US), CCO_IDLE_POLL);
  CHECK_EQ(cco_idle_next(&s, 200 * US), CCO_IDLE_NAP);
  /* 0: yield at once (the policy before the poll phase). */
  cco_idle_init(&s, 5 * MS, 0, 0);
  CHECK_EQ(cco_idle_next(&s, 0), CCO_IDLE_YIELD);
}

TEST(a_poll_step_neither_naps_nor_counts_a_nap_wake) {
  cco_idle s;
  uint64_t t0 = cco_now_ns();
  cco_idle_init(&s, 5 * MS, 50 * US, t0);
  cco_idle_step(&s, t0 + 10 * US, 100000);
  CHECK_EQ(s.naps, 0ull);
  CHECK(!s.napped);
  cco_idle_work(&s, t0 + 20 * US);
  CHECK_EQ(s.napWakes, 0ull);
}

static const char* lookup_name = "CCO_PROGRESS_SPIN_MAX_US";
static const char* lookup_value;
static const char* lookup(const char* name, void* arg) {
  (void)arg;
  return strcmp(name, lookup_name) == 0 ? lookup_value : NULL;
}

static ccoResult_t spin_max_for(const char* value, uint64_t* ns) {
  lookup_value = value;
  cco_env_reload_for_test(lookup, NULL);
  cco_errsink sink;
  cco_errsink_init(&sink);
  ccoResult_t res = cco_progress_spin_max(&sink, ns);
  cco_errsink_fini(&sink);
  return res;
}

TEST(the_cap_comes_from_the_environment) {
  uint64_t ns = 1;
  CHECK_EQ(spin_max_for(NULL, &ns), ccoSuccess);
  CHECK_EQ(ns, 5 * MS);
  CHECK_EQ(spin_max_for("0", &ns), ccoSuccess);
  CHECK_EQ(ns, 0ull);
  CHECK_EQ(spin_max_for("250", &ns), ccoSuccess);
  CHECK_EQ(ns, 250 * US);
  ns = 7;
  CHECK_EQ(spin_max_for("-1", &ns), ccoInvalidArgument);
  CHECK_EQ(ns, 7ull); /* untouched on error */
  CHECK_EQ(spin_max_for("20000000", &ns), ccoInvalidArgument);
  cco_env_reload_for_test(NULL, NULL);
}

static ccoResult_t busy_for(const char* value, bool gpu, uint64_t* ns) {
  lookup_name = "CCO_PROGRESS_BUSY_US";
  lookup_value = value;
  cco_env_reload_for_test(lookup, NULL);
  cco_errsink sink;
  cco_errsink_init(&sink);
  ccoResult_t res = cco_progress_busy(&sink, gpu, ns);
  cco_errsink_fini(&sink);
  lookup_name = "CCO_PROGRESS_SPIN_MAX_US";
  return res;
}

TEST(the_poll_phase_comes_from_the_environment_on_gpus_only) {
  uint64_t ns = 1;
  CHECK_EQ(busy_for(NULL, true, &ns), ccoSuccess);
  CHECK_EQ(ns, 0ull); /* off by default */
  CHECK_EQ(busy_for("50", true, &ns), ccoSuccess);
  CHECK_EQ(ns, 50 * US);
  CHECK_EQ(busy_for("50", false, &ns), ccoSuccess);
  CHECK_EQ(ns, 0ull); /* host platform: the ranks need the CPUs */
  CHECK_EQ(busy_for("7", true, &ns), ccoSuccess);
  CHECK_EQ(ns, 7 * US);
  ns = 3;
  CHECK_EQ(busy_for("-2", true, &ns), ccoInvalidArgument);
  CHECK_EQ(ns, 3ull);
  CHECK_EQ(busy_for("1000001", true, &ns), ccoInvalidArgument);
  cco_env_reload_for_test(NULL, NULL);
}

int main(void) { return RUN_TESTS(); }
