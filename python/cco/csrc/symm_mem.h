// The backend's SymmetricMemoryAllocator (registered with torch as "CCO").
#pragma once

#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <atomic>
#include <optional>
#include <shared_mutex>

#include "cco_symm_mem.h"

namespace cco_torch {

// One allocation handed to torch, and its rendezvous, one per group.
struct Block {
  std::shared_ptr<Allocation> alloc;
  std::optional<std::string> default_group;  // the group alloc() was given, if any
  std::mutex lock;                           // views
  std::map<std::string, std::shared_ptr<PeerView>> views;
};

// What Python needs to use a tensor's memory as a cco window.
struct TensorWindow {
  uintptr_t comm = 0;        // ccoComm* of the group (owned by the backend)
  uintptr_t window = 0;      // ccoWindow_t
  uintptr_t local_ptr = 0;   // the window's start in this rank's copy of the group's flat VA
  size_t window_bytes = 0;   // the window (a segment, or the allocation: buffer, then signal pad)
  size_t offset = 0;         // where the tensor's storage starts in the window
  size_t buffer_bytes = 0;
  size_t pad_offset = 0;     // where torch's signal pad starts in the window
  std::string group;
  std::string error;     // not empty: why there is no window (the rest is unset)
};

class CcoAllocator : public c10d::symmetric_memory::SymmetricMemoryAllocator {
 public:
  CcoAllocator(size_t slot_bytes, size_t segment_bytes);
  ~CcoAllocator() override;

  void* alloc(size_t size, int device_idx, const std::optional<std::string>& group_name) override;
  void free(void* ptr) override;
  size_t get_alloc_size(void* ptr) override;
  c10::intrusive_ptr<c10d::symmetric_memory::SymmetricMemory> rendezvous(
      void* ptr, const std::optional<std::string>& group_name) override;
  bool has_multicast_support(int /*device_idx*/) override { return false; }
  c10::DeviceType supported_device_type() override { return c10::DeviceType::CUDA; }
  std::string name() override { return "CCO"; }

  // The window of a tensor that has had its rendezvous over `group` (or
  // over its only group when none is given); never throws: `error` says why not.
  TensorWindow window_of(const void* ptr, const std::optional<std::string>& group);
  // Destroys the groups' communicators and the idle heaps; refuses new
  // allocations and rendezvous. Tensors still alive keep their memory.
  void shutdown();
  // Live allocations, their bytes, and rendezvous (for tests).
  std::map<std::string, int64_t> stats();

 private:
  std::shared_ptr<Block> find_block(const void* ptr, size_t* offset);
  std::shared_ptr<PeerView> find_view(const std::shared_ptr<Block>& block,
                                      const std::optional<std::string>& group_name,
                                      std::string* error);
  std::shared_ptr<PeerView> peer_view(const std::shared_ptr<Block>& block,
                                      const std::optional<std::string>& group_name, bool create);

  const size_t slot_bytes_;
  const HeapConfig heap_config_;
  std::atomic<bool> closed_{false};
  std::shared_mutex blocks_lock_;
  std::map<uintptr_t, std::shared_ptr<Block>> blocks_;  // by base address
};

}  // namespace cco_torch
