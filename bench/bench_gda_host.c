/*
 * GDA between CPU ranks (host platform): what the proxy's protocol costs on
 * the network engine, without a GPU. Two ranks, one per virtual host, each
 * figure next to the raw engine's in the same run:
 *
 *   CCO_GDA_PATH=staged ccorun -n 2 --virtual-hosts 2 cco-bench-gda-host [-b 8] [-e 64K] [-f 8] [-n N] [-w N]
 *                                       [latency] [bw] [barrier]   (default: all)
 *
 * - latency (op gda_host_latency): put + signal ping-pong between the ranks'
 *   main threads (an 8-byte put is a put-value), half round trip in us, per
 *   size, against a write ping-pong of the raw engine of the same size
 *   between the same processes (the engine cco's proxy drives, same
 *   provider). On the staged path (the GPUs' path) a put is a message and,
 *   above 8 bytes, a landing-zone write before it; CCO_NET_NOTIFY=0 turns
 *   off the notified message writes (docs/gda.md) for an A/B;
 * - bw (op gda_host_put): rank 0 puts -n transfers of each size (default
 *   256 MiB / size, 4 to 4096; sizes 1 MiB to 16 MiB by 4) to rank 1 and
 *   flushes, GB/s, against the raw engine writing the same transfers between
 *   host buffers with every piece in flight (rank 1 progressing);
 * - barrier (op gda_host_barrier): the GDA barrier over the rail team (one
 *   rank per host) from the main thread at warp scope, per sync, -n syncs
 *   (default 2000) after -w (200), against the raw engine's 8-byte write half
 *   round trip (a barrier of two is one one-way trip each way, at once).
 *
 * One JSON line per measurement (bench_json.h); "path" says which GDA path
 * ran, "notify" whether the engine offered notified writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "bench_json.h"
#include "cco/cco.h"
#include "cco/cco_device.h"
#include "cco/cco_gda.h"
#include "transport/net/net.h"

#define OK(call)                                                                                              \
  do {                                                                                                        \
    ccoResult_t r_ = (call);                                                                                  \
    if (r_ != ccoSuccess) {                                                                                   \
      fprintf(stderr, "cco-bench-gda-host: %s: %s (%s)\n", #call, ccoGetErrorString(r_), ccoGetLastError(NULL)); \
      exit(1);                                                                                                \
    }                                                                                                         \
  } while (0)

static ccoComm* comm;
static int rank;
static const char* const kOps[] = {"latency", "bw", "barrier", NULL};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------- raw engine */

typedef struct {
  cco_net* net;
  cco_net_mr* mr;
  char* buf; /* source [0, max), destination [max, 2 max), flag after */
  size_t max;
  cco_net_rkey peerKey;
} raw_engine;

static void raw_open(raw_engine* r, size_t max) {
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  OK(cco_net_open(&cfg, &r->net));
  r->max = max;
  size_t bytes = (2 * max + 4096 + 4095) & ~(size_t)4095; /* aligned_alloc wants a multiple of the alignment */
  r->buf = aligned_alloc(4096, bytes);
  if (!r->buf) {
    fprintf(stderr, "cco-bench-gda-host: no memory for %zu bytes\n", bytes);
    exit(1);
  }
  memset(r->buf, 0, bytes);
  cco_net_rkey mine;
  OK(cco_net_mr_reg(r->net, r->buf, bytes, CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE, &r->mr, &mine));
  struct {
    uint8_t addr[CCO_NET_ADDR_MAX];
    cco_net_rkey key;
  } hello[2];
  OK(cco_net_local_addr(r->net, hello[rank].addr));
  hello[rank].key = mine;
  OK(ccoBootstrapAllGather(comm, &hello[rank], hello, sizeof(hello[0])));
  uint8_t addrs[2 * CCO_NET_ADDR_MAX];
  memcpy(addrs, hello[0].addr, CCO_NET_ADDR_MAX);
  memcpy(addrs + CCO_NET_ADDR_MAX, hello[1].addr, CCO_NET_ADDR_MAX);
  OK(cco_net_connect(r->net, 2, addrs));
  r->peerKey = hello[1 - rank].key;
}

static void raw_close(raw_engine* r) {
  cco_net_mr_dereg(r->net, r->mr);
  cco_net_close(r->net);
  free(r->buf);
}

/* Write ping-pong of `bytes` (the last 8 carry the round number, which the
 * receiver polls); half round trip in us. */
static double raw_latency(raw_engine* r, size_t bytes, int iters, int warm) {
  size_t size = bytes < 8 ? 8 : bytes;
  volatile uint64_t* mine = (volatile uint64_t*)(r->buf + r->max + size - 8);
  uint64_t* src = (uint64_t*)(r->buf + size - 8);
  cco_net_completion c[64];
  int n = 0;
  OK(ccoBarrierAll(comm));
  double t0 = now_s();
  for (int i = 1; i <= warm + iters; i++) {
    if (i == warm + 1) t0 = now_s();
    if (rank == 1)
      while (*mine != (uint64_t)i) cco_net_progress(r->net, c, 64, &n);
    *src = (uint64_t)i;
    while (cco_net_write(r->net, 1 - rank, r->buf, r->mr, size, r->peerKey, r->max, NULL) == CCO_NET_BUSY)
      cco_net_progress(r->net, c, 64, &n);
    if (rank == 0)
      while (*mine != (uint64_t)i) cco_net_progress(r->net, c, 64, &n);
  }
  double us = (now_s() - t0) / iters / 2 * 1e6;
  for (int k = 0; k < 1000; k++) cco_net_progress(r->net, c, 64, &n); /* our last write's completion */
  OK(ccoBarrierAll(comm));
  memset(r->buf + r->max, 0, size);
  OK(ccoBarrierAll(comm));
  return us;
}

/* Rank 0 writes `count` transfers of `bytes` (pieces of the engine's largest
 * message, all in flight) to rank 1, after `warm` untimed ones (the first
 * write to a peer opens the connection), then a flag; rank 1 progresses
 * until the flag comes. Rank 0's GB/s. */
static double raw_bandwidth(raw_engine* r, size_t bytes, int count, int warm) {
  volatile uint64_t* flag = (volatile uint64_t*)(r->buf + 2 * r->max);
  uint64_t* src = (uint64_t*)(r->buf + 2 * r->max + 64);
  cco_net_completion c[64];
  int n = 0;
  OK(ccoBarrierAll(comm));
  double gbps = 0;
  if (rank == 0) {
    size_t msg = cco_net_max_msg(r->net);
    long pending = 0;
    double t0 = now_s();
    for (int k = -warm; k < count; k++) {
      while (k == 0 && pending > 0) { /* the warm-up's writes are done: the clock starts */
        OK(cco_net_progress(r->net, c, 64, &n));
        pending -= n;
      }
      if (k == 0) t0 = now_s();
      for (size_t off = 0; off < bytes; off += msg) {
        size_t len = bytes - off < msg ? bytes - off : msg;
        ccoResult_t res;
        while ((res = cco_net_write(r->net, 1, r->buf + off, r->mr, len, r->peerKey, r->max + off, NULL)) ==
               CCO_NET_BUSY) {
          OK(cco_net_progress(r->net, c, 64, &n));
          pending -= n;
        }
        OK(res);
        pending++;
      }
    }
    while (pending > 0) {
      OK(cco_net_progress(r->net, c, 64, &n));
      for (int i = 0; i < n; i++) OK(c[i].result);
      pending -= n;
    }
    gbps = (double)bytes * count / (now_s() - t0) / 1e9;
    *src = (uint64_t)bytes;
    while (cco_net_write(r->net, 1, src, r->mr, 8, r->peerKey, 2 * r->max, NULL) == CCO_NET_BUSY)
      cco_net_progress(r->net, c, 64, &n);
    for (pending = 1; pending > 0; pending -= n) OK(cco_net_progress(r->net, c, 64, &n));
  } else {
    while (*flag != (uint64_t)bytes) OK(cco_net_progress(r->net, c, 64, &n));
    *flag = 0;
  }
  OK(ccoBarrierAll(comm));
  return gbps;
}

/* -------------------------------------------------------------------- GDA */

/* Rank 0 puts `count` transfers of `bytes` from its window's second half
 * into rank 1's first half and flushes; its GB/s (0 on rank 1, whose proxy
 * serves meanwhile), negative when a post or the flush failed. */
static double gda_bandwidth(ccoDevComm* dc, ccoWindow_t win, size_t bytes, int count, int warm) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  double gbps = 0;
  OK(ccoBarrierAll(comm));
  if (rank == 0) {
    double t0 = now_s();
    for (int k = -warm; k < count; k++) {
      if (k == 0) {
        if (ccoGdaFlush(&g, ccoCoopThread) != ccoDevSuccess) return -1;
        t0 = now_s();
      }
      if (ccoGdaPut(&g, 1, win, 0, win, bytes, bytes, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
                    ccoGdaThreadAggregate) != ccoDevSuccess)
        return -1;
    }
    if (ccoGdaFlush(&g, ccoCoopThread) != ccoDevSuccess) return -1;
    gbps = (double)bytes * count / (now_s() - t0) / 1e9;
  }
  OK(ccoBarrierAll(comm));
  return gbps;
}


/* Put + signal ping-pong through GDA from this thread; half round trip in
 * us, or a negative value when a wait failed. Signal 0 counts the rounds. */
static double gda_latency(ccoDevComm* dc, ccoWindow_t win, size_t bytes, int iters, int warm) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  ccoGdaResetSignal(&g, 0);
  OK(ccoBarrierAll(comm));
  int peer = 1 - rank, first = rank == 0;
  double t0 = now_s();
  for (int i = 0; i < warm + iters; i++) {
    if (i == warm) t0 = now_s();
    if (!first && ccoGdaWaitSignal(&g, 0, (uint64_t)i + 1, 0, ccoCoopThread) != ccoDevSuccess) return -1;
    ccoDevStatus_t st =
        bytes == 8 ? ccoGdaPutValue(&g, peer, win, 0, (uint64_t)i, 8, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER,
                                    ccoCoopThread, ccoGdaThreadAggregate)
                   : ccoGdaPut(&g, peer, win, 0, win, bytes, bytes, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER,
                               ccoCoopThread, ccoGdaThreadAggregate);
    if (st != ccoDevSuccess) return -1;
    if (first && ccoGdaWaitSignal(&g, 0, (uint64_t)i + 1, 0, ccoCoopThread) != ccoDevSuccess) return -1;
  }
  double us = (now_s() - t0) / iters / 2 * 1e6;
  if (ccoGdaFlush(&g, ccoCoopThread) != ccoDevSuccess) return -1;
  OK(ccoBarrierAll(comm));
  return us;
}

/* `iters` GDA barrier syncs after `warm`; us per sync, negative on a
 * failed sync. */
static double gda_barrier(ccoDevComm* dc, int iters, int warm) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  ccoGdaBarrierSession b = ccoGdaBarrierSessionInit(dc, &g, 0, ccoCoopWarp);
  OK(ccoBarrierAll(comm));
  double t0 = now_s();
  for (int i = -warm; i < iters; i++) {
    if (i == 0) t0 = now_s();
    if (ccoGdaBarrierSync(&b) != ccoDevSuccess) return -1;
  }
  double us = (now_s() - t0) / iters * 1e6;
  OK(ccoBarrierAll(comm));
  return us;
}

/* What tells this run's lines apart: provider, GDA path, notified writes. */
typedef struct {
  const char* provider;
  const char* path;
  int notify, ranks;
} run_keys;

/* Rank 0 prints a figure and its raw-engine reference, one line each. */
static void emit_pair(const run_keys* k, const char* op, long long bytes, long long iters, const char* metric,
                      double gda, double ref, const char* refName) {
  if (rank != 0) return;
  bench_line l;
  bench_line_start(&l, "gda_host", op, bytes, k->ranks, iters);
  bench_line_str(&l, "provider", k->provider);
  bench_line_str(&l, "path", k->path);
  bench_line_int(&l, "notify", k->notify);
  bench_line_emit(&l, metric, gda, NULL);
  bench_line_emit(&l, metric, ref, refName);
}

int main(int argc, char** argv) {
  bench_args a = {0};
  a.program = "cco-bench-gda-host";
  a.about = "GDA between CPU ranks (host platform): put + signal ping-pong beside the raw network engine "
            "(ccorun -n 2 --virtual-hosts 2; CCO_GDA_PATH=staged for the GPUs' path).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = kOps;
  a.sizeAlign = 8;
  a.sizeMax = 64u << 20;
  a.defaults = "latency: -b 8 -e 64K -f 8, -n 2000 -w 200; bw: -b 1M -e 16M -f 4, -n 256 MiB / size (4 to 4096) "
               "-w 2 (-b/-e/-f apply to both); barrier: -n 2000 -w 200";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 8, 64 * 1024, 8);
  bench_sweep bw = bench_args_sweep(&a, 1u << 20, 16u << 20, 4);
  int iters = (int)bench_args_iters(&a, 2000), warm = (int)bench_args_warmup(&a, 200);
  int wantLat = bench_args_want(&a, "latency"), wantBw = bench_args_want(&a, "bw");
  unsigned long long maxBytes = (wantLat && sw.max > (wantBw ? bw.max : 0)) ? sw.max : bw.max;

  OK(ccoCommCreateFromEnv(0, &comm));
  int size = 0, nodes = 0;
  ccoCommRank(comm, &rank);
  ccoCommSize(comm, &size);
  ccoCommNodeCount(comm, &nodes);
  if (size != 2 || nodes != 2) {
    fprintf(stderr, "cco-bench-gda-host: run with 2 ranks on 2 hosts (ccorun -n 2 --virtual-hosts 2)\n");
    ccoCommDestroy(comm);
    return 2;
  }
  void* local = NULL;
  ccoWindow_t win;
  OK(ccoWindowRegisterAlloc(comm, 2 * maxBytes, &win, &local));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionCrossNode;
  reqs.gdaSignalCount = 1;
  reqs.railGdaBarrierCount = 1;
  ccoDevComm dc;
  OK(ccoDevCommCreate(comm, &reqs, &dc));
  raw_engine raw;
  raw_open(&raw, maxBytes);
  run_keys keys = {getenv("CCO_NET_PROVIDER") && getenv("CCO_NET_PROVIDER")[0] ? getenv("CCO_NET_PROVIDER")
                                                                              : "tcp;ofi_rxm",
                   getenv("CCO_GDA_PATH") && getenv("CCO_GDA_PATH")[0] ? getenv("CCO_GDA_PATH") : "auto",
                   cco_net_can_notify(raw.net), size};
  int failed = 0;
  for (unsigned long long bytes = sw.min; wantLat && bytes && bytes <= sw.max; bytes = bench_sweep_next(&sw, bytes)) {
    double gda = gda_latency(&dc, win, (size_t)bytes, iters, warm);
    double ref = raw_latency(&raw, (size_t)bytes, iters, warm);
    if (gda < 0) {
      fprintf(stderr, "rank %d: a GDA wait or post failed at %llu bytes\n", rank, bytes);
      failed = 1;
      break;
    }
    emit_pair(&keys, "gda_host_latency", (long long)bytes, iters, "us", gda, ref, "raw_engine");
  }
  for (unsigned long long bytes = bw.min; wantBw && !failed && bytes; bytes = bench_sweep_next(&bw, bytes)) {
    long long byVolume = (long long)((256ull << 20) / bytes);
    int count = (int)(a.iters ? a.iters : byVolume < 4 ? 4 : byVolume > 4096 ? 4096 : byVolume);
    int bwWarm = (int)bench_args_warmup(&a, 2); /* -w is shared with latency's thousands of round trips */
    if (bwWarm > 8) bwWarm = 8;
    double gda = gda_bandwidth(&dc, win, (size_t)bytes, count, bwWarm);
    double ref = raw_bandwidth(&raw, (size_t)bytes, count, bwWarm);
    if (gda < 0) {
      fprintf(stderr, "rank %d: a GDA put or flush failed at %llu bytes\n", rank, bytes);
      failed = 1;
      break;
    }
    emit_pair(&keys, "gda_host_put", (long long)bytes, count, "GBps", gda, ref, "raw_engine");
  }
  if (bench_args_want(&a, "barrier") && !failed) {
    double gda = gda_barrier(&dc, iters, warm);
    double ref = raw_latency(&raw, 8, iters, warm);
    if (gda < 0) {
      fprintf(stderr, "rank %d: a GDA barrier sync failed\n", rank);
      failed = 1;
    } else {
      emit_pair(&keys, "gda_host_barrier", BENCH_NO_BYTES, iters, "us", gda, ref, "raw_engine_half_round_trip");
    }
  }
  OK(ccoBarrierAll(comm));
  raw_close(&raw);
  ccoResult_t asyncErr = ccoSuccess;
  ccoCommGetAsyncError(comm, &asyncErr);
  if (asyncErr != ccoSuccess) fprintf(stderr, "rank %d: async error %s\n", rank, ccoGetErrorString(asyncErr));
  OK(ccoDevCommDestroy(comm, &dc));
  OK(ccoWindowDeregister(comm, win));
  OK(ccoCommDestroy(comm));
  return failed || asyncErr != ccoSuccess;
}
