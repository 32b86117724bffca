/*
 * Host platform: symmetric memory in CPU memory, so every protocol above it
 * runs and is tested on machines without a GPU.
 *
 * A chunk is a memfd; mapping it MAP_SHARED|MAP_FIXED into the PROT_NONE
 * reservation is the cuMemMap of this platform, and passing its fd to a peer
 * is the POSIX-fd export. Unmapping puts a PROT_NONE anonymous mapping back,
 * so the reservation stays intact and stray accesses still fault.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "platform/platform.h"

/* Process-wide table of this process's mapped chunks, so memory of one
 * communicator can be imported into another (ccoMemImport): the address
 * leads back to the memfd. The only shared state of this platform. */
typedef struct host_mapping {
  void* addr;
  size_t size;
  int fd; /* not owned: the chunk's fd */
  struct host_mapping* next;
} host_mapping;
static host_mapping* g_mappings;
static pthread_mutex_t g_mappings_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t host_granularity(const cco_platform* p) {
  (void)p;
  long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? (size_t)page : 4096;
}

static ccoResult_t host_reserve(cco_platform* p, size_t size, size_t alignment, void** base) {
  (void)p;
  if (!base || size == 0 || (alignment & (alignment - 1)))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "host reserve: bad arguments");
  if (alignment < host_granularity(p)) alignment = host_granularity(p);
  /* Over-reserve, then trim both ends so the base is aligned. */
  size_t span = size + alignment;
  char* raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED)
    return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_MEM, "cannot reserve %zu bytes of address space: %s",
                     size, strerror(errno));
  char* aligned = (char*)(((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1));
  if (aligned > raw) munmap(raw, (size_t)(aligned - raw));
  size_t tail = (size_t)(raw + span - (aligned + size));
  if (tail) munmap(aligned + size, tail);
  *base = aligned;
  return ccoSuccess;
}

static ccoResult_t host_unreserve(cco_platform* p, void* base, size_t size) {
  (void)p;
  if (munmap(base, size) != 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_MEM, "munmap of the reservation failed: %s",
                     strerror(errno));
  return ccoSuccess;
}

static ccoResult_t host_chunk_create(cco_platform* p, size_t size, cco_chunk* chunk) {
  if (!chunk || size == 0 || size % host_granularity(p))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "chunk size %zu is not a multiple of the page size", size);
  int fd = memfd_create("cco-chunk", MFD_CLOEXEC);
  if (fd < 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_MEM, "memfd_create failed: %s", strerror(errno));
  /* A memfd takes its pages as they are touched, so any size would be
   * accepted here and fail later, at a store (SIGBUS). What cannot fit in
   * this machine's memory is refused now, as cuMemCreate refuses it on a
   * GPU. */
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0 && size / (size_t)pageSize > (size_t)pages) {
    close(fd);
    return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_MEM,
                     "%zu bytes are more than this machine's memory (%zu bytes)", size,
                     (size_t)pages * (size_t)pageSize);
  }
  if (ftruncate(fd, (off_t)size) != 0) {
    int err = errno;
    close(fd);
    return cco_error(NULL, err == ENOSPC || err == ENOMEM ? ccoOutOfMemory : ccoSystemError,
                     CCO_SUBSYS_MEM, "cannot size a memfd to %zu bytes: %s", size, strerror(err));
  }
  *chunk = (cco_chunk){size, fd, 0};
  return ccoSuccess;
}

static ccoResult_t host_chunk_release(cco_platform* p, cco_chunk* chunk) {
  (void)p;
  if (chunk->fd >= 0) close(chunk->fd);
  chunk->fd = -1;
  return ccoSuccess;
}

static ccoResult_t host_chunk_export(cco_platform* p, const cco_chunk* chunk, int* fd) {
  (void)p;
  int copy = fcntl(chunk->fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_MEM, "dup of a chunk fd failed: %s",
                     strerror(errno));
  *fd = copy;
  return ccoSuccess;
}

static ccoResult_t host_chunk_import(cco_platform* p, int fd, size_t size, cco_chunk* chunk) {
  (void)p;
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size != size) {
    close(fd);
    return cco_error(NULL, ccoRemoteError, CCO_SUBSYS_MEM,
                     "a peer's chunk is not the %zu bytes it announced", size);
  }
  *chunk = (cco_chunk){size, fd, 0};
  return ccoSuccess;
}

static ccoResult_t host_map(cco_platform* p, void* addr, const cco_chunk* chunk) {
  (void)p;
  host_mapping* m = malloc(sizeof(*m));
  if (!m) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for a mapping record");
  void* got = mmap(addr, chunk->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, chunk->fd, 0);
  if (got == MAP_FAILED) {
    int err = errno;
    free(m);
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_MEM, "mmap of a chunk at %p failed: %s",
                     addr, strerror(err));
  }
  *m = (host_mapping){addr, chunk->size, chunk->fd, NULL};
  pthread_mutex_lock(&g_mappings_lock);
  m->next = g_mappings;
  g_mappings = m;
  pthread_mutex_unlock(&g_mappings_lock);
  return ccoSuccess;
}

static ccoResult_t host_unmap(cco_platform* p, void* addr, size_t size) {
  (void)p;
  pthread_mutex_lock(&g_mappings_lock);
  for (host_mapping** it = &g_mappings; *it; it = &(*it)->next) {
    if ((*it)->addr == addr) {
      host_mapping* dead = *it;
      *it = dead->next;
      free(dead);
      break;
    }
  }
  pthread_mutex_unlock(&g_mappings_lock);
  void* got = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                   -1, 0);
  if (got == MAP_FAILED)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_MEM, "cannot return %p to the reservation: %s",
                     addr, strerror(errno));
  return ccoSuccess;
}

static ccoResult_t host_chunk_from_pointer(cco_platform* p, void* extPtr, size_t size,
                                           cco_chunk* chunk) {
  (void)p;
  int fd = -1;
  size_t found = 0;
  pthread_mutex_lock(&g_mappings_lock);
  for (host_mapping* m = g_mappings; m; m = m->next) {
    if ((char*)extPtr >= (char*)m->addr && (char*)extPtr < (char*)m->addr + m->size) {
      found = m->size;
      if (m->addr == extPtr && size <= m->size) fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 0);
      break;
    }
  }
  pthread_mutex_unlock(&g_mappings_lock);
  if (fd < 0)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     found ? "%p lies in a cco chunk of %zu bytes but is not its start, or %zu "
                             "bytes do not fit it: pass the allocation's own base"
                           : "%p is not memory of a cco communicator of this process (%zu/%zu)",
                     extPtr, found, size);
  *chunk = (cco_chunk){found, fd, 0}; /* the whole allocation */
  return ccoSuccess;
}

static ccoResult_t host_copy_to_device(cco_platform* p, void* dst, const void* src, size_t size) {
  (void)p;
  memcpy(dst, src, size);
  return ccoSuccess;
}

static ccoResult_t host_desc_alloc(cco_platform* p, size_t size, void** ptr) {
  (void)p;
  void* mem = NULL;
  if (posix_memalign(&mem, 64, size) != 0)
    return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for a descriptor");
  memset(mem, 0, size);
  *ptr = mem;
  return ccoSuccess;
}

static ccoResult_t host_desc_free(cco_platform* p, void* ptr) {
  (void)p;
  free(ptr);
  return ccoSuccess;
}

static ccoResult_t host_hostmap_alloc(cco_platform* p, size_t size, void** host, uint64_t* dev) {
  void* mem = NULL;
  CCO_CHECK(host_desc_alloc(p, size, &mem));
  *host = mem;
  *dev = (uint64_t)(uintptr_t)mem;
  return ccoSuccess;
}

static ccoResult_t host_hostmap_free(cco_platform* p, void* host) { return host_desc_free(p, host); }

/* Host "streams": every step runs at once, in call order, which is stream
 * order. The stream value only has to be non-NULL. */
static ccoResult_t host_stream_create(cco_platform* p, void** stream) {
  (void)p;
  *stream = (void*)(uintptr_t)1;
  return ccoSuccess;
}

static ccoResult_t host_stream_destroy(cco_platform* p, void* stream) {
  (void)p, (void)stream;
  return ccoSuccess;
}

static ccoResult_t host_copy_async(cco_platform* p, void* stream, uint64_t dst, uint64_t src, size_t bytes) {
  (void)p, (void)stream;
  if (bytes) memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, bytes);
  return ccoSuccess;
}

static ccoResult_t host_write_value_async(cco_platform* p, void* stream, uint64_t addr, uint64_t value) {
  (void)p, (void)stream;
  __atomic_store_n((uint64_t*)(uintptr_t)addr, value, __ATOMIC_RELEASE);
  return ccoSuccess;
}

static ccoResult_t host_add_value_async(cco_platform* p, void* stream, uint64_t addr, uint64_t value) {
  (void)p, (void)stream;
  __atomic_fetch_add((uint64_t*)(uintptr_t)addr, value, __ATOMIC_ACQ_REL);
  return ccoSuccess;
}

static ccoResult_t host_copy_batch_async(cco_platform* p, void* stream, size_t n, uint64_t* dsts,
                                         uint64_t* srcs, size_t* sizes) {
  for (size_t i = 0; i < n; i++) host_copy_async(p, stream, dsts[i], srcs[i], sizes[i]);
  return ccoSuccess;
}

static ccoResult_t host_write_values_async(cco_platform* p, void* stream, unsigned n,
                                           const uint64_t* addrs, const uint64_t* values) {
  for (unsigned i = 0; i < n; i++) host_write_value_async(p, stream, addrs[i], values[i]);
  return ccoSuccess;
}

/* Spins briefly (the signal often comes within microseconds), then backs
 * off (base/clock.h): yields for 200 us, naps 20 us up to 10 ms, then naps
 * 100 us, so a long wait does not take a core from the ranks that are to
 * send the signal. */
static ccoResult_t host_wait_value_async(cco_platform* p, void* stream, uint64_t addr, uint64_t value,
                                         double timeoutSeconds, const _Atomic int* failed) {
  (void)p, (void)stream;
  const uint64_t* word = (const uint64_t*)(uintptr_t)addr;
  uint64_t start = cco_now_ns();
  for (uint32_t spins = 0; (int64_t)(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) < 0; spins++) {
    if (spins < 64) continue;
    int res = failed ? atomic_load_explicit(failed, memory_order_acquire) : 0;
    if (res != ccoSuccess)
      return cco_error_quiet(NULL, (ccoResult_t)res, "signal wait at %p stopped: the communicator failed (%s)",
                             (void*)(uintptr_t)addr, ccoGetErrorString((ccoResult_t)res));
    uint64_t waited = cco_now_ns() - start;
    if (timeoutSeconds > 0 && (double)waited * 1e-9 > timeoutSeconds)
      return cco_error(NULL, ccoTimeout, CCO_SUBSYS_SDMA, "signal at %p stayed below %llu for %g s",
                       (void*)(uintptr_t)addr, (unsigned long long)value, timeoutSeconds);
    cco_idle_wait(waited, 100000);
  }
  return ccoSuccess;
}

/* CPU memory of one host is reachable from every process on it. */
static ccoResult_t host_peer_access(cco_platform* p, const cco_device_identity* peer, bool* ok,
                                    bool* known) {
  (void)p, (void)peer;
  *ok = *known = true;
  return ccoSuccess;
}

/* CPU affinity then follows no GPU. */
static ccoResult_t host_visible_gpus(cco_platform* p, char busIds[][CCO_BUS_ID_BYTES], int max,
                                     int* n) {
  (void)p, (void)busIds, (void)max;
  *n = 0;
  return ccoSuccess;
}

/* No kernels here: the callers run the device functions on CPU threads. */
static ccoResult_t host_no_kernels(const char* op) {
  return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_INIT,
                   "host platform: %s: there are no GPU kernels on this platform", op);
}

static ccoResult_t host_module_get(cco_platform* p, const void* image, void** module) {
  (void)p, (void)image, (void)module;
  return host_no_kernels("module_get");
}

static void host_module_put(cco_platform* p, void* module) { (void)p, (void)module; }

static ccoResult_t host_kernel_get(cco_platform* p, void* module, const char* name, void** kernel) {
  (void)p, (void)module, (void)name, (void)kernel;
  return host_no_kernels("kernel_get");
}

static ccoResult_t host_kernel_coresident(cco_platform* p, void* kernel, unsigned threads, int* blocks) {
  (void)p, (void)kernel, (void)threads, (void)blocks;
  return host_no_kernels("kernel_coresident");
}

static ccoResult_t host_launch(cco_platform* p, void* kernel, unsigned grid, unsigned threads, void* stream,
                               void** params) {
  (void)p, (void)kernel, (void)grid, (void)threads, (void)stream, (void)params;
  return host_no_kernels("launch");
}

static bool host_lazy_module_loading(cco_platform* p) {
  (void)p;
  return false;
}

static ccoResult_t host_stream_capturing(cco_platform* p, void* stream, bool* capturing) {
  (void)p, (void)stream;
  *capturing = false;
  return ccoSuccess;
}

static ccoResult_t host_background_thread_init(cco_platform* p) {
  (void)p;
  return ccoSuccess;
}

static ccoResult_t host_stream_busy(cco_platform* p, void* stream, bool* busy) {
  (void)p, (void)stream;
  *busy = false;
  return ccoSuccess;
}

static const cco_platform_ops host_platform_ops = {
    .name = "host",
    .granularity = host_granularity,
    .reserve = host_reserve,
    .unreserve = host_unreserve,
    .chunk_create = host_chunk_create,
    .chunk_release = host_chunk_release,
    .chunk_export = host_chunk_export,
    .chunk_import = host_chunk_import,
    .map = host_map,
    .unmap = host_unmap,
    .chunk_from_pointer = host_chunk_from_pointer,
    .copy_to_device = host_copy_to_device,
    .desc_alloc = host_desc_alloc,
    .desc_free = host_desc_free,
    .hostmap_alloc = host_hostmap_alloc,
    .hostmap_free = host_hostmap_free,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .copy_async = host_copy_async,
    .copy_batch_async = host_copy_batch_async,
    .write_value_async = host_write_value_async,
    .add_value_async = host_add_value_async,
    .write_values_async = host_write_values_async,
    .wait_value_async = host_wait_value_async,
    .peer_access = host_peer_access,
    .visible_gpus = host_visible_gpus,
    .module_get = host_module_get,
    .module_put = host_module_put,
    .kernel_get = host_kernel_get,
    .kernel_coresident = host_kernel_coresident,
    .launch = host_launch,
    .stream_capturing = host_stream_capturing,
    .stream_busy = host_stream_busy,
    .background_thread_init = host_background_thread_init,
    .lazy_module_loading = host_lazy_module_loading,
};

ccoResult_t cco_platform_host_open(cco_platform* p) {
  memset(p, 0, sizeof(*p));
  p->ops = &host_platform_ops;
  p->kind = CCO_PLATFORM_HOST;
  p->identity.device = -1;
  p->identity.platform = CCO_PLATFORM_HOST;
  return ccoSuccess;
}
