/*
 * Private: the arch layer of the device API, the few primitives everything
 * else is written in, for three compilers. Kernels call the public API
 * (ccoSignalLoad / ccoSignalStore / ccoSignalAdd, ccoCoop*) instead; the
 * cco_impl_* names may change in any release.
 *
 * - nvcc / clang-cuda (CUDA C/C++ kernels): __device__ functions, PTX asm.
 * - clang --target=nvptx64-nvidia-cuda -std=c11 (bitcode for Triton): plain
 *   C11 with the same PTX asm; no CUDA headers.
 * - gcc/clang on the host (the host platform, where "kernels" are CPU
 *   threads): GCC __atomic builtins; a CPU thread is a warp and a block of
 *   one thread.
 *
 * The portability macros (CCO_ARCH_GPU, CCO_DEVICE_INLINE,
 * CCO_HOST_DEVICE_INLINE) are public: code that wants its own helpers to
 * compile like the device API's may use them.
 *
 * Memory-model choice: signalling goes through the flat VA, possibly to
 * other processes and GPUs, so every ordering primitive is system scope
 * (.sys), as NVSHMEM and NCCL use for peer flags.
 */
#ifndef CCO_DEVICE_IMPL_ARCH_IMPL_H_
#define CCO_DEVICE_IMPL_ARCH_IMPL_H_

#include <stdint.h>

#if defined(__CUDA_ARCH__) || defined(__NVPTX__)
#define CCO_ARCH_GPU 1
#else
#define CCO_ARCH_GPU 0
#endif

#if defined(__CUDACC__)
#define CCO_DEVICE_INLINE static __device__ __forceinline__
#define CCO_HOST_DEVICE_INLINE static __host__ __device__ __forceinline__
#elif defined(__NVPTX__)
#define CCO_DEVICE_INLINE static inline __attribute__((always_inline))
#define CCO_HOST_DEVICE_INLINE static inline __attribute__((always_inline))
#else
#define CCO_DEVICE_INLINE static inline
#define CCO_HOST_DEVICE_INLINE static inline
#endif

#if !CCO_ARCH_GPU
#include <sched.h>
#include <time.h>
#endif

/* Host tests that replay GPU kernels need warps and blocks of several CPU
 * threads, as a GPU runs them (every thread of a block enters a block-scope
 * call): a test that defines CCO_HOST_COOP provides these functions, and the
 * scope primitives below call them (tests/mp/triton/coop.c). Without it a
 * CPU thread is a warp and a block of one. coop: 1 warp, 2 block. */
#if !CCO_ARCH_GPU && defined(CCO_HOST_COOP)
uint32_t cco_host_coop_rank(int coop);
uint32_t cco_host_coop_size(int coop);
void cco_host_coop_sync(int coop);
/* Every thread of the scope passes v and gets, for op 0, the value of the
 * scope's rank 0; op 1, the largest; op 2, whether any is nonzero. Also a
 * sync of the scope. */
uint32_t cco_host_coop_reduce(int coop, uint32_t v, int op);
#define CCO_HOST_COOP_ 1
#else
#define CCO_HOST_COOP_ 0
#endif

/* ------------------------------------------------------------ ordering */

CCO_DEVICE_INLINE uint32_t cco_impl_ld_acquire_u32(const uint32_t* p) {
#if CCO_ARCH_GPU
  uint32_t v;
  __asm__ volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

CCO_DEVICE_INLINE uint64_t cco_impl_ld_acquire_u64(const uint64_t* p) {
#if CCO_ARCH_GPU
  uint64_t v;
  __asm__ volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

CCO_DEVICE_INLINE uint32_t cco_impl_ld_relaxed_u32(const uint32_t* p) {
#if CCO_ARCH_GPU
  uint32_t v;
  __asm__ volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

CCO_DEVICE_INLINE void cco_impl_st_release_u32(uint32_t* p, uint32_t v) {
#if CCO_ARCH_GPU
  __asm__ volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

CCO_DEVICE_INLINE void cco_impl_st_release_u64(uint64_t* p, uint64_t v) {
#if CCO_ARCH_GPU
  __asm__ volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

CCO_DEVICE_INLINE void cco_impl_st_relaxed_u32(uint32_t* p, uint32_t v) {
#if CCO_ARCH_GPU
  __asm__ volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/* Scoped variants. When every LSA peer runs on this very GPU (ranks under
 * MPS), GPU scope orders enough and a round trip costs 0.6 us instead of
 * 0.9 us (H200); peers on other GPUs need system scope. */
#if CCO_ARCH_GPU
#define CCO_IMPL_SCOPED_LD_(name, type, cons, width, sem, hostOrder)                             \
  CCO_DEVICE_INLINE type name(const type* p, int gpuScope) {                                     \
    type v;                                                                                      \
    if (gpuScope) __asm__ volatile("ld." sem ".gpu." width " %0, [%1];" : "=" cons(v) : "l"(p) : "memory"); \
    else __asm__ volatile("ld." sem ".sys." width " %0, [%1];" : "=" cons(v) : "l"(p) : "memory");          \
    return v;                                                                                    \
  }
/* A store with PTX semantic `sem` on the GPU and memory order `hostOrder`
 * on the host platform (the two differ where a fence the host cannot model
 * stands before a relaxed store). */
#define CCO_IMPL_SCOPED_ST_(name, type, cons, width, sem, hostOrder)                             \
  CCO_DEVICE_INLINE void name(type* p, type v, int gpuScope) {                                   \
    if (gpuScope) __asm__ volatile("st." sem ".gpu." width " [%0], %1;" ::"l"(p), cons(v) : "memory"); \
    else __asm__ volatile("st." sem ".sys." width " [%0], %1;" ::"l"(p), cons(v) : "memory");          \
  }
#else
#define CCO_IMPL_SCOPED_LD_(name, type, cons, width, sem, hostOrder) \
  CCO_DEVICE_INLINE type name(const type* p, int gpuScope) { (void)gpuScope; return __atomic_load_n(p, hostOrder); }
#define CCO_IMPL_SCOPED_ST_(name, type, cons, width, sem, hostOrder) \
  CCO_DEVICE_INLINE void name(type* p, type v, int gpuScope) { (void)gpuScope; __atomic_store_n(p, v, hostOrder); }
#endif
/* The waits poll with these acquire loads. A relaxed poll and one
 * fence.acq_rel when the value is there orders as much, but on Hopper a
 * fence is a MEMBAR that costs a third of a microsecond (H100, 2026-12-06:
 * the relaxed ping-pong took 0.64 us against NVSHMEM's 0.33, the release
 * one 1.05), while an acquire load adds no fence to the poll. */
CCO_IMPL_SCOPED_LD_(cco_impl_ld_acquire_scoped_u32, uint32_t, "r", "u32", "acquire", __ATOMIC_ACQUIRE)
CCO_IMPL_SCOPED_LD_(cco_impl_ld_acquire_scoped_u64, uint64_t, "l", "u64", "acquire", __ATOMIC_ACQUIRE)
/* A load that a fence after it orders before the stores that follow (a
 * cached credit count before the slot's words): relaxed on the GPU, an
 * acquire on the host platform, where that fence is nothing (as for the
 * stores after a fence below). */
CCO_IMPL_SCOPED_LD_(cco_impl_ld_before_fence_scoped_u64, uint64_t, "l", "u64", "relaxed", __ATOMIC_ACQUIRE)
CCO_IMPL_SCOPED_ST_(cco_impl_st_release_scoped_u32, uint32_t, "r", "u32", "release", __ATOMIC_RELEASE)
CCO_IMPL_SCOPED_ST_(cco_impl_st_release_scoped_u64, uint64_t, "l", "u64", "release", __ATOMIC_RELEASE)
/* Relaxed, at the LSA scope: signals that order nothing before them. */
CCO_IMPL_SCOPED_ST_(cco_impl_st_relaxed_scoped_u64, uint64_t, "l", "u64", "relaxed", __ATOMIC_RELAXED)
/* One release for several stores: cco_impl_release_fence_scoped, then these
 * strong stores. On Hopper each st.release compiles to MEMBAR + ST, so a
 * thread that releases n stores with st.release pays n MEMBARs (about
 * 0.3 us each); fence.acq_rel is one MEMBAR for all of them (sm_90 SASS).
 * On the host platform the fence is nothing and each store a release: the
 * sanitizer models no fences. */
CCO_IMPL_SCOPED_ST_(cco_impl_st_after_fence_scoped_u32, uint32_t, "r", "u32", "relaxed", __ATOMIC_RELEASE)
CCO_IMPL_SCOPED_ST_(cco_impl_st_after_fence_scoped_u64, uint64_t, "l", "u64", "relaxed", __ATOMIC_RELEASE)
#undef CCO_IMPL_SCOPED_LD_
#undef CCO_IMPL_SCOPED_ST_

CCO_DEVICE_INLINE uint64_t cco_impl_atomic_add_release_scoped_u64(uint64_t* p, uint64_t v, int gpuScope) {
#if CCO_ARCH_GPU
  uint64_t old;
  if (gpuScope) __asm__ volatile("atom.release.gpu.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else __asm__ volatile("atom.release.sys.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  (void)gpuScope;
  return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

/* The fence of cco_impl_st_after_fence_scoped_u32's release. */
CCO_DEVICE_INLINE void cco_impl_release_fence_scoped(int gpuScope) {
#if CCO_ARCH_GPU
  if (gpuScope) __asm__ volatile("fence.acq_rel.gpu;" ::: "memory");
  else __asm__ volatile("fence.acq_rel.sys;" ::: "memory");
#else
  (void)gpuScope;
#endif
}
CCO_DEVICE_INLINE uint64_t cco_impl_atomic_add_relaxed_scoped_u64(uint64_t* p, uint64_t v, int gpuScope) {
#if CCO_ARCH_GPU
  uint64_t old;
  if (gpuScope) __asm__ volatile("atom.relaxed.gpu.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else __asm__ volatile("atom.relaxed.sys.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  (void)gpuScope;
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

/* Returns the old value. */
CCO_DEVICE_INLINE uint64_t cco_impl_atomic_add_release_u64(uint64_t* p, uint64_t v) {
#if CCO_ARCH_GPU
  uint64_t old;
  __asm__ volatile("atom.release.sys.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

CCO_DEVICE_INLINE uint32_t cco_impl_atomic_add_release_u32(uint32_t* p, uint32_t v) {
#if CCO_ARCH_GPU
  uint32_t old;
  __asm__ volatile("atom.release.sys.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

/* Relaxed, block scope: a counter only the threads of one block touch
 * before a block sync publishes it (no fence per add). */
CCO_DEVICE_INLINE uint32_t cco_impl_atomic_add_block_u32(uint32_t* p, uint32_t v) {
#if CCO_ARCH_GPU
  uint32_t old;
  __asm__ volatile("atom.relaxed.cta.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

CCO_DEVICE_INLINE void cco_impl_fence_acq_rel_sys(void) {
#if CCO_ARCH_GPU
  __asm__ volatile("fence.acq_rel.sys;" ::: "memory");
#elif defined(__SANITIZE_THREAD__)
  /* ThreadSanitizer models no fences (gcc refuses them under it): a
   * sequentially consistent RMW on one word stands in. It orders at least
   * as much as the fence (every such call synchronizes with the last), so
   * the sanitizer sees no race the fence prevents. */
  static unsigned cco_impl_fence_word_;
  __atomic_fetch_add(&cco_impl_fence_word_, 0u, __ATOMIC_SEQ_CST);
#else
  __atomic_thread_fence(__ATOMIC_ACQ_REL);
#endif
}

/* ------------------------------------------------------- threads, syncs */

CCO_DEVICE_INLINE uint32_t cco_impl_thread_in_block(void) {
#if CCO_ARCH_GPU
  uint32_t x, y, z, nx, ny;
  __asm__("mov.u32 %0, %%tid.x;" : "=r"(x));
  __asm__("mov.u32 %0, %%tid.y;" : "=r"(y));
  __asm__("mov.u32 %0, %%tid.z;" : "=r"(z));
  __asm__("mov.u32 %0, %%ntid.x;" : "=r"(nx));
  __asm__("mov.u32 %0, %%ntid.y;" : "=r"(ny));
  return x + nx * (y + ny * z);
#elif CCO_HOST_COOP_
  return cco_host_coop_rank(2);
#else
  return 0;
#endif
}

CCO_DEVICE_INLINE uint32_t cco_impl_block_size(void) {
#if CCO_ARCH_GPU
  uint32_t nx, ny, nz;
  __asm__("mov.u32 %0, %%ntid.x;" : "=r"(nx));
  __asm__("mov.u32 %0, %%ntid.y;" : "=r"(ny));
  __asm__("mov.u32 %0, %%ntid.z;" : "=r"(nz));
  return nx * ny * nz;
#elif CCO_HOST_COOP_
  return cco_host_coop_size(2);
#else
  return 1;
#endif
}

CCO_DEVICE_INLINE uint32_t cco_impl_lane(void) {
#if CCO_ARCH_GPU
  uint32_t l;
  __asm__("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
#elif CCO_HOST_COOP_
  return cco_host_coop_rank(1);
#else
  return 0;
#endif
}

CCO_DEVICE_INLINE uint32_t cco_impl_warp_size(void) {
#if CCO_ARCH_GPU
  return 32;
#elif CCO_HOST_COOP_
  return cco_host_coop_size(1);
#else
  return 1;
#endif
}

CCO_DEVICE_INLINE void cco_impl_sync_warp(void) {
#if CCO_ARCH_GPU
  __asm__ volatile("bar.warp.sync -1;" ::: "memory");
#elif CCO_HOST_COOP_
  cco_host_coop_sync(1);
#endif
}

CCO_DEVICE_INLINE void cco_impl_sync_block(void) {
#if CCO_ARCH_GPU
  __asm__ volatile("bar.sync 0;" ::: "memory");
#elif CCO_HOST_COOP_
  cco_host_coop_sync(2);
#endif
}

/* Value 0..7 of the scope's rank 0, handed to every thread of the scope
 * (which must all call). Also a sync of the scope. */
CCO_DEVICE_INLINE uint32_t cco_impl_coop_broadcast3(int coop, uint32_t rank, uint32_t value) {
#if CCO_ARCH_GPU
  if (coop == 1) { /* warp */
    uint32_t v;
    __asm__ volatile("shfl.sync.idx.b32 %0, %1, 0, 0x1f, -1;" : "=r"(v) : "r"(value) : "memory");
    return v;
  }
  if (coop == 2) { /* block: three barrier reductions, one per bit */
    uint32_t out = 0;
    for (int bit = 0; bit < 3; bit++) {
      uint32_t mine = rank == 0 ? (value >> bit) & 1u : 0u, any;
      __asm__ volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; bar.red.or.pred p, 0, p; selp.u32 %0, 1, 0, p; }"
                       : "=r"(any)
                       : "r"(mine)
                       : "memory");
      out |= any << bit;
    }
    return out;
  }
#elif CCO_HOST_COOP_
  if (coop == 1 || coop == 2) return cco_host_coop_reduce(coop, value, 0);
#endif
  (void)coop, (void)rank;
  return value;
}

/* The largest v over the warp (which must all call); v itself on the host. */
CCO_DEVICE_INLINE uint32_t cco_impl_warp_max_u32(uint32_t v) {
#if CCO_ARCH_GPU
  uint32_t m;
  __asm__ volatile("redux.sync.max.u32 %0, %1, -1;" : "=r"(m) : "r"(v));
  return m;
#elif CCO_HOST_COOP_
  return cco_host_coop_reduce(1, v, 1);
#else
  return v;
#endif
}

/* Whether any thread of the block (which must all call) passed a nonzero
 * value; also a sync of the block. v != 0 on the host. */
CCO_DEVICE_INLINE int cco_impl_block_any(uint32_t v) {
#if CCO_ARCH_GPU
  int32_t any;
  __asm__ volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; bar.red.or.pred p, 0, p; selp.s32 %0, 1, 0, p; }"
                   : "=r"(any)
                   : "r"(v)
                   : "memory");
  return any;
#elif CCO_HOST_COOP_
  return (int)cco_host_coop_reduce(2, v, 2);
#else
  return v != 0;
#endif
}

/* ------------------------------------------------------------- time */

/* Nanoseconds from a clock that only moves forward. */
CCO_DEVICE_INLINE uint64_t cco_impl_clock_ns(void) {
#if CCO_ARCH_GPU
  uint64_t t;
  __asm__ volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  /* C11's clock, so strict -std=c11 host code compiles without POSIX
   * feature macros; timeouts tolerate its rare steps. */
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* One step of a wait loop. On a GPU a tight spin is the fastest; on the
 * host the peer may need this very core, so yield now and then. */
CCO_DEVICE_INLINE void cco_impl_spin_pause(uint32_t spins) {
#if CCO_ARCH_GPU
  (void)spins;
#else
  if ((spins & 63) == 63) sched_yield();
#endif
}

/* One step of a wait that polls memory across the bus (host memory from a
 * GPU): many threads polling back to back flood the bus with reads and slow
 * down the very transfers they wait for, so on a GPU the thread sleeps a
 * little longer each time, up to about a microsecond. */
CCO_DEVICE_INLINE void cco_impl_spin_backoff(uint32_t spins) {
#if CCO_ARCH_GPU
  uint32_t ns = spins < 5 ? 32u << spins : 1024u;
  __asm__ volatile("nanosleep.u32 %0;" ::"r"(ns));
#else
  cco_impl_spin_pause(spins);
#endif
}

/* A producer whose ring is full (an SDMA ring, a GDA context) waits for its
 * ticket's slot: every step it reads the producers' shared copy of the
 * consumer's head (device memory), every fourth the head itself (host
 * memory, a bus round trip), which it then copies for the others, backing
 * off in between. Producers reading host memory back to back keep the bus
 * busy while the very transfers that free their slots cross it. Returns
 * nonzero once *abortFlag (may be NULL) is set: the slot never frees then. */
CCO_DEVICE_INLINE int cco_impl_wait_for_credit(uint64_t* cached, const uint64_t* head, uint64_t ticket,
                                               uint64_t depth, const uint32_t* abortFlag) {
  for (uint32_t spins = 0;; spins++) {
    if (ticket - cco_impl_ld_acquire_u64(cached) < depth) return 0;
    if ((spins & 3) == 0) {
      uint64_t h = cco_impl_ld_acquire_u64(head);
      if (ticket - h < depth) {
        cco_impl_st_release_u64(cached, h);
        return 0;
      }
    }
    if ((spins & 63) == 63 && abortFlag && cco_impl_ld_relaxed_u32(abortFlag)) return 1;
    cco_impl_spin_backoff(spins);
  }
}

#endif /* CCO_DEVICE_IMPL_ARCH_IMPL_H_ */
