// The collectives' host calls on the GPU, one rank of a job started by
// ccorun (several ranks on one GPU need MPS; see run_gpu_tests.sh):
//
//   ccorun -n 4 test_coll_gpu [--quick] [--replays R]
//
// (a) The matrix: every host call x type x operator x size (1 element to
//     16 Mi elements, 64 MiB all-reduces) x in place / out of place, on a
//     non-blocking stream; inputs written and outputs checked by kernels
//     against the same reference formulas, with guard bytes around every
//     output. Under CCO_ALGO, a collective without the forced algorithm must
//     refuse as ccoCollAlgorithm says.
// (b) CUDA graphs: each collective captured between a kernel that writes
//     new inputs (from a replay counter in device memory) and a kernel that
//     checks the output, the graph replayed R times (1,000 by default):
//     every replay's result is checked on the device.
// (c) Argument errors on every rank alike, then a good call.
// (d) Ranks that disagree (another count on one rank) on a communicator of
//     their own: every rank's next call and ccoCommGetAsyncError report it,
//     and no stream hangs.
// (e) The stream calls: a ring of ccoPutSignalOnStream with an added
//     signal, ccoStreamWaitSignal, a reset, ccoQuietOnStream and
//     ccoBarrierOnStream, captured in a graph and replayed R times, every
//     replay's data new and checked.
//
// Every check prints one line; the last is "test_coll_gpu rank R: N passed,
// N failed". A stream stuck past its limit is a failure: the communicator
// is aborted (device waits return) and the rank exits.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_TEST_NAME "test_coll_gpu"
#include "gpu_check.cuh"
#include "cco/cco.h"

static int g_size;
static cudaStream_t g_stream;
static int g_quick;
static int g_replays = 1000;

enum { AR, AG, RS, A2A, BC, KINDS };
static const char* const k_kind_names[KINDS] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast"};
static const char* const k_dtype_names[4] = {"fp32", "bf16", "fp16", "int32"};
static const char* const k_op_names[3] = {"sum", "max", "min"};

// ------------------------------------------------------------ elements
// The same formulas as tests/mp/coll/mp_coll_api.c: inputs exact in every
// type, so only the operator decides the result, bit for bit.

__host__ __device__ static inline uint32_t f32_bits(float f) {
  union {
    float f;
    uint32_t u;
  } b;
  b.f = f;
  return b.u;
}

__host__ __device__ static inline uint16_t to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Round to nearest even for normal fp16 values (all the values used here).
__host__ __device__ static inline uint16_t to_fp16(float f) {
  uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a == 0) return (uint16_t)sign;
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
  return (uint16_t)(sign | (r >> 13));
}

__host__ __device__ static inline size_t esize_of(int dtype) { return dtype == 1 || dtype == 2 ? 2 : 4; }

__host__ __device__ static inline float in_float(int rank, uint64_t i, uint32_t seed) {
  return (float)((int)((i * 7 + (uint64_t)rank * 13 + (uint64_t)seed * 5) % 64) - 32) * 0.25f;
}
__host__ __device__ static inline int32_t in_int(int rank, uint64_t i, uint32_t seed) {
  return (int32_t)((i * 7919 + (uint64_t)rank * 104729 + (uint64_t)seed * 31) % 2001) - 1000;
}

__host__ __device__ static inline uint32_t encode(int dtype, float f, int32_t n) {
  return dtype == 1 ? to_bf16(f) : dtype == 2 ? to_fp16(f) : dtype == 3 ? (uint32_t)n : f32_bits(f);
}

__host__ __device__ static inline uint32_t input_bits(int dtype, int rank, uint64_t i, uint32_t seed) {
  return encode(dtype, in_float(rank, i, seed), in_int(rank, i, seed));
}

__host__ __device__ static inline uint32_t reduced_bits(int dtype, int op, int n, uint64_t i, uint32_t seed) {
  float f = in_float(0, i, seed);
  int32_t k = in_int(0, i, seed);
  for (int r = 1; r < n; r++) {
    float g = in_float(r, i, seed);
    int32_t m = in_int(r, i, seed);
    f = op == 0 ? f + g : op == 1 ? (g > f ? g : f) : (g < f ? g : f);
    k = op == 0 ? k + m : op == 1 ? (m > k ? m : k) : (m < k ? m : k);
  }
  return encode(dtype, f, k);
}

__device__ static inline void put(void* buf, int dtype, uint64_t i, uint32_t v) {
  if (esize_of(dtype) == 2) ((uint16_t*)buf)[i] = (uint16_t)v;
  else ((uint32_t*)buf)[i] = v;
}

__device__ static inline uint32_t get(const void* buf, int dtype, uint64_t i) {
  return esize_of(dtype) == 2 ? ((const uint16_t*)buf)[i] : ((const uint32_t*)buf)[i];
}

// ------------------------------------------------------------ cases

struct coll_case {
  int kind, dtype, op, root, inPlace;
  size_t count;
};

static size_t in_elems(const coll_case& c) { return c.kind == RS || c.kind == A2A ? c.count * g_size : c.count; }
static size_t out_elems(const coll_case& c) { return c.kind == AG || c.kind == A2A ? c.count * g_size : c.count; }

// The seed comes from device memory, so a graph replays with new inputs.
__global__ void fill_inputs(void* in, int dtype, uint64_t n, int rank, int write, const uint32_t* seedPtr) {
  uint32_t seed = *seedPtr;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    put(in, dtype, i, write ? input_bits(dtype, rank, i, seed) : 0x5a5au);
}

__global__ void fill_bytes(unsigned char* p, uint64_t n, unsigned char v) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = v;
}

#define GUARD_BYTES 256
#define SENTINEL 0xA5

// Counts wrong output elements and touched guard bytes into bad[0], bad[1];
// bad[2] counts the checks made (one per replay).
__global__ void check_outputs(const void* out, const unsigned char* lo, const unsigned char* hi, coll_case c,
                              int nRanks, int rank, const uint32_t* seedPtr, unsigned long long* bad) {
  uint32_t seed = *seedPtr;
  uint64_t total = c.kind == AG || c.kind == A2A ? c.count * (uint64_t)nRanks : c.count;
  unsigned long long wrong = 0, guards = 0;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x, tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  for (uint64_t j = tid; j < total; j += stride) {
    uint64_t n = c.count, p = n ? j / n : 0, i = n ? j % n : 0;
    uint32_t want = c.kind == AR    ? reduced_bits(c.dtype, c.op, nRanks, j, seed)
                    : c.kind == AG  ? input_bits(c.dtype, (int)p, i, seed)
                    : c.kind == RS  ? reduced_bits(c.dtype, c.op, nRanks, (uint64_t)rank * n + j, seed)
                    : c.kind == A2A ? input_bits(c.dtype, (int)p, (uint64_t)rank * n + i, seed)
                                    : input_bits(c.dtype, c.root, j, seed);
    wrong += get(out, c.dtype, j) != want;
  }
  for (uint64_t k = tid; k < GUARD_BYTES; k += stride) guards += (lo[k] != SENTINEL) + (hi[k] != SENTINEL);
  if (wrong) atomicAdd(&bad[0], wrong);
  if (guards) atomicAdd(&bad[1], guards);
  if (tid == 0) atomicAdd(&bad[2], 1ull);
}

__global__ void next_seed(uint32_t* seedPtr) { *seedPtr += 1; }

struct bufs {
  ccoWindow_t sendWin, recvWin;
  char* send;
  char* recv;
  size_t bytes;
};

// Where a case's input and output are in the windows (as the host test).
struct layout {
  char* in;
  char* out;
  unsigned char* lo;
  unsigned char* hi;
  size_t regionBytes; /* from lo: what is reset to the sentinel */
};

static layout place(const bufs& b, const coll_case& c) {
  size_t es = esize_of(c.dtype), inBytes = in_elems(c) * es, outBytes = out_elems(c) * es;
  layout l;
  l.lo = (unsigned char*)b.recv;
  l.out = b.recv + GUARD_BYTES;
  l.in = b.send + 192;
  l.regionBytes = GUARD_BYTES + outBytes + GUARD_BYTES;
  l.hi = (unsigned char*)l.out + outBytes;
  if (c.inPlace) {
    if (c.kind == AG) {
      l.in = l.out + (size_t)g_rank * c.count * es;
    } else if (c.kind == RS) {
      l.in = l.out;
      l.out = l.in + (size_t)g_rank * c.count * es;
      l.regionBytes = GUARD_BYTES + inBytes + GUARD_BYTES;
      l.hi = (unsigned char*)l.in + inBytes;
    } else {
      l.in = l.out;
    }
  }
  return l;
}

static ccoResult_t call(ccoComm* comm, const coll_case& c, const void* send, void* recv, cudaStream_t s) {
  switch (c.kind) {
    case AR: return ccoAllReduce(comm, send, recv, c.count, (ccoDataType_t)c.dtype, (ccoRedOp_t)c.op, s);
    case AG: return ccoAllGather(comm, send, recv, c.count, (ccoDataType_t)c.dtype, s);
    case RS: return ccoReduceScatter(comm, send, recv, c.count, (ccoDataType_t)c.dtype, (ccoRedOp_t)c.op, s);
    case A2A: return ccoAlltoAll(comm, send, recv, c.count, (ccoDataType_t)c.dtype, s);
    default: return ccoBroadcast(comm, send, recv, c.count, (ccoDataType_t)c.dtype, c.root, s);
  }
}

static void describe(const coll_case& c, char* out, size_t size) {
  bool red = c.kind == AR || c.kind == RS;
  snprintf(out, size, "%s %s%s%s count %zu%s root %d", k_kind_names[c.kind], k_dtype_names[c.dtype], red ? " " : "",
           red ? k_op_names[c.op] : "", c.count, c.inPlace ? " in place" : "", c.root);
}

static const int kGrid = 264, kBlock = 256;

// Enqueues fill, collective, check (and the seed's step when `step`).
static ccoResult_t enqueue_case(ccoComm* comm, const bufs& b, const coll_case& c, const uint32_t* seed,
                                unsigned long long* bad, cudaStream_t s, bool step) {
  layout l = place(b, c);
  fill_bytes<<<kGrid, kBlock, 0, s>>>(l.lo, l.regionBytes, SENTINEL);
  int writes = !(c.kind == BC && g_rank != c.root);
  fill_inputs<<<kGrid, kBlock, 0, s>>>(l.in, c.dtype, in_elems(c), g_rank, writes, seed);
  ccoResult_t r = call(comm, c, l.in, l.out, s);
  if (r != ccoSuccess) return r;
  check_outputs<<<kGrid, kBlock, 0, s>>>(l.out, l.lo, l.hi, c, g_size, g_rank, seed, bad);
  if (step) next_seed<<<1, 1, 0, s>>>((uint32_t*)seed);
  return ccoSuccess;
}

static uint32_t* g_seed;
static unsigned long long* g_bad; /* managed: [3] */

static int make_bufs(ccoComm* comm, size_t bytes, bufs* b) {
  memset(b, 0, sizeof(*b));
  b->bytes = bytes;
  void* s = NULL;
  void* r = NULL;
  ccoResult_t e1 = ccoWindowRegisterAlloc(comm, bytes, &b->sendWin, &s);
  ccoResult_t e2 = e1 == ccoSuccess ? ccoWindowRegisterAlloc(comm, bytes, &b->recvWin, &r) : e1;
  if (e2 != ccoSuccess) {
    CHECK(0, "windows of %zu bytes: %s", bytes, ccoGetLastError(comm));
    return 0;
  }
  b->send = (char*)s;
  b->recv = (char*)r;
  return 1;
}

static void free_bufs(ccoComm* comm, bufs* b) {
  if (b->sendWin) OK(ccoWindowDeregister(comm, b->sendWin));
  if (b->recvWin) OK(ccoWindowDeregister(comm, b->recvWin));
  memset(b, 0, sizeof(*b));
}

static int allowed(const coll_case& c, ccoResult_t* refusal) {
  ccoAlgo_t a;
  *refusal = ccoCollAlgorithm(g_comm, k_kind_names[c.kind], c.count * esize_of(c.dtype), &a);
  return *refusal == ccoSuccess;
}

// ------------------------------------------------------------ (a) matrix

static void test_matrix(const bufs& b) {
  static const size_t counts[] = {1, 7, 1000, 4099, 65537, 1 << 20};
  int calls = 0, wrongCases = 0;
  double t0 = now_s();
  for (size_t s = 0; s < sizeof(counts) / sizeof(counts[0]); s++) {
    size_t count = counts[s];
    bool big = count > 10000;
    if (g_quick && count > 65537) continue;
    for (int kind = 0; kind < KINDS; kind++)
      for (int dtype = 0; dtype < 4; dtype++)
        for (int op = 0; op < 3; op++) {
          if (op && kind != AR && kind != RS) continue;
          if (big && (kind == AR || kind == RS) && op != dtype % 3) continue;
          for (int inPlace = 0; inPlace < 2; inPlace++) {
            if (inPlace && kind == A2A) continue;
            if (big && inPlace != (dtype & 1)) continue;
            coll_case c = {kind, dtype, op, kind == BC ? calls % g_size : 0, inPlace, count};
            char what[160];
            describe(c, what, sizeof(what));
            ccoResult_t refusal;
            int ok = allowed(c, &refusal);
            g_bad[0] = g_bad[1] = g_bad[2] = 0;
            ccoResult_t r = enqueue_case(g_comm, b, c, g_seed, g_bad, g_stream, true);
            if (!ok) {
              CHECK(r == refusal, "%s refused as ccoCollAlgorithm says (%s)", what, ccoGetLastError(g_comm));
              calls++;
              continue;
            }
            if (r != ccoSuccess) {
              CHECK(0, "%s: %s (%s)", what, ccoGetErrorString(r), ccoGetLastError(g_comm));
              continue;
            }
            wait_stream(g_stream, what, 120);
            if (g_bad[0] || g_bad[1] || g_bad[2] != 1) {
              wrongCases++;
              CHECK(0, "%s: %llu elements wrong, %llu guard bytes written, %llu checks", what, g_bad[0], g_bad[1],
                    g_bad[2]);
            }
            calls++;
          }
        }
  }
  // 64 MiB all-reduces, in place and not.
  if (!g_quick && b.bytes >= (64u << 20) + 4096) {
    for (int inPlace = 0; inPlace < 2; inPlace++) {
      coll_case c = {AR, 0, 0, 0, inPlace, (64u << 20) / 4};
      ccoResult_t refusal;
      int ok = allowed(c, &refusal);
      g_bad[0] = g_bad[1] = g_bad[2] = 0;
      ccoResult_t r = enqueue_case(g_comm, b, c, g_seed, g_bad, g_stream, true);
      if (ok && r == ccoSuccess) wait_stream(g_stream, "64 MiB all-reduce", 120);
      CHECK(ok ? r == ccoSuccess && !g_bad[0] && !g_bad[1] : r == refusal,
            "64 MiB all-reduce%s: %s, %llu wrong", inPlace ? " in place" : "", ccoGetLastError(g_comm), g_bad[0]);
      calls++;
    }
  }
  ccoResult_t async = ccoInternalError;
  OK(ccoCommGetAsyncError(g_comm, &async));
  CHECK(wrongCases == 0 && async == ccoSuccess, "matrix: %d calls checked on the device in %.1f s, async error %d",
        calls, now_s() - t0, (int)async);
}

// ------------------------------------------------------------ (b) graphs

static void test_graphs(const bufs& b) {
  for (int kind = 0; kind < KINDS; kind++) {
    coll_case c = {kind, kind % 4, kind == RS ? 1 : 0, kind == BC ? g_size - 1 : 0, kind == AR, kind == AR ? 4099u : 1000u};
    char what[160];
    describe(c, what, sizeof(what));
    ccoResult_t refusal;
    if (!allowed(c, &refusal)) continue;
    g_bad[0] = g_bad[1] = g_bad[2] = 0;
    uint32_t start = 0;
    CUDA_OK(cudaMemcpy(&start, g_seed, sizeof(start), cudaMemcpyDeviceToHost));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    // Thread-local capture: cco's own threads (liveness, SDMA engine) keep
    // working while this thread captures.
    CUDA_OK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    ccoResult_t r = enqueue_case(g_comm, b, c, g_seed, g_bad, g_stream, true);
    CUDA_OK(cudaStreamEndCapture(g_stream, &graph));
    CHECK(r == ccoSuccess, "%s captured in a graph: %s", what, r == ccoSuccess ? "ok" : ccoGetLastError(g_comm));
    if (r != ccoSuccess || !graph) continue;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    double t0 = now_s();
    for (int k = 0; k < g_replays; k++) CUDA_OK(cudaGraphLaunch(exec, g_stream));
    wait_stream(g_stream, what, 300);
    double us = (now_s() - t0) * 1e6 / g_replays;
    uint32_t end = 0;
    CUDA_OK(cudaMemcpy(&end, g_seed, sizeof(end), cudaMemcpyDeviceToHost));
    CHECK(g_bad[0] == 0 && g_bad[1] == 0 && g_bad[2] == (unsigned long long)g_replays &&
              end == start + (uint32_t)g_replays,
          "%s: graph replayed %d times with new inputs each time, every result checked: %llu wrong elements, "
          "%llu guard bytes, %llu checks, %.1f us per replay",
          what, g_replays, g_bad[0], g_bad[1], g_bad[2], us);
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
  }
}

// ------------------------------------------------------------ stream calls
// A ring of ccoPutSignalOnStream (signal added), ccoStreamWaitSignal,
// a reset of the signal and ccoBarrierOnStream, captured once and replayed:
// every replay's data is new (a kernel writes it from the replay counter)
// and checked by a kernel.

__global__ void fill_words(uint64_t* p, size_t n, int rank, const uint32_t* seedPtr) {
  uint32_t seed = *seedPtr;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = ((uint64_t)rank << 48) ^ ((uint64_t)seed << 24) ^ i;
}

__global__ void check_words(const uint64_t* p, size_t n, int rank, const uint32_t* seedPtr, unsigned long long* bad) {
  uint32_t seed = *seedPtr;
  unsigned long long wrong = 0;
  size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (size_t i = tid; i < n; i += (size_t)gridDim.x * blockDim.x)
    wrong += p[i] != (((uint64_t)rank << 48) ^ ((uint64_t)seed << 24) ^ i);
  if (wrong) atomicAdd(&bad[0], wrong);
  if (tid == 0) atomicAdd(&bad[2], 1ull);
}

static void test_stream_calls(void) {
  const size_t words = 1 << 16, bytes = words * 8;
  ccoWindow_t win = NULL;
  void* local = NULL;
  if (ccoWindowRegisterAlloc(g_comm, 4096 + 2 * bytes, &win, &local) != ccoSuccess) {
    CHECK(0, "stream calls: window: %s", ccoGetLastError(g_comm));
    return;
  }
  CUDA_OK(cudaMemset(local, 0, 4096));
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  uint64_t* src = (uint64_t*)((char*)local + 4096 + bytes);
  const uint64_t* dst = (const uint64_t*)((char*)local + 4096);
  g_bad[0] = g_bad[1] = g_bad[2] = 0;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  OK(ccoBarrierOnStream(g_comm, g_stream)); // outside the capture: the first use may set state up
  wait_stream(g_stream, "first ccoBarrierOnStream", 60);
  CUDA_OK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
  fill_words<<<kGrid, kBlock, 0, g_stream>>>(src, words, g_rank, g_seed);
  ccoResult_t r = ccoPutSignalOnStream(g_comm, next, win, 4096, win, 4096 + bytes, bytes, win, 0, 1,
                                       ccoStreamSignalAdd, g_stream);
  if (r == ccoSuccess) r = ccoStreamWaitSignal(g_comm, win, 0, 1, g_stream);
  if (r == ccoSuccess) check_words<<<kGrid, kBlock, 0, g_stream>>>(dst, words, prev, g_seed, g_bad);
  if (r == ccoSuccess) r = ccoSignalOnStream(g_comm, g_rank, win, 0, 0, ccoStreamSignalSet, g_stream);
  if (r == ccoSuccess) r = ccoQuietOnStream(g_comm, g_stream);
  if (r == ccoSuccess) r = ccoBarrierOnStream(g_comm, g_stream);
  next_seed<<<1, 1, 0, g_stream>>>(g_seed);
  CUDA_OK(cudaStreamEndCapture(g_stream, &graph));
  CHECK(r == ccoSuccess, "stream calls captured in a graph: %s", r == ccoSuccess ? "ok" : ccoGetLastError(g_comm));
  if (r == ccoSuccess && graph) {
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    double t0 = now_s();
    for (int k = 0; k < g_replays; k++) CUDA_OK(cudaGraphLaunch(exec, g_stream));
    wait_stream(g_stream, "stream calls in a graph", 300);
    CHECK(g_bad[0] == 0 && g_bad[2] == (unsigned long long)g_replays,
          "ring of put+signal, wait, reset, quiet, barrier: graph replayed %d times, %llu wrong words, %llu checks, "
          "%.1f us per replay",
          g_replays, g_bad[0], g_bad[2], (now_s() - t0) * 1e6 / g_replays);
    CUDA_OK(cudaGraphExecDestroy(exec));
  }
  if (graph) CUDA_OK(cudaGraphDestroy(graph));
  OK(ccoWindowDeregister(g_comm, win));
}

// ------------------------------------------------------------ (c) errors

static void expect(ccoResult_t got, ccoResult_t want, const char* word, const char* what) {
  const char* text = ccoGetLastError(g_comm);
  CHECK(got == want && strstr(text, word), "%s: %s (%s)", what, ccoGetErrorString(got), text);
}

static void test_errors(const bufs& b) {
  char* s = b.send + 256;
  char* r = b.recv + 256;
  float* plain = NULL;
  CUDA_OK(cudaMalloc(&plain, 4096));
  expect(ccoAllReduce(g_comm, plain, r, 4, ccoFloat32, ccoSum, g_stream), ccoInvalidArgument, "sendbuf",
         "cudaMalloc'ed sendbuf refused");
  expect(ccoAllReduce(g_comm, s, r, 4, (ccoDataType_t)9, ccoSum, g_stream), ccoInvalidArgument, "data type",
         "unknown type refused");
  expect(ccoBroadcast(g_comm, s, r, 4, ccoFloat32, g_size, g_stream), ccoInvalidArgument, "root",
         "root out of range refused");
  expect(ccoAllReduce(g_comm, s, r, b.bytes / 4, ccoFloat32, ccoSum, g_stream), ccoInvalidArgument, "past the end",
         "count past the window refused");
  expect(ccoAlltoAll(g_comm, s, s, 4, ccoFloat32, g_stream), ccoInvalidArgument, "never in place",
         "in-place all-to-all refused");
  CUDA_OK(cudaFree(plain));
  coll_case c = {AR, 0, 0, 0, 0, 1000};
  g_bad[0] = g_bad[1] = g_bad[2] = 0;
  ccoResult_t res = enqueue_case(g_comm, b, c, g_seed, g_bad, g_stream, true);
  if (res == ccoSuccess) wait_stream(g_stream, "a good call after refused ones", 120);
  CHECK(res == ccoSuccess && !g_bad[0], "a good call after refused ones: %s", ccoGetLastError(g_comm));
}

// ------------------------------------------------------------ (d) mismatch

static void test_mismatch(void) {
  ccoUniqueId ids[64];
  if (g_rank == 0) OK(ccoGetUniqueId(&ids[0]));
  ccoUniqueId mine = ids[0];
  OK(ccoBootstrapAllGather(g_comm, &mine, ids, sizeof(ccoUniqueId)));
  ccoComm* comm = NULL;
  if (ccoCommCreate(ids[0], g_size, g_rank, 0, &comm) != ccoSuccess) {
    CHECK(0, "second communicator: %s", ccoGetLastError(NULL));
    return;
  }
  // 160 KB: one-shot on every rank (the blocks that start with a barrier
  // check the signature), unless CCO_ALGO forces LL there.
  ccoAlgo_t algo = ccoAlgoAuto;
  if (ccoCollAlgorithm(comm, "allreduce", 160000, &algo) != ccoSuccess || algo == ccoAlgoLL) {
    printf(GPU_TEST_NAME " rank %d: mismatch test skipped under CCO_ALGO\n", g_rank);
    OK(ccoCommDestroy(comm));
    return;
  }
  bufs b;
  if (make_bufs(comm, 1 << 20, &b)) {
    size_t count = g_rank == 0 ? 40000 : 40001; // the same algorithm on every rank, other counts
    ccoResult_t r = ccoAllReduce(comm, b.send, b.recv, count, ccoFloat32, ccoSum, g_stream);
    CHECK(r == ccoSuccess, "mismatched counts: the call is enqueued (%s)", ccoGetLastError(comm));
    wait_stream_of(g_stream, comm, "mismatched counts", 60);
    ccoResult_t async = ccoSuccess;
    OK(ccoCommGetAsyncError(comm, &async));
    CHECK(async != ccoSuccess, "mismatched counts: the stream finished and the async error is %s (%s)",
          ccoGetErrorString(async), ccoGetLastError(comm));
    r = ccoAllReduce(comm, b.send, b.recv, 16, ccoFloat32, ccoSum, g_stream);
    CHECK(r != ccoSuccess && strstr(ccoGetLastError(comm), "failed earlier"), "the next call fails naming it: %s",
          ccoGetLastError(comm));
    free_bufs(comm, &b);
  }
  OK(ccoCommDestroy(comm));
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) g_quick = 1;
    else if (!strcmp(argv[i], "--replays") && i + 1 < argc) g_replays = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--quick] [--replays R]\n", argv[0]);
      return 2;
    }
  }
  setenv("CCO_PLATFORM", "cuda", 1);
  // Across hosts the blocks wait for the GDA proxy's driver calls, which a
  // lazy first launch of this test's check kernels would hold up for good
  // (docs/gda.md, "Kernels that wait for GDA").
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0));
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, GPU_TEST_NAME ": create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&g_seed, sizeof(uint32_t)));
  CUDA_OK(cudaMemset(g_seed, 0, sizeof(uint32_t)));
  CUDA_OK(cudaMallocManaged(&g_bad, 3 * sizeof(unsigned long long)));
  // Windows for the largest case: all-to-all of 1 Mi fp32 per peer, or the
  // 64 MiB all-reduce.
  size_t bytes = (size_t)(1 << 20) * 4 * (size_t)g_size + 2 * GUARD_BYTES + 4096;
  if (bytes < (64u << 20) + 8192) bytes = (64u << 20) + 8192;
  bufs b;
  if (make_bufs(g_comm, bytes, &b)) {
    test_matrix(b);
    test_graphs(b);
    test_errors(b);
    free_bufs(g_comm, &b);
  }
  test_stream_calls();
  test_mismatch();
  CUDA_OK(cudaStreamDestroy(g_stream));
  OK(ccoCommDestroy(g_comm));
  return finish();
}
