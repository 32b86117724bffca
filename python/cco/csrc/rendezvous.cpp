// An allocation seen by a group. Its segment (or the allocation itself, when
// it has none) is registered in the group's communicator as an external
// window (collective, all or nothing) the first time the group needs it;
// every rank's copy is then read from the window's flat VA plus that rank's
// offset in its segment. Offsets may differ between ranks, so tensors may be
// made and freed in any order on each rank.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "cco_symm_mem.h"

namespace cco_torch {

namespace {

// What every rank must agree on before anything is mapped, and where its
// allocation is.
struct Layout {
  uint64_t buffer_bytes;
  uint64_t pad_offset;
  uint64_t pad_bytes;
  uint64_t segment_bytes;   // 0: the allocation has no segment
  uint64_t segment_id;
  uint64_t segment_offset;
};

bool same(const Layout& a, const Layout& b) {
  return a.buffer_bytes == b.buffer_bytes && a.pad_offset == b.pad_offset &&
         a.pad_bytes == b.pad_bytes && a.segment_bytes == b.segment_bytes;
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
        std::to_string(all[r].pad_bytes) + ")" +
        (all[r].segment_bytes != all[0].segment_bytes
             ? ", and segments of " + std::to_string(all[0].segment_bytes) + " and " +
                   std::to_string(all[r].segment_bytes) +
                   " bytes (CCO_TORCH_SEGMENT_SIZE must be the same on every rank)"
             : std::string()) +
        "; every rank must rendezvous tensors of the same size, in the same order");
  }
}

}  // namespace

PeerView::~PeerView() {
  if (exiting()) return;
  // Kernels may still read the arrays: the pool reuses the block only once
  // the device has finished them.
  peer_arrays_release(alloc ? alloc->device : -1, buffers_dev, arrays_bytes);
  if (!group || !window || !owns_window) return;
  std::lock_guard<std::mutex> guard(group->lock);
  if (!group->comm) return;  // destroyed at shutdown, windows with it
  ccoResult_t res = ccoWindowDeregister(group->comm, window);
  if (res != ccoSuccess)
    std::fprintf(stderr, "CCO symmetric memory: deregistering a window of group '%s': %s (%s)\n",
                 group->name.c_str(), ccoGetErrorString(res), ccoGetLastError(group->comm));
}

namespace {

// Registers `base` (bytes) in the group's communicator and fills `table`
// with every rank's copy of it; lock held. Collective.
ccoWindow_t register_external(GroupComm& group, void* base, size_t bytes, char** local,
                              std::vector<char*>* copies) {
  ccoWindow_t window = nullptr;
  void* mine = nullptr;
  check_cco(ccoWindowRegisterExternal(group.comm, base, bytes, &window, &mine), group.comm,
            "registering tensor memory with group '" + group.name + "'");
  *local = static_cast<char*>(mine);
  copies->assign(group.world_size, nullptr);
  for (int r = 0; r < group.world_size; r++) {
    void* peer = nullptr;
    // Refused for ranks on other hosts: no load/store path to them.
    if (ccoGetPeerPtr(group.comm, mine, r, &peer) == ccoSuccess) (*copies)[r] = static_cast<char*>(peer);
  }
  return window;
}

// Makes sure the group has every rank's segment of this rendezvous
// (all[r].segment_id), in rounds: in each, every rank registers one segment
// the group has not seen (the one needed first, else its oldest unseen one,
// else a new one), one external window per round. Every rank runs the same
// rounds: the tables are the same on every rank. Lock held.
void register_segments(GroupComm& group, const std::shared_ptr<Heap>& heap,
                       const std::vector<Layout>& all) {
  int world = group.world_size;
  auto missing = [&] {
    for (int r = 0; r < world; r++)
      if (!group.segment_bases.count({r, all[r].segment_id})) return true;
    return false;
  };
  while (missing()) {
    std::shared_ptr<Segment> offer;
    uint64_t wanted = all[group.rank].segment_id;
    for (auto& seg : heap_segments(heap)) {
      if (group.segment_windows.count(seg->id)) continue;
      if (seg->id == wanted) {
        offer = seg;
        break;
      }
      if (!offer) offer = seg;
    }
    if (!offer) offer = heap_new_segment(heap);
    std::vector<uint64_t> ids(world, 0);
    check_cco(ccoBootstrapAllGather(group.comm, &offer->id, ids.data(), sizeof(uint64_t)),
              group.comm, "rendezvous over group '" + group.name + "'");
    GroupComm::SegmentWindow entry;
    std::vector<char*> copies;
    entry.window = register_external(group, offer->base, offer->bytes, &entry.local, &copies);
    entry.ids = ids;
    for (int r = 0; r < world; r++) group.segment_bases[{r, ids[r]}] = copies[r];
    group.segment_windows.emplace(offer->id, std::move(entry));
  }
}

// One device block for the three arrays kernels read: buffers, pads (one
// pointer per rank each), then the global ranks. One block and one copy,
// since rendezvous time counts.
void* arrays_to_device(int device, const std::vector<void*>& buffers, const std::vector<void*>& pads,
                       const std::vector<int>& ranks, size_t* bytes) {
  size_t n = buffers.size();
  std::vector<char> host(2 * n * sizeof(void*) + n * sizeof(int));
  std::memcpy(host.data(), buffers.data(), n * sizeof(void*));
  std::memcpy(host.data() + n * sizeof(void*), pads.data(), n * sizeof(void*));
  std::memcpy(host.data() + 2 * n * sizeof(void*), ranks.data(), n * sizeof(int));
  *bytes = host.size();
  return peer_arrays_upload(device, host.data(), host.size());
}

}  // namespace

// Runs with the allocation's device current (cudaMalloc of the arrays).
std::shared_ptr<PeerView> make_peer_view(std::shared_ptr<Allocation> alloc,
                                         std::shared_ptr<GroupComm> group) {
  std::lock_guard<std::mutex> guard(group->lock);
  ccoComm* comm = group->comm;
  if (!comm)
    throw std::runtime_error("CCO symmetric memory: the backend was shut down (interpreter exit)");
  int world = group->world_size;
  const Segment* seg = alloc->segment.get();
  Layout mine = {alloc->buffer_bytes, alloc->pad_offset, alloc->pad_bytes,
                 seg ? seg->bytes : 0,  seg ? seg->id : 0, alloc->segment_offset};
  std::vector<Layout> all(world);
  check_cco(ccoBootstrapAllGather(comm, &mine, all.data(), sizeof(Layout)), comm,
            "rendezvous over group '" + group->name + "'");
  check_layouts(all, group->name);

  auto view = std::make_shared<PeerView>();
  view->alloc = alloc;
  std::vector<char*> copies;  // every rank's allocation, NULL off this host
  if (seg) {
    register_segments(*group, alloc->heap, all);
    copies.assign(world, nullptr);
    for (int r = 0; r < world; r++) {
      char* base = group->segment_bases.at({r, all[r].segment_id});
      if (base) copies[r] = base + all[r].segment_offset;
    }
    // cco's own kernels need the tensor at one window offset on every rank:
    // the ranks' segments in one window, at the same offset in each.
    const auto& w = group->segment_windows.at(seg->id);
    bool symmetric = true;
    for (int r = 0; r < world; r++)
      symmetric &= w.ids[r] == all[r].segment_id && all[r].segment_offset == mine.segment_offset;
    if (symmetric) {
      view->window = w.window;
      view->local = w.local;
      view->window_offset = alloc->segment_offset;
      view->window_bytes = seg->bytes;
    }
  } else {
    char* local = nullptr;
    view->window = register_external(*group, alloc->base, alloc->used_bytes(), &local, &copies);
    view->owns_window = true;
    view->local = local;
    view->window_bytes = alloc->used_bytes();
  }
  try {
    view->buffers.assign(world, nullptr);
    view->pads.assign(world, nullptr);
    view->all_direct = true;
    for (int r = 0; r < world; r++) {
      if (!copies[r]) {
        view->all_direct = false;
        continue;
      }
      view->buffers[r] = copies[r];
      view->pads[r] = copies[r] + alloc->pad_offset;
    }
    void* arrays = arrays_to_device(alloc->device, view->buffers, view->pads, group->global_ranks,
                                    &view->arrays_bytes);
    view->buffers_dev = static_cast<void**>(arrays);
    view->pads_dev = view->buffers_dev + world;
    view->global_ranks_dev = reinterpret_cast<int*>(view->pads_dev + world);
  } catch (...) {
    // The lock is held here, so the window goes now, not in the destructor.
    if (view->owns_window) ccoWindowDeregister(comm, view->window);
    view->window = nullptr;
    throw;
  }
  view->group = group;  // from here the view owns its window, if it has one of its own
  return view;
}

}  // namespace cco_torch
