/*
 * Misuse a user can commit with a live communicator, each found by hostile
 * testing, each answered with a clear error instead of a crash, a stale
 * result or a wasted core:
 *
 *   deregister   ccoWindowDeregister of a live device communicator's own
 *                resource window is refused (it used to free it, and the
 *                next device barrier crashed)
 *   stale        a destroyed handle stays invalid when the next
 *                communicator is created (the address used to come back,
 *                and a second destroy through the old pointer killed the
 *                new communicator)
 *   lasterror    ccoGetLastError(comm), read from another thread, has the
 *                detail of a failed query, team call or stream wait (it
 *                used to go to the calling thread only)
 *   signal       an SDMA signal offset that is not a multiple of 8 is
 *                refused
 *   streamwait   ccoStreamWaitSignal on the host platform naps instead of
 *                spinning a core, and gives up once the communicator fails
 *   huge         ccoMemAlloc beyond the machine's memory is refused up front
 *
 *   mp_misuse    (one process; ranks are threads of it where needed)
 */
#include <pthread.h>

#include "base/env.h"
#include "mp_util.h"

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The env table is read once; a test that changes a variable reloads it. */
static void set_timeout(const char* seconds) {
  setenv("CCO_BOOTSTRAP_TIMEOUT", seconds, 1);
  cco_env_reload_for_test(NULL, NULL);
}

static ccoComm* create_one(size_t perRankVmm) {
  ccoUniqueId id;
  ccoComm* comm = NULL;
  if (!MP_OK(ccoGetUniqueId(&id)) || !MP_OK(ccoCommCreate(id, 1, 0, perRankVmm, &comm))) {
    fprintf(stderr, "create: %s\n", ccoGetLastError(NULL));
    return NULL;
  }
  return comm;
}

static void case_deregister(void) {
  ccoComm* comm = create_one(0);
  if (!comm) {
    MP_CHECK(0, "deregister: no communicator");
    return;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ccoDevComm dc;
  MP_CHECK(MP_OK(ccoDevCommCreate(comm, &reqs, &dc)), "deregister: devcomm: %s", ccoGetLastError(comm));
  ccoResult_t r = ccoWindowDeregister(comm, dc.resourceWindow);
  MP_CHECK(r == ccoInvalidUsage, "deregister: the resource window of a live device communicator: %s",
           ccoGetErrorString(r));
  MP_CHECK(strstr(ccoGetLastError(comm), "resource window") != NULL, "deregister: detail '%s'",
           ccoGetLastError(comm));
  ccoWindowDevice wd;
  MP_CHECK(MP_OK(ccoWindowGetInfo(comm, dc.resourceWindow, &wd, NULL)),
           "deregister: the resource window is gone after the refusal");
  ccoWindow_t resourceWindow = dc.resourceWindow;
  MP_CHECK(MP_OK(ccoDevCommDestroy(comm, &dc)), "deregister: devcomm destroy: %s", ccoGetLastError(comm));
  MP_CHECK(ccoWindowGetInfo(comm, resourceWindow, &wd, NULL) == ccoInvalidArgument,
           "deregister: the resource window outlived its device communicator");
  MP_CHECK(MP_OK(ccoCommDestroy(comm)), "deregister: destroy");
}

#define STALE_CYCLES 200

static void case_stale(void) {
  ccoComm* seen[STALE_CYCLES];
  int repeats = 0;
  for (int i = 0; i < STALE_CYCLES; i++) {
    ccoComm* comm = create_one(0);
    if (!comm) {
    MP_CHECK(0, "stale: create %d", i);
    return;
  }
    for (int k = 0; k < i; k++) repeats += seen[k] == comm;
    seen[i] = comm;
    MP_CHECK(MP_OK(ccoCommDestroy(comm)), "stale: destroy %d", i);
  }
  MP_CHECK(repeats == 0, "stale: %d of %d handles had the address of an earlier communicator", repeats,
           STALE_CYCLES);
  ccoComm* stale = seen[STALE_CYCLES - 1];
  ccoComm* live = create_one(0);
  if (!live) {
    MP_CHECK(0, "stale: last create");
    return;
  }
  int n = 0;
  MP_CHECK(ccoCommSize(stale, &n) == ccoInvalidArgument, "stale: ccoCommSize through a destroyed handle");
  MP_CHECK(ccoBarrierAll(stale) == ccoInvalidArgument, "stale: ccoBarrierAll through a destroyed handle");
  MP_CHECK(ccoCommDestroy(stale) == ccoInvalidArgument, "stale: a second ccoCommDestroy");
  MP_CHECK(MP_OK(ccoBarrierAll(live)) && MP_OK(ccoCommSize(live, &n)) && n == 1,
           "stale: the live communicator was hurt through the stale handle");
  MP_CHECK(MP_OK(ccoCommDestroy(live)), "stale: destroy");
}

typedef struct {
  ccoComm* comm;
  ccoWindow_t win;
  int step;
  ccoResult_t res;
} misuse_call;

/* Runs one failing call on a thread of its own, so the check below sees
 * the communicator's last error, not this thread's. */
static void* failing_call(void* arg) {
  misuse_call* c = arg;
  ccoTeam team;
  int out = 0;
  switch (c->step) {
    case 0: c->res = ccoCommTeam(c->comm, (ccoTeamKind_t)99, &team); break;
    case 1: c->res = ccoCommRank(c->comm, NULL); break;
    case 2: c->res = ccoTeamRankToWorld(c->comm, ccoTeamWorld, 7, &out); break;
    case 3: c->res = ccoTeamRankFromWorld(c->comm, ccoTeamLsa, 9, &out); break;
    case 4: c->res = ccoStreamWaitSignal(c->comm, c->win, 0, 1, NULL); break;
  }
  return NULL;
}

static void case_lasterror(void) {
  set_timeout("0.3"); /* the stream wait's timeout */
  ccoComm* comm = create_one(0);
  set_timeout("60");
  if (!comm) {
    MP_CHECK(0, "lasterror: no communicator");
    return;
  }
  void* local = NULL;
  ccoWindow_t win = NULL;
  MP_CHECK(MP_OK(ccoWindowRegisterAlloc(comm, 4096, &win, &local)), "lasterror: window");
  static const struct {
    ccoResult_t want;
    const char* detail;
  } steps[] = {{ccoInvalidArgument, "unknown team kind"},
               {ccoInvalidArgument, "is NULL"},
               {ccoInvalidArgument, "out of range"},
               {ccoInvalidArgument, "not a member"},
               {ccoTimeout, "stayed below"}};
  for (int s = 0; s < (int)(sizeof(steps) / sizeof(steps[0])); s++) {
    misuse_call c = {comm, win, s, ccoSuccess};
    pthread_t t;
    pthread_create(&t, NULL, failing_call, &c);
    pthread_join(t, NULL);
    const char* text = ccoGetLastError(comm);
    MP_CHECK(c.res == steps[s].want && strstr(text, steps[s].detail) != NULL,
             "lasterror step %d: %s, ccoGetLastError(comm) '%s' (wanted %s and '%s')", s,
             ccoGetErrorString(c.res), text, ccoGetErrorString(steps[s].want), steps[s].detail);
  }
  MP_CHECK(MP_OK(ccoWindowDeregister(comm, win)) && MP_OK(ccoCommDestroy(comm)), "lasterror: teardown");
}

static void case_signal(void) {
  ccoComm* comm = create_one(0);
  if (!comm) {
    MP_CHECK(0, "signal: no communicator");
    return;
  }
  void* local = NULL;
  ccoWindow_t win = NULL;
  MP_CHECK(MP_OK(ccoWindowRegisterAlloc(comm, 4096, &win, &local)), "signal: window");
  ccoResult_t put = ccoSdmaPutAsync(comm, 0, win, 64, win, 0, 64, win, 4, 1, NULL);
  MP_CHECK(put == ccoInvalidArgument && strstr(ccoGetLastError(comm), "multiple of 8"),
           "signal: put with a signal at offset 4: %s (%s)", ccoGetErrorString(put), ccoGetLastError(comm));
  ccoResult_t wait = ccoStreamWaitSignal(comm, win, 12, 0, NULL);
  MP_CHECK(wait == ccoInvalidArgument, "signal: wait on offset 12: %s", ccoGetErrorString(wait));
  MP_CHECK(MP_OK(ccoSdmaPutAsync(comm, 0, win, 64, win, 0, 64, win, 8, 1, NULL)),
           "signal: an aligned signal is refused: %s", ccoGetLastError(comm));
  MP_CHECK(MP_OK(ccoWindowDeregister(comm, win)) && MP_OK(ccoCommDestroy(comm)), "signal: teardown");
}

typedef struct {
  ccoComm* comm;
  ccoWindow_t win;
  ccoResult_t res;
  double cpu, wall;
} wait_call;

static void* timed_wait(void* arg) {
  wait_call* w = arg;
  double cpu0 = thread_cpu_s(), t0 = mp_now();
  w->res = ccoStreamWaitSignal(w->comm, w->win, 0, 1, NULL);
  w->cpu = thread_cpu_s() - cpu0;
  w->wall = mp_now() - t0;
  return NULL;
}

static void case_streamwait(void) {
  set_timeout("1");
  ccoComm* comm = create_one(0);
  set_timeout("60");
  if (!comm) {
    MP_CHECK(0, "streamwait: no communicator");
    return;
  }
  void* local = NULL;
  ccoWindow_t win = NULL;
  MP_CHECK(MP_OK(ccoWindowRegisterAlloc(comm, 4096, &win, &local)), "streamwait: window");
  /* A signal that never comes: the whole 1 s timeout, mostly asleep. */
  wait_call w = {comm, win, ccoSuccess, 0, 0};
  timed_wait(&w);
  MP_CHECK(w.res == ccoTimeout && w.wall >= 0.9, "streamwait: %s after %.2f s", ccoGetErrorString(w.res),
           w.wall);
  MP_CHECK(w.cpu < 0.25 * w.wall, "streamwait: the wait used %.2f s of CPU in %.2f s", w.cpu, w.wall);
  printf("  streamwait: a %.2f s wait used %.3f s of CPU\n", w.wall, w.cpu);
  /* The communicator fails meanwhile: the wait gives up at once. */
  pthread_t t;
  pthread_create(&t, NULL, timed_wait, &w);
  mp_sleep(0.1);
  ccoCommAbort(comm);
  pthread_join(t, NULL);
  MP_CHECK(w.res != ccoSuccess && w.res != ccoTimeout && w.wall < 0.5,
           "streamwait: after an abort the wait returned %s after %.2f s", ccoGetErrorString(w.res), w.wall);
  ccoWindowDeregister(comm, win);
  MP_CHECK(MP_OK(ccoCommDestroy(comm)), "streamwait: destroy");
}

static void case_huge(void) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  size_t machine = (size_t)pages * (size_t)pageSize, slot = (size_t)1 << 40;
  if (pages <= 0 || machine >= slot) {
    printf("  huge: skipped, this machine has %zu bytes of memory\n", machine);
    return;
  }
  ccoComm* comm = create_one(slot);
  if (!comm) {
    MP_CHECK(0, "huge: no communicator with a 1 TiB slot");
    return;
  }
  void* p = NULL;
  ccoResult_t r = ccoMemAlloc(comm, slot, &p);
  MP_CHECK(r == ccoOutOfMemory && p == NULL, "huge: ccoMemAlloc of 1 TiB on a machine of %zu bytes: %s", machine,
           ccoGetErrorString(r));
  MP_CHECK(strstr(ccoGetLastError(comm), "machine's memory") != NULL, "huge: detail '%s'", ccoGetLastError(comm));
  MP_CHECK(MP_OK(ccoMemAlloc(comm, 1 << 20, &p)) && MP_OK(ccoMemFree(comm, p)), "huge: a small allocation");
  MP_CHECK(MP_OK(ccoCommDestroy(comm)), "huge: destroy");
}

int main(void) {
  setenv("CCO_PLATFORM", "host", 1); /* before the first cco call */
  setenv("CCO_BOOTSTRAP_TIMEOUT", "60", 1);
  case_deregister();
  case_stale();
  case_lasterror();
  case_signal();
  case_streamwait();
  case_huge();
  return mp_finish("mp_misuse");
}
