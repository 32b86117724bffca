/*
 * The collectives' host calls on the host platform, one rank of a job
 * started by ccorun:
 *
 *   ccorun -n N mp_coll_api [--phases LIST] [--big] [--max-count C] [--many K]
 *
 * Phases (comma list, default all but mismatch-algo):
 *   matrix    every call x type x operator x size x in place / out of place
 *             against a host reference, with guard bytes around every output;
 *             under CCO_ALGO, calls whose collective lacks the forced
 *             algorithm must fail as ccoCollAlgorithm says;
 *   bad       every argument error, on every rank alike: a clear error, and
 *             the communicator still works afterwards;
 *   many      K calls back to back with new inputs each time, no host barrier;
 *   destroy   a communicator destroyed right after its collectives;
 *   mismatch  ranks that disagree (counts, buffer offsets, one rank refusing
 *             its arguments): every rank fails, none hangs, and the next
 *             call and ccoCommGetAsyncError name the failure;
 *   mismatch-algo  counts that choose different algorithms on different
 *             ranks: every rank fails within CCO_COLL_TIMEOUT (run it with a
 *             short one);
 *   missing-rank  one rank never makes the call: the others fail with
 *             ccoTimeout after CCO_COLL_TIMEOUT, and the missing one learns
 *             of it.
 * --big adds 64 MiB all-reduces. Each phase that breaks a communicator
 * uses a communicator of its own, made through the main one.
 */
#include <math.h>
#include <stdint.h>

#include "../mp_util.h"
#include "coll_elems.h"

static int g_rank, g_size;
static ccoComm* g_comm;
static int g_big;
static size_t g_maxCount = 262147;
static int g_many = 300;

#define OK(comm, call) MP_CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(comm))

/* ------------------------------------------------------------ elements */

static const char* const k_kind_names[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast"};
enum { AR, AG, RS, A2A, BC, KINDS };


static uint16_t to_bf16(float f) {
  bits32 b = {.f = f};
  if ((b.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b.u >> 16) | 0x40u);
  return (uint16_t)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
}

/* Round to nearest even through the exact binary expansion: the values
 * used here are small multiples of 1/4, normal in fp16. */
static uint16_t to_fp16(float f) {
  if (f == 0.0f) return signbit(f) ? 0x8000u : 0;
  uint16_t sign = f < 0 ? 0x8000u : 0;
  float a = fabsf(f);
  int e = 0;
  float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  float scaled = ldexpf(m, 11); /* 11 significant bits */
  float r = nearbyintf(scaled); /* default rounding: to nearest even */
  if (r >= 2048.0f) r /= 2.0f, e++;
  int exp = e - 1 + 15;
  return (uint16_t)(sign | (uint16_t)(exp << 10) | ((uint16_t)r & 0x3ffu));
}


/* Input element i of `rank` in call `seed`: quarters in [-8, 8) (exact in
 * every float type, so only the operator matters) or integers. */
static float in_float(int rank, uint64_t i, uint32_t seed) {
  return (float)((int)((i * 7 + (uint64_t)rank * 13 + (uint64_t)seed * 5) % 64) - 32) * 0.25f;
}
static int32_t in_int(int rank, uint64_t i, uint32_t seed) {
  return (int32_t)((i * 7919 + (uint64_t)rank * 104729 + (uint64_t)seed * 31) % 2001) - 1000;
}

/* Element i of dtype, as bits (what a buffer must hold). */
static uint32_t encode(int dtype, float f, int32_t n) {
  switch (dtype) {
    case ccoBfloat16: return to_bf16(f);
    case ccoFloat16: return to_fp16(f);
    case ccoInt32: return (uint32_t)n;
    default: {
      bits32 b = {.f = f};
      return b.u;
    }
  }
}



static uint32_t input_bits(int dtype, int rank, uint64_t i, uint32_t seed) {
  return encode(dtype, in_float(rank, i, seed), in_int(rank, i, seed));
}

/* The reduction over ranks 0..n-1 of element i, in rank order. */
static uint32_t reduced_bits(int dtype, int op, int n, uint64_t i, uint32_t seed) {
  float f = in_float(0, i, seed);
  int32_t k = in_int(0, i, seed);
  for (int r = 1; r < n; r++) {
    float g = in_float(r, i, seed);
    int32_t m = in_int(r, i, seed);
    f = op == ccoSum ? f + g : op == ccoMax ? (g > f ? g : f) : (g < f ? g : f);
    k = op == ccoSum ? k + m : op == ccoMax ? (m > k ? m : k) : (m < k ? m : k);
  }
  return encode(dtype, f, k);
}

/* ------------------------------------------------------------ buffers */

#define GUARD_BYTES 256 /* before and after every output, must stay 0xA5 */
#define SENTINEL 0xA5

typedef struct {
  ccoComm* comm;
  ccoWindow_t sendWin, recvWin;
  char* send; /* window bases */
  char* recv;
  size_t bytes; /* of each window */
} bufs;

static int make_bufs(ccoComm* comm, size_t bytes, bufs* b) {
  memset(b, 0, sizeof(*b));
  b->comm = comm;
  b->bytes = bytes;
  void* s = NULL;
  void* r = NULL;
  int good = ccoWindowRegisterAlloc(comm, bytes, &b->sendWin, &s) == ccoSuccess &&
             ccoWindowRegisterAlloc(comm, bytes, &b->recvWin, &r) == ccoSuccess;
  MP_CHECK(good, "windows of %zu bytes: %s", bytes, ccoGetLastError(comm));
  b->send = s;
  b->recv = r;
  return good;
}

static void free_bufs(bufs* b) {
  if (b->sendWin) OK(b->comm, ccoWindowDeregister(b->comm, b->sendWin));
  if (b->recvWin) OK(b->comm, ccoWindowDeregister(b->comm, b->recvWin));
  memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------ one case */

typedef struct {
  int kind, dtype, op, root, inPlace;
  size_t count;
  uint32_t seed;
} coll_case;

static ccoResult_t call(ccoComm* comm, const coll_case* c, const void* send, void* recv) {
  switch (c->kind) {
    case AR: return ccoAllReduce(comm, send, recv, c->count, c->dtype, c->op, NULL);
    case AG: return ccoAllGather(comm, send, recv, c->count, c->dtype, NULL);
    case RS: return ccoReduceScatter(comm, send, recv, c->count, c->dtype, c->op, NULL);
    case A2A: return ccoAlltoAll(comm, send, recv, c->count, c->dtype, NULL);
    default: return ccoBroadcast(comm, send, recv, c->count, c->dtype, c->root, NULL);
  }
}

static size_t in_elems(const coll_case* c) { return c->kind == RS || c->kind == A2A ? c->count * g_size : c->count; }
static size_t out_elems(const coll_case* c) { return c->kind == AG || c->kind == A2A ? c->count * g_size : c->count; }

/* Expected bits of output element j on this rank. */
static uint32_t expected(const coll_case* c, uint64_t j) {
  uint64_t n = c->count, p = n ? j / n : 0, i = n ? j % n : 0;
  switch (c->kind) {
    case AR: return reduced_bits(c->dtype, c->op, g_size, j, c->seed);
    case AG: return input_bits(c->dtype, (int)p, i, c->seed);
    case RS: return reduced_bits(c->dtype, c->op, g_size, (uint64_t)g_rank * n + j, c->seed);
    case A2A: return input_bits(c->dtype, (int)p, (uint64_t)g_rank * n + i, c->seed);
    default: return input_bits(c->dtype, c->root, j, c->seed);
  }
}

static void describe(const coll_case* c, char* out, size_t size) {
  snprintf(out, size, "%s %s%s%s count %zu%s root %d seed %u", k_kind_names[c->kind], k_dtype_names[c->dtype],
           c->kind == AR || c->kind == RS ? " " : "", c->kind == AR || c->kind == RS ? k_op_names[c->op] : "",
           c->count, c->inPlace ? " in place" : "", c->root, c->seed);
}

/* Fills the inputs, runs the call, checks the output and the guards.
 * Returns the call's result (the check is skipped when it fails). */
static ccoResult_t run_case(bufs* b, const coll_case* c) {
  size_t es = esize_of(c->dtype);
  size_t inBytes = in_elems(c) * es, outBytes = out_elems(c) * es;
  /* Outputs start after a guard; inputs at an odd multiple of 64 bytes, so
   * offsets in the windows are not all zero. */
  char* out = b->recv + GUARD_BYTES;
  char* in = b->send + 192;
  memset(b->recv, SENTINEL, GUARD_BYTES + outBytes + GUARD_BYTES);
  if (c->inPlace) {
    if (c->kind == AG) {
      in = out + (size_t)g_rank * c->count * es;
    } else if (c->kind == RS) {
      memset(b->recv, SENTINEL, GUARD_BYTES + inBytes + GUARD_BYTES);
      in = out;
      out = in + (size_t)g_rank * c->count * es;
    } else {
      in = out;
    }
  }
  for (uint64_t i = 0; i < in_elems(c); i++) {
    int src = c->kind == BC && g_rank != c->root ? -1 : g_rank; /* non-roots' inputs are not read */
    put(in, c->dtype, i, src < 0 ? 0x5a5au : input_bits(c->dtype, src, i, c->seed));
  }
  ccoResult_t res = call(b->comm, c, in, out);
  if (res != ccoSuccess) return res;
  char what[160];
  describe(c, what, sizeof(what));
  size_t bad = 0, first = (size_t)-1;
  for (uint64_t j = 0; j < out_elems(c); j++)
    if (get(out, c->dtype, j) != expected(c, j)) {
      if (first == (size_t)-1) first = j;
      bad++;
    }
  MP_CHECK(bad == 0, "rank %d: %s: %zu elements wrong, first %zu: %#x, want %#x", g_rank, what, bad, first,
           bad ? get(out, c->dtype, first) : 0, bad ? expected(c, first) : 0);
  /* The guards: in place reduce-scatter's region is the whole input. */
  const unsigned char* lo = (const unsigned char*)b->recv;
  const unsigned char* hi = c->inPlace && c->kind == RS ? (const unsigned char*)b->recv + GUARD_BYTES + inBytes
                                                        : (const unsigned char*)out + outBytes;
  size_t touched = 0;
  for (size_t k = 0; k < GUARD_BYTES; k++) touched += (lo[k] != SENTINEL) + (hi[k] != SENTINEL);
  MP_CHECK(touched == 0, "rank %d: %s: %zu guard bytes around the output were written", g_rank, what, touched);
  return res;
}

/* ------------------------------------------------------------ phases */

static size_t window_bytes(size_t maxCount) {
  size_t bytes = maxCount * 4 * (size_t)g_size + 2 * GUARD_BYTES + 4096;
  if (g_big && bytes < (64u << 20) + 8192) bytes = (64u << 20) + 8192;
  return (bytes + 4095) & ~(size_t)4095;
}

/* Whether the collective has the algorithm CCO_ALGO forces (per
 * ccoCollAlgorithm); if not, the call must fail the same way. */
static int algorithm_allowed(const coll_case* c, ccoResult_t* refusal) {
  ccoAlgo_t algo;
  ccoResult_t res = ccoCollAlgorithm(g_comm, k_kind_names[c->kind], c->count * esize_of(c->dtype), &algo);
  *refusal = res;
  return res == ccoSuccess;
}

static void phase_matrix(void) {
  static const size_t counts[] = {1, 3, 17, 1000, 4099, 65537, 262147};
  bufs b;
  if (!make_bufs(g_comm, window_bytes(g_maxCount), &b)) return;
  int cases = 0, refused = 0;
  uint32_t seed = 1;
  for (size_t s = 0; s < sizeof(counts) / sizeof(counts[0]); s++) {
    size_t count = counts[s];
    if (count > g_maxCount) continue;
    int big = count > 10000;
    for (int kind = 0; kind < KINDS; kind++)
      for (int dtype = 0; dtype < 4; dtype++)
        for (int op = 0; op < 3; op++) {
          if (op > 0 && kind != AR && kind != RS) continue;
          /* Fewer combinations at large sizes: one operator per type. */
          if (big && (kind == AR || kind == RS) && op != dtype % 3) continue;
          for (int inPlace = 0; inPlace < 2; inPlace++) {
            if (inPlace && kind == A2A) continue;
            if (big && inPlace != (dtype & 1)) continue;
            int root = kind == BC ? (int)(seed % (uint32_t)g_size) : 0;
            coll_case c = {kind, dtype, op, root, inPlace, count, seed};
            seed++;
            ccoResult_t refusal;
            int allowed = algorithm_allowed(&c, &refusal);
            ccoResult_t res = run_case(&b, &c);
            char what[160];
            describe(&c, what, sizeof(what));
            if (allowed) {
              MP_CHECK(res == ccoSuccess, "rank %d: %s: %s", g_rank, what, ccoGetLastError(g_comm));
            } else {
              MP_CHECK(res == refusal && strstr(ccoGetLastError(g_comm), "CCO_ALGO"),
                       "rank %d: %s: got %d (%s), want the refusal %d", g_rank, what, res, ccoGetLastError(g_comm),
                       refusal);
              refused++;
            }
            cases++;
          }
        }
  }
  if (g_big) {
    size_t count = (64u << 20) / 4;
    for (int inPlace = 0; inPlace < 2; inPlace++) {
      coll_case c = {AR, ccoFloat32, ccoSum, 0, inPlace, count, seed++};
      ccoResult_t refusal;
      int allowed = algorithm_allowed(&c, &refusal);
      ccoResult_t res = run_case(&b, &c);
      MP_CHECK(allowed ? res == ccoSuccess : res == refusal, "rank %d: 64 MiB all-reduce: %s", g_rank,
               ccoGetLastError(g_comm));
      cases++;
    }
  }
  ccoResult_t async = ccoInternalError;
  OK(g_comm, ccoCommGetAsyncError(g_comm, &async));
  MP_CHECK(async == ccoSuccess, "rank %d: async error %d after the matrix", g_rank, async);
  free_bufs(&b);
  if (g_rank == 0) printf("matrix: %d calls (%d refused as CCO_ALGO says)\n", cases, refused);
}

/* One bad call on every rank alike: its result and a word of its message. */
static void expect_refused(ccoResult_t got, ccoResult_t want, const char* word, const char* what) {
  const char* text = ccoGetLastError(g_comm);
  MP_CHECK(got == want && strstr(text, word) != NULL, "rank %d: %s: got %d '%s', want %d mentioning '%s'", g_rank,
           what, got, text, want, word);
}

static void phase_bad(void) {
  bufs b;
  if (!make_bufs(g_comm, window_bytes(4096), &b)) return;
  char* s = b.send + 256;
  char* r = b.recv + 256;
  size_t winElems = b.bytes / 4;
  MP_CHECK(ccoAllReduce(NULL, s, r, 4, ccoFloat32, ccoSum, NULL) == ccoInvalidArgument, "NULL communicator");
  expect_refused(ccoAllReduce(g_comm, NULL, r, 4, ccoFloat32, ccoSum, NULL), ccoInvalidArgument, "sendbuf is NULL",
                 "NULL sendbuf");
  expect_refused(ccoAllGather(g_comm, s, NULL, 4, ccoFloat32, NULL), ccoInvalidArgument, "recvbuf is NULL",
                 "NULL recvbuf");
  expect_refused(ccoAllReduce(g_comm, s, r, 4, (ccoDataType_t)99, ccoSum, NULL), ccoInvalidArgument, "data type",
                 "unknown type");
  expect_refused(ccoReduceScatter(g_comm, s, r, 4, ccoFloat32, (ccoRedOp_t)7, NULL), ccoInvalidArgument,
                 "operator", "unknown operator");
  expect_refused(ccoBroadcast(g_comm, s, r, 4, ccoFloat32, -1, NULL), ccoInvalidArgument, "root", "root -1");
  expect_refused(ccoBroadcast(g_comm, s, r, 4, ccoFloat32, g_size, NULL), ccoInvalidArgument, "root",
                 "root nRanks");
  expect_refused(ccoAlltoAll(g_comm, s, r, SIZE_MAX / 3, ccoInt32, NULL), ccoInvalidArgument, "overflows",
                 "count x size x ranks overflow");
  expect_refused(ccoAllReduce(g_comm, s, r, winElems, ccoFloat32, ccoSum, NULL), ccoInvalidArgument,
                 "past the end", "past the window's end");
  expect_refused(ccoAllGather(g_comm, s, r, winElems / (size_t)g_size, ccoFloat32, NULL), ccoInvalidArgument,
                 "recvbuf", "all-gather's recvbuf past the window's end");
  float host[64];
  expect_refused(ccoAllReduce(g_comm, host, r, 4, ccoFloat32, ccoSum, NULL), ccoInvalidArgument, "sendbuf",
                 "sendbuf outside every window");
  expect_refused(ccoAllReduce(g_comm, s, host, 4, ccoFloat32, ccoSum, NULL), ccoInvalidArgument, "recvbuf",
                 "recvbuf outside every window");
  void* loose = NULL;
  OK(g_comm, ccoMemAlloc(g_comm, 4096, &loose));
  expect_refused(ccoAllReduce(g_comm, loose, r, 4, ccoFloat32, ccoSum, NULL), ccoInvalidArgument,
                 "no registered window", "symmetric memory without a window");
  OK(g_comm, ccoMemFree(g_comm, loose));
  expect_refused(ccoAllReduce(g_comm, s + 2, r, 4, ccoFloat32, ccoSum, NULL), ccoInvalidArgument, "aligned",
                 "misaligned sendbuf");
  expect_refused(ccoAllReduce(g_comm, s, s + 4, 4, ccoFloat32, ccoSum, NULL), ccoInvalidArgument, "overlap",
                 "overlapping buffers");
  expect_refused(ccoAlltoAll(g_comm, s, s, 4, ccoFloat32, NULL), ccoInvalidArgument, "never in place",
                 "in-place all-to-all");
  expect_refused(ccoAllGather(g_comm, r + 4, r, 2, ccoFloat32, NULL), ccoInvalidArgument, "overlap",
                 "all-gather overlapping other than in place");
  ccoAlgo_t algo;
  expect_refused(ccoCollAlgorithm(g_comm, "allshuffle", 8, &algo), ccoInvalidArgument, "unknown collective",
                 "ccoCollAlgorithm of an unknown collective");
  expect_refused(ccoCollAlgorithm(g_comm, NULL, 8, &algo), ccoInvalidArgument, "NULL", "ccoCollAlgorithm NULL");
  /* A call of 0 elements with no buffers is legal, like NCCL's. */
  OK(g_comm, ccoAllReduce(g_comm, NULL, NULL, 0, ccoFloat32, ccoSum, NULL));
  /* Still healthy: a good call works. */
  coll_case c = {AR, ccoFloat32, ccoSum, 0, 0, 1000, 77};
  OK(g_comm, run_case(&b, &c));
  ccoResult_t async = ccoInternalError;
  OK(g_comm, ccoCommGetAsyncError(g_comm, &async));
  MP_CHECK(async == ccoSuccess, "rank %d: async error %d after refused calls", g_rank, async);
  free_bufs(&b);
}

static void phase_many(void) {
  bufs b;
  if (!make_bufs(g_comm, window_bytes(4096), &b)) return;
  double t0 = mp_now();
  int failures = 0;
  for (int k = 0; k < g_many && failures < 5; k++) {
    int kind = k % 5 == 4 ? AG : AR; /* mostly all-reduces, the common case */
    coll_case c = {kind, k % 4, k % 3, 0, k & 1, (size_t)(1 + (k * 37) % 2000), (uint32_t)(1000 + k)};
    ccoResult_t refusal;
    if (!algorithm_allowed(&c, &refusal)) {
      MP_CHECK(run_case(&b, &c) == refusal, "rank %d: call %d: not refused as ccoCollAlgorithm says", g_rank, k);
    } else if (run_case(&b, &c) != ccoSuccess) {
      failures++;
      MP_CHECK(0, "rank %d: call %d: %s", g_rank, k, ccoGetLastError(g_comm));
    }
  }
  if (g_rank == 0)
    printf("many: %d calls back to back, %.1f us each\n", g_many, (mp_now() - t0) * 1e6 / (g_many ? g_many : 1));
  free_bufs(&b);
}

/* A new communicator of the same ranks, its id passed through the main one. */
static ccoComm* new_comm(void) {
  ccoUniqueId ids[64];
  if (g_rank == 0 && ccoGetUniqueId(&ids[0]) != ccoSuccess) memset(&ids[0], 0, sizeof(ids[0]));
  ccoUniqueId mine = ids[0];
  ccoResult_t res = ccoBootstrapAllGather(g_comm, &mine, ids, sizeof(ccoUniqueId));
  MP_CHECK(res == ccoSuccess && g_size <= 64, "rank %d: id exchange: %s", g_rank, ccoGetLastError(g_comm));
  ccoComm* comm = NULL;
  if (res == ccoSuccess) OK(NULL, ccoCommCreate(ids[0], g_size, g_rank, 0, &comm));
  return comm;
}

static void phase_destroy(void) {
  for (int round = 0; round < 3; round++) {
    ccoComm* comm = new_comm();
    if (!comm) return;
    bufs b;
    if (make_bufs(comm, 1 << 20, &b)) {
      for (int k = 0; k < 3; k++) {
        coll_case c = {k == 1 ? AG : AR, ccoFloat32, ccoSum, 0, 0, 4096, (uint32_t)(50 + k)};
        OK(comm, run_case(&b, &c));
      }
    }
    /* No deregistration, no barrier: destroy takes everything down. */
    OK(NULL, ccoCommDestroy(comm));
  }
  /* Destroyed before any collective: nothing was set up. */
  ccoComm* comm = new_comm();
  if (comm) OK(NULL, ccoCommDestroy(comm));
}

/* Every rank must fail the call, and then the next call and the async
 * error must name the failure. */
static void expect_job_failed(ccoComm* comm, ccoResult_t res, bufs* b, const char* what) {
  MP_CHECK(res != ccoSuccess, "rank %d: %s: the call succeeded", g_rank, what);
  ccoResult_t async = ccoSuccess;
  OK(comm, ccoCommGetAsyncError(comm, &async));
  MP_CHECK(async != ccoSuccess, "rank %d: %s: no async error", g_rank, what);
  coll_case c = {AR, ccoFloat32, ccoSum, 0, 0, 16, 9};
  ccoResult_t next = run_case(b, &c);
  MP_CHECK(next != ccoSuccess && strstr(ccoGetLastError(comm), "failed earlier"),
           "rank %d: %s: the next call gave %d '%s'", g_rank, what, next, ccoGetLastError(comm));
}

static void phase_mismatch(void) {
  if (g_size < 2) return; /* one rank cannot disagree with itself */
  /* Counts that differ (one-shot on every rank: LL carries no signature,
   * docs/collectives_host.md). */
  ccoComm* comm = new_comm();
  bufs b;
  if (comm && make_bufs(comm, 1 << 20, &b)) {
    coll_case c = {AR, ccoFloat32, ccoSum, 0, 0, g_rank == 0 ? (size_t)40000 : (size_t)40001, 3};
    ccoResult_t res = run_case(&b, &c);
    expect_job_failed(comm, res, &b, "mismatched counts");
    MP_CHECK(strstr(ccoGetLastError(comm), "disagree") || strstr(ccoGetLastError(comm), "rank"),
             "rank %d: the failure does not say why: %s", g_rank, ccoGetLastError(comm));
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
  /* The same count at other offsets on one rank. 160 KB: one-shot (LL
   * reads and writes only this rank's buffers, so offsets cannot clash). */
  comm = new_comm();
  if (comm && make_bufs(comm, 1 << 20, &b)) {
    size_t shift = g_rank == g_size - 1 ? 1024 : 0;
    ccoResult_t res = ccoAllReduce(comm, b.send + shift, b.recv + shift, 40000, ccoFloat32, ccoSum, NULL);
    expect_job_failed(comm, res, &b, "other offsets on one rank");
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
  /* One rank refuses its arguments (a misaligned sendbuf); the others
   * launched: every rank fails, none waits for the refusing one. */
  comm = new_comm();
  if (comm && make_bufs(comm, 1 << 20, &b)) {
    char* send = g_rank == 1 ? b.send + 2 : b.send;
    ccoResult_t res = ccoAllReduce(comm, send, b.recv, 40000, ccoFloat32, ccoSum, NULL);
    expect_job_failed(comm, res, &b, "one rank refusing its arguments");
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
}

static void phase_mismatch_algo(void) {
  if (g_size < 2) return;
  ccoComm* comm = new_comm();
  bufs b;
  if (comm && make_bufs(comm, 8 << 20, &b)) {
    /* 1 KiB (LL by default) against 4 MiB (two-shot). */
    size_t count = g_rank == 0 ? 256 : (size_t)(1 << 20);
    double t0 = mp_now();
    ccoResult_t res = ccoAllReduce(comm, b.send, b.recv, count, ccoFloat32, ccoSum, NULL);
    expect_job_failed(comm, res, &b, "counts choosing different algorithms");
    if (g_rank == 0) printf("mismatch-algo: every rank failed after %.2f s\n", mp_now() - t0);
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
  /* One rank refuses an LL-sized call: it launches nothing (LL has no
   * signature to fail the peers with), so the others wait out the timeout. */
  comm = new_comm();
  if (comm && make_bufs(comm, 1 << 20, &b)) {
    char* send = g_rank == 1 ? b.send + 2 : b.send;
    double t0 = mp_now();
    ccoResult_t res = ccoAllReduce(comm, send, b.recv, 256, ccoFloat32, ccoSum, NULL);
    if (g_rank == 1) {
      MP_CHECK(res == ccoInvalidArgument, "rank 1: misaligned sendbuf: %d '%s'", res, ccoGetLastError(comm));
      ccoResult_t async = ccoSuccess;
      while (async == ccoSuccess && mp_now() - t0 < 30) {
        mp_sleep(0.05);
        OK(comm, ccoCommGetAsyncError(comm, &async));
      }
      MP_CHECK(async != ccoSuccess, "rank 1: the peers' timeout did not reach the refusing rank");
    } else {
      expect_job_failed(comm, res, &b, "an LL call one rank refused");
    }
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
}

/* One rank never makes the call: the others fail with ccoTimeout after
 * CCO_COLL_TIMEOUT, and the failure reaches the missing rank too. */
static void phase_missing_rank(void) {
  if (g_size < 2) return;
  ccoComm* comm = new_comm();
  bufs b;
  if (comm && make_bufs(comm, 1 << 20, &b)) {
    coll_case c = {AR, ccoFloat32, ccoSum, 0, 0, 1000, 5};
    OK(comm, run_case(&b, &c)); /* the state is made together */
    double t0 = mp_now();
    if (g_rank == g_size - 1) {
      ccoResult_t async = ccoSuccess;
      while (async == ccoSuccess && mp_now() - t0 < 30) {
        mp_sleep(0.05);
        OK(comm, ccoCommGetAsyncError(comm, &async));
      }
      MP_CHECK(async != ccoSuccess, "rank %d: the missing rank was not told of the others' timeout", g_rank);
    } else {
      ccoResult_t res = ccoAllReduce(comm, b.send, b.recv, 1000, ccoFloat32, ccoSum, NULL);
      /* ccoTimeout, or ccoRemoteError when another waiting rank timed out
       * first and told this one; the message names the timeout either way. */
      MP_CHECK((res == ccoTimeout || res == ccoRemoteError) && strstr(ccoGetLastError(comm), "CCO_COLL_TIMEOUT"),
               "rank %d: a call whose peer never came: %d '%s'", g_rank, res, ccoGetLastError(comm));
      if (g_rank == 0) printf("missing-rank: the call failed after %.2f s\n", mp_now() - t0);
    }
    ccoResult_t next = ccoAllReduce(comm, b.send, b.recv, 16, ccoFloat32, ccoSum, NULL);
    MP_CHECK(next != ccoSuccess && strstr(ccoGetLastError(comm), "failed earlier"), "rank %d: next call: %d '%s'",
             g_rank, next, ccoGetLastError(comm));
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
}

int main(int argc, char** argv) {
  const char* phases = "matrix,bad,many,destroy,mismatch";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--phases") && i + 1 < argc) phases = argv[++i];
    else if (!strcmp(argv[i], "--big")) g_big = 1;
    else if (!strcmp(argv[i], "--max-count") && i + 1 < argc) g_maxCount = (size_t)strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--many") && i + 1 < argc) g_many = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--phases LIST] [--big] [--max-count C] [--many K]\n", argv[0]);
      return 2;
    }
  }
  setenv("CCO_PLATFORM", "host", 1); /* CPU threads run the blocks: host memory */
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "mp_coll_api: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  double t0 = mp_now();
  if (mp_has_phase(phases, "matrix")) phase_matrix();
  if (mp_has_phase(phases, "bad")) phase_bad();
  if (mp_has_phase(phases, "many")) phase_many();
  if (mp_has_phase(phases, "destroy")) phase_destroy();
  if (mp_has_phase(phases, "mismatch")) phase_mismatch();
  if (mp_has_phase(phases, "mismatch-algo")) phase_mismatch_algo();
  if (mp_has_phase(phases, "missing-rank")) phase_missing_rank();
  OK(g_comm, ccoCommDestroy(g_comm));
  if (g_rank == 0) printf("mp_coll_api: %d ranks, %.1f s\n", g_size, mp_now() - t0);
  return mp_finish("mp_coll_api");
}
