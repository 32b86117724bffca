// Window benchmarks, one rank of a job started by ccorun (MPS for several
// ranks on one GPU):
//
//   ccorun -n N cco-bench-windows
//
// 1. ccoWindowRegister time, 1 MiB - 1 GiB (median of 5, slowest rank).
// 2. Rank 0: a copy kernel from its buffer into LSA peer 1's window, next to
//    cudaMemcpy device-to-device of the same bytes on the same GPU and the
//    same kernel copying locally (all in this run).
// One JSON line per measurement.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.cuh"
#include "cco/cco.h"

__global__ void copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  bench_copy_u4(dst, src, n);
}

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  cudaFree(0);
  ccoComm* comm = NULL;
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank, size, lsaSize;
  CCO_OK(ccoCommRank(comm, &rank));
  CCO_OK(ccoCommSize(comm, &size));
  CCO_OK(ccoCommLsaSize(comm, &lsaSize));
  double* all = (double*)calloc((size_t)size, sizeof(double));

  const size_t sizes[] = {1u << 20, 16u << 20, 256u << 20, 1u << 30};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    enum { reps = 5 };
    double reg[reps], alloc[reps];
    for (int r = 0; r < reps; r++) {
      void* p;
      ccoWindow_t win;
      CCO_OK(ccoBarrierAll(comm));
      double t0 = bench_now_s();
      CCO_OK(ccoMemAlloc(comm, sizes[s], &p));
      double t1 = bench_now_s();
      CCO_OK(ccoBarrierAll(comm));
      double t2 = bench_now_s();
      CCO_OK(ccoWindowRegister(comm, p, sizes[s], &win));
      double mine = bench_now_s() - t2;
      CCO_OK(ccoBootstrapAllGather(comm, &mine, all, sizeof(double)));
      double slowest = 0;
      for (int i = 0; i < size; i++) slowest = all[i] > slowest ? all[i] : slowest;
      reg[r] = slowest * 1e3;
      alloc[r] = (t1 - t0) * 1e3;
      CCO_OK(ccoWindowDeregister(comm, win));
      CCO_OK(ccoMemFree(comm, p));
    }
    qsort(reg, reps, sizeof(double), bench_cmp_double);
    qsort(alloc, reps, sizeof(double), bench_cmp_double);
    if (rank == 0)
      printf("{\"bench\":\"window_register\",\"ranks\":%d,\"bytes\":%zu,\"median_ms\":%.3f,"
             "\"min_ms\":%.3f,\"alloc_median_ms\":%.3f}\n",
             size, sizes[s], reg[reps / 2], reg[0], alloc[reps / 2]);
    fflush(stdout);
  }

  if (lsaSize >= 2) {
    const size_t bytes = 1u << 30;
    ccoWindow_t win;
    void* local;
    CCO_OK(ccoWindowRegisterAlloc(comm, bytes, &win, &local));
    CCO_OK(ccoBarrierAll(comm));
    if (rank == 0) {
      int peer1;
      void* peer;
      CCO_OK(ccoTeamRankToWorld(comm, ccoTeamLsa, 1, &peer1));
      CCO_OK(ccoGetPeerPtr(comm, local, peer1, &peer));
      void *src, *dst;
      cudaMalloc(&src, bytes);
      cudaMalloc(&dst, bytes);
      cudaMemset(src, 1, bytes);
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      const int iters = 10, trials = 7, threads = 1024;
      int sms = 0;
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
      int blocks = sms;
      size_t n = bytes / sizeof(uint4);
      // Warm-up once each; then trials that alternate the three copies, so
      // clock and thermal drift hit all three alike; medians are reported.
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice);
      copy_kernel<<<blocks, threads>>>((uint4*)peer, (const uint4*)src, n);
      copy_kernel<<<blocks, threads>>>((uint4*)dst, (const uint4*)src, n);
      cudaDeviceSynchronize();
      // kinds: 0 cudaMemcpy local, 1 kernel into the peer's window, 2 kernel
      // local, 3 cudaMemcpy into the peer's window
      double m[4][trials];
      for (int t = 0; t < trials; t++) {
        for (int kind = 0; kind < 4; kind++) {
          cudaEventRecord(e0);
          for (int i = 0; i < iters; i++) {
            if (kind == 0 || kind == 3)
              cudaMemcpyAsync(kind == 0 ? dst : peer, src, bytes, cudaMemcpyDeviceToDevice);
            else copy_kernel<<<blocks, threads>>>((uint4*)(kind == 1 ? peer : dst), (const uint4*)src, n);
          }
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          m[kind][t] = bench_elapsed_ms(e0, e1) / iters;
        }
      }
      for (int kind = 0; kind < 4; kind++) qsort(m[kind], trials, sizeof(double), bench_cmp_double);
      double memcpyMs = m[0][trials / 2], peerMs = m[1][trials / 2], localMs = m[2][trials / 2],
             peerMemcpyMs = m[3][trials / 2];
      cudaError_t err = cudaGetLastError();
      // Bandwidth as bytes copied per second (each byte read once, written once).
      double gbMemcpy = bytes / (memcpyMs * 1e-3) / 1e9, gbPeer = bytes / (peerMs * 1e-3) / 1e9,
             gbLocal = bytes / (localMs * 1e-3) / 1e9, gbPeerMemcpy = bytes / (peerMemcpyMs * 1e-3) / 1e9;
      printf("{\"bench\":\"peer_window_copy\",\"bytes\":%zu,\"kernel_to_peer_GBps\":%.1f,"
             "\"ref_cudaMemcpy_d2d_GBps\":%.1f,\"ratio\":%.3f,\"kernel_local_GBps\":%.1f,"
             "\"peer_over_local_kernel\":%.3f,\"cudaMemcpy_to_peer_GBps\":%.1f,\"error\":\"%s\"}\n",
             bytes, gbPeer, gbMemcpy, gbPeer / gbMemcpy, gbLocal, gbPeer / gbLocal, gbPeerMemcpy,
             cudaGetErrorString(err));
      cudaFree(src);
      cudaFree(dst);
    }
    CCO_OK(ccoBarrierAll(comm));
    CCO_OK(ccoWindowDeregister(comm, win));
  }
  free(all);
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
