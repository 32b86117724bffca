/*
 * Kernel bodies of the LSA examples, written only against cco_device.h so
 * that one copy serves every way the device API compiles:
 *
 * - CUDA kernels (examples/02_lsa_put.cu, 03_lsa_allreduce.cu, the GPU tests
 *   and benchmarks) call them from __global__ functions;
 * - their host twins (02_lsa_put_host.c, 03_lsa_allreduce_host.c) call them
 *   from CPU threads on the host platform, where a thread is a block of one;
 * - clang can compile them to NVPTX bitcode (tests/scripts/test_device_api.sh).
 *
 * C11, and valid CUDA C++: explicit casts from void*, no designated
 * initializers, no VLAs.
 */
#ifndef CCO_EXAMPLES_LSA_EXAMPLES_H_
#define CCO_EXAMPLES_LSA_EXAMPLES_H_

#include "cco/cco_device.h"

/* ------------------------------------------------------------ 02: LSA put */

/* The blog's lsa_put_kernel (docs/design.md): the calling threads (thread
 * `tid` of `nthreads`) copy `bytes` (a multiple of 8) from this rank's window at
 * srcOff to every LSA peer's window at dstOff + lsaRank * bytes, the peer's
 * own copy included. No fence: callers order it with an LSA barrier, whose
 * arrival publishes these stores. */
CCO_DEVICE_INLINE void ccoExampleLsaPut(ccoWindow_t win, uint64_t srcOff, uint64_t dstOff, size_t bytes,
                                        uint32_t tid, uint32_t nthreads) {
  /* A private copy of the descriptor: the compiler may then keep the
   * peer-pointer arithmetic in registers instead of reloading the
   * descriptor after every store, which might alias it. */
  ccoWindowDevice w = *win;
  const uint64_t* src = (const uint64_t*)ccoGetLocalPtr(&w, srcOff);
  size_t words = bytes / 8;
  for (int32_t k = 0; k < w.lsaSize; k++) {
    /* Start with the next peer, so the ranks do not all store into peer 0
     * at the same time. */
    int32_t peer = (w.lsaRank + 1 + k) % w.lsaSize;
    uint64_t* dst = (uint64_t*)ccoGetLsaPeerPtr(&w, peer, dstOff + (uint64_t)w.lsaRank * bytes);
    for (size_t i = tid; i < words; i += nthreads) dst[i] = src[i];
  }
}

/* ------------------------------------------------------------------ bf16 */

typedef enum { ccoExampleF32 = 0, ccoExampleBf16 = 1 } ccoExampleDtype;

/* The bf16 helpers also run on the host under nvcc, so a .cu file's host
 * code can build inputs and references with the kernel's own rounding. */
#if defined(__CUDACC__)
#define CCO_EXAMPLE_HOST_DEVICE_INLINE static __host__ __device__ __forceinline__
#else
#define CCO_EXAMPLE_HOST_DEVICE_INLINE CCO_DEVICE_INLINE
#endif

/* A union moves the bits between float and uint32_t: no memcpy, which
 * freestanding NVPTX C lacks, and all three compilers accept it. */
typedef union {
  float f;
  uint32_t u;
} ccoExampleF32Bits;

/* bf16 is the top half of an IEEE float: widening is exact. */
CCO_EXAMPLE_HOST_DEVICE_INLINE float ccoExampleBf16ToF32(uint16_t h) {
  ccoExampleF32Bits b;
  b.u = (uint32_t)h << 16;
  return b.f;
}

/* Rounds to nearest, ties to even. NaN stays a (quiet) NaN instead of
 * rounding up into infinity. */
CCO_EXAMPLE_HOST_DEVICE_INLINE uint16_t ccoExampleF32ToBf16(float f) {
  ccoExampleF32Bits b;
  b.f = f;
  if ((b.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b.u >> 16) | 0x0040u);
  uint32_t lsb = (b.u >> 16) & 1u;
  return (uint16_t)((b.u + 0x7fffu + lsb) >> 16);
}

/* ------------------------------------------------- 03: one-shot all-reduce */

/* Sums elements [first, last) of every LSA peer's input into this rank's
 * output, thread `tid` of `nthreads` taking every nthreads-th element. Peers
 * are added in LSA rank order, so every rank (and a host reference) gets the
 * same bits. `w` is not const only because ccoGetLsaPeerPtr takes a
 * ccoWindow_t. */
CCO_DEVICE_INLINE void ccoExampleSumRange(ccoWindowDevice* w, uint64_t inOff, uint64_t outOff,
                                          size_t first, size_t last, ccoExampleDtype dtype,
                                          uint32_t tid, uint32_t nthreads) {
  if (dtype == ccoExampleF32) {
    float* out = (float*)ccoGetLocalPtr(w, outOff);
    for (size_t i = first + tid; i < last; i += nthreads) {
      float acc = 0.0f;
      for (int32_t p = 0; p < w->lsaSize; p++) acc += ((const float*)ccoGetLsaPeerPtr(w, p, inOff))[i];
      out[i] = acc;
    }
  } else {
    uint16_t* out = (uint16_t*)ccoGetLocalPtr(w, outOff);
    for (size_t i = first + tid; i < last; i += nthreads) {
      float acc = 0.0f;
      for (int32_t p = 0; p < w->lsaSize; p++)
        acc += ccoExampleBf16ToF32(((const uint16_t*)ccoGetLsaPeerPtr(w, p, inOff))[i]);
      out[i] = ccoExampleF32ToBf16(acc);
    }
  }
}

/* One block's share of a one-shot all-reduce (block scope; a host thread is
 * a block of one). Share `part` of `nParts` is elements
 * [part*count/nParts, (part+1)*count/nParts). LSA barrier `part`, so every
 * peer's input is written -> sum that share of every peer's input (window
 * offset inOff, `count` elements of dtype; bf16 summed in fp32) into this
 * rank's output (window offset outOff) -> barrier `part` again, so no peer
 * rewrites its input while this rank still reads it. Needs
 * lsaBarrierCount >= nParts. Returns the first non-success barrier status;
 * after one the output is not written. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoExampleAllReduceBlock(const ccoDevComm* dc, ccoWindow_t win, uint64_t inOff,
                                                          uint64_t outOff, size_t count, ccoExampleDtype dtype,
                                                          uint32_t part, uint32_t nParts) {
  ccoWindowDevice w = *win; /* registers, as in ccoExampleLsaPut */
  size_t first = (size_t)part * count / nParts;
  size_t last = ((size_t)part + 1) * count / nParts;
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(dc, part, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&bar);
  if (st == ccoDevSuccess) {
    ccoExampleSumRange(&w, inOff, outOff, first, last, dtype, ccoCoopRank(ccoCoopBlock),
                       ccoCoopSize(ccoCoopBlock));
    st = ccoLsaBarrierSync(&bar);
  }
  ccoLsaBarrierSessionEnd(&bar);
  return st;
}

#endif /* CCO_EXAMPLES_LSA_EXAMPLES_H_ */
