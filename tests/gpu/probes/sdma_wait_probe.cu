// Probe: which launch patterns let an SDMA put complete while a kernel of
// the same process waits for its signal. One rank (puts to itself), one
// 4 KiB signalled put per case, 3 s device timeout. Cases:
//   one-kernel q0/q1: the kernel posts, then waits (the examples' pattern);
//   wait-then-put:    a waiting kernel runs, then a second kernel posts;
//   put-then-wait:    the posting kernel ends before the waiting one starts;
//   wait-then-put 0B: the same with a zero-byte put (no copy, only the signal).
// Prints per case: status, time, and when the host saw the posting kernel end.
//
// Found with it on the H200 (driver 580): with lazy module loading (CUDA's
// default) the first "wait-then-put" times out: launching put_k for the
// first time loads it, and the load waits for the running wait_k. Later
// cases pass because put_k is loaded by then. CUDA_MODULE_LOADING=EAGER
// makes every case pass. Nothing in cco launches kernels, so this concerns
// applications whose kernels wait for kernels launched after them.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cco/cco.h"
#include "cco/cco_sdma.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__global__ void put_k(ccoDevComm dc, ccoWindow_t w, size_t bytes, uint32_t q, int* st) {
  st[0] = ccoSdmaPut(&dc, 0, w, 8192, w, 0, bytes, q, ccoSdmaSignalRemote, ccoCoopThread);
}
__global__ void wait_k(ccoDevComm dc, uint32_t q, uint64_t expected, int* st) {
  st[1] = ccoSdmaWaitSignal(&dc, 0, q, expected, 3000000000ull, ccoCoopThread);
}
__global__ void both_k(ccoDevComm dc, ccoWindow_t w, size_t bytes, uint32_t q, uint64_t expected, int* st) {
  st[0] = ccoSdmaPut(&dc, 0, w, 8192, w, 0, bytes, q, ccoSdmaSignalRemote, ccoCoopThread);
  st[1] = ccoSdmaWaitSignal(&dc, 0, q, expected, 3000000000ull, ccoCoopThread);
}

int main(void) {
  setenv("CCO_PLATFORM", "cuda", 1);
  cudaSetDevice(0);
  cudaFree(0);
  ccoComm* comm;
  if (ccoCommCreateFromEnv(0, &comm) != ccoSuccess) return 1;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  if (ccoDevCommCreate(comm, &reqs, &dc) != ccoSuccess) return 1;
  ccoWindow_t w;
  void* local;
  if (ccoWindowRegisterAlloc(comm, 1 << 20, &w, &local) != ccoSuccess) return 1;
  int* st;
  cudaMalloc(&st, 64);
  cudaStream_t s1, s2;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  uint64_t expected[2] = {0, 0};
  const char* names[] = {"one-kernel q0", "one-kernel q1", "wait-then-put q0", "wait-then-put q1",
                         "put-then-wait q0", "wait-then-put 0B q0", "one-kernel q0 again"};
  for (int c = 0; c < 7; c++) {
    uint32_t q = (c == 1 || c == 3) ? 1 : 0;
    size_t bytes = c == 5 ? 0 : 4096;
    int zero[2] = {-1, -1};
    cudaMemcpy(st, zero, sizeof(zero), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    uint64_t e = ++expected[q];
    double t0 = now_s(), putDone = -1;
    if (c == 0 || c == 1 || c == 6) both_k<<<1, 1, 0, s1>>>(dc, w, bytes, q, e, st);
    if (c == 2 || c == 3 || c == 5) {
      wait_k<<<1, 1, 0, s2>>>(dc, q, e, st);
      put_k<<<1, 1, 0, s1>>>(dc, w, bytes, q, st);
    }
    if (c == 4) {
      put_k<<<1, 1, 0, s1>>>(dc, w, bytes, q, st);
      wait_k<<<1, 1, 0, s2>>>(dc, q, e, st);
    }
    while (cudaStreamQuery(s1) == cudaErrorNotReady) {}
    putDone = now_s() - t0;
    cudaDeviceSynchronize();
    double all = now_s() - t0;
    int h[2];
    cudaMemcpy(h, st, sizeof(h), cudaMemcpyDeviceToHost);
    printf("{\"case\":\"%s\",\"put_status\":%d,\"wait_status\":%d,\"stream1_done_ms\":%.3f,\"all_done_ms\":%.3f}\n",
           names[c], h[0], h[1], putDone * 1e3, all * 1e3);
    fflush(stdout);
  }
  ccoWindowDeregister(comm, w);
  ccoDevCommDestroy(comm, &dc);
  ccoCommDestroy(comm);
  return 0;
}
