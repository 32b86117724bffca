/*
 * Platforms: where symmetric memory lives, as an ops table (libfabric's
 * hmem_ops[SYSTEM|CUDA] split).
 *
 * - host: CPU memory. Physical chunks are memfds mapped MAP_SHARED|MAP_FIXED
 *   into a PROT_NONE reservation; a chunk is shared by passing its fd.
 * - cuda: GPU memory through the CUDA driver's VMM API (cuMemCreate with
 *   POSIX-fd handles, cuMemMap, cuMemSetAccess), loaded with dlopen so libcco
 *   never links libcuda and runs on machines without a driver.
 *
 * Both share physical memory between processes as a file descriptor, so the
 * window layer above exchanges fds and never looks at the platform.
 */
#ifndef CCO_PLATFORM_PLATFORM_H_
#define CCO_PLATFORM_PLATFORM_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "boot/topology.h"
#include "cco/cco.h"

#define CCO_MAX_GPUS 64


/* A physical memory chunk owned by this process. */
typedef struct {
  size_t size;
  int fd;          /* host: the memfd; cuda: -1 (exported on demand) */
  uint64_t handle; /* cuda: CUmemGenericAllocationHandle; host: 0 */
} cco_chunk;

/* What a rank says about its device, so LSA peers can check they can map
 * each other's memory. */

typedef struct cco_platform cco_platform;

typedef struct {
  const char* name;
  /* Alignment and size granule of chunks and mappings. */
  size_t (*granularity)(const cco_platform* p);
  /* Virtual address reservation (nothing mapped, any access faults). */
  ccoResult_t (*reserve)(cco_platform* p, size_t size, size_t alignment, void** base);
  ccoResult_t (*unreserve)(cco_platform* p, void* base, size_t size);
  /* Physical memory. */
  ccoResult_t (*chunk_create)(cco_platform* p, size_t size, cco_chunk* chunk);
  ccoResult_t (*chunk_release)(cco_platform* p, cco_chunk* chunk);
  /* A new fd for the chunk, owned by the caller (to send to a peer). */
  ccoResult_t (*chunk_export)(cco_platform* p, const cco_chunk* chunk, int* fd);
  /* Takes a peer's fd (the callee owns it afterwards, also on failure). */
  ccoResult_t (*chunk_import)(cco_platform* p, int fd, size_t size, cco_chunk* chunk);
  /* Maps a chunk at addr inside a reservation, readable and writable by this
   * rank's device (and CPU on the host platform). */
  ccoResult_t (*map)(cco_platform* p, void* addr, const cco_chunk* chunk);
  /* Returns the range to reserved, inaccessible state. */
  ccoResult_t (*unmap)(cco_platform* p, void* addr, size_t size);
  /* The chunk backing an allocation made outside cco (external windows):
   * extPtr must be the start of that allocation and `size` must fit it; the
   * chunk covers the whole allocation. */
  ccoResult_t (*chunk_from_pointer)(cco_platform* p, void* extPtr, size_t size, cco_chunk* chunk);
  /* Copies `size` bytes from host memory to the device-visible address dst
   * (window descriptors). */
  ccoResult_t (*copy_to_device)(cco_platform* p, void* dst, const void* src, size_t size);
  /* Small device-visible allocations for descriptors. */
  ccoResult_t (*desc_alloc)(cco_platform* p, size_t size, void** ptr);
  ccoResult_t (*desc_free)(cco_platform* p, void* ptr);
  /* Host memory the device can read while kernels run (the abort word):
   * *host for the CPU, *dev for kernels. Zero-filled. */
  ccoResult_t (*hostmap_alloc)(cco_platform* p, size_t size, void** host, uint64_t* dev);
  ccoResult_t (*hostmap_free)(cco_platform* p, void* host);
  /* Copy-engine work in stream order (SDMA). A stream of NULL on create
   * means "make one"; the host platform does each step at once on the
   * calling thread and its streams are placeholders. */
  ccoResult_t (*stream_create)(cco_platform* p, void** stream);
  ccoResult_t (*stream_destroy)(cco_platform* p, void* stream);
  ccoResult_t (*copy_async)(cco_platform* p, void* stream, uint64_t dst, uint64_t src, size_t bytes);
  /* n copies in one driver call where the driver has one (the copies of a
   * batch may run in any order among themselves; the batch as a whole is in
   * stream order). Zero-byte entries are not allowed. */
  ccoResult_t (*copy_batch_async)(cco_platform* p, void* stream, size_t n, uint64_t* dsts,
                                  uint64_t* srcs, size_t* sizes);
  /* Stores value at addr once the stream's earlier work is done and
   * visible (a release, system wide). */
  ccoResult_t (*write_value_async)(cco_platform* p, void* stream, uint64_t addr, uint64_t value);
  /* *addr += value, atomically (a GPU atomic on cuda, with a system-wide
   * fence first), once the stream's earlier work is done. */
  ccoResult_t (*add_value_async)(cco_platform* p, void* stream, uint64_t addr, uint64_t value);
  /* Loads now what add_value_async needs (may be NULL: nothing to load),
   * so that its first call does not load a module while kernels that wait
   * for the caller run: a module load waits for them (a deadlock). */
  ccoResult_t (*add_value_prepare)(cco_platform* p);
  /* n such stores in one driver call where the driver has one. */
  ccoResult_t (*write_values_async)(cco_platform* p, void* stream, unsigned n, const uint64_t* addrs,
                                    const uint64_t* values);
  /* The stream waits until *addr >= value (64-bit, wrapping compare). The
   * host platform waits on the calling thread, backing off (it yields, then
   * naps) so a long wait does not spin a core, up to timeoutSeconds (0: no
   * limit), and gives up as soon as *failed (the communicator's async error:
   * a dead peer never sends the signal) is nonzero, returning that result;
   * cuda enqueues the wait and ignores both. */
  ccoResult_t (*wait_value_async)(cco_platform* p, void* stream, uint64_t addr, uint64_t value,
                                  double timeoutSeconds, const _Atomic int* failed);
  /* Whether this rank's device can map and access `peer`'s memory. *known
   * is false when the peer's device is not visible here (nothing to check). */
  ccoResult_t (*peer_access)(cco_platform* p, const cco_device_identity* peer, bool* ok,
                             bool* known);
  /* PCI bus ids ("0000:3b:00.0", lowercase) of every GPU this process
   * sees, in ordinal order (CPU affinity looks for the communicator's GPU
   * among them). The host platform sees none: *n = 0. */
  ccoResult_t (*visible_gpus)(cco_platform* p, char busIds[][CCO_BUS_ID_BYTES], int max, int* n);
  /* Kernels of libcco's own (the collectives'). module_get loads an image
   * (a fatbin) once per CUDA context: every communicator of the context
   * gets the same module, counted, and module_put unloads it with the last
   * user. kernel_get looks a kernel up by name; kernel_coresident says how
   * many blocks of `threads` threads of it the device runs at once (blocks
   * per SM from the occupancy calculator, times the SMs); launch enqueues
   * `grid` blocks on `stream` (NULL: the legacy default stream) with the
   * kernel's parameters. The host platform has no kernels (ccoUnsupported):
   * its "kernels" are CPU threads calling the device functions. */
  ccoResult_t (*module_get)(cco_platform* p, const void* image, void** module);
  void (*module_put)(cco_platform* p, void* module);
  ccoResult_t (*kernel_get)(cco_platform* p, void* module, const char* name, void** kernel);
  ccoResult_t (*kernel_coresident)(cco_platform* p, void* kernel, unsigned threads, int* blocks);
  ccoResult_t (*launch)(cco_platform* p, void* kernel, unsigned grid, unsigned threads, void* stream,
                        void** params);
  /* Whether `stream` is capturing into a CUDA graph (always false on the
   * host platform, whose streams are placeholders). */
  ccoResult_t (*stream_capturing)(cco_platform* p, void* stream, bool* capturing);
  /* Whether work enqueued on `stream` has not finished yet (the SDMA
   * engine's copies in flight; never on the host platform, whose streams do
   * each step at once). */
  ccoResult_t (*stream_busy)(cco_platform* p, void* stream, bool* busy);
  /* Called once by each of the library's own threads (the GDA proxy, the
   * SDMA engine) before its first driver call. Their calls belong to no
   * graph, yet while the application captures one in CUDA's default global
   * mode on another thread, a call CUDA deems unsafe (a stream query) would
   * invalidate that capture: the CUDA platform puts the thread in relaxed
   * capture mode, as NCCL's proxy thread does. Nothing on the host. */
  ccoResult_t (*background_thread_init)(cco_platform* p);
  /* Whether kernels load lazily (CUDA_MODULE_LOADING=LAZY, CUDA's default
   * since 12.2): a first launch then waits for the running kernels while it
   * holds the context, and every other thread's driver call waits with it.
   * False on the host platform and when the driver cannot say. */
  bool (*lazy_module_loading)(cco_platform* p);
} cco_platform_ops;

struct cco_platform {
  const cco_platform_ops* ops;
  cco_platform_kind kind;
  cco_device_identity identity;
  void* impl; /* platform private state */
};

/* Chooses the platform from CCO_PLATFORM (auto: cuda when a GPU is usable)
 * and binds it to the calling thread's current device. */
ccoResult_t cco_platform_open(cco_platform* p);
void cco_platform_close(cco_platform* p);

/* desc_alloc of zero-filled memory (counters, tails). On a failed copy the
 * allocation is still returned in *ptr, for the caller's release path. */
ccoResult_t cco_platform_desc_alloc_zeroed(cco_platform* p, size_t size, void** ptr);

/* What each of the library's own threads (the GDA proxy, the SDMA engine)
 * calls first: short timer slack for its naps (base/clock.h), then the
 * platform's background_thread_init. A failure there is only a warning,
 * logged under `subsys` with the thread's name: without relaxed capture mode
 * a CUDA graph captured while the thread works may be invalidated. */
void cco_platform_background_thread_start(cco_platform* p, cco_log_subsys subsys, const char* thread, int rank);

/* Per-platform constructors (used by cco_platform_open and by tests). */
ccoResult_t cco_platform_host_open(cco_platform* p);
ccoResult_t cco_platform_cuda_open(cco_platform* p);

/* ------------------------------------------------------------ cuda probe */
/* Whether the cuda platform can open here (CCO_PLATFORM=auto, cco-info). */

typedef struct {
  bool available;    /* libcuda loaded, cuInit succeeded, at least one device */
  int deviceCount;
  int driverVersion; /* e.g. 13000 */
  char detail[160];  /* why not available, or a summary */
} cco_cuda_probe_result;

/* Loads libcuda.so.1 once per process and reports what it found. */
void cco_cuda_probe(cco_cuda_probe_result* out);

#endif /* CCO_PLATFORM_PLATFORM_H_ */
