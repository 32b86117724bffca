/*
 * The cuda platform: symmetric memory in GPU memory through the driver's VMM
 * API. Physical chunks are cuMemCreate allocations that can be exported as
 * POSIX file descriptors; the window layer passes those fds to peers, which
 * import them and map them into their own reservations.
 *
 * The platform is bound to one CUDA context (the caller's current one at
 * open, else device 0's primary context). Every op makes that context current
 * for the duration of the call and restores the caller's afterwards: ops may
 * run on threads other than the one that opened (destroy, progress threads),
 * and leaving our context behind would silently redirect that thread's own
 * CUDA runtime calls to our device.
 */
#include <stdarg.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"
#include "platform/cuda/cuda_driver.h"
#include "platform/platform.h"

typedef struct {
  const cco_cu_api* cu;
  cco_cu_context ctx;
  cco_cu_device dev;
  bool retainedPrimary;  /* ctx is dev's primary context, retained by open */
  cco_cu_stream stream;  /* private non-blocking stream for copy_to_device */
  size_t granularity;    /* recommended granularity of `prop` */
  cco_cu_mem_alloc_prop prop; /* what chunk_create asks for */
  void* addModule;       /* add_value_async's kernel, loaded on first use or by add_value_prepare */
  void* addKernel;
} cuda_state;

/* ------------------------------------------------------------ helpers */

/* Records a failed driver call: "cuda: <what> failed: CUDA_ERROR_X: text". */
static ccoResult_t cu_fail(ccoResult_t res, cco_cu_result r, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ccoResult_t cu_fail(ccoResult_t res, cco_cu_result r, const char* fmt, ...) {
  char what[192];
  char err[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  cco_cu_error_text(r, err, sizeof(err));
  return cco_error(NULL, res, CCO_SUBSYS_MEM, "cuda: %s failed: %s", what, err);
}

/* Out of device memory (or of address space) is the caller's to handle
 * (smaller windows, fewer ranks); anything else is a driver failure. */
static ccoResult_t cu_result_code(cco_cu_result r) {
  return r == CCO_CU_ERROR_OUT_OF_MEMORY ? ccoOutOfMemory : ccoCudaError;
}

static cco_cu_deviceptr dptr(const void* p) { return (cco_cu_deviceptr)(uintptr_t)p; }

static cuda_state* state(const cco_platform* p) { return p ? (cuda_state*)p->impl : NULL; }

static ccoResult_t not_open(const char* op) {
  return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: %s on a platform not open",
                   op);
}

/* The caller's context, restored by ctx_leave. */
typedef struct {
  cco_cu_context prev;
  bool switched;
} ctx_scope;

static ccoResult_t ctx_enter(const cuda_state* s, ctx_scope* sc) {
  sc->prev = NULL;
  sc->switched = false;
  cco_cu_result r = s->cu->ctxGetCurrent(&sc->prev);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuCtxGetCurrent");
  if (sc->prev == s->ctx) return ccoSuccess;
  /* With a context stack this replaces its top, and ctx_leave puts the
   * caller's back; with none (prev NULL) it binds ours and ctx_leave's
   * cuCtxSetCurrent(NULL) unbinds it again. */
  r = s->cu->ctxSetCurrent(s->ctx);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuCtxSetCurrent");
  sc->switched = true;
  return ccoSuccess;
}

static void ctx_leave(const cuda_state* s, const ctx_scope* sc) {
  if (sc->switched) (void)s->cu->ctxSetCurrent(sc->prev);
}

static bool is_multiple(size_t value, size_t granule) { return granule && value % granule == 0; }

/* ------------------------------------------------------------ ops */

static size_t cuda_granularity(const cco_platform* p) {
  const cuda_state* s = state(p);
  return s ? s->granularity : 0;
}

static ccoResult_t cuda_reserve(cco_platform* p, size_t size, size_t alignment, void** base) {
  cuda_state* s = state(p);
  if (!s) return not_open("reserve");
  /* Chunks are mapped at granularity-aligned offsets, so a reservation that
   * is not a whole number of granules could not be filled. */
  if (!base || !is_multiple(size, s->granularity) || (alignment & (alignment - 1)) != 0)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: reserve(size %zu, alignment %zu): size must be a non-zero multiple of "
                     "%zu and alignment 0 or a power of two",
                     size, alignment, s->granularity);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_deviceptr ptr = 0;
  cco_cu_result r = s->cu->memAddressReserve(&ptr, size, alignment, 0, 0);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(cu_result_code(r), r, "cuMemAddressReserve(%zu bytes, alignment %zu)", size,
                   alignment);
  *base = (void*)(uintptr_t)ptr;
  return ccoSuccess;
}

static ccoResult_t cuda_unreserve(cco_platform* p, void* base, size_t size) {
  cuda_state* s = state(p);
  if (!s) return not_open("unreserve");
  if (!base || size == 0)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: unreserve(%p, %zu)", base,
                     size);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->memAddressFree(dptr(base), size);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuMemAddressFree(%p, %zu bytes)", base, size);
  return ccoSuccess;
}

static ccoResult_t cuda_chunk_create(cco_platform* p, size_t size, cco_chunk* chunk) {
  cuda_state* s = state(p);
  if (!s) return not_open("chunk_create");
  if (!chunk || !is_multiple(size, s->granularity))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: chunk size %zu is not a non-zero multiple of the granularity %zu", size,
                     s->granularity);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_mem_handle h = 0;
  cco_cu_result r = s->cu->memCreate(&h, size, &s->prop, 0);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(cu_result_code(r), r, "cuMemCreate(%zu bytes on device %d)", size, s->dev);
  chunk->size = size;
  chunk->fd = -1; /* exported on demand by chunk_export */
  chunk->handle = h;
  return ccoSuccess;
}

/* A handle of 0 means "none" (the driver's handles are never 0), which makes
 * releasing a chunk twice harmless. */
static ccoResult_t cuda_chunk_release(cco_platform* p, cco_chunk* chunk) {
  cuda_state* s = state(p);
  if (!s) return not_open("chunk_release");
  if (!chunk) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: release NULL chunk");
  if (chunk->fd >= 0) close(chunk->fd);
  chunk->fd = -1;
  if (chunk->handle == 0) return ccoSuccess;
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  /* The memory itself goes once no mapping refers to it either. */
  cco_cu_result r = s->cu->memRelease((cco_cu_mem_handle)chunk->handle);
  ctx_leave(s, &sc);
  chunk->handle = 0;
  chunk->size = 0;
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuMemRelease");
  return ccoSuccess;
}

static ccoResult_t cuda_chunk_export(cco_platform* p, const cco_chunk* chunk, int* fd) {
  cuda_state* s = state(p);
  if (!s) return not_open("chunk_export");
  if (!chunk || !chunk->handle || !fd)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: export of no chunk");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  /* For POSIX_FILE_DESCRIPTOR the driver writes an int to *shareableHandle. */
  int out = -1;
  cco_cu_result r = s->cu->memExportToShareableHandle(
      &out, (cco_cu_mem_handle)chunk->handle, CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuMemExportToShareableHandle(POSIX fd, %zu bytes)",
                   chunk->size);
  *fd = out;
  return ccoSuccess;
}

static ccoResult_t cuda_chunk_import(cco_platform* p, int fd, size_t size, cco_chunk* chunk) {
  cuda_state* s = state(p);
  if (!s) {
    if (fd >= 0) close(fd);
    return not_open("chunk_import");
  }
  if (fd < 0 || !chunk || !is_multiple(size, s->granularity)) {
    if (fd >= 0) close(fd);
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: import(fd %d, %zu bytes): size must be a non-zero multiple of %zu", fd,
                     size, s->granularity);
  }
  ctx_scope sc;
  ccoResult_t res = ctx_enter(s, &sc);
  if (res != ccoSuccess) {
    close(fd);
    return res;
  }
  cco_cu_mem_handle h = 0;
  /* For POSIX_FILE_DESCRIPTOR the fd itself is passed, cast to a pointer. */
  cco_cu_result r = s->cu->memImportFromShareableHandle(
      &h, (void*)(uintptr_t)fd, CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  ctx_leave(s, &sc);
  /* The handle holds its own reference to the memory: the fd is spent. */
  close(fd);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(cu_result_code(r), r, "cuMemImportFromShareableHandle(fd %d, %zu bytes)", fd,
                   size);
  chunk->size = size;
  chunk->fd = -1;
  chunk->handle = h;
  return ccoSuccess;
}

static ccoResult_t cuda_map(cco_platform* p, void* addr, const cco_chunk* chunk) {
  cuda_state* s = state(p);
  if (!s) return not_open("map");
  if (!addr || !chunk || !chunk->handle || !is_multiple(chunk->size, s->granularity) ||
      !is_multiple((uintptr_t)addr, s->granularity))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: map(%p, %zu bytes): address and size must be multiples of %zu", addr,
                     chunk ? chunk->size : 0, s->granularity);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  const cco_cu_api* cu = s->cu;
  cco_cu_result r = cu->memMap(dptr(addr), chunk->size, 0, (cco_cu_mem_handle)chunk->handle, 0);
  if (r != CCO_CU_SUCCESS) {
    ctx_leave(s, &sc);
    return cu_fail(cu_result_code(r), r, "cuMemMap(%p, %zu bytes)", addr, chunk->size);
  }
  /* A fresh mapping is inaccessible until access is granted. Only this
   * rank's device needs it: peers map the memory in their own processes.
   * An imported chunk living on another GPU needs peer access to it, which
   * is where this fails without NVLink/P2P. */
  cco_cu_mem_access_desc access = {
      .location = {.type = CCO_CU_MEM_LOCATION_TYPE_DEVICE, .id = s->dev},
      .flags = CCO_CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
  };
  r = cu->memSetAccess(dptr(addr), chunk->size, &access, 1);
  if (r != CCO_CU_SUCCESS) (void)cu->memUnmap(dptr(addr), chunk->size);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuMemSetAccess(%p, %zu bytes, device %d read-write)", addr,
                   chunk->size, s->dev);
  return ccoSuccess;
}

/* cuMemUnmap takes whole mappings only: (addr, size) must be exactly what
 * one map call mapped. */
static ccoResult_t cuda_unmap(cco_platform* p, void* addr, size_t size) {
  cuda_state* s = state(p);
  if (!s) return not_open("unmap");
  if (!addr || size == 0)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: unmap(%p, %zu)", addr, size);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  /* cuMemUnmap does not wait for work still using the range: a kernel or
   * copy landing after it faults the MMU and kills the context for good.
   * Like cudaFree, wait for this context's work first. */
  const char* call = "cuCtxSynchronize";
  cco_cu_result r = s->cu->ctxSynchronize();
  if (r == CCO_CU_SUCCESS) {
    call = "cuMemUnmap";
    r = s->cu->memUnmap(dptr(addr), size);
  }
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "%s(%p, %zu bytes)", call, addr, size);
  return ccoSuccess;
}

/* The body of chunk_from_pointer, inside the context scope. */
static ccoResult_t from_pointer(cuda_state* s, void* extPtr, size_t size, cco_chunk* chunk) {
  const cco_cu_api* cu = s->cu;
  /* For VMM memory the range is that of the one mapping holding extPtr, so
   * base == extPtr and a matching size also say the window is one whole
   * cuMemCreate allocation, not part of one nor several mapped side by side
   * (whose handles would not cover the window). */
  cco_cu_deviceptr base = 0;
  size_t allocSize = 0;
  char err[128];
  cco_cu_result r = cu->memGetAddressRange(&base, &allocSize, dptr(extPtr));
  if (r != CCO_CU_SUCCESS)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: external buffer %p is not device memory (cuMemGetAddressRange: %s)",
                     extPtr, cco_cu_error_text(r, err, sizeof(err)));
  if (base != dptr(extPtr) || size > allocSize)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: external buffer %p (%zu bytes) is not the start of one allocation "
                     "that holds it: the allocation holding it starts at %p and has %zu bytes",
                     extPtr, size, (void*)(uintptr_t)base, allocSize);

  cco_cu_mem_handle h = 0;
  r = cu->memRetainAllocationHandle(&h, extPtr);
  if (r != CCO_CU_SUCCESS)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: external buffer %p is not a cuMem (VMM) allocation "
                     "(cuMemRetainAllocationHandle: %s); cudaMalloc/cuMemAlloc memory cannot be "
                     "shared, allocate it with cuMemCreate and POSIX-fd handles",
                     extPtr, cco_cu_error_text(r, err, sizeof(err)));

  cco_cu_mem_alloc_prop prop;
  memset(&prop, 0, sizeof(prop));
  ccoResult_t res = ccoSuccess;
  r = cu->memGetAllocationPropertiesFromHandle(&prop, h);
  if (r != CCO_CU_SUCCESS) {
    res = cu_fail(ccoCudaError, r, "cuMemGetAllocationPropertiesFromHandle(%p)", extPtr);
  } else if (!(prop.requestedHandleTypes & CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
    res = cco_error(NULL, ccoUnsupported, CCO_SUBSYS_MEM,
                    "cuda: external buffer %p: allocation cannot be exported as a POSIX fd (it was "
                    "created with handle types 0x%x; cuMemCreate needs "
                    "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)",
                    extPtr, prop.requestedHandleTypes);
  } else if (prop.location.type != CCO_CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != s->dev) {
    res = cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                    "cuda: external buffer %p lives at location type %u id %d, not on this "
                    "rank's device %d",
                    extPtr, prop.location.type, prop.location.id, s->dev);
  }
  if (res != ccoSuccess) {
    (void)cu->memRelease(h); /* drops our retain only */
    return res;
  }
  /* The whole allocation is mapped: torch, for one, allocates more than
   * the tensor (a signal pad, rounding to the granularity). */
  chunk->size = allocSize;
  chunk->fd = -1;
  chunk->handle = h; /* chunk_release's cuMemRelease drops the retain */
  return ccoSuccess;
}

static ccoResult_t cuda_chunk_from_pointer(cco_platform* p, void* extPtr, size_t size,
                                           cco_chunk* chunk) {
  cuda_state* s = state(p);
  if (!s) return not_open("chunk_from_pointer");
  if (!extPtr || !chunk || size == 0)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "cuda: chunk_from_pointer(%p, %zu bytes)", extPtr, size);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  ccoResult_t res = from_pointer(s, extPtr, size, chunk);
  ctx_leave(s, &sc);
  return res;
}

/* On a private non-blocking stream, then waited for: cuMemcpyHtoD on the
 * legacy default stream would wait for all work in blocking streams of the
 * context (a long-running or persistent user kernel stalls or deadlocks it),
 * and from pageable memory it may return before the DMA has landed, while
 * peers read the descriptors as soon as this returns. */
static ccoResult_t cuda_copy_to_device(cco_platform* p, void* dst, const void* src, size_t size) {
  cuda_state* s = state(p);
  if (!s) return not_open("copy_to_device");
  if (size == 0) return ccoSuccess;
  if (!dst || !src)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: copy_to_device(%p, %p)", dst,
                     src);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  const char* call = "cuMemcpyHtoDAsync";
  cco_cu_result r = s->cu->memcpyHtoDAsync(dptr(dst), src, size, s->stream);
  if (r == CCO_CU_SUCCESS) {
    call = "cuStreamSynchronize";
    r = s->cu->streamSynchronize(s->stream);
  }
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "%s(%p, %zu bytes)", call, dst, size);
  return ccoSuccess;
}

static ccoResult_t cuda_desc_alloc(cco_platform* p, size_t size, void** ptr) {
  cuda_state* s = state(p);
  if (!s) return not_open("desc_alloc");
  if (!ptr || size == 0)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: desc_alloc(%zu bytes)", size);
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_deviceptr d = 0;
  cco_cu_result r = s->cu->memAlloc(&d, size);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(cu_result_code(r), r, "cuMemAlloc(%zu bytes)", size);
  *ptr = (void*)(uintptr_t)d;
  return ccoSuccess;
}

static ccoResult_t cuda_desc_free(cco_platform* p, void* ptr) {
  cuda_state* s = state(p);
  if (!s) return not_open("desc_free");
  if (!ptr) return ccoSuccess;
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->memFree(dptr(ptr));
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuMemFree(%p)", ptr);
  return ccoSuccess;
}

/* Pinned host memory mapped for the device: the host can set a word that
 * running kernels see. */
static ccoResult_t cuda_hostmap_alloc(cco_platform* p, size_t size, void** host, uint64_t* dev) {
  cuda_state* s = state(p);
  if (!s) return not_open("hostmap_alloc");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  void* h = NULL;
  cco_cu_deviceptr d = 0;
  const char* call = "cuMemHostAlloc";
  cco_cu_result r = s->cu->memHostAlloc(&h, size, CCO_CU_MEMHOSTALLOC_PORTABLE | CCO_CU_MEMHOSTALLOC_DEVICEMAP);
  if (r == CCO_CU_SUCCESS) {
    call = "cuMemHostGetDevicePointer";
    r = s->cu->memHostGetDevicePointer(&d, h, 0);
    if (r != CCO_CU_SUCCESS) (void)s->cu->memFreeHost(h);
  }
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "%s(%zu bytes)", call, size);
  memset(h, 0, size);
  *host = h;
  *dev = d;
  return ccoSuccess;
}

static ccoResult_t cuda_hostmap_free(cco_platform* p, void* host) {
  cuda_state* s = state(p);
  if (!s) return not_open("hostmap_free");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->memFreeHost(host);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuMemFreeHost(%p)", host);
  return ccoSuccess;
}

/* ------------------------------------------------------------ streams (SDMA) */

static ccoResult_t cuda_stream_create(cco_platform* p, void** stream) {
  cuda_state* s = state(p);
  if (!s) return not_open("stream_create");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_stream st = NULL;
  cco_cu_result r = s->cu->streamCreate(&st, CCO_CU_STREAM_NON_BLOCKING);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuStreamCreate");
  *stream = st;
  return ccoSuccess;
}

static ccoResult_t cuda_stream_destroy(cco_platform* p, void* stream) {
  cuda_state* s = state(p);
  if (!s) return not_open("stream_destroy");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->streamDestroy((cco_cu_stream)stream);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuStreamDestroy");
  return ccoSuccess;
}

static ccoResult_t cuda_copy_async(cco_platform* p, void* stream, uint64_t dst, uint64_t src, size_t bytes) {
  cuda_state* s = state(p);
  if (!s) return not_open("copy_async");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->memcpyAsync(dst, src, bytes, (cco_cu_stream)stream);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuMemcpyAsync(%#llx <- %#llx, %zu bytes)", (unsigned long long)dst,
                   (unsigned long long)src, bytes);
  return ccoSuccess;
}

/* The default flags put a system-wide fence before the write: the data of
 * the copies before it on the stream is visible before the value. */
static ccoResult_t cuda_write_value_async(cco_platform* p, void* stream, uint64_t addr, uint64_t value) {
  cuda_state* s = state(p);
  if (!s) return not_open("write_value_async");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->streamWriteValue64((cco_cu_stream)stream, addr, value,
                                              CCO_CU_STREAM_WRITE_VALUE_DEFAULT);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuStreamWriteValue64(%#llx)", (unsigned long long)addr);
  return ccoSuccess;
}

/* add_value_async's kernel, in PTX that the driver compiles for whatever
 * GPU this is on first use: the platform then needs no fatbin of its own.
 * The fence makes the stream's earlier copies visible before the add. */
static const char kAddValuePtx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry cco_add_value(.param .u64 addr, .param .u64 value) {\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [addr];\n"
    "  ld.param.u64 %rd2, [value];\n"
    "  membar.sys;\n"
    "  red.global.add.u64 [%rd1], %rd2;\n"
    "  ret;\n"
    "}\n";
static pthread_mutex_t g_add_lock = PTHREAD_MUTEX_INITIALIZER;

static ccoResult_t cuda_module_get(cco_platform* p, const void* image, void** module);
static ccoResult_t cuda_kernel_get(cco_platform* p, void* module, const char* name, void** kernel);
static ccoResult_t cuda_launch(cco_platform* p, void* kernel, unsigned grid, unsigned threads, void* stream,
                               void** params);

/* The add kernel, loaded once per context: *kernel. */
static ccoResult_t add_kernel(cco_platform* p, cuda_state* s, void** kernel) {
  ccoResult_t res = ccoSuccess;
  pthread_mutex_lock(&g_add_lock);
  if (!s->addKernel) {
    if (!s->addModule) res = cuda_module_get(p, kAddValuePtx, &s->addModule);
    if (res == ccoSuccess) res = cuda_kernel_get(p, s->addModule, "cco_add_value", &s->addKernel);
  }
  *kernel = s->addKernel;
  pthread_mutex_unlock(&g_add_lock);
  return res;
}

static ccoResult_t cuda_add_value_prepare(cco_platform* p) {
  cuda_state* s = state(p);
  if (!s) return not_open("add_value_prepare");
  void* kernel = NULL;
  return add_kernel(p, s, &kernel);
}

static ccoResult_t cuda_add_value_async(cco_platform* p, void* stream, uint64_t addr, uint64_t value) {
  cuda_state* s = state(p);
  if (!s) return not_open("add_value_async");
  void* kernel = NULL;
  CCO_CHECK(add_kernel(p, s, &kernel));
  void* params[2] = {&addr, &value};
  return cuda_launch(p, kernel, 1, 1, stream, params);
}

/* cuMemcpyBatchAsync costs about as much host time as one cuMemcpyAsync,
 * whatever the count: the lever for streams of small copies. */
static ccoResult_t cuda_copy_batch_async(cco_platform* p, void* stream, size_t n, uint64_t* dsts,
                                         uint64_t* srcs, size_t* sizes) {
  cuda_state* s = state(p);
  if (!s) return not_open("copy_batch_async");
  if (n == 1 || !s->cu->memcpyBatchAsync) {
    for (size_t i = 0; i < n; i++) CCO_CHECK(cuda_copy_async(p, stream, dsts[i], srcs[i], sizes[i]));
    return ccoSuccess;
  }
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_memcpy_attributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = CCO_CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t attrIdx = 0;
  /* uint64_t and CUdeviceptr have one size and representation. */
  cco_cu_result r = s->cu->memcpyBatchAsync((cco_cu_deviceptr*)dsts, (cco_cu_deviceptr*)srcs, sizes, n, &attr,
                                            &attrIdx, 1, (cco_cu_stream)stream);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuMemcpyBatchAsync(%zu copies, first %#llx <- %#llx, %zu bytes)", n,
                   (unsigned long long)dsts[0], (unsigned long long)srcs[0], sizes[0]);
  return ccoSuccess;
}

static ccoResult_t cuda_write_values_async(cco_platform* p, void* stream, unsigned n, const uint64_t* addrs,
                                           const uint64_t* values) {
  cuda_state* s = state(p);
  if (!s) return not_open("write_values_async");
  enum { kMaxOps = 8 };
  if (n == 1 || n > kMaxOps || !s->cu->streamBatchMemOp) {
    for (unsigned i = 0; i < n; i++) CCO_CHECK(cuda_write_value_async(p, stream, addrs[i], values[i]));
    return ccoSuccess;
  }
  cco_cu_batch_mem_op ops[kMaxOps];
  memset(ops, 0, sizeof(ops));
  for (unsigned i = 0; i < n; i++) {
    ops[i].writeValue.operation = CCO_CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[i].writeValue.address = addrs[i];
    ops[i].writeValue.value64 = values[i];
    ops[i].writeValue.flags = CCO_CU_STREAM_WRITE_VALUE_DEFAULT; /* keeps the fence */
  }
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->streamBatchMemOp((cco_cu_stream)stream, n, ops, 0);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuStreamBatchMemOp(%u writes, first %#llx)", n, (unsigned long long)addrs[0]);
  return ccoSuccess;
}

static ccoResult_t cuda_wait_value_async(cco_platform* p, void* stream, uint64_t addr, uint64_t value,
                                         double timeoutSeconds, const _Atomic int* failed) {
  (void)timeoutSeconds, (void)failed; /* the stream waits, not the caller */
  cuda_state* s = state(p);
  if (!s) return not_open("wait_value_async");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->streamWaitValue64((cco_cu_stream)stream, addr, value, CCO_CU_STREAM_WAIT_VALUE_GEQ);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuStreamWaitValue64(%#llx)", (unsigned long long)addr);
  return ccoSuccess;
}

/* The same GPU (several ranks under MPS) always works; another GPU must be
 * a P2P peer (NVLink or PCIe) of this one. */
static ccoResult_t cuda_peer_access(cco_platform* p, const cco_device_identity* peer, bool* ok,
                                    bool* known) {
  cuda_state* s = state(p);
  if (!s) return not_open("peer_access");
  *known = true;
  *ok = peer->platform == CCO_PLATFORM_CUDA;
  if (!*ok || strcasecmp(peer->busId, p->identity.busId) == 0) return ccoSuccess;
  cco_cu_device other = 0;
  if (s->cu->deviceGetByPCIBusId(&other, peer->busId) != CCO_CU_SUCCESS) {
    *known = false; /* not visible to this process: the driver will tell at map time */
    return ccoSuccess;
  }
  int can = 0;
  cco_cu_result r = s->cu->deviceCanAccessPeer(&can, s->dev, other);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuDeviceCanAccessPeer");
  *ok = can != 0;
  return ccoSuccess;
}

static ccoResult_t cuda_visible_gpus(cco_platform* p, char busIds[][CCO_BUS_ID_BYTES], int max,
                                     int* n) {
  (void)p;
  return cco_cuda_visible_bus_ids(busIds, max, n);
}

/* ------------------------------------------------------------ kernels */

/* Modules of libcco's own images, one per (context, image) for the whole
 * process: a module belongs to a context, and every communicator of that
 * context shares it. */
typedef struct cuda_module {
  cco_cu_context ctx;
  const void* image;
  cco_cu_module module;
  int users;
  struct cuda_module* next;
} cuda_module;
static cuda_module* g_modules;
static pthread_mutex_t g_modules_lock = PTHREAD_MUTEX_INITIALIZER;

static ccoResult_t cuda_module_get(cco_platform* p, const void* image, void** module) {
  cuda_state* s = state(p);
  if (!s) return not_open("module_get");
  pthread_mutex_lock(&g_modules_lock);
  cuda_module* m = g_modules;
  while (m && (m->ctx != s->ctx || m->image != image)) m = m->next;
  ccoResult_t res = ccoSuccess;
  if (!m) {
    m = calloc(1, sizeof(*m));
    ctx_scope sc;
    res = m ? ctx_enter(s, &sc) : cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_INIT, "no memory");
    if (res == ccoSuccess) {
      cco_cu_result r = s->cu->moduleLoadData(&m->module, image);
      ctx_leave(s, &sc);
      if (r == CCO_CU_ERROR_NO_BINARY_FOR_GPU)
        res = cu_fail(ccoUnsupported, r, "cuModuleLoadData: libcco's kernels have no code for this GPU "
                      "(device %d); they were built for the architectures the build's nvcc listed", s->dev);
      else if (r != CCO_CU_SUCCESS)
        res = cu_fail(ccoCudaError, r, "cuModuleLoadData");
    }
    if (res == ccoSuccess) {
      m->ctx = s->ctx;
      m->image = image;
      m->next = g_modules;
      g_modules = m;
    } else {
      free(m);
      m = NULL;
    }
  }
  if (m) {
    m->users++;
    *module = m;
  }
  pthread_mutex_unlock(&g_modules_lock);
  return res;
}

static void cuda_module_put(cco_platform* p, void* module) {
  cuda_state* s = state(p);
  if (!s || !module) return;
  pthread_mutex_lock(&g_modules_lock);
  cuda_module** link = &g_modules;
  while (*link && *link != module) link = &(*link)->next;
  cuda_module* m = *link;
  if (m && --m->users == 0) {
    *link = m->next;
    ctx_scope sc;
    if (ctx_enter(s, &sc) == ccoSuccess) {
      (void)s->cu->moduleUnload(m->module);
      ctx_leave(s, &sc);
    }
    free(m);
  }
  pthread_mutex_unlock(&g_modules_lock);
}

static ccoResult_t cuda_kernel_get(cco_platform* p, void* module, const char* name, void** kernel) {
  cuda_state* s = state(p);
  if (!s) return not_open("kernel_get");
  cco_cu_function fn = NULL;
  cco_cu_result r = s->cu->moduleGetFunction(&fn, ((cuda_module*)module)->module, name);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuModuleGetFunction(%s)", name);
  *kernel = fn;
  return ccoSuccess;
}

static ccoResult_t cuda_kernel_coresident(cco_platform* p, void* kernel, unsigned threads, int* blocks) {
  cuda_state* s = state(p);
  if (!s) return not_open("kernel_coresident");
  int perSm = 0, sms = 0;
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->occupancyMaxActiveBlocksPerMultiprocessor(&perSm, (cco_cu_function)kernel,
                                                                     (int)threads, 0);
  cco_cu_result r2 = s->cu->deviceGetAttribute(&sms, CCO_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s->dev);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  if (r2 != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r2, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  *blocks = perSm * sms;
  return ccoSuccess;
}

static ccoResult_t cuda_launch(cco_platform* p, void* kernel, unsigned grid, unsigned threads, void* stream,
                               void** params) {
  cuda_state* s = state(p);
  if (!s) return not_open("launch");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->launchKernel((cco_cu_function)kernel, grid, 1, 1, threads, 1, 1, 0,
                                        (cco_cu_stream)stream, params, NULL);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuLaunchKernel(%u blocks of %u threads)", grid, threads);
  return ccoSuccess;
}

static bool cuda_lazy_module_loading(cco_platform* p) {
  cuda_state* s = state(p);
  int mode = 0;
  return s && s->cu->moduleGetLoadingMode && s->cu->moduleGetLoadingMode(&mode) == CCO_CU_SUCCESS && mode == 2;
}

static ccoResult_t cuda_stream_capturing(cco_platform* p, void* stream, bool* capturing) {
  cuda_state* s = state(p);
  if (!s) return not_open("stream_capturing");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_capture_status st = CCO_CU_STREAM_CAPTURE_STATUS_NONE;
  cco_cu_result r = s->cu->streamIsCapturing((cco_cu_stream)stream, &st);
  ctx_leave(s, &sc);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuStreamIsCapturing");
  *capturing = st != CCO_CU_STREAM_CAPTURE_STATUS_NONE;
  return ccoSuccess;
}

static ccoResult_t cuda_stream_busy(cco_platform* p, void* stream, bool* busy) {
  cuda_state* s = state(p);
  if (!s) return not_open("stream_busy");
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc));
  cco_cu_result r = s->cu->streamQuery((cco_cu_stream)stream);
  ctx_leave(s, &sc);
  *busy = r == CCO_CU_ERROR_NOT_READY;
  /* No message: the engine asks this in its idle loop, and a failing
   * context fails the engine's next real driver call, which reports it. */
  return r == CCO_CU_SUCCESS || r == CCO_CU_ERROR_NOT_READY ? ccoSuccess : ccoCudaError;
}

static ccoResult_t cuda_background_thread_init(cco_platform* p) {
  cuda_state* s = state(p);
  if (!s) return not_open("background_thread_init");
  int mode = CCO_CU_STREAM_CAPTURE_MODE_RELAXED;
  cco_cu_result r = s->cu->threadExchangeStreamCaptureMode(&mode);
  return r == CCO_CU_SUCCESS ? ccoSuccess : cu_fail(ccoCudaError, r, "cuThreadExchangeStreamCaptureMode");
}

static const cco_platform_ops cuda_platform_ops = {
    .name = "cuda",
    .granularity = cuda_granularity,
    .reserve = cuda_reserve,
    .unreserve = cuda_unreserve,
    .chunk_create = cuda_chunk_create,
    .chunk_release = cuda_chunk_release,
    .chunk_export = cuda_chunk_export,
    .chunk_import = cuda_chunk_import,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .chunk_from_pointer = cuda_chunk_from_pointer,
    .copy_to_device = cuda_copy_to_device,
    .desc_alloc = cuda_desc_alloc,
    .desc_free = cuda_desc_free,
    .hostmap_alloc = cuda_hostmap_alloc,
    .hostmap_free = cuda_hostmap_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .copy_async = cuda_copy_async,
    .copy_batch_async = cuda_copy_batch_async,
    .write_value_async = cuda_write_value_async,
    .add_value_async = cuda_add_value_async,
    .add_value_prepare = cuda_add_value_prepare,
    .write_values_async = cuda_write_values_async,
    .wait_value_async = cuda_wait_value_async,
    .peer_access = cuda_peer_access,
    .visible_gpus = cuda_visible_gpus,
    .module_get = cuda_module_get,
    .module_put = cuda_module_put,
    .kernel_get = cuda_kernel_get,
    .kernel_coresident = cuda_kernel_coresident,
    .launch = cuda_launch,
    .stream_capturing = cuda_stream_capturing,
    .stream_busy = cuda_stream_busy,
    .background_thread_init = cuda_background_thread_init,
    .lazy_module_loading = cuda_lazy_module_loading,
};

/* ------------------------------------------------------------ open / close */

/* The ordinal of dev among the visible devices (CUdevice values are
 * ordinals in practice; this does not rely on it). */
static int device_ordinal(const cco_cu_api* cu, cco_cu_device dev) {
  int n = 0;
  if (cu->deviceGetCount(&n) != CCO_CU_SUCCESS) return (int)dev;
  for (int i = 0; i < n; i++) {
    cco_cu_device d;
    if (cu->deviceGet(&d, i) == CCO_CU_SUCCESS && d == dev) return i;
  }
  return (int)dev;
}

static ccoResult_t check_device(const cuda_state* s) {
  const cco_cu_api* cu = s->cu;
  int vmm = 0, posixFd = 0;
  cco_cu_result r = cu->deviceGetAttribute(
      &vmm, CCO_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, s->dev);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
  if (!vmm)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_MEM,
                     "cuda: device %d does not support virtual memory management (cuMemCreate/"
                     "cuMemMap), which cco needs for symmetric memory",
                     s->dev);
  r = cu->deviceGetAttribute(&posixFd,
                             CCO_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                             s->dev);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r,
                   "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)");
  if (!posixFd)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_MEM,
                     "cuda: device %d cannot export memory as POSIX file descriptors, which cco "
                     "needs to share memory between processes",
                     s->dev);
  return ccoSuccess;
}

/* Creating a primary context costs ~0.2 s and destroying it as much, so
 * the first communicator that retains one keeps one extra reference for the
 * life of the process, as the CUDA runtime does: creating and destroying
 * communicators in a loop then costs milliseconds, not a context each. */
static void hold_primary_for_process(const cco_cu_api* cu, cco_cu_device dev) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static bool held[CCO_MAX_GPUS];
  if (dev < 0 || dev >= CCO_MAX_GPUS) return;
  pthread_mutex_lock(&lock);
  cco_cu_context ctx = NULL;
  if (!held[dev] && cu->devicePrimaryCtxRetain(&ctx, dev) == CCO_CU_SUCCESS) held[dev] = true;
  pthread_mutex_unlock(&lock);
}

/* The GPU for a thread that has not chosen one: CCO_LOCAL_RANK modulo the
 * visible GPUs, so ranks that ccorun starts on a host with several GPUs get
 * one each (one process per GPU, no MPS) without code of their own; GPU 0
 * without CCO_LOCAL_RANK, as the CUDA runtime would pick. */
static ccoResult_t default_device(const cco_cu_api* cu, cco_cu_device* dev, int* ordinal) {
  int n = 0;
  cco_cu_result r = cu->deviceGetCount(&n);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuDeviceGetCount");
  int64_t local = cco_env_int(CCO_ENV_ID_CCO_LOCAL_RANK);
  *ordinal = (local > 0 && n > 0) ? (int)(local % n) : 0;
  r = cu->deviceGet(dev, *ordinal);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuDeviceGet(%d)", *ordinal);
  return ccoSuccess;
}

/* Binds s to the calling thread's current context, or, when there is none,
 * to the primary context of default_device's GPU, made current on this
 * thread so the application's runtime calls that follow use the same GPU. */
static ccoResult_t bind_context(cuda_state* s) {
  const cco_cu_api* cu = s->cu;
  cco_cu_context ctx = NULL;
  cco_cu_result r = cu->ctxGetCurrent(&ctx);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuCtxGetCurrent");
  if (ctx) {
    r = cu->ctxGetDevice(&s->dev);
    if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuCtxGetDevice");
    s->ctx = ctx;
    return ccoSuccess;
  }
  int ordinal = 0;
  CCO_CHECK(default_device(cu, &s->dev, &ordinal));
  r = cu->devicePrimaryCtxRetain(&ctx, s->dev);
  if (r != CCO_CU_SUCCESS)
    return cu_fail(ccoCudaError, r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
  s->ctx = ctx;
  s->retainedPrimary = true;
  hold_primary_for_process(cu, s->dev);
  r = cu->ctxSetCurrent(ctx);
  if (r != CCO_CU_SUCCESS) return cu_fail(ccoCudaError, r, "cuCtxSetCurrent(primary context)");
  return ccoSuccess;
}

static ccoResult_t setup(cuda_state* s, cco_device_identity* id) {
  const cco_cu_api* cu = s->cu;
  CCO_CHECK(bind_context(s));
  ctx_scope sc;
  CCO_CHECK(ctx_enter(s, &sc)); /* a no-op right after bind_context; kept for symmetry */
  ccoResult_t res = check_device(s);
  if (res != ccoSuccess) goto out;

  /* Chunks: pinned device memory of this device, exportable as POSIX fds,
   * and registrable with RDMA NICs where the device allows it for VMM
   * memory (the same flag NCCL sets for its cuMem buffers). */
  memset(&s->prop, 0, sizeof(s->prop));
  s->prop.type = CCO_CU_MEM_ALLOCATION_TYPE_PINNED;
  s->prop.requestedHandleTypes = CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  s->prop.location.type = CCO_CU_MEM_LOCATION_TYPE_DEVICE;
  s->prop.location.id = s->dev;
  int rdma = 0;
  if (cu->deviceGetAttribute(&rdma, CCO_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                             s->dev) == CCO_CU_SUCCESS &&
      rdma)
    s->prop.allocFlags.gpuDirectRDMACapable = 1;

  cco_cu_result r = cu->memGetAllocationGranularity(&s->granularity, &s->prop,
                                                    CCO_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (r != CCO_CU_SUCCESS) {
    res = cu_fail(ccoCudaError, r, "cuMemGetAllocationGranularity(device %d)", s->dev);
    goto out;
  }
  if (s->granularity == 0 || (s->granularity & (s->granularity - 1)) != 0) {
    res = cco_error(NULL, ccoCudaError, CCO_SUBSYS_MEM,
                    "cuda: device %d reports granularity %zu, not a power of two", s->dev,
                    s->granularity);
    goto out;
  }

  r = cu->streamCreate(&s->stream, CCO_CU_STREAM_NON_BLOCKING);
  if (r != CCO_CU_SUCCESS) {
    s->stream = NULL;
    res = cu_fail(cu_result_code(r), r, "cuStreamCreate");
    goto out;
  }

  char busId[CCO_BUS_ID_BYTES];
  memset(busId, 0, sizeof(busId));
  r = cu->deviceGetPCIBusId(busId, (int)sizeof(busId), s->dev);
  if (r != CCO_CU_SUCCESS) {
    res = cu_fail(ccoCudaError, r, "cuDeviceGetPCIBusId(device %d)", s->dev);
    goto out;
  }
  busId[sizeof(busId) - 1] = '\0';
  for (char* c = busId; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  memcpy(id->busId, busId, sizeof(id->busId));
  id->device = device_ordinal(cu, s->dev);
  id->platform = CCO_PLATFORM_CUDA;
out:
  ctx_leave(s, &sc);
  return res;
}

/* Undoes what setup took, in reverse order; safe on a partial setup. */
static void teardown(cuda_state* s) {
  const cco_cu_api* cu = s->cu;
  if (s->stream) {
    ctx_scope sc;
    if (ctx_enter(s, &sc) == ccoSuccess) {
      (void)cu->streamDestroy(s->stream);
      ctx_leave(s, &sc);
    }
    s->stream = NULL;
  }
  if (s->retainedPrimary) {
    /* open made the primary context current on its thread; undo that here
     * when this is that thread (or any thread it is still current on), so
     * the thread is not left bound to a context that may now be reset. */
    cco_cu_context cur = NULL;
    if (cu->ctxGetCurrent(&cur) == CCO_CU_SUCCESS && cur == s->ctx) (void)cu->ctxSetCurrent(NULL);
    (void)cu->devicePrimaryCtxRelease(s->dev);
    s->retainedPrimary = false;
  }
  s->ctx = NULL;
}

ccoResult_t cco_platform_cuda_open(cco_platform* p) {
  if (!p) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "cuda: open(NULL)");
  memset(p, 0, sizeof(*p));
  const cco_cu_api* cu = cco_cu();
  if (!cu)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_MEM, "cuda platform unavailable: %s",
                     cco_cu_unavailable_reason());
  cuda_state* s = calloc(1, sizeof(*s));
  if (!s) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_MEM, "cuda: no memory for state");
  s->cu = cu;
  cco_device_identity id;
  memset(&id, 0, sizeof(id));
  ccoResult_t res = setup(s, &id);
  if (res != ccoSuccess) {
    teardown(s);
    free(s);
    return res;
  }
  p->ops = &cuda_platform_ops;
  p->kind = CCO_PLATFORM_CUDA;
  p->identity = id;
  p->impl = s;
  CCO_INFO(MEM, "cuda platform: device %d (%s), granularity %zu, context %s%s", id.device, id.busId,
           s->granularity, s->retainedPrimary ? "primary (retained)" : "current",
           s->prop.allocFlags.gpuDirectRDMACapable ? ", RDMA-capable chunks" : "");
  return ccoSuccess;
}

void cco_platform_cuda_close(cco_platform* p) {
  if (!p || !p->impl || p->ops != &cuda_platform_ops) return;
  cuda_state* s = p->impl;
  if (s->addModule) cuda_module_put(p, s->addModule);
  s->addModule = s->addKernel = NULL;
  teardown(s);
  free(s);
  memset(p, 0, sizeof(*p));
}
