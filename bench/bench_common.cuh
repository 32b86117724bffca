// Pieces shared by the CUDA benchmarks: the GPU check, error checks, timing,
// medians, and the SM copy loop they all measure against cudaMemcpy. The
// command line and the JSON lines are bench_args.h and bench_json.h.
#ifndef CCO_BENCH_COMMON_CUH_
#define CCO_BENCH_COMMON_CUH_

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_args.h"
#include "bench_json.h"
#include "cco/cco.h"
#include "../tests/gpu/gpu_device.cuh"

// Exit status of a benchmark that cannot run here (the test suite's "skipped").
#define BENCH_NO_GPU_EXIT 77

// Called first thing after the arguments (and after setting what the driver
// reads when it starts, such as CUDA_MODULE_LOADING): on a machine without
// the NVIDIA driver the runtime's own words ("CUDA driver version is
// insufficient for CUDA runtime version") hide the cause, so say it plainly
// and exit 77. cudaDriverGetVersion reports 0 when libcuda.so.1 cannot be
// loaded.
static inline void bench_require_gpu(const char* program) {
  int driver = 0, runtime = 0, gpus = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (driver == 0) {
    fprintf(stderr, "%s: no GPU driver here\n", program);
    exit(BENCH_NO_GPU_EXIT);
  }
  cudaError_t e = cudaGetDeviceCount(&gpus);
  if (e == cudaErrorInsufficientDriver) {
    fprintf(stderr, "%s: the GPU driver (CUDA %d.%d) is older than this program's CUDA runtime (%d.%d)\n", program,
            driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    exit(BENCH_NO_GPU_EXIT);
  }
  if (e == cudaErrorNoDevice || (e == cudaSuccess && gpus < 1)) {
    fprintf(stderr, "%s: no GPU here (the driver sees none)\n", program);
    exit(BENCH_NO_GPU_EXIT);
  }
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: cannot use the GPU: %s\n", program, cudaGetErrorString(e));
    exit(1);
  }
}

// Needs a `comm` (ccoComm*) in scope for the detail string.
#define CCO_OK(call)                                                                         \
  do {                                                                                       \
    ccoResult_t r_ = (call);                                                                 \
    if (r_ != ccoSuccess) {                                                                  \
      fprintf(stderr, "%s: %s (%s)\n", #call, ccoGetErrorString(r_), ccoGetLastError(comm)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define CUDA_OK(call)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static inline double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

// Sorts v and returns its median (upper middle for even n).
static inline double bench_median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
  return v[n / 2];
}

static inline float bench_elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms;
}

// Grid-stride copy with eight 16-byte loads in flight per thread before the
// stores, run as one block of 1024 threads per SM: the fastest SM copy of
// the variants tried on the H200 (block-contiguous chunks, 4-16 loads in
// flight, cache hints, 1-16 blocks per SM, TMA bulk copies all reached
// 0.92-0.94 of cudaMemcpy; see bench/RESULTS.md).
__device__ __forceinline__ void bench_copy_u4(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                              size_t n) {
  enum { U = 8 };
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; u++) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Slowest rank's value of a step every rank of the job takes part in.
static inline double bench_slowest(ccoComm* comm, double mine, int size) {
  double* all = (double*)calloc((size_t)size, sizeof(double));
  CCO_OK(ccoBootstrapAllGather(comm, &mine, all, sizeof(double)));
  double m = 0;
  for (int i = 0; i < size; i++) m = all[i] > m ? all[i] : m;
  free(all);
  return m;
}

// Who takes part in a put-bandwidth figure and how its lines are named.
struct bench_put_spec {
  const char* bench;  // the lines' "bench"
  const char* ref;    // the put's "ref": NULL for cco's own figure, "nvshmem" for NVSHMEM's
  int me;             // index among the writers; 0 is the lone writer of the first figure
  int writers;        // how many write at once in the second figure
  int size;           // ranks of the job (all take part in the barriers and in bench_slowest)
  int print;          // whether this rank prints the lines
};

// Put bandwidth of one writer, then of every writer at once, at each size of the sweep, beside
// cudaMemcpyAsync of the same bytes on the same stream: 7 trials alternating the two, each `iters`
// launches between barriers, the median of the slowest rank's time per launch. put(bytes, blocks,
// threads, stream) launches one put of `bytes` with one 1024-thread block per SM.
template <typename Put>
static void bench_put_vs_memcpy(ccoComm* comm, const bench_put_spec& s, const bench_sweep* sw, int iters,
                                int warmup, void* refSrc, void* refDst, cudaStream_t st, Put put) {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms, threads = 1024, trials = 7;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (unsigned long long bytes = sw->min; bytes; bytes = bench_sweep_next(sw, bytes)) {
    // writers = 1 (index 0 alone), then every writer at once.
    for (int all = 0; all < 2; all++) {
      int active = all || s.me == 0;
      double putMs[trials], refMs[trials];
      for (int i = 0; active && i < warmup; i++) {
        put(bytes, blocks, threads, st);
        CUDA_OK(cudaMemcpyAsync(refDst, refSrc, bytes, cudaMemcpyDeviceToDevice, st));
      }
      CUDA_OK(cudaStreamSynchronize(st));
      for (int t = 0; t < trials; t++) {
        for (int kind = 0; kind < 2; kind++) {
          CCO_OK(ccoBarrierAll(comm));
          double ms = 0;
          if (active) {
            CUDA_OK(cudaEventRecord(e0, st));
            for (int i = 0; i < iters; i++) {
              if (kind == 0) put(bytes, blocks, threads, st);
              else CUDA_OK(cudaMemcpyAsync(refDst, refSrc, bytes, cudaMemcpyDeviceToDevice, st));
            }
            CUDA_OK(cudaEventRecord(e1, st));
            CUDA_OK(cudaEventSynchronize(e1));
            CUDA_OK(cudaGetLastError());
            ms = bench_elapsed_ms(e0, e1) / iters;
          }
          ms = all ? bench_slowest(comm, ms, s.size) : ms;
          (kind == 0 ? putMs : refMs)[t] = ms;
        }
      }
      double put1 = bench_median(putMs, trials), ref1 = bench_median(refMs, trials);
      int writers = all ? s.writers : 1;
      if (s.print) {
        bench_line l;
        bench_line_start(&l, s.bench, "lsa_put", (long long)bytes, s.size, iters);
        bench_line_int(&l, "writers", writers);
        bench_line_int(&l, "trials", trials);
        bench_line_int(&l, "blocks", blocks);
        bench_line_int(&l, "threads", threads);
        bench_line_emit(&l, "GBps", (double)bytes * writers / (put1 * 1e-3) / 1e9, s.ref);
        bench_line_emit(&l, "GBps", (double)bytes * writers / (ref1 * 1e-3) / 1e9, "cudaMemcpy");
      }
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

#endif  // CCO_BENCH_COMMON_CUH_
