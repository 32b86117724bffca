// Checks and the hang watchdog shared by the GPU test programs. Define
// GPU_TEST_NAME (the program's name, e.g. "gpu_lsa") before including:
// every line a check prints starts with it and the rank.
#ifndef CCO_TESTS_GPU_CHECK_CUH_
#define CCO_TESTS_GPU_CHECK_CUH_

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cco/cco.h"
#include "gpu_device.cuh"

#ifndef GPU_TEST_NAME
#error "define GPU_TEST_NAME before including gpu_check.cuh"
#endif

static int g_pass, g_fail, g_rank;
static ccoComm* g_comm;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    int ok_ = (cond) ? 1 : 0;                                                  \
    if (ok_) g_pass++;                                                         \
    else g_fail++;                                                             \
    FILE* f_ = ok_ ? stdout : stderr;                                          \
    fprintf(f_, GPU_TEST_NAME " rank %d: %s ", g_rank, ok_ ? "ok  " : "FAIL"); \
    fprintf(f_, __VA_ARGS__);                                                  \
    if (!ok_) fprintf(f_, " [%s:%d: %s]", __FILE__, __LINE__, #cond);          \
    fprintf(f_, "\n");                                                         \
    fflush(f_);                                                                \
  } while (0)
// Calls that must work: only failures are printed (and counted).
#define OK(call)                                                                                           \
  do {                                                                                                     \
    ccoResult_t r_ = (call);                                                                               \
    if (r_ != ccoSuccess) CHECK(0, "%s: %s (%s)", #call, ccoGetErrorString(r_), ccoGetLastError(g_comm)); \
  } while (0)
#define CUDA_OK(call)                                                         \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) CHECK(0, "%s: %s", #call, cudaGetErrorString(e_)); \
  } while (0)

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int finish(void) {
  printf(GPU_TEST_NAME " rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
  fflush(stdout);
  return g_fail ? 1 : 0;
}

// Waits for everything on a stream. A kernel stuck past limitS is a failure:
// `comm` (the communicator the stuck work belongs to) is aborted so device
// waits return, and the rank exits.
static inline void wait_stream_of(cudaStream_t s, ccoComm* comm, const char* what, double limitS) {
  double t0 = now_s();
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      CHECK(0, "%s: %s", what, cudaGetErrorString(e));
      exit(finish() | 1);  // the context is gone: nothing more can run
    }
    if (now_s() - t0 > limitS) {
      CHECK(0, "%s: still running after %.0f s (hung); aborting the communicator", what, limitS);
      ccoCommAbort(comm);
      cudaDeviceSynchronize();
      exit(finish() | 1);
    }
    usleep(100);
  }
}
static inline void wait_stream(cudaStream_t s, const char* what, double limitS) {
  wait_stream_of(s, g_comm, what, limitS);
}

#endif  // CCO_TESTS_GPU_CHECK_CUH_
