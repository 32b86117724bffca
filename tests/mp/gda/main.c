/*
 * GDA on the host platform, through the GDA device API itself
 * (cco_gda.h compiled for the host: "kernels" are CPU threads, a
 * thread is a warp and a block of one). The proxy thread of each rank runs
 * the posts on the network engine (libfabric, tcp;ofi_rxm by default), on
 * the direct or the staged path (CCO_GDA_PATH). One process per rank.
 *
 *   ccorun -n N mp_gda [--conn full|crossnode|rail|none] [--only STEP]
 *                      [--iters I] [--flood M] [--tc T]
 *   ccorun ... mp_gda --conn C --kill host|rank [--idle]   (see "Kill mode")
 *   mp_gda --probe       0 when the network engine opens here, else 77
 *
 * Hosts are simulated with CCO_HOSTID (one launcher per host, --id-file).
 * The peers with endpoints follow --conn (default crossnode): CROSSNODE the
 * ranks on other hosts, FULL every rank (this one too), RAIL the rail team
 * minus this rank, NONE nobody (dc.gda == 0). The test computes the same
 * table from the topology and checks it against ccoGdaHasPeer. Steps, in
 * this order, each between host barriers with every signal and counter of
 * this rank reset to 0 (--only runs the steps whose name contains STEP):
 *
 *  ops, atomic     every op at every scope, thread and doorbell mode;
 *                  signal adds from several threads into one slot (ops.c)
 *  sad, get        data checked at its signal or counter: signal after
 *                  data, gets of every size, large puts (transfer.c)
 *  flush           FlushAsync, Wait, FlushPeer on a Deferred handle (flush.c)
 *  barrier, world  the rail GDA barrier and the world barrier (barrier.c)
 *  flood           a 16-slot ring posted into from 4 threads (flood.c)
 *  conn            the endpoint table; NoPeer, Invalid and Unsupported
 *                  answers that post nothing (conn.c)
 *  tclass          the traffic class (--tc T, gdaTrafficClass of the main
 *                  device communicator) is the engine's (tclass.c)
 *  drain           a device communicator destroyed right after its puts
 *                  still delivers what it rang, without waiting for what
 *                  it did not (drain.c)
 *  async           ccoCommGetAsyncError is still ccoSuccess (here).
 *
 * Each file describes its steps. The path (CCO_GDA_PATH: direct for host
 * memory, staged for GPU memory through pinned buffers) is the proxy's
 * business, not the steps': every step runs on either, and test_gda.sh
 * runs the program on both.
 *
 * Kill mode (--kill, kill.c) runs instead of the steps: a host or a rank
 * dies mid-transfer and the survivors must notice it in time.
 *
 * Every device wait has a timeout and a watchdog (common.c) aborts a step
 * that outlives its limit. Each rank ends with
 * "mp_gda rank R: N passed, N failed".
 */
#include "gda.h"
#include "transport/net/net.h"

#define SRC_BYTES (8u << 20) /* window A: this rank's pattern, read-only */

options g_opt = {NULL, NULL, 0, ccoGdaConnectionCrossNode, 300, 1000, 0, 0};

static int parse(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--probe")) {
      g_opt.probe = 1;
    } else if (!strcmp(a, "--conn") && v) {
      i++;
      if (!strcmp(v, "full")) g_opt.conn = ccoGdaConnectionFull;
      else if (!strcmp(v, "crossnode")) g_opt.conn = ccoGdaConnectionCrossNode;
      else if (!strcmp(v, "rail")) g_opt.conn = ccoGdaConnectionRail;
      else if (!strcmp(v, "none")) g_opt.conn = ccoGdaConnectionNone;
      else return 0;
    } else if (!strcmp(a, "--only") && v) {
      g_opt.only = argv[++i];
    } else if (!strcmp(a, "--kill") && v && (!strcmp(v, "host") || !strcmp(v, "rank"))) {
      g_opt.kill = argv[++i];
    } else if (!strcmp(a, "--idle")) {
      g_opt.idle = 1;
    } else if (!strcmp(a, "--iters") && v) {
      g_opt.iters = atol(argv[++i]);
    } else if (!strcmp(a, "--flood") && v) {
      g_opt.flood = atol(argv[++i]);
    } else if (!strcmp(a, "--tc") && v) {
      g_opt.tc = (uint32_t)atol(argv[++i]);
    } else {
      return 0;
    }
  }
  return g_opt.iters > 0 && g_opt.flood > 0;
}

/* Whether the network engine opens here (libfabric built in and present). */
static int probe(void) {
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  cco_net* net = NULL;
  if (cco_net_open(&cfg, &net) != ccoSuccess) {
    printf("mp_gda: did not run: %s\n", ccoGetLastError(NULL));
    return 77;
  }
  printf("mp_gda: network engine: %s\n", cco_net_describe(net));
  cco_net_close(net);
  return 0;
}

static layout make_layout(int n) {
  layout L;
  size_t o = 0, N = (size_t)n;
#define AREA(field, bytes) (L.field = o, o += ((bytes) + 4095) & ~(size_t)4095)
  AREA(opsRecv, NCOMBOS * N * OPS_SLOT);
  AREA(opsVals, NCOMBOS * N * 32);
  AREA(opsGet, NCOMBOS * N * OPS_SLOT);
  AREA(sadSend, N * SAD_W * SAD_SLOT);
  AREA(sadRecv, N * SAD_W * SAD_SLOT);
  AREA(big, BIG_SLOT + 4096);
  AREA(bigPut, N * BIG_SLOT);
  AREA(bar, 2 * N * BAR_SLOT);
  AREA(world, 2 * N * BAR_SLOT);
  AREA(flushRecv, N * 3 * OPS_SLOT);
  AREA(flood, N * FLOOD_T * 64);
  AREA(floodVal, N * FLOOD_T * 8);
  AREA(floodGet, FLOOD_T * 64);
  AREA(kill, N * KILL_BYTES);
#undef AREA
  L.total = o;
  return L;
}

int main(int argc, char** argv) {
  if (!parse(argc, argv)) {
    fprintf(stderr,
            "usage: mp_gda [--conn full|crossnode|rail|none] [--only STEP] [--iters I] [--flood M] "
            "[--tc T] [--kill host|rank] | --probe\n");
    return 2;
  }
  if (g_opt.probe) return probe();
  static rank_ctx ctx;
  rank_ctx* c = &ctx;
  /* CPU threads play the kernels and touch the windows, so they must live
   * in host memory, also on a machine with a GPU. */
  setenv("CCO_PLATFORM", "host", 1);
  ccoResult_t r = ccoCommCreateFromEnv(0, &c->comm);
  if (r != ccoSuccess) {
    fprintf(stderr, "mp_gda: ccoCommCreateFromEnv: %s (%s)\n", ccoGetErrorString(r), ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(c->comm, &c->rank);
  ccoCommSize(c->comm, &c->nRanks);
  ccoCommNodeCount(c->comm, &c->nNodes);
  if (c->nRanks > MAX_RANKS) {
    fprintf(stderr, "mp_gda: at most %d ranks\n", MAX_RANKS);
    ccoCommDestroy(c->comm);
    return 2;
  }
  watchdog_start(c);

  /* Every rank's host and LSA rank, for the expected endpoint table. */
  int mine[2] = {0, 0}, all[2 * MAX_RANKS];
  ccoCommNodeIndex(c->comm, &mine[0]);
  ccoCommLsaRank(c->comm, &mine[1]);
  MUST(ccoBootstrapAllGather(c->comm, mine, all, sizeof(mine)));
  for (int q = 0; q < c->nRanks; q++) c->nodeOf[q] = all[2 * q], c->lsaOf[q] = all[2 * q + 1];

  /* Window A before the device communicator (the proxy registers it when it
   * starts), window B after (registered as it is added). */
  void* pa = NULL;
  void* pb = NULL;
  c->L = make_layout(c->nRanks);
  MUST(ccoWindowRegisterAlloc(c->comm, SRC_BYTES, &c->winA, &pa));
  c->a = pa;
  if (c->a) fill(c->a, SRC_BYTES, seed_a(c->rank));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = g_opt.conn;
  reqs.gdaContextCount = NCONTEXTS;
  reqs.gdaSignalCount = NSIGNALS;
  reqs.gdaCounterCount = NCOUNTERS;
  reqs.railGdaBarrierCount = RAIL_BARRIERS;
  reqs.barrierCount = WORLD_BARRIERS;
  reqs.gdaTrafficClass = g_opt.tc;
  r = ccoDevCommCreate(c->comm, &reqs, &c->dc);
  CHECK(r == ccoSuccess, "rank %d: ccoDevCommCreate: %s (%s)", c->rank, ccoGetErrorString(r), ccoGetLastError(c->comm));
  if (r == ccoSuccess) MUST(ccoWindowRegisterAlloc(c->comm, c->L.total, &c->winB, &pb));
  c->b = pb;
  if (r == ccoSuccess && c->a && c->b) {
    memset(c->b, 0, c->L.total);
    ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
    for (int q = 0; q < c->nRanks; q++)
      if (ccoGdaHasPeer(&g, q)) c->peers[c->nPeers++] = q;
    if (c->rank == 0) {
      const char* path = getenv("CCO_GDA_PATH");
      printf("mp_gda: %d ranks on %d host(s), connection type %u, path %s, %d peers on rank 0\n", c->nRanks,
             c->nNodes, g_opt.conn, path ? path : "auto", c->nPeers);
    }
    if (barrier(c)) { /* every window B is zeroed before anyone writes */
      if (g_opt.kill) {
        run_kill(c);
      } else {
        test_ops(c);
        test_atomic(c);
        test_sad(c);
        test_get(c);
        test_flush(c);
        test_barrier(c);
        test_world_barrier(c);
        test_flood(c);
        test_conn(c);
        test_tclass(c);
        test_drain(c);
        watchdog_arm("async", 30);
        ccoResult_t async = ccoSuccess;
        MUST(ccoCommGetAsyncError(c->comm, &async));
        CHECK(async == ccoSuccess, "rank %d: async error %s (%s)", c->rank, ccoGetErrorString(async),
              ccoGetLastError(c->comm));
        if (c->rank == 0 && async == ccoSuccess) printf("async: ccoCommGetAsyncError is ccoSuccess\n");
        barrier(c); /* nobody still posts to a state that goes away */
      }
    }
  }
  watchdog_arm("teardown", 30);
  if (c->dc.magic && !g_opt.kill) MUST(ccoDevCommDestroy(c->comm, &c->dc));
  if (c->winB && !g_opt.kill) MUST(ccoWindowDeregister(c->comm, c->winB));
  if (c->winA && !g_opt.kill) MUST(ccoWindowDeregister(c->comm, c->winA));
  watchdog_forget_comm();
  ccoResult_t d = ccoCommDestroy(c->comm);
  CHECK(d == ccoSuccess, "rank %d: ccoCommDestroy: %s", c->rank, ccoGetErrorString(d));
  char name[32];
  snprintf(name, sizeof(name), "mp_gda rank %d", c->rank);
  return mp_finish(name);
}
