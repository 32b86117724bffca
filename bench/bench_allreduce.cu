// One-shot LSA all-reduce latency (the kernel of examples/03_lsa_allreduce.cu),
// captured in a CUDA graph like its NCCL reference (bench/nccl_ref.py):
//
//   ccorun -n N cco-bench-allreduce          (one process per GPU, or under MPS)
//
// For each size (fp32, 1 KiB .. 1 MiB) a graph holds REPS back-to-back
// all-reduce kernels; it is replayed ITERS times after a warm-up replay, and
// the latency is the time per all-reduce. The sum is checked once per size.
// Prints one JSON object per size (rank 0).
#include <string.h>

#include "bench_common.cuh"
#include "cco/cco_device.h"
#include "lsa_examples.h"

#define REPS 20
#define ITERS 50
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

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank = 0, size = 0, lsaSize = 0;
  ccoCommRank(comm, &rank);
  ccoCommSize(comm, &size);
  ccoCommLsaSize(comm, &lsaSize);
  const size_t maxBytes = 1u << 20;
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
  const char* bb = getenv("CCO_BENCH_AR_BLOCK_BYTES");
  size_t blockBytes = bb && atol(bb) > 0 ? (size_t)atol(bb) : 2048;
  for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    size_t count = bytes / sizeof(float);
    // About CCO_BENCH_AR_BLOCK_BYTES (default 2 KiB) per block, at least one
    // block, at most MAX_PARTS: the sum reads peers across NVLink, which
    // wants many loads in flight, so many blocks (on 2 H200s, 32 KiB per
    // block took 22 us at 64 KiB, 2 KiB per block 7 us).
    int parts = (int)(bytes / blockBytes);
    parts = parts < 1 ? 1 : parts > maxParts ? maxParts : parts;
    fill_input<<<64, 256, 0, stream>>>((float*)local, count, rank);
    CUDA_OK(cudaStreamSynchronize(stream));
    CCO_OK(ccoBarrierAll(comm));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < REPS; r++)
      allreduce_kernel<<<parts, THREADS, 0, stream>>>(dc, win, maxBytes, count, dBad);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, stream)); // warm-up
    CUDA_OK(cudaStreamSynchronize(stream));
    CCO_OK(ccoBarrierAll(comm));
    double t0 = bench_now_s();
    for (int i = 0; i < ITERS; i++) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    double us = (bench_now_s() - t0) / (ITERS * REPS) * 1e6;
    CUDA_OK(cudaMemcpy(host, (char*)local + maxBytes, bytes, cudaMemcpyDeviceToHost));
    int bad = 0, wrong = 0;
    CUDA_OK(cudaMemcpy(&bad, dBad, sizeof(int), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int r = 0; r < lsaSize; r++) want += (float)(r + 1) + (float)(i % 7);
      wrong += host[i] != want;
    }
    if (rank == 0)
      printf("{\"bench\":\"lsa_allreduce_graph\",\"ranks\":%d,\"bytes\":%zu,\"blocks\":%d,\"reps\":%d,\"iters\":%d,"
             "\"us\":%.2f,\"bad_status\":%d,\"wrong\":%d}\n",
             size, bytes, parts, REPS, ITERS, us, bad, wrong);
    fflush(stdout);
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
  return 0;
}
