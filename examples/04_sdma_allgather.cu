// Example 04: the blog's SDMA all-gather (docs/design.md), as a CUDA kernel.
//
//   ccorun -n 4 build/bin/cco-example-04-sdma-allgather      (several ranks on one GPU need MPS)
//
// One block per rank. Thread 0 posts, with ccoSdmaPut on queue 0 and a remote
// signal, a copy of this rank's block into every LSA peer's window (its own
// included) at lsaRank * bytes. The SMs copy nothing: the communicator's
// engine thread issues each descriptor on the copy engines (cuMemcpyAsync on
// the ring's stream) and then, in stream order, bumps the peer's signal slot
// (this rank, queue 0). The whole block then waits with ccoSdmaWaitSignal
// (block scope) until every peer's slot has reached the round's count, which
// means that peer's block is here, and calls ccoSdmaQuiet for every peer, so
// this rank's source may be rewritten. The host copies the gathered buffer
// back and checks every block. examples/04_sdma_allgather_host.c runs the
// same steps on CPU threads.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "cco/cco_sdma.h"
#include "example_util.h"

#define BLOCK_BYTES (4u << 20)  // per rank
#define ROUNDS 4
#define THREADS 256
#define WAIT_TIMEOUT_NS (30ull * 1000000000ull)  // a lost peer fails the run instead of hanging it

// Word i of the block that the rank with LSA rank `writer` sends in `round`.
__host__ __device__ static uint64_t pattern(int writer, int round, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)round << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

__global__ void fill_block(uint64_t* dst, size_t words, int writer, int round) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = pattern(writer, round, i);
}

__global__ void sdma_allgather_kernel(ccoDevComm dc, ccoWindow_t win, uint64_t srcOff, uint64_t dstOff, size_t bytes,
                                      uint64_t expected, ccoDevStatus_t* status) {
  __shared__ ccoDevStatus_t posted;
  int me = dc.lsaRank, n = dc.lsaSize;
  if (threadIdx.x == 0) {  // thread 0 of the block posts, alone (thread scope)
    ccoDevStatus_t st = ccoDevSuccess;
    for (int k = 0; k < n && st == ccoDevSuccess; k++)
      st = ccoSdmaPut(&dc, (me + 1 + k) % n, win, dstOff + (uint64_t)me * bytes, win, srcOff, bytes, 0,
                      ccoSdmaSignalRemote, ccoCoopThread);
    posted = st;
  }
  __syncthreads();
  // Block scope: every thread calls, and every thread gets the same status,
  // so the loops stay uniform across the block.
  ccoDevStatus_t st = posted;
  for (int src = 0; src < n && st == ccoDevSuccess; src++)
    st = ccoSdmaWaitSignal(&dc, src, 0, expected, WAIT_TIMEOUT_NS, ccoCoopBlock);
  for (int peer = 0; peer < n && st == ccoDevSuccess; peer++) st = ccoSdmaQuiet(&dc, peer, ccoCoopBlock);
  if (threadIdx.x == 0) *status = st;
}

static int run_round(ccoComm* comm, const ccoDevComm& dc, ccoWindow_t win, char* local, int lsaRank, int lsaSize,
                     int round, uint64_t* host, ccoDevStatus_t* status) {
  const size_t words = BLOCK_BYTES / 8;
  const uint64_t srcOff = 0, dstOff = BLOCK_BYTES;  // then lsaSize blocks, one per sender
  fill_block<<<64, 256>>>((uint64_t*)(local + srcOff), words, lsaRank, round);
  // Signal slots count for the life of the device communicator: one
  // signalled put from every peer per round.
  sdma_allgather_kernel<<<1, THREADS>>>(dc, win, srcOff, dstOff, BLOCK_BYTES, (uint64_t)round + 1, status);
  if (!CUDA_OK(cudaGetLastError()) || !CUDA_OK(cudaDeviceSynchronize())) return 0;
  ccoDevStatus_t st = ccoDevSuccess;
  if (!CUDA_OK(cudaMemcpy(&st, status, sizeof(st), cudaMemcpyDeviceToHost))) return 0;
  if (st != ccoDevSuccess) {
    fprintf(stderr, "rank %d: round %d: SDMA all-gather returned status %d\n", g_rank, round, (int)st);
    return 0;
  }
  size_t bad = 0;
  for (int p = 0; p < lsaSize; p++) {
    if (!CUDA_OK(cudaMemcpy(host, local + dstOff + (size_t)p * BLOCK_BYTES, BLOCK_BYTES, cudaMemcpyDeviceToHost)))
      return 0;
    for (size_t i = 0; i < words; i++) bad += host[i] != pattern(p, round, i);
  }
  if (bad) fprintf(stderr, "rank %d: round %d: %zu words wrong\n", g_rank, round, bad);
  // Nobody puts the next round's block before every rank has checked this one.
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
            "cco-example-04-sdma-allgather-host runs the same example on CPUs\n", g_rank);
    ccoCommDestroy(comm);
    printf("rank %d: SDMA all-gather kernel: FAILED (needs a GPU)\n", g_rank);
    return 1;
  }

  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.sdmaQueueCount = 1;  // one queue per peer is all this needs
  uint64_t* host = (uint64_t*)malloc(BLOCK_BYTES);
  ccoDevStatus_t* status = NULL;
  int good = host != NULL && CUDA_OK(cudaMalloc(&status, sizeof(*status))) &&
             OK(ccoWindowRegisterAlloc(comm, BLOCK_BYTES * (size_t)(lsaSize + 1), &win, &local)) &&
             OK(ccoDevCommCreate(comm, &reqs, &dc));
  if (good && !dc.sdma) {
    fprintf(stderr, "rank %d: the device communicator has no SDMA (CCO_ENABLE_SDMA=0?)\n", g_rank);
    good = 0;
  }
  // Each round's data differs, so what a round left behind cannot pass for
  // the next one's: no need to clear the destination.
  for (int round = 0; good && round < ROUNDS; round++)
    good = run_round(comm, dc, win, (char*)local, lsaRank, lsaSize, round, host, status);

  if (dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &dc))) good = 0;
  if (win && !OK(ccoWindowDeregister(comm, win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  if (status) cudaFree(status);
  free(host);
  printf("rank %d: %d rounds of an SDMA all-gather of %u-byte blocks over %d ranks (thread 0 posts to the copy "
         "engines, block-scope signal waits), every block verified: %s\n",
         g_rank, ROUNDS, BLOCK_BYTES, lsaSize, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
