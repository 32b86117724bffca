// The CCO backend of torch.SymmetricMemory: what its files share.
//
// The backend is a thin layer over libcco's public API:
//
//   heap.cpp        one private single-rank communicator per device; a
//                   tensor (buffer first, signal pad after) is a range of a
//                   segment (a ccoMemAlloc of CCO_TORCH_SEGMENT_SIZE bytes, a
//                   cuMem allocation that can be exported as an fd), or, when
//                   larger than a quarter of a segment, a ccoMemAlloc of its own.
//   group_comm.cpp  one cco communicator per process group, its unique id
//                   passed through the group's store (needs torch).
//   rendezvous.cpp  an allocation over a group: its segment (or itself)
//                   registered once in the group's communicator as an
//                   external window, the peer pointers read from the
//                   window's flat VA plus each rank's offset in its segment.
//   peer_arrays.cpp device blocks for the peer pointer arrays, pooled.
//   signal_kernels.cu  barrier / put_signal / wait_signal on signal pads.
//   symm_mem.cpp    torch's SymmetricMemory and SymmetricMemoryAllocator.
//   module.cpp      the Python module: registration, shutdown, queries.
//
// Only group_comm.cpp, symm_mem.cpp and module.cpp include torch; the rest
// builds against libcco and the CUDA runtime alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cco/cco.h"

namespace cco_torch {

// ------------------------------------------------------------------ errors

// Throws std::runtime_error("<what>: <libcco's result and detail>") unless
// res is ccoSuccess. comm may be NULL (the thread's last error is used).
void check_cco(ccoResult_t res, const ccoComm* comm, const std::string& what);
// Throws std::runtime_error("<what>: <CUDA error>") unless err is cudaSuccess.
void check_cuda(cudaError_t err, const std::string& what);

// True once the process is being torn down (static destruction, or torch's
// symmetric-memory registry is gone): nothing may call CUDA or libcco then;
// what is left is the operating system's to reclaim.
bool exiting();
void set_exiting();

// ------------------------------------------------------------------ heap.cpp

class Heap;

// A ccoMemAlloc of a heap that tensors are carved from. Registering it once
// per group makes every later rendezvous of its tensors one allgather: the
// driver's import, map and access calls (about 0.8 ms per peer on an H200)
// are paid per segment, not per tensor. Kept until the heap goes, like the
// segments of torch's caching allocator.
struct Segment {
  Heap* heap = nullptr;
  uint64_t id = 0;  // unique in the process, never reused
  char* base = nullptr;
  size_t bytes = 0;
  std::map<size_t, size_t> free_ranges;  // offset -> bytes, coalesced; heap lock
};

// One tensor's memory: [buffer | signal pad], a range of a segment or a
// ccoMemAlloc of its own.
struct Allocation {
  std::shared_ptr<Heap> heap;
  std::shared_ptr<Segment> segment;  // NULL: a ccoMemAlloc of its own
  size_t segment_offset = 0;         // base - segment->base
  size_t range_bytes = 0;            // what the segment gave (aligned)
  char* base = nullptr;     // what torch's tensor points at
  size_t buffer_bytes = 0;  // what torch asked for
  size_t pad_offset = 0;    // signal pad at base + pad_offset
  size_t pad_bytes = 0;
  size_t used_bytes() const { return pad_offset + pad_bytes; }
  int device = -1;

  Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();  // back to its segment, or ccoMemFree, unless the process is exiting
};

struct HeapConfig {
  size_t slot_bytes = 0;     // address space of the heap and of each group's slot
  size_t segment_bytes = 0;  // 0: every tensor is a ccoMemAlloc of its own
};

// Allocates `size` bytes and a zeroed signal pad of `pad_bytes` on `device`,
// from that device's heap (created on first use). The pad is zeroed on
// `stream` before this returns.
std::shared_ptr<Allocation> allocate(size_t size, size_t pad_bytes, int device,
                                     const HeapConfig& config, cudaStream_t stream);

// The heap's segments, oldest first; and a new empty one (a rendezvous round
// in which this rank has no unregistered segment to offer makes one; it is
// used by the next allocations).
std::vector<std::shared_ptr<Segment>> heap_segments(const std::shared_ptr<Heap>& heap);
std::shared_ptr<Segment> heap_new_segment(const std::shared_ptr<Heap>& heap);

// Destroys every heap that holds no allocation; the others go when their
// last allocation is freed (tensors may outlive the backend's shutdown).
void close_heaps();

// ---------------------------------------------------------- group_comm.cpp

// The cco communicator of one process group (one per group and device).
struct GroupComm {
  std::string name;
  int rank = -1, world_size = 0, device = -1;
  std::vector<int> global_ranks;  // world rank of each group rank, -1 if unknown
  std::mutex lock;                // guards comm against shutdown, and the segment tables
  ccoComm* comm = nullptr;        // NULL once destroyed

  // Segments registered in this group, each round one per rank, in one
  // external window: which segment each rank gave, and where the group's
  // flat VA shows it. Windows go with the communicator.
  struct SegmentWindow {
    ccoWindow_t window = nullptr;
    char* local = nullptr;          // this rank's segment in the flat VA
    std::vector<uint64_t> ids;      // per group rank: the segment it gave
  };
  std::map<uint64_t, SegmentWindow> segment_windows;          // by this rank's segment id
  std::map<std::pair<int, uint64_t>, char*> segment_bases;    // (rank, its segment id) -> VA; NULL off host

  GroupComm() = default;
  GroupComm(const GroupComm&) = delete;
  GroupComm& operator=(const GroupComm&) = delete;
  ~GroupComm();
  void destroy();  // ccoCommDestroy, once; windows of the group go with it
};

// The communicator of process group `group_name` on `device`; the first call
// for a group is collective over it: group rank 0 mints the unique id and
// passes it through the group's store, every rank then joins (slots of
// `slot_bytes`).
std::shared_ptr<GroupComm> group_comm_for(const std::string& group_name, int device,
                                          size_t slot_bytes);
// Destroys every group's communicator (backend shutdown).
void destroy_group_comms();

// ---------------------------------------------------------- rendezvous.cpp

// One allocation seen by one group: the window and the peers' addresses.
struct PeerView {
  std::shared_ptr<Allocation> alloc;
  std::shared_ptr<GroupComm> group;
  ccoWindow_t window = nullptr;        // NULL: the tensor sits at different window offsets on the ranks
  bool owns_window = false;            // a window of its own, not its segment's
  size_t window_offset = 0;            // where the allocation starts in the window
  size_t window_bytes = 0;
  char* local = nullptr;               // the window's start in the group's flat VA
  std::vector<void*> buffers, pads;    // per group rank; NULL off this host
  void** buffers_dev = nullptr;        // device copies of buffers, pads and the
  void** pads_dev = nullptr;           // group's global ranks, in one block that
  int* global_ranks_dev = nullptr;     // starts at buffers_dev
  size_t arrays_bytes = 0;             // the block's size (peer_arrays.cpp)
  bool all_direct = false;             // every rank of the group is on this host

  PeerView() = default;
  PeerView(const PeerView&) = delete;
  PeerView& operator=(const PeerView&) = delete;
  ~PeerView();  // deregisters its own window while the group's communicator lives
};

// Collective over the group: checks every rank passes an allocation of the
// same layout; registers the segments of the ranks' allocations that the
// group has not seen yet (or the allocations themselves, when they have no
// segment) as external windows, and reads the peers' addresses from the
// windows' flat VA.
std::shared_ptr<PeerView> make_peer_view(std::shared_ptr<Allocation> alloc,
                                         std::shared_ptr<GroupComm> group);

// ---------------------------------------------------------- peer_arrays.cpp

// A device block of `bytes` on `device` (current) holding a copy of `host`,
// complete when this returns; from a pool, so a rendezvous pays no
// cudaMalloc and a freed view no device-wide wait.
void* peer_arrays_upload(int device, const void* host, size_t bytes);
// Gives the block back; it is reused only after the device has finished
// every kernel that may read it.
void peer_arrays_release(int device, void* block, size_t bytes);

// ------------------------------------------------------- signal_kernels.cu

// Torch's signal-pad protocol: the pad of rank r holds one uint32_t per
// (channel, peer) at [channel * world_size + peer]; a sender waits for its
// slot in the receiver's pad to be 0 and sets it to 1 (release), the
// receiver waits for 1 and sets it back to 0 (acquire). timeout_ms 0 waits
// for ever; past a timeout the kernel prints which wait expired and traps,
// as torch's own backends do.
void launch_barrier(uint32_t** pads_dev, int channel, int rank, int world_size,
                    uint64_t timeout_ms, cudaStream_t stream);
void launch_put_signal(uint32_t** pads_dev, int dst_rank, int channel, int rank, int world_size,
                       uint64_t timeout_ms, cudaStream_t stream);
void launch_wait_signal(uint32_t** pads_dev, int src_rank, int channel, int rank, int world_size,
                        uint64_t timeout_ms, cudaStream_t stream);

}  // namespace cco_torch
