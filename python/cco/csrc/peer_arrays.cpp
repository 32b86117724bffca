// Device blocks for the peer pointer arrays every rendezvous hands to torch's
// kernels (buffer_ptrs_dev, signal_pad_ptrs_dev, the global ranks).
//
// A cudaMalloc per rendezvous cost a driver allocation on the way in and, on
// the way out, a cudaFree, which waits for the whole device. Here blocks come
// from slabs of kSlabBytes, cut by size class and kept for the process. A
// block given back may still be read by a kernel in flight on any stream, so
// it is not reused at once: it waits in `pending` until a block of its class
// is wanted, no free one is left and the slab is full; then one
// cudaDeviceSynchronize retires every pending block together (what each
// cudaFree used to pay, paid once per batch).
#include <map>
#include <mutex>
#include <vector>

#include "cco_symm_mem.h"

namespace cco_torch {

namespace {

constexpr size_t kClassBytes = 256;       // blocks are multiples of this
constexpr size_t kSlabBytes = 256 << 10;  // one cudaMalloc holds this many bytes of blocks
constexpr size_t kLargest = 16 << 10;     // larger blocks are a cudaMalloc of their own

struct DevicePool {
  std::mutex lock;
  char* slab = nullptr;  // the slab being cut
  size_t slab_used = 0;
  std::map<size_t, std::vector<void*>> free, pending;  // by class bytes
};

std::mutex g_pools_lock;
// Never destroyed: blocks may be given back during interpreter exit, and the
// memory is the process's until it ends.
auto& g_pools = *new std::map<int, DevicePool*>();

DevicePool& pool_of(int device) {
  std::lock_guard<std::mutex> guard(g_pools_lock);
  DevicePool*& pool = g_pools[device];
  if (!pool) pool = new DevicePool();
  return *pool;
}

size_t class_of(size_t bytes) { return (bytes + kClassBytes - 1) / kClassBytes * kClassBytes; }

// A block of `cls` bytes, lock held; the caller's device is `device`.
void* take_locked(DevicePool& pool, size_t cls) {
  auto& ready = pool.free[cls];
  if (!ready.empty()) {
    void* block = ready.back();
    ready.pop_back();
    return block;
  }
  if (pool.slab && pool.slab_used + cls <= kSlabBytes) {
    void* block = pool.slab + pool.slab_used;
    pool.slab_used += cls;
    return block;
  }
  auto& waiting = pool.pending[cls];
  if (!waiting.empty()) {
    // Every kernel that could read a pending block has finished after this.
    check_cuda(cudaDeviceSynchronize(), "retiring the peer pointer arrays of freed tensors");
    for (auto& entry : pool.pending) {
      auto& to = pool.free[entry.first];
      to.insert(to.end(), entry.second.begin(), entry.second.end());
      entry.second.clear();
    }
    void* block = ready.back();
    ready.pop_back();
    return block;
  }
  void* slab = nullptr;
  check_cuda(cudaMalloc(&slab, kSlabBytes), "allocating a block for peer pointer arrays");
  pool.slab = static_cast<char*>(slab);
  pool.slab_used = cls;
  return pool.slab;
}

}  // namespace

void* peer_arrays_upload(int device, const void* host, size_t bytes) {
  size_t cls = class_of(bytes);
  void* block = nullptr;
  if (cls > kLargest) {
    check_cuda(cudaMalloc(&block, cls), "allocating the peer pointer arrays");
  } else {
    DevicePool& pool = pool_of(device);
    std::lock_guard<std::mutex> guard(pool.lock);
    block = take_locked(pool, cls);
  }
  // Synchronous: the arrays are in place before the rendezvous returns, for
  // kernels on any stream.
  cudaError_t err = cudaMemcpy(block, host, bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    peer_arrays_release(device, block, bytes);
    check_cuda(err, "copying the peer pointer arrays");
  }
  return block;
}

void peer_arrays_release(int device, void* block, size_t bytes) {
  if (!block) return;
  size_t cls = class_of(bytes);
  if (cls > kLargest) {
    cudaFree(block);  // waits for the device: a kernel may still read it
    return;
  }
  DevicePool& pool = pool_of(device);
  std::lock_guard<std::mutex> guard(pool.lock);
  pool.pending[cls].push_back(block);
}

}  // namespace cco_torch
