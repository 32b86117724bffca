/*
 * Example 02, host twin: the blog's LSA put on the host platform.
 *
 *   ccorun -n 4 build/bin/cco-example-02-lsa-put-host
 *
 * The same kernel body as examples/02_lsa_put.cu (ccoExampleLsaPut from
 * lsa_examples.h, then LSA barrier 0), run by one CPU thread per rank, which
 * the device API treats as a block of one thread. Each rank copies its
 * source block into every LSA peer's window at lsaRank * bytes; after the
 * barrier every rank checks that it holds every peer's block. Several
 * rounds with different data also show the barrier's epoch carrying over
 * from one "launch" to the next.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "example_util.h"
#include "lsa_examples.h"

#define BLOCK_BYTES (64u << 10) /* per rank; a multiple of 8 */
#define ROUNDS 3
#define BARRIER_TIMEOUT_NS (30ull * 1000000000ull) /* a lost peer fails the run instead of hanging it */

/* Word i of the block that the rank with LSA rank `writer` sends in `round`. */
static uint64_t pattern(int writer, int round, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)round << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

typedef struct {
  ccoDevComm dc;
  ccoWindow_t win;
  uint64_t srcOff, dstOff;
  ccoDevStatus_t status;
} put_kernel;

/* The "kernel": this thread is the whole block (thread 0 of 1). */
static void* put_kernel_thread(void* arg) {
  put_kernel* k = (put_kernel*)arg;
  ccoExampleLsaPut(k->win, k->srcOff, k->dstOff, BLOCK_BYTES, 0, 1);
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(&k->dc, 0, ccoCoopBlock);
  k->status = ccoLsaBarrierSyncTimeout(&bar, BARRIER_TIMEOUT_NS);
  ccoLsaBarrierSessionEnd(&bar);
  return NULL;
}

/* Number of words of the destination area that differ from what the peers sent. */
static size_t count_bad_words(const char* local, uint64_t dstOff, int lsaSize, int round) {
  size_t bad = 0, words = BLOCK_BYTES / 8;
  for (int p = 0; p < lsaSize; p++) {
    const uint64_t* block = (const uint64_t*)(local + dstOff + (size_t)p * BLOCK_BYTES);
    for (size_t i = 0; i < words; i++) bad += block[i] != pattern(p, round, i);
  }
  return bad;
}

/* One round: fill the source, launch the kernel thread, check what arrived. */
static int run_round(ccoComm* comm, put_kernel* k, char* local, int lsaRank, int lsaSize, int round) {
  uint64_t* src = (uint64_t*)(local + k->srcOff);
  for (size_t i = 0; i < BLOCK_BYTES / 8; i++) src[i] = pattern(lsaRank, round, i);
  pthread_t th;
  if (pthread_create(&th, NULL, put_kernel_thread, k) != 0) return 0;
  pthread_join(th, NULL);
  if (k->status != ccoDevSuccess) {
    fprintf(stderr, "rank %d: LSA barrier returned status %d\n", g_rank, (int)k->status);
    return 0;
  }
  size_t bad = count_bad_words(local, k->dstOff, lsaSize, round);
  if (bad) fprintf(stderr, "rank %d: round %d: %zu words wrong\n", g_rank, round, bad);
  /* Nobody starts the next round's puts into this window before this rank
   * has checked it. */
  return OK(ccoBarrierAll(comm)) && bad == 0;
}

int main(void) {
  /* CPU threads store into the windows, so they must live in host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int lsaRank = 0, lsaSize = 0;
  ccoCommRank(comm, &g_rank);
  ccoCommLsaRank(comm, &lsaRank);
  ccoCommLsaSize(comm, &lsaSize);

  put_kernel k;
  memset(&k, 0, sizeof(k));
  k.srcOff = 0;
  k.dstOff = BLOCK_BYTES; /* then lsaSize blocks, one per sender */
  void* local = NULL;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  int good = OK(ccoWindowRegisterAlloc(comm, BLOCK_BYTES * (size_t)(lsaSize + 1), &k.win, &local)) &&
             OK(ccoDevCommCreate(comm, &reqs, &k.dc));
  for (int round = 0; good && round < ROUNDS; round++) good = run_round(comm, &k, (char*)local, lsaRank, lsaSize, round);

  if (k.dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &k.dc))) good = 0;
  if (k.win && !OK(ccoWindowDeregister(comm, k.win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  printf("rank %d: %d rounds of a %u-byte LSA put to %d peers (host platform, one CPU thread, "
         "LSA barrier at block scope), every peer's block verified: %s\n",
         g_rank, ROUNDS, BLOCK_BYTES, lsaSize, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
