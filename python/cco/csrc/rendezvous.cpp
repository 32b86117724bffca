// An allocation seen by a group: registered in the group's communicator as
// an external window (collective, all or nothing), with every peer's copy
// read from the window's flat VA. The import is placed at an offset free on
// every rank, so tensors may be freed in any order on each rank.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "cco_symm_mem.h"

namespace cco_torch {

namespace {

// What every rank must agree on before anything is mapped.
struct Layout {
  uint64_t buffer_bytes;
  uint64_t pad_offset;
  uint64_t pad_bytes;
};

bool same(const Layout& a, const Layout& b) {
  return a.buffer_bytes == b.buffer_bytes && a.pad_offset == b.pad_offset &&
         a.pad_bytes == b.pad_bytes;
}

// Every rank sees the same table, so every rank throws the same error.
void check_layouts(const std::vector<Layout>& all, const std::string& group) {
  for (size_t r = 1; r < all.size(); r++) {
    if (same(all[r], all[0])) continue;
    throw std::runtime_error(
        "CCO symmetric memory: rendezvous over group '" + group + "': rank 0 passes a tensor of " +
        std::to_string(all[0].buffer_bytes) + " bytes (signal pad " +
        std::to_string(all[0].pad_bytes) + "), rank " + std::to_string(r) + " one of " +
        std::to_string(all[r].buffer_bytes) + " bytes (signal pad " +
        std::to_string(all[r].pad_bytes) +
        "); every rank must rendezvous tensors of the same size, in the same order");
  }
}

// One device block for the three arrays kernels read: buffers, pads (one
// pointer per rank each), then the global ranks. One allocation and one
// copy, since rendezvous time counts.
void* arrays_to_device(const std::vector<void*>& buffers, const std::vector<void*>& pads,
                       const std::vector<int>& ranks) {
  size_t n = buffers.size();
  std::vector<char> host(2 * n * sizeof(void*) + n * sizeof(int));
  std::memcpy(host.data(), buffers.data(), n * sizeof(void*));
  std::memcpy(host.data() + n * sizeof(void*), pads.data(), n * sizeof(void*));
  std::memcpy(host.data() + 2 * n * sizeof(void*), ranks.data(), n * sizeof(int));
  void* dev = nullptr;
  check_cuda(cudaMalloc(&dev, host.size()), "allocating the peer pointer arrays");
  cudaError_t err = cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    cudaFree(dev);
    check_cuda(err, "copying the peer pointer arrays");
  }
  return dev;
}

}  // namespace

PeerView::~PeerView() {
  if (exiting()) return;
  // Kernels that used the arrays have finished: the tensor is gone or its
  // last handle is, and cudaFree waits for the device anyway.
  cudaFree(buffers_dev);  // the block that holds the three arrays
  if (!group || !window) return;
  std::lock_guard<std::mutex> guard(group->lock);
  if (!group->comm) return;  // destroyed at shutdown, windows with it
  ccoResult_t res = ccoWindowDeregister(group->comm, window);
  if (res != ccoSuccess)
    std::fprintf(stderr, "CCO symmetric memory: deregistering a window of group '%s': %s (%s)\n",
                 group->name.c_str(), ccoGetErrorString(res), ccoGetLastError(group->comm));
}

// Runs with the allocation's device current (cudaMalloc of the arrays).
std::shared_ptr<PeerView> make_peer_view(std::shared_ptr<Allocation> alloc,
                                         std::shared_ptr<GroupComm> group) {
  std::lock_guard<std::mutex> guard(group->lock);
  ccoComm* comm = group->comm;
  if (!comm)
    throw std::runtime_error("CCO symmetric memory: the backend was shut down (interpreter exit)");
  int world = group->world_size;
  Layout mine = {alloc->buffer_bytes, alloc->pad_offset, alloc->pad_bytes};
  std::vector<Layout> all(world);
  check_cco(ccoBootstrapAllGather(comm, &mine, all.data(), sizeof(Layout)), comm,
            "rendezvous over group '" + group->name + "'");
  check_layouts(all, group->name);

  auto view = std::make_shared<PeerView>();
  view->alloc = alloc;
  void* local = nullptr;
  check_cco(ccoWindowRegisterExternal(comm, alloc->base, alloc->used_bytes(), &view->window, &local),
            comm, "registering the tensor's memory with group '" + group->name + "'");
  try {
    view->local = static_cast<char*>(local);
    view->buffers.assign(world, nullptr);
    view->pads.assign(world, nullptr);
    view->all_direct = true;
    for (int r = 0; r < world; r++) {
      void* peer = nullptr;
      // Refused for ranks on other hosts: no load/store path to them.
      if (ccoGetPeerPtr(comm, local, r, &peer) != ccoSuccess) {
        view->all_direct = false;
        continue;
      }
      view->buffers[r] = peer;
      view->pads[r] = static_cast<char*>(peer) + alloc->pad_offset;
    }
    void* arrays = arrays_to_device(view->buffers, view->pads, group->global_ranks);
    view->buffers_dev = static_cast<void**>(arrays);
    view->pads_dev = view->buffers_dev + world;
    view->global_ranks_dev = reinterpret_cast<int*>(view->pads_dev + world);
  } catch (...) {
    // The lock is held here, so the window goes now, not in the destructor.
    ccoWindowDeregister(comm, view->window);
    view->window = nullptr;
    throw;
  }
  view->group = group;  // from here the view owns the window
  return view;
}

}  // namespace cco_torch
