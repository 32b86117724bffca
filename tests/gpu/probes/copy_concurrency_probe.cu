// Probe: does a stream-ordered copy (and the flag write behind it) make
// progress while other kernels of the same process spin waiting for that
// flag? This is the situation of every SDMA wait. Prints one JSON line per
// configuration: spinning kernels (0-3, each on its own stream), copy size,
// memory kind (cudaMalloc or cuMem VMM), copy call (cudaMemcpyAsync or
// cuMemcpyBatchAsync), and whether the spinners saw the flag in time.
// Usage: copy_concurrency_probe (no arguments).
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__global__ void spin(volatile unsigned* flag, unsigned long long limitNs, int* timedOut) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*flag == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > limitNs) {
      atomicAdd(timedOut, 1);
      return;
    }
  }
}

static CUdeviceptr vmm_alloc(size_t size) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  size = (size + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CUdeviceptr p = 0;
  if (cuMemCreate(&h, size, &prop, 0) || cuMemAddressReserve(&p, size, 0, 0, 0) || cuMemMap(p, size, 0, h, 0))
    return 0;
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  cuMemSetAccess(p, size, &acc, 1);
  return p;
}

int main(void) {
  cudaSetDevice(0);
  cudaFree(0);
  const size_t maxBytes = 64u << 20;
  void *srcM, *dstM;
  cudaMalloc(&srcM, maxBytes);
  cudaMalloc(&dstM, maxBytes);
  CUdeviceptr srcV = vmm_alloc(maxBytes), dstV = vmm_alloc(maxBytes);
  unsigned* flag;
  int* timedOut;
  cudaMalloc(&flag, 64);
  cudaMalloc(&timedOut, 64);
  cudaStream_t spinS[3], copyS;
  for (int i = 0; i < 3; i++) cudaStreamCreateWithFlags(&spinS[i], cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&copyS, cudaStreamNonBlocking);
  size_t sizes[] = {0, 4096, 16u << 20};
  for (int vmm = 0; vmm < 2; vmm++)
    for (int api = 0; api < 2; api++)
      for (int si = 0; si < 3; si++)
        for (int nSpin = 0; nSpin <= 3; nSpin++) {
          size_t bytes = sizes[si];
          if (api == 1 && bytes == 0) continue;
          cudaMemset(flag, 0, 64);
          cudaMemset(timedOut, 0, 64);
          cudaDeviceSynchronize();
          for (int k = 0; k < nSpin; k++) spin<<<16, 128, 0, spinS[k]>>>(flag, 3000000000ull, timedOut);
          usleep(20000);
          CUdeviceptr dst = vmm ? dstV : (CUdeviceptr)dstM, src = vmm ? srcV : (CUdeviceptr)srcM;
          double t0 = now_s();
          CUresult r = CUDA_SUCCESS;
          if (bytes && api == 0) r = cuMemcpyAsync(dst, src, bytes, copyS);
          if (bytes && api == 1) {
            CUmemcpyAttributes attr = {};
            attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
            size_t idx = 0, sz = bytes;
            r = cuMemcpyBatchAsync(&dst, &src, &sz, 1, &attr, &idx, 1, copyS);
          }
          double callUs = (now_s() - t0) * 1e6;
          cuStreamWriteValue32(copyS, (CUdeviceptr)flag, 1, 0);
          cudaStreamSynchronize(copyS);
          double copyDoneMs = (now_s() - t0) * 1e3;
          cudaDeviceSynchronize();
          double allMs = (now_s() - t0) * 1e3;
          int to = 0;
          cudaMemcpy(&to, timedOut, sizeof(int), cudaMemcpyDeviceToHost);
          printf("{\"vmm\":%d,\"api\":\"%s\",\"bytes\":%zu,\"spinning_kernels\":%d,\"call_us\":%.1f,\"copy_done_ms\":%.2f,"
                 "\"all_done_ms\":%.2f,\"spin_blocks_timed_out\":%d,\"cu\":%d}\n",
                 vmm, api ? "batch" : "memcpyAsync", bytes, nSpin, callUs, copyDoneMs, allMs, to, (int)r);
          fflush(stdout);
        }
  return 0;
}
