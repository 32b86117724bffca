// LSA device API tests, one rank of a job started by ccorun (several ranks
// on one GPU need MPS; see run_gpu_tests.sh):
//
//   ccorun -n 4 gpu_lsa
//
// (a) LSA barriers at thread, warp and block scope, many sessions at once
//     (every block, or every warp, its own barrier index): each iteration
//     every session stores the iteration into its slot of every peer's
//     window, syncs, and checks every peer's slot in its own window.
// (b) ccoExampleLsaPut, 8 B .. 64 MiB: checked after the kernel (with a
//     guard past the end), and inside one kernel behind an LSA barrier.
// (c) ccoExampleAllReduceBlock, fp32 and bf16, several counts (some not
//     divisible by the number of parts): against a host reference, then
//     hundreds of back-to-back runs with fresh inputs checked on the device.
// (d) Timeouts: with one rank absent, the timeout variants return
//     ccoDevTimeout at every scope (and ccoSignalWaitUntil too). Abort: a
//     kernel waiting in ccoLsaBarrierWait on a non-blocking stream returns
//     ccoDevAborted promptly after ccoCommAbort on the host. Runs last: the
//     communicator is dead afterwards.
//
// Every check prints one line; the last line is
// "gpu_lsa rank R: N passed, N failed", and the exit status is non-zero on
// failure. A kernel that does not finish within its limit is reported, the
// communicator is aborted (which releases device waits), and the rank exits.
// GPU_LSA_BLOCKS (default 132) sets the number of blocks of test (a).
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GPU_TEST_NAME "gpu_lsa"
#include "gpu_check.cuh"
#include "cco/cco.h"
#include "cco/cco_device.h"
#include "lsa_examples.h"

static int g_size, g_lsaRank, g_lsaSize;
static cudaStream_t g_stream;

// ------------------------------------------------------------------ helpers

__host__ __device__ static inline uint32_t mix32(uint32_t a) {
  a ^= a >> 16;
  a *= 0x7feb352du;
  a ^= a >> 15;
  a *= 0x846ca68bu;
  a ^= a >> 16;
  return a;
}

__host__ __device__ static inline uint64_t word_pattern(int writer, size_t i, uint32_t seed) {
  uint32_t lo = mix32((uint32_t)i ^ mix32((uint32_t)writer * 0x9e3779b9u + seed));
  uint32_t hi = mix32((uint32_t)(i >> 32) + lo + (uint32_t)writer);
  return ((uint64_t)hi << 32) | lo;
}

// k / 32768 - 1 with k < 65536: exact in fp32, and a sum of up to 256 of
// them is exact too, so fp32 results are compared bit for bit.
__host__ __device__ static inline float in_value(int lsaRank, size_t i, uint32_t seed) {
  uint32_t h = mix32((uint32_t)i * 2654435761u ^ mix32((uint32_t)lsaRank * 40503u + seed * 977u + 1u));
  return (float)(h & 0xffffu) / 32768.0f - 1.0f;
}

// Host twins of the header's bf16 conversions (same rounding).
static float host_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t host_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  uint32_t lsb = (u >> 16) & 1u;
  return (uint16_t)((u + 0x7fffu + lsb) >> 16);
}

static unsigned long long* g_counters; // device scratch: [0] errors, [1] bad statuses

static void zero_counters(void) { CUDA_OK(cudaMemsetAsync(g_counters, 0, 4 * sizeof(unsigned long long), g_stream)); }
static void read_counters(unsigned long long* errors, unsigned long long* bad) {
  unsigned long long h[4] = {~0ull, ~0ull, 0, 0};
  CUDA_OK(cudaMemcpyAsync(h, g_counters, sizeof(h), cudaMemcpyDeviceToHost, g_stream));
  CUDA_OK(cudaStreamSynchronize(g_stream));
  *errors = h[0];
  *bad = h[1];
}

// Barrier indices: [0, 1024) for the concurrent sessions of (a), (b) and (c);
// the timeout and abort tests leave their barriers out of step on purpose,
// so each has indices of its own.
enum {
  kBarriers = 1100,
  kTimeoutBase = 1024, // 4 indices
  kControlBase = 1032, // 4
  kAbortBaseA = 1040,  // 4
  kAbortBaseB = 1048,  // 4
};

// --------------------------------------------------------- (a) barriers

#define SLOT_WORDS 16

// Byte offset of word `word` of writer `writer`'s slot of session `session`
// in buffer `par` (iterations alternate between two buffers, so a fast peer
// writing iteration it+1 never overwrites what a slow rank checks for it).
__host__ __device__ static inline uint64_t slot_off(uint32_t par, uint32_t session, uint32_t nSessions,
                                                    uint32_t lsaSize, uint32_t writer, uint32_t word) {
  return ((((uint64_t)par * nSessions + session) * lsaSize + writer) * SLOT_WORDS + word) * 4u;
}

// coop 0 thread: thread 0 of each block, session = block.
// coop 1 warp: every warp, session = block * warps + warp.
// coop 2 block: the whole block, session = block.
// nSessions is the layout's session count (the same for every scope).
__global__ void barrier_kernel(ccoDevComm dc, ccoWindow_t win, int coopInt, uint32_t iters, uint32_t base,
                               uint32_t nSessions, unsigned long long* counters) {
  ccoCoop_t coop = (ccoCoop_t)coopInt;
  uint32_t session;
  if (coop == ccoCoopThread) {
    if (threadIdx.x != 0) return;
    session = blockIdx.x;
  } else if (coop == ccoCoopWarp) {
    session = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  } else {
    session = blockIdx.x;
  }
  ccoWindowDevice w = *win;
  uint32_t n = (uint32_t)w.lsaSize, me = (uint32_t)w.lsaRank;
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, session, coop);
  uint32_t t = ccoCoopRank(coop), nt = ccoCoopSize(coop);
  uint32_t total = n * SLOT_WORDS;
  unsigned long long errs = 0, bad = 0;
  for (uint32_t it = 1; it <= iters; it++) {
    uint32_t val = base + it, par = it & 1u;
    // Thread t writes words of peer t / SLOT_WORDS: not the thread that
    // stores the arrival into that peer, so the scope's sync must order them.
    for (uint32_t k = t; k < total; k += nt) {
      uint32_t peer = k / SLOT_WORDS, word = k % SLOT_WORDS;
      uint32_t* dst = (uint32_t*)ccoGetLsaPeerPtr(&w, (int)peer, slot_off(par, session, nSessions, n, me, word));
      *dst = val;
    }
    if (ccoLsaBarrierSync(&s) != ccoDevSuccess) {
      bad++;
      break; // every thread of the scope gets the same status
    }
    for (uint32_t k = t; k < total; k += nt) {
      uint32_t q = k / SLOT_WORDS, word = k % SLOT_WORDS;
      uint32_t v = *(const uint32_t*)ccoGetLocalPtr(&w, slot_off(par, session, nSessions, n, q, word));
      errs += v != val;
    }
  }
  ccoLsaBarrierSessionEnd(&s);
  if (errs) atomicAdd(&counters[0], errs);
  if (bad) atomicAdd(&counters[1], bad);
}

static void test_barriers(const ccoDevComm* dc) {
  int nBlocks = 132;
  const char* env = getenv("GPU_LSA_BLOCKS");
  if (env && atoi(env) > 0) nBlocks = atoi(env);
  const int threads = 128, warps = threads / 32;
  if (nBlocks * warps > 1024) nBlocks = 1024 / warps;
  const uint32_t iters = 1000; // even: see below
  uint32_t maxSessions = (uint32_t)nBlocks * warps;
  size_t bytes = slot_off(2, 0, maxSessions, g_lsaSize, 0, 0);
  ccoWindow_t win = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, bytes, &win, &local));
  if (!win) return;
  CUDA_OK(cudaMemsetAsync(local, 0, bytes, g_stream));
  CUDA_OK(cudaStreamSynchronize(g_stream));
  OK(ccoBarrierAll(g_comm));
  const char* names[3] = {"thread", "warp", "block"};
  uint32_t base = 0;
  for (int round = 0; round < 2; round++) {
    for (int coop = 0; coop < 3; coop++) {
      uint32_t nSessions = coop == 1 ? maxSessions : (uint32_t)nBlocks;
      base += 1u << 20; // every kernel stores values of its own
      zero_counters();
      double t0 = now_s();
      barrier_kernel<<<nBlocks, threads, 0, g_stream>>>(*dc, win, coop, iters, base, maxSessions, g_counters);
      CUDA_OK(cudaGetLastError());
      wait_stream(g_stream, "barrier kernel", 120);
      double dt = now_s() - t0;
      unsigned long long errors, bad;
      read_counters(&errors, &bad);
      CHECK(errors == 0 && bad == 0,
            "(a) LSA barrier, %s scope, round %d: %u sessions x %u iterations, %d ranks: %llu stale "
            "slots, %llu bad statuses, %.1f us per iteration",
            names[coop], round, nSessions, iters, g_lsaSize, errors, bad, dt * 1e6 / iters);
      // Kernels follow each other without a host barrier: epochs carry over
      // between sessions, and the two slot buffers (one layout for every
      // scope, an even number of iterations) keep the data apart: a rank
      // that starts the next kernel writes buffer 1 while a slower one still
      // checks buffer 0.
    }
  }
  OK(ccoBarrierAll(g_comm));
  OK(ccoWindowDeregister(g_comm, win));
}

// -------------------------------------------------------------- (b) LSA put

__global__ void fill_words(uint64_t* dst, size_t words, int writer, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = word_pattern(writer, i, seed);
}

__global__ void put_kernel(ccoWindow_t win, uint64_t srcOff, uint64_t dstOff, size_t bytes) {
  ccoExampleLsaPut(win, srcOff, dstOff, bytes, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

// Counts words of every peer's block that differ from that peer's pattern,
// and guard bytes past the last block that are not 0xEE.
__global__ void check_put(ccoWindow_t win, uint64_t dstOff, size_t bytes, uint32_t seed, size_t guard,
                          unsigned long long* counters) {
  ccoWindowDevice w = *win;
  size_t words = bytes / 8;
  unsigned long long errs = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int q = 0; q < w.lsaSize; q++) {
    const uint64_t* p = (const uint64_t*)ccoGetLocalPtr(&w, dstOff + (uint64_t)q * bytes);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += stride)
      errs += p[i] != word_pattern(q, i, seed);
  }
  const uint8_t* g = (const uint8_t*)ccoGetLocalPtr(&w, dstOff + (uint64_t)w.lsaSize * bytes);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < guard; i += stride) errs += g[i] != 0xEE;
  if (errs) atomicAdd(&counters[0], errs);
}

// Put, then an LSA barrier per block, then each block checks the words the
// same block of every peer put here (same grid on every rank: thread tid
// handles words tid, tid + nthreads, ...).
__global__ void put_barrier_check(ccoDevComm dc, ccoWindow_t win, uint64_t srcOff, uint64_t dstOff, size_t bytes,
                                  uint32_t seed, unsigned long long* counters) {
  uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
  ccoExampleLsaPut(win, srcOff, dstOff, bytes, tid, nthreads);
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, blockIdx.x, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&s);
  unsigned long long errs = 0;
  if (st == ccoDevSuccess) {
    ccoWindowDevice w = *win;
    for (int q = 0; q < w.lsaSize; q++) {
      const uint64_t* p = (const uint64_t*)ccoGetLocalPtr(&w, dstOff + (uint64_t)q * bytes);
      for (size_t i = tid; i < bytes / 8; i += nthreads) errs += p[i] != word_pattern(q, i, seed);
    }
    // No peer may overwrite this rank's blocks (next size) before it checked.
    st = ccoLsaBarrierSync(&s);
  }
  ccoLsaBarrierSessionEnd(&s);
  if (errs) atomicAdd(&counters[0], errs);
  if (st != ccoDevSuccess && threadIdx.x == 0) atomicAdd(&counters[1], 1ull);
}

static void test_put(const ccoDevComm* dc) {
  const size_t maxBytes = 64u << 20, guard = 4096;
  const size_t sizes[] = {8, 16, 24, 4096, 65536 + 8, 1u << 20, (16u << 20) + 8, 64u << 20};
  const uint64_t srcOff = 0, dstOff = maxBytes;
  size_t winBytes = maxBytes + (size_t)g_lsaSize * maxBytes + guard;
  ccoWindow_t win = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, winBytes, &win, &local));
  if (!win) return;
  char* base = (char*)local;
  uint32_t seed = 100;
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    size_t bytes = sizes[s];
    seed++;
    fill_words<<<132, 512, 0, g_stream>>>((uint64_t*)(base + srcOff), bytes / 8, g_lsaRank, seed);
    CUDA_OK(cudaMemsetAsync(base + dstOff, 0xEE, (size_t)g_lsaSize * bytes + guard, g_stream));
    wait_stream(g_stream, "put fill", 60);
    OK(ccoBarrierAll(g_comm)); // every destination is cleared before anyone puts
    zero_counters();
    double t0 = now_s();
    put_kernel<<<132, 512, 0, g_stream>>>(win, srcOff, dstOff, bytes);
    CUDA_OK(cudaGetLastError());
    wait_stream(g_stream, "put kernel", 60);
    double dt = now_s() - t0;
    OK(ccoBarrierAll(g_comm)); // every peer's put has finished
    check_put<<<132, 512, 0, g_stream>>>(win, dstOff, bytes, seed, guard, g_counters);
    wait_stream(g_stream, "put check", 60);
    unsigned long long errors, bad;
    read_counters(&errors, &bad);
    CHECK(errors == 0, "(b) ccoExampleLsaPut %zu B to %d peers, checked after the kernels: %llu bad words "
          "or guard bytes (put kernel %.3f ms)", bytes, g_lsaSize, errors, dt * 1e3);
    OK(ccoBarrierAll(g_comm)); // everyone checked before the next size overwrites
  }
  // The same puts ordered by LSA barriers inside one kernel, back to back.
  const int blocks = 32, threads = 256; // all ranks' blocks must fit on the GPU at once
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    size_t bytes = sizes[s];
    seed++;
    zero_counters();
    fill_words<<<132, 512, 0, g_stream>>>((uint64_t*)(base + srcOff), bytes / 8, g_lsaRank, seed);
    put_barrier_check<<<blocks, threads, 0, g_stream>>>(*dc, win, srcOff, dstOff, bytes, seed, g_counters);
    CUDA_OK(cudaGetLastError());
    wait_stream(g_stream, "put + barrier kernel", 60);
    unsigned long long errors, bad;
    read_counters(&errors, &bad);
    CHECK(errors == 0 && bad == 0,
          "(b) ccoExampleLsaPut %zu B + LSA barrier in one kernel (%d blocks): %llu bad words, %llu bad "
          "statuses", bytes, blocks, errors, bad);
  }
  OK(ccoBarrierAll(g_comm));
  OK(ccoWindowDeregister(g_comm, win));
}

// -------------------------------------------------------- (c) all-reduce

__global__ void ar_fill(ccoWindow_t win, uint64_t inOff, size_t count, int dtype, uint32_t seed) {
  ccoWindowDevice w = *win;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  if (dtype == ccoExampleF32) {
    float* p = (float*)ccoGetLocalPtr(&w, inOff);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += stride)
      p[i] = in_value(w.lsaRank, i, seed);
  } else {
    uint16_t* p = (uint16_t*)ccoGetLocalPtr(&w, inOff);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += stride)
      p[i] = ccoExampleF32ToBf16(in_value(w.lsaRank, i, seed));
  }
}

__global__ void ar_kernel(ccoDevComm dc, ccoWindow_t win, uint64_t inOff, uint64_t outOff, size_t count, int dtype,
                          unsigned long long* counters) {
  ccoDevStatus_t st = ccoExampleAllReduceBlock(&dc, win, inOff, outOff, count, (ccoExampleDtype)dtype, blockIdx.x,
                                               gridDim.x);
  if (st != ccoDevSuccess && threadIdx.x == 0) atomicAdd(&counters[1], 1ull);
}

// Device check of the output against the same sum (LSA rank order, fp32
// accumulation): bit-exact for both dtypes.
__global__ void ar_verify(ccoWindow_t win, uint64_t outOff, size_t count, int dtype, uint32_t seed,
                          unsigned long long* counters) {
  ccoWindowDevice w = *win;
  unsigned long long errs = 0;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += stride) {
    float acc = 0.0f;
    if (dtype == ccoExampleF32) {
      for (int p = 0; p < w.lsaSize; p++) acc += in_value(p, i, seed);
      errs += ((const float*)ccoGetLocalPtr(&w, outOff))[i] != acc;
    } else {
      for (int p = 0; p < w.lsaSize; p++) acc += ccoExampleBf16ToF32(ccoExampleF32ToBf16(in_value(p, i, seed)));
      errs += ((const uint16_t*)ccoGetLocalPtr(&w, outOff))[i] != ccoExampleF32ToBf16(acc);
    }
  }
  if (errs) atomicAdd(&counters[0], errs);
}

static void test_allreduce(const ccoDevComm* dc) {
  const size_t counts[] = {1, 7, 1000, 4099, 65539, (1u << 22) + 5};
  const uint32_t parts[] = {1, 7, 32};
  const size_t maxCount = (1u << 22) + 5;
  const uint64_t inOff = 0, outOff = ((maxCount * 4 + 4095) / 4096) * 4096;
  const int threads = 256;
  ccoWindow_t win = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 2 * outOff, &win, &local));
  if (!win) return;
  OK(ccoBarrierAll(g_comm));
  float* host = (float*)malloc(maxCount * sizeof(float));
  uint32_t seed = 1000;
  const char* dname[2] = {"fp32", "bf16"};
  // One run each, against a host reference.
  for (int dtype = 0; dtype < 2; dtype++) {
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
      for (size_t pi = 0; pi < sizeof(parts) / sizeof(parts[0]); pi++) {
        size_t count = counts[c];
        uint32_t nParts = parts[pi];
        seed++;
        zero_counters();
        CUDA_OK(cudaMemsetAsync((char*)local + outOff, 0xFF, count * 4, g_stream));
        ar_fill<<<132, 256, 0, g_stream>>>(win, inOff, count, dtype, seed);
        ar_kernel<<<nParts, threads, 0, g_stream>>>(*dc, win, inOff, outOff, count, dtype, g_counters);
        CUDA_OK(cudaGetLastError());
        wait_stream(g_stream, "all-reduce kernel", 60);
        unsigned long long errors, bad;
        read_counters(&errors, &bad);
        CUDA_OK(cudaMemcpy(host, (char*)local + outOff, count * (dtype == ccoExampleF32 ? 4 : 2),
                           cudaMemcpyDeviceToHost));
        size_t wrong = 0, firstBad = (size_t)-1;
        double worst = 0;
        for (size_t i = 0; i < count; i++) {
          double ref = 0;
          float out;
          int good;
          if (dtype == ccoExampleF32) {
            for (int p = 0; p < g_lsaSize; p++) ref += in_value(p, i, seed);
            out = host[i];
            good = (double)out == ref; // exact: see in_value
          } else {
            for (int p = 0; p < g_lsaSize; p++) ref += host_bf16_to_f32(host_f32_to_bf16(in_value(p, i, seed)));
            out = host_bf16_to_f32(((const uint16_t*)host)[i]);
            // One rounding to bf16 (8 significant bits) of an exact sum.
            good = fabs((double)out - ref) <= fabs(ref) * (1.0 / 256) + 1e-30;
          }
          double err = fabs((double)out - ref);
          if (err > worst || err != err) worst = err; // a NaN sticks
          if (!good) {
            if (!wrong) firstBad = i;
            wrong++;
          }
        }
        CHECK(wrong == 0 && bad == 0,
              "(c) all-reduce %s count %zu, %u parts, %d ranks, host reference: %zu wrong (first %zd), max "
              "abs error %.3g, %llu bad statuses",
              dname[dtype], count, nParts, g_lsaSize, wrong, wrong ? (ssize_t)firstBad : (ssize_t)-1, worst, bad);
      }
    }
  }
  // Back to back with fresh inputs each run, checked on the device: a
  // barrier that let a rank through early would mix two runs' inputs.
  struct {
    int dtype;
    size_t count;
    uint32_t parts;
    int reps;
  } runs[] = {{ccoExampleF32, 4099, 32, 500}, {ccoExampleBf16, 4099, 7, 500},
              {ccoExampleF32, (1u << 20) + 3, 32, 100}, {ccoExampleBf16, (1u << 20) + 3, 32, 100},
              {ccoExampleF32, 1, 32, 500}};
  for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
    zero_counters();
    double t0 = now_s();
    for (int rep = 0; rep < runs[r].reps; rep++) {
      seed++;
      ar_fill<<<132, 256, 0, g_stream>>>(win, inOff, runs[r].count, runs[r].dtype, seed);
      ar_kernel<<<runs[r].parts, threads, 0, g_stream>>>(*dc, win, inOff, outOff, runs[r].count, runs[r].dtype,
                                                         g_counters);
      ar_verify<<<132, 256, 0, g_stream>>>(win, outOff, runs[r].count, runs[r].dtype, seed, g_counters);
    }
    CUDA_OK(cudaGetLastError());
    wait_stream(g_stream, "back-to-back all-reduce", 120);
    double dt = now_s() - t0;
    unsigned long long errors, bad;
    read_counters(&errors, &bad);
    CHECK(errors == 0 && bad == 0,
          "(c) all-reduce %s count %zu, %u parts, %d runs back to back: %llu wrong elements, %llu bad statuses "
          "(%.1f us per run incl. fill and check)",
          dname[runs[r].dtype], runs[r].count, runs[r].parts, runs[r].reps, errors, bad, dt * 1e6 / runs[r].reps);
  }
  free(host);
  OK(ccoBarrierAll(g_comm));
  OK(ccoWindowDeregister(g_comm, win));
}

// -------------------------------------------------- (d) timeout and abort

// Block 0: thread 0 alone (thread scope); block 1: warp 0 (warp scope);
// block 2: the whole block (block scope), each on barrier index0 + block,
// arriving and then waiting. Block 3 (when launched): thread 0 waits in
// ccoSignalWaitUntil for a signal word of its own window nobody sets.
// counts[block * 3 + status] counts the threads that got each status.
__global__ void wait_kernel(ccoDevComm dc, ccoWindow_t win, uint32_t index0, uint64_t timeoutNs, uint64_t sigOff,
                            unsigned int* counts, unsigned long long* elapsed) {
  uint32_t b = blockIdx.x;
  if ((b == 0 || b == 3) && threadIdx.x != 0) return;
  if (b == 1 && threadIdx.x >= 32) return;
  ccoCoop_t coop = b == 1 ? ccoCoopWarp : b == 2 ? ccoCoopBlock : ccoCoopThread;
  uint64_t t0 = cco_impl_clock_ns();
  ccoDevStatus_t st;
  if (b == 3) {
    st = ccoSignalWaitUntil(&dc, (const uint64_t*)ccoGetLocalPtr(win, sigOff), 1, timeoutNs);
  } else {
    ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, index0 + b, coop);
    ccoLsaBarrierArrive(&s);
    st = timeoutNs ? ccoLsaBarrierWaitTimeout(&s, timeoutNs) : ccoLsaBarrierWait(&s);
    ccoLsaBarrierSessionEnd(&s);
  }
  uint64_t dt = cco_impl_clock_ns() - t0;
  atomicAdd(&counts[b * 3 + (uint32_t)st], 1u);
  if (ccoCoopRank(coop) == 0) elapsed[b] = dt;
}

static const char* kScope[4] = {"thread scope barrier", "warp scope barrier", "block scope barrier",
                                "ccoSignalWaitUntil"};

// Launches wait_kernel with nBlocks blocks of `threads`; returns its counts.
static void launch_wait(const ccoDevComm* dc, ccoWindow_t win, int nBlocks, int threads, uint32_t index0,
                        uint64_t timeoutNs, unsigned int* dCounts, unsigned long long* dElapsed) {
  CUDA_OK(cudaMemsetAsync(dCounts, 0, 12 * sizeof(unsigned int), g_stream));
  CUDA_OK(cudaMemsetAsync(dElapsed, 0, 4 * sizeof(unsigned long long), g_stream));
  wait_kernel<<<nBlocks, threads, 0, g_stream>>>(*dc, win, index0, timeoutNs, 0, dCounts, dElapsed);
  CUDA_OK(cudaGetLastError());
}

static void read_wait(unsigned int* dCounts, unsigned long long* dElapsed, unsigned int counts[12],
                      unsigned long long elapsed[4]) {
  CUDA_OK(cudaMemcpyAsync(counts, dCounts, 12 * sizeof(unsigned int), cudaMemcpyDeviceToHost, g_stream));
  CUDA_OK(cudaMemcpyAsync(elapsed, dElapsed, 4 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, g_stream));
  CUDA_OK(cudaStreamSynchronize(g_stream));
}

static unsigned expected_threads(int block, int threads) {
  return block == 1 ? 32u : block == 2 ? (unsigned)threads : 1u;
}

static void test_timeout(const ccoDevComm* dc, ccoWindow_t win, unsigned int* dCounts, unsigned long long* dElapsed) {
  const int threads = 128;
  unsigned int counts[12];
  unsigned long long elapsed[4];
  // Control: everybody arrives, so a generous timeout is not hit.
  launch_wait(dc, win, 3, threads, kControlBase, 10000000000ull, dCounts, dElapsed);
  wait_stream(g_stream, "timeout control kernel", 60);
  read_wait(dCounts, dElapsed, counts, elapsed);
  for (int b = 0; b < 3; b++)
    CHECK(counts[b * 3 + ccoDevSuccess] == expected_threads(b, threads),
          "(d) %s with a 10 s timeout, every rank present: %u of %u threads ccoDevSuccess (aborted %u, "
          "timeout %u) in %.1f us", kScope[b], counts[b * 3 + 0], expected_threads(b, threads), counts[b * 3 + 1],
          counts[b * 3 + 2], elapsed[b] * 1e-3);
  OK(ccoBarrierAll(g_comm));
  // The last LSA rank never arrives; everybody else must time out.
  const uint64_t timeoutNs = 100000000ull; // 100 ms
  if (g_lsaRank != g_lsaSize - 1) {
    launch_wait(dc, win, 4, threads, kTimeoutBase, timeoutNs, dCounts, dElapsed);
    wait_stream(g_stream, "timeout kernel", 60);
    read_wait(dCounts, dElapsed, counts, elapsed);
    for (int b = 0; b < 4; b++)
      CHECK(counts[b * 3 + ccoDevTimeout] == expected_threads(b, threads) && elapsed[b] >= timeoutNs &&
                elapsed[b] < timeoutNs + 2000000000ull,
            "(d) %s, timeout 100 ms, LSA rank %d absent: %u of %u threads ccoDevTimeout (success %u, aborted "
            "%u) after %.1f ms", kScope[b], g_lsaSize - 1, counts[b * 3 + 2], expected_threads(b, threads),
            counts[b * 3 + 0], counts[b * 3 + 1], elapsed[b] * 1e-6);
  } else {
    printf("gpu_lsa rank %d: (d) timeout: this rank is the one that stays away\n", g_rank);
  }
  OK(ccoBarrierAll(g_comm));
}

// Last test: the communicator is aborted. Every rank but the last LSA rank
// waits on barriers A, which the last rank never arrives at; the last rank
// waits on barriers B, which nobody else arrives at. So every rank's kernel
// hangs until its own host aborts.
// Returns 0 when the kernel never finished (nothing may be released then).
static int test_abort(const ccoDevComm* dc, ccoWindow_t win, unsigned int* dCounts, unsigned long long* dElapsed) {
  const int threads = 128;
  OK(ccoBarrierAll(g_comm));
  usleep(200000); // every rank has left the host barrier before anyone aborts
  uint32_t index0 = g_lsaRank == g_lsaSize - 1 ? kAbortBaseB : kAbortBaseA;
  launch_wait(dc, win, 4, threads, index0, 0, dCounts, dElapsed);
  usleep(300000);
  cudaError_t q = cudaStreamQuery(g_stream);
  CHECK(q == cudaErrorNotReady, "(d) abort: the kernel still waits in ccoLsaBarrierWait after 300 ms (%s)",
        cudaGetErrorString(q));
  double t0 = now_s();
  OK(ccoCommAbort(g_comm));
  double tAbort = now_s() - t0;
  // cudaStreamSynchronize itself would hang on a kernel that never returns.
  double limit = 5.0;
  while (cudaStreamQuery(g_stream) == cudaErrorNotReady && now_s() - t0 < limit) usleep(50);
  int done = cudaStreamQuery(g_stream) != cudaErrorNotReady;
  CUDA_OK(done ? cudaStreamSynchronize(g_stream) : cudaSuccess);
  double dt = now_s() - t0;
  CHECK(done && dt < 1.0, "(d) abort: stream done %.2f ms after ccoCommAbort (the call took %.2f ms)%s", dt * 1e3,
        tAbort * 1e3, done ? "" : " - NOT DONE, giving up");
  if (!done) return 0;
  unsigned int counts[12];
  unsigned long long elapsed[4];
  read_wait(dCounts, dElapsed, counts, elapsed);
  for (int b = 0; b < 4; b++)
    CHECK(counts[b * 3 + ccoDevAborted] == expected_threads(b, threads),
          "(d) abort: %s with no timeout: %u of %u threads ccoDevAborted (success %u, timeout %u) after %.1f ms",
          kScope[b], counts[b * 3 + 1], expected_threads(b, threads), counts[b * 3 + 0], counts[b * 3 + 2],
          elapsed[b] * 1e-6);
  ccoResult_t asyncErr = ccoSuccess;
  OK(ccoCommGetAsyncError(g_comm, &asyncErr));
  CHECK(asyncErr != ccoSuccess, "(d) abort: ccoCommGetAsyncError reports %s", ccoGetErrorString(asyncErr));
  return 1;
}

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0)); // make the primary context current
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "gpu_lsa: create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  ccoCommLsaRank(g_comm, &g_lsaRank);
  ccoCommLsaSize(g_comm, &g_lsaSize);
  CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&g_counters, 4 * sizeof(unsigned long long)));
  ccoPlatform_t platform;
  OK(ccoCommPlatform(g_comm, &platform));
  CHECK(platform == ccoPlatformCuda && g_size == g_lsaSize,
        "platform %d (cuda is %d), %d ranks, %d in the LSA team (one host expected)", (int)platform,
        (int)ccoPlatformCuda, g_size, g_lsaSize);

  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = kBarriers;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoResult_t r = ccoDevCommCreate(g_comm, &reqs, &dc);
  CHECK(r == ccoSuccess && dc.lsaBarrierCount >= (uint32_t)kBarriers && dc.abortFlag != 0,
        "ccoDevCommCreate with %d LSA barriers: %s (%s)", kBarriers, ccoGetErrorString(r), ccoGetLastError(g_comm));
  if (r != ccoSuccess) {
    ccoCommDestroy(g_comm);
    return finish() | 1;
  }

  test_barriers(&dc);
  test_put(&dc);
  test_allreduce(&dc);

  // (d): a small window for the signal word.
  ccoWindow_t win = NULL;
  void* local = NULL;
  unsigned int* dCounts = NULL;
  unsigned long long* dElapsed = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 4096, &win, &local));
  CUDA_OK(cudaMalloc(&dCounts, 12 * sizeof(unsigned int)));
  CUDA_OK(cudaMalloc(&dElapsed, 4 * sizeof(unsigned long long)));
  if (win && local) {
    CUDA_OK(cudaMemset(local, 0, 4096));
    CUDA_OK(cudaDeviceSynchronize());
    if (g_lsaSize >= 2) {
      test_timeout(&dc, win, dCounts, dElapsed);
      if (!test_abort(&dc, win, dCounts, dElapsed)) _exit(finish() | 1); // a kernel still runs

    } else {
      printf("gpu_lsa rank %d: (d) timeout and abort need 2 ranks or more: skipped\n", g_rank);
    }
  }
  // The communicator may be aborted now: release everything locally.
  OK(ccoCommDestroy(g_comm));
  cudaFree(dCounts);
  cudaFree(dElapsed);
  cudaFree(g_counters);
  cudaStreamDestroy(g_stream);
  return finish();
}
