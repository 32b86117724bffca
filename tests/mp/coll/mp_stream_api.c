/*
 * One-sided calls ordered on a stream (ccoPutOnStream, ccoPutSignalOnStream,
 * ccoSignalOnStream, ccoBarrierOnStream, ccoQuietOnStream) on the host
 * platform, one rank of a job started by ccorun:
 *
 *   ccorun -n N mp_stream_api [--iters K]
 *
 * A ring of puts with an added signal, each checked after ccoStreamWaitSignal
 * and separated by ccoBarrierOnStream; signals set on every peer; adds of
 * every rank into one signal; puts into every peer made visible by the
 * barrier alone; argument errors; and a barrier whose peers never come
 * (fails with CCO_COLL_TIMEOUT, run with a short one). On several (virtual)
 * hosts the peers of other hosts go through GDA and the barrier is the
 * world barrier; a call to such a peer before the collectives' state exists
 * is refused.
 */
#include <stdint.h>

#include "../mp_util.h"

static int g_rank, g_size;
static ccoComm* g_comm;

#define OK(call) MP_CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(g_comm))

/* Window layout: signals first (one line of 64 slots), then data. */
#define SIG(i) ((size_t)(i) * sizeof(uint64_t))
#define DATA_OFF 4096
#define BLOCK 4096 /* bytes each rank puts */

static uint64_t pattern(int rank, int iter, size_t i) {
  return ((uint64_t)rank << 48) ^ ((uint64_t)iter << 24) ^ (uint64_t)i;
}

static void test_ring(ccoWindow_t win, char* local, int iters) {
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  size_t srcOff = DATA_OFF + (size_t)g_size * BLOCK; /* block g_size: the outgoing area */
  uint64_t* src = (uint64_t*)(local + srcOff);
  size_t bad = 0;
  for (int k = 1; k <= iters; k++) {
    for (size_t i = 0; i < BLOCK / 8; i++) src[i] = pattern(g_rank, k, i);
    OK(ccoPutSignalOnStream(g_comm, next, win, DATA_OFF + (size_t)g_rank * BLOCK, win, srcOff, BLOCK, win, SIG(0), 1,
                            ccoStreamSignalAdd, NULL));
    OK(ccoStreamWaitSignal(g_comm, win, SIG(0), (uint64_t)k, NULL));
    const uint64_t* got = (const uint64_t*)(local + DATA_OFF + (size_t)prev * BLOCK);
    for (size_t i = 0; i < BLOCK / 8; i++) bad += got[i] != pattern(prev, k, i);
    OK(ccoBarrierOnStream(g_comm, NULL)); /* nobody puts again before everyone checked */
  }
  MP_CHECK(bad == 0, "rank %d: ring of %d put+signal: %zu words wrong", g_rank, iters, bad);
}

static void test_set_and_add(ccoWindow_t win, char* local, int iters) {
  volatile uint64_t* sig = (volatile uint64_t*)local;
  for (int k = 1; k <= iters; k++) {
    /* Slot 1 + rank of every peer set to k, then wait for every peer's. */
    for (int p = 0; p < g_size; p++) OK(ccoSignalOnStream(g_comm, p, win, SIG(1 + g_rank), (uint64_t)k, ccoStreamSignalSet, NULL));
    for (int p = 0; p < g_size; p++) OK(ccoStreamWaitSignal(g_comm, win, SIG(1 + p), (uint64_t)k, NULL));
  }
  /* Every rank adds rank + 1 to rank 0's slot 63, iters times. */
  for (int k = 0; k < iters; k++) OK(ccoSignalOnStream(g_comm, 0, win, SIG(63), (uint64_t)g_rank + 1, ccoStreamSignalAdd, NULL));
  uint64_t want = (uint64_t)iters * (uint64_t)g_size * (uint64_t)(g_size + 1) / 2;
  if (g_rank == 0) {
    OK(ccoStreamWaitSignal(g_comm, win, SIG(63), want, NULL));
    MP_CHECK(sig[63] == want, "rank 0: adds of every rank: %llu, want %llu", (unsigned long long)sig[63],
             (unsigned long long)want);
  }
  OK(ccoBarrierOnStream(g_comm, NULL));
}

/* Puts into every peer, no signal: the barrier alone makes them visible. */
static void test_barrier_orders_puts(ccoWindow_t win, char* local, int iters) {
  size_t srcOff = DATA_OFF + (size_t)g_size * BLOCK;
  uint64_t* src = (uint64_t*)(local + srcOff);
  size_t bad = 0;
  for (int k = 1; k <= iters; k++) {
    src[0] = pattern(g_rank, k, 7);
    for (int p = 0; p < g_size; p++) OK(ccoPutOnStream(g_comm, p, win, DATA_OFF + (size_t)g_rank * BLOCK, win, srcOff, 8, NULL));
    OK(ccoQuietOnStream(g_comm, NULL));
    OK(ccoBarrierOnStream(g_comm, NULL));
    for (int p = 0; p < g_size; p++) bad += *(uint64_t*)(local + DATA_OFF + (size_t)p * BLOCK) != pattern(p, k, 7);
    OK(ccoBarrierOnStream(g_comm, NULL));
  }
  MP_CHECK(bad == 0, "rank %d: %d rounds of puts to every peer behind a barrier: %zu wrong", g_rank, iters, bad);
}

static void expect(ccoResult_t got, ccoResult_t want, const char* word, const char* what) {
  const char* text = ccoGetLastError(g_comm);
  MP_CHECK(got == want && strstr(text, word), "rank %d: %s: got %d '%s', want %d mentioning '%s'", g_rank, what,
           got, text, want, word);
}

static void test_errors(ccoWindow_t win, size_t winBytes) {
  MP_CHECK(ccoPutOnStream(NULL, 0, win, 0, win, 0, 8, NULL) == ccoInvalidArgument, "NULL communicator");
  expect(ccoPutOnStream(g_comm, -1, win, DATA_OFF, win, DATA_OFF, 8, NULL), ccoInvalidArgument, "is not in [0,",
         "peer -1");
  expect(ccoSignalOnStream(g_comm, g_size, win, SIG(0), 1, ccoStreamSignalSet, NULL), ccoInvalidArgument,
         "is not in [0,", "peer nRanks");
  expect(ccoPutOnStream(g_comm, 0, win, winBytes - 4, win, DATA_OFF, 8, NULL), ccoInvalidArgument, "outside the window",
         "destination past the window");
  expect(ccoPutOnStream(g_comm, 0, win, DATA_OFF, win, winBytes, 8, NULL), ccoInvalidArgument, "source",
         "source past the window");
  expect(ccoSignalOnStream(g_comm, 0, win, 4, 1, ccoStreamSignalSet, NULL), ccoInvalidArgument, "multiple of 8",
         "unaligned signal");
  expect(ccoPutSignalOnStream(g_comm, 0, win, DATA_OFF, win, DATA_OFF, 8, win, SIG(0), 1, (ccoStreamSignalOp_t)5, NULL),
         ccoInvalidArgument, "signal operation", "unknown signal operation");
  expect(ccoSignalOnStream(g_comm, 0, (ccoWindow_t)(uintptr_t)0x10, 0, 1, ccoStreamSignalSet, NULL), ccoInvalidArgument,
         "not a window", "not a window");
  OK(ccoPutOnStream(g_comm, 0, win, DATA_OFF, win, DATA_OFF, 0, NULL)); /* zero bytes: nothing to do */
}

/* A peer on another host, before the collectives' state exists: refused
 * with a clear error (the state is made collectively). On a communicator of
 * its own, which then makes it: every rank adds 1 to the first rank of
 * another host, and each rank checks the count of ranks that chose it. */
static void test_gda_needs_state(void) {
  ccoUniqueId ids[64];
  if (g_rank == 0) OK(ccoGetUniqueId(&ids[0]));
  ccoUniqueId mine = ids[0];
  OK(ccoBootstrapAllGather(g_comm, &mine, ids, sizeof(ccoUniqueId)));
  ccoComm* comm = NULL;
  OK(ccoCommCreate(ids[0], g_size, g_rank, 0, &comm));
  if (!comm) return;
  int node = 0, nodes[64];
  OK(ccoCommNodeIndex(comm, &node));
  OK(ccoBootstrapAllGather(comm, &node, nodes, sizeof(int)));
  int far[64];
  for (int r = 0; r < g_size; r++) {
    far[r] = -1;
    for (int q = 0; q < g_size && far[r] < 0; q++)
      if (nodes[q] != nodes[r]) far[r] = q;
  }
  ccoWindow_t win = NULL;
  void* local = NULL;
  MP_CHECK(ccoWindowRegisterAlloc(comm, 4096, &win, &local) == ccoSuccess, "rank %d: window: %s", g_rank,
           ccoGetLastError(comm));
  if (win && far[g_rank] >= 0) {
    ccoResult_t res = ccoSignalOnStream(comm, far[g_rank], win, 0, 1, ccoStreamSignalAdd, NULL);
    MP_CHECK(res == ccoInvalidUsage && strstr(ccoGetLastError(comm), "ccoBarrierOnStream"),
             "rank %d: a stream call to rank %d (another host) before the state: %d '%s'", g_rank, far[g_rank], res,
             ccoGetLastError(comm));
    MP_CHECK(ccoBarrierOnStream(comm, NULL) == ccoSuccess, "rank %d: barrier: %s", g_rank, ccoGetLastError(comm));
    MP_CHECK(ccoSignalOnStream(comm, far[g_rank], win, 0, 1, ccoStreamSignalAdd, NULL) == ccoSuccess,
             "rank %d: add to rank %d after the state: %s", g_rank, far[g_rank], ccoGetLastError(comm));
    MP_CHECK(ccoBarrierOnStream(comm, NULL) == ccoSuccess, "rank %d: barrier: %s", g_rank, ccoGetLastError(comm));
    uint64_t want = 0;
    for (int r = 0; r < g_size; r++) want += far[r] == g_rank;
    uint64_t got = __atomic_load_n((uint64_t*)local, __ATOMIC_ACQUIRE);
    MP_CHECK(got == want, "rank %d: adds from other hosts: %llu, want %llu", g_rank, (unsigned long long)got,
             (unsigned long long)want);
  }
  ccoCommDestroy(comm);
}

/* The last rank never arrives: the others' barrier fails within the timeout,
 * and the failure reaches the last rank. On a communicator of its own. */
static void test_missing_rank(void) {
  ccoUniqueId ids[64];
  if (g_rank == 0) OK(ccoGetUniqueId(&ids[0]));
  ccoUniqueId mine = ids[0];
  OK(ccoBootstrapAllGather(g_comm, &mine, ids, sizeof(ccoUniqueId)));
  ccoComm* comm = NULL;
  if (ccoCommCreate(ids[0], g_size, g_rank, 0, &comm) != ccoSuccess) return;
  MP_CHECK(ccoBarrierOnStream(comm, NULL) == ccoSuccess, "rank %d: first barrier: %s", g_rank, ccoGetLastError(comm));
  ccoResult_t async = ccoSuccess;
  double t0 = mp_now();
  if (g_rank == g_size - 1) {
    while (async == ccoSuccess && mp_now() - t0 < 30) {
      mp_sleep(0.05);
      ccoCommGetAsyncError(comm, &async);
    }
    MP_CHECK(async != ccoSuccess, "rank %d: the missing rank was not told", g_rank);
  } else {
    ccoResult_t res = ccoBarrierOnStream(comm, NULL);
    MP_CHECK((res == ccoTimeout || res == ccoRemoteError) && strstr(ccoGetLastError(comm), "CCO_COLL_TIMEOUT"),
             "rank %d: barrier without the last rank: %d '%s'", g_rank, res, ccoGetLastError(comm));
  }
  MP_CHECK(ccoBarrierOnStream(comm, NULL) != ccoSuccess, "rank %d: a barrier after the failure succeeded", g_rank);
  ccoCommDestroy(comm);
}

int main(int argc, char** argv) {
  int iters = 200, missing = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--missing-rank")) missing = 1;
    else {
      fprintf(stderr, "usage: %s [--iters K] [--missing-rank]\n", argv[0]);
      return 2;
    }
  }
  setenv("CCO_PLATFORM", "host", 1);
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "mp_stream_api: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  size_t winBytes = DATA_OFF + (size_t)(g_size + 1) * BLOCK;
  winBytes = (winBytes + 4095) & ~(size_t)4095;
  ccoWindow_t win = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, winBytes, &win, &local));
  int nNodes = 1;
  OK(ccoCommNodeCount(g_comm, &nNodes));
  if (win) {
    double t0 = mp_now();
    OK(ccoBarrierOnStream(g_comm, NULL)); /* makes the collectives' state, which peers of other hosts need */
    test_ring(win, local, iters);
    test_set_and_add(win, local, iters);
    test_barrier_orders_puts(win, local, iters);
    test_errors(win, winBytes);
    if (g_rank == 0)
      printf("mp_stream_api: %d ranks on %d hosts, %d iterations, %.2f s\n", g_size, nNodes, iters, mp_now() - t0);
  }
  if (nNodes > 1) test_gda_needs_state();
  if (missing && g_size > 1) test_missing_rank();
  OK(ccoCommDestroy(g_comm));
  return mp_finish("mp_stream_api");
}
