// barrier / put_signal / wait_signal of the CCO backend, on torch's signal
// pads (the layout and protocol torch's own kernels use, so the two mix:
// see launch_barrier in cco_symm_mem.h).
#include <cuda/atomic>

#include <cstdio>

#include "cco_symm_mem.h"

namespace cco_torch {

namespace {

using system_atomic = cuda::atomic_ref<uint32_t, cuda::thread_scope_system>;

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until *slot holds `from`, then writes `to` (one CAS). false once
// timeout_ms (non-zero) has passed.
template <cuda::std::memory_order Order>
__device__ bool swap_when(uint32_t* slot, uint32_t from, uint32_t to, uint64_t timeout_ms) {
  uint64_t deadline = now_ns() + timeout_ms * 1000000ull;
  system_atomic word(*slot);
  for (;;) {
    uint32_t expected = from;
    if (word.compare_exchange_strong(expected, to, Order, cuda::std::memory_order_relaxed))
      return true;
    if (timeout_ms != 0 && now_ns() > deadline) return false;
  }
}

__device__ void put(uint32_t** pads, int dst, int channel, int rank, int world, uint64_t timeout_ms,
                    const char* op) {
  uint32_t* slot = pads[dst] + (size_t)channel * world + rank;
  if (swap_when<cuda::std::memory_order_release>(slot, 0, 1, timeout_ms)) return;
  printf("[cco] SymmetricMemory::%s: rank %d timed out after %llu ms sending a signal to rank %d "
         "on channel %d (its previous signal was never consumed)\n",
         op, rank, (unsigned long long)timeout_ms, dst, channel);
  __trap();
}

__device__ void wait(uint32_t** pads, int src, int channel, int rank, int world, uint64_t timeout_ms,
                     const char* op) {
  uint32_t* slot = pads[rank] + (size_t)channel * world + src;
  if (swap_when<cuda::std::memory_order_acquire>(slot, 1, 0, timeout_ms)) return;
  printf("[cco] SymmetricMemory::%s: rank %d timed out after %llu ms waiting for a signal from "
         "rank %d on channel %d\n",
         op, rank, (unsigned long long)timeout_ms, src, channel);
  __trap();
}

// Thread t signals peer t, then waits for peer t's signal.
__global__ void barrier_kernel(uint32_t** pads, int channel, int rank, int world,
                               uint64_t timeout_ms) {
  int peer = threadIdx.x;
  if (peer < world) {
    __threadfence_system();  // the stream's earlier writes before the signal
    put(pads, peer, channel, rank, world, timeout_ms, "barrier");
    wait(pads, peer, channel, rank, world, timeout_ms, "barrier");
    __threadfence_system();
  }
  __syncthreads();
}

__global__ void put_signal_kernel(uint32_t** pads, int dst, int channel, int rank, int world,
                                  uint64_t timeout_ms) {
  // Everything this stream wrote before is visible to the receiver first.
  __threadfence_system();
  put(pads, dst, channel, rank, world, timeout_ms, "put_signal");
}

__global__ void wait_signal_kernel(uint32_t** pads, int src, int channel, int rank, int world,
                                   uint64_t timeout_ms) {
  wait(pads, src, channel, rank, world, timeout_ms, "wait_signal");
  __threadfence_system();
}

unsigned warp_multiple(int n) { return (unsigned)((n + 31) / 32 * 32); }

}  // namespace

void launch_barrier(uint32_t** pads_dev, int channel, int rank, int world_size,
                    uint64_t timeout_ms, cudaStream_t stream) {
  barrier_kernel<<<1, warp_multiple(world_size), 0, stream>>>(pads_dev, channel, rank, world_size,
                                                              timeout_ms);
  check_cuda(cudaGetLastError(), "launching the barrier kernel");
}

void launch_put_signal(uint32_t** pads_dev, int dst_rank, int channel, int rank, int world_size,
                       uint64_t timeout_ms, cudaStream_t stream) {
  put_signal_kernel<<<1, 1, 0, stream>>>(pads_dev, dst_rank, channel, rank, world_size, timeout_ms);
  check_cuda(cudaGetLastError(), "launching the put_signal kernel");
}

void launch_wait_signal(uint32_t** pads_dev, int src_rank, int channel, int rank, int world_size,
                        uint64_t timeout_ms, cudaStream_t stream) {
  wait_signal_kernel<<<1, 1, 0, stream>>>(pads_dev, src_rank, channel, rank, world_size, timeout_ms);
  check_cuda(cudaGetLastError(), "launching the wait_signal kernel");
}

}  // namespace cco_torch
