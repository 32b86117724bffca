// Example 05: GDA put + signal / wait from a kernel (the guide's cpp/02).
//
//   ccorun -n 4 --virtual-hosts 2 build/bin/cco-example-05-gda-put
//   (two virtual hosts on one machine; several ranks on one GPU need MPS)
//
// One block per rank. The block puts this rank's block into the window of
// the next member of its rail team (its counterparts on the other hosts,
// connected by the default CROSSNODE connection type; on a single host the
// example asks for FULL and rings over every rank), with a signal increment
// bundled; the peer's signal slot 0 goes up only once the data is there.
// Then the block waits on its own slot 0 for the previous member's block and
// flushes, so its source may be rewritten. The kernel posts a descriptor;
// this rank's proxy thread moves the data over the network engine (staged
// through pinned buffers for GPU memory, see docs/gda.md). The host copies
// the received block back and checks it. examples/05_gda_put_host.c runs the
// same steps on CPU threads.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "cco/cco_gda.h"
#include "example_util.h"

#define BLOCK_BYTES (4u << 20)
#define ROUNDS 4
#define THREADS 256
#define WAIT_TIMEOUT_NS (60ull * 1000000000ull)  // a lost peer fails the run instead of hanging it

__host__ __device__ static uint64_t pattern(int writer, int round, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)round << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

__global__ void fill_block(uint64_t* dst, size_t words, int writer, int round) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = pattern(writer, round, i);
}

__global__ void gda_put_kernel(ccoDevComm dc, ccoWindow_t win, int peer, uint64_t expected, ccoDevStatus_t* status) {
  ccoGda gda = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  // Block scope, aggregate: the block issues one put (thread 0 posts after
  // the block has synced), and every thread gets the same status.
  ccoDevStatus_t st = ccoGdaPut(&gda, peer, win, BLOCK_BYTES, win, 0, BLOCK_BYTES, ccoGdaSigInc(0),
                                CCO_GDA_NO_COUNTER, ccoCoopBlock, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaWaitSignal(&gda, 0, expected, WAIT_TIMEOUT_NS, ccoCoopBlock);
  if (st == ccoDevSuccess) st = ccoGdaFlush(&gda, ccoCoopBlock);
  if (threadIdx.x == 0) *status = st;
}

int main(void) {
  // A kernel that waits on work of the proxy must not starve the launch of
  // other kernels: load every module at start (see docs/sdma.md, hazards).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int nNodes = 0;
  ccoPlatform_t platform = ccoPlatformHost;
  ccoCommRank(comm, &g_rank);
  ccoCommNodeCount(comm, &nNodes);
  ccoCommPlatform(comm, &platform);
  if (platform != ccoPlatformCuda) {
    fprintf(stderr, "rank %d: no CUDA platform here; cco-example-05-gda-put-host runs the same example on CPUs\n",
            g_rank);
    ccoCommDestroy(comm);
    return 1;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = nNodes > 1 ? ccoGdaConnectionCrossNode : ccoGdaConnectionFull;
  reqs.gdaSignalCount = 1;
  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  uint64_t* host = (uint64_t*)malloc(BLOCK_BYTES);
  ccoDevStatus_t* status = NULL;
  int good = host && CUDA_OK(cudaMalloc(&status, sizeof(*status))) &&
             OK(ccoWindowRegisterAlloc(comm, 2 * (size_t)BLOCK_BYTES, &win, &local)) &&
             OK(ccoDevCommCreate(comm, &reqs, &dc));
  ccoTeamKind_t kind = nNodes > 1 ? ccoTeamRail : ccoTeamWorld;
  ccoTeam team = dc.teams[kind];
  int next = -1, prev = -1;
  if (good) {
    ccoTeamRankToWorld(comm, kind, (team.rank + 1) % team.nRanks, &next);
    ccoTeamRankToWorld(comm, kind, (team.rank + team.nRanks - 1) % team.nRanks, &prev);
    if (team.nRanks < 2) {
      fprintf(stderr, "rank %d: no GDA peer (team of %d)\n", g_rank, team.nRanks);
      good = 0;
    }
  }
  for (int round = 0; good && round < ROUNDS; round++) {
    fill_block<<<64, 256>>>((uint64_t*)local, BLOCK_BYTES / 8, g_rank, round);
    gda_put_kernel<<<1, THREADS>>>(dc, win, next, (uint64_t)round + 1, status);
    good = CUDA_OK(cudaGetLastError()) && CUDA_OK(cudaDeviceSynchronize());
    ccoDevStatus_t st = ccoDevSuccess;
    good = good && CUDA_OK(cudaMemcpy(&st, status, sizeof(st), cudaMemcpyDeviceToHost));
    if (good && st != ccoDevSuccess) {
      fprintf(stderr, "rank %d: round %d: GDA put returned %s\n", g_rank, round, ccoDevStatusName(st));
      good = 0;
    }
    good = good && CUDA_OK(cudaMemcpy(host, (char*)local + BLOCK_BYTES, BLOCK_BYTES, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; good && i < BLOCK_BYTES / 8; i++) bad += host[i] != pattern(prev, round, i);
    if (bad) fprintf(stderr, "rank %d: round %d: %zu words from rank %d wrong\n", g_rank, round, bad, prev);
    good = good && bad == 0 && OK(ccoBarrierAll(comm));  // nobody overwrites a block a peer still checks
  }
  if (dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &dc))) good = 0;
  if (win && !OK(ccoWindowDeregister(comm, win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  if (status) cudaFree(status);
  free(host);
  printf("rank %d: %d rounds of %u KiB GDA puts with signal from a kernel to rank %d, every block verified: %s\n",
         g_rank, ROUNDS, BLOCK_BYTES >> 10, next, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
