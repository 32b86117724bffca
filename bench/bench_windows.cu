// Window benchmarks, one rank of a job started by ccorun (MPS for several
// ranks on one GPU):
//
//   ccorun -n N cco-bench-windows [-b 1M] [-e 1G] [-f 16] [-n N] [-w N] [register] [copy]
//
// 1. register: ccoWindowRegister time per size (median of -n, default 5;
//    slowest rank), and the ccoMemAlloc of the same bytes beside it.
// 2. copy: rank 0, per size: a copy kernel from its buffer into LSA peer 1's
//    window, next to cudaMemcpy device-to-device of the same bytes on the
//    same GPU, the same kernel copying locally, and cudaMemcpy into the
//    peer's window (all in this run; medians of 7 alternating trials of -n
//    copies, default 10).
// One JSON line per measurement (bench_json.h).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.cuh"
#include "cco/cco.h"

static ccoComm* comm;

__global__ void copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  bench_copy_u4(dst, src, n);
}

static const char* const kOps[] = {"register", "copy", NULL};

static void bench_register(const bench_sweep* sw, int reps, int size, int rank) {
  for (unsigned long long bytes = sw->min; bytes; bytes = bench_sweep_next(sw, bytes)) {
    double* reg = (double*)calloc((size_t)reps, sizeof(double));
    double* alloc = (double*)calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) {
      void* p;
      ccoWindow_t win;
      CCO_OK(ccoBarrierAll(comm));
      double t0 = bench_now_s();
      CCO_OK(ccoMemAlloc(comm, bytes, &p));
      double t1 = bench_now_s();
      CCO_OK(ccoBarrierAll(comm));
      double t2 = bench_now_s();
      CCO_OK(ccoWindowRegister(comm, p, bytes, &win));
      double mine = bench_now_s() - t2;
      reg[r] = bench_slowest(comm, mine, size) * 1e3;
      alloc[r] = (t1 - t0) * 1e3;
      CCO_OK(ccoWindowDeregister(comm, win));
      CCO_OK(ccoMemFree(comm, p));
    }
    double minMs = reg[0];
    for (int r = 1; r < reps; r++) minMs = reg[r] < minMs ? reg[r] : minMs;
    if (rank == 0) {
      bench_line l;
      bench_line_start(&l, "windows", "window_register", (long long)bytes, size, reps);
      bench_line_num(&l, "min_ms", minMs);
      bench_line_emit(&l, "ms", bench_median(reg, reps), NULL);
      bench_line_start(&l, "windows", "mem_alloc", (long long)bytes, size, reps);
      bench_line_emit(&l, "ms", bench_median(alloc, reps), NULL);
    }
    free(reg);
    free(alloc);
  }
}

// Rank 0 copies into LSA peer 1's window of sw->max bytes; the others wait.
static void bench_copy(const bench_sweep* sw, int iters, int warmup, int rank, int size) {
  ccoWindow_t win;
  void* local;
  CCO_OK(ccoWindowRegisterAlloc(comm, sw->max, &win, &local));
  CCO_OK(ccoBarrierAll(comm));
  if (rank == 0) {
    int peer1;
    void* peer;
    CCO_OK(ccoTeamRankToWorld(comm, ccoTeamLsa, 1, &peer1));
    CCO_OK(ccoGetPeerPtr(comm, local, peer1, &peer));
    void *src, *dst;
    CUDA_OK(cudaMalloc(&src, sw->max));
    CUDA_OK(cudaMalloc(&dst, sw->max));
    CUDA_OK(cudaMemset(src, 1, sw->max));
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    enum { trials = 7, threads = 1024, kinds = 4 };
    int blocks = 0;
    CUDA_OK(cudaDeviceGetAttribute(&blocks, cudaDevAttrMultiProcessorCount, 0));
    // kinds: 0 cudaMemcpy local, 1 kernel into the peer's window, 2 kernel
    // local, 3 cudaMemcpy into the peer's window
    static const char* const refs[kinds] = {"cudaMemcpy", NULL, "kernel_local", "cudaMemcpy_to_peer"};
    for (unsigned long long bytes = sw->min; bytes; bytes = bench_sweep_next(sw, bytes)) {
      size_t n = bytes / sizeof(uint4);
      for (int i = 0; i < warmup; i++) {
        CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
        copy_kernel<<<blocks, threads>>>((uint4*)peer, (const uint4*)src, n);
        copy_kernel<<<blocks, threads>>>((uint4*)dst, (const uint4*)src, n);
      }
      CUDA_OK(cudaDeviceSynchronize());
      // Trials alternate the four copies, so clock and thermal drift hit
      // all of them alike; medians are reported.
      double m[kinds][trials];
      for (int t = 0; t < trials; t++) {
        for (int kind = 0; kind < kinds; kind++) {
          CUDA_OK(cudaEventRecord(e0));
          for (int i = 0; i < iters; i++) {
            if (kind == 0 || kind == 3)
              CUDA_OK(cudaMemcpyAsync(kind == 0 ? dst : peer, src, bytes, cudaMemcpyDeviceToDevice));
            else copy_kernel<<<blocks, threads>>>((uint4*)(kind == 1 ? peer : dst), (const uint4*)src, n);
          }
          CUDA_OK(cudaEventRecord(e1));
          CUDA_OK(cudaEventSynchronize(e1));
          CUDA_OK(cudaGetLastError());
          m[kind][t] = bench_elapsed_ms(e0, e1) / iters;
        }
      }
      // Bandwidth as bytes copied per second (each byte read once, written once).
      bench_line l;
      bench_line_start(&l, "windows", "peer_copy", (long long)bytes, size, iters);
      bench_line_int(&l, "trials", trials);
      bench_line_int(&l, "blocks", blocks);
      bench_line_int(&l, "threads", threads);
      for (int kind = 0; kind < kinds; kind++)
        bench_line_emit(&l, "GBps", bytes / (bench_median(m[kind], trials) * 1e-3) / 1e9, refs[kind]);
    }
    CUDA_OK(cudaFree(src));
    CUDA_OK(cudaFree(dst));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  CCO_OK(ccoBarrierAll(comm));
  CCO_OK(ccoWindowDeregister(comm, win));
}

int main(int argc, char** argv) {
  bench_args a = {0};
  a.program = "cco-bench-windows";
  a.about = "Window registration time, and copies into an LSA peer's window against cudaMemcpy (under ccorun).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = kOps;
  a.sizeAlign = sizeof(uint4);
  a.defaults = "-b 1M -e 1G -f 16; register: -n 5; copy: -n 10 copies per trial, -w 1";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 1u << 20, 1u << 30, 16);
  bench_require_gpu(a.program);
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0));
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank, size, lsaSize;
  CCO_OK(ccoCommRank(comm, &rank));
  CCO_OK(ccoCommSize(comm, &size));
  CCO_OK(ccoCommLsaSize(comm, &lsaSize));
  if (bench_args_want(&a, "register")) bench_register(&sw, (int)bench_args_iters(&a, 5), size, rank);
  if (bench_args_want(&a, "copy")) {
    if (lsaSize >= 2) bench_copy(&sw, (int)bench_args_iters(&a, 10), (int)bench_args_warmup(&a, 1), rank, size);
    else if (rank == 0) fprintf(stderr, "cco-bench-windows: copy not measured: it needs 2 LSA ranks\n");
  }
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
