// NVSHMEM 3.4 reference for bench_lsa.cu: the same three measurements on the
// same GPU, one PE per rank of a job started by ccorun (MPS):
//
//   bash bench/build_nvshmem_ref.sh BUILD_DIR      (on the GPU machine)
//   NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_NVLS=1 ccorun -n N BUILD_DIR/bin/nvshmem_ref
//       [-b 256M] [-e 256M] [-n N] [-w N] [put] [pingpong] [barrier] [rate]
//
// JSON lines from PE 0 (bench_json.h) with bench_lsa's ops and the reference
// "nvshmem", so that they sit beside cco's figures:
// 1. put (op lsa_put): nvshmemx_putmem_nbi_block, one 1024-thread block per
//    SM, each block putting its share of each size (default 256 MiB) to PE
//    (pe + 1) % npes, then nvshmem_quiet; beside cudaMemcpy device-to-device
//    of the same bytes. writers=1 (PE 0 alone) and writers=N (every PE at
//    once).
// 2. pingpong (op signal_pingpong): PEs 0 and 1, one thread each, variant
//    "signal_op" (nvshmemx_signal_op SET + nvshmem_signal_wait_until GE) and
//    "putmem_signal" (8-byte nvshmem_putmem_signal_nbi + wait).
// 3. barrier (op lsa_barrier): nvshmemx_barrier_all_block (variant
//    "barrier_all") and nvshmemx_sync_all_block ("sync_all"), -n times (10000)
//    each in one kernel of one 128-thread block per PE (nvshmemx_collective_launch).
// 4. rate (op signal_rate): 32 x 256 threads on every PE each add 1 with
//    nvshmemx_signal_op(NVSHMEM_SIGNAL_ADD) to their own word of PE
//    (pe + 1) % npes, -n times (256); messages per second over the slowest
//    PE's kernel (CUDA events), variant "signal_op".
//
// Bootstrap: PE 0's nvshmemx_uniqueid_t travels through a cco communicator
// on the host platform (ccoBootstrapAllGather); then
// nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID).
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.cuh"
#include "cco/cco.h"

static ccoComm* comm;

__device__ static inline uint64_t clock_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static const char* const kOps[] = {"put", "pingpong", "barrier", "rate", NULL};
static const uint32_t kRateBlocks = 32, kRateThreads = 256; // as bench_lsa.cu

// ------------------------------------------------------------ 1. put

__global__ void put_kernel(char* dst, const char* src, size_t bytes, int pe) {
  size_t chunk = (bytes / gridDim.x) & ~(size_t)15;
  size_t off = blockIdx.x * chunk;
  size_t len = blockIdx.x == gridDim.x - 1 ? bytes - off : chunk;
  nvshmemx_putmem_nbi_block(dst + off, src + off, len, pe);
  __syncthreads();
  if (threadIdx.x == 0) nvshmem_quiet();
}

// NVSHMEM's put to the next PE beside cudaMemcpy, measured as bench_lsa measures cco's (bench_common.cuh).
static void bench_put(const bench_sweep* sw, int iters, int warmup, int mype, int npes, char* symSrc, char* symDst,
                      void* refSrc, void* refDst, cudaStream_t st) {
  int peer = (mype + 1) % npes;
  bench_put_spec spec = {"nvshmem", "nvshmem", mype, npes, npes, mype == 0};
  bench_put_vs_memcpy(comm, spec, sw, iters, warmup, refSrc, refDst, st,
                      [&](unsigned long long bytes, int blocks, int threads, cudaStream_t s) {
                        put_kernel<<<blocks, threads, 0, s>>>(symDst, symSrc, bytes, peer);
                      });
}

// ------------------------------------------------------- 2. ping-pong

// variant 0: nvshmemx_signal_op; 1: nvshmem_putmem_signal_nbi of 8 bytes.
__global__ void pingpong(uint64_t* sig, uint64_t* data, int role, int variant, uint64_t base, uint32_t warm,
                         uint32_t iters, unsigned long long* ns) {
  int peer = 1 - role;
  uint64_t t0 = clock_ns();
  for (uint32_t i = 1; i <= warm + iters; i++) {
    if (i == warm + 1) t0 = clock_ns();
    uint64_t v = base + i;
    if (role == 1) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
    if (variant == 0) {
      nvshmemx_signal_op(sig, v, NVSHMEM_SIGNAL_SET, peer);
    } else {
      data[1] = v;
      nvshmem_putmem_signal_nbi(data, data + 1, sizeof(uint64_t), sig, v, NVSHMEM_SIGNAL_SET, peer);
    }
    if (role == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
  }
  *ns = clock_ns() - t0;
}

static void bench_pingpong(uint32_t iters, uint32_t warm, int mype, int npes, uint64_t* sig, uint64_t* data,
                           cudaStream_t st, unsigned long long* dNs) {
  const int trials = 5;
  const char* names[2] = {"signal_op", "putmem_signal"};
  uint64_t base = 0;
  for (int variant = 0; variant < 2; variant++) {
    double v[trials];
    for (int t = 0; t < trials; t++) {
      CCO_OK(ccoBarrierAll(comm));
      unsigned long long ns = 0;
      if (mype < 2) {
        pingpong<<<1, 1, 0, st>>>(sig, data, mype, variant, base, warm, iters, dNs);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpyAsync(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost, st));
        CUDA_OK(cudaStreamSynchronize(st));
      }
      v[t] = ns * 1e-3 / iters / 2;
      base += warm + iters;
    }
    double m = bench_median(v, trials);
    if (mype == 0) {
      bench_line l;
      bench_line_start(&l, "nvshmem", "signal_pingpong", BENCH_NO_BYTES, npes, iters);
      bench_line_int(&l, "trials", trials);
      bench_line_str(&l, "variant", names[variant]);
      bench_line_num(&l, "min_us", v[0]); // bench_median sorted it
      bench_line_emit(&l, "us", m, "nvshmem");
    }
  }
}

// -------------------------------------------------------- 3. barrier

// sync: nvshmemx_sync_all_block (arrival only, the fair reference of an
// LSA barrier); else nvshmemx_barrier_all_block, which also completes every
// outstanding put first.
__global__ void barrier_kernel(int sync, uint32_t warm, uint32_t iters, unsigned long long* ns) {
  uint64_t t0 = clock_ns();
  for (uint32_t i = 0; i < warm + iters; i++) {
    if (i == warm) t0 = clock_ns();
    if (sync) nvshmemx_sync_all_block();
    else nvshmemx_barrier_all_block();
  }
  if (threadIdx.x == 0) *ns = clock_ns() - t0;
}

static void bench_barrier(uint32_t iters, uint32_t warm, int mype, int npes, cudaStream_t st,
                          unsigned long long* dNs) {
  const int threads = 128, trials = 5;
  const char* names[2] = {"barrier_all", "sync_all"};
  for (int sync = 0; sync < 2; sync++) {
    double v[trials];
    const char* launch = "nvshmemx_collective_launch";
    for (int t = 0; t < trials; t++) {
      CCO_OK(ccoBarrierAll(comm));
      void* args[] = {&sync, &warm, &iters, &dNs};
      int rc = nvshmemx_collective_launch((const void*)barrier_kernel, dim3(1), dim3(threads), args, 0, st);
      if (rc != 0) { // fall back to a plain launch, and say so
        launch = "plain launch (collective launch failed)";
        barrier_kernel<<<1, threads, 0, st>>>(sync, warm, iters, dNs);
      }
      CUDA_OK(cudaGetLastError());
      unsigned long long ns = 0;
      CUDA_OK(cudaMemcpyAsync(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost, st));
      CUDA_OK(cudaStreamSynchronize(st));
      v[t] = bench_slowest(comm, ns * 1e-3 / iters, npes);
    }
    double m = bench_median(v, trials);
    if (mype == 0) {
      bench_line l;
      bench_line_start(&l, "nvshmem", "lsa_barrier", BENCH_NO_BYTES, npes, iters);
      bench_line_str(&l, "scope", "block");
      bench_line_str(&l, "variant", names[sync]);
      bench_line_int(&l, "threads", threads);
      bench_line_int(&l, "trials", trials);
      bench_line_str(&l, "launch", launch);
      bench_line_emit(&l, "us", m, "nvshmem");
    }
  }
}

// ---------------------------------------------------- 4. message rate

__global__ void rate_kernel(uint64_t* words, int pe, uint32_t per) {
  uint64_t* word = words + blockIdx.x * blockDim.x + threadIdx.x;
  for (uint32_t i = 0; i < per; i++) nvshmemx_signal_op(word, 1, NVSHMEM_SIGNAL_ADD, pe);
}

static void bench_rate(uint32_t per, int mype, int npes, uint64_t* words, cudaStream_t st) {
  const int trials = 5;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  double v[trials];
  for (int t = 0; t < trials; t++) {
    CCO_OK(ccoBarrierAll(comm));
    CUDA_OK(cudaEventRecord(e0, st));
    rate_kernel<<<kRateBlocks, kRateThreads, 0, st>>>(words, (mype + 1) % npes, per);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(e1, st));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    v[t] = bench_slowest(comm, ms * 1e3, npes);
  }
  double us = bench_median(v, trials);
  if (mype == 0) {
    bench_line l;
    bench_line_start(&l, "nvshmem", "signal_rate", 8, npes, per);
    bench_line_str(&l, "variant", "signal_op");
    bench_line_int(&l, "threads", kRateBlocks * kRateThreads);
    bench_line_int(&l, "trials", trials);
    bench_line_emit(&l, "Mmsg_per_s", (double)kRateBlocks * kRateThreads * per * npes / us, "nvshmem");
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

int main(int argc, char** argv) {
  bench_args a = {0};
  a.program = "nvshmem_ref";
  a.about = "NVSHMEM's put bandwidth, signal ping-pong and barrier: the reference of cco-bench-lsa (under ccorun).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = kOps;
  a.sizeAlign = 16;
  a.defaults = "put: -b 256M -e 256M, -n 10 per trial, -w 1; pingpong: -n 20000 -w 1000; barrier: -n 10000 -w 200; "
               "rate: -n 256 adds per thread";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 256u << 20, 256u << 20, 2);
  bench_require_gpu(a.program);
  // NVSHMEM with several PEs per GPU under MPS: no NCCL, no NVLS, and full
  // multi-PE-per-GPU support although every PE may use all SMs.
  setenv("NVSHMEM_DISABLE_NCCL", "1", 0);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
  setenv("NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "1", 0);
  setenv("CCO_PLATFORM", "host", 1); // cco only carries the unique id here
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank, size;
  CCO_OK(ccoCommRank(comm, &rank));
  CCO_OK(ccoCommSize(comm, &size));
  CUDA_OK(pick_rank_device());

  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0 && nvshmemx_get_uniqueid(&id) != 0) {
    fprintf(stderr, "nvshmemx_get_uniqueid failed\n");
    return 1;
  }
  nvshmemx_uniqueid_t* ids = (nvshmemx_uniqueid_t*)calloc((size_t)size, sizeof(nvshmemx_uniqueid_t));
  CCO_OK(ccoBootstrapAllGather(comm, &id, ids, sizeof(nvshmemx_uniqueid_t)));
  id = ids[0];
  free(ids);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(rank, size, &id, &attr) != 0) {
    fprintf(stderr, "nvshmemx_set_attr_uniqueid_args failed\n");
    return 1;
  }
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
    fprintf(stderr, "nvshmemx_init_attr failed\n");
    return 1;
  }
  int mype = nvshmem_my_pe(), npes = nvshmem_n_pes();
  if (mype != rank || npes != size)
    fprintf(stderr, "warning: PE %d of %d is cco rank %d of %d\n", mype, npes, rank, size);
  if (npes < 2) {
    if (mype == 0) fprintf(stderr, "nvshmem_ref: nothing measured: it needs 2 PEs\n");
    nvshmem_finalize();
    CCO_OK(ccoCommDestroy(comm));
    return 0;
  }

  // Only the put needs room for its sizes.
  size_t putBytes = bench_args_want(&a, "put") ? sw.max : 16;
  char* symSrc = (char*)nvshmem_malloc(putBytes);
  char* symDst = (char*)nvshmem_malloc(putBytes);
  uint64_t* sig = (uint64_t*)nvshmem_malloc(4096);
  uint64_t* data = (uint64_t*)nvshmem_malloc(4096);
  uint64_t* rateWords = (uint64_t*)nvshmem_malloc(kRateBlocks * kRateThreads * sizeof(uint64_t));
  if (!symSrc || !symDst || !sig || !data || !rateWords) {
    fprintf(stderr, "nvshmem_malloc failed (NVSHMEM_SYMMETRIC_SIZE?)\n");
    return 1;
  }
  CUDA_OK(cudaMemset(symSrc, 1, putBytes));
  CUDA_OK(cudaMemset(sig, 0, 4096));
  CUDA_OK(cudaMemset(data, 0, 4096));
  CUDA_OK(cudaMemset(rateWords, 0, kRateBlocks * kRateThreads * sizeof(uint64_t)));
  void *refSrc, *refDst;
  CUDA_OK(cudaMalloc(&refSrc, putBytes));
  CUDA_OK(cudaMalloc(&refDst, putBytes));
  CUDA_OK(cudaMemset(refSrc, 1, putBytes));
  unsigned long long* dNs;
  CUDA_OK(cudaMalloc(&dNs, sizeof(*dNs)));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();

  if (bench_args_want(&a, "put"))
    bench_put(&sw, (int)bench_args_iters(&a, 10), (int)bench_args_warmup(&a, 1), mype, npes, symSrc, symDst, refSrc,
              refDst, st);
  if (bench_args_want(&a, "pingpong"))
    bench_pingpong((uint32_t)bench_args_iters(&a, 20000), (uint32_t)bench_args_warmup(&a, 1000), mype, npes, sig,
                   data, st, dNs);
  if (bench_args_want(&a, "barrier"))
    bench_barrier((uint32_t)bench_args_iters(&a, 10000), (uint32_t)bench_args_warmup(&a, 200), mype, npes, st, dNs);
  if (bench_args_want(&a, "rate")) bench_rate((uint32_t)bench_args_iters(&a, 256), mype, npes, rateWords, st);

  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  nvshmem_free(symSrc);
  nvshmem_free(symDst);
  nvshmem_free(sig);
  nvshmem_free(data);
  nvshmem_free(rateWords);
  cudaFree(refSrc);
  cudaFree(refDst);
  cudaFree(dNs);
  cudaStreamDestroy(st);
  nvshmem_finalize();
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
