/*
 * Example 04, host twin: the blog's SDMA all-gather on the host platform.
 *
 *   ccorun -n 4 build/bin/cco-example-04-sdma-allgather-host
 *
 * The same steps as examples/04_sdma_allgather.cu, with one CPU thread per
 * rank as the block (the device API treats a CPU thread as a block of one):
 *
 * 1. ccoSdmaPut of this rank's block into every LSA peer's window, its own
 *    included, at lsaRank * bytes, on queue 0 with ccoSdmaSignalRemote. The
 *    thread only posts descriptors; the engine thread of the communicator
 *    copies (memmove here, the GPU's copy engines on cuda) and then bumps the
 *    peer's signal slot (this rank, queue 0), never before the data.
 * 2. ccoSdmaWaitSignal on every peer's slot (peer, queue 0) of this rank
 *    until it reaches the round's count: that peer's block is here.
 * 3. ccoSdmaQuiet for every peer: this rank's own puts have all landed, so
 *    its source may be rewritten.
 *
 * Every rank then checks the whole gathered buffer. Signal slots count for
 * the life of the device communicator, so round r waits for r + 1; a host
 * barrier between rounds keeps a fast rank from overwriting a block that a
 * slow one still checks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "cco/cco_sdma.h"
#include "example_util.h"

#define BLOCK_BYTES (256u << 10) /* per rank */
#define ROUNDS 4
#define WAIT_TIMEOUT_NS (30ull * 1000000000ull) /* a lost peer fails the run instead of hanging it */

/* Word i of the block that the rank with LSA rank `writer` sends in `round`. */
static uint64_t pattern(int writer, int round, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)round << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

/* The kernel body: post, wait for every peer's block, quiet. */
static ccoDevStatus_t sdma_allgather(const ccoDevComm* dc, ccoWindow_t win, uint64_t srcOff, uint64_t dstOff,
                                     size_t bytes, uint64_t expected) {
  int me = dc->lsaRank, n = dc->lsaSize;
  ccoDevStatus_t st = ccoDevSuccess;
  /* Start with the next peer, so the ranks do not all target peer 0 at once. */
  for (int k = 0; k < n && st == ccoDevSuccess; k++)
    st = ccoSdmaPut(dc, (me + 1 + k) % n, win, dstOff + (uint64_t)me * bytes, win, srcOff, bytes, 0,
                    ccoSdmaSignalRemote, ccoCoopThread);
  for (int src = 0; src < n && st == ccoDevSuccess; src++)
    st = ccoSdmaWaitSignal(dc, src, 0, expected, WAIT_TIMEOUT_NS, ccoCoopBlock);
  for (int peer = 0; peer < n && st == ccoDevSuccess; peer++) st = ccoSdmaQuiet(dc, peer, ccoCoopBlock);
  return st;
}

typedef struct {
  ccoDevComm dc;
  ccoWindow_t win;
  uint64_t srcOff, dstOff, expected;
  ccoDevStatus_t status;
} allgather_kernel;

/* The "kernel": this thread is the whole block. */
static void* allgather_kernel_thread(void* arg) {
  allgather_kernel* k = (allgather_kernel*)arg;
  k->status = sdma_allgather(&k->dc, k->win, k->srcOff, k->dstOff, BLOCK_BYTES, k->expected);
  return NULL;
}

static int run_round(ccoComm* comm, allgather_kernel* k, char* local, int lsaRank, int lsaSize, int round) {
  uint64_t* src = (uint64_t*)(local + k->srcOff);
  for (size_t i = 0; i < BLOCK_BYTES / 8; i++) src[i] = pattern(lsaRank, round, i);
  k->expected = (uint64_t)round + 1; /* one signalled put from every peer per round */
  pthread_t th;
  if (pthread_create(&th, NULL, allgather_kernel_thread, k) != 0) return 0;
  pthread_join(th, NULL);
  if (k->status != ccoDevSuccess) {
    fprintf(stderr, "rank %d: round %d: SDMA all-gather returned status %d\n", g_rank, round, (int)k->status);
    return 0;
  }
  size_t bad = 0;
  for (int p = 0; p < lsaSize; p++) {
    const uint64_t* block = (const uint64_t*)(local + k->dstOff + (size_t)p * BLOCK_BYTES);
    for (size_t i = 0; i < BLOCK_BYTES / 8; i++) bad += block[i] != pattern(p, round, i);
  }
  if (bad) fprintf(stderr, "rank %d: round %d: %zu words wrong\n", g_rank, round, bad);
  /* Nobody puts the next round's block before every rank has checked this one. */
  return OK(ccoBarrierAll(comm)) && bad == 0;
}

int main(void) {
  /* The engine copies with memmove and CPU threads check: host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int lsaRank = 0, lsaSize = 0;
  ccoCommRank(comm, &g_rank);
  ccoCommLsaRank(comm, &lsaRank);
  ccoCommLsaSize(comm, &lsaSize);

  allgather_kernel k;
  memset(&k, 0, sizeof(k));
  k.srcOff = 0;
  k.dstOff = BLOCK_BYTES; /* then lsaSize blocks, one per sender */
  void* local = NULL;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.sdmaQueueCount = 1; /* one queue per peer is all this needs */
  int good = OK(ccoWindowRegisterAlloc(comm, BLOCK_BYTES * (size_t)(lsaSize + 1), &k.win, &local)) &&
             OK(ccoDevCommCreate(comm, &reqs, &k.dc));
  if (good && !k.dc.sdma) {
    fprintf(stderr, "rank %d: the device communicator has no SDMA (CCO_ENABLE_SDMA=0?)\n", g_rank);
    good = 0;
  }
  for (int round = 0; good && round < ROUNDS; round++)
    good = run_round(comm, &k, (char*)local, lsaRank, lsaSize, round);

  if (k.dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &k.dc))) good = 0;
  if (k.win && !OK(ccoWindowDeregister(comm, k.win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  printf("rank %d: %d rounds of an SDMA all-gather of %u-byte blocks over %d ranks (host platform, one CPU "
         "thread posting, signals waited at block scope), every block verified: %s\n",
         g_rank, ROUNDS, BLOCK_BYTES, lsaSize, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
