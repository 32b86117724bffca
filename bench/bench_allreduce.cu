// One-shot LSA all-reduce latency (the kernel of examples/03_lsa_allreduce.cu),
// captured in a CUDA graph like its NCCL reference (bench/nccl_ref.py):
//
//   ccorun -n N cco-bench-allreduce [-b 1K] [-e 1M] [-f 4] [-n 50] [-w 1] [--reps 20] [--block-bytes 2048]
//                                       (one process per GPU, or under MPS)
//
// For each size (fp32) a graph holds --reps back-to-back all-reduce kernels;
// it is replayed -n times after -w warm-up replays, and the latency is the
// time per all-reduce. The sum is checked once per size; a wrong sum or a
// bad device status makes the exit status 1. One JSON line per size (rank 0).
#include <string.h>

#include "bench_common.cuh"
#include "cco/cco_device.h"
#include "lsa_examples.h"

#define THREADS 512
#define MAX_PARTS 128

static ccoComm* comm;

__global__ void allreduce_kernel(ccoDevComm dc, ccoWindow_t win, uint64_t outOff, size_t count, int* bad) {
  ccoDevStatus_t st = ccoExampleAllReduceBlock(&dc, win, 0, outOff, count, ccoExampleF32, blockIdx.x, gridDim.x);
  if (st != ccoDevSuccess && threadIdx.x == 0) atomicAdd(bad, 1);
}

__global__ void fill_input(float* in, size_t count, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
    in[i] = (float)(rank + 1) + (float)(i % 7);
}

int main(int argc, char** argv) {
  bench_opt opts[] = {
      {.name = "reps", .kind = BENCH_OPT_INT, .min = 1, .max = 10000, .help = "all-reduce kernels per graph",
       .value = 20},
      {.name = "block-bytes", .kind = BENCH_OPT_SIZE, .min = 4, .max = 1 << 30,
       .help = "bytes summed per block (more blocks, more loads in flight)", .value = 2048},
  };
  bench_args a = {0};
  a.program = "cco-bench-allreduce";
  a.about = "One-shot LSA all-reduce (fp32) latency in CUDA graphs, beside NCCL's (bench/nccl_ref.py; under ccorun).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.sizeAlign = sizeof(float);
  a.opts = opts;
  a.nOpts = 2;
  a.defaults = "-b 1K -e 1M -f 4, -n 50 graph replays after -w 1";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 1024, 1u << 20, 4);
  const int reps = (int)opts[0].value, iters = (int)bench_args_iters(&a, 50), warmup = (int)bench_args_warmup(&a, 1);
  const size_t blockBytes = (size_t)opts[1].value;
  bench_require_gpu(a.program);
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank = 0, size = 0, lsaSize = 0;
  ccoCommRank(comm, &rank);
  ccoCommSize(comm, &size);
  ccoCommLsaSize(comm, &lsaSize);
  const size_t maxBytes = sw.max;
  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.lsaBarrierCount = MAX_PARTS;
  ccoDevComm dc;
  CCO_OK(ccoWindowRegisterAlloc(comm, 2 * maxBytes, &win, &local));
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  int* dBad = NULL;
  CUDA_OK(cudaMalloc(&dBad, sizeof(int)));
  CUDA_OK(cudaMemset(dBad, 0, sizeof(int)));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* host = (float*)malloc(maxBytes);
  // Each block waits in an LSA barrier for the same block of every peer, so
  // the grids of all ranks on this GPU must be resident at once
  // (docs/device_api.md): with ranks sharing a GPU (MPS), fewer blocks each.
  int maxParts = MAX_PARTS;
  {
    int device = 0, sms = 0, perSm = 0, gpus = 1;
    CUDA_OK(cudaGetDevice(&device));
    CUDA_OK(cudaGetDeviceCount(&gpus));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, allreduce_kernel, THREADS, 0));
    int sharing = (lsaSize + gpus - 1) / gpus;  // ranks on this GPU (pick_rank_device's mapping)
    int fit = sms * perSm / (sharing > 0 ? sharing : 1);
    if (fit < maxParts) maxParts = fit < 1 ? 1 : fit;
    if (rank == 0 && maxParts < MAX_PARTS)
      fprintf(stderr, "bench_allreduce: %d ranks share each GPU: at most %d blocks per rank (%d SMs x %d)\n",
              sharing, maxParts, sms, perSm);
  }
  int failed = 0;
  for (unsigned long long bytes = sw.min; bytes; bytes = bench_sweep_next(&sw, bytes)) {
    size_t count = bytes / sizeof(float);
    // About --block-bytes (default 2 KiB) per block, at least one block, at
    // most maxParts: the sum reads peers across NVLink, which wants many
    // loads in flight, so many blocks (on 2 H200s, 32 KiB per block took
    // 22 us at 64 KiB, 2 KiB per block 7 us).
    int parts = (int)(bytes / blockBytes);
    parts = parts < 1 ? 1 : parts > maxParts ? maxParts : parts;
    fill_input<<<64, 256, 0, stream>>>((float*)local, count, rank);
    CUDA_OK(cudaStreamSynchronize(stream));
    CCO_OK(ccoBarrierAll(comm));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < reps; r++)
      allreduce_kernel<<<parts, THREADS, 0, stream>>>(dc, win, maxBytes, count, dBad);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < warmup; i++) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CCO_OK(ccoBarrierAll(comm));
    double t0 = bench_now_s();
    for (int i = 0; i < iters; i++) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    double us = (bench_now_s() - t0) / ((double)iters * reps) * 1e6;
    CUDA_OK(cudaMemcpy(host, (char*)local + maxBytes, bytes, cudaMemcpyDeviceToHost));
    int bad = 0, wrong = 0;
    CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(int), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int r = 0; r < lsaSize; r++) want += (float)(r + 1) + (float)(i % 7);
      wrong += host[i] != want;
    }
    if (rank == 0) {
      bench_line l;
      bench_line_start(&l, "allreduce", "allreduce", (long long)bytes, size, iters);
      bench_line_str(&l, "dtype", "fp32");
      bench_line_int(&l, "reps", reps);
      bench_line_int(&l, "blocks", parts);
      bench_line_int(&l, "bad_status", bad);
      bench_line_int(&l, "wrong", wrong);
      bench_line_emit(&l, "us", us, NULL);
    }
    if (bad || wrong) {
      fprintf(stderr, "rank %d: all-reduce of %llu bytes: %d bad device statuses, %d wrong sums\n", rank, bytes, bad,
              wrong);
      failed = 1;
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CCO_OK(ccoBarrierAll(comm));
  }
  free(host);
  cudaFree(dBad);
  cudaStreamDestroy(stream);
  CCO_OK(ccoDevCommDestroy(comm, &dc));
  CCO_OK(ccoWindowDeregister(comm, win));
  CCO_OK(ccoCommDestroy(comm));
  return failed;
}
