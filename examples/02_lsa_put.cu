// Example 02: the blog's LSA put (docs/design.md), as a CUDA kernel.
//
//   ccorun -n 4 build/bin/cco-example-02-lsa-put      (several ranks on one GPU need MPS)
//
// One block per rank copies this rank's source block into every LSA peer's
// window at lsaRank * bytes (ccoExampleLsaPut from lsa_examples.h, shared with
// the host twin 02_lsa_put_host.c), then meets the peers' blocks at LSA
// barrier 0 (block scope), which makes the stores visible to them. The host
// then copies the destination area back with cudaMemcpy and checks every
// peer's block. Several rounds with different data also show the barrier's
// epoch carrying over from one launch to the next.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "example_util.h"
#include "lsa_examples.h"

#define BLOCK_BYTES (1u << 20)  // per rank; a multiple of 8
#define ROUNDS 3
#define THREADS 512
#define BARRIER_TIMEOUT_NS (30ull * 1000000000ull)  // a lost peer fails the run instead of hanging it

// Word i of the block that the rank with LSA rank `writer` sends in `round`.
static uint64_t pattern(int writer, int round, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)round << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

__global__ void lsa_put_kernel(ccoDevComm dc, ccoWindow_t win, uint64_t srcOff, uint64_t dstOff, size_t bytes,
                               ccoDevStatus_t* status) {
  ccoExampleLsaPut(win, srcOff, dstOff, bytes, threadIdx.x, blockDim.x);
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(&dc, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSyncTimeout(&bar, BARRIER_TIMEOUT_NS);
  ccoLsaBarrierSessionEnd(&bar);
  if (threadIdx.x == 0) *status = st;
}

// One round: fill the source, launch, copy the destination back and check it.
static int run_round(ccoComm* comm, const ccoDevComm& dc, ccoWindow_t win, char* local, int lsaRank, int lsaSize,
                     int round, uint64_t* host, ccoDevStatus_t* status) {
  const size_t words = BLOCK_BYTES / 8;
  const uint64_t srcOff = 0, dstOff = BLOCK_BYTES;  // then lsaSize blocks, one per sender
  for (size_t i = 0; i < words; i++) host[i] = pattern(lsaRank, round, i);
  if (!CUDA_OK(cudaMemcpy(local + srcOff, host, BLOCK_BYTES, cudaMemcpyHostToDevice))) return 0;
  lsa_put_kernel<<<1, THREADS>>>(dc, win, srcOff, dstOff, BLOCK_BYTES, status);
  if (!CUDA_OK(cudaGetLastError()) || !CUDA_OK(cudaDeviceSynchronize())) return 0;
  ccoDevStatus_t st = ccoDevSuccess;
  if (!CUDA_OK(cudaMemcpy(&st, status, sizeof(st), cudaMemcpyDeviceToHost))) return 0;
  if (st != ccoDevSuccess) {
    fprintf(stderr, "rank %d: LSA barrier returned status %d\n", g_rank, (int)st);
    return 0;
  }
  size_t bad = 0;
  for (int p = 0; p < lsaSize; p++) {
    if (!CUDA_OK(cudaMemcpy(host, local + dstOff + (size_t)p * BLOCK_BYTES, BLOCK_BYTES, cudaMemcpyDeviceToHost)))
      return 0;
    for (size_t i = 0; i < words; i++) bad += host[i] != pattern(p, round, i);
  }
  if (bad) fprintf(stderr, "rank %d: round %d: %zu words wrong\n", g_rank, round, bad);
  // Nobody starts the next round's puts into this window before this rank has checked it.
  return OK(ccoBarrierAll(comm)) && bad == 0;
}

int main(void) {
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int lsaRank = 0, lsaSize = 0;
  ccoPlatform_t platform = ccoPlatformHost;
  ccoCommRank(comm, &g_rank);
  ccoCommLsaRank(comm, &lsaRank);
  ccoCommLsaSize(comm, &lsaSize);
  ccoCommPlatform(comm, &platform);
  if (platform != ccoPlatformCuda) {
    fprintf(stderr, "rank %d: no CUDA platform here (CCO_PLATFORM, no GPU?); "
            "cco-example-02-lsa-put-host runs the same example on CPUs\n", g_rank);
    ccoCommDestroy(comm);
    printf("rank %d: LSA put kernel: FAILED (needs a GPU)\n", g_rank);
    return 1;
  }

  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  uint64_t* host = (uint64_t*)malloc(BLOCK_BYTES);
  ccoDevStatus_t* status = NULL;
  int good = host != NULL && CUDA_OK(cudaMalloc(&status, sizeof(*status))) &&
             OK(ccoWindowRegisterAlloc(comm, BLOCK_BYTES * (size_t)(lsaSize + 1), &win, &local)) &&
             OK(ccoDevCommCreate(comm, &reqs, &dc));
  // Each round's data differs, so what a round left behind cannot pass for
  // the next one's: no need to clear the destination.
  for (int round = 0; good && round < ROUNDS; round++)
    good = run_round(comm, dc, win, (char*)local, lsaRank, lsaSize, round, host, status);

  if (dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &dc))) good = 0;
  if (win && !OK(ccoWindowDeregister(comm, win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  if (status) cudaFree(status);
  free(host);
  printf("rank %d: %d rounds of a %u-byte LSA put kernel to %d peers (1 block of %d threads, "
         "LSA barrier at block scope), every peer's block verified: %s\n",
         g_rank, ROUNDS, BLOCK_BYTES, lsaSize, THREADS, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
