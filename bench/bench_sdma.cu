// SDMA benchmarks, two ranks on one GPU under MPS (ccorun -n 2 cco-bench-sdma):
//
// 1. sdma_put_bw: rank 0's kernel posts N puts of S bytes to rank 1 on one
//    queue and waits for them (ccoSdmaQuietQueue), next to cudaMemcpyAsync
//    of the same N x S into the same peer window from the host, same run.
//    N = 8, and N = a stream deep enough to move 512 MiB (at most 256, the
//    ring depth): the first shows the fixed cost, the second the rate.
// 2. sdma_latency: ping-pong of 1 KiB signalled puts between the two ranks'
//    kernels; half a round trip is one put until its signal is seen. Next
//    to the naive floor measured in the same run: a kernel writes a request
//    to host-mapped memory, a host thread sees it, calls cudaMemcpyAsync
//    (1 KiB) and cuStreamWriteValue32 of a flag, the kernel sees the flag.
// 3. sdma_issue_interval: one thread posts 4096 1 KiB puts on one queue
//    without signals and then waits for them; time per put.
// 4. sdma_overlap: a compute-bound kernel (FMA chains, one block per SM)
//    alone, then while SDMA moves 1 GiB into the peer's window, then while
//    an SM copy kernel (the LSA path) moves the same 1 GiB: slowdowns.
#include <cuda.h>
#include <pthread.h>

#include "bench_common.cuh"
#include "cco/cco_sdma.h"

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

__global__ void issue_stream(ccoDevComm dc, ccoWindow_t win, int peer, int count, size_t dstOff, int* status) {
  int bad = 0;
  for (int i = 0; i < count; i++)
    bad |= ccoSdmaPut(&dc, peer, win, dstOff + (size_t)(i % 64) * 1024, win, 0, 1024, 0, ccoSdmaSignalNone,
                      ccoCoopThread) != ccoDevSuccess;
  bad |= ccoSdmaQuietQueue(&dc, peer, 0, ccoCoopThread) != ccoDevSuccess;
  *status = bad;
}

// FMA chains with no memory traffic: the SMs' work the copies should not slow.
__global__ void compute_kernel(float* out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-3f;
  for (int i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    d = fmaf(d, c, b);
    b = fmaf(b, a, -d) * 1e-6f + 1.0001f;
  }
  if (a + d == 12345.f) out[0] = b;
}

__global__ void sm_copy_kernel(uint4* dst, const uint4* src, size_t n) { bench_copy_u4(dst, src, n); }

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
  // Kernels here wait for work of kernels launched after them. With lazy
  // module loading (CUDA's default) the first launch of a kernel loads it,
  // and loading waits for the running kernels: the waiter would starve the
  // launch it waits for. Load every kernel at start instead.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  CUDA_OK(pick_rank_device());
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
  reqs.gdaConnectionType = ccoGdaConnectionNone;
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
      size_t deep = (512u << 20) / bytes;
      int counts[2] = {8, (int)(deep < 8 ? 8 : deep > 256 ? 256 : deep)};
      for (int c = 0; c < 2; c++) {
        const int count = counts[c], trials = 5;
        if (c == 1 && count == counts[0]) break;
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
    // 3. issue interval.
    {
      const int count = 4096, trials = 5;
      double ms[trials];
      int host = 0, bad = 0;
      for (int t = 0; t < trials; t++) {
        cudaEventRecord(e0, st);
        issue_stream<<<1, 1, 0, st>>>(dc, win, 1, count, maxBytes, status);
        cudaEventRecord(e1, st);
        CUDA_OK(cudaEventSynchronize(e1));
        CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
        bad |= host;
        ms[t] = bench_elapsed_ms(e0, e1);
      }
      printf("{\"bench\":\"sdma_issue_interval\",\"bytes\":1024,\"puts\":%d,\"us_per_put\":%.3f,"
             "\"bad_status\":%d}\n",
             count, bench_median(ms, trials) * 1e3 / count, bad);
      fflush(stdout);
    }
    // 4. overlap.
    {
      int sms = 0;
      CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      float* sink;
      CUDA_OK(cudaMalloc(&sink, 64));
      cudaStream_t side;
      CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
      cudaEvent_t c0, c1;
      cudaEventCreate(&c0);
      cudaEventCreate(&c1);
      const int iters = 400000;
      double t[3][5];
      int bad = 0;
      for (int trial = 0; trial < 5; trial++)
        for (int mode = 0; mode < 3; mode++) {
          cudaEventRecord(c0, st);
          compute_kernel<<<sms, 256, 0, st>>>(sink, iters);
          cudaEventRecord(c1, st);
          if (mode == 1) put_burst<<<1, 1, 0, side>>>(dc, win, 1, 16u << 20, 64, maxBytes, status);
          if (mode == 2)
            sm_copy_kernel<<<sms, 1024, 0, side>>>((uint4*)peerDst, (const uint4*)local, maxBytes / sizeof(uint4));
          CUDA_OK(cudaEventSynchronize(c1));
          CUDA_OK(cudaStreamSynchronize(side));
          if (mode == 1) {
            int host = 0;
            CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
            bad |= host;
          }
          t[mode][trial] = bench_elapsed_ms(c0, c1);
        }
      double alone = bench_median(t[0], 5), withSdma = bench_median(t[1], 5), withLsa = bench_median(t[2], 5);
      printf("{\"bench\":\"sdma_overlap\",\"compute_alone_ms\":%.3f,\"with_sdma_1GiB_ms\":%.3f,"
             "\"with_lsa_copy_1GiB_ms\":%.3f,\"sdma_slowdown\":%.3f,\"lsa_slowdown\":%.3f,\"bad_status\":%d}\n",
             alone, withSdma, withLsa, withSdma / alone, withLsa / alone, bad);
      fflush(stdout);
      cudaStreamDestroy(side);
      cudaFree(sink);
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
