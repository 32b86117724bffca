/*
 * The collectives across hosts on the host platform (the hierarchical
 * algorithm: LSA inside each host, GDA between hosts through the proxy and
 * libfabric), one rank of a job started by
 *
 *   ccorun -n N --virtual-hosts H mp_coll_hier [--phases LIST] [--max-count C]
 *
 * --virtual-hosts makes contiguous blocks of ranks, so the rail order the
 * blocks reduce in is host order, which the reference follows. Phases
 * (comma list, default all):
 *   matrix    all-reduce: every type x operator x count (1 to a few MiB, odd
 *             ones, several chunks per part) x in place / out of place, at
 *             offsets that shift the elements off 16-byte boundaries, each
 *             output element against a host reference reduced in the
 *             blocks' order (LSA rank order inside each host, then host
 *             order; half types in fp32, rounded once), with guard bytes;
 *             then the ranks compare a hash of all their outputs;
 *   many      small all-reduces back to back, counts changing, no barrier;
 *   barrier   ccoBarrierOnStream (the world barrier across hosts) between
 *             collectives;
 *   mismatch  a rank of the last host with another count, then with a
 *             refused argument: every rank fails, none hangs;
 *   destroy   communicators destroyed right after their collectives;
 *   unequal   (alone, on hosts of different sizes) every collective is
 *             refused with ccoUnsupported;
 *   missing   (not by default; with a short CCO_COLL_TIMEOUT) a rank that
 *             never calls: the others fail in time, nothing hangs;
 *   algo-demand  (not by default; under CCO_ALGO=allreduce=twoshot) the
 *             demand is refused, the other collectives run.
 * All-gather, reduce-scatter, broadcast (every root) and all-to-all run
 * through the matrix (one operator per type at large counts), the calls
 * back to back and the mismatches too.
 * Exits 77 ("did not run") where the network engine does not open.
 */
#include <stdint.h>

#include "../mp_util.h"
#include "coll_elems.h"
#include "cco/cco_coll.h"

static int g_rank, g_size, g_lsaSize, g_nNodes;
static ccoComm* g_comm;
static size_t g_maxCount = (1u << 20) + 3;
static uint64_t g_hash = 1469598103934665603ull; /* of the outputs every rank shares, compared */

#define OK(comm, call) MP_CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(comm))




/* ------------------------------------------------------------ values */

static uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

/* Input element i of `rank` in call `seed`, as the bits its buffer holds:
 * floats with full mantissas (sums depend on the order), ints over a wide
 * range (sums wrap). */
static uint32_t input_bits(int dtype, int rank, uint64_t i, uint32_t seed) {
  uint32_t h = mix32(i * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 0x632be59bd9b4e019ull + seed);
  if (dtype == ccoInt32) return h;
  bits32 b = {.f = ((float)(h % 2000001u) - 1000000.0f) / 7919.0f};
  if (dtype == ccoBfloat16) return ccoFloatToBfloat16(b.f);
  if (dtype == ccoFloat16) return ccoFloatToFloat16(b.f / 64.0f);
  return b.u;
}

static float widen(int dtype, uint32_t bits) {
  if (dtype == ccoBfloat16) return ccoBfloat16ToFloat((uint16_t)bits);
  if (dtype == ccoFloat16) return ccoFloat16ToFloat((uint16_t)bits);
  bits32 b = {.u = bits};
  return b.f;
}

/* acc op x, as the blocks do it (no NaNs here). */
static float op_f(int op, float a, float b) { return op == ccoSum ? a + b : op == ccoMax ? (b > a ? b : a) : (b < a ? b : a); }
static int32_t op_i(int op, int32_t a, int32_t b) {
  return op == ccoSum ? (int32_t)((uint32_t)a + (uint32_t)b) : op == ccoMax ? (b > a ? b : a) : (b < a ? b : a);
}

/* Element i of the result: each host's ranks in LSA order (contiguous
 * blocks of g_lsaSize world ranks), then the hosts in order, in fp32 or
 * int32; rounded once. */
static uint32_t reduced_bits(int dtype, int op, uint64_t i, uint32_t seed) {
  float f = 0;
  int32_t k = 0;
  for (int h = 0; h < g_nNodes; h++) {
    float pf = 0;
    int32_t pk = 0;
    for (int l = 0; l < g_lsaSize; l++) {
      uint32_t x = input_bits(dtype, h * g_lsaSize + l, i, seed);
      pf = l ? op_f(op, pf, widen(dtype, x)) : widen(dtype, x);
      pk = l ? op_i(op, pk, (int32_t)x) : (int32_t)x;
    }
    f = h ? op_f(op, f, pf) : pf;
    k = h ? op_i(op, k, pk) : pk;
  }
  if (dtype == ccoInt32) return (uint32_t)k;
  if (dtype == ccoBfloat16) return ccoFloatToBfloat16(f);
  if (dtype == ccoFloat16) return ccoFloatToFloat16(f);
  bits32 b = {.f = f};
  return b.u;
}



/* ------------------------------------------------------------ buffers */

#define GUARD_BYTES 256
#define SENTINEL 0xA5

typedef struct {
  ccoComm* comm;
  ccoWindow_t sendWin, recvWin;
  char* send;
  char* recv;
} bufs;

static int make_bufs(ccoComm* comm, size_t bytes, bufs* b) {
  memset(b, 0, sizeof(*b));
  b->comm = comm;
  void* s = NULL;
  void* r = NULL;
  int good = ccoWindowRegisterAlloc(comm, bytes, &b->sendWin, &s) == ccoSuccess &&
             ccoWindowRegisterAlloc(comm, bytes, &b->recvWin, &r) == ccoSuccess;
  MP_CHECK(good, "windows of %zu bytes: %s", bytes, ccoGetLastError(comm));
  b->send = s;
  b->recv = r;
  return good;
}

static size_t window_bytes(size_t maxCount) { return (maxCount * 4 + 2 * GUARD_BYTES + 8192 + 4095) & ~(size_t)4095; }

/* All-gather's and reduce-scatter's count for an all-reduce count: the
 * same size of the larger buffer. */
static size_t gather_count(size_t count) { return count / (size_t)g_size ? count / (size_t)g_size : 1; }

enum { AR, AG, RS, BC, A2A };
static const char* const k_kind_names[] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast", "all-to-all"};

typedef struct {
  int kind, dtype, op, inPlace;
  size_t count, sendShift, recvShift; /* elements off the buffers' usual places */
  uint32_t seed;
  int root; /* broadcast */
} ar_case;

static void describe(const ar_case* c, char* out, size_t size) {
  snprintf(out, size, "%s %s %s count %zu%s shifts %zu/%zu seed %u root %d", k_kind_names[c->kind],
           k_dtype_names[c->dtype], c->kind == AR || c->kind == RS ? k_op_names[c->op] : "", c->count, c->inPlace ? " in place" : "",
           c->sendShift, c->recvShift, c->seed, c->root);
}

static size_t out_elems(const ar_case* c) { return c->kind == AG || c->kind == A2A ? c->count * (size_t)g_size : c->count; }
static size_t in_elems(const ar_case* c) { return c->kind == RS || c->kind == A2A ? c->count * (size_t)g_size : c->count; }

static uint32_t expected(const ar_case* c, uint64_t j) {
  if (c->kind == AG) return input_bits(c->dtype, (int)(j / c->count), j % c->count, c->seed);
  if (c->kind == BC) return input_bits(c->dtype, c->root, j, c->seed);
  if (c->kind == A2A) /* block p came from rank p, its block g_rank */
    return input_bits(c->dtype, (int)(j / c->count), (uint64_t)g_rank * c->count + j % c->count, c->seed);
  if (c->kind == RS) return reduced_bits(c->dtype, c->op, (uint64_t)g_rank * c->count + j, c->seed);
  return reduced_bits(c->dtype, c->op, j, c->seed);
}

/* Fills this rank's input, runs the call, checks every output element and
 * the guards; returns the call's result. */
static ccoResult_t run_case(bufs* b, const ar_case* c, int check) {
  size_t es = esize_of(c->dtype), bytes = out_elems(c) * es, mineOff = (size_t)g_rank * c->count * es;
  char* out = b->recv + GUARD_BYTES + c->recvShift * es;
  char* in = b->send + 192 + c->sendShift * es;
  /* The guarded region: the output, or in place reduce-scatter's input. */
  char* region = out;
  size_t regionBytes = bytes;
  if (c->inPlace && c->kind == RS) {
    in = out, out = in + mineOff, regionBytes = in_elems(c) * es;
  } else if (c->inPlace) {
    in = c->kind == AG ? out + mineOff : out;
  }
  memset(region - GUARD_BYTES, SENTINEL, GUARD_BYTES + regionBytes + GUARD_BYTES);
  int from = c->kind == BC && g_rank != c->root ? -1 : g_rank; /* non-roots' inputs are not read */
  for (uint64_t i = 0; i < in_elems(c); i++)
    put(in, c->dtype, i, from < 0 ? 0x5a5au : input_bits(c->dtype, from, i, c->seed));
  ccoResult_t res = c->kind == AG   ? ccoAllGather(b->comm, in, out, c->count, c->dtype, NULL)
                    : c->kind == BC ? ccoBroadcast(b->comm, in, out, c->count, c->dtype, c->root, NULL)
                    : c->kind == RS ? ccoReduceScatter(b->comm, in, out, c->count, c->dtype, c->op, NULL)
                    : c->kind == A2A ? ccoAlltoAll(b->comm, in, out, c->count, c->dtype, NULL)
                                    : ccoAllReduce(b->comm, in, out, c->count, c->dtype, c->op, NULL);
  if (res != ccoSuccess || !check) return res;
  char what[160];
  describe(c, what, sizeof(what));
  size_t bad = 0, first = 0;
  for (uint64_t j = 0; j < out_elems(c); j++) {
    uint32_t got = get(out, c->dtype, j);
    if (c->kind != RS && c->kind != A2A) g_hash = (g_hash ^ got) * 1099511628211ull; /* the same everywhere */
    if (got != expected(c, j) && bad++ == 0) first = j;
  }
  MP_CHECK(bad == 0, "rank %d: %s: %zu elements wrong, first %zu: %#x, want %#x", g_rank, what, bad, first,
           bad ? get(out, c->dtype, first) : 0, bad ? expected(c, first) : 0);
  const unsigned char* lo = (const unsigned char*)region - GUARD_BYTES;
  const unsigned char* hi = (const unsigned char*)region + regionBytes;
  size_t touched = 0;
  for (size_t k = 0; k < GUARD_BYTES; k++) touched += (lo[k] != SENTINEL) + (hi[k] != SENTINEL);
  MP_CHECK(touched == 0, "rank %d: %s: %zu guard bytes around the output were written", g_rank, what, touched);
  return res;
}

/* ------------------------------------------------------------ phases */

static void phase_matrix(void) {
  /* Small and odd, one part's chunk and more, several chunks per part. */
  static const size_t counts[] = {1, 2, 3, 17, 1000, 4099, 40001, 131075, (1u << 20) + 3};
  bufs b;
  if (!make_bufs(g_comm, window_bytes(g_maxCount), &b)) return;
  int cases = 0;
  uint32_t seed = 1;
  double t0 = mp_now();
  for (size_t s = 0; s < sizeof(counts) / sizeof(counts[0]); s++) {
    size_t count = counts[s];
    if (count > g_maxCount) continue;
    int big = count > 5000, huge = count > 500000;
    for (int dtype = 0; dtype < 4; dtype++)
      for (int op = 0; op < 3; op++)
        for (int inPlace = 0; inPlace < 2; inPlace++) {
          /* Fewer combinations as sizes grow: one operator per type, then
           * three calls in all. */
          if (big && (op != (dtype + (int)s) % 3 || inPlace != ((dtype + (int)s) & 1))) continue;
          if (huge && dtype == ccoFloat16) continue;
          /* All-gather and broadcast once per type and count, with the
           * first operator. */
          for (int kind = AR; kind <= A2A; kind++) {
            if ((kind == AG || kind == BC || kind == A2A) && op != (big ? (dtype + (int)s) % 3 : 0)) continue;
            if (kind == A2A && inPlace) continue; /* never in place */
            size_t n = kind == AG || kind == RS || kind == A2A ? gather_count(count) : count;
            ar_case c = {kind, dtype, op, inPlace, n, seed % 4, (seed / 4) % 3, seed, (int)(seed % (uint32_t)g_size)};
            seed++;
            char what[160];
            describe(&c, what, sizeof(what));
            ccoResult_t res = run_case(&b, &c, 1);
            MP_CHECK(res == ccoSuccess, "rank %d: %s: %s", g_rank, what, ccoGetLastError(g_comm));
            cases++;
          }
        }
  }
  uint64_t* hashes = calloc((size_t)g_size, sizeof(uint64_t));
  OK(g_comm, ccoBootstrapAllGather(g_comm, &g_hash, hashes, sizeof(uint64_t)));
  int same = 1;
  for (int r = 0; r < g_size; r++) same &= hashes[r] == g_hash;
  MP_CHECK(same, "rank %d: the ranks' outputs differ (hashes)", g_rank);
  free(hashes);
  ccoResult_t async = ccoInternalError;
  OK(g_comm, ccoCommGetAsyncError(g_comm, &async));
  MP_CHECK(async == ccoSuccess, "rank %d: async error %d after the matrix", g_rank, async);
  OK(g_comm, ccoWindowDeregister(g_comm, b.sendWin));
  OK(g_comm, ccoWindowDeregister(g_comm, b.recvWin));
  if (g_rank == 0) printf("matrix: %d calls of the five collectives in %.1f s\n", cases, mp_now() - t0);
}

static void phase_many(void) {
  bufs b;
  if (!make_bufs(g_comm, window_bytes(8192), &b)) return;
  double t0 = mp_now();
  int n = 200;
  for (int k = 0; k < n; k++) {
    /* The kinds interleaved: they share the parts' uses of the rail. */
    int kind = k % 6 == 3 ? AG : k % 6 == 4 ? BC : k % 6 == 2 ? RS : k % 6 == 5 ? A2A : AR;
    size_t count = (size_t)(1 + (k * 977) % 6000);
    ar_case c = {kind, k % 4, k % 3, kind != A2A && (k & 1), kind == AR || kind == BC ? count : gather_count(count),
                 (size_t)(k % 3), 0,
                 (uint32_t)(1000 + k), k % g_size};
    ccoResult_t res = run_case(&b, &c, k % 10 == 0);
    MP_CHECK(res == ccoSuccess, "rank %d: call %d of many: %s", g_rank, k, ccoGetLastError(g_comm));
  }
  ar_case last = {AR, ccoFloat32, ccoSum, 0, 3001, 1, 2, 99, 0};
  OK(g_comm, run_case(&b, &last, 1));
  OK(g_comm, ccoWindowDeregister(g_comm, b.sendWin));
  OK(g_comm, ccoWindowDeregister(g_comm, b.recvWin));
  if (g_rank == 0) printf("many: %d calls back to back in %.1f s\n", n + 1, mp_now() - t0);
}

static void expect_refused(ccoResult_t got, ccoResult_t want, const char* word, const char* what) {
  const char* text = ccoGetLastError(g_comm);
  MP_CHECK(got == want && strstr(text, word) != NULL && strstr(text, "hosts") != NULL,
           "rank %d: %s: got %d '%s', want %d naming '%s' and hosts", g_rank, what, got, text, want, word);
}

static void phase_barrier(void) {
  bufs b;
  if (!make_bufs(g_comm, window_bytes(4096 * (size_t)g_size), &b)) return;
  ccoAlgo_t algo = ccoAlgoAuto;
  OK(g_comm, ccoCollAlgorithm(g_comm, "allreduce", 1 << 20, &algo));
  MP_CHECK(algo == ccoAlgoHier, "rank %d: all-reduce across hosts chose %d, not hier", g_rank, (int)algo);
  OK(g_comm, ccoBarrierOnStream(g_comm, NULL));
  ar_case c = {AR, ccoInt32, ccoSum, 0, 777, 0, 0, 7, 0};
  OK(g_comm, run_case(&b, &c, 1));
  OK(g_comm, ccoBarrierOnStream(g_comm, NULL));
  OK(g_comm, ccoWindowDeregister(g_comm, b.sendWin));
  OK(g_comm, ccoWindowDeregister(g_comm, b.recvWin));
}

/* Hosts of different sizes (run it as -n 3 --virtual-hosts 2): every
 * collective is refused on every rank before any collective step, naming
 * the sizes; ccoBarrierOnStream (the world barrier) runs. */
static void phase_unequal(void) {
  bufs b;
  if (!make_bufs(g_comm, window_bytes(4096 * (size_t)g_size), &b)) return;
  const char* want = "same number of ranks";
  expect_refused(ccoAllReduce(g_comm, b.send, b.recv, 64, ccoFloat32, ccoSum, NULL), ccoUnsupported, want,
                 "all-reduce");
  expect_refused(ccoAllGather(g_comm, b.send, b.recv, 64, ccoFloat32, NULL), ccoUnsupported, want, "all-gather");
  expect_refused(ccoReduceScatter(g_comm, b.send, b.recv, 64, ccoInt32, ccoMax, NULL), ccoUnsupported, want,
                 "reduce-scatter");
  expect_refused(ccoAlltoAll(g_comm, b.send, b.recv, 64, ccoFloat16, NULL), ccoUnsupported, want, "all-to-all");
  expect_refused(ccoBroadcast(g_comm, b.send, b.recv, 64, ccoBfloat16, 1, NULL), ccoUnsupported, want, "broadcast");
  /* The world barrier takes any host sizes. */
  for (int k = 0; k < 20; k++) OK(g_comm, ccoBarrierOnStream(g_comm, NULL));
  OK(g_comm, ccoWindowDeregister(g_comm, b.sendWin));
  OK(g_comm, ccoWindowDeregister(g_comm, b.recvWin));
}

/* Under CCO_ALGO=allreduce=twoshot (a demand no call across hosts can
 * meet): every all-reduce is refused with ccoInvalidUsage naming CCO_ALGO,
 * as ccoCollAlgorithm says, and the other collectives still run. */
static void phase_algo_demand(void) {
  bufs b;
  if (!make_bufs(g_comm, window_bytes(100000), &b)) return;
  ccoAlgo_t algo;
  ccoResult_t said = ccoCollAlgorithm(g_comm, "allreduce", 4096, &algo);
  MP_CHECK(said == ccoInvalidUsage && strstr(ccoGetLastError(g_comm), "inside one host"),
           "rank %d: ccoCollAlgorithm under the demand: %d '%s'", g_rank, said, ccoGetLastError(g_comm));
  /* Small and large: every rank refuses alike (and launches the same
   * refused call, which matches everywhere), so the communicator stays
   * healthy. */
  for (size_t count = 1024; count <= 100000; count += 98976) {
    ar_case c = {AR, ccoFloat32, ccoSum, 0, count, 0, 0, 11, 0};
    ccoResult_t res = run_case(&b, &c, 0);
    MP_CHECK(res == ccoInvalidUsage && strstr(ccoGetLastError(g_comm), "CCO_ALGO") &&
                 strstr(ccoGetLastError(g_comm), "inside one host"),
             "rank %d: all-reduce of %zu under the demand: %d '%s'", g_rank, count, res, ccoGetLastError(g_comm));
  }
  for (int kind = AG; kind <= A2A; kind++) {
    ar_case d = {kind, ccoInt32, ccoMax, 0, 1024 / (size_t)g_size, 0, 0, (uint32_t)(12 + kind), 1 % g_size};
    OK(g_comm, run_case(&b, &d, 1));
  }
  ccoResult_t async = ccoInternalError;
  OK(g_comm, ccoCommGetAsyncError(g_comm, &async));
  MP_CHECK(async == ccoSuccess, "rank %d: async error %d after the refusals", g_rank, async);
  OK(g_comm, ccoWindowDeregister(g_comm, b.sendWin));
  OK(g_comm, ccoWindowDeregister(g_comm, b.recvWin));
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

/* Every rank fails the call; then the async error and the next call name
 * the failure. */
static void expect_job_failed(ccoComm* comm, ccoResult_t res, bufs* b, const char* what) {
  MP_CHECK(res != ccoSuccess, "rank %d: %s: the call succeeded", g_rank, what);
  ccoResult_t async = ccoSuccess;
  OK(comm, ccoCommGetAsyncError(comm, &async));
  MP_CHECK(async != ccoSuccess, "rank %d: %s: no async error", g_rank, what);
  ar_case c = {AR, ccoFloat32, ccoSum, 0, 16, 0, 0, 9, 0};
  ccoResult_t next = run_case(b, &c, 0);
  MP_CHECK(next != ccoSuccess && strstr(ccoGetLastError(comm), "failed earlier"),
           "rank %d: %s: the next call gave %d '%s'", g_rank, what, next, ccoGetLastError(comm));
}

static void phase_mismatch(void) {
  int odd = g_rank == g_size - 1; /* on the last host */
  for (int round = 0; round < 3; round++) {
    ccoComm* comm = new_comm();
    bufs b;
    if (comm && make_bufs(comm, window_bytes(50000 * (size_t)g_size), &b)) {
      double t0 = mp_now();
      ar_case c = {round == 2 ? AG : AR, ccoFloat32, ccoSum, 0, odd ? 40001u : 40000u, 0, 0, 3, 0};
      /* Round 0: another count; round 1: a misaligned sendbuf, refused by
       * the host, which then launches a call no peer's can match; round 2:
       * an all-gather of another count. */
      ccoResult_t res = round != 1 ? run_case(&b, &c, 0)
                                   : ccoAllReduce(comm, odd ? b.send + 2 : b.send, b.recv, 40000, ccoFloat32, ccoSum,
                                                  NULL);
      expect_job_failed(comm, res, &b, round == 1 ? "one rank refusing its arguments" : "mismatched counts");
      if (round == 1 && odd)
        MP_CHECK(res == ccoInvalidArgument, "rank %d: the misaligned sendbuf gave %d", g_rank, res);
      if (g_rank == 0) printf("mismatch %d: every rank failed after %.2f s\n", round, mp_now() - t0);
    }
    if (comm) OK(NULL, ccoCommDestroy(comm));
  }
}

/* One rank (on the last host) never makes the call: the others wait in
 * the blocks' GDA and LSA waits until CCO_COLL_TIMEOUT (run it with a short
 * one) fails the communicator, whose abort word ends every wait; the
 * missing rank learns of it too. */
static void phase_missing(void) {
  ccoComm* comm = new_comm();
  bufs b;
  if (comm && make_bufs(comm, window_bytes(5000), &b)) {
    ar_case c = {AR, ccoFloat32, ccoSum, 0, 1000, 0, 0, 5, 0};
    OK(comm, run_case(&b, &c, 1)); /* the state is made together */
    double t0 = mp_now();
    if (g_rank == g_size - 1) {
      ccoResult_t async = ccoSuccess;
      while (async == ccoSuccess && mp_now() - t0 < 30) {
        mp_sleep(0.05);
        OK(comm, ccoCommGetAsyncError(comm, &async));
      }
      MP_CHECK(async != ccoSuccess, "rank %d: the missing rank was not told of the others' timeout", g_rank);
    } else {
      ccoResult_t res = ccoAllGather(comm, b.send, b.recv, 100, ccoFloat32, NULL);
      MP_CHECK((res == ccoTimeout || res == ccoRemoteError) && mp_now() - t0 < 20,
               "rank %d: a call whose peer never came: %d '%s' after %.1f s", g_rank, res, ccoGetLastError(comm),
               mp_now() - t0);
      if (g_rank == 0) printf("missing: the call failed after %.2f s\n", mp_now() - t0);
    }
  }
  if (comm) OK(NULL, ccoCommDestroy(comm));
}

static void phase_destroy(void) {
  for (int round = 0; round < 2; round++) {
    ccoComm* comm = new_comm();
    bufs b;
    if (comm && make_bufs(comm, window_bytes(70000), &b)) {
      for (int k = 0; k < 3; k++) {
        ar_case c = {k == 1 ? AG : AR, k % 4, ccoSum, 0, 60001 / (k == 1 ? (size_t)g_size : 1), 0, 0,
                     (uint32_t)(50 + k), 0};
        OK(comm, run_case(&b, &c, 1));
      }
    }
    /* No deregistration, no barrier: destroy takes everything down. */
    if (comm) OK(NULL, ccoCommDestroy(comm));
  }
}

int main(int argc, char** argv) {
  const char* phases = "matrix,many,barrier,mismatch,destroy";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--phases") && i + 1 < argc) phases = argv[++i];
    else if (!strcmp(argv[i], "--max-count") && i + 1 < argc) g_maxCount = (size_t)strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: %s [--phases LIST] [--max-count C]\n", argv[0]);
      return 2;
    }
  }
  setenv("CCO_PLATFORM", "host", 1);
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "mp_coll_hier: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  ccoCommLsaSize(g_comm, &g_lsaSize);
  ccoCommNodeCount(g_comm, &g_nNodes);
  double t0 = mp_now();
  /* The first collective sets up GDA; without a network engine it fails
   * alike on every rank, and the test did not run. */
  ccoComm* probe = g_comm;
  bufs b;
  if (mp_has_phase(phases, "unequal")) {
    phase_unequal();
  } else if (mp_has_phase(phases, "algo-demand")) {
    /* the probe is an all-reduce, which the demand refuses */
  } else if (make_bufs(probe, 8192, &b)) {
    ccoResult_t res = ccoAllReduce(probe, b.send, b.recv, 1, ccoFloat32, ccoSum, NULL);
    if (res != ccoSuccess && strstr(ccoGetLastError(probe), "libfabric")) {
      printf("mp_coll_hier: did not run: %s\n", ccoGetLastError(probe));
      ccoCommDestroy(g_comm);
      return 77;
    }
    OK(probe, res);
    OK(probe, ccoWindowDeregister(probe, b.sendWin));
    OK(probe, ccoWindowDeregister(probe, b.recvWin));
  }
  if (mp_has_phase(phases, "matrix")) phase_matrix();
  if (mp_has_phase(phases, "many")) phase_many();
  if (mp_has_phase(phases, "barrier")) phase_barrier();
  if (mp_has_phase(phases, "mismatch")) phase_mismatch();
  if (mp_has_phase(phases, "destroy")) phase_destroy();
  if (mp_has_phase(phases, "missing")) phase_missing();
  if (mp_has_phase(phases, "algo-demand")) phase_algo_demand();
  OK(g_comm, ccoCommDestroy(g_comm));
  if (g_rank == 0)
    printf("mp_coll_hier: %d ranks on %d hosts, %.1f s\n", g_size, g_nNodes, mp_now() - t0);
  return mp_finish("mp_coll_hier");
}
