// LSA device API benchmarks, one rank of a job started by ccorun (MPS for
// several ranks on one GPU):
//
//   ccorun -n N cco-bench-lsa [-b 256M] [-e 256M] [-n N] [-w N] [put] [pingpong] [barrier] [rate]
//
// One JSON line per measurement from rank 0 (bench_json.h), each next to its
// reference measured in the same run (bench/nvshmem_ref.cu measures the same
// with NVSHMEM, as the reference "nvshmem"):
//
// 1. put (op lsa_put): a kernel (one 1024-thread block per SM, eight 16-byte
//    loads in flight per thread, as bench_windows.cu's copy_kernel) copies
//    each size of the sweep (default 256 MiB only) from this rank's window
//    into LSA peer (lsaRank + 1)'s window, against cudaMemcpy device-to-device
//    of the same bytes. writers=1: rank 0 alone; writers=N: every rank at
//    once (aggregate bytes over the slowest rank). -n copies per trial (10).
// 2. pingpong (op signal_pingpong): LSA ranks 0 and 1, one thread each:
//    ccoLsaSignalStore into the peer's signal word, ccoSignalWaitUntil on
//    its own; half round trip. Reference: the same ping-pong on the same
//    window memory with raw volatile stores/loads and __threadfence_system.
//    Variant "relaxed": ccoLsaSignalStoreRelaxed (orders nothing before it),
//    whose reference is NVSHMEM's signal_op (nvshmem_ref), which orders
//    nothing either; the release store's is NVSHMEM's putmem_signal.
//    Reference "relaxed_poll_fence": relaxed stores, relaxed polls and one
//    fence.acq_rel at the LSA scope when the value is there (how the waits
//    polled for a day; a fence is a MEMBAR, which the acquire polls avoid).
//    -n round trips (20000) after -w (1000).
// 3. barrier (op lsa_barrier): ccoLsaBarrierSync at block scope, -n times
//    (10000, after -w 200) in one kernel of one block per rank; and at
//    thread scope (one thread storing to every peer: scope "thread"). Reference:
//    the same all-to-all flag barrier written with volatile stores/loads and
//    __threadfence_system.
// 4. rate (op signal_rate): 32 x 256 threads on every rank each add 1 to
//    their own word of the next LSA rank's window, -n times (256) in a row,
//    variant "relaxed" (ccoLsaSignalAddRelaxed) and "release"
//    (ccoLsaSignalAdd); messages of all ranks per second over the slowest
//    rank's kernel (CUDA events). Reference: nvshmem_ref's signal_op ADD.
//
// Ping-pong, barrier and rate run at the LSA scope the device communicator
// chose and, where that is GPU scope (all ranks on one GPU), once more at
// system scope (field lsa_scope): what ranks on different GPUs pay.
//
// Medians over alternating trials. In-kernel times come from %globaltimer.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.cuh"
#include "cco/cco.h"
#include "cco/cco_device.h"

static ccoComm* comm;

// Window layout (every rank): signal words, the raw barrier inbox, then the
// put source and destination (the largest size of the sweep each).
enum : uint64_t {
  kSigOff = 0,         // uint64_t: cco ping-pong word
  kRawSigOff = 256,    // uint64_t: raw ping-pong word (another cache line)
  kRawBarOff = 4096,   // uint32_t[lsaSize]: raw barrier inbox
  kRateOff = 64u << 10, // uint64_t[kRateBlocks * kRateThreads]: message-rate words
  kSrcOff = 2u << 20,  // put source
};
static const char* const kOps[] = {"put", "pingpong", "barrier", "rate", NULL};
static const uint32_t kRateBlocks = 32, kRateThreads = 256; // 8192 words, 64 KiB

// ------------------------------------------------------------ 1. put

// bench_windows.cu's copy_kernel, with the peer address from the window.
__global__ void put_kernel(ccoWindow_t win, int peer, uint64_t srcOff, uint64_t dstOff, size_t n) {
  ccoWindowDevice w = *win;
  bench_copy_u4((uint4*)ccoGetLsaPeerPtr(&w, peer, dstOff), (const uint4*)ccoGetLocalPtr(&w, srcOff), n);
}


// Puts into the next LSA peer's window beside cudaMemcpy (bench_common.cuh); the lone writer is LSA rank 0.
static void bench_put(ccoWindow_t win, const bench_sweep* sw, int iters, int warmup, int rank, int size, int lsaRank,
                      int lsaSize, void* refSrc, void* refDst, cudaStream_t st) {
  const uint64_t dstOff = kSrcOff + sw->max;
  int peer = (lsaRank + 1) % lsaSize;
  bench_put_spec spec = {"lsa", NULL, lsaRank, lsaSize, size, rank == 0};
  bench_put_vs_memcpy(comm, spec, sw, iters, warmup, refSrc, refDst, st,
                      [&](unsigned long long bytes, int blocks, int threads, cudaStream_t s) {
                        put_kernel<<<blocks, threads, 0, s>>>(win, peer, kSrcOff, dstOff, bytes / sizeof(uint4));
                      });
}

// ------------------------------------------------------- 2. ping-pong

// Role 0 signals first; values base+1 .. base+warm+iters, so no word is ever
// reset between runs. *ns: time of the last `iters` round trips.
// relaxed: ccoLsaSignalStoreRelaxed, which orders nothing before it (as
// NVSHMEM's signal_op), instead of the release store.
__global__ void pingpong_cco(ccoDevComm dc, ccoWindow_t win, int role, uint64_t base, uint32_t warm, uint32_t iters,
                             unsigned long long* ns, unsigned int* bad, int relaxed) {
  ccoWindowDevice w = *win;
  uint64_t* mine = (uint64_t*)ccoGetLocalPtr(&w, kSigOff);
  uint64_t* theirs = (uint64_t*)ccoGetLsaPeerPtr(&w, 1 - role, kSigOff);
  uint64_t t0 = cco_impl_clock_ns();
  for (uint32_t i = 1; i <= warm + iters; i++) {
    if (i == warm + 1) t0 = cco_impl_clock_ns();
    uint64_t v = base + i;
    if (role == 0) {
      if (relaxed) ccoLsaSignalStoreRelaxed(&dc, theirs, v);
      else ccoLsaSignalStore(&dc, theirs, v);
    }
    if (ccoSignalWaitUntil(&dc, mine, v, 0) != ccoDevSuccess) {
      *bad = 1;
      return;
    }
    if (role == 1) {
      if (relaxed) ccoLsaSignalStoreRelaxed(&dc, theirs, v);
      else ccoLsaSignalStore(&dc, theirs, v);
    }
  }
  *ns = cco_impl_clock_ns() - t0;
}

// The same with raw volatile accesses: a fence before the flag store
// (release) and after the flag is seen (acquire).
__global__ void pingpong_raw(ccoWindow_t win, int role, uint64_t base, uint32_t warm, uint32_t iters,
                             unsigned long long* ns) {
  ccoWindowDevice w = *win;
  volatile uint64_t* mine = (volatile uint64_t*)ccoGetLocalPtr(&w, kRawSigOff);
  volatile uint64_t* theirs = (volatile uint64_t*)ccoGetLsaPeerPtr(&w, 1 - role, kRawSigOff);
  uint64_t t0 = cco_impl_clock_ns();
  for (uint32_t i = 1; i <= warm + iters; i++) {
    if (i == warm + 1) t0 = cco_impl_clock_ns();
    uint64_t v = base + i;
    if (role == 0) {
      __threadfence_system();
      *theirs = v;
    }
    while (*mine < v) {
    }
    __threadfence_system();
    if (role == 1) {
      *theirs = v;
    }
  }
  *ns = cco_impl_clock_ns() - t0;
}

// The waits' former polling: relaxed loads, one fence.acq_rel at the LSA
// scope once the value is there; relaxed stores.
__device__ __forceinline__ uint64_t ld_relaxed_scoped(const uint64_t* p, int gpu) {
  uint64_t v;
  if (gpu) asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__global__ void pingpong_fence_poll(ccoDevComm dc, ccoWindow_t win, int role, uint64_t base, uint32_t warm,
                                    uint32_t iters, unsigned long long* ns) {
  ccoWindowDevice w = *win;
  uint64_t* mine = (uint64_t*)ccoGetLocalPtr(&w, kSigOff);
  uint64_t* theirs = (uint64_t*)ccoGetLsaPeerPtr(&w, 1 - role, kSigOff);
  int gpu = (int)dc.lsaScopeGpu;
  uint64_t t0 = cco_impl_clock_ns();
  for (uint32_t i = 1; i <= warm + iters; i++) {
    if (i == warm + 1) t0 = cco_impl_clock_ns();
    uint64_t v = base + i;
    if (role == 0) ccoLsaSignalStoreRelaxed(&dc, theirs, v);
    while ((int64_t)(ld_relaxed_scoped(mine, gpu) - v) < 0) {
    }
    if (gpu) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    else asm volatile("fence.acq_rel.sys;" ::: "memory");
    if (role == 1) ccoLsaSignalStoreRelaxed(&dc, theirs, v);
  }
  *ns = cco_impl_clock_ns() - t0;
}

// One ping-pong line; variant and ref may be NULL, bad < 0 and goal 0 are left out.
static void pingpong_line(const ccoDevComm* dc, int size, uint32_t iters, int trials, const char* variant,
                          double minUs, double us, const char* ref, int bad, double goal) {
  bench_line l;
  bench_line_start(&l, "lsa", "signal_pingpong", BENCH_NO_BYTES, size, iters);
  bench_line_str(&l, "lsa_scope", dc->lsaScopeGpu ? "gpu" : "sys");
  bench_line_int(&l, "trials", trials);
  if (variant) bench_line_str(&l, "variant", variant);
  if (bad >= 0) bench_line_int(&l, "bad_status", bad);
  if (goal > 0) bench_line_num(&l, "goal_ratio_max", goal);
  bench_line_num(&l, "min_us", minUs);
  bench_line_emit(&l, "us", us, ref);
}

static void bench_pingpong(const ccoDevComm* dc, ccoWindow_t win, uint32_t iters, uint32_t warm, int rank, int size,
                           int lsaRank, cudaStream_t st, unsigned long long* dNs, unsigned int* dBad) {
  const int trials = 5;
  enum { kRelease, kRaw, kRelaxed, kFencePoll, kKinds };
  double v[kKinds][trials];
  static uint64_t base = 0; // across calls too: the words are never reset
  unsigned int bad = 0;
  for (int t = 0; t < trials; t++) {
    for (int kind = 0; kind < kKinds; kind++) {
      CCO_OK(ccoBarrierAll(comm));
      unsigned long long ns = 0;
      if (lsaRank < 2) {
        if (kind == kRaw) pingpong_raw<<<1, 1, 0, st>>>(win, lsaRank, base, warm, iters, dNs);
        else if (kind == kFencePoll) pingpong_fence_poll<<<1, 1, 0, st>>>(*dc, win, lsaRank, base, warm, iters, dNs);
        else pingpong_cco<<<1, 1, 0, st>>>(*dc, win, lsaRank, base, warm, iters, dNs, dBad, kind == kRelaxed);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpyAsync(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost, st));
        CUDA_OK(cudaStreamSynchronize(st));
      }
      v[kind][t] = ns * 1e-3 / iters / 2; // us per one-way trip
      base += warm + iters; // each kind's values above the last's: no word is ever reset
    }
  }
  CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost));
  double med[kKinds];
  for (int kind = 0; kind < kKinds; kind++) med[kind] = bench_median(v[kind], trials); // sorts: [0] is the minimum
  if (rank == 0) {
    // bad < 0: not a cco wait.
    pingpong_line(dc, size, iters, trials, NULL, v[kRelease][0], med[kRelease], NULL, (int)bad, 1.10);
    pingpong_line(dc, size, iters, trials, NULL, v[kRaw][0], med[kRaw], "raw_flag", -1, 0);
    // The relaxed signal: NVSHMEM's signal_op (nvshmem_ref) is its reference.
    pingpong_line(dc, size, iters, trials, "relaxed", v[kRelaxed][0], med[kRelaxed], NULL, -1, 0);
    pingpong_line(dc, size, iters, trials, "relaxed", v[kFencePoll][0], med[kFencePoll], "relaxed_poll_fence", -1, 0);
  }
}

// -------------------------------------------------------- 3. barrier

// oneThread: a barrier of one thread (ccoCoopThread), which stores to every
// peer itself; else of the block, one peer per thread.
__global__ void barrier_cco(ccoDevComm dc, uint32_t index, uint32_t warm, uint32_t iters, unsigned long long* ns,
                            unsigned int* bad, int oneThread) {
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, index, oneThread ? ccoCoopThread : ccoCoopBlock);
  uint64_t t0 = cco_impl_clock_ns();
  for (uint32_t i = 0; i < warm + iters; i++) {
    if (i == warm) t0 = cco_impl_clock_ns();
    if (ccoLsaBarrierSync(&s) != ccoDevSuccess) {
      if (threadIdx.x == 0) *bad = 1;
      break;
    }
  }
  uint64_t t1 = cco_impl_clock_ns();
  ccoLsaBarrierSessionEnd(&s);
  if (threadIdx.x == 0) *ns = t1 - t0;
}

// The same algorithm (one inbox slot per peer, growing epochs) with raw
// volatile accesses and no abort or timeout checks.
__global__ void barrier_raw(ccoWindow_t win, uint32_t epoch0, uint32_t warm, uint32_t iters,
                            unsigned long long* ns) {
  ccoWindowDevice w = *win;
  uint32_t n = (uint32_t)w.lsaSize, me = (uint32_t)w.lsaRank, tid = threadIdx.x;
  volatile uint32_t* inbox = (volatile uint32_t*)ccoGetLocalPtr(&w, kRawBarOff);
  volatile uint32_t* slot = tid < n ? (volatile uint32_t*)ccoGetLsaPeerPtr(&w, (int)tid, kRawBarOff + me * 4u) : 0;
  uint32_t e = epoch0;
  uint64_t t0 = cco_impl_clock_ns();
  for (uint32_t i = 0; i < warm + iters; i++) {
    if (i == warm) t0 = cco_impl_clock_ns();
    e++;
    __syncthreads();
    if (tid < n) {
      __threadfence_system();
      *slot = e;
      while ((int32_t)(inbox[tid] - e) < 0) {
      }
      __threadfence_system();
    }
    __syncthreads();
  }
  if (tid == 0) *ns = cco_impl_clock_ns() - t0;
}

static void bench_barrier(const ccoDevComm* dc, ccoWindow_t win, uint32_t iters, uint32_t warm, int rank, int size,
                          cudaStream_t st, unsigned long long* dNs, unsigned int* dBad) {
  const uint32_t threads = 128;
  const int trials = 5;
  double cco[trials], raw[trials], one[trials];
  static uint32_t epoch = 0; // the raw inbox's, across calls too
  unsigned int bad = 0;
  for (int t = 0; t < trials; t++) {
    for (int kind = 0; kind < 3; kind++) {
      CCO_OK(ccoBarrierAll(comm));
      if (kind == 0) barrier_cco<<<1, threads, 0, st>>>(*dc, 0, warm, iters, dNs, dBad, 0);
      else if (kind == 1) barrier_raw<<<1, threads, 0, st>>>(win, epoch, warm, iters, dNs);
      else barrier_cco<<<1, 1, 0, st>>>(*dc, 0, warm, iters, dNs, dBad, 1);
      CUDA_OK(cudaGetLastError());
      unsigned long long ns = 0;
      CUDA_OK(cudaMemcpyAsync(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost, st));
      CUDA_OK(cudaStreamSynchronize(st));
      if (kind == 1) epoch += warm + iters;
      (kind == 0 ? cco : kind == 1 ? raw : one)[t] = bench_slowest(comm, ns * 1e-3 / iters, size);
    }
  }
  CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost));
  double c = bench_median(cco, trials), r = bench_median(raw, trials), o = bench_median(one, trials);
  if (rank == 0) {
    for (int kind = 0; kind < 3; kind++) {
      bench_line l;
      bench_line_start(&l, "lsa", "lsa_barrier", BENCH_NO_BYTES, size, iters);
      bench_line_str(&l, "scope", kind == 2 ? "thread" : "block");
      bench_line_str(&l, "lsa_scope", dc->lsaScopeGpu ? "gpu" : "sys");
      bench_line_int(&l, "threads", kind == 2 ? 1 : (int)threads);
      bench_line_int(&l, "trials", trials);
      if (kind != 1) bench_line_int(&l, "bad_status", bad);
      bench_line_emit(&l, "us", kind == 0 ? c : kind == 1 ? r : o, kind == 1 ? "raw_flag" : NULL);
    }
  }
}

// ---------------------------------------------------- 4. message rate

// Every thread of every rank adds 1 to its own word of the next LSA rank's
// window, `per` times: many small signals from many threads at once.
__global__ void rate_cco(ccoDevComm dc, ccoWindow_t win, int peer, uint32_t per, int release) {
  ccoWindowDevice w = *win;
  uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t* word = (uint64_t*)ccoGetLsaPeerPtr(&w, peer, kRateOff + (uint64_t)id * 8u);
  for (uint32_t i = 0; i < per; i++) {
    if (release) ccoLsaSignalAdd(&dc, word, 1);
    else ccoLsaSignalAddRelaxed(&dc, word, 1);
  }
}

static void bench_rate(const ccoDevComm* dc, ccoWindow_t win, void* local, uint32_t per, int rank, int size,
                       int lsaRank, int lsaSize, cudaStream_t st) {
  const int trials = 5;
  const char* names[2] = {"relaxed", "release"};
  int peer = (lsaRank + 1) % lsaSize;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  static unsigned long long expect = 0; // adds each word got, across calls
  bool wrong = false;
  for (int variant = 0; variant < 2; variant++) {
    double v[trials];
    for (int t = 0; t < trials; t++) {
      CCO_OK(ccoBarrierAll(comm));
      CUDA_OK(cudaEventRecord(e0, st));
      rate_cco<<<kRateBlocks, kRateThreads, 0, st>>>(*dc, win, peer, per, variant);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaEventRecord(e1, st));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      expect += per;
      v[t] = bench_slowest(comm, ms * 1e3, size); // us
    }
    double us = bench_median(v, trials);
    double msgs = (double)kRateBlocks * kRateThreads * per * lsaSize;
    if (rank == 0) {
      bench_line l;
      bench_line_start(&l, "lsa", "signal_rate", 8, size, per);
      bench_line_str(&l, "variant", names[variant]);
      bench_line_str(&l, "lsa_scope", dc->lsaScopeGpu ? "gpu" : "sys");
      bench_line_int(&l, "threads", kRateBlocks * kRateThreads);
      bench_line_int(&l, "trials", trials);
      bench_line_emit(&l, "Mmsg_per_s", msgs / us, NULL);
    }
  }
  // Every word got every add: the previous rank's threads, trials x per each.
  CCO_OK(ccoBarrierAll(comm));
  static unsigned long long words[kRateBlocks * kRateThreads];
  CUDA_OK(cudaMemcpy(words, (char*)local + kRateOff, sizeof(words), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) wrong |= words[i] != expect;
  if (wrong) fprintf(stderr, "cco-bench-lsa rank %d: signal_rate: a word lost adds (want %llu)\n", rank, expect);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

int main(int argc, char** argv) {
  bench_args a = {0};
  a.program = "cco-bench-lsa";
  a.about = "LSA put bandwidth, signal ping-pong and LSA barrier from kernels, each beside its reference (under ccorun).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = kOps;
  a.sizeAlign = sizeof(uint4);
  a.defaults = "put: -b 256M -e 256M, -n 10 per trial, -w 1; pingpong: -n 20000 -w 1000; barrier: -n 10000 -w 200; "
               "rate: -n 256 adds per thread";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 256u << 20, 256u << 20, 2);
  bench_require_gpu(a.program);
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0));
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank, size, lsaRank, lsaSize;
  CCO_OK(ccoCommRank(comm, &rank));
  CCO_OK(ccoCommSize(comm, &size));
  CCO_OK(ccoCommLsaRank(comm, &lsaRank));
  CCO_OK(ccoCommLsaSize(comm, &lsaSize));
  if (lsaSize < 2) {
    if (rank == 0) fprintf(stderr, "cco-bench-lsa: nothing measured: it needs 2 LSA ranks\n");
    CCO_OK(ccoCommDestroy(comm));
    return 0;
  }
  // Only the put needs room for its sizes.
  size_t putBytes = bench_args_want(&a, "put") ? sw.max : 0;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  ccoWindow_t win;
  void* local;
  size_t winBytes = kSrcOff + 2 * putBytes;
  CCO_OK(ccoWindowRegisterAlloc(comm, winBytes, &win, &local));
  CUDA_OK(cudaMemset(local, 0, kSrcOff));
  void *refSrc = NULL, *refDst = NULL;
  if (putBytes) {
    CUDA_OK(cudaMemset((char*)local + kSrcOff, 1, 2 * putBytes));
    CUDA_OK(cudaMalloc(&refSrc, putBytes));
    CUDA_OK(cudaMalloc(&refDst, putBytes));
    CUDA_OK(cudaMemset(refSrc, 1, putBytes));
  }
  unsigned long long* dNs;
  unsigned int* dBad;
  CUDA_OK(cudaMalloc(&dNs, sizeof(*dNs)));
  CUDA_OK(cudaMalloc(&dBad, sizeof(*dBad)));
  CUDA_OK(cudaMemset(dBad, 0, sizeof(*dBad)));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());
  CCO_OK(ccoBarrierAll(comm)); // every window is zeroed before any kernel

  if (putBytes)
    bench_put(win, &sw, (int)bench_args_iters(&a, 10), (int)bench_args_warmup(&a, 1), rank, size, lsaRank, lsaSize,
              refSrc, refDst, st);
  // Each signal figure at the scope the device communicator chose and, when
  // that is GPU scope (every LSA peer on this GPU), again at system scope:
  // what ranks on different GPUs get. System scope orders more, so it is
  // correct here too; the copy of the device communicator only says so.
  for (int pass = 0; pass < (dc.lsaScopeGpu ? 2 : 1); pass++) {
    ccoDevComm d = dc;
    if (pass == 1) d.lsaScopeGpu = 0;
    if (bench_args_want(&a, "pingpong"))
      bench_pingpong(&d, win, (uint32_t)bench_args_iters(&a, 20000), (uint32_t)bench_args_warmup(&a, 1000), rank,
                     size, lsaRank, st, dNs, dBad);
    CUDA_OK(cudaMemset(dBad, 0, sizeof(*dBad)));
    if (bench_args_want(&a, "barrier"))
      bench_barrier(&d, win, (uint32_t)bench_args_iters(&a, 10000), (uint32_t)bench_args_warmup(&a, 200), rank,
                    size, st, dNs, dBad);
    if (bench_args_want(&a, "rate"))
      bench_rate(&d, win, local, (uint32_t)bench_args_iters(&a, 256), rank, size, lsaRank, lsaSize, st);
  }

  CCO_OK(ccoBarrierAll(comm));
  cudaFree(refSrc);
  cudaFree(refDst);
  cudaFree(dNs);
  cudaFree(dBad);
  cudaStreamDestroy(st);
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
