// torch's SymmetricMemory interface over the backend's allocations and
// peer views (the interface of the torch this file is compiled against:
// torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp).
#include "symm_mem.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdio>

namespace cco_torch {

using c10d::symmetric_memory::SymmetricMemory;

namespace {

// The handle torch gets from rendezvous: one peer view, and where the
// rendezvoused pointer lies in the allocation.
class CcoSymmetricMemory : public SymmetricMemory {
 public:
  CcoSymmetricMemory(std::shared_ptr<PeerView> view, size_t offset)
      : view_(std::move(view)), offset_(offset) {}

  std::vector<void*> get_buffer_ptrs() override { return view_->buffers; }
  std::vector<void*> get_signal_pad_ptrs() override { return view_->pads; }
  void** get_buffer_ptrs_dev() override { return view_->buffers_dev; }
  void** get_signal_pad_ptrs_dev() override { return view_->pads_dev; }
  size_t get_buffer_size() override { return view_->alloc->buffer_bytes; }
  size_t get_offset() override { return offset_; }

  // No multicast objects here: torch's multimem ops check this and refuse.
  bool has_multicast_support() override { return false; }
  void* get_multicast_ptr() override { return nullptr; }

  void barrier(int channel, size_t timeout_ms) override {
    check_channel(channel, "barrier");
    c10::cuda::CUDAGuard guard(device_index());
    launch_barrier(pads(), channel, rank(), world(), timeout_ms, stream());
  }

  void put_signal(int dst_rank, int channel, size_t timeout_ms) override {
    check_channel(channel, "put_signal");
    check_peer(dst_rank, "put_signal");
    c10::cuda::CUDAGuard guard(device_index());
    launch_put_signal(pads(), dst_rank, channel, rank(), world(), timeout_ms, stream());
  }

  void wait_signal(int src_rank, int channel, size_t timeout_ms) override {
    check_channel(channel, "wait_signal");
    check_peer(src_rank, "wait_signal");
    c10::cuda::CUDAGuard guard(device_index());
    launch_wait_signal(pads(), src_rank, channel, rank(), world(), timeout_ms, stream());
  }

  int get_rank() override { return rank(); }
  int get_world_size() override { return world(); }
  c10::Device get_device() override { return c10::Device(c10::DeviceType::CUDA, device_index()); }

  const std::vector<int>& get_rank_to_global_rank() override {
    for (int g : view_->group->global_ranks)
      TORCH_CHECK(g >= 0, "CCO symmetric memory: group '", view_->group->name,
                  "': global ranks are unknown (no default process group)");
    return view_->group->global_ranks;
  }

  int* get_rank_to_global_rank_dev() override {
    get_rank_to_global_rank();
    return view_->global_ranks_dev;
  }

  bool world_within_direct_access() override { return view_->all_direct; }

 private:
  int rank() const { return view_->group->rank; }
  int world() const { return view_->group->world_size; }
  c10::DeviceIndex device_index() const {
    return static_cast<c10::DeviceIndex>(view_->alloc->device);
  }
  uint32_t** pads() const { return reinterpret_cast<uint32_t**>(view_->pads_dev); }
  cudaStream_t stream() const { return at::cuda::getCurrentCUDAStream(device_index()).stream(); }

  void check_channel(int channel, const char* op) const {
    size_t needed = (static_cast<size_t>(channel) + 1) * world() * sizeof(uint32_t);
    TORCH_CHECK(channel >= 0 && needed <= view_->alloc->pad_bytes, "CCO symmetric memory: ", op,
                ": channel ", channel, " does not fit the signal pad of ", view_->alloc->pad_bytes,
                " bytes with ", world(), " ranks (symm_mem.set_signal_pad_size before allocating)");
  }

  void check_peer(int peer, const char* op) const {
    TORCH_CHECK(peer >= 0 && peer < world(), "CCO symmetric memory: ", op, ": rank ", peer,
                " is not in [0, ", world(), ")");
    TORCH_CHECK(view_->pads[peer] != nullptr, "CCO symmetric memory: ", op, ": rank ", peer,
                " is on another host; signal pads need load/store access");
  }

  std::shared_ptr<PeerView> view_;
  size_t offset_;
};

}  // namespace

// ------------------------------------------------------------ the allocator

CcoAllocator::CcoAllocator(size_t slot_bytes, size_t segment_bytes)
    : slot_bytes_(slot_bytes), heap_config_{slot_bytes, segment_bytes} {}

CcoAllocator::~CcoAllocator() {
  // Only torch's registry, destroyed at process exit, drops the last
  // reference: CUDA and libcco may be gone by then.
  set_exiting();
}

void* CcoAllocator::alloc(size_t size, int device_idx,
                          const std::optional<std::string>& group_name) {
  TORCH_CHECK(!closed_, "CCO symmetric memory: the backend was shut down (interpreter exit)");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_idx));
  int device = guard.current_device().index();
  auto alloc = allocate(size, c10d::symmetric_memory::get_signal_pad_size(), device, heap_config_,
                        at::cuda::getCurrentCUDAStream(device).stream());
  auto block = std::make_shared<Block>();
  block->alloc = alloc;
  block->default_group = group_name;
  std::unique_lock<std::shared_mutex> lock(blocks_lock_);
  blocks_.emplace(reinterpret_cast<uintptr_t>(alloc->base), std::move(block));
  return alloc->base;
}

void CcoAllocator::free(void* ptr) {
  if (exiting() || c10d::symmetric_memory::is_finalizing()) {
    // Static destruction: leave the memory to the operating system.
    set_exiting();
    return;
  }
  std::shared_ptr<Block> block;
  {
    std::unique_lock<std::shared_mutex> lock(blocks_lock_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks_.end()) return;  // not ours: torch's free path cannot report it
    block = std::move(it->second);
    blocks_.erase(it);
  }
  // Released outside the lock: deregistering synchronizes the device. This
  // runs in a tensor's deleter, where an exception would end the process.
  try {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(block->alloc->device));
    block.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "CCO symmetric memory: freeing %p: %s\n", ptr, e.what());
  }
}

size_t CcoAllocator::get_alloc_size(void* ptr) {
  size_t offset = 0;
  auto block = find_block(ptr, &offset);
  TORCH_CHECK(block && offset == 0, "CCO symmetric memory: ", ptr,
              " was not allocated by the CCO backend");
  return block->alloc->buffer_bytes;
}

std::shared_ptr<Block> CcoAllocator::find_block(const void* ptr, size_t* offset) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(blocks_lock_);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second->alloc;
  size_t into = address - it->first;
  if (into >= std::max<size_t>(a.buffer_bytes, 1)) return nullptr;
  *offset = into;
  return it->second;
}

std::shared_ptr<PeerView> CcoAllocator::peer_view(const std::shared_ptr<Block>& block,
                                                   const std::optional<std::string>& group_name,
                                                   bool create) {
  std::lock_guard<std::mutex> lock(block->lock);
  std::string group;
  if (group_name) {
    group = *group_name;
  } else if (block->default_group) {
    group = *block->default_group;
  } else if (!create && block->views.size() == 1) {
    group = block->views.begin()->first;
  } else {
    TORCH_CHECK(false, "CCO symmetric memory: no group given, and the tensor was allocated ",
                "without one (pass the group to rendezvous)");
  }
  auto it = block->views.find(group);
  if (it != block->views.end()) return it->second;
  TORCH_CHECK(create, "CCO symmetric memory: the tensor has no rendezvous over group '", group,
              "' yet (symm_mem.rendezvous(tensor, group) first)");
  TORCH_CHECK(!closed_, "CCO symmetric memory: the backend was shut down (interpreter exit)");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(block->alloc->device));
  auto comm = group_comm_for(group, block->alloc->device, slot_bytes_);
  auto view = make_peer_view(block->alloc, comm);
  block->views.emplace(group, view);
  return view;
}

c10::intrusive_ptr<SymmetricMemory> CcoAllocator::rendezvous(
    void* ptr, const std::optional<std::string>& group_name) {
  size_t offset = 0;
  auto block = find_block(ptr, &offset);
  TORCH_CHECK(block, "CCO symmetric memory: ", ptr,
              " is not in a tensor of the CCO backend (allocate it with symm_mem.empty after "
              "symm_mem.set_backend(\"CCO\"))");
  return c10::make_intrusive<CcoSymmetricMemory>(peer_view(block, group_name, true), offset);
}

std::shared_ptr<PeerView> CcoAllocator::find_view(const std::shared_ptr<Block>& block,
                                                   const std::optional<std::string>& group_name,
                                                   std::string* error) {
  std::lock_guard<std::mutex> lock(block->lock);
  std::string group;
  if (group_name) {
    group = *group_name;
  } else if (block->default_group) {
    group = *block->default_group;
  } else if (block->views.size() == 1) {
    group = block->views.begin()->first;
  } else {
    *error = block->views.empty()
                 ? "the tensor has had no rendezvous yet (symm_mem.rendezvous(tensor, group) first)"
                 : "the tensor has had rendezvous over several groups: name one";
    return nullptr;
  }
  auto it = block->views.find(group);
  if (it != block->views.end()) return it->second;
  *error = "the tensor has no rendezvous over group '" + group +
           "' yet (symm_mem.rendezvous(tensor, group) first)";
  return nullptr;
}

// Refusals come back in `error`, not as exceptions: a c10::Error thrown
// from here through the module's binding killed the interpreter with
// SIGSEGV on the GPU machine (torch 2.11), where the same TORCH_CHECK in a
// free function of the module raised cleanly.
TensorWindow CcoAllocator::window_of(const void* ptr, const std::optional<std::string>& group) {
  TensorWindow w;
  size_t offset = 0;
  auto block = find_block(ptr, &offset);
  if (!block) {
    char text[96];
    std::snprintf(text, sizeof(text), "%p is not in a tensor of the CCO backend", ptr);
    w.error = text;
    return w;
  }
  auto view = find_view(block, group, &w.error);
  if (!view) return w;
  std::lock_guard<std::mutex> lock(view->group->lock);
  if (!view->group->comm) {
    w.error = "the backend was shut down (interpreter exit)";
    return w;
  }
  if (!view->window) {
    w.error = "the tensor lies at different offsets of its segments on the ranks of group '" +
              view->group->name +
              "' (the ranks made and freed tensors in different orders), so it has no window "
              "offset common to all ranks for cco's kernels; torch's ops and the buffer pointers "
              "work. Make the tensors in the same order on every rank, or give large tensors "
              "their own allocation (larger than CCO_TORCH_SEGMENT_SIZE / 4, or "
              "CCO_TORCH_SEGMENT_SIZE=0)";
    return w;
  }
  w.comm = reinterpret_cast<uintptr_t>(view->group->comm);
  w.window = reinterpret_cast<uintptr_t>(view->window);
  w.local_ptr = reinterpret_cast<uintptr_t>(view->local);
  w.window_bytes = view->window_bytes;
  w.offset = view->window_offset + offset;
  w.buffer_bytes = view->alloc->buffer_bytes;
  w.pad_offset = view->window_offset + view->alloc->pad_offset;
  w.group = view->group->name;
  return w;
}

void CcoAllocator::shutdown() {
  closed_ = true;
  {
    // Views hold the group communicators: drop the blocks' references, so
    // the communicators can go now; tensors still alive keep their memory.
    std::shared_lock<std::shared_mutex> lock(blocks_lock_);
    for (auto& entry : blocks_) {
      std::lock_guard<std::mutex> blockLock(entry.second->lock);
      entry.second->views.clear();
    }
  }
  destroy_group_comms();
  close_heaps();
}

std::map<std::string, int64_t> CcoAllocator::stats() {
  std::shared_lock<std::shared_mutex> lock(blocks_lock_);
  int64_t bytes = 0, views = 0;
  for (auto& entry : blocks_) {
    bytes += static_cast<int64_t>(entry.second->alloc->used_bytes());
    std::lock_guard<std::mutex> blockLock(entry.second->lock);
    views += static_cast<int64_t>(entry.second->views.size());
  }
  return {{"allocations", static_cast<int64_t>(blocks_.size())},
          {"bytes", bytes},
          {"rendezvous", views}};
}

}  // namespace cco_torch
