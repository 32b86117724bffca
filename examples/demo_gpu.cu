// GPU part of the demo: one kernel writes this rank's pattern into every
// LSA peer's window through the flat VA.
#include <cuda_runtime.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>

#include "cco/cco_device_all.h"
#include "demo_gpu.h"

__device__ __host__ static inline uint64_t demo_pattern(int writer, size_t i) {
  return ((uint64_t)writer << 48) ^ (i * 0x9e3779b97f4a7c15ull);
}

struct Targets {
  uint64_t* dst[64];
};

// blockIdx.y picks the peer; the grid strides over the words.
__global__ void fill_kernel(Targets t, size_t words, int writer) {
  uint64_t* dst = t.dst[blockIdx.y];
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = demo_pattern(writer, i);
}

__global__ void verify_kernel(const uint64_t* src, size_t words, int writer,
                              unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    mine += src[i] != demo_pattern(writer, i);
  if (mine) atomicAdd(bad, mine);
}

extern "C" int cco_demo_gpu_fill(void* const* dsts, int n, size_t bytes, int writer) {
  if (n < 1 || n > 64) return -1;
  Targets t;
  for (int p = 0; p < n; p++) t.dst[p] = (uint64_t*)dsts[p];
  fill_kernel<<<dim3(132, n), 512>>>(t, bytes / 8, writer);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) fprintf(stderr, "cco-demo: fill kernel: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : -1;
}

extern "C" size_t cco_demo_gpu_verify(const void* src, size_t bytes, int writer) {
  unsigned long long* bad = nullptr;
  unsigned long long host = bytes / 8;
  if (cudaMalloc(&bad, sizeof(*bad)) != cudaSuccess) return host;
  cudaMemset(bad, 0, sizeof(*bad));
  verify_kernel<<<132, 512>>>((const uint64_t*)src, bytes / 8, writer, bad);
  if (cudaMemcpy(&host, bad, sizeof(host), cudaMemcpyDeviceToHost) != cudaSuccess) host = bytes / 8;
  cudaFree(bad);
  return (size_t)host;
}

// Thread 0 posts the puts (the copy engines move the data), then waits for
// every peer's signal; the kernel status lands in *status.
__global__ void sdma_kernel(ccoDevComm dc, ccoWindow_t win, size_t bytes, unsigned long long round,
                            int* status) {
  int bad = 0;
  for (int p = 0; p < dc.lsaSize; p++)
    if (p != dc.lsaRank)
      bad |= ccoSdmaPut(&dc, p, win, (size_t)dc.lsaRank * bytes, win, (size_t)dc.lsaRank * bytes, bytes, 0,
                        ccoSdmaSignalRemote, ccoCoopThread) != ccoDevSuccess;
  for (int p = 0; p < dc.lsaSize; p++)
    if (p != dc.lsaRank)
      bad |= ccoSdmaWaitSignal(&dc, p, 0, round, 30000000000ull, ccoCoopThread) != ccoDevSuccess;
  *status = bad;
}

// Runs a kernel that waits on a background thread's work (the SDMA engine,
// the GDA proxy) and returns 0 when its status word says every device call
// succeeded. A stream of its own, and a wait that leaves the host thread out
// of the driver: the kernel spins until that thread's transfers land, and
// those need its driver calls to go through meanwhile.
template <typename Launch>
static int run_waiting_kernel(const char* what, Launch launch) {
  int* status = nullptr;
  int host = 1;
  cudaStream_t stream;
  if (cudaMalloc(&status, sizeof(int)) != cudaSuccess) return -1;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return -1;
  launch(stream, status);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess)
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) usleep(100);
  if (e == cudaSuccess) e = cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost);
  cudaStreamDestroy(stream);
  cudaFree(status);
  if (e != cudaSuccess) fprintf(stderr, "cco-demo: %s kernel: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess && host == 0 ? 0 : -1;
}

extern "C" int cco_demo_gpu_sdma(const struct ccoDevComm* dc, void* win, size_t bytes, unsigned long long round) {
  return run_waiting_kernel("sdma", [&](cudaStream_t stream, int* status) {
    sdma_kernel<<<1, 1, 0, stream>>>(*dc, (ccoWindow_t)win, bytes, round, status);
  });
}

__global__ void gda_kernel(ccoDevComm dc, ccoWindow_t win, size_t bytes, int peer, int* status) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoGdaPut(&g, peer, win, bytes, win, 0, bytes, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER,
                                ccoCoopBlock, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaWaitSignal(&g, 0, 1, 30000000000ull, ccoCoopBlock);
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopBlock);
  if (threadIdx.x == 0) *status = st != ccoDevSuccess;
}

extern "C" int cco_demo_gpu_gda(const struct ccoDevComm* dc, void* win, size_t bytes, int peer) {
  return run_waiting_kernel("gda", [&](cudaStream_t stream, int* status) {
    gda_kernel<<<1, 128, 0, stream>>>(*dc, (ccoWindow_t)win, bytes, peer, status);
  });
}

extern "C" int cco_demo_gpu_fill_local(void* dst, size_t bytes, int writer) {
  void* one[1] = {dst};
  return cco_demo_gpu_fill(one, 1, bytes, writer);
}
