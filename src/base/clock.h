/*
 * How the library's background threads (the SDMA engine, the GDA proxy)
 * keep time and wait when they find nothing to do.
 */
#ifndef CCO_BASE_CLOCK_H_
#define CCO_BASE_CLOCK_H_

#include <sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <time.h>

static inline uint64_t cco_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Called first by each background thread (cco_platform_background_thread_start):
 * its naps last what they ask for.
 * Linux lets a thread's timed sleep run over by its timer slack, 50 us by
 * default: the 20 us nap below lasted 96 us on a 2-core VM (48 us with a
 * 1 us slack), and work a kernel posted while its engine napped waited that
 * long to be picked up. 1 us costs a few more timer interrupts while idle. */
static inline void cco_background_thread_init(void) { (void)prctl(PR_SET_TIMERSLACK, 1000ul, 0ul, 0ul, 0ul); }

/* How long after its last work a background thread only yields. */
#define CCO_IDLE_YIELD_NS 200000u

/* One idle step, idleNs after the last work: yield for the first 200 us
 * (work that follows work comes soon, and latency matters), then nap 20 us,
 * and after 10 ms of quiet nap longNapNs (a quiet communicator should not
 * cost a core). */
static inline void cco_idle_wait(uint64_t idleNs, long longNapNs) {
  if (idleNs < CCO_IDLE_YIELD_NS) {
    sched_yield();
    return;
  }
  struct timespec nap = {0, idleNs < 10000000 ? 20000 : longNapNs};
  nanosleep(&nap, NULL);
}

#endif /* CCO_BASE_CLOCK_H_ */
