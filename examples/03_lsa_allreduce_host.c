/*
 * Example 03, host twin: a one-shot all-reduce over LSA on the host platform.
 *
 *   ccorun -n 4 build/bin/cco-example-03-lsa-allreduce-host [--parts P] [--count N] [--iters I]
 *
 * The same kernel body as examples/03_lsa_allreduce.cu: P CPU threads per
 * rank each play one block, calling ccoExampleAllReduceBlock with its own
 * part (and so its own LSA barrier index) on a share of N elements. Each
 * block sums its share of every peer's input into this rank's output,
 * between two LSA barriers. fp32 and bf16, I iterations each with new
 * inputs and no host barrier in between: the kernel's own second barrier is
 * what lets a rank rewrite its input. Every output element is compared
 * with a host reference, and the bf16 conversions with known bit patterns.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "example_util.h"
#include "lsa_examples.h"

#define MAX_PARTS 64

typedef struct {
  int parts, iters;
  size_t count;
} options;

static int parse_options(int argc, char** argv, options* o) {
  o->parts = 4;
  o->iters = 3;
  o->count = 100003; /* not a multiple of the parts: shares differ by one */
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--parts")) o->parts = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--count")) o->count = (size_t)strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--iters")) o->iters = atoi(argv[i + 1]);
    else return 0;
  }
  return (argc % 2) == 1 && o->parts >= 1 && o->parts <= MAX_PARTS && o->count >= 1 && o->iters >= 1;
}

/* Input element i of the rank with LSA rank r: quarters in [-8, 8), exact
 * in bf16, so only the sum rounds. */
static float input_value(int r, int iter, size_t i) {
  return (float)((i * 7 + (size_t)r * 13 + (size_t)iter * 5) % 64) * 0.25f - 8.0f;
}

/* The reference: peers added in LSA rank order, as the kernel does. */
/* bf16 inputs are exact, so both dtypes sum the same floats. */
static float reference_f32(int lsaSize, int iter, size_t i) {
  float acc = 0.0f;
  for (int p = 0; p < lsaSize; p++) acc += input_value(p, iter, i);
  return acc;
}

/* Known conversions: exact values, ties to even both ways, rounding up,
 * overflow to infinity and NaN staying NaN. */
static int bf16_helpers_ok(void) {
  typedef union {
    float f;
    uint32_t u;
  } bits;
  static const uint32_t in[] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0xc0490fdbu, 0x7f7fffffu, 0x7fc00001u};
  static const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc049, 0x7f80, 0x7fc0};
  for (size_t k = 0; k < sizeof(in) / sizeof(in[0]); k++) {
    bits b;
    b.u = in[k];
    uint16_t got = ccoExampleF32ToBf16(b.f);
    if (got != want[k]) {
      fprintf(stderr, "rank %d: bf16(%#x) = %#x, want %#x\n", g_rank, in[k], got, want[k]);
      return 0;
    }
  }
  return ccoExampleBf16ToF32(0x3f80) == 1.0f && ccoExampleBf16ToF32(0xc049) == -3.140625f;
}

typedef struct {
  const ccoDevComm* dc;
  ccoWindow_t win;
  uint64_t inOff, outOff;
  size_t count;
  ccoExampleDtype dtype;
  uint32_t part, nParts;
  ccoDevStatus_t status;
} block_job;

static void* block_thread(void* arg) {
  block_job* b = (block_job*)arg;
  b->status = ccoExampleAllReduceBlock(b->dc, b->win, b->inOff, b->outOff, b->count, b->dtype, b->part, b->nParts);
  return NULL;
}

/* "Launches" the grid: one thread per part; 1 when every block succeeded. */
static int launch(const ccoDevComm* dc, ccoWindow_t win, uint64_t outOff, size_t count, ccoExampleDtype dtype,
                  int nParts) {
  block_job jobs[MAX_PARTS];
  pthread_t th[MAX_PARTS];
  int started = 0, good = 1;
  for (; started < nParts; started++) {
    jobs[started] = (block_job){dc, win, 0, outOff, count, dtype, (uint32_t)started, (uint32_t)nParts, ccoDevSuccess};
    if (pthread_create(&th[started], NULL, block_thread, &jobs[started]) != 0) break;
  }
  for (int p = 0; p < started; p++) {
    pthread_join(th[p], NULL);
    if (jobs[p].status != ccoDevSuccess) {
      fprintf(stderr, "rank %d: block %d: LSA barrier status %d\n", g_rank, p, (int)jobs[p].status);
      good = 0;
    }
  }
  return good && started == nParts;
}

static void write_inputs(void* in, int lsaRank, int iter, size_t count, ccoExampleDtype dtype) {
  for (size_t i = 0; i < count; i++) {
    float v = input_value(lsaRank, iter, i);
    if (dtype == ccoExampleF32) ((float*)in)[i] = v;
    else ((uint16_t*)in)[i] = ccoExampleF32ToBf16(v);
  }
}

static size_t count_bad(const void* out, int lsaSize, int iter, size_t count, ccoExampleDtype dtype) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    float want = reference_f32(lsaSize, iter, i);
    if (dtype == ccoExampleF32) bad += ((const float*)out)[i] != want;
    else bad += ((const uint16_t*)out)[i] != ccoExampleF32ToBf16(want);
  }
  return bad;
}

int main(int argc, char** argv) {
  options o;
  if (!parse_options(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--parts 1..%d] [--count N] [--iters N]\n", argv[0], MAX_PARTS);
    return 2;
  }
  /* CPU threads read and write the windows, so they must live in host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  ccoComm* comm = NULL;
  if (!OK(ccoCommCreateFromEnv(0, &comm))) return 1;
  int lsaRank = 0, lsaSize = 0;
  ccoCommRank(comm, &g_rank);
  ccoCommLsaRank(comm, &lsaRank);
  ccoCommLsaSize(comm, &lsaSize);

  size_t areaBytes = (o.count * sizeof(float) + 4095) & ~(size_t)4095; /* fits either dtype */
  uint64_t outOff = areaBytes;
  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = (uint32_t)o.parts; /* one barrier per block */
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  int good = bf16_helpers_ok() && OK(ccoWindowRegisterAlloc(comm, 2 * areaBytes, &win, &local)) &&
             OK(ccoDevCommCreate(comm, &reqs, &dc));
  size_t bad = 0;
  static const ccoExampleDtype dtypes[2] = {ccoExampleF32, ccoExampleBf16};
  for (int d = 0; good && d < 2; d++) {
    for (int iter = 0; good && iter < o.iters; iter++) {
      write_inputs(local, lsaRank, iter, o.count, dtypes[d]);
      good = launch(&dc, win, outOff, o.count, dtypes[d], o.parts);
      size_t b = good ? count_bad((char*)local + outOff, lsaSize, iter, o.count, dtypes[d]) : 0;
      if (b) fprintf(stderr, "rank %d: %s iteration %d: %zu elements wrong\n", g_rank, d ? "bf16" : "fp32", iter, b);
      bad += b;
    }
  }
  good = good && bad == 0;

  if (dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &dc))) good = 0;
  if (win && !OK(ccoWindowDeregister(comm, win))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;
  printf("rank %d: all-reduce of %zu elements over %d LSA ranks, fp32 and bf16, %d iterations each, "
         "%d CPU-thread blocks with their own LSA barriers, checked against a host reference: %s\n",
         g_rank, o.count, lsaSize, o.iters, o.parts, good ? "OK" : "FAILED");
  return good ? 0 : 1;
}
