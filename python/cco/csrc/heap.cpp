// Where the backend's tensors live: one private single-rank cco communicator
// per device, whose ccoMemAlloc gives one cuMem allocation per tensor, of
// the kind that can be exported as an fd (so any group's communicator can
// import it later, whatever order tensors are made and freed in).
#include <cstdio>
#include <stdexcept>

#include "cco_symm_mem.h"

namespace cco_torch {

class Heap {
 public:
  int device = -1;
  std::mutex lock;         // comm, live, closing
  ccoComm* comm = nullptr;  // NULL once destroyed
  size_t live = 0;          // allocations not yet freed
  bool closing = false;     // destroy with the last allocation

  // ccoCommDestroy, lock held.
  void destroy_locked() {
    if (comm) ccoCommDestroy(comm);
    comm = nullptr;
  }
};

namespace {

std::mutex g_heaps_lock;
// Never destroyed: see g_groups in group_comm.cpp.
auto& g_heaps = *new std::map<int, std::shared_ptr<Heap>>();  // by device

// Runs `fn` with `device` current, then puts the caller's device back.
template <typename Fn>
void on_device(int device, Fn fn) {
  int previous = -1;
  check_cuda(cudaGetDevice(&previous), "cudaGetDevice");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  try {
    fn();
  } catch (...) {
    cudaSetDevice(previous);
    throw;
  }
  check_cuda(cudaSetDevice(previous), "cudaSetDevice");
}

std::shared_ptr<Heap> make_heap(int device, size_t slot_bytes) {
  auto heap = std::make_shared<Heap>();
  heap->device = device;
  on_device(device, [&] {
    ccoUniqueId id;
    check_cco(ccoGetUniqueId(&id), nullptr, "a unique id for the device heap");
    check_cco(ccoCommCreate(id, 1, 0, slot_bytes, &heap->comm), nullptr,
              "the device heap's communicator (slot of " + std::to_string(slot_bytes >> 20) +
                  " MiB; CCO_TORCH_SLOT_SIZE sets it)");
  });
  ccoPlatform_t platform = ccoPlatformHost;
  int commDevice = -1;
  ccoCommPlatform(heap->comm, &platform);
  ccoCommCudaDevice(heap->comm, &commDevice);
  if (platform != ccoPlatformCuda || commDevice != device) {
    std::lock_guard<std::mutex> guard(heap->lock);
    heap->destroy_locked();
    throw std::runtime_error(
        "CCO symmetric memory: libcco runs on the " +
        std::string(platform == ccoPlatformCuda ? "cuda" : "host") + " platform, device " +
        std::to_string(commDevice) + ", not on CUDA device " + std::to_string(device) +
        " (CCO_PLATFORM must allow cuda)");
  }
  return heap;
}

std::shared_ptr<Heap> heap_for(int device, size_t slot_bytes) {
  std::lock_guard<std::mutex> guard(g_heaps_lock);
  auto it = g_heaps.find(device);
  if (it != g_heaps.end()) return it->second;
  auto heap = make_heap(device, slot_bytes);
  g_heaps.emplace(device, heap);
  return heap;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Allocation::~Allocation() {
  if (!heap || !base || exiting()) return;
  std::lock_guard<std::mutex> guard(heap->lock);
  if (!heap->comm) return;
  ccoResult_t res = ccoMemFree(heap->comm, base);
  if (res != ccoSuccess)  // a destructor cannot throw; say it once, here
    std::fprintf(stderr, "CCO symmetric memory: freeing %p: %s (%s)\n", (void*)base,
                 ccoGetErrorString(res), ccoGetLastError(heap->comm));
  heap->live--;
  if (heap->closing && heap->live == 0) heap->destroy_locked();
}

std::shared_ptr<Allocation> allocate(size_t size, size_t pad_bytes, int device, size_t slot_bytes,
                                     cudaStream_t stream) {
  auto heap = heap_for(device, slot_bytes);
  auto alloc = std::make_shared<Allocation>();
  alloc->device = device;
  alloc->buffer_bytes = size;
  // The pad starts on a 128-byte line, so the buffer's last line and the
  // pad's first never share one.
  alloc->pad_offset = round_up(size, 128);
  alloc->pad_bytes = pad_bytes;
  {
    std::lock_guard<std::mutex> guard(heap->lock);
    if (heap->closing || !heap->comm)
      throw std::runtime_error("CCO symmetric memory: the backend was shut down (interpreter exit)");
    void* ptr = nullptr;
    check_cco(ccoMemAlloc(heap->comm, alloc->used_bytes(), &ptr), heap->comm,
              "allocating " + std::to_string(size) + " bytes and a signal pad on device " +
                  std::to_string(device) + " (the heap is CCO_TORCH_SLOT_SIZE bytes per device)");
    alloc->base = static_cast<char*>(ptr);
    alloc->heap = heap;
    heap->live++;
  }
  // From here the allocation owns the memory: a failure below frees it.
  on_device(device, [&] {
    check_cuda(cudaMemsetAsync(alloc->base + alloc->pad_offset, 0, pad_bytes, stream),
               "zeroing the signal pad");
    check_cuda(cudaStreamSynchronize(stream), "zeroing the signal pad");
  });
  return alloc;
}

void close_heaps() {
  std::lock_guard<std::mutex> guard(g_heaps_lock);
  for (auto& entry : g_heaps) {
    Heap& heap = *entry.second;
    std::lock_guard<std::mutex> heapGuard(heap.lock);
    heap.closing = true;
    if (heap.live == 0) heap.destroy_locked();
  }
  g_heaps.clear();
}

}  // namespace cco_torch
