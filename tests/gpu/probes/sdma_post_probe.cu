// Probe: what one SDMA post costs the posting thread, piece by piece. No
// communicator and no engine: a ring laid out as cco's (tail and cached head
// in device memory, 64-byte slots in host memory mapped for the device), one
// thread posting 4096 descriptors, and the kernel's own clock per post.
// Variants, each after a 16-byte store to device memory (the data a real put
// would order):
//   ticket only        the relaxed GPU-scope atomic on the tail;
//   + cached head      and the credit check on the device copy of the head;
//   fence.sys + 7 st   cco's post (fence.acq_rel.sys, seven tagged words);
//   fence.gpu + 7 st   the same fence at GPU scope;
//   fence.sys + 2 v2   the descriptor in two 16-byte stores;
//   fence.gpu + 2 v2   both;
//   no fence + 7 st    the stores alone (orders nothing; a floor).
// Prints one line per variant: ns per post (median of 5 runs).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));  \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

enum { kTicket, kCached, kSys7, kGpu7, kSys2, kGpu2, kNone7, kVariants };
static const char* const kNames[kVariants] = {"ticket only", "+ cached head", "fence.sys + 7 st",
                                              "fence.gpu + 7 st", "fence.sys + 2 v2", "fence.gpu + 2 v2",
                                              "no fence + 7 st"};

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void post_k(int variant, int count, unsigned long long* tail, uint64_t* slots, uint4* data,
                       unsigned long long* ns) {
  uint64_t t0 = now_ns();
  for (int i = 0; i < count; i++) {
    asm volatile("st.global.v4.u32 [%0], {%1,%1,%1,%1};" ::"l"(data + (i & 63)), "r"(i) : "memory");
    uint64_t ticket;
    asm volatile("atom.relaxed.gpu.add.u64 %0, [%1], 1;" : "=l"(ticket) : "l"(tail) : "memory");
    if (variant == kTicket) continue;
    uint64_t cached;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(cached) : "l"(tail + 1) : "memory");
    if (ticket - cached >= 256) asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(tail + 1), "l"(ticket) : "memory");
    if (variant == kCached) continue;
    uint64_t* slot = slots + (ticket & 255) * 8;
    uint64_t tag = (ticket + 1) << 32;
    if (variant == kSys7 || variant == kSys2) asm volatile("fence.acq_rel.sys;" ::: "memory");
    if (variant == kGpu7 || variant == kGpu2) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    if (variant == kSys2 || variant == kGpu2) {
      asm volatile("st.relaxed.sys.v2.u64 [%0], {%1,%2};" ::"l"(slot), "l"(tag | 1), "l"(tag | 2) : "memory");
      asm volatile("st.relaxed.sys.v2.u64 [%0], {%1,%2};" ::"l"(slot + 2), "l"(tag | 3), "l"(tag | 4) : "memory");
    } else {
      for (int w = 0; w < 7; w++)
        asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(slot + w), "l"(tag | (uint64_t)w) : "memory");
    }
  }
  *ns = now_ns() - t0;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(void) {
  const int count = 4096, runs = 5;
  unsigned long long *tail, *ns;
  uint4* data;
  uint64_t *slotsHost, *slotsDev;
  CHECK(cudaMalloc(&tail, 64));
  CHECK(cudaMemset(tail, 0, 64));
  CHECK(cudaMalloc(&ns, 8));
  CHECK(cudaMalloc(&data, 64 * sizeof(uint4)));
  CHECK(cudaHostAlloc(&slotsHost, 256 * 64, cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer((void**)&slotsDev, slotsHost, 0));
  post_k<<<1, 1>>>(kSys7, count, tail, slotsDev, data, ns); /* warm-up */
  CHECK(cudaDeviceSynchronize());
  for (int v = 0; v < kVariants; v++) {
    double per[runs];
    for (int r = 0; r < runs; r++) {
      post_k<<<1, 1>>>(v, count, tail, slotsDev, data, ns);
      unsigned long long host = 0;
      CHECK(cudaMemcpy(&host, ns, 8, cudaMemcpyDeviceToHost));
      per[r] = (double)host / count;
    }
    qsort(per, runs, sizeof(double), cmp);
    printf("{\"probe\": \"sdma_post\", \"variant\": \"%s\", \"posts\": %d, \"ns_per_post\": %.1f}\n", kNames[v], count,
           per[runs / 2]);
  }
  return 0;
}
