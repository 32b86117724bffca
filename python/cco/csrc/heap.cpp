// Where the backend's tensors live: one private single-rank cco communicator
// per device, whose ccoMemAlloc gives cuMem allocations of the kind that can
// be exported as an fd, so any group's communicator can import them later.
// Small tensors are ranges of segments (see Segment); their offsets may
// differ between ranks, whatever order tensors are made and freed in, since
// a rendezvous exchanges every rank's offset. Large ones get their own.
#include <atomic>
#include <cstdio>
#include <iterator>
#include <stdexcept>

#include "cco_symm_mem.h"

namespace cco_torch {

class Heap {
 public:
  int device = -1;
  std::mutex lock;          // comm, live, closing, segments and their free ranges
  ccoComm* comm = nullptr;  // NULL once destroyed
  size_t live = 0;          // allocations not yet freed
  bool closing = false;     // destroy with the last allocation
  size_t segment_bytes = 0;
  std::vector<std::shared_ptr<Segment>> segments;  // oldest first

  // ccoCommDestroy (which frees the segments too), lock held.
  void destroy_locked() {
    if (comm) ccoCommDestroy(comm);
    comm = nullptr;
    segments.clear();
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

std::shared_ptr<Heap> make_heap(int device, size_t slot_bytes, size_t segment_bytes) {
  auto heap = std::make_shared<Heap>();
  heap->device = device;
  heap->segment_bytes = segment_bytes;
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

std::shared_ptr<Heap> heap_for(int device, const HeapConfig& config) {
  std::lock_guard<std::mutex> guard(g_heaps_lock);
  auto it = g_heaps.find(device);
  if (it != g_heaps.end()) return it->second;
  auto heap = make_heap(device, config.slot_bytes, config.segment_bytes);
  g_heaps.emplace(device, heap);
  return heap;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Ranges start on 512 bytes, as the CUDA caching allocator's blocks do.
constexpr size_t kRangeAlign = 512;

// A new segment, lock held.
std::shared_ptr<Segment> new_segment_locked(Heap& heap) {
  static std::atomic<uint64_t> next_id{1};
  void* ptr = nullptr;
  check_cco(ccoMemAlloc(heap.comm, heap.segment_bytes, &ptr), heap.comm,
            "allocating a segment of " + std::to_string(heap.segment_bytes >> 20) +
                " MiB on device " + std::to_string(heap.device) +
                " (CCO_TORCH_SEGMENT_SIZE sets it; the heap is CCO_TORCH_SLOT_SIZE bytes)");
  auto seg = std::make_shared<Segment>();
  seg->heap = &heap;
  seg->id = next_id++;
  seg->base = static_cast<char*>(ptr);
  seg->bytes = heap.segment_bytes;
  seg->free_ranges.emplace(0, seg->bytes);
  heap.segments.push_back(seg);
  return seg;
}

// First fit, lowest offset of the oldest segment: ranks that make the same
// tensors in the same order get the same offsets (window_of needs that).
bool take_range(Segment& seg, size_t bytes, size_t* offset) {
  for (auto it = seg.free_ranges.begin(); it != seg.free_ranges.end(); ++it) {
    if (it->second < bytes) continue;
    *offset = it->first;
    size_t rest = it->second - bytes;
    seg.free_ranges.erase(it);
    if (rest) seg.free_ranges.emplace(*offset + bytes, rest);
    return true;
  }
  return false;
}

void give_back_range(Segment& seg, size_t offset, size_t bytes) {
  auto next = seg.free_ranges.lower_bound(offset);
  if (next != seg.free_ranges.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = seg.free_ranges.erase(next);
  }
  if (next != seg.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  seg.free_ranges.emplace(offset, bytes);
}

}  // namespace

Allocation::~Allocation() {
  if (!heap || !base || exiting()) return;
  std::lock_guard<std::mutex> guard(heap->lock);
  if (!heap->comm) return;
  if (segment) {
    give_back_range(*segment, segment_offset, range_bytes);
  } else {
    ccoResult_t res = ccoMemFree(heap->comm, base);
    if (res != ccoSuccess)  // a destructor cannot throw; say it once, here
      std::fprintf(stderr, "CCO symmetric memory: freeing %p: %s (%s)\n", (void*)base,
                   ccoGetErrorString(res), ccoGetLastError(heap->comm));
  }
  heap->live--;
  if (heap->closing && heap->live == 0) heap->destroy_locked();
}

std::shared_ptr<Allocation> allocate(size_t size, size_t pad_bytes, int device,
                                     const HeapConfig& config, cudaStream_t stream) {
  auto heap = heap_for(device, config);
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
    size_t range = round_up(alloc->used_bytes(), kRangeAlign);
    if (heap->segment_bytes && range <= heap->segment_bytes / 4) {
      size_t offset = 0;
      std::shared_ptr<Segment> seg;
      for (auto& s : heap->segments)
        if (take_range(*s, range, &offset)) {
          seg = s;
          break;
        }
      if (!seg) {
        seg = new_segment_locked(*heap);
        take_range(*seg, range, &offset);
      }
      alloc->segment = seg;
      alloc->segment_offset = offset;
      alloc->range_bytes = range;
      alloc->base = seg->base + offset;
    } else {
      void* ptr = nullptr;
      check_cco(ccoMemAlloc(heap->comm, alloc->used_bytes(), &ptr), heap->comm,
                "allocating " + std::to_string(size) + " bytes and a signal pad on device " +
                    std::to_string(device) + " (the heap is CCO_TORCH_SLOT_SIZE bytes per device)");
      alloc->base = static_cast<char*>(ptr);
    }
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

std::vector<std::shared_ptr<Segment>> heap_segments(const std::shared_ptr<Heap>& heap) {
  std::lock_guard<std::mutex> guard(heap->lock);
  return heap->segments;
}

std::shared_ptr<Segment> heap_new_segment(const std::shared_ptr<Heap>& heap) {
  std::lock_guard<std::mutex> guard(heap->lock);
  if (heap->closing || !heap->comm)
    throw std::runtime_error("CCO symmetric memory: the backend was shut down (interpreter exit)");
  return new_segment_locked(*heap);
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
