/*
 * The Triton kernels of the GPU tests, replayed on the host platform
 * through the very functions of the device bitcode: the C wrappers that
 * python/cco/ir/wrappers.py generates from the table, compiled with the
 * host compiler into this program, called with the arguments the Triton
 * bindings pass (kernels.c), in every thread of a program of 32 * num_warps
 * CPU threads that the device headers treat as one block (coop.c). A bad
 * pointer handed from one call to the next, a wrapper whose threads
 * disagree, or a wrong expectation of the GPU test shows here, under the
 * sanitizers too, without a GPU.
 *
 *   ccorun -n 2 --virtual-hosts 2 mp_triton gda    (CROSSNODE, the rail team)
 *   ccorun -n N mp_triton gda                      (one host: FULL)
 *   ccorun -n N mp_triton sdma                     (one host, N = 2..4)
 *
 * The parts follow tests/gpu/test_triton_gpu.py, same kernels, arguments,
 * windows and expected values:
 *  gda   queries; gda_all for each doorbell mode x (scope, thread mode,
 *        num_warps) in ((block, aggregate, 4), (warp, aggregate, 1),
 *        (block, independent, 1), (thread, aggregate, 1)): the statuses,
 *        signals and counters of the ring's puts, the data put, got and
 *        put-valued; gda_local on two hosts; the world barrier;
 *  sdma  queries; the world barrier; sdma_all at block, warp and thread
 *        scope; examples/ir/test_triton_cco.py's SDMA kernel, 4 rounds;
 *        coll: every collective of the blocks (cco.Coll) in int32 and
 *        fp32 with each operator, against sums computed here.
 * Every stored word is also checked to be the same in every thread of the
 * program (Triton stores a scalar from one thread only). Each rank ends with
 * "mp_triton rank R: N passed, N failed". Where the network engine does not
 * open (no libfabric), the gda part prints "mp_triton: did not run" and
 * exits 77.
 */
#include "transport/net/net.h"
#include "triton.h"

int mp_passed, mp_failed;
pthread_mutex_t mp_check_lock = PTHREAD_MUTEX_INITIALIZER;

enum { SUCCESS = 0, TIMEOUT = 2, INVALID = 4, NO_PEER = 5 };

typedef struct {
  ccoComm* comm;
  int rank, size, lsaRank, lsaSize, node, nNodes;
  ccoDevComm dc;   /* the host copy */
  uint64_t dcPtr;  /* dc.ptr: the device copy the kernels take */
} job;

#define MUST(call)                                                                                  \
  do {                                                                                              \
    ccoResult_t r_ = (call);                                                                        \
    if (r_ != ccoSuccess) {                                                                         \
      fprintf(stderr, "rank %d: %s: %s (%s)\n", j->rank, #call, ccoGetErrorString(r_),              \
              ccoGetLastError(j->comm));                                                            \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

static int64_t g_out[TK_MAX_THREADS * TK_OUT];

/* kernel[(1,)](..., num_warps=nw): `out` starts at -1 in every row. */
static void launch(int nw, tk_program fn, tk_args* a) {
  for (int i = 0; i < TK_MAX_THREADS * TK_OUT; i++) g_out[i] = -1;
  a->out = g_out;
  tk_launch(nw, fn, a);
}

/* Thread 0's words [0, n) against want[], after checking that every thread
 * of the program stored the same words (where `uniform` says so). */
static void expect_words(const job* j, const char* name, int nw, int n, const int64_t* want, const int* uniform) {
  for (int i = 0; i < n; i++) {
    CHECK(g_out[i] == want[i], "rank %d: %s: word %d is %lld, want %lld", j->rank, name, i, (long long)g_out[i],
          (long long)want[i]);
    for (int t = 1; t < TK_WARP * nw && (!uniform || uniform[i]); t++)
      if (g_out[t * TK_OUT + i] != g_out[i]) {
        CHECK(0, "rank %d: %s: word %d is %lld in thread %d but %lld in thread 0", j->rank, name, i,
              (long long)g_out[t * TK_OUT + i], t, (long long)g_out[i]);
        break;
      }
  }
}

/* ------------------------------------------------------------ coll */

static int32_t coll_value(int rank, uint64_t i) { return (int32_t)((i * 7 + (uint64_t)rank * 13) % 101) - 50; }

static int32_t coll_reduce(int32_t x, int32_t y, int op) { return op == 0 ? x + y : op == 1 ? (x > y ? x : y) : (x < y ? x : y); }

/* What element i of this rank's output must be after collective `algo`. */
static int32_t coll_want(const job* j, int algo, int op, uint64_t count, uint64_t i) {
  if (algo == 3) return coll_value((int)(i / count), i % count);  /* all-gather */
  if (algo == 5) return coll_value(0, i);                          /* broadcast from 0 */
  uint64_t at = algo == 4 ? (uint64_t)j->lsaRank * count + i : i; /* reduce-scatter: block me */
  int32_t v = coll_value(0, at);
  for (int r = 1; r < j->lsaSize; r++) v = coll_reduce(v, coll_value(r, at), op);
  return v;
}

/* triton_kernels.py's coll, every collective of the blocks in int32 and
 * fp32 (sums of small integers, exact in both) with each operator, on a
 * window of its own: status, scratch size and every output element. */
static void check_coll(job* j) {
  const uint64_t count = 3001; /* odd, over several LL chunks */
  const uint64_t region = 64 << 10, scratch = cco_ir_coll_scratch_bytes(j->lsaSize, 1);
  ccoWindow_t win;
  void* local;
  MUST(ccoWindowRegisterAlloc(j->comm, 2 * region + scratch, &win, &local));
  memset(local, 0, 2 * region + scratch);
  char* base = local;
  static const int cases[4][2] = {{3, 0}, {3, 1}, {0, 0}, {0, 2}}; /* (dtype, op): int32 sum, max; fp32 sum, min */
  int ran = 0;
  for (int algo = 0; algo < 6; algo++)
    for (int c = 0; c < 4; c++) {
      int dtype = cases[c][0], op = cases[c][1];
      if ((algo == 3 || algo == 5) && op != 0) continue; /* no operator */
      uint64_t inCount = algo == 4 ? count * (uint64_t)j->lsaSize : count;
      uint64_t outCount = algo == 3 ? count * (uint64_t)j->lsaSize : count;
      for (uint64_t i = 0; i < inCount; i++) {
        int32_t v = coll_value(j->lsaRank, i);
        if (dtype == 3) ((int32_t*)base)[i] = v;
        else ((float*)base)[i] = (float)v;
      }
      memset(base + region, 0xff, region);
      MUST(ccoBarrierAll(j->comm));
      tk_args a = {0};
      a.dc = j->dcPtr, a.win = (uint64_t)(uintptr_t)win;
      a.count = count, a.recvOff = region, a.scratchOff = 2 * region, a.scratchBytes = scratch;
      a.dtype = dtype, a.op = op, a.algo = algo;
      launch(4, tk_coll, &a);
      char name[64];
      snprintf(name, sizeof(name), "coll algo %d dtype %d op %d", algo, dtype, op);
      int64_t want[1] = {SUCCESS};
      expect_words(j, name, 4, 1, want, NULL);
      CHECK(g_out[63] == (int64_t)scratch, "rank %d: %s: scratch_bytes %lld, want %llu", j->rank, name,
            (long long)g_out[63], (unsigned long long)scratch);
      uint64_t bad = 0, first = 0;
      for (uint64_t i = 0; i < outCount; i++) {
        int32_t w = coll_want(j, algo, op, count, i);
        int ok = dtype == 3 ? ((int32_t*)(base + region))[i] == w : ((float*)(base + region))[i] == (float)w;
        if (!ok && !bad++) first = i;
      }
      CHECK(bad == 0, "rank %d: %s: %llu of %llu elements wrong, the first at %llu", j->rank, name,
            (unsigned long long)bad, (unsigned long long)outCount, (unsigned long long)first);
      MUST(ccoBarrierAll(j->comm));
      ran++;
    }
  CHECK(ran == 20, "rank %d: coll: %d cases ran, want 20", j->rank, ran); /* 4 x 4 reductions, 2 x 2 others */
  MUST(ccoWindowDeregister(j->comm, win));
}

static ccoTeam team_of(const job* j, ccoTeamKind_t kind) {
  ccoTeam t;
  MUST(ccoCommTeam(j->comm, kind, &t));
  return t;
}

static int to_world(const job* j, ccoTeamKind_t kind, int teamRank) {
  int w = -1;
  MUST(ccoTeamRankToWorld(j->comm, kind, teamRank, &w));
  return w;
}

static ccoTeamKind_t gda_team(uint32_t conn) {
  return conn == ccoGdaConnectionFull ? ccoTeamWorld : conn == ccoGdaConnectionRail ? ccoTeamRail : ccoTeamCrossNode;
}

static void check_queries(job* j, ccoWindow_t win, size_t winSize) {
  const ccoDevComm* s = &j->dc;
  tk_args a = {.dc = j->dcPtr, .win = (uint64_t)(uintptr_t)win};
  launch(4, tk_queries, &a);
  int64_t want[54] = {j->rank, j->size, j->lsaRank, j->lsaSize, j->node, j->nNodes, s->lsaBarrierCount,
                      s->barrierCount, s->sdmaQueueCount, s->gdaContextCount, s->gdaSignalCount, s->gdaCounterCount,
                      s->gdaConnectionType, 0};
  ccoTeamKind_t kinds[5] = {ccoTeamWorld, ccoTeamLsa, ccoTeamCrossNode, ccoTeamRail, gda_team(s->gdaConnectionType)};
  for (int t = 0; t < 5; t++) {
    ccoTeam team = team_of(j, kinds[t]);
    int64_t w[5] = {team.nRanks, team.rank, j->rank, team.rank, 1};
    for (int k = 0; k < 5; k++) want[14 + 5 * t + k] = w[k];
  }
  /* FULL may connect a rank to itself. */
  int64_t selfPeer = s->gdaConnectionType == ccoGdaConnectionFull ? g_out[43] : 0;
  int64_t tail[15] = {(int64_t)winSize, 8, 1, -1, selfPeer, to_world(j, kinds[4], 0), 0, 1, 0, 32, 0, 128, 0, 0, 0};
  for (int k = 0; k < 15; k++) want[39 + k] = tail[k];
  int uniform[54];
  for (int i = 0; i < 54; i++) uniform[i] = i < 45 || i > 50; /* 45..50: each thread's own rank */
  expect_words(j, "DevComm / Window / Coop queries", 4, 54, want, uniform);
  for (int t = 0; t < TK_WARP * 4; t++) {
    const int64_t* row = &g_out[t * TK_OUT];
    CHECK(row[45] == 0 && row[46] == 1 && row[47] == t % TK_WARP && row[48] == TK_WARP && row[49] == t &&
              row[50] == TK_WARP * 4,
          "rank %d: Coop.rank / size in thread %d: %lld %lld %lld %lld %lld %lld", j->rank, t, (long long)row[45],
          (long long)row[46], (long long)row[47], (long long)row[48], (long long)row[49], (long long)row[50]);
  }
}

static void check_world_barrier(job* j) {
  static const int variants[3][2] = {{0, 1}, {1, 1}, {2, 4}}; /* scope, num_warps */
  for (int v = 0; v < 3; v++)
    for (int k = 0; k < 3; k++) {
      tk_args a = {.dc = j->dcPtr, .scope = variants[v][0]};
      launch(variants[v][1], tk_world_barrier, &a);
      int64_t want = j->nNodes > 1 && a.scope == 0 ? INVALID : SUCCESS; /* several hosts: warp or block */
      int only0[1] = {0}; /* thread scope: the leader alone stores */
      char name[64];
      snprintf(name, sizeof(name), "world barrier, scope %d", a.scope);
      expect_words(j, name, variants[v][1], 1, &want, a.scope == 0 ? only0 : NULL);
    }
}

/* ------------------------------------------------------------------ GDA */

static int32_t gda_pattern(int rank, int rnd, size_t i) { return (int32_t)i * 3 + rank * 7 + rnd; }

static int pattern_ok(const int32_t* p, size_t words, int32_t (*pat)(int, int, size_t), int rank, int rnd) {
  for (size_t i = 0; i < words; i++)
    if (p[i] != pat(rank, rnd, i)) return 0;
  return 1;
}

static void check_gda(job* j) {
  const int nbytes = 4096;
  ccoTeamKind_t kind = j->nNodes > 1 ? ccoTeamRail : ccoTeamWorld;
  ccoTeam me = team_of(j, kind);
  int prv = to_world(j, kind, (me.rank + me.nRanks - 1) % me.nRanks);
  int nxt = to_world(j, kind, (me.rank + 1) % me.nRanks);
  ccoWindow_t win;
  char* local;
  MUST(ccoWindowRegisterAlloc(j->comm, 4 * nbytes, &win, (void**)&local));
  int32_t* src = (int32_t*)local;
  const int32_t* fromPrev = (const int32_t*)(local + nbytes);
  const int32_t* fromNext = (const int32_t*)(local + 2 * nbytes);
  const int64_t* value = (const int64_t*)(local + 3 * nbytes);
  static const int variants[4][3] = {{2, 0, 4}, {1, 0, 1}, {2, 1, 1}, {0, 0, 1}}; /* scope, thread mode, warps */
  int64_t totals[6] = {0}, exp[6];
  int rnd = 0;
  for (int doorbell = 0; doorbell < 3; doorbell++)
    for (int v = 0; v < 4; v++, rnd++) {
      int scope = variants[v][0], mode = variants[v][1], nw = variants[v][2], threads = TK_WARP * nw;
      int64_t posts = scope == 0 || mode == 1 ? threads : scope == 1 ? nw : 1;
      int64_t aggregates = scope == 0 ? threads : scope == 1 ? nw : 1;
      int64_t adds[6] = {posts, 2 * posts, aggregates, posts, posts, aggregates};
      for (int i = 0; i < 6; i++) exp[i] = totals[i] += adds[i];
      for (int i = 0; i < nbytes / 4; i++) src[i] = gda_pattern(j->rank, rnd, (size_t)i);
      MUST(ccoBarrierAll(j->comm));
      tk_args a = {.dc = j->dcPtr, .win = (uint64_t)(uintptr_t)win, .value = 1000 * rnd + j->rank, .exp = exp,
                   .team = kind, .nbytes = nbytes, .doorbell = doorbell, .scope = scope, .mode = mode};
      launch(nw, tk_gda_all, &a);
      char name[96];
      snprintf(name, sizeof(name), "GDA calls (doorbell %d, scope %d, thread mode %d)", doorbell, scope, mode);
      int64_t want[22] = {0, 0, 0, 0, 0, 0, 0, 0, totals[0], totals[1], totals[2], totals[3], totals[4], totals[5],
                          totals[0], totals[3], SUCCESS, 0, SUCCESS, SUCCESS, 1, SUCCESS};
      expect_words(j, name, nw, 22, want, NULL);
      CHECK(pattern_ok(fromPrev, nbytes / 4, gda_pattern, prv, rnd), "rank %d: %s: put data", j->rank, name);
      CHECK(pattern_ok(fromNext, nbytes / 4, gda_pattern, nxt, rnd), "rank %d: %s: get data", j->rank, name);
      CHECK(*value == 1000 * rnd + prv, "rank %d: %s: put-value %lld, want %d", j->rank, name, (long long)*value,
            1000 * rnd + prv);
      MUST(ccoBarrierAll(j->comm)); /* the next round's src only after every rank's get is checked */
    }
  if (j->nNodes > 1) { /* CROSSNODE: this rank has no endpoint to itself */
    tk_args a = {.dc = j->dcPtr, .win = (uint64_t)(uintptr_t)win, .slot = 5};
    launch(1, tk_gda_local, &a);
    int64_t want[9] = {5, 6, SUCCESS, SUCCESS, 0, 0, 0, NO_PEER, INVALID};
    int only0[9] = {0};
    expect_words(j, "GDA slots through pointers, reset; no-peer and bad-index statuses", 1, 9, want, only0);
  }
  MUST(ccoBarrierAll(j->comm));
  MUST(ccoWindowDeregister(j->comm, win));
}

/* ----------------------------------------------------------------- SDMA */

static int32_t sdma_pattern(int rank, int rnd, size_t i) { return (int32_t)i + rank * 7919 + rnd; }
static int32_t example_pattern(int rank, int it, size_t i) { return (int32_t)i * 3 + rank * 100003 + it * 7; }

static void check_sdma(job* j) {
  const int nbytes = 4096;
  ccoWindow_t win;
  char* local;
  MUST(ccoWindowRegisterAlloc(j->comm, 3 * nbytes, &win, (void**)&local));
  int32_t* src = (int32_t*)local;
  int prv = to_world(j, ccoTeamLsa, (j->lsaRank + j->lsaSize - 1) % j->lsaSize);
  int nxt = to_world(j, ccoTeamLsa, (j->lsaRank + 1) % j->lsaSize);
  static const int variants[3][2] = {{2, 4}, {1, 1}, {0, 1}}; /* scope, num_warps */
  int64_t expected = 0;
  for (int v = 0; v < 3; v++)
    for (int rnd = 0; rnd < 2; rnd++) {
      int scope = variants[v][0], nw = variants[v][1];
      expected += scope == 0 ? TK_WARP * nw : scope == 1 ? nw : 1; /* every thread posts at thread scope */
      for (int i = 0; i < nbytes / 4; i++) src[i] = sdma_pattern(j->rank, rnd, (size_t)i);
      MUST(ccoBarrierAll(j->comm));
      tk_args a = {.dc = j->dcPtr, .win = (uint64_t)(uintptr_t)win, .expected = expected, .nbytes = nbytes,
                   .scope = scope};
      launch(nw, tk_sdma_all, &a);
      char name[64];
      snprintf(name, sizeof(name), "SDMA calls, scope %d", scope);
      int64_t want[10] = {0, 0, 0, 0, expected, expected, 0, 0, 0, INVALID};
      expect_words(j, name, nw, 10, want, NULL);
      CHECK(pattern_ok((const int32_t*)(local + nbytes), nbytes / 4, sdma_pattern, prv, rnd), "rank %d: %s: put data",
            j->rank, name);
      CHECK(pattern_ok((const int32_t*)(local + 2 * nbytes), nbytes / 4, sdma_pattern, nxt, rnd),
            "rank %d: %s: get data", j->rank, name);
      MUST(ccoBarrierAll(j->comm)); /* the next rank's get read this round's src */
    }
  MUST(ccoBarrierAll(j->comm));
  MUST(ccoWindowDeregister(j->comm, win));
}

/* examples/ir/test_triton_cco.py --transport sdma, with its own device
 * communicator (NONE, default requirements): signal slots from 0. */
static void check_example_sdma(job* j) {
  const int nbytes = 1 << 16, iters = 4;
  ccoWindow_t win;
  char* local;
  MUST(ccoWindowRegisterAlloc(j->comm, (size_t)nbytes * (size_t)(1 + j->size), &win, (void**)&local));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  ccoDevComm* dcPtr;
  MUST(ccoDevCommCreate(j->comm, &reqs, &dc));
  MUST(ccoDevCommCopyToDevice(j->comm, &dc, &dcPtr));
  for (int it = 0; it < iters; it++) {
    for (int i = 0; i < nbytes / 4; i++) ((int32_t*)local)[i] = example_pattern(j->rank, it, (size_t)i);
    MUST(ccoBarrierAll(j->comm)); /* every peer is done reading the last round */
    tk_args a = {.dc = (uint64_t)(uintptr_t)dcPtr, .win = (uint64_t)(uintptr_t)win, .expected = it + 1,
                 .nbytes = nbytes};
    launch(4, tk_sdma_put, &a);
    int64_t want = SUCCESS;
    expect_words(j, "test_triton_cco --transport sdma status", 4, 1, &want, NULL);
    for (int p = 0; p < j->lsaSize; p++) {
      if (p == j->lsaRank) continue;
      int s = to_world(j, ccoTeamLsa, p);
      CHECK(pattern_ok((const int32_t*)(local + (size_t)nbytes * (size_t)(1 + s)), (size_t)nbytes / 4,
                       example_pattern, s, it),
            "rank %d: test_triton_cco --transport sdma round %d: data from rank %d", j->rank, it, s);
    }
  }
  MUST(ccoBarrierAll(j->comm));
  MUST(ccoDevCommDestroy(j->comm, &dc));
  MUST(ccoWindowDeregister(j->comm, win));
}

int main(int argc, char** argv) {
  const char* part = argc > 1 ? argv[1] : "sdma";
  if (argc > 2 || (strcmp(part, "gda") && strcmp(part, "sdma"))) {
    fprintf(stderr, "usage: ccorun -n N [--virtual-hosts K] mp_triton [gda|sdma]\n");
    return 2;
  }
  if (!strcmp(part, "gda")) {
    cco_net_config cfg;
    cco_net* net = NULL;
    cco_net_config_from_env(&cfg);
    if (cco_net_open(&cfg, &net) != ccoSuccess) {
      printf("mp_triton: did not run: %s\n", ccoGetLastError(NULL));
      return 77;
    }
    cco_net_close(net);
  }
  /* CPU threads play the kernels: the windows must live in host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  job jb = {0}, *j = &jb;
  MUST(ccoCommCreateFromEnv(0, &j->comm));
  ccoCommRank(j->comm, &j->rank);
  ccoCommSize(j->comm, &j->size);
  ccoCommLsaRank(j->comm, &j->lsaRank);
  ccoCommLsaSize(j->comm, &j->lsaSize);
  ccoCommNodeIndex(j->comm, &j->node);
  ccoCommNodeCount(j->comm, &j->nNodes);
  const size_t winSize = 1 << 20;
  ccoWindow_t win;
  void* local;
  MUST(ccoWindowRegisterAlloc(j->comm, winSize, &win, &local));
  memset(local, 0, winSize); /* signal words start at 0 */
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  if (!strcmp(part, "gda")) {
    reqs.gdaConnectionType = j->nNodes > 1 ? ccoGdaConnectionCrossNode : ccoGdaConnectionFull;
    reqs.gdaSignalCount = 8, reqs.gdaCounterCount = 8, reqs.railGdaBarrierCount = 1, reqs.barrierCount = 1;
  } else {
    reqs.gdaConnectionType = ccoGdaConnectionNone;
    reqs.lsaBarrierCount = 2, reqs.barrierCount = 1;
  }
  MUST(ccoDevCommCreate(j->comm, &reqs, &j->dc));
  ccoDevComm* dcPtr;
  MUST(ccoDevCommCopyToDevice(j->comm, &j->dc, &dcPtr));
  j->dcPtr = (uint64_t)(uintptr_t)dcPtr;
  check_queries(j, win, winSize);
  MUST(ccoBarrierAll(j->comm));
  if (!strcmp(part, "gda")) {
    check_gda(j);
    check_world_barrier(j);
  } else {
    check_world_barrier(j);
    MUST(ccoBarrierAll(j->comm));
    check_sdma(j);
    check_example_sdma(j);
    MUST(ccoBarrierAll(j->comm));
    check_coll(j);
  }
  ccoResult_t async = ccoSuccess;
  ccoCommGetAsyncError(j->comm, &async);
  CHECK(async == ccoSuccess, "rank %d: async error %s (%s)", j->rank, ccoGetErrorString(async),
        ccoGetLastError(j->comm));
  MUST(ccoBarrierAll(j->comm));
  MUST(ccoDevCommDestroy(j->comm, &j->dc));
  MUST(ccoWindowDeregister(j->comm, win));
  ccoCommDestroy(j->comm);
  printf("mp_triton rank %d: %d passed, %d failed\n", j->rank, mp_passed, mp_failed);
  return mp_failed ? 1 : 0;
}
