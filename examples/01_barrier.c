/*
 * Example 01: the host lifecycle of the guide, with no kernel.
 *
 *   ccorun -n 4 build/bin/cco-example-01-barrier
 *
 * Every rank creates a communicator from the launcher's environment,
 * allocates symmetric memory, registers it as a window, creates a device
 * communicator (one LSA barrier, no network endpoints), meets the others in
 * a host barrier, and destroys everything in reverse order. Around the
 * barrier each rank also checks that it really waited for the others: a
 * rank that reaches the barrier late would otherwise go unnoticed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cco/cco.h"
#include "example_util.h"

#define WINDOW_BYTES (1u << 20)

/* Prints the failed call and the library's detail; returns 0 on failure. */
/* Rank 1 sleeps before the barrier; everybody must leave it after that
 * sleep, so every rank's time in the barrier covers most of it. */
static int barrier_waits_for_everyone(ccoComm* comm, int nRanks) {
  const unsigned lateUs = 200000;
  if (nRanks > 1 && g_rank == 1) usleep(lateUs);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!OK(ccoBarrierAll(comm))) return 0;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double waitedUs = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3;
  /* Rank 1 itself did not wait; the others started at most a little before. */
  if (nRanks > 1 && g_rank != 1 && waitedUs < lateUs / 2) {
    fprintf(stderr, "rank %d: left the barrier after %.0f us, before late rank 1 arrived\n", g_rank, waitedUs);
    return 0;
  }
  return 1;
}

int main(void) {
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int nRanks = 0, lsaSize = 0;
  ccoCommRank(comm, &g_rank);
  ccoCommSize(comm, &nRanks);
  ccoCommLsaSize(comm, &lsaSize);

  void* ptr = NULL;
  ccoWindow_t win = NULL;
  ccoDevComm devComm;
  memset(&devComm, 0, sizeof(devComm)); /* magic 0: not created */
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.gdaConnectionType = ccoGdaConnectionNone;

  int good = OK(ccoMemAlloc(comm, WINDOW_BYTES, &ptr)) && OK(ccoWindowRegister(comm, ptr, WINDOW_BYTES, &win)) &&
             OK(ccoDevCommCreate(comm, &reqs, &devComm));
  good = good && devComm.rank == g_rank && devComm.worldSize == nRanks && devComm.lsaSize == lsaSize &&
         devComm.lsaBarrierCount == 1;
  good = good && barrier_waits_for_everyone(comm, nRanks);

  /* Reverse order of creation; each step runs even after a failure so the
   * example never leaks, and the communicator releases whatever is left. */
  if (devComm.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &devComm))) good = 0;
  if (win && !OK(ccoWindowDeregister(comm, win))) good = 0;
  if (ptr && !OK(ccoMemFree(comm, ptr))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;

  printf("rank %d/%d: checked create, alloc %u bytes, window, device communicator (1 LSA barrier), "
         "a host barrier that waited for a late rank, destroy in reverse order: %s\n",
         g_rank, nRanks, WINDOW_BYTES, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
