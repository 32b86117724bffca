/*
 * Example 05, host twin: GDA put + signal / wait on the host platform.
 *
 *   ccorun -n 4 --virtual-hosts 2 build/bin/cco-example-05-gda-put-host
 *   ccorun -n 2 build/bin/cco-example-05-gda-put-host      (one host: FULL)
 *
 * The same steps as examples/05_gda_put.cu, with one CPU thread per rank as
 * the block (a CPU thread is a block of one to the device API):
 *
 * 1. Each rank puts its block into the window of the next member of its
 *    rail team (its counterparts on the other hosts, which the default
 *    CROSSNODE connection type connects; on a single host the example asks
 *    for FULL and rings over every rank instead), with a signal
 *    increment bundled: the peer's signal slot 0 goes up once the data is
 *    there, never before.
 * 2. ccoGdaWaitSignal on slot 0 until it reaches the round's count: the
 *    previous member's block is here.
 * 3. ccoGdaFlush: this rank's own put is complete at its peer, so the
 *    source may be rewritten.
 *
 * Each rank checks the block it received every round.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "cco/cco_gda.h"
#include "example_util.h"

#define BLOCK_BYTES (1u << 20)
#define ROUNDS 4
#define WAIT_TIMEOUT_NS (60ull * 1000000000ull) /* a lost peer fails the run instead of hanging it */

static uint64_t pattern(int writer, int round, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)round << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

/* The kernel body. */
static ccoDevStatus_t gda_put_round(const ccoDevComm* dc, ccoWindow_t win, int peer, uint64_t expected) {
  ccoGda gda = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoGdaPut(&gda, peer, win, BLOCK_BYTES, win, 0, BLOCK_BYTES, ccoGdaSigInc(0),
                                CCO_GDA_NO_COUNTER, ccoCoopBlock, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaWaitSignal(&gda, 0, expected, WAIT_TIMEOUT_NS, ccoCoopBlock);
  if (st == ccoDevSuccess) st = ccoGdaFlush(&gda, ccoCoopBlock);
  return st;
}

typedef struct {
  ccoDevComm dc;
  ccoWindow_t win;
  int peer;
  uint64_t expected;
  ccoDevStatus_t status;
} put_kernel;

static void* put_kernel_thread(void* arg) {
  put_kernel* k = (put_kernel*)arg;
  k->status = gda_put_round(&k->dc, k->win, k->peer, k->expected);
  return NULL;
}

int main(void) {
  ccoComm* comm = NULL;
  /* CPU threads store into the windows, so they must live in host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  ccoResult_t res = ccoCommCreateFromEnv(0, &comm);
  if (res != ccoSuccess) {
    fprintf(stderr, "ccoCommCreateFromEnv failed: %s (%s)\n", ccoGetErrorString(res), ccoGetLastError(NULL));
    return 1;
  }
  int rank = 0, nRanks = 0, nNodes = 0, ok = 1;
  ccoCommRank(comm, &rank);
  ccoCommSize(comm, &nRanks);
  ccoCommNodeCount(comm, &nNodes);
  g_rank = rank;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = nNodes > 1 ? ccoGdaConnectionCrossNode : ccoGdaConnectionFull;
  reqs.gdaSignalCount = 1;
  put_kernel k;
  memset(&k, 0, sizeof(k));
  char* local = NULL;
  ok = OK(ccoWindowRegisterAlloc(comm, 2 * BLOCK_BYTES, &k.win, (void**)&local));
  ok = ok && OK(ccoDevCommCreate(comm, &reqs, &k.dc));
  /* A ring over the rail team (this rank's counterparts on the other hosts,
   * all GDA peers under CROSSNODE), or over the world on a single host. */
  ccoTeamKind_t kind = nNodes > 1 ? ccoTeamRail : ccoTeamWorld;
  ccoTeam team = k.dc.teams[kind];
  int next = ok ? ccoDevTeamRankToWorld(&k.dc, kind, (team.rank + 1) % team.nRanks) : -1;
  int prev = ok ? ccoDevTeamRankToWorld(&k.dc, kind, (team.rank + team.nRanks - 1) % team.nRanks) : -1;
  if (ok && (next == rank || team.nRanks < 2)) {
    fprintf(stderr, "rank %d: no GDA peer (team of %d)\n", rank, team.nRanks);
    ok = 0;
  }
  k.peer = next;
  for (int round = 0; ok && round < ROUNDS; round++) {
    uint64_t* src = (uint64_t*)local;
    for (size_t i = 0; i < BLOCK_BYTES / 8; i++) src[i] = pattern(rank, round, i);
    k.expected = (uint64_t)round + 1;
    pthread_t th;
    ok = pthread_create(&th, NULL, put_kernel_thread, &k) == 0;
    if (ok) pthread_join(th, NULL);
    if (ok && k.status != ccoDevSuccess) {
      fprintf(stderr, "rank %d: round %d: GDA put returned %s\n", rank, round, ccoDevStatusName(k.status));
      ok = 0;
    }
    const uint64_t* got = (const uint64_t*)(local + BLOCK_BYTES);
    for (size_t i = 0; ok && i < BLOCK_BYTES / 8; i++)
      if (got[i] != pattern(prev, round, i)) {
        fprintf(stderr, "rank %d: round %d: word %zu from rank %d is %#llx, expected %#llx\n", rank, round, i, prev,
                (unsigned long long)got[i], (unsigned long long)pattern(prev, round, i));
        ok = 0;
      }
    /* Nobody overwrites a block its peer still checks. */
    ok = ok && OK(ccoBarrierAll(comm));
  }
  if (ok) printf("rank %d: %d rounds of %u KiB GDA puts to rank %d verified\n", rank, ROUNDS, BLOCK_BYTES >> 10, next);
  if (k.dc.magic) ccoDevCommDestroy(comm, &k.dc);
  if (k.win) ccoWindowDeregister(comm, k.win);
  ccoCommDestroy(comm);
  return ok ? 0 : 1;
}
