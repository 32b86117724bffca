/*
 * GPU smoke test of the cuda platform (src/platform/cuda): needs one GPU with
 * VMM and POSIX-fd handle support. Uses only the platform ops and, for what
 * the test itself must do to the memory, the driver entry points libcco
 * loaded (cco_cu()).
 *
 *   gpu_platform_smoke        prints one line per step, then "N passed, N failed";
 *                             exits 0 when all passed, 1 otherwise, 77 without a GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "coll/coll.h"
#include "platform/cuda/cuda_driver.h"
#include "platform/platform.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

static int g_passed, g_failed;

static void step(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void step(bool ok, const char* fmt, ...) {
  va_list ap;
  printf("%s ", ok ? "ok  " : "FAIL");
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  if (!ok) {
    const char* last = cco_thread_last_error();
    printf("\n       last error: %s", last && *last ? last : "(none)");
  }
  printf("\n");
  /* A fault from earlier asynchronous work surfaces at the next sync: name
   * the step it follows. */
  const cco_cu_api* cu = cco_cu();
  cco_cu_context cur = NULL;
  if (cu && cu->ctxGetCurrent(&cur) == CCO_CU_SUCCESS && cur) {
    cco_cu_result sr = cu->streamSynchronize(NULL);
    if (sr != CCO_CU_SUCCESS) {
      char err[128];
      printf("FAIL   the context reports %s after this step\n", cco_cu_error_text(sr, err, sizeof(err)));
      ok = false;
    }
  }
  fflush(stdout);
  if (ok) g_passed++;
  else g_failed++;
}

static const char* result_name(ccoResult_t r) { return ccoGetErrorString(r); }

static void fill(uint32_t* buf, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) buf[i] = seed ^ (uint32_t)(i * 2654435761u);
}

/* ---------------------------------------------------------------- thread */

typedef struct {
  cco_platform* p;
  ccoResult_t allocRes, copyRes, freeRes;
  bool ctxRestored;
} thread_arg;

/* Ops from a thread that never touched CUDA: the platform must make its
 * context current for the call and leave the thread as it found it. */
static void* other_thread(void* argp) {
  thread_arg* a = argp;
  const cco_cu_api* cu = cco_cu();
  void* d = NULL;
  uint32_t v[16];
  fill(v, 16, 7);
  a->allocRes = a->p->ops->desc_alloc(a->p, sizeof(v), &d);
  a->copyRes = a->allocRes == ccoSuccess ? a->p->ops->copy_to_device(a->p, d, v, sizeof(v)) : a->allocRes;
  a->freeRes = a->allocRes == ccoSuccess ? a->p->ops->desc_free(a->p, d) : a->allocRes;
  cco_cu_context cur = (cco_cu_context)1;
  a->ctxRestored = cu->ctxGetCurrent(&cur) == CCO_CU_SUCCESS && cur == NULL;
  return NULL;
}

/* ---------------------------------------------------------------- peer */

/* A second process, forked before any CUDA call, that imports a chunk from
 * an fd received over a unix socket and checks its contents: the real peer
 * case (the fd crosses a process boundary, the import has its own context). */
#define PEER_SEED 0x5eed1234u

static int send_fd(int sock, int fd, uint64_t size) {
  char ctl[CMSG_SPACE(sizeof(int))];
  memset(ctl, 0, sizeof(ctl));
  struct iovec iov = {.iov_base = &size, .iov_len = sizeof(size)};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                     .msg_controllen = sizeof(ctl)};
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &m, 0) == (ssize_t)sizeof(size) ? 0 : -1;
}

static int recv_fd(int sock, uint64_t* size) {
  char ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {.iov_base = size, .iov_len = sizeof(*size)};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                     .msg_controllen = sizeof(ctl)};
  if (recvmsg(sock, &m, 0) != (ssize_t)sizeof(*size)) return -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

/* Child: 0 = contents match, 1.. = which step failed (sent back as a byte). */
static int peer_main(int sock) {
  uint64_t size = 0;
  int fd = recv_fd(sock, &size);
  if (fd < 0) return 1;
  cco_platform pl;
  if (cco_platform_cuda_open(&pl) != ccoSuccess) return 2;
  const cco_platform_ops* ops = pl.ops;
  cco_chunk c = {0, -1, 0};
  if (ops->chunk_import(&pl, fd, size, &c) != ccoSuccess) return 3;
  void* va = NULL;
  if (ops->reserve(&pl, size, 0, &va) != ccoSuccess) return 4;
  if (ops->map(&pl, va, &c) != ccoSuccess) return 5;
  size_t n = size / sizeof(uint32_t);
  uint32_t* want = malloc(size);
  uint32_t* got = malloc(size);
  if (!want || !got) return 6;
  fill(want, n, PEER_SEED);
  if (cco_cu()->memcpyDtoH(got, (cco_cu_deviceptr)(uintptr_t)va, size) != CCO_CU_SUCCESS) return 7;
  int rc = memcmp(want, got, size) == 0 ? 0 : 8;
  free(want);
  free(got);
  if (ops->unmap(&pl, va, size) != ccoSuccess) rc = rc ? rc : 9;
  if (ops->chunk_release(&pl, &c) != ccoSuccess) rc = rc ? rc : 10;
  if (ops->unreserve(&pl, va, size) != ccoSuccess) rc = rc ? rc : 11;
  cco_platform_cuda_close(&pl);
  return rc;
}

/* ---------------------------------------------------------------- main */

/* A VMM allocation made the way an external allocator (torch symmetric
 * memory) would: cuMemCreate + own reservation + map + access. */
typedef struct {
  cco_cu_mem_handle h;
  cco_cu_deviceptr va;
  size_t size;
} ext_alloc;

static bool ext_create(const cco_cu_api* cu, int dev, size_t size, unsigned handleTypes,
                       ext_alloc* e) {
  cco_cu_mem_alloc_prop prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CCO_CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = handleTypes;
  prop.location.type = CCO_CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  memset(e, 0, sizeof(*e));
  e->size = size;
  if (cu->memCreate(&e->h, size, &prop, 0) != CCO_CU_SUCCESS) return false;
  if (cu->memAddressReserve(&e->va, size, 0, 0, 0) != CCO_CU_SUCCESS) return false;
  if (cu->memMap(e->va, size, 0, e->h, 0) != CCO_CU_SUCCESS) return false;
  cco_cu_mem_access_desc acc = {.location = {.type = CCO_CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                                .flags = CCO_CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  return cu->memSetAccess(e->va, size, &acc, 1) == CCO_CU_SUCCESS;
}

static void ext_destroy(const cco_cu_api* cu, ext_alloc* e) {
  if (e->va) {
    cu->memUnmap(e->va, e->size);
    cu->memAddressFree(e->va, e->size);
  }
  if (e->h) cu->memRelease(e->h);
  memset(e, 0, sizeof(*e));
}

int main(void) {
  /* The peer is forked first: a child must not inherit CUDA state. */
  int sv[2] = {-1, -1};
  pid_t child = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
    child = fork();
    if (child == 0) {
      close(sv[0]);
      unsigned char rc = (unsigned char)peer_main(sv[1]);
      if (write(sv[1], &rc, 1) != 1) _exit(1);
      _exit(0);
    }
    close(sv[1]);
  }

  cco_platform plat;
  cco_platform* p = &plat;
  ccoResult_t r = cco_platform_cuda_open(p);
  if (r == ccoUnsupported) {
    if (child > 0) {
      close(sv[0]); /* the child's recvmsg sees EOF and it exits */
      waitpid(child, NULL, 0);
    }
    printf("skip: %s\n", cco_thread_last_error());
    return 77;
  }
  step(r == ccoSuccess, "open: %s", result_name(r));
  if (r != ccoSuccess) {
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return 1;
  }
  const cco_cu_api* cu = cco_cu();
  const cco_platform_ops* ops = p->ops;
  size_t gran = ops->granularity(p);
  printf("     device %d, bus id %s, platform %d, granularity %zu\n", p->identity.device,
         p->identity.busId, p->identity.platform, gran);
  step(p->kind == CCO_PLATFORM_CUDA && p->identity.platform == CCO_PLATFORM_CUDA &&
           strlen(p->identity.busId) >= 12 && gran > 0 && (gran & (gran - 1)) == 0,
       "identity and granularity");
  cco_cu_context cur = NULL;
  step(cu->ctxGetCurrent(&cur) == CCO_CU_SUCCESS && cur != NULL,
       "a context is current on the opening thread");

  /* ---- two slots of 4 GiB, one chunk mapped in both (export + import) */
  const size_t slot = 4 * GiB, chunkSize = 64 * MiB;
  void* base = NULL;
  r = ops->reserve(p, 2 * slot, gran, &base);
  step(r == ccoSuccess && base && (uintptr_t)base % gran == 0, "reserve 2 x 4 GiB at %p: %s",
       base, result_name(r));
  char* slot0 = base;
  char* slot1 = (char*)base + slot;

  cco_chunk chunk = {0, -1, 0}, peer = {0, -1, 0};
  r = ops->chunk_create(p, chunkSize, &chunk);
  step(r == ccoSuccess && chunk.handle != 0 && chunk.fd == -1 && chunk.size == chunkSize,
       "chunk_create 64 MiB: %s", result_name(r));
  r = ops->chunk_create(p, gran + 1, &(cco_chunk){0, -1, 0});
  step(r == ccoInvalidArgument, "chunk_create of a non-multiple size refused: %s", result_name(r));

  r = ops->map(p, slot0, &chunk);
  step(r == ccoSuccess, "map chunk at slot 0: %s", result_name(r));

  int fd = -1;
  r = ops->chunk_export(p, &chunk, &fd);
  step(r == ccoSuccess && fd >= 0, "chunk_export -> fd %d: %s", fd, result_name(r));
  r = ops->chunk_import(p, fd, chunkSize, &peer);
  step(r == ccoSuccess && peer.handle != 0, "chunk_import (as a peer would): %s", result_name(r));
  step(fd >= 0 && fcntl(fd, F_GETFD) == -1 && errno == EBADF, "import closed the fd");
  r = ops->map(p, slot1, &peer);
  step(r == ccoSuccess, "map the import at slot 1: %s", result_name(r));

  size_t n = chunkSize / sizeof(uint32_t);
  uint32_t* out = malloc(chunkSize);
  uint32_t* in = malloc(chunkSize);
  if (!out || !in) return 1;
  fill(out, n, 0x12345678u);
  memset(in, 0, chunkSize);
  cco_cu_result cr = cu->memcpyHtoD((cco_cu_deviceptr)(uintptr_t)slot0, out, chunkSize);
  cco_cu_result cr2 = cu->memcpyDtoH(in, (cco_cu_deviceptr)(uintptr_t)slot1, chunkSize);
  step(cr == CCO_CU_SUCCESS && cr2 == CCO_CU_SUCCESS && memcmp(in, out, chunkSize) == 0,
       "write via slot 0 (cuMemcpyHtoD), read the same bytes via slot 1 (cuMemcpyDtoH) [%u %u]",
       cr, cr2);

  /* copy_to_device into slot 1, visible through slot 0 */
  fill(out, n, 0xabcdef01u);
  r = ops->copy_to_device(p, slot1 + 4096, out, 1 * MiB);
  memset(in, 0, 1 * MiB);
  cr = cu->memcpyDtoH(in, (cco_cu_deviceptr)(uintptr_t)(slot0 + 4096), 1 * MiB);
  step(r == ccoSuccess && cr == CCO_CU_SUCCESS && memcmp(in, out, 1 * MiB) == 0,
       "copy_to_device via slot 1, read back via slot 0: %s", result_name(r));

  /* descriptors */
  void* desc = NULL;
  r = ops->desc_alloc(p, 4096, &desc);
  ccoResult_t r2 = r == ccoSuccess ? ops->copy_to_device(p, desc, out, 4096) : r;
  memset(in, 0, 4096);
  cr = desc ? cu->memcpyDtoH(in, (cco_cu_deviceptr)(uintptr_t)desc, 4096) : 1;
  step(r == ccoSuccess && r2 == ccoSuccess && cr == CCO_CU_SUCCESS && memcmp(in, out, 4096) == 0,
       "desc_alloc + copy_to_device: %s / %s", result_name(r), result_name(r2));
  r = ops->desc_free(p, desc);
  step(r == ccoSuccess, "desc_free: %s", result_name(r));

  /* ops from another thread */
  thread_arg ta = {.p = p};
  pthread_t t;
  if (pthread_create(&t, NULL, other_thread, &ta) == 0) {
    pthread_join(t, NULL);
    step(ta.allocRes == ccoSuccess && ta.copyRes == ccoSuccess && ta.freeRes == ccoSuccess,
         "ops from a thread without a context: %s %s %s", result_name(ta.allocRes),
         result_name(ta.copyRes), result_name(ta.freeRes));
    step(ta.ctxRestored, "that thread is left without a current context");
  }

  /* teardown of the two mappings */
  /* the chunk seen by another process */
  if (child > 0) {
    fill(out, n, PEER_SEED);
    cr = cu->memcpyHtoD((cco_cu_deviceptr)(uintptr_t)slot0, out, chunkSize);
    if (cr == CCO_CU_SUCCESS) cr = cu->streamSynchronize(NULL); /* the DMA has landed */
    int pfd = -1;
    r = ops->chunk_export(p, &chunk, &pfd);
    bool sent = cr == CCO_CU_SUCCESS && r == ccoSuccess && send_fd(sv[0], pfd, chunkSize) == 0;
    if (pfd >= 0) close(pfd); /* the child holds its own copy of the fd now */
    unsigned char prc = 255;
    bool got = sent && read(sv[0], &prc, 1) == 1;
    int status = 0;
    waitpid(child, &status, 0);
    child = -1;
    step(got && prc == 0, "another process imports the chunk and reads what was written (child "
         "result %d)", got ? prc : -1);
  }

  r = ops->unmap(p, slot1, chunkSize);
  r2 = ops->unmap(p, slot0, chunkSize);
  step(r == ccoSuccess && r2 == ccoSuccess, "unmap both slots: %s / %s", result_name(r),
       result_name(r2));
  r = ops->chunk_release(p, &peer);
  r2 = ops->chunk_release(p, &chunk);
  step(r == ccoSuccess && r2 == ccoSuccess && chunk.handle == 0,
       "chunk_release import and original: %s / %s", result_name(r), result_name(r2));
  r = ops->chunk_release(p, &chunk);
  step(r == ccoSuccess, "releasing a released chunk is harmless: %s", result_name(r));
  r = ops->unreserve(p, base, 2 * slot);
  step(r == ccoSuccess, "unreserve: %s", result_name(r));

  /* ---- chunk_from_pointer */
  ext_alloc e;
  bool made = ext_create(cu, p->identity.device, 4 * gran, CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &e);
  step(made, "external cuMemCreate(POSIX fd) allocation of %zu bytes mapped at 0x%llx", 4 * gran,
       (unsigned long long)e.va);
  if (made) {
    void* ext = (void*)(uintptr_t)e.va;
    cco_chunk ec = {0, -1, 0};
    r = ops->chunk_from_pointer(p, ext, e.size, &ec);
    step(r == ccoSuccess && ec.handle != 0 && ec.size == e.size && ec.fd == -1,
         "chunk_from_pointer on the whole allocation: %s", result_name(r));
    if (r == ccoSuccess) {
      int efd = -1;
      r = ops->chunk_export(p, &ec, &efd);
      step(r == ccoSuccess && efd >= 0, "export of the external chunk: %s", result_name(r));
      if (efd >= 0) close(efd);
      r = ops->chunk_release(p, &ec);
      step(r == ccoSuccess, "release of the external chunk (drops the retain): %s", result_name(r));
      /* The allocation must still be usable by its owner. The read back also
       * waits for the write: from pageable memory cuMemcpyHtoD may return
       * before its DMA lands, and cuMemUnmap (ext_destroy) does not wait for
       * it, so an unmap right after faults the GPU (Xid 31) and poisons the
       * context. */
      memset(in, 0, 4096);
      cr = cu->memcpyHtoD(e.va, out, 4096);
      cco_cu_result crb = cr ? cr : cu->memcpyDtoH(in, e.va, 4096);
      step(cr == CCO_CU_SUCCESS && crb == CCO_CU_SUCCESS && memcmp(in, out, 4096) == 0,
           "external allocation still mapped and usable after release [%u %u]", cr, crb);
    }
    r = ops->chunk_from_pointer(p, ext, e.size + gran, &ec);
    step(r == ccoInvalidArgument, "size larger than the allocation refused: %s", result_name(r));
    r = ops->chunk_from_pointer(p, ext, e.size - gran, &ec);
    step(r == ccoSuccess && ec.size == e.size,
         "smaller size accepted, the chunk covers the whole allocation: %s", result_name(r));
    if (r == ccoSuccess) ops->chunk_release(p, &ec);
    r = ops->chunk_from_pointer(p, (char*)ext + gran, e.size - gran, &ec);
    step(r == ccoInvalidArgument, "pointer inside the allocation refused: %s", result_name(r));
    ext_destroy(cu, &e);
  }

  made = ext_create(cu, p->identity.device, 2 * gran, 0 /* no export handle type */, &e);
  step(made, "external cuMemCreate(no handle type) allocation");
  if (made) {
    cco_chunk ec = {0, -1, 0};
    r = ops->chunk_from_pointer(p, (void*)(uintptr_t)e.va, e.size, &ec);
    step(r == ccoUnsupported, "non-exportable VMM allocation refused: %s", result_name(r));
    ext_destroy(cu, &e);
  }

  cco_cu_deviceptr legacy = 0;
  cr = cu->memAlloc(&legacy, 2 * MiB);
  step(cr == CCO_CU_SUCCESS, "cuMemAlloc 2 MiB [%u]", cr);
  if (cr == CCO_CU_SUCCESS) {
    cco_cu_deviceptr lb = 0;
    size_t ls = 0;
    cu->memGetAddressRange(&lb, &ls, legacy);
    cco_chunk ec = {0, -1, 0};
    r = ops->chunk_from_pointer(p, (void*)(uintptr_t)legacy, ls, &ec);
    step(r == ccoInvalidArgument || r == ccoUnsupported,
         "cuMemAlloc'd pointer refused (range %zu bytes): %s", ls, result_name(r));
    if (r == ccoSuccess) ops->chunk_release(p, &ec);
    cu->memFree(legacy);
  }

  /* ---- kernels of libcco's own: the collectives' fatbin, loaded once per
   * context and shared, its kernels found, sized and launched */
  if (cco_coll_fatbin_size == 0) {
    step(true, "this build has no collectives' fatbin: kernel ops not checked");
  } else {
    void* mod = NULL;
    void* mod2 = NULL;
    void* add = NULL;
    void* block = NULL;
    void* none = NULL;
    r = ops->module_get(p, cco_coll_fatbin, &mod);
    step(r == ccoSuccess, "module_get of the collectives' fatbin (%zu bytes): %s", cco_coll_fatbin_size,
         result_name(r));
    if (r == ccoSuccess) {
      r = ops->module_get(p, cco_coll_fatbin, &mod2);
      step(r == ccoSuccess && mod2 == mod, "a second module_get in the same context shares the module");
      ccoResult_t ra = ops->kernel_get(p, mod, CCO_COLL_STREAM_GDA_KERNEL, &add);
      ccoResult_t rb = ops->kernel_get(p, mod, "ccoCollAllReduceOneShot", &block);
      step(ra == ccoSuccess && rb == ccoSuccess, "kernel_get of two kernels: %s / %s", result_name(ra), result_name(rb));
      r = ops->kernel_get(p, mod, "ccoNoSuchKernel", &none);
      step(r != ccoSuccess, "kernel_get of a name the module lacks fails: %s", result_name(r));
      int fit = 0;
      r = rb == ccoSuccess ? ops->kernel_coresident(p, block, CCO_COLL_THREADS, &fit) : rb;
      step(r == ccoSuccess && fit > 0, "blocks of %d threads resident at once: %d (%s)", CCO_COLL_THREADS, fit,
           result_name(r));
      void* host = NULL;
      void* stream = NULL;
      uint64_t dev = 0;
      bool capturing = true;
      ccoResult_t rh = ops->hostmap_alloc(p, 64, &host, &dev);
      ccoResult_t rs = ops->stream_create(p, &stream);
      r = rs == ccoSuccess ? ops->stream_capturing(p, stream, &capturing) : rs;
      step(rh == ccoSuccess && r == ccoSuccess && !capturing, "a fresh stream is not capturing: %s", result_name(r));
      if (rh == ccoSuccess && rs == ccoSuccess) {
        /* add_value_async: its own PTX kernel, compiled by the driver on
         * first use, launched three times on a stream. */
        ccoResult_t rl = ccoSuccess;
        for (int k = 0; k < 3 && rl == ccoSuccess; k++) rl = ops->add_value_async(p, stream, dev, 5);
        volatile uint64_t* word = (volatile uint64_t*)host;
        for (int ms = 0; ms < 5000 && *word != 15; ms++) usleep(1000);
        step(rl == ccoSuccess && *word == 15, "three add_value_async of 5 on a stream: %llu (want 15), %s",
             (unsigned long long)*word, result_name(rl));
      }
      if (rs == ccoSuccess) ops->stream_destroy(p, stream);
      if (rh == ccoSuccess) ops->hostmap_free(p, host);
      ops->module_put(p, mod2);
      ops->module_put(p, mod);
    }
  }

  free(out);
  free(in);
  cco_platform_cuda_close(p);
  cur = (cco_cu_context)1;
  step(cu->ctxGetCurrent(&cur) == CCO_CU_SUCCESS && cur == NULL,
       "close unbound the primary context open made current");
  step(p->impl == NULL && p->ops == NULL, "close cleared the platform");

  /* ---- open with a context already current: bound to it, not retained,
   * and left current by close */
  cco_cu_device dev0 = 0;
  cco_cu_context mine = NULL;
  cco_cu_result e1 = cu->deviceGet(&dev0, 0);
  cco_cu_result e2 = e1 ? e1 : cu->devicePrimaryCtxRetain(&mine, dev0);
  cco_cu_result e3 = e2 ? e2 : cu->ctxSetCurrent(mine);
  bool haveCtx = e3 == CCO_CU_SUCCESS;
  step(haveCtx, "the application makes its own context current [%u %u %u]", e1, e2, e3);
  if (haveCtx) {
    r = cco_platform_cuda_open(p);
    step(r == ccoSuccess, "open with a current context: %s", result_name(r));
    if (r == ccoSuccess) {
      cco_chunk c2 = {0, -1, 0};
      r = p->ops->chunk_create(p, p->ops->granularity(p), &c2);
      ccoResult_t r3 = r == ccoSuccess ? p->ops->chunk_release(p, &c2) : r;
      step(r == ccoSuccess && r3 == ccoSuccess, "chunk create/release in that context: %s / %s",
           result_name(r), result_name(r3));
      cco_platform_cuda_close(p);
    }
    cur = NULL;
    step(cu->ctxGetCurrent(&cur) == CCO_CU_SUCCESS && cur == mine,
         "close left the application's context current");
    cu->ctxSetCurrent(NULL);
    cu->devicePrimaryCtxRelease(dev0);
  }

  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
