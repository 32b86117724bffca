// SDMA benchmarks, two ranks on one GPU under MPS (ccorun -n 2 cco-bench-sdma):
//
// 1. sdma_put_bw: rank 0's kernel posts 8 puts of S bytes to rank 1 on one
//    queue and waits for them (ccoSdmaQuietQueue), next to cudaMemcpyAsync
//    of the same 8 x S into the same peer window from the host, same run.
// 2. sdma_latency: ping-pong of 1 KiB signalled puts between the two ranks'
//    kernels; half a round trip is one put until its signal is seen. Next
//    to the naive floor measured in the same run: a kernel writes a request
//    to host-mapped memory, a host thread sees it, calls cudaMemcpyAsync
//    (1 KiB) and cuStreamWriteValue32 of a flag, the kernel sees the flag.
#include <cuda.h>
#include <pthread.h>

#include "bench_common.cuh"
#include "cco/cco_device.h"

static ccoComm* comm;

__global__ void put_burst(ccoDevComm dc, ccoWindow_t win, int peer, size_t bytes, int count, size_t dstOff,
                          int* status) {
  int bad = 0;
  for (int i = 0; i < count; i++)
    bad |= ccoSdmaPut(&dc, peer, win, dstOff, win, 0, bytes, 0, ccoSdmaSignalNone, ccoCoopThread) != ccoDevSuccess;
  bad |= ccoSdmaQuietQueue(&dc, peer, 0, ccoCoopThread) != ccoDevSuccess;
  *status = bad;
}

__global__ void ping_pong(ccoDevComm dc, ccoWindow_t win, int peer, int first, int iters, uint64_t base,
                          int* status) {
  int bad = 0;
  for (int i = 1; i <= iters && !bad; i++) {
    if (first) bad |= ccoSdmaPut(&dc, peer, win, 4096, win, 0, 1024, 1, ccoSdmaSignalRemote, ccoCoopThread);
    bad |= ccoSdmaWaitSignal(&dc, peer, 1, base + (uint64_t)i, 10000000000ull, ccoCoopThread);
    if (!first) bad |= ccoSdmaPut(&dc, peer, win, 4096, win, 0, 1024, 1, ccoSdmaSignalRemote, ccoCoopThread);
  }
  *status = bad;
}

// Naive floor: the kernel asks the host (request word in host-mapped
// memory), the host copies and writes a flag on a stream, the kernel waits.
__global__ void naive_kernel(volatile uint32_t* request, volatile uint32_t* flag, int iters) {
  for (int i = 1; i <= iters; i++) {
    *request = (uint32_t)i;
    __threadfence_system();
    while (*flag < (uint32_t)i) {
    }
  }
}

typedef struct {
  volatile uint32_t* request;
  CUdeviceptr flag;
  void* dst;
  const void* src;
  int iters;
  cudaStream_t stream;
} naive_ctx;

static void* naive_host(void* arg) {
  naive_ctx* c = (naive_ctx*)arg;
  for (int i = 1; i <= c->iters; i++) {
    while (*c->request < (uint32_t)i) {
    }
    cudaMemcpyAsync(c->dst, c->src, 1024, cudaMemcpyDeviceToDevice, c->stream);
    cuStreamWriteValue32(c->stream, c->flag, (cuuint32_t)i, CU_STREAM_WRITE_VALUE_DEFAULT);
  }
  return NULL;
}

static double naive_floor_us(void* dst, const void* src, int iters) {
  uint32_t* req = NULL;
  uint32_t* flag = NULL;
  CUDA_OK(cudaHostAlloc(&req, 64, cudaHostAllocMapped));
  CUDA_OK(cudaMalloc(&flag, 64));
  CUDA_OK(cudaMemset(flag, 0, 64));
  *req = 0;
  uint32_t* reqDev = NULL;
  CUDA_OK(cudaHostGetDevicePointer(&reqDev, req, 0));
  cudaStream_t kernelStream, copyStream;
  CUDA_OK(cudaStreamCreateWithFlags(&kernelStream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking));
  naive_ctx c = {req, (CUdeviceptr)flag, dst, src, iters, copyStream};
  pthread_t th;
  double t0 = bench_now_s();
  naive_kernel<<<1, 1, 0, kernelStream>>>(reqDev, flag, iters);
  pthread_create(&th, NULL, naive_host, &c);
  CUDA_OK(cudaStreamSynchronize(kernelStream));
  double us = (bench_now_s() - t0) * 1e6 / iters;
  pthread_join(th, NULL);
  cudaStreamDestroy(kernelStream);
  cudaStreamDestroy(copyStream);
  cudaFree(flag);
  cudaFreeHost(req);
  return us;
}

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(0));
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank, size, lsaRank, lsaSize;
  CCO_OK(ccoCommRank(comm, &rank));
  CCO_OK(ccoCommSize(comm, &size));
  CCO_OK(ccoCommLsaRank(comm, &lsaRank));
  CCO_OK(ccoCommLsaSize(comm, &lsaSize));
  if (lsaSize < 2) {
    fprintf(stderr, "cco-bench-sdma needs two ranks on one host\n");
    return 2;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = CCO_GDA_CONNECTION_NONE;
  ccoDevComm dc;
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  const size_t maxBytes = 1u << 30;
  ccoWindow_t win;
  void* local;
  CCO_OK(ccoWindowRegisterAlloc(comm, 2 * maxBytes, &win, &local));
  CUDA_OK(cudaMemset(local, 1, maxBytes));
  int* status;
  CUDA_OK(cudaMalloc(&status, sizeof(int)));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  CCO_OK(ccoBarrierAll(comm));

  // 1. bandwidth (rank 0 only; the other ranks wait at the barrier).
  if (lsaRank == 0) {
    void* peerDst = NULL;
    CCO_OK(ccoGetPeerPtr(comm, (char*)local + maxBytes, 1, &peerDst));
    for (size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
      const int count = 8, trials = 5;
      double sdma[trials], ref[trials];
      for (int t = 0; t < trials; t++) {
        int host = 1;
        cudaEventRecord(e0, st);
        put_burst<<<1, 1, 0, st>>>(dc, win, 1, bytes, count, maxBytes, status);
        cudaEventRecord(e1, st);
        CUDA_OK(cudaEventSynchronize(e1));
        CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
        sdma[t] = host ? 1e30 : bench_elapsed_ms(e0, e1);
        cudaEventRecord(e0, st);
        for (int i = 0; i < count; i++) cudaMemcpyAsync(peerDst, local, bytes, cudaMemcpyDeviceToDevice, st);
        cudaEventRecord(e1, st);
        CUDA_OK(cudaEventSynchronize(e1));
        ref[t] = bench_elapsed_ms(e0, e1);
      }
      double sMs = bench_median(sdma, trials), rMs = bench_median(ref, trials);
      double sGB = (double)bytes * count / (sMs * 1e-3) / 1e9, rGB = (double)bytes * count / (rMs * 1e-3) / 1e9;
      printf("{\"bench\":\"sdma_put_bw\",\"bytes\":%zu,\"puts_in_flight\":%d,\"sdma_GBps\":%.2f,"
             "\"ref_cudaMemcpyAsync_GBps\":%.2f,\"ratio\":%.3f}\n",
             bytes, count, sGB, rGB, sGB / rGB);
      fflush(stdout);
    }
  }
  CCO_OK(ccoBarrierAll(comm));

  // 2. latency: ranks 0 and 1 ping-pong; the others sit out.
  if (lsaRank < 2) {
    const int iters = 2000;
    uint64_t base = 0;  // fresh device communicator: signal slot (peer, queue 1) starts at 0
    int host = 1;
    CCO_OK(ccoBarrierAll(comm));
    double t0 = bench_now_s();
    ping_pong<<<1, 1, 0, st>>>(dc, win, lsaRank == 0 ? 1 : 0, lsaRank == 0, iters, base, status);
    CUDA_OK(cudaStreamSynchronize(st));
    double halfRtt = (bench_now_s() - t0) * 1e6 / iters / 2;
    CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
    CCO_OK(ccoBarrierAll(comm));
    if (lsaRank == 0) {
      double floorUs = naive_floor_us((char*)local + maxBytes, local, iters);
      printf("{\"bench\":\"sdma_latency\",\"bytes\":1024,\"iters\":%d,\"put_to_signal_us\":%.2f,"
             "\"ref_naive_floor_us\":%.2f,\"ratio\":%.3f,\"bad_status\":%d}\n",
             iters, halfRtt, floorUs, halfRtt / floorUs, host);
    }
  } else {
    CCO_OK(ccoBarrierAll(comm));
    CCO_OK(ccoBarrierAll(comm));
  }
  CCO_OK(ccoBarrierAll(comm));
  CCO_OK(ccoWindowDeregister(comm, win));
  CCO_OK(ccoDevCommDestroy(comm, &dc));
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
