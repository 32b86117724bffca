// SDMA device API tests on the GPU, one rank of a job started by ccorun
// (several ranks on one GPU need MPS; see run_gpu_tests.sh):
//
//   ccorun -n 4 gpu_sdma              every check below
//   ccorun -n 2 gpu_sdma --no-sdma    CCO_ENABLE_SDMA=0: dc.sdma == 0, ccoDevUnsupported, ccoUnsupported
//
// Kernels post; the communicator's engine thread drives the copy engines.
// tests/mp/mp_sdma.c runs the same checks on CPU threads (host platform).
//
// (a) invalid peer / queue -> ccoDevInvalid, at thread, warp and block scope.
// (b) every queue: a device communicator with 8 queues, a signalled put to
//     every peer on each, one block per (peer, queue).
// (c) zero-byte signalled puts: the signals arrive, counts exact.
// (d) signal after data: an issuer kernel (a block per peer and queue) fills
//     a random-size block (0..64 KiB) and puts it with a remote signal; a
//     receiver kernel (a block per source and queue) waits with
//     ccoSdmaWaitSignal and checks the whole block with plain loads right
//     away, then acknowledges through LSA memory so the slot can be reused.
//     Once per scope (thread, warp, block), the block's threads writing the
//     source and the scope posting it.
// (e) flood: 8192 signalled 256-byte puts on queue 0 to one peer from many
//     issuers at once: every thread of 64 blocks (thread scope), every warp
//     (warp scope), every block (block scope); wrap-around and credits.
// (f) gets from every peer over every queue, ccoSdmaQuiet, verified.
// (g) ccoSdmaCommit: 32 puts without signal + a commit per peer and queue:
//     +1 exactly, every block there when it lands; then two bare commits.
// (h) quiet: after ccoSdmaQuietQueue, a get of what was put returns it, and
//     the peer reads it after a host barrier.
// (i) a 256 MiB put with a signal.
// (j) host API: ccoSdmaPutAsync on a stream, ccoStreamWaitSignal on another
//     stream followed by a check kernel there; the same with stream NULL.
// (k) engine error (last: it fails the communicator): LSA rank 0 posts a put
//     outside the flat VA with a signal to itself; its waiter returns
//     ccoDevAborted within 2 s, ccoCommGetAsyncError reports an error.
//
// Every check prints one line; the last line is
// "gpu_sdma rank R: N passed, N failed", and the exit status is non-zero on
// failure. A kernel that outlives its limit is reported, the communicator
// aborted (which releases device waits), and the rank exits.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GPU_TEST_NAME "gpu_sdma"
#include "gpu_check.cuh"
#include "cco/cco.h"
#include "cco/cco_sdma.h"

static int g_size, g_lsaRank, g_lsaSize;
static cudaStream_t g_stream, g_stream2;

static const uint64_t kWaitNs = 20ull * 1000000000ull; // device waits: a lost signal fails, not hangs
static const char* kScope[3] = {"thread", "warp", "block"};


static void barrier(void) { OK(ccoBarrierAll(g_comm)); }

static const char* status_name(unsigned st) {
  static const char* names[5] = {"ccoDevSuccess", "ccoDevAborted", "ccoDevTimeout", "ccoDevUnsupported",
                                 "ccoDevInvalid"};
  return st < 5 ? names[st] : "unknown status";
}

// ---------------------------------------------------------------- patterns

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__host__ __device__ static inline uint64_t key4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

// Byte j of the sequence `seed` is byte j % 8 of mix64(seed + j / 8), so
// whole words can be written at once where the destination is aligned
// (every area here is 8-byte aligned).
__device__ static void coop_fill(uint8_t* dst, size_t bytes, uint64_t seed, uint32_t t, uint32_t nt) {
  size_t words = bytes / 8;
  for (size_t i = t; i < words; i += nt) ((uint64_t*)dst)[i] = mix64(seed + i);
  for (size_t j = words * 8 + t; j < bytes; j += nt) dst[j] = (uint8_t)(mix64(seed + j / 8) >> (8 * (j % 8)));
}
__device__ static unsigned long long coop_count_bad(const uint8_t* p, size_t bytes, uint64_t seed, uint32_t t,
                                                    uint32_t nt) {
  unsigned long long bad = 0;
  size_t words = bytes / 8;
  for (size_t i = t; i < words; i += nt) bad += ((const uint64_t*)p)[i] != mix64(seed + i);
  for (size_t j = words * 8 + t; j < bytes; j += nt) bad += p[j] != (uint8_t)(mix64(seed + j / 8) >> (8 * (j % 8)));
  return bad;
}

__global__ void fill_kernel(uint8_t* dst, size_t bytes, uint64_t seed) {
  coop_fill(dst, bytes, seed, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}
__global__ void count_kernel(const uint8_t* p, size_t bytes, uint64_t seed, unsigned long long* counters) {
  unsigned long long bad = coop_count_bad(p, bytes, seed, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  if (bad) atomicAdd(&counters[0], bad);
}

// ------------------------------------------------- scoped device calls

// One SDMA call made by a scope of the block: thread 0 alone (thread scope),
// warp 0 (warp scope) or every thread (block scope). The block synchronizes
// first, so the whole block's writes are ordered before the call, and every
// thread of the block gets the status.
enum { kPut, kGet, kCommit, kWait, kQuietQueue, kQuiet };

struct SdmaCall {
  int op;
  int peer;
  ccoWindow_t dstWin, srcWin;
  uint64_t dstOff, srcOff, bytes;
  uint32_t queue;
  int signal;
  uint64_t expected, timeoutNs;
};

__device__ static ccoDevStatus_t scoped(const ccoDevComm* dc, int coopInt, const SdmaCall& c) {
  __shared__ unsigned shared;
  ccoCoop_t coop = (ccoCoop_t)coopInt;
  bool caller = coop == ccoCoopBlock || (coop == ccoCoopWarp && threadIdx.x < 32) ||
                (coop == ccoCoopThread && threadIdx.x == 0);
  __syncthreads();
  if (caller) {
    ccoDevStatus_t st = ccoDevInvalid;
    switch (c.op) {
      case kPut:
        st = ccoSdmaPut(dc, c.peer, c.dstWin, c.dstOff, c.srcWin, c.srcOff, c.bytes, c.queue,
                        (ccoSdmaSignal_t)c.signal, coop);
        break;
      case kGet: st = ccoSdmaGet(dc, c.peer, c.dstWin, c.dstOff, c.srcWin, c.srcOff, c.bytes, c.queue, coop); break;
      case kCommit: st = ccoSdmaCommit(dc, c.peer, c.queue, coop); break;
      case kWait: st = ccoSdmaWaitSignal(dc, c.peer, c.queue, c.expected, c.timeoutNs, coop); break;
      case kQuietQueue: st = ccoSdmaQuietQueue(dc, c.peer, c.queue, coop); break;
      case kQuiet: st = ccoSdmaQuiet(dc, c.peer, coop); break;
    }
    if (threadIdx.x == 0) shared = (unsigned)st;
  }
  __syncthreads();
  return (ccoDevStatus_t)shared;
}

__device__ static SdmaCall put_call(int peer, ccoWindow_t w, uint64_t dstOff, uint64_t srcOff, uint64_t bytes,
                                    uint32_t q, int signal) {
  SdmaCall c;
  memset(&c, 0, sizeof(c));
  c.op = kPut;
  c.peer = peer;
  c.dstWin = c.srcWin = w;
  c.dstOff = dstOff;
  c.srcOff = srcOff;
  c.bytes = bytes;
  c.queue = q;
  c.signal = signal;
  return c;
}
__device__ static SdmaCall get_call(int peer, ccoWindow_t w, uint64_t dstOff, uint64_t srcOff, uint64_t bytes,
                                    uint32_t q) {
  SdmaCall c = put_call(peer, w, dstOff, srcOff, bytes, q, 0);
  c.op = kGet;
  return c;
}
__device__ static SdmaCall simple_call(int op, int peer, uint32_t q, uint64_t expected = 0, uint64_t timeoutNs = 0) {
  SdmaCall c;
  memset(&c, 0, sizeof(c));
  c.op = op;
  c.peer = peer;
  c.queue = q;
  c.expected = expected;
  c.timeoutNs = timeoutNs;
  return c;
}

// counters: [0] wrong data, [1] bad statuses, [2] signals ahead of what was posted
static unsigned long long* g_counters;
static void zero_counters(void) { CUDA_OK(cudaMemset(g_counters, 0, 4 * sizeof(unsigned long long))); }
static void read_counters(unsigned long long out[4]) {
  CUDA_OK(cudaMemcpy(out, g_counters, 4 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
}

// Signal slots (src, q) of this rank, for every src and q.
__global__ void read_signals_kernel(ccoDevComm dc, uint32_t nq, uint64_t* out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (uint32_t)dc.lsaSize * nq) out[i] = ccoSdmaReadSignal(&dc, (int)(i / nq), i % nq);
}

static uint64_t* g_sigDev; // uint64_t[64 * 8]

static void read_signals(const ccoDevComm* dc, uint32_t nq, uint64_t* host) {
  read_signals_kernel<<<1, 512, 0, g_stream>>>(*dc, nq, g_sigDev);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "read signals", 30);
  CUDA_OK(cudaMemcpy(host, g_sigDev, (size_t)g_lsaSize * nq * 8, cudaMemcpyDeviceToHost));
}

// Checks that every slot stands at base + delta.
static void check_signals_exact(const ccoDevComm* dc, uint32_t nq, const uint64_t* base, uint64_t delta,
                                const char* what) {
  uint64_t now[64 * 8];
  read_signals(dc, nq, now);
  int wrong = 0, first = -1;
  for (int i = 0; i < g_lsaSize * (int)nq; i++)
    if (now[i] - base[i] != delta) {
      if (first < 0) first = i;
      wrong++;
    }
  CHECK(wrong == 0, "%s: every signal slot at +%llu exactly: %d are not (first: from %d queue %d at +%llu)", what,
        (unsigned long long)delta, wrong, first < 0 ? -1 : first / (int)nq, first < 0 ? -1 : first % (int)nq,
        first < 0 ? 0ull : (unsigned long long)(now[first] - base[first]));
}

// Quiet on every peer (block scope), one block.
__global__ void quiet_all_kernel(ccoDevComm dc, unsigned long long* counters) {
  for (int p = 0; p < dc.lsaSize; p++)
    if (scoped(&dc, ccoCoopBlock, simple_call(kQuiet, p, 0)) != ccoDevSuccess && threadIdx.x == 0)
      atomicAdd(&counters[1], 1ull);
}
static void quiet_all(const ccoDevComm* dc) {
  quiet_all_kernel<<<1, 128, 0, g_stream>>>(*dc, g_counters);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "quiet kernel", 60);
}

// ------------------------------------------------------------ (a) invalid

__global__ void invalid_kernel(ccoDevComm dc, ccoWindow_t w, uint32_t nq, unsigned int* wrong) {
  int n = dc.lsaSize;
  int badPeers[3] = {-1, n, n + 100};
  uint32_t badQueues[3] = {nq, CCO_SDMA_MAX_QUEUES, 0xffffffffu};
  unsigned bad = 0;
  for (int coop = 0; coop < 3; coop++) {
    for (int i = 0; i < 3; i++) {
      int p = badPeers[i];
      bad += scoped(&dc, coop, put_call(p, w, 0, 0, 8, 0, 1)) != ccoDevInvalid;
      bad += scoped(&dc, coop, get_call(p, w, 0, 0, 8, 0)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kCommit, p, 0)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kWait, p, 0, 1, 1000)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kQuietQueue, p, 0)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kQuiet, p, 0)) != ccoDevInvalid;
      uint32_t q = badQueues[i];
      bad += scoped(&dc, coop, put_call(0, w, 0, 0, 8, q, 0)) != ccoDevInvalid;
      bad += scoped(&dc, coop, get_call(0, w, 0, 0, 8, q)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kCommit, 0, q)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kWait, 0, q, 1, 1000)) != ccoDevInvalid;
      bad += scoped(&dc, coop, simple_call(kQuietQueue, 0, q)) != ccoDevInvalid;
    }
  }
  if (threadIdx.x == 0) *wrong = bad;
}

static void test_invalid(const ccoDevComm* dc, uint32_t nq, unsigned int* dWord) {
  invalid_kernel<<<1, 128, 0, g_stream>>>(*dc, dc->resourceWindow, nq, dWord);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "invalid kernel", 60);
  unsigned wrong = 1;
  CUDA_OK(cudaMemcpy(&wrong, dWord, sizeof(wrong), cudaMemcpyDeviceToHost));
  CHECK(wrong == 0, "(a) bad peer or queue: %u of 99 calls (3 scopes) did not return ccoDevInvalid", wrong);
  zero_counters();
  quiet_all(dc); // nothing was posted: every ring is quiet at once
  unsigned long long c[4];
  read_counters(c);
  CHECK(c[1] == 0, "(a) quiet after the refused calls: %llu bad statuses", c[1]);
}

// ------------------------------------------- (b) every queue, (c) zero bytes

// Block b: peer b / nq, queue b % nq: `reps` signalled puts of `bytes` from
// src[peer][q] to the peer's dst[me][q] (area `blk` bytes each).
__global__ void put_each_kernel(ccoDevComm dc, ccoWindow_t w, uint32_t nq, uint64_t blk, uint64_t bytes, int reps,
                                uint64_t seedBase, unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, p = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  uint64_t src = ((uint64_t)p * nq + q) * blk, dst = (uint64_t)n * nq * blk + ((uint64_t)me * nq + q) * blk;
  coop_fill((uint8_t*)ccoGetLocalPtr(w, src), bytes, key4(seedBase, me, p, q), threadIdx.x, blockDim.x);
  for (int r = 0; r < reps; r++)
    if (scoped(&dc, (int)((q + r) % 3), put_call(p, w, dst, src, bytes, q, ccoSdmaSignalRemote)) != ccoDevSuccess &&
        threadIdx.x == 0)
      atomicAdd(&counters[1], 1ull);
}

// Block b: source b / nq, queue b % nq: waits for base + reps, checks the block.
__global__ void wait_each_kernel(ccoDevComm dc, ccoWindow_t w, uint32_t nq, uint64_t blk, uint64_t bytes, int reps,
                                 const uint64_t* base, uint64_t seedBase, unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, s = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  ccoDevStatus_t st = scoped(&dc, (int)(blockIdx.x % 3), simple_call(kWait, s, q, base[blockIdx.x] + reps, kWaitNs));
  if (st != ccoDevSuccess) {
    if (threadIdx.x == 0) atomicAdd(&counters[1], 1ull);
    return;
  }
  uint64_t dst = (uint64_t)n * nq * blk + ((uint64_t)s * nq + q) * blk;
  unsigned long long bad =
      coop_count_bad((const uint8_t*)ccoGetLocalPtr(w, dst), bytes, key4(seedBase, s, me, q), threadIdx.x, blockDim.x);
  if (bad) atomicAdd(&counters[0], bad);
}

static uint64_t* g_baseDev; // bases for the receiver kernels

// Puts to every (peer, queue) of dc and waits for every (source, queue).
static void put_each_and_check(const ccoDevComm* dc, uint32_t nq, uint64_t bytes, int reps, const char* what) {
  const uint64_t blk = bytes ? bytes : 64;
  int n = g_lsaSize;
  ccoWindow_t w = NULL;
  void* local = NULL;
  uint64_t base[64 * 8];
  read_signals(dc, nq, base); // before the barrier: after it, peers post
  OK(ccoWindowRegisterAlloc(g_comm, 2 * (size_t)n * nq * blk, &w, &local));
  if (!w) return;
  CUDA_OK(cudaMemset(local, 0, 2 * (size_t)n * nq * blk));
  CUDA_OK(cudaMemcpy(g_baseDev, base, (size_t)n * nq * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  barrier();
  zero_counters();
  double t0 = now_s();
  wait_each_kernel<<<n * nq, 128, 0, g_stream2>>>(*dc, w, nq, blk, bytes, reps, g_baseDev, 20, g_counters);
  put_each_kernel<<<n * nq, 128, 0, g_stream>>>(*dc, w, nq, blk, bytes, reps, 20, g_counters);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "put kernel", 60);
  wait_stream(g_stream2, "wait kernel", 60);
  double dt = now_s() - t0;
  quiet_all(dc);
  unsigned long long c[4];
  read_counters(c);
  CHECK(c[0] == 0 && c[1] == 0, "%s: %d x %llu-byte signalled puts to every peer on every queue (%u), a block each: "
        "%llu wrong bytes, %llu bad statuses (%.2f ms)", what, reps, (unsigned long long)bytes, nq, c[0], c[1],
        dt * 1e3);
  barrier();
  check_signals_exact(dc, nq, base, (uint64_t)reps, what);
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

static void test_every_queue(void) {
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.sdmaQueueCount = CCO_SDMA_MAX_QUEUES;
  ccoDevComm dc8;
  memset(&dc8, 0, sizeof(dc8));
  ccoResult_t r = ccoDevCommCreate(g_comm, &reqs, &dc8);
  CHECK(r == ccoSuccess && dc8.sdma && dc8.sdmaQueueCount == CCO_SDMA_MAX_QUEUES,
        "(b) device communicator with 8 SDMA queues: %s, sdma %#llx, sdmaQueueCount %u", ccoGetErrorString(r),
        (unsigned long long)dc8.sdma, dc8.sdmaQueueCount);
  if (r != ccoSuccess || !dc8.sdma) return;
  put_each_and_check(&dc8, CCO_SDMA_MAX_QUEUES, 4096, 1, "(b) every queue");
  OK(ccoDevCommDestroy(g_comm, &dc8));
}

// ---------------------------------------------------- (d) signal after data

#define SAD_SLOTS 4u
#define SAD_MAX (64u << 10)

__host__ __device__ static inline uint64_t sad_src(uint32_t nq, int peer, uint32_t q, uint32_t slot) {
  return (((uint64_t)peer * nq + q) * SAD_SLOTS + slot) * SAD_MAX;
}
__host__ __device__ static inline uint64_t sad_dst(int n, uint32_t nq, int sender, uint32_t q, uint32_t slot) {
  return (uint64_t)n * nq * SAD_SLOTS * SAD_MAX + sad_src(nq, sender, q, slot);
}
// In the sender's window: iterations the receiver has checked.
__host__ __device__ static inline uint64_t sad_ack(int n, uint32_t nq, int receiver, uint32_t q) {
  return 2 * (uint64_t)n * nq * SAD_SLOTS * SAD_MAX + ((uint64_t)receiver * nq + q) * 64;
}
__host__ __device__ static inline uint64_t sad_size(int s, int r, uint32_t q, uint64_t it) {
  uint64_t h = key4(1, (uint64_t)s, (uint64_t)r * 8 + q, it);
  uint32_t k = (uint32_t)(h & 15);
  if (k == 0) return 0;
  if (k <= 3) return (h >> 8) % (SAD_MAX + 1);
  return (h >> 8) % 4097;
}
__host__ __device__ static inline uint64_t sad_seed(int s, int r, uint32_t q, uint64_t it) {
  return key4(2, (uint64_t)s, (uint64_t)r * 8 + q, it);
}

// Block b: peer b / nq, queue b % nq. Iterations it0 .. it0 + iters - 1
// (global numbering: acks and signals carry on from run to run).
__global__ void sad_issuer(ccoDevComm dc, ccoWindow_t w, uint32_t nq, int coop, uint64_t it0, uint32_t iters,
                           unsigned long long* counters) {
  __shared__ int stop;
  int n = dc.lsaSize, me = dc.lsaRank, p = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  const uint64_t* ack = (const uint64_t*)ccoGetLocalPtr(w, sad_ack(n, nq, p, q));
  if (threadIdx.x == 0) stop = 0;
  for (uint32_t i = 0; i < iters; i++) {
    uint64_t it = it0 + i;
    uint32_t slot = (uint32_t)(it % SAD_SLOTS);
    if (threadIdx.x == 0 && it >= SAD_SLOTS) { // the receiver is done with this slot
      uint64_t need = it - SAD_SLOTS + 1, t0 = cco_impl_clock_ns();
      while (ccoSignalLoad(ack) < need)
        if (cco_impl_clock_ns() - t0 > kWaitNs) {
          atomicAdd(&counters[1], 1ull);
          stop = 1;
          break;
        }
    }
    __syncthreads();
    if (stop) return;
    uint64_t size = sad_size(me, p, q, it), src = sad_src(nq, p, q, slot);
    coop_fill((uint8_t*)ccoGetLocalPtr(w, src), size, sad_seed(me, p, q, it), threadIdx.x, blockDim.x);
    ccoDevStatus_t st = scoped(&dc, coop, put_call(p, w, sad_dst(n, nq, me, q, slot), src, size, q, ccoSdmaSignalRemote));
    if (st != ccoDevSuccess) {
      if (threadIdx.x == 0) atomicAdd(&counters[1], 1ull);
      return;
    }
  }
}

// Block b: source b / nq, queue b % nq.
__global__ void sad_receiver(ccoDevComm dc, ccoWindow_t w, uint32_t nq, int coop, uint64_t it0, uint32_t iters,
                             const uint64_t* bases, unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, s = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  uint64_t base = bases[blockIdx.x];
  uint64_t* ack = (uint64_t*)ccoGetLsaPeerPtr(w, s, sad_ack(n, nq, me, q));
  for (uint32_t i = 0; i < iters; i++) {
    uint64_t it = it0 + i;
    uint32_t slot = (uint32_t)(it % SAD_SLOTS);
    ccoDevStatus_t st = scoped(&dc, coop, simple_call(kWait, s, q, base + it + 1, kWaitNs));
    if (st != ccoDevSuccess) {
      if (threadIdx.x == 0) atomicAdd(&counters[1], 1ull);
      return;
    }
    // The signal is up: the whole block must be here, read with plain loads.
    uint64_t size = sad_size(s, me, q, it);
    unsigned long long bad = coop_count_bad((const uint8_t*)ccoGetLocalPtr(w, sad_dst(n, nq, s, q, slot)), size,
                                            sad_seed(s, me, q, it), threadIdx.x, blockDim.x);
    if (bad) atomicAdd(&counters[0], bad);
    __syncthreads(); // every thread is done with the slot
    if (threadIdx.x == 0) {
      if (ccoSdmaReadSignal(&dc, s, q) - base > it + SAD_SLOTS) atomicAdd(&counters[2], 1ull);
      ccoSignalStore(ack, it + 1);
    }
  }
}

static void test_signal_after_data(const ccoDevComm* dc, uint32_t nq) {
  int n = g_lsaSize;
  const uint32_t iters = 300;
  size_t bytes = sad_ack(n, nq, n, 0);
  ccoWindow_t w = NULL;
  void* local = NULL;
  uint64_t base[64 * 8];
  read_signals(dc, nq, base);
  OK(ccoWindowRegisterAlloc(g_comm, bytes, &w, &local));
  if (!w) return;
  CUDA_OK(cudaMemset(local, 0, bytes));
  CUDA_OK(cudaMemcpy(g_baseDev, base, (size_t)n * nq * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  barrier();
  for (int coop = 0; coop < 3; coop++) {
    zero_counters();
    uint64_t it0 = (uint64_t)coop * iters;
    double t0 = now_s();
    sad_receiver<<<n * nq, 256, 0, g_stream2>>>(*dc, w, nq, coop, it0, iters, g_baseDev, g_counters);
    sad_issuer<<<n * nq, 256, 0, g_stream>>>(*dc, w, nq, coop, it0, iters, g_counters);
    CUDA_OK(cudaGetLastError());
    wait_stream(g_stream, "signal-after-data issuer", 120);
    wait_stream(g_stream2, "signal-after-data receiver", 120);
    double dt = now_s() - t0;
    unsigned long long c[4];
    read_counters(c);
    CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0,
          "(d) signal after data, %s scope: %u iterations x %d peers x %u queues of 0..64 KiB: %llu bytes wrong when "
          "the signal was seen, %llu bad statuses, %llu signals ahead of the posts (%.1f us per put)",
          kScope[coop], iters, n, nq, c[0], c[1], c[2], dt * 1e6 / ((double)iters * n * nq));
    // Runs follow each other without a host barrier: acks and signals
    // carry on (global iteration numbers).
  }
  quiet_all(dc);
  barrier();
  check_signals_exact(dc, nq, base, 3ull * iters, "(d) signal after data");
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// -------------------------------------------------------------- (e) flood

#define FLOOD_PUTS 8192u
#define FLOOD_BLK 256u
#define FLOOD_BLOCKS 64u
#define FLOOD_THREADS 128u

// Every unit of the scope (thread, warp or block) posts its share of the
// puts to `peer` on queue 0, each from src block k to dst block k.
__global__ void flood_issuer(ccoDevComm dc, ccoWindow_t w, int coopInt, int peer, unsigned long long* counters) {
  ccoCoop_t coop = (ccoCoop_t)coopInt;
  uint32_t units = coop == ccoCoopThread ? FLOOD_BLOCKS * FLOOD_THREADS
                   : coop == ccoCoopWarp ? FLOOD_BLOCKS * (FLOOD_THREADS / 32)
                                         : FLOOD_BLOCKS;
  uint32_t unit = coop == ccoCoopThread ? blockIdx.x * blockDim.x + threadIdx.x
                  : coop == ccoCoopWarp ? blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32
                                        : blockIdx.x;
  uint32_t per = FLOOD_PUTS / units;
  for (uint32_t k = unit * per; k < (unit + 1) * per; k++) {
    uint64_t off = (uint64_t)k * FLOOD_BLK;
    ccoDevStatus_t st = ccoSdmaPut(&dc, peer, w, (uint64_t)FLOOD_PUTS * FLOOD_BLK + off, w, off, FLOOD_BLK, 0,
                                   ccoSdmaSignalRemote, coop);
    if (st != ccoDevSuccess) {
      if (ccoCoopRank(coop) == 0) atomicAdd(&counters[1], 1ull);
      return;
    }
  }
}

__global__ void flood_wait(ccoDevComm dc, int src, uint64_t expected, unsigned long long* counters,
                           unsigned long long* ns) {
  uint64_t t0 = cco_impl_clock_ns();
  if (ccoSdmaWaitSignal(&dc, src, 0, expected, 60ull * 1000000000ull, ccoCoopThread) != ccoDevSuccess)
    atomicAdd(&counters[1], 1ull);
  *ns = cco_impl_clock_ns() - t0;
}

static void test_flood(const ccoDevComm* dc, uint32_t nq, unsigned long long* dNs) {
  int n = g_lsaSize, me = g_lsaRank, next = (me + 1) % n, prev = (me + n - 1) % n;
  size_t area = (size_t)FLOOD_PUTS * FLOOD_BLK;
  ccoWindow_t w = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 2 * area, &w, &local));
  if (!w) return;
  uint64_t base[64 * 8];
  for (int coop = 0; coop < 3; coop++) {
    read_signals(dc, nq, base);
    uint64_t seed = key4(30, me, coop, 0);
    fill_kernel<<<64, 256, 0, g_stream>>>((uint8_t*)local, area, seed);
    CUDA_OK(cudaMemsetAsync((char*)local + area, 0, area, g_stream));
    wait_stream(g_stream, "flood fill", 30);
    barrier();
    zero_counters();
    flood_wait<<<1, 1, 0, g_stream2>>>(*dc, prev, base[(size_t)prev * nq] + FLOOD_PUTS, g_counters, dNs);
    flood_issuer<<<FLOOD_BLOCKS, FLOOD_THREADS, 0, g_stream>>>(*dc, w, coop, next, g_counters);
    CUDA_OK(cudaGetLastError());
    wait_stream(g_stream, "flood issuer", 120);
    wait_stream(g_stream2, "flood waiter", 120);
    count_kernel<<<64, 256, 0, g_stream>>>((const uint8_t*)local + area, area, key4(30, prev, coop, 0), g_counters);
    wait_stream(g_stream, "flood check", 30);
    unsigned long long c[4], ns = 0;
    read_counters(c);
    CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
    CHECK(c[0] == 0 && c[1] == 0,
          "(e) flood, %s scope: %u signalled %u-byte puts on one ring (depth %d) from %u issuers at once: %llu wrong "
          "bytes, %llu bad statuses (%.2f us per put)",
          kScope[coop], FLOOD_PUTS, FLOOD_BLK, CCO_SDMA_DEPTH,
          coop == 0 ? FLOOD_BLOCKS * FLOOD_THREADS : coop == 1 ? FLOOD_BLOCKS * FLOOD_THREADS / 32 : FLOOD_BLOCKS,
          c[0], c[1], ns * 1e-3 / FLOOD_PUTS);
    quiet_all(dc);
    barrier();
    uint64_t now[64 * 8];
    read_signals(dc, nq, now);
    CHECK(now[(size_t)prev * nq] - base[(size_t)prev * nq] == FLOOD_PUTS,
          "(e) flood, %s scope: signal from %d at +%llu after quiet, expected +%u", kScope[coop], prev,
          (unsigned long long)(now[(size_t)prev * nq] - base[(size_t)prev * nq]), FLOOD_PUTS);
    barrier();
  }
  OK(ccoWindowDeregister(g_comm, w));
}

// --------------------------------------------------------------- (f) gets

#define GET_BYTES (1u << 20)

// Block b gets from peer (me + 1 + b) % n in pieces of 0..64 KiB over every
// queue and scope, quiets, and checks.
__global__ void gets_kernel(ccoDevComm dc, ccoWindow_t w, uint32_t nq, unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, p = (me + 1 + (int)blockIdx.x) % n;
  uint64_t off = 0;
  unsigned long long bad = 0;
  for (uint32_t i = 0; off < GET_BYTES; i++) {
    uint64_t len = key4(5, me, p, i) % (64u << 10);
    if (len > GET_BYTES - off) len = GET_BYTES - off;
    bad += scoped(&dc, (int)(i % 3), get_call(p, w, (uint64_t)(p + 1) * GET_BYTES + off, off, len, i % nq)) !=
           ccoDevSuccess;
    off += len;
  }
  bad += scoped(&dc, (int)(blockIdx.x % 3), simple_call(kQuiet, p, 0)) != ccoDevSuccess;
  if (bad) {
    if (threadIdx.x == 0) atomicAdd(&counters[1], bad);
    return;
  }
  unsigned long long wrong = coop_count_bad((const uint8_t*)ccoGetLocalPtr(w, (uint64_t)(p + 1) * GET_BYTES),
                                            GET_BYTES, key4(4, p, 0, 0), threadIdx.x, blockDim.x);
  if (wrong) atomicAdd(&counters[0], wrong);
}

static void test_gets(const ccoDevComm* dc, uint32_t nq) {
  int n = g_lsaSize;
  ccoWindow_t w = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, (size_t)(n + 1) * GET_BYTES, &w, &local));
  if (!w) return;
  fill_kernel<<<64, 256, 0, g_stream>>>((uint8_t*)local, GET_BYTES, key4(4, g_lsaRank, 0, 0));
  CUDA_OK(cudaMemsetAsync((char*)local + GET_BYTES, 0, (size_t)n * GET_BYTES, g_stream));
  wait_stream(g_stream, "gets fill", 30);
  barrier();
  zero_counters();
  gets_kernel<<<n, 256, 0, g_stream>>>(*dc, w, nq, g_counters);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "gets kernel", 60);
  unsigned long long c[4];
  read_counters(c);
  CHECK(c[0] == 0 && c[1] == 0,
        "(f) gets: 1 MiB from each of %d peers in pieces of 0..64 KiB over %u queues and 3 scopes, then ccoSdmaQuiet: "
        "%llu wrong bytes, %llu bad statuses", n, nq, c[0], c[1]);
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// ------------------------------------------------------------- (g) commit

#define COMMIT_N 32
#define COMMIT_MAX 8192u

__host__ __device__ static inline uint64_t commit_src(uint32_t nq, int peer, uint32_t q, int k) {
  return (((uint64_t)peer * nq + q) * COMMIT_N + (uint64_t)k) * COMMIT_MAX;
}
__host__ __device__ static inline uint64_t commit_dst(int n, uint32_t nq, int sender, uint32_t q, int k) {
  return (uint64_t)n * nq * COMMIT_N * COMMIT_MAX + commit_src(nq, sender, q, k);
}
__host__ __device__ static inline uint64_t commit_size(int s, int r, uint32_t q, int k) {
  return key4(6, (uint64_t)s, (uint64_t)r * 8 + q, (uint64_t)k) % (COMMIT_MAX + 1);
}

// Block (peer, queue): COMMIT_N puts without signal, then one commit.
__global__ void commit_issuer(ccoDevComm dc, ccoWindow_t w, uint32_t nq, unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, p = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  unsigned long long bad = 0;
  for (int i = 0; i < COMMIT_N; i++) {
    uint64_t size = commit_size(me, p, q, i), src = commit_src(nq, p, q, i);
    coop_fill((uint8_t*)ccoGetLocalPtr(w, src), size, key4(7, me, (uint64_t)p * 8 + q, i), threadIdx.x, blockDim.x);
    bad += scoped(&dc, i % 3, put_call(p, w, commit_dst(n, nq, me, q, i), src, size, q, ccoSdmaSignalNone)) !=
           ccoDevSuccess;
  }
  bad += scoped(&dc, (int)(q % 3), simple_call(kCommit, p, q)) != ccoDevSuccess;
  if (bad && threadIdx.x == 0) atomicAdd(&counters[1], bad);
}

// Block (source, queue): waits for +1, then every block must be there.
__global__ void commit_receiver(ccoDevComm dc, ccoWindow_t w, uint32_t nq, const uint64_t* bases,
                                unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, s = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  if (scoped(&dc, ccoCoopBlock, simple_call(kWait, s, q, bases[blockIdx.x] + 1, kWaitNs)) != ccoDevSuccess) {
    if (threadIdx.x == 0) atomicAdd(&counters[1], 1ull);
    return;
  }
  unsigned long long bad = 0;
  for (int i = 0; i < COMMIT_N; i++)
    bad += coop_count_bad((const uint8_t*)ccoGetLocalPtr(w, commit_dst(n, nq, s, q, i)), commit_size(s, me, q, i),
                          key4(7, s, (uint64_t)me * 8 + q, i), threadIdx.x, blockDim.x);
  if (bad) atomicAdd(&counters[0], bad);
}

// Block (peer, queue): two bare commits; then block (source, queue) waits for +3.
__global__ void bare_commits(ccoDevComm dc, uint32_t nq, unsigned long long* counters) {
  int p = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  unsigned long long bad = scoped(&dc, ccoCoopWarp, simple_call(kCommit, p, q)) != ccoDevSuccess;
  bad += scoped(&dc, ccoCoopBlock, simple_call(kCommit, p, q)) != ccoDevSuccess;
  if (bad && threadIdx.x == 0) atomicAdd(&counters[1], bad);
}
__global__ void wait_plus(ccoDevComm dc, uint32_t nq, const uint64_t* bases, uint64_t delta,
                          unsigned long long* counters) {
  int s = (int)(blockIdx.x / nq);
  uint32_t q = blockIdx.x % nq;
  if (scoped(&dc, (int)(blockIdx.x % 3), simple_call(kWait, s, q, bases[blockIdx.x] + delta, kWaitNs)) !=
          ccoDevSuccess &&
      threadIdx.x == 0)
    atomicAdd(&counters[1], 1ull);
}

static void test_commit(const ccoDevComm* dc, uint32_t nq) {
  int n = g_lsaSize;
  size_t bytes = commit_dst(n, nq, n, 0, 0);
  ccoWindow_t w = NULL;
  void* local = NULL;
  uint64_t base[64 * 8];
  read_signals(dc, nq, base);
  OK(ccoWindowRegisterAlloc(g_comm, bytes, &w, &local));
  if (!w) return;
  CUDA_OK(cudaMemset(local, 0, bytes));
  CUDA_OK(cudaMemcpy(g_baseDev, base, (size_t)n * nq * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  barrier();
  zero_counters();
  commit_receiver<<<n * nq, 256, 0, g_stream2>>>(*dc, w, nq, g_baseDev, g_counters);
  commit_issuer<<<n * nq, 256, 0, g_stream>>>(*dc, w, nq, g_counters);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "commit issuer", 60);
  wait_stream(g_stream2, "commit receiver", 60);
  quiet_all(dc);
  unsigned long long c[4];
  read_counters(c);
  CHECK(c[0] == 0 && c[1] == 0,
        "(g) commit: %d puts without signal + ccoSdmaCommit per peer and queue: %llu bytes not there when the "
        "commit's signal was, %llu bad statuses", COMMIT_N, c[0], c[1]);
  barrier();
  check_signals_exact(dc, nq, base, 1, "(g) N puts + 1 commit");
  barrier();
  zero_counters();
  wait_plus<<<n * nq, 128, 0, g_stream2>>>(*dc, nq, g_baseDev, 3, g_counters);
  bare_commits<<<n * nq, 128, 0, g_stream>>>(*dc, nq, g_counters);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "bare commits", 60);
  wait_stream(g_stream2, "wait for the bare commits", 60);
  quiet_all(dc);
  read_counters(c);
  CHECK(c[1] == 0, "(g) two bare commits per peer and queue (warp, block scope): %llu bad statuses", c[1]);
  barrier();
  check_signals_exact(dc, nq, base, 3, "(g) two more commits");
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// -------------------------------------------------------------- (h) quiet

#define QUIET_N 16
#define QUIET_MAX (32u << 10)

// Areas: src[peer][k], dst[sender][k], back[peer][k].
__host__ __device__ static inline uint64_t qoff(int n, int which, int who, int k) {
  return (uint64_t)which * n * QUIET_N * QUIET_MAX + ((uint64_t)who * QUIET_N + (uint64_t)k) * QUIET_MAX;
}

// Block b: peer (me + 1 + b) % n. Unsignalled puts of random size and queue,
// ccoSdmaQuietQueue on the queues used, then gets of the same bytes back.
__global__ void quiet_kernel(ccoDevComm dc, ccoWindow_t w, uint32_t nq, unsigned long long* counters) {
  int n = dc.lsaSize, me = dc.lsaRank, p = (me + 1 + (int)blockIdx.x) % n;
  unsigned long long bad = 0;
  uint32_t used = 0;
  for (int i = 0; i < QUIET_N; i++) {
    uint64_t h = key4(8, me, p, i), size = h % (QUIET_MAX + 1);
    uint32_t q = (uint32_t)((h >> 32) % nq);
    used |= 1u << q;
    coop_fill((uint8_t*)ccoGetLocalPtr(w, qoff(n, 0, p, i)), size, h, threadIdx.x, blockDim.x);
    bad += scoped(&dc, i % 3, put_call(p, w, qoff(n, 1, me, i), qoff(n, 0, p, i), size, q, ccoSdmaSignalNone)) !=
           ccoDevSuccess;
  }
  for (uint32_t q = 0; q < nq; q++)
    if (used & (1u << q)) bad += scoped(&dc, (int)(q % 3), simple_call(kQuietQueue, p, q)) != ccoDevSuccess;
  // After the quiet the data is at the peer: read it back.
  for (int i = 0; i < QUIET_N; i++) {
    uint64_t h = key4(8, me, p, i), size = h % (QUIET_MAX + 1);
    bad += scoped(&dc, ccoCoopThread, get_call(p, w, qoff(n, 2, p, i), qoff(n, 1, me, i), size, (uint32_t)i % nq)) !=
           ccoDevSuccess;
  }
  bad += scoped(&dc, ccoCoopBlock, simple_call(kQuiet, p, 0)) != ccoDevSuccess;
  if (bad) {
    if (threadIdx.x == 0) atomicAdd(&counters[1], bad);
    return;
  }
  unsigned long long wrong = 0;
  for (int i = 0; i < QUIET_N; i++) {
    uint64_t h = key4(8, me, p, i), size = h % (QUIET_MAX + 1);
    wrong += coop_count_bad((const uint8_t*)ccoGetLocalPtr(w, qoff(n, 2, p, i)), size, h, threadIdx.x, blockDim.x);
  }
  if (wrong) atomicAdd(&counters[0], wrong);
}

// Block b: what sender b put here.
__global__ void quiet_check(ccoWindow_t w, unsigned long long* counters) {
  int n = w->lsaSize, me = w->lsaRank, s = (int)blockIdx.x;
  unsigned long long wrong = 0;
  for (int i = 0; i < QUIET_N; i++) {
    uint64_t h = key4(8, s, me, i), size = h % (QUIET_MAX + 1);
    wrong += coop_count_bad((const uint8_t*)ccoGetLocalPtr(w, qoff(n, 1, s, i)), size, h, threadIdx.x, blockDim.x);
  }
  if (wrong) atomicAdd(&counters[2], wrong);
}

static void test_quiet(const ccoDevComm* dc, uint32_t nq) {
  int n = g_lsaSize;
  size_t bytes = qoff(n, 3, 0, 0);
  ccoWindow_t w = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, bytes, &w, &local));
  if (!w) return;
  CUDA_OK(cudaMemset(local, 0, bytes));
  CUDA_OK(cudaDeviceSynchronize());
  barrier();
  zero_counters();
  quiet_kernel<<<n, 256, 0, g_stream>>>(*dc, w, nq, g_counters);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "quiet kernel", 60);
  barrier();
  quiet_check<<<n, 256, 0, g_stream>>>(w, g_counters);
  wait_stream(g_stream, "quiet check", 60);
  unsigned long long c[4];
  read_counters(c);
  CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0,
        "(h) quiet: %d unsignalled puts of 0..32 KiB per peer, ccoSdmaQuietQueue: %llu bytes wrong when read back "
        "with a get, %llu wrong at the receiver after a host barrier, %llu bad statuses", QUIET_N, c[0], c[2], c[1]);
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// -------------------------------------------------------------- (i) large

__global__ void large_kernel(ccoDevComm dc, ccoWindow_t w, int next, int prev, uint64_t bytes, uint32_t q,
                             uint64_t expected, unsigned long long* counters, unsigned long long* ns) {
  uint64_t t0 = cco_impl_clock_ns();
  unsigned long long bad = scoped(&dc, ccoCoopBlock, put_call(next, w, bytes, 0, bytes, q, ccoSdmaSignalRemote)) !=
                           ccoDevSuccess;
  bad += scoped(&dc, ccoCoopBlock, simple_call(kWait, prev, q, expected, 60ull * 1000000000ull)) != ccoDevSuccess;
  uint64_t t1 = cco_impl_clock_ns();
  bad += scoped(&dc, ccoCoopBlock, simple_call(kQuiet, next, 0)) != ccoDevSuccess;
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    if (bad) atomicAdd(&counters[1], bad);
  }
}

static void test_large(const ccoDevComm* dc, uint32_t nq, unsigned long long* dNs) {
  int n = g_lsaSize, me = g_lsaRank, next = (me + 1) % n, prev = (me + n - 1) % n;
  const size_t L = 256u << 20;
  uint32_t q = nq - 1;
  ccoWindow_t w = NULL;
  void* local = NULL;
  uint64_t base[64 * 8];
  read_signals(dc, nq, base);
  OK(ccoWindowRegisterAlloc(g_comm, 2 * L, &w, &local));
  if (!w) return;
  fill_kernel<<<264, 512, 0, g_stream>>>((uint8_t*)local, L, key4(9, me, 0, 0));
  CUDA_OK(cudaMemsetAsync((char*)local + L, 0, L, g_stream));
  wait_stream(g_stream, "large fill", 30);
  barrier();
  zero_counters();
  large_kernel<<<1, 256, 0, g_stream>>>(*dc, w, next, prev, L, q, base[(size_t)prev * nq + q] + 1, g_counters, dNs);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "large kernel", 60);
  count_kernel<<<264, 512, 0, g_stream>>>((const uint8_t*)local + L, L, key4(9, prev, 0, 0), g_counters);
  wait_stream(g_stream, "large check", 30);
  unsigned long long c[4], ns = 0;
  read_counters(c);
  CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
  CHECK(c[0] == 0 && c[1] == 0,
        "(i) 256 MiB put with a signal from every rank to the next at once: %llu wrong bytes, %llu bad statuses "
        "(put to signal seen %.2f ms, %.0f GB/s)", c[0], c[1], ns * 1e-6, (double)L / (ns * 1e-9) / 1e9);
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// ------------------------------------------------------------ (j) host API

__global__ void host_api_check(const uint8_t* p, size_t bytes, uint64_t seed, const uint64_t* sig, uint64_t want,
                               unsigned long long* counters) {
  // Runs after ccoStreamWaitSignal on the same stream: the word and the data are here.
  if (blockIdx.x == 0 && threadIdx.x == 0 && ccoSignalLoad(sig) < want) atomicAdd(&counters[1], 1ull);
  unsigned long long bad = coop_count_bad(p, bytes, seed, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  if (bad) atomicAdd(&counters[0], bad);
}

static void test_host_api(void) {
  int N = g_size, next = (g_rank + 1) % N, prev = (g_rank + N - 1) % N;
  const size_t blk = 4u << 20, dataOff = 4096, srcOff = dataOff + blk;
  const int rounds = 20;
  ccoWindow_t w = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, srcOff + blk, &w, &local));
  if (!w) return;
  CUDA_OK(cudaMemset(local, 0, srcOff + blk));
  CUDA_OK(cudaDeviceSynchronize());
  barrier();
  zero_counters();
  int badCalls = 0;
  for (int r = 0; r < rounds; r++) {
    // Odd rounds on the legacy default stream (NULL), even rounds on streams.
    cudaStream_t put = (r & 1) ? (cudaStream_t)0 : g_stream, wait = (r & 1) ? (cudaStream_t)0 : g_stream2;
    size_t size = r == 0 ? 0 : (size_t)(key4(11, r, 0, 0) % (blk + 1));
    fill_kernel<<<64, 256, 0, put>>>((uint8_t*)local + srcOff, size, key4(12, g_rank, r, 0));
    ccoResult_t pr = ccoSdmaPutAsync(g_comm, next, w, dataOff, w, srcOff, size, w, 0, (uint64_t)r + 1, put);
    ccoResult_t wr = ccoStreamWaitSignal(g_comm, w, 0, (uint64_t)r + 1, wait);
    if (pr != ccoSuccess || wr != ccoSuccess) {
      if (!badCalls)
        CHECK(0, "(j) round %d: ccoSdmaPutAsync %s, ccoStreamWaitSignal %s (%s)", r, ccoGetErrorString(pr),
              ccoGetErrorString(wr), ccoGetLastError(g_comm));
      badCalls++;
      break;
    }
    host_api_check<<<64, 256, 0, wait>>>((const uint8_t*)local + dataOff, size, key4(12, prev, r, 0),
                                         (const uint64_t*)local, (uint64_t)r + 1, g_counters);
    CUDA_OK(cudaGetLastError());
    wait_stream(put, "host API put", 60);
    wait_stream(wait, "host API wait + check", 60);
    barrier(); // prev overwrites the block only after this rank checked it
  }
  unsigned long long c[4];
  read_counters(c);
  CHECK(badCalls == 0 && c[0] == 0 && c[1] == 0,
        "(j) host API: %d rounds of ccoSdmaPutAsync (0..4 MiB + signal) to rank %d and ccoStreamWaitSignal on "
        "another stream then a check kernel on it (odd rounds on stream NULL): %llu wrong bytes, %llu early checks",
        rounds, next, c[0], c[1]);
  ccoResult_t b1 = ccoSdmaPutAsync(g_comm, -1, w, dataOff, w, srcOff, 8, NULL, 0, 0, g_stream);
  ccoResult_t b2 = ccoSdmaPutAsync(g_comm, N, w, dataOff, w, srcOff, 8, NULL, 0, 0, g_stream);
  ccoResult_t b3 = ccoSdmaPutAsync(g_comm, next, w, dataOff, w, srcOff, blk + 1, NULL, 0, 0, g_stream);
  CHECK(b1 != ccoSuccess && b2 != ccoSuccess && b3 != ccoSuccess,
        "(j) ccoSdmaPutAsync refuses rank -1 (%s), rank %d (%s), a range past the window (%s)", ccoGetErrorString(b1),
        N, ccoGetErrorString(b2), ccoGetErrorString(b3));
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// ----------------------------------------------------- (k) engine error

// ccoSdmaPut refuses a range outside its windows, so forge the descriptor a
// faulty kernel could still post: the engine must catch it.
__global__ void bad_put_kernel(ccoDevComm dc, ccoWindow_t w, uint64_t badOff, unsigned int* status) {
  uint64_t dst = w->winBase + (uint64_t)dc.lsaRank * ((uint64_t)w->stride4G << 32) + badOff;
  uint64_t src = (uint64_t)(uintptr_t)ccoGetLocalPtr(w, 0);
  *status = cco_impl_sdma_post(&dc, dc.lsaRank, 0, ccoSdmaOpPut, CCO_SDMA_FLAG_REMOTE_SIGNAL, dst, src, 4096);
}
__global__ void signal_wait_kernel(ccoDevComm dc, int src, uint64_t expected, uint64_t timeoutNs, unsigned int* status,
                                   unsigned long long* ns) {
  uint64_t t0 = cco_impl_clock_ns();
  *status = ccoSdmaWaitSignal(&dc, src, 0, expected, timeoutNs, ccoCoopThread);
  *ns = cco_impl_clock_ns() - t0;
}

// Last: fails the communicator. Returns 0 when a kernel is still stuck.
static int test_engine_error(const ccoDevComm* dc, uint32_t nq, unsigned int* dWord, unsigned long long* dNs) {
  ccoWindow_t w = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 1u << 20, &w, &local));
  if (!w) return 1;
  void* flat = NULL;
  size_t slotSize = 0;
  OK(ccoCommFlatVa(g_comm, &flat, &slotSize));
  uint64_t base[64 * 8];
  read_signals(dc, nq, base);
  barrier(); // the last collective
  if (g_lsaRank != 0) {
    usleep(500000);
    printf("gpu_sdma rank %d: (k) engine error: LSA rank 0 fails its communicator; this rank only watches\n", g_rank);
    return 1;
  }
  CUDA_OK(cudaMemset(dWord, 0xff, 2 * sizeof(unsigned int)));
  CUDA_OK(cudaDeviceSynchronize());
  signal_wait_kernel<<<1, 1, 0, g_stream2>>>(*dc, 0, base[0] + 1, kWaitNs, dWord + 1, dNs);
  double t0 = now_s();
  bad_put_kernel<<<1, 1, 0, g_stream>>>(*dc, w, (uint64_t)(g_lsaSize + 1) * slotSize + 4096, dWord);
  CUDA_OK(cudaGetLastError());
  while (cudaStreamQuery(g_stream2) == cudaErrorNotReady && now_s() - t0 < 25.0) usleep(100);
  double dt = now_s() - t0;
  int done = cudaStreamQuery(g_stream2) != cudaErrorNotReady && cudaStreamQuery(g_stream) != cudaErrorNotReady;
  if (!done) {
    CHECK(0, "(k) engine error: the waiter still waits %.1f s after the bad put; aborting", dt);
    ccoCommAbort(g_comm);
    return 0;
  }
  unsigned int st[2];
  CUDA_OK(cudaMemcpy(st, dWord, sizeof(st), cudaMemcpyDeviceToHost));
  ccoResult_t asyncErr = ccoSuccess;
  OK(ccoCommGetAsyncError(g_comm, &asyncErr));
  CHECK(st[0] == ccoDevSuccess && st[1] == ccoDevAborted && dt < 2.0 && asyncErr != ccoSuccess,
        "(k) engine error: a put outside the flat VA posted with %s; the waiter on its signal returned %s after "
        "%.3f s; async error %s (%s)", status_name(st[0]), status_name(st[1]), dt, ccoGetErrorString(asyncErr),
        ccoGetLastError(g_comm));
  ccoResult_t after = ccoSdmaPutAsync(g_comm, g_rank, w, 0, w, 4096, 8, NULL, 0, 0, g_stream);
  CHECK(after != ccoSuccess, "(k) engine error: a later ccoSdmaPutAsync returned %s", ccoGetErrorString(after));
  return 1;
}

// ------------------------------------------------------------ no SDMA

__global__ void unsupported_kernel(ccoDevComm dc, ccoWindow_t w, unsigned int* wrong) {
  int p = (dc.lsaRank + 1) % dc.lsaSize;
  unsigned bad = 0;
  for (int coop = 0; coop < 3; coop++) {
    bad += scoped(&dc, coop, put_call(p, w, 0, 64, 8, 0, 1)) != ccoDevUnsupported;
    bad += scoped(&dc, coop, get_call(p, w, 0, 64, 8, 0)) != ccoDevUnsupported;
    bad += scoped(&dc, coop, simple_call(kCommit, p, 0)) != ccoDevUnsupported;
    bad += scoped(&dc, coop, simple_call(kWait, p, 0, 1, 0)) != ccoDevUnsupported;
    bad += scoped(&dc, coop, simple_call(kQuietQueue, p, 0)) != ccoDevUnsupported;
    bad += scoped(&dc, coop, simple_call(kQuiet, p, 0)) != ccoDevUnsupported;
  }
  if (threadIdx.x == 0) *wrong = bad;
}

static void run_no_sdma(const ccoDevComm* dc, unsigned int* dWord) {
  CHECK(dc->sdma == 0, "CCO_ENABLE_SDMA=0: dc.sdma = %#llx, expected 0", (unsigned long long)dc->sdma);
  if (dc->sdma) return;
  ccoWindow_t w = NULL;
  void* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 4096, &w, &local));
  if (!w) return;
  unsupported_kernel<<<1, 128, 0, g_stream>>>(*dc, w, dWord);
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, "unsupported kernel", 30);
  unsigned wrong = 1;
  CUDA_OK(cudaMemcpy(&wrong, dWord, sizeof(wrong), cudaMemcpyDeviceToHost));
  CHECK(wrong == 0, "CCO_ENABLE_SDMA=0: %u of 18 device calls (3 scopes) did not return ccoDevUnsupported", wrong);
  ccoResult_t pr = ccoSdmaPutAsync(g_comm, (g_rank + 1) % g_size, w, 0, w, 64, 8, w, 8, 1, g_stream);
  CHECK(pr == ccoUnsupported, "CCO_ENABLE_SDMA=0: ccoSdmaPutAsync returned %s, expected ccoUnsupported",
        ccoGetErrorString(pr));
  barrier();
  OK(ccoWindowDeregister(g_comm, w));
}

// -------------------------------------------------------------------- main

int main(int argc, char** argv) {
  int noSdma = argc > 1 && !strcmp(argv[1], "--no-sdma");
  if (argc > 1 && !noSdma) {
    fprintf(stderr, "usage: ccorun -n N %s [--no-sdma]\n", argv[0]);
    return 2;
  }
  if (noSdma) setenv("CCO_ENABLE_SDMA", "0", 1);
  setenv("CCO_PLATFORM", "cuda", 1);
  // Kernels here wait for work of kernels launched after them. With lazy
  // module loading (CUDA's default) the first launch of a kernel loads it,
  // and loading waits for the running kernels: the waiter would starve the
  // launch it waits for. Load every kernel at start instead.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0)); // make the primary context current
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "gpu_sdma: create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  ccoCommLsaRank(g_comm, &g_lsaRank);
  ccoCommLsaSize(g_comm, &g_lsaSize);
  CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&g_stream2, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&g_counters, 4 * sizeof(unsigned long long)));
  CUDA_OK(cudaMalloc(&g_sigDev, 64 * 8 * sizeof(uint64_t)));
  CUDA_OK(cudaMalloc(&g_baseDev, 64 * 8 * sizeof(uint64_t)));
  unsigned int* dWord = NULL;
  unsigned long long* dNs = NULL;
  CUDA_OK(cudaMalloc(&dWord, 4 * sizeof(unsigned int)));
  CUDA_OK(cudaMalloc(&dNs, sizeof(unsigned long long)));
  ccoPlatform_t platform;
  OK(ccoCommPlatform(g_comm, &platform));
  CHECK(platform == ccoPlatformCuda && g_size == g_lsaSize && g_lsaSize <= 64,
        "platform %d (cuda is %d), %d ranks, %d in the LSA team (one host expected)", (int)platform,
        (int)ccoPlatformCuda, g_size, g_lsaSize);

  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoResult_t r = ccoDevCommCreate(g_comm, &reqs, &dc);
  CHECK(r == ccoSuccess, "ccoDevCommCreate: %s (%s)", ccoGetErrorString(r), ccoGetLastError(g_comm));
  if (r != ccoSuccess) {
    ccoCommDestroy(g_comm);
    return finish() | 1;
  }
  if (noSdma) {
    run_no_sdma(&dc, dWord);
  } else {
    const uint32_t nq = dc.sdmaQueueCount;
    CHECK(dc.sdma != 0 && nq == 2, "default device communicator: sdma %#llx, sdmaQueueCount %u (0 means 2)",
          (unsigned long long)dc.sdma, nq);
    if (dc.sdma) {
      // The posts' fence: system scope by default, GPU scope with "gpu", and
      // with "auto" exactly when every LSA peer is this GPU; every test below
      // runs with it.
      ccoSdmaDev sd;
      CUDA_OK(cudaMemcpy(&sd, (const void*)(uintptr_t)dc.sdma, sizeof(sd), cudaMemcpyDeviceToHost));
      const char* forced = getenv("CCO_SDMA_POST_FENCE");
      uint32_t want = !forced || !strcmp(forced, "sys") ? 0u : !strcmp(forced, "gpu") ? 1u : dc.lsaScopeGpu;
      CHECK(sd.postFenceGpu == want, "post fence at %s scope, expected %s (CCO_SDMA_POST_FENCE=%s, lsaScopeGpu %u)",
            sd.postFenceGpu ? "GPU" : "system", want ? "GPU" : "system", forced ? forced : "(unset)", dc.lsaScopeGpu);
      if (g_rank == 0) printf("gpu_sdma: posts fenced at %s scope\n", sd.postFenceGpu ? "GPU" : "system");
    }
    if (dc.sdma && nq >= 1 && nq <= 8) {
      double t = now_s();
      test_invalid(&dc, nq, dWord);
      test_every_queue();
      put_each_and_check(&dc, nq, 0, 8, "(c) zero-byte puts");
      test_signal_after_data(&dc, nq);
      test_flood(&dc, nq, dNs);
      test_gets(&dc, nq);
      test_commit(&dc, nq);
      test_quiet(&dc, nq);
      test_large(&dc, nq, dNs);
      test_host_api();
      ccoResult_t asyncErr = ccoInternalError;
      OK(ccoCommGetAsyncError(g_comm, &asyncErr));
      CHECK(asyncErr == ccoSuccess, "async error after every test but (k): %s", ccoGetErrorString(asyncErr));
      printf("gpu_sdma rank %d: (a)-(j) took %.1f s\n", g_rank, now_s() - t);
      if (g_lsaSize >= 1 && !test_engine_error(&dc, nq, dWord, dNs)) _exit(finish() | 1); // a kernel still runs
    }
  }
  // The communicator may be failed now: release everything locally.
  OK(ccoCommDestroy(g_comm));
  cudaFree(dWord);
  cudaFree(dNs);
  cudaFree(g_counters);
  cudaFree(g_sigDev);
  cudaFree(g_baseDev);
  cudaStreamDestroy(g_stream);
  cudaStreamDestroy(g_stream2);
  return finish();
}
