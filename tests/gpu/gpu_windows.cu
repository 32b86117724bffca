// GPU window tests, one rank of a job started by ccorun (several ranks on one
// GPU need MPS; see run_gpu_tests.sh):
//
//   ccorun -n 4 gpu_windows
//
// Windows on device memory: a kernel writes into every LSA peer's window
// through the descriptor it takes (ccoWindow_t), mismatched registration
// fails everywhere, a plain cuMem allocation is imported as an external
// window, cudaMalloc memory is refused, register/deregister cycles keep
// device memory flat, and destroy gives every byte back.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "gpu_device.cuh"

static int g_pass, g_fail, g_rank, g_size, g_lsaRank, g_lsaSize;
static ccoComm* g_comm;

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (cond) {                                                     \
      g_pass++;                                                     \
    } else {                                                        \
      g_fail++;                                                     \
      fprintf(stderr, "FAIL rank %d %s:%d: %s: ", g_rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fprintf(stderr, "\n");                                        \
    }                                                               \
  } while (0)
#define OK(call) CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(g_comm))
#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

__device__ __host__ static inline uint32_t value(int writer, size_t i) {
  return (uint32_t)(writer * 2654435761u) ^ (uint32_t)i;
}

// Block y writes this rank's part of LSA peer y's window, through the
// descriptor the kernel reads from device memory.
__global__ void put_to_peers(ccoWindow_t win, size_t block, int writer) {
  int peer = blockIdx.y;
  uint64_t stride = (uint64_t)win->stride4G << 32;
  uint32_t* dst = (uint32_t*)(win->winBase + peer * stride + (size_t)win->lsaRank * block);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < block / 4;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = value(writer, i);
}

__global__ void count_bad(const uint32_t* src, size_t words, int writer, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    mine += src[i] != value(writer, i);
  if (mine) atomicAdd(bad, mine);
}

static int lsa_world(int p) {
  int w = -1;
  ccoTeamRankToWorld(g_comm, ccoTeamLsa, p, &w);
  return w;
}

static void put_and_check(ccoWindow_t win, char* local, size_t block) {
  OK(ccoBarrierAll(g_comm));
  put_to_peers<<<dim3(64, g_lsaSize), 256>>>(win, block, g_rank);
  CUDA_OK(cudaDeviceSynchronize());
  OK(ccoBarrierAll(g_comm));
  unsigned long long* bad;
  unsigned long long total = 0;
  CUDA_OK(cudaMalloc(&bad, sizeof(*bad)));
  for (int p = 0; p < g_lsaSize; p++) {
    unsigned long long h = 0;
    cudaMemset(bad, 0, sizeof(*bad));
    count_bad<<<64, 256>>>((const uint32_t*)(local + (size_t)p * block), block / 4, lsa_world(p), bad);
    CUDA_OK(cudaMemcpy(&h, bad, sizeof(h), cudaMemcpyDeviceToHost));
    total += h;
  }
  cudaFree(bad);
  CHECK(total == 0, "%llu words wrong after the peers' kernels wrote", total);
  OK(ccoBarrierAll(g_comm));
}

static void test_device_windows(void) {
  size_t sizes[] = {4096, 1 << 20, 64u << 20};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    size_t block = sizes[s];
    ccoWindow_t win = NULL;
    void* local = NULL;
    OK(ccoWindowRegisterAlloc(g_comm, block * (size_t)g_lsaSize, &win, &local));
    if (!win) return;
    ccoWindowDevice d;
    OK(ccoWindowGetInfo(g_comm, win, &d, NULL));
    cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, win) == cudaSuccess && attr.type == cudaMemoryTypeDevice,
          "the descriptor lives in device memory");
    CHECK(d.lsaRank == g_lsaRank && d.lsaSize == g_lsaSize && d.magic == CCO_WINDOW_MAGIC,
          "descriptor");
    put_and_check(win, (char*)local, block);
    OK(ccoWindowDeregister(g_comm, win));
  }
}

static void test_mismatch(void) {
  if (g_size < 2) return;
  void* p = NULL;
  OK(ccoMemAlloc(g_comm, 4u << 20, &p));
  ccoWindow_t win = NULL;
  ccoResult_t r = ccoWindowRegister(g_comm, p, g_rank == 0 ? (2u << 20) : (4u << 20), &win);
  CHECK(r == ccoInvalidUsage, "mismatched registration: %s", ccoGetErrorString(r));
  OK(ccoWindowRegister(g_comm, p, 4u << 20, &win));
  put_and_check(win, (char*)p, (4u << 20) / g_lsaSize / 4096 * 4096);
  OK(ccoWindowDeregister(g_comm, win));
  OK(ccoMemFree(g_comm, p));
}

// A cuMem allocation made outside cco (as torch's symmetric memory makes
// them): exportable as a POSIX fd, mapped by its owner.
static void* make_cumem(size_t size, CUmemGenericAllocationHandle* h) {
  CUdevice dev;
  cuCtxGetDevice(&dev);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  CUdeviceptr ptr = 0;
  if (cuMemCreate(h, size, &prop, 0) != CUDA_SUCCESS) return NULL;
  if (cuMemAddressReserve(&ptr, size, 0, 0, 0) != CUDA_SUCCESS) return NULL;
  if (cuMemMap(ptr, size, 0, *h, 0) != CUDA_SUCCESS) return NULL;
  CUmemAccessDesc acc;
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (cuMemSetAccess(ptr, size, &acc, 1) != CUDA_SUCCESS) return NULL;
  return (void*)ptr;
}

static void test_external(void) {
  size_t size = 8u << 20;
  CUmemGenericAllocationHandle h;
  void* ext = make_cumem(size, &h);
  CHECK(ext != NULL, "cuMem allocation for the import");
  if (!ext) return;
  ccoWindow_t win = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterExternal(g_comm, ext, size, &win, &local));
  if (win) {
    size_t block = size / g_lsaSize / 4096 * 4096;
    put_and_check(win, (char*)local, block);
    // The peers' writes landed in the owner's own allocation.
    uint32_t first = 0;
    CUDA_OK(cudaMemcpy(&first, ext, 4, cudaMemcpyDeviceToHost));
    CHECK(first == value(lsa_world(0), 0), "import does not alias the cuMem allocation");
    OK(ccoWindowDeregister(g_comm, win));
  }
  // Wrong size, interior pointer, cudaMalloc memory: refused on every rank.
  ccoResult_t r = ccoWindowRegisterExternal(g_comm, ext, size * 2, &win, &local);
  CHECK(r == ccoInvalidArgument, "size beyond the allocation: %s", ccoGetErrorString(r));
  r = ccoWindowRegisterExternal(g_comm, (char*)ext + (2u << 20), 2u << 20, &win, &local);
  CHECK(r == ccoInvalidArgument, "interior pointer: %s", ccoGetErrorString(r));
  void* plain = NULL;
  CUDA_OK(cudaMalloc(&plain, 2u << 20));
  r = ccoWindowRegisterExternal(g_comm, plain, 2u << 20, &win, &local);
  CHECK(r == ccoInvalidArgument, "cudaMalloc memory: %s (%s)", ccoGetErrorString(r),
        ccoGetLastError(g_comm));
  cudaFree(plain);
  cuMemUnmap((CUdeviceptr)ext, size);
  cuMemAddressFree((CUdeviceptr)ext, size);
  cuMemRelease(h);
}

static void test_cycles(void) {
  size_t free0, free1, total;
  ccoWindow_t win;
  void* p;
  OK(ccoWindowRegisterAlloc(g_comm, 2u << 20, &win, &p));
  OK(ccoWindowDeregister(g_comm, win));
  /* Free memory is the GPU's, shared by every rank: measure when all ranks
   * are between cycles. */
  OK(ccoBarrierAll(g_comm));
  cudaMemGetInfo(&free0, &total);
  OK(ccoBarrierAll(g_comm));
  int failures = 0;
  for (int i = 0; i < 200; i++) {
    failures += ccoWindowRegisterAlloc(g_comm, 2u << 20, &win, &p) != ccoSuccess;
    failures += ccoWindowDeregister(g_comm, win) != ccoSuccess;
  }
  OK(ccoBarrierAll(g_comm));
  cudaMemGetInfo(&free1, &total);
  OK(ccoBarrierAll(g_comm));
  CHECK(failures == 0, "%d failures in 200 cycles", failures);
  CHECK(free1 + (4u << 20) >= free0, "device memory %zu -> %zu free", free0, free1);
}

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0)); // make the primary context current
  size_t free0, freeAfter, total;
  cudaMemGetInfo(&free0, &total);
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  ccoCommLsaRank(g_comm, &g_lsaRank);
  ccoCommLsaSize(g_comm, &g_lsaSize);
  ccoPlatform_t platform;
  OK(ccoCommPlatform(g_comm, &platform));
  CHECK(platform == ccoPlatformCuda, "platform %d", (int)platform);
  test_device_windows();
  test_mismatch();
  test_external();
  test_cycles();
  // Leave a window and an allocation behind: destroy must release them.
  ccoWindow_t win;
  void* p;
  OK(ccoWindowRegisterAlloc(g_comm, 256u << 20, &win, &p));
  OK(ccoMemAlloc(g_comm, 64u << 20, &p));
  OK(ccoBarrierAll(g_comm));
  OK(ccoCommDestroy(g_comm));
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeAfter, &total);
  // Other ranks share the GPU and free at their own pace: allow what they
  // might still hold of their own 320 MiB plus slack.
  if (g_size == 1) CHECK(freeAfter + (8u << 20) >= free0, "device memory %zu -> %zu free", free0, freeAfter);
  printf("gpu_windows rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
  return g_fail ? 1 : 0;
}
