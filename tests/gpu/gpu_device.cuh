// The GPU a rank of a test or benchmark uses: with several GPUs, one per
// rank (local rank modulo the count, no MPS needed); with one, every rank
// shares it (several ranks then need MPS).
#ifndef CCO_TESTS_GPU_DEVICE_CUH_
#define CCO_TESTS_GPU_DEVICE_CUH_

#include <cuda_runtime.h>
#include <stdlib.h>

static inline cudaError_t pick_rank_device(void) {
  int n = 0;
  const char* local = getenv("CCO_LOCAL_RANK");
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) n = 1;
  return cudaSetDevice((local ? atoi(local) : 0) % n);
}

#endif  // CCO_TESTS_GPU_DEVICE_CUH_
