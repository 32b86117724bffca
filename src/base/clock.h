/*
 * How the library's background threads (the SDMA engine, the GDA proxy)
 * keep time and wait when they find nothing to do.
 */
#ifndef CCO_BASE_CLOCK_H_
#define CCO_BASE_CLOCK_H_

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <time.h>

#include "base/env.h"
#include "base/error.h"

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

/* How long after its last work a background thread only yields, at least. */
#define CCO_IDLE_YIELD_NS 200000u

/* A nap idleNs after the last work: 20 us, and after 10 ms of quiet
 * longNapNs (a quiet communicator should not cost a core). */
static inline void cco_idle_nap(uint64_t idleNs, long longNapNs) {
  struct timespec nap = {0, idleNs < 10000000 ? 20000 : longNapNs};
  nanosleep(&nap, NULL);
}

/* One idle step, idleNs after the last work: yield for the first 200 us
 * (work that follows work comes soon, and latency matters), then nap. */
static inline void cco_idle_wait(uint64_t idleNs, long longNapNs) {
  if (idleNs < CCO_IDLE_YIELD_NS) {
    sched_yield();
    return;
  }
  cco_idle_nap(idleNs, longNapNs);
}

/*
 * The idle policy of a progress thread (the SDMA engine, the GDA proxy):
 * after its last work it yields for a window, then naps. A fixed 200 us
 * window made every burst that came after a longer gap wait out a nap
 * (20 us asked, more with the wake-up): a kernel that posts its copies
 * every 0.3-0.4 ms, with compute or another transfer in between, paid it
 * every time (H100, 2026-12-07: 16 MiB x 32 SDMA puts 0.91 of
 * cudaMemcpyAsync). So the window follows the rhythm of the work: work that
 * arrives while the thread naps, after a gap under maxSpinNs, widens the
 * window to twice that gap; a gap past maxSpinNs sets it back to 200 us, so
 * a communicator used every few tens of milliseconds or less often still
 * naps between uses. maxSpinNs 0 keeps the window at 200 us.
 */
typedef struct {
  uint64_t idleSince; /* the last work, or where a stream still busy set it */
  uint64_t spinNs;    /* the current window */
  uint64_t maxSpinNs;
  uint64_t busyNs;    /* the start of the window polled without system calls */
  uint64_t naps;      /* naps taken, for the progress profile */
  uint64_t napWakes;  /* work found right after a nap: pickups a nap made late */
  bool napped;        /* the last idle step was a nap */
} cco_idle;

/* CCO_PROGRESS_SPIN_MAX_US in nanoseconds; a negative value is an error. */
static inline ccoResult_t cco_progress_spin_max(cco_errsink* err, uint64_t* ns) {
  int64_t us = cco_env_int(CCO_ENV_ID_CCO_PROGRESS_SPIN_MAX_US);
  if (us < 0 || us > 10000000)
    return cco_error(err, ccoInvalidArgument, CCO_SUBSYS_PROXY, "CCO_PROGRESS_SPIN_MAX_US=%lld: must be 0..10000000",
                     (long long)us);
  *ns = (uint64_t)us * 1000u;
  return ccoSuccess;
}

/* CCO_PROGRESS_BUSY_US in nanoseconds, for a thread serving a GPU (0 on
 * the host platform, whose ranks share the CPUs with these threads). */
static inline ccoResult_t cco_progress_busy(cco_errsink* err, bool gpu, uint64_t* ns) {
  int64_t us = cco_env_int(CCO_ENV_ID_CCO_PROGRESS_BUSY_US);
  if (us < 0 || us > 1000000)
    return cco_error(err, ccoInvalidArgument, CCO_SUBSYS_PROXY, "CCO_PROGRESS_BUSY_US=%lld: must be 0..1000000",
                     (long long)us);
  *ns = gpu ? (uint64_t)us * 1000u : 0;
  return ccoSuccess;
}

static inline void cco_idle_init(cco_idle* s, uint64_t maxSpinNs, uint64_t busyNs, uint64_t now) {
  s->idleSince = now;
  s->spinNs = CCO_IDLE_YIELD_NS;
  s->maxSpinNs = maxSpinNs;
  s->busyNs = busyNs;
  s->naps = s->napWakes = 0;
  s->napped = false;
}

/* Whether the thread is past its window, so that its next idle step naps. */
static inline bool cco_idle_past_window(const cco_idle* s, uint64_t now) { return now - s->idleSince >= s->spinNs; }

/* The thread found work at `now`. */
static inline void cco_idle_work(cco_idle* s, uint64_t now) {
  uint64_t gap = now - s->idleSince;
  if (s->napped) s->napWakes++;
  if (gap > s->spinNs) { /* it napped during this gap */
    uint64_t wide = 2 * gap;
    s->spinNs = gap < s->maxSpinNs ? (wide < s->maxSpinNs ? wide : s->maxSpinNs) : CCO_IDLE_YIELD_NS;
  }
  s->idleSince = now;
  s->napped = false;
}

/* Something the thread waits for is still running (copies on its streams):
 * not work, but the thread stays awake for half a window more. */
static inline void cco_idle_keep_awake(cco_idle* s, uint64_t now) { s->idleSince = now - s->spinNs / 2; }

/* A pause in a polling loop: tells the core that this is a spin (the
 * sibling hyperthread gets the pipeline, the loop exits it faster). */
static inline void cco_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

typedef enum {
  CCO_IDLE_POLL,  /* poll again at once: work comes soon */
  CCO_IDLE_YIELD, /* let another thread run first */
  CCO_IDLE_NAP,   /* sleep */
} cco_idle_action;

/* What the next idle step does: poll for the first busyNs after the last
 * work, yield for the rest of the window, nap past it. The next work of a
 * ping-pong comes a round trip later (about 12 us for an SDMA put and its
 * signal), and a yield is a system call per poll: about a microsecond in a
 * virtual machine, more in a sandbox, added to the pickup of that work. */
static inline cco_idle_action cco_idle_next(const cco_idle* s, uint64_t now) {
  uint64_t idleNs = now - s->idleSince;
  if (idleNs >= s->spinNs) return CCO_IDLE_NAP;
  return idleNs < s->busyNs ? CCO_IDLE_POLL : CCO_IDLE_YIELD;
}

/* One idle step (cco_idle_next); a nap lasts 20 us, longNapNs after 10 ms
 * of quiet. */
static inline void cco_idle_step(cco_idle* s, uint64_t now, long longNapNs) {
  switch (cco_idle_next(s, now)) {
  case CCO_IDLE_POLL:
    cco_cpu_relax();
    s->napped = false;
    return;
  case CCO_IDLE_YIELD:
    sched_yield();
    s->napped = false;
    return;
  case CCO_IDLE_NAP:
    break;
  }
  cco_idle_nap(now - s->idleSince, longNapNs);
  s->naps++;
  s->napped = true;
}

#endif /* CCO_BASE_CLOCK_H_ */
