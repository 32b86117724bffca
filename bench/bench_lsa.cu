// LSA device API benchmarks, one rank of a job started by ccorun (MPS for
// several ranks on one GPU):
//
//   ccorun -n N cco-bench-lsa        (N = 2, 4, 8)
//
// One JSON line per measurement from rank 0, each next to its reference
// measured in the same run (bench/nvshmem_ref.cu prints the same keys with
// an "nvshmem_" prefix):
//
// 1. lsa_put_bw: a kernel (one 1024-thread block per SM, eight 16-byte loads
//    in flight per thread, as bench_windows.cu's copy_kernel) copies 256 MiB
//    from this rank's window into LSA peer (lsaRank + 1)'s window, against
//    cudaMemcpy device-to-device of the same bytes. writers=1: rank 0 alone;
//    writers=N: every rank at once (aggregate bytes over the slowest rank).
// 2. signal_pingpong: LSA ranks 0 and 1, one thread each: ccoLsaSignalStore into
//    the peer's signal word, ccoSignalWaitUntil on its own; half round trip.
//    Reference: the same ping-pong on the same window memory with raw
//    volatile stores/loads and __threadfence_system.
// 3. lsa_barrier: ccoLsaBarrierSync at block scope, 10000 times in one
//    kernel of one block per rank. Reference: the same all-to-all flag
//    barrier written with volatile stores/loads and __threadfence_system.
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
// put source and destination.
enum : uint64_t {
  kSigOff = 0,         // uint64_t: cco ping-pong word
  kRawSigOff = 256,    // uint64_t: raw ping-pong word (another cache line)
  kRawBarOff = 4096,   // uint32_t[lsaSize]: raw barrier inbox
  kSrcOff = 2u << 20,  // put source
};
static const size_t kPutBytes = 256u << 20;

// ------------------------------------------------------------ 1. put

// bench_windows.cu's copy_kernel, with the peer address from the window.
__global__ void put_kernel(ccoWindow_t win, int peer, uint64_t srcOff, uint64_t dstOff, size_t n) {
  ccoWindowDevice w = *win;
  bench_copy_u4((uint4*)ccoGetLsaPeerPtr(&w, peer, dstOff), (const uint4*)ccoGetLocalPtr(&w, srcOff), n);
}


// Slowest rank's time of the same step, everyone taking part.
static double slowest(double mine, int size) {
  double* all = (double*)calloc((size_t)size, sizeof(double));
  CCO_OK(ccoBootstrapAllGather(comm, &mine, all, sizeof(double)));
  double m = 0;
  for (int i = 0; i < size; i++) m = all[i] > m ? all[i] : m;
  free(all);
  return m;
}

static void bench_put(ccoWindow_t win, int rank, int size, int lsaRank, int lsaSize, void* refSrc, void* refDst,
                      cudaStream_t st) {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms, threads = 1024, iters = 10, trials = 7;
  const size_t n = kPutBytes / sizeof(uint4);
  const uint64_t dstOff = kSrcOff + kPutBytes;
  int peer = (lsaRank + 1) % lsaSize;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  // writers = 1 (rank 0 alone), then every rank at once.
  for (int all = 0; all < 2; all++) {
    int active = all || lsaRank == 0;
    double put[trials], ref[trials];
    if (active) { // warm-up
      put_kernel<<<blocks, threads, 0, st>>>(win, peer, kSrcOff, dstOff, n);
      CUDA_OK(cudaMemcpyAsync(refDst, refSrc, kPutBytes, cudaMemcpyDeviceToDevice, st));
      CUDA_OK(cudaStreamSynchronize(st));
    }
    for (int t = 0; t < trials; t++) {
      for (int kind = 0; kind < 2; kind++) {
        CCO_OK(ccoBarrierAll(comm));
        double ms = 0;
        if (active) {
          CUDA_OK(cudaEventRecord(e0, st));
          for (int i = 0; i < iters; i++) {
            if (kind == 0) put_kernel<<<blocks, threads, 0, st>>>(win, peer, kSrcOff, dstOff, n);
            else CUDA_OK(cudaMemcpyAsync(refDst, refSrc, kPutBytes, cudaMemcpyDeviceToDevice, st));
          }
          CUDA_OK(cudaEventRecord(e1, st));
          CUDA_OK(cudaEventSynchronize(e1));
          CUDA_OK(cudaGetLastError());
          ms = bench_elapsed_ms(e0, e1) / iters;
        }
        ms = all ? slowest(ms, size) : ms;
        (kind == 0 ? put : ref)[t] = ms;
      }
    }
    double putMs = bench_median(put, trials), refMs = bench_median(ref, trials);
    int writers = all ? lsaSize : 1;
    double gbPut = (double)kPutBytes * writers / (putMs * 1e-3) / 1e9;
    double gbRef = (double)kPutBytes * writers / (refMs * 1e-3) / 1e9;
    if (rank == 0)
      printf("{\"bench\":\"lsa_put_bw\",\"ranks\":%d,\"writers\":%d,\"bytes\":%zu,\"blocks\":%d,\"threads\":%d,"
             "\"put_GBps\":%.1f,\"ref_cudaMemcpy_d2d_GBps\":%.1f,\"ratio\":%.3f,\"put_ms\":%.4f,"
             "\"ref_ms\":%.4f}\n",
             size, writers, kPutBytes, blocks, threads, gbPut, gbRef, gbPut / gbRef, putMs, refMs);
    fflush(stdout);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// ------------------------------------------------------- 2. ping-pong

// Role 0 signals first; values base+1 .. base+warm+iters, so no word is ever
// reset between runs. *ns: time of the last `iters` round trips.
__global__ void pingpong_cco(ccoDevComm dc, ccoWindow_t win, int role, uint64_t base, uint32_t warm, uint32_t iters,
                             unsigned long long* ns, unsigned int* bad) {
  ccoWindowDevice w = *win;
  uint64_t* mine = (uint64_t*)ccoGetLocalPtr(&w, kSigOff);
  uint64_t* theirs = (uint64_t*)ccoGetLsaPeerPtr(&w, 1 - role, kSigOff);
  uint64_t t0 = cco_impl_clock_ns();
  for (uint32_t i = 1; i <= warm + iters; i++) {
    if (i == warm + 1) t0 = cco_impl_clock_ns();
    uint64_t v = base + i;
    if (role == 0) ccoLsaSignalStore(&dc, theirs, v);
    if (ccoSignalWaitUntil(&dc, mine, v, 0) != ccoDevSuccess) {
      *bad = 1;
      return;
    }
    if (role == 1) ccoLsaSignalStore(&dc, theirs, v);
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

static void bench_pingpong(const ccoDevComm* dc, ccoWindow_t win, int rank, int size, int lsaRank, cudaStream_t st,
                           unsigned long long* dNs, unsigned int* dBad) {
  const uint32_t warm = 1000, iters = 20000;
  const int trials = 5;
  double cco[trials], raw[trials];
  uint64_t base = 0;
  unsigned int bad = 0;
  for (int t = 0; t < trials; t++) {
    for (int kind = 0; kind < 2; kind++) {
      CCO_OK(ccoBarrierAll(comm));
      unsigned long long ns = 0;
      if (lsaRank < 2) {
        if (kind == 0) pingpong_cco<<<1, 1, 0, st>>>(*dc, win, lsaRank, base, warm, iters, dNs, dBad);
        else pingpong_raw<<<1, 1, 0, st>>>(win, lsaRank, base, warm, iters, dNs);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpyAsync(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost, st));
        CUDA_OK(cudaStreamSynchronize(st));
      }
      (kind == 0 ? cco : raw)[t] = ns * 1e-3 / iters / 2; // us per one-way trip
    }
    base += warm + iters;
  }
  CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost));
  double c = bench_median(cco, trials), r = bench_median(raw, trials);
  if (rank == 0)
    printf("{\"bench\":\"signal_pingpong\",\"ranks\":%d,\"iters\":%u,\"half_rtt_us\":%.3f,"
           "\"ref_raw_flag_half_rtt_us\":%.3f,\"ratio\":%.3f,\"goal_ratio\":1.10,\"min_half_rtt_us\":%.3f,"
           "\"bad_status\":%u}\n",
           size, iters, c, r, c / r, cco[0], bad);
  fflush(stdout);
}

// -------------------------------------------------------- 3. barrier

__global__ void barrier_cco(ccoDevComm dc, uint32_t index, uint32_t warm, uint32_t iters, unsigned long long* ns,
                            unsigned int* bad) {
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, index, ccoCoopBlock);
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

static void bench_barrier(const ccoDevComm* dc, ccoWindow_t win, int rank, int size, cudaStream_t st,
                          unsigned long long* dNs, unsigned int* dBad) {
  const uint32_t warm = 200, iters = 10000, threads = 128;
  const int trials = 5;
  double cco[trials], raw[trials];
  uint32_t epoch = 0;
  unsigned int bad = 0;
  for (int t = 0; t < trials; t++) {
    for (int kind = 0; kind < 2; kind++) {
      CCO_OK(ccoBarrierAll(comm));
      if (kind == 0) barrier_cco<<<1, threads, 0, st>>>(*dc, 0, warm, iters, dNs, dBad);
      else barrier_raw<<<1, threads, 0, st>>>(win, epoch, warm, iters, dNs);
      CUDA_OK(cudaGetLastError());
      unsigned long long ns = 0;
      CUDA_OK(cudaMemcpyAsync(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost, st));
      CUDA_OK(cudaStreamSynchronize(st));
      if (kind == 1) epoch += warm + iters;
      (kind == 0 ? cco : raw)[t] = slowest(ns * 1e-3 / iters, size);
    }
  }
  CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(bad), cudaMemcpyDeviceToHost));
  double c = bench_median(cco, trials), r = bench_median(raw, trials);
  if (rank == 0)
    printf("{\"bench\":\"lsa_barrier\",\"ranks\":%d,\"scope\":\"block\",\"threads\":%u,\"iters\":%u,"
           "\"barrier_us\":%.3f,\"ref_raw_flag_barrier_us\":%.3f,\"ratio\":%.3f,\"bad_status\":%u}\n",
           size, threads, iters, c, r, c / r, bad);
  fflush(stdout);
}

int main(void) {
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
    if (rank == 0) printf("{\"bench\":\"lsa\",\"ranks\":%d,\"skipped\":\"needs 2 LSA ranks\"}\n", size);
    CCO_OK(ccoCommDestroy(comm));
    return 0;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  ccoWindow_t win;
  void* local;
  size_t winBytes = kSrcOff + 2 * kPutBytes;
  CCO_OK(ccoWindowRegisterAlloc(comm, winBytes, &win, &local));
  CUDA_OK(cudaMemset(local, 0, kSrcOff));
  CUDA_OK(cudaMemset((char*)local + kSrcOff, 1, 2 * kPutBytes));
  void *refSrc, *refDst;
  CUDA_OK(cudaMalloc(&refSrc, kPutBytes));
  CUDA_OK(cudaMalloc(&refDst, kPutBytes));
  CUDA_OK(cudaMemset(refSrc, 1, kPutBytes));
  unsigned long long* dNs;
  unsigned int* dBad;
  CUDA_OK(cudaMalloc(&dNs, sizeof(*dNs)));
  CUDA_OK(cudaMalloc(&dBad, sizeof(*dBad)));
  CUDA_OK(cudaMemset(dBad, 0, sizeof(*dBad)));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());
  CCO_OK(ccoBarrierAll(comm)); // every window is zeroed before any kernel

  bench_put(win, rank, size, lsaRank, lsaSize, refSrc, refDst, st);
  bench_pingpong(&dc, win, rank, size, lsaRank, st, dNs, dBad);
  CUDA_OK(cudaMemset(dBad, 0, sizeof(*dBad)));
  bench_barrier(&dc, win, rank, size, st, dNs, dBad);

  CCO_OK(ccoBarrierAll(comm));
  cudaFree(refSrc);
  cudaFree(refDst);
  cudaFree(dNs);
  cudaFree(dBad);
  cudaStreamDestroy(st);
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
