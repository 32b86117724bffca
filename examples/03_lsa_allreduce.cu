// Example 03: a one-shot all-reduce over LSA, as a CUDA kernel.
//
//   ccorun -n 4 build/bin/cco-example-03-lsa-allreduce [--parts P] [--count N] [--iters I]
//
// A grid of P blocks; block b calls ccoExampleAllReduceBlock (lsa_examples.h,
// shared with the host twin 03_lsa_allreduce_host.c) with part = blockIdx.x,
// so each block has its own LSA barrier and its own share of the N elements.
// Each block sums its share of every peer's input into this rank's output,
// between two LSA barriers. fp32 and bf16, I iterations each with new inputs
// and no host barrier in between: the kernel's second barrier is what lets a
// rank rewrite its input. The output is compared with a host reference.
//
// Every rank's blocks must run at the same time (a block waits for the same
// block of every peer), so keep P * ranks within what the GPU holds at once.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "example_util.h"
#include "lsa_examples.h"

#define MAX_PARTS 64
#define THREADS 256

struct options {
  int parts, iters;
  size_t count;
};

static int parse_options(int argc, char** argv, options* o) {
  o->parts = 8;
  o->iters = 3;
  o->count = (1u << 22) + 3;  // not a multiple of the parts: shares differ by one
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--parts")) o->parts = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--count")) o->count = (size_t)strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--iters")) o->iters = atoi(argv[i + 1]);
    else return 0;
  }
  return (argc % 2) == 1 && o->parts >= 1 && o->parts <= MAX_PARTS && o->count >= 1 && o->iters >= 1;
}

// Input element i of the rank with LSA rank r: quarters in [-8, 8), exact in
// bf16, so only the sum rounds.
static float input_value(int r, int iter, size_t i) {
  return (float)((i * 7 + (size_t)r * 13 + (size_t)iter * 5) % 64) * 0.25f - 8.0f;
}

// The reference: peers added in LSA rank order, as the kernel does; bf16
// inputs are exact, so both dtypes sum the same floats.
static float reference_f32(int lsaSize, int iter, size_t i) {
  float acc = 0.0f;
  for (int p = 0; p < lsaSize; p++) acc += input_value(p, iter, i);
  return acc;
}

__global__ void allreduce_kernel(ccoDevComm dc, ccoWindow_t win, uint64_t inOff, uint64_t outOff, size_t count,
                                 ccoExampleDtype dtype, ccoDevStatus_t* status) {
  ccoDevStatus_t st = ccoExampleAllReduceBlock(&dc, win, inOff, outOff, count, dtype, blockIdx.x, gridDim.x);
  if (threadIdx.x == 0) status[blockIdx.x] = st;
}

// Inputs into this rank's window, through a host staging buffer.
static int write_inputs(char* in, void* host, int lsaRank, int iter, size_t count, ccoExampleDtype dtype) {
  for (size_t i = 0; i < count; i++) {
    float v = input_value(lsaRank, iter, i);
    if (dtype == ccoExampleF32) ((float*)host)[i] = v;
    else ((uint16_t*)host)[i] = ccoExampleF32ToBf16(v);
  }
  size_t elem = dtype == ccoExampleF32 ? sizeof(float) : sizeof(uint16_t);
  return CUDA_OK(cudaMemcpy(in, host, count * elem, cudaMemcpyHostToDevice));
}

// Copies the output back and counts the elements that differ from the reference.
static size_t count_bad(const char* out, void* host, int lsaSize, int iter, size_t count, ccoExampleDtype dtype) {
  size_t elem = dtype == ccoExampleF32 ? sizeof(float) : sizeof(uint16_t);
  if (!CUDA_OK(cudaMemcpy(host, out, count * elem, cudaMemcpyDeviceToHost))) return count;
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    float want = reference_f32(lsaSize, iter, i);
    if (dtype == ccoExampleF32) bad += ((const float*)host)[i] != want;
    else bad += ((const uint16_t*)host)[i] != ccoExampleF32ToBf16(want);
  }
  return bad;
}

// One launch of the grid; 1 when it ran and every block's barriers succeeded.
static int launch(const ccoDevComm& dc, ccoWindow_t win, uint64_t outOff, size_t count, ccoExampleDtype dtype,
                  int parts, ccoDevStatus_t* status) {
  allreduce_kernel<<<parts, THREADS>>>(dc, win, 0, outOff, count, dtype, status);
  if (!CUDA_OK(cudaGetLastError()) || !CUDA_OK(cudaDeviceSynchronize())) return 0;
  ccoDevStatus_t st[MAX_PARTS];
  if (!CUDA_OK(cudaMemcpy(st, status, sizeof(st[0]) * (size_t)parts, cudaMemcpyDeviceToHost))) return 0;
  int good = 1;
  for (int b = 0; b < parts; b++)
    if (st[b] != ccoDevSuccess) {
      fprintf(stderr, "rank %d: block %d: LSA barrier status %d\n", g_rank, b, (int)st[b]);
      good = 0;
    }
  return good;
}

int main(int argc, char** argv) {
  options o;
  if (!parse_options(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--parts 1..%d] [--count N] [--iters N]\n", argv[0], MAX_PARTS);
    return 2;
  }
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int lsaRank = 0, lsaSize = 0;
  ccoPlatform_t platform = ccoPlatformHost;
  ccoCommRank(comm, &g_rank);
  ccoCommLsaRank(comm, &lsaRank);
  ccoCommLsaSize(comm, &lsaSize);
  ccoCommPlatform(comm, &platform);
  if (platform != ccoPlatformCuda) {
    fprintf(stderr, "rank %d: no CUDA platform here (CCO_PLATFORM, no GPU?); "
            "cco-example-03-lsa-allreduce-host runs the same example on CPUs\n", g_rank);
    ccoCommDestroy(comm);
    printf("rank %d: LSA all-reduce kernel: FAILED (needs a GPU)\n", g_rank);
    return 1;
  }

  size_t areaBytes = (o.count * sizeof(float) + 4095) & ~(size_t)4095;  // fits either dtype
  uint64_t outOff = areaBytes;
  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = (uint32_t)o.parts;  // one barrier per block
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  void* host = malloc(areaBytes);
  ccoDevStatus_t* status = NULL;
  int good = host != NULL && CUDA_OK(cudaMalloc(&status, sizeof(*status) * MAX_PARTS)) &&
             OK(ccoWindowRegisterAlloc(comm, 2 * areaBytes, &win, &local)) && OK(ccoDevCommCreate(comm, &reqs, &dc));
  size_t bad = 0;
  static const ccoExampleDtype dtypes[2] = {ccoExampleF32, ccoExampleBf16};
  for (int d = 0; good && d < 2; d++) {
    for (int iter = 0; good && iter < o.iters; iter++) {
      good = write_inputs((char*)local, host, lsaRank, iter, o.count, dtypes[d]) &&
             launch(dc, win, outOff, o.count, dtypes[d], o.parts, status);
      size_t b = good ? count_bad((char*)local + outOff, host, lsaSize, iter, o.count, dtypes[d]) : 0;
      if (b) fprintf(stderr, "rank %d: %s iteration %d: %zu elements wrong\n", g_rank, d ? "bf16" : "fp32", iter, b);
      bad += b;
    }
  }
  good = good && bad == 0;

  if (dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &dc))) good = 0;
  if (win && !OK(ccoWindowDeregister(comm, win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  if (status) cudaFree(status);
  free(host);
  printf("rank %d: all-reduce kernel of %zu elements over %d LSA ranks, fp32 and bf16, %d iterations each, "
         "%d blocks of %d threads with their own LSA barriers, checked against a host reference: %s\n",
         g_rank, o.count, lsaSize, o.iters, o.parts, THREADS, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
