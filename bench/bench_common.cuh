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

#endif  // CCO_BENCH_COMMON_CUH_
