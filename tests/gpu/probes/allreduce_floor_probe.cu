// Probe: where the time of the library's one-shot all-reduce block goes,
// against the examples' one-shot kernel, which does the same two LSA
// barriers and sum in half the time at 1 KiB (bench/RESULTS.md,
// collectives). Each variant swaps one piece between the two, so that the
// differences between the lines locate the cost:
//
//   empty        an empty kernel (the launch floor in a graph)
//   bar1, bar2   one and two LSA barriers, no work
//   example      ccoExampleAllReduceBlock (examples/lsa_examples.h)
//   lib          ccoDevAllReduceOneShot, fp32 sum constant, signature 0
//   lib_sig      the same with a signature (what ccoAllReduce launches)
//   lib_ptr_sig  lib_sig with the device communicator in device memory,
//                as the engine passes it
//   frame_exsum  the library's checks and barrier frame around the example's sum
//   exbar_libsum the example's barriers around the library's span reduction
//   nocheck      the library's frame and reduction without its argument checks
//   check_exbar  exbar_libsum with the library's argument checks before it
//
// Usage: ccorun -n 2 allreduce_floor_probe [--parts 16] [--reps 50] [--iters 20]
// Prints one line per variant and size: us per call (rank 0) and whether
// every sum was right on every rank.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../bench/bench_common.cuh"
#include "cco/cco_coll.h"
#include "lsa_examples.h"

#define THREADS 512

enum {
  V_EMPTY, V_BAR1, V_BAR2, V_EXAMPLE, V_LIB, V_LIB_SIG, V_LIB_PTR_SIG, V_FRAME_EXSUM, V_EXBAR_LIBSUM, V_NOCHECK,
  V_CHECK_EXBAR, V_COUNT
};
static const char* const k_names[V_COUNT] = {"empty", "bar1", "bar2", "example", "lib", "lib_sig", "lib_ptr_sig",
                                             "frame_exsum", "exbar_libsum", "nocheck", "check_exbar"};

static ccoComm* comm;

__device__ __forceinline__ void note(ccoDevStatus_t st, int* bad) {
  if (st != ccoDevSuccess && threadIdx.x == 0) atomicAdd(bad, 1);
}

__global__ void k_empty(int*) {}

__global__ void __launch_bounds__(THREADS) k_bar(ccoDevComm dc, int syncs, int* bad) {
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, blockIdx.x, ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  for (int i = 0; i < syncs && st == ccoDevSuccess; i++) st = ccoLsaBarrierSync(&s);
  ccoLsaBarrierSessionEnd(&s);
  note(st, bad);
}

__global__ void __launch_bounds__(THREADS) k_example(ccoDevComm dc, ccoCollArgs a, int* bad) {
  note(ccoExampleAllReduceBlock(&dc, a.sendWin, a.sendOff, a.recvOff, a.count, ccoExampleF32, blockIdx.x, gridDim.x),
       bad);
}

__global__ void __launch_bounds__(THREADS) k_lib(ccoDevComm dc, ccoCollArgs a, int* bad) {
  a.dtype = ccoFloat32;
  a.op = ccoSum;
  note(ccoDevAllReduceOneShot(&dc, &a, blockIdx.x, gridDim.x), bad);
}

__global__ void __launch_bounds__(THREADS) k_lib_ptr(const ccoDevComm* dc, ccoCollArgs a, int* bad) {
  a.dtype = ccoFloat32;
  a.op = ccoSum;
  note(ccoDevAllReduceOneShot(dc, &a, blockIdx.x, gridDim.x), bad);
}

// The library's frame (context, checks, barriers with the signature) around
// the example's sum.
__global__ void __launch_bounds__(THREADS) k_frame_exsum(ccoDevComm dc, ccoCollArgs a, int* bad) {
  a.dtype = ccoFloat32;
  a.op = ccoSum;
  cco_impl_coll_ctx c;
  if (!cco_impl_coll_ctx_init(&c, &dc, &a, blockIdx.x, gridDim.x)) return note(ccoDevInvalid, bad);
  int ok = cco_impl_coll_args_ok(&c, cco_impl_coll_oneshot);
  cco_impl_coll_frame f;
  cco_impl_coll_open(&f, &c, ok);
  if (f.proceed) {
    ccoWindowDevice w = *a.sendWin;
    size_t first = (size_t)blockIdx.x * a.count / gridDim.x, last = ((size_t)blockIdx.x + 1) * a.count / gridDim.x;
    ccoExampleSumRange(&w, a.sendOff, a.recvOff, first, last, ccoExampleF32, threadIdx.x, blockDim.x);
  }
  note(cco_impl_coll_close(&f, &c, 1), bad);
}

// The example's barriers around the library's reduction of the same piece;
// with `check`, after the library's argument checks.
template <bool check>
__global__ void __launch_bounds__(THREADS) k_exbar_libsum(ccoDevComm dc, ccoCollArgs a, int* bad) {
  a.dtype = ccoFloat32;
  a.op = ccoSum;
  cco_impl_coll_ctx c;
  cco_impl_coll_ctx_init(&c, &dc, &a, blockIdx.x, gridDim.x);
  if (check && !cco_impl_coll_args_ok(&c, cco_impl_coll_oneshot)) return note(ccoDevInvalid, bad);
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, blockIdx.x, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&s);
  if (st == ccoDevSuccess) {
    c.bytes = a.count * 4u;
    cco_impl_coll_span sp = cco_impl_coll_oneshot_span(&c);
    cco_impl_coll_reduce(&sp, ccoFloat32, ccoSum, threadIdx.x, blockDim.x);
    st = ccoLsaBarrierSync(&s);
  }
  ccoLsaBarrierSessionEnd(&s);
  note(st, bad);
}

// The library's frame and reduction, without its argument checks.
__global__ void __launch_bounds__(THREADS) k_nocheck(ccoDevComm dc, ccoCollArgs a, int* bad) {
  a.dtype = ccoFloat32;
  a.op = ccoSum;
  a.signature = 0;
  cco_impl_coll_ctx c;
  cco_impl_coll_ctx_init(&c, &dc, &a, blockIdx.x, gridDim.x);
  c.bytes = a.count * 4u;
  cco_impl_coll_frame f;
  cco_impl_coll_open(&f, &c, 1);
  if (f.proceed) {
    cco_impl_coll_span sp = cco_impl_coll_oneshot_span(&c);
    cco_impl_coll_reduce(&sp, ccoFloat32, ccoSum, threadIdx.x, blockDim.x);
  }
  note(cco_impl_coll_close(&f, &c, 1), bad);
}

__global__ void fill_input(float* in, size_t count, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
    in[i] = (float)(rank + 1) + (float)(i % 7);
}

static void launch(int v, int parts, cudaStream_t s, const ccoDevComm& dc, const ccoDevComm* dDc, ccoCollArgs a,
                   int* dBad) {
  switch (v) {
    case V_EMPTY: k_empty<<<parts, THREADS, 0, s>>>(dBad); break;
    case V_BAR1: k_bar<<<parts, THREADS, 0, s>>>(dc, 1, dBad); break;
    case V_BAR2: k_bar<<<parts, THREADS, 0, s>>>(dc, 2, dBad); break;
    case V_EXAMPLE: k_example<<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
    case V_LIB: a.signature = 0; k_lib<<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
    case V_LIB_SIG: k_lib<<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
    case V_LIB_PTR_SIG: k_lib_ptr<<<parts, THREADS, 0, s>>>(dDc, a, dBad); break;
    case V_FRAME_EXSUM: k_frame_exsum<<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
    case V_EXBAR_LIBSUM: k_exbar_libsum<false><<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
    case V_NOCHECK: k_nocheck<<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
    case V_CHECK_EXBAR: k_exbar_libsum<true><<<parts, THREADS, 0, s>>>(dc, a, dBad); break;
  }
}

int main(int argc, char** argv) {
  int parts = 16, reps = 50, iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--parts")) parts = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
  }
  if (parts < 1 || parts > (int)CCO_COLL_MAX_PARTS) {
    fprintf(stderr, "--parts: 1..%u\n", CCO_COLL_MAX_PARTS);
    return 2;
  }
  bench_require_gpu("allreduce_floor_probe");
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank = 0, lsaSize = 0;
  ccoCommRank(comm, &rank);
  ccoCommLsaSize(comm, &lsaSize);
  const size_t maxBytes = 1u << 20;
  const uint64_t scratchBytes = ccoDevCollScratchBytes(lsaSize, (uint32_t)parts);
  ccoWindow_t win = NULL;
  void* local = NULL;
  CCO_OK(ccoWindowRegisterAlloc(comm, 2 * maxBytes + scratchBytes, &win, &local));
  CUDA_OK(cudaMemset((char*)local + 2 * maxBytes, 0, scratchBytes));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.lsaBarrierCount = CCO_COLL_MAX_PARTS;
  ccoDevComm dc;
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  ccoDevComm* dDc = NULL;
  CUDA_OK(cudaMalloc(&dDc, sizeof(ccoDevComm)));
  CUDA_OK(cudaMemcpy(dDc, &dc, sizeof(dc), cudaMemcpyHostToDevice));
  int* dBad = NULL;
  CUDA_OK(cudaMalloc(&dBad, sizeof(int)));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* host = (float*)malloc(maxBytes);
  const size_t sizes[] = {1024, 256 * 1024, 1024 * 1024};
  int failed = 0;
  for (int v = 0; v < V_COUNT; v++) {
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
      size_t bytes = sizes[si], count = bytes / 4;
      ccoCollArgs a;
      memset(&a, 0, sizeof(a));
      a.sendWin = win;
      a.sendOff = 0;
      a.recvWin = win;
      a.recvOff = maxBytes;
      a.count = count;
      a.scratchWin = win;
      a.scratchOff = 2 * maxBytes;
      a.scratchBytes = scratchBytes;
      a.signature = 0x9e3779b97f4a7c15ull ^ bytes;
      fill_input<<<64, 256, 0, stream>>>((float*)local, count, rank);
      CUDA_OK(cudaMemsetAsync((char*)local + maxBytes, 0, bytes, stream));
      CUDA_OK(cudaMemsetAsync(dBad, 0, sizeof(int), stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CCO_OK(ccoBarrierAll(comm));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int r = 0; r < reps; r++) launch(v, parts, stream, dc, dDc, a, dBad);
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      for (int i = 0; i < 2; i++) CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CCO_OK(ccoBarrierAll(comm));
      double samples[64];
      int n = iters < 64 ? iters : 64;
      for (int i = 0; i < n; i++) {
        double t0 = bench_now_s();
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        samples[i] = (bench_now_s() - t0) / reps * 1e6;
      }
      qsort(samples, (size_t)n, sizeof(double), bench_cmp_double);
      int bad = 0, wrong = 0;
      CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(int), cudaMemcpyDeviceToHost));
      if (v >= V_EXAMPLE) {
        CUDA_OK(cudaMemcpy(host, (char*)local + maxBytes, bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++) {
          float want = 0;
          for (int r = 0; r < lsaSize; r++) want += (float)(r + 1) + (float)(i % 7);
          wrong += host[i] != want;
        }
      }
      printf("probe rank %d ranks %d parts %d variant %-12s bytes %8zu us %7.3f (min %7.3f) bad %d wrong %d\n", rank,
             lsaSize, parts, k_names[v], bytes, samples[n / 2], samples[0], bad, wrong);
      fflush(stdout);
      failed |= bad || wrong;
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(graph));
      CCO_OK(ccoBarrierAll(comm));
    }
  }
  free(host);
  cudaFree(dBad);
  cudaFree(dDc);
  cudaStreamDestroy(stream);
  CCO_OK(ccoDevCommDestroy(comm, &dc));
  CCO_OK(ccoWindowDeregister(comm, win));
  CCO_OK(ccoCommDestroy(comm));
  return failed;
}
