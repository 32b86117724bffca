// GDA benchmark, two ranks (FULL connection type on one host, so the two
// ranks are GDA peers over the network engine's loopback), each figure next
// to its reference measured in the same run:
//
//   ccorun -n 2 cco-bench-gda [-b 1M] [-e 64M] [-f 4] [-n N] [-w N] [--depth 4096]
//                             [overhead] [bw] [latency] [rate]   (default: all; under
//                              MPS when both ranks share a GPU)
//   ccorun -n 2 --virtual-hosts 2 cco-bench-gda barrier
//
// - overhead (op gda_proxy_overhead): a zero-byte put + flush round trip
//   issued by a kernel, -n times (2000) after -w (100), against the raw round
//   trip kernel -> host-mapped word -> host thread -> host-mapped word ->
//   kernel (the least any proxy can cost); goal <= 2x;
// - bw (op gda_put): put bandwidth from a kernel per size (GPU windows,
//   staged path on a provider without FI_HMEM), -n puts (default 512 MiB /
//   size, at most 65536) after -w (1), against the same provider driven
//   directly from the host between host buffers (the network engine cco
//   uses, no GPU): goal >= 0.9x;
// - latency (op gda_latency): 8-byte put + signal ping-pong between kernels,
//   -n round trips (1000) after -w (100), against an 8-byte write ping-pong
//   of the raw engine between host threads;
// - rate (op gda_put_value_rate): messages per second of 8-byte put-values
//   from a block of 256 threads (independent thread mode), -n per thread
//   (64) after -w (4), Immediate and Deferred doorbells, against 8-byte
//   writes of the raw engine from the host;
// - barrier (ops gda_barrier, world_barrier; two hosts, one rank each): the
//   GDA barrier and the world barrier (LSA, rail GDA, LSA) from a block, per
//   sync, -n syncs (2000) after -w (100), against the 8-byte write half
//   round trip of the raw engine (a barrier of two needs one one-way trip
//   each way, at the same time).
// One JSON line per measurement (bench_json.h).
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.cuh"
#include "cco/cco_gda.h"
extern "C" {
#include "transport/net/net.h"
}

#define MiB (1ull << 20)

static ccoComm* comm;
static int rank;
static const char* const kOps[] = {"overhead", "bw", "latency", "rate", "barrier", NULL};

__device__ static uint64_t dev_now(void) { return cco_impl_clock_ns(); }

// ------------------------------------------------------------------ barrier

// `iters` syncs of the GDA barrier (world = 0) or of the world barrier
// (world = 1) at block scope; the time in ns and the worst status.
__global__ void barrier_loop(ccoDevComm dc, int world, int iters, unsigned long long* ns, int* status) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoGdaBarrierSession gb = ccoGdaBarrierSessionInit(&dc, &g, 0, ccoCoopBlock);
  ccoBarrierSession wb = ccoBarrierSessionInit(&dc, &g, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  uint64_t t0 = dev_now();
  for (int i = 0; i < iters && st == ccoDevSuccess; i++)
    st = world ? ccoBarrierSync(&wb) : ccoGdaBarrierSync(&gb);
  uint64_t t1 = dev_now();
  ccoBarrierSessionEnd(&wb);
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    *status = (int)st;
  }
}

// ------------------------------------------------------------ proxy overhead

__global__ void put_flush_loop(ccoDevComm dc, ccoWindow_t win, int peer, int warm, int iters,
                               unsigned long long* ns) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  uint64_t t0 = dev_now();
  for (int i = -warm; i < iters; i++) {
    if (i == 0) t0 = dev_now();
    ccoGdaPut(&g, peer, win, 0, win, 0, 0, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
    if (ccoGdaFlush(&g, ccoCoopThread) != ccoDevSuccess) return;
  }
  *ns = dev_now() - t0;
}

// Values 1 .. warm + iters, the last one echo_main waits for.
__global__ void raw_round_trip(uint64_t* toHost, const uint64_t* fromHost, int warm, int iters,
                               unsigned long long* ns) {
  uint64_t t0 = dev_now();
  for (int i = -warm; i < iters; i++) {
    if (i == 0) t0 = dev_now();
    uint64_t v = (uint64_t)(i + warm + 1);
    ccoSignalStore(toHost, v);
    while (ccoSignalLoad(fromHost) != v) {
    }
  }
  *ns = dev_now() - t0;
}

typedef struct {
  volatile uint64_t* in;
  volatile uint64_t* out;
  uint64_t last;
} echo_arg;

static void* echo_main(void* p) {
  echo_arg* a = (echo_arg*)p;
  for (uint64_t seen = 0; seen != a->last;) {
    uint64_t v = __atomic_load_n(a->in, __ATOMIC_ACQUIRE);
    if (v != seen) {
      __atomic_store_n(a->out, v, __ATOMIC_RELEASE);
      seen = v;
    }
  }
  return NULL;
}

// ------------------------------------------------------------ bandwidth

__global__ void put_burst(ccoDevComm dc, ccoWindow_t win, int peer, uint64_t dstOff, size_t bytes, int count) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  for (int k = 0; k < count; k++)
    ccoGdaPut(&g, peer, win, dstOff, win, 0, bytes, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
              ccoGdaThreadAggregate);
  ccoGdaFlush(&g, ccoCoopThread);
}

// ------------------------------------------------------------ latency

__global__ void ping_pong(ccoDevComm dc, ccoWindow_t win, int peer, int iters, int first, uint64_t base,
                          unsigned long long* ns) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  uint64_t t0 = dev_now();
  for (int i = 0; i < iters; i++) {
    if (!first && ccoGdaWaitSignal(&g, 0, base + i + 1, 0, ccoCoopThread) != ccoDevSuccess) return;
    ccoGdaPutValue(&g, peer, win, 64, (uint64_t)i, 8, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER, ccoCoopThread,
                   ccoGdaThreadAggregate);
    if (first && ccoGdaWaitSignal(&g, 0, base + i + 1, 0, ccoCoopThread) != ccoDevSuccess) return;
  }
  ccoGdaFlush(&g, ccoCoopThread);
  *ns = dev_now() - t0;
}

// ------------------------------------------------------------ message rate

// ns[0]: until every post was written (credits included), ns[1]: until the flush returned.
__global__ void put_values(ccoDevComm dc, ccoWindow_t win, int peer, int perThread, ccoGdaDoorbellMode_t mode,
                           unsigned long long* ns) {
  ccoGda g = ccoGdaHandle(&dc, 0, mode);
  uint64_t t0 = dev_now();
  for (int i = 0; i < perThread; i++)
    ccoGdaPutValue(&g, peer, win, (threadIdx.x * 8u) % 4096u, (uint64_t)i, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER,
                   ccoCoopBlock, ccoGdaThreadIndependent);
  __syncthreads();
  uint64_t t1 = dev_now();
  ccoGdaFlush(&g, ccoCoopBlock);
  if (threadIdx.x == 0) ns[0] = t1 - t0, ns[1] = dev_now() - t0;
}

// ------------------------------------------------------------ raw engine

// Buffer: source [0, maxWrite), destination [maxWrite, 2 maxWrite), control words after.
typedef struct {
  cco_net* net;
  cco_net_mr* mr;
  char* buf;
  size_t bytes;
  uint64_t dstOff, ctrlOff;
  cco_net_rkey peerKey;
} raw_engine;

static void raw_open(raw_engine* r, size_t maxWrite) {
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  CCO_OK(cco_net_open(&cfg, &r->net));
  r->dstOff = maxWrite;
  r->ctrlOff = 2 * maxWrite;
  size_t bytes = r->ctrlOff + 65536;
  r->bytes = bytes;
  r->buf = (char*)aligned_alloc(4096, bytes);
  memset(r->buf, 0, bytes);
  cco_net_rkey mine;
  CCO_OK(cco_net_mr_reg(r->net, r->buf, bytes, CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE, &r->mr, &mine));
  struct {
    uint8_t addr[CCO_NET_ADDR_MAX];
    cco_net_rkey key;
  } hello[2];
  CCO_OK(cco_net_local_addr(r->net, hello[rank].addr));
  hello[rank].key = mine;
  CCO_OK(ccoBootstrapAllGather(comm, &hello[rank], hello, sizeof(hello[0])));
  uint8_t addrs[2 * CCO_NET_ADDR_MAX];
  memcpy(addrs, hello[0].addr, CCO_NET_ADDR_MAX);
  memcpy(addrs + CCO_NET_ADDR_MAX, hello[1].addr, CCO_NET_ADDR_MAX);
  CCO_OK(cco_net_connect(r->net, 2, addrs));
  r->peerKey = hello[1 - rank].key;
}

// Progresses until `pending` completions are in; returns false on error.
static bool raw_drain(raw_engine* r, int* pending) {
  cco_net_completion c[64];
  while (*pending > 0) {
    int n = 0;
    if (cco_net_progress(r->net, c, 64, &n) != ccoSuccess) return false;
    for (int i = 0; i < n; i++)
      if (c[i].result != ccoSuccess) return false;
    *pending -= n;
  }
  return true;
}

static void raw_post(raw_engine* r, ccoResult_t (*post)(raw_engine*, void*), int* pending) {
  for (;;) {
    ccoResult_t res = post(r, NULL);
    if (res == ccoSuccess) break;
    if (res != CCO_NET_BUSY) {
      fprintf(stderr, "rank %d: raw engine post failed\n", rank);
      exit(1);
    }
    cco_net_completion c[64];
    int n = 0;
    cco_net_progress(r->net, c, 64, &n);
    *pending -= n;
  }
  (*pending)++;
}

static size_t g_rawLen, g_rawOff;
static ccoResult_t raw_write_piece(raw_engine* r, void*) {
  return cco_net_write(r->net, 1 - rank, r->buf + g_rawOff, r->mr, g_rawLen, r->peerKey, r->dstOff + g_rawOff, NULL);
}

// Rank 0 writes `count` transfers of `bytes` to rank 1 (pieces of the
// engine's largest message, all in flight), then a flag; rank 1 progresses
// until the flag arrives. Returns rank 0's GB/s.
static double raw_bandwidth(raw_engine* r, size_t bytes, int count) {
  volatile uint64_t* flag = (volatile uint64_t*)(r->buf + r->ctrlOff);
  CCO_OK(ccoBarrierAll(comm));
  double gbps = 0;
  if (rank == 0) {
    size_t msg = cco_net_max_msg(r->net);
    int pending = 0;
    double t0 = bench_now_s();
    for (int k = 0; k < count; k++)
      for (size_t off = 0; off < bytes; off += msg) {
        g_rawOff = off;
        g_rawLen = bytes - off < msg ? bytes - off : msg;
        raw_post(r, raw_write_piece, &pending);
      }
    if (!raw_drain(r, &pending)) exit(1);
    gbps = (double)bytes * count / (bench_now_s() - t0) / 1e9;
    uint64_t* src = (uint64_t*)(r->buf + r->ctrlOff + 64);
    *src = (uint64_t)bytes;
    while (cco_net_write(r->net, 1, src, r->mr, 8, r->peerKey, r->ctrlOff, NULL) == CCO_NET_BUSY) {
    }
    pending = 1;
    if (!raw_drain(r, &pending)) exit(1);
  } else {
    cco_net_completion c[64];
    int n = 0;
    while (*flag != (uint64_t)bytes) cco_net_progress(r->net, c, 64, &n);
    *flag = 0;
  }
  CCO_OK(ccoBarrierAll(comm));
  return gbps;
}

// 8-byte write ping-pong through the raw engine; half round trip in us.
static double raw_latency(raw_engine* r, int iters) {
  volatile uint64_t* mine = (volatile uint64_t*)(r->buf + r->ctrlOff + 4096);
  uint64_t* src = (uint64_t*)(r->buf + r->ctrlOff + 8192);
  CCO_OK(ccoBarrierAll(comm));
  double t0 = bench_now_s();
  cco_net_completion c[64];
  int n = 0;
  for (int i = 1; i <= iters; i++) {
    if (rank == 1)
      while (*mine != (uint64_t)i) cco_net_progress(r->net, c, 64, &n);
    *src = (uint64_t)i;
    while (cco_net_write(r->net, 1 - rank, src, r->mr, 8, r->peerKey, r->ctrlOff + 4096, NULL) == CCO_NET_BUSY)
      cco_net_progress(r->net, c, 64, &n);
    if (rank == 0)
      while (*mine != (uint64_t)i) cco_net_progress(r->net, c, 64, &n);
  }
  double us = (bench_now_s() - t0) / iters / 2 * 1e6;
  for (int k = 0; k < 1000; k++) cco_net_progress(r->net, c, 64, &n); // our last write's completion
  CCO_OK(ccoBarrierAll(comm));
  return us;
}

// Everything a figure needs.
typedef struct {
  ccoDevComm dc;
  ccoWindow_t win;
  int peer, size;
  uint64_t landing; // where puts land in the peer's window (the window's second half)
  const char* provider;
  raw_engine raw;
  unsigned long long* dNs;
  unsigned long long* dPhases;
  int* dStatus;
} gda_bench;

static void line_start(bench_line* l, const gda_bench* b, const char* op, long long bytes, long long iters) {
  bench_line_start(l, "gda", op, bytes, b->size, iters);
  bench_line_str(l, "provider", b->provider);
}

static unsigned long long read_ns(const unsigned long long* dNs) {
  unsigned long long ns = 0;
  CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
  return ns;
}

// Rank 0 alone.
static void bench_overhead(gda_bench* b, int iters, int warm) {
  put_flush_loop<<<1, 1>>>(b->dc, b->win, b->peer, warm, iters, b->dNs);
  CUDA_OK(cudaDeviceSynchronize());
  double gdaUs = read_ns(b->dNs) / 1e3 / iters;
  uint64_t* words = NULL;
  CUDA_OK(cudaHostAlloc(&words, 256, cudaHostAllocMapped));
  memset(words, 0, 256);
  uint64_t* dIn = NULL;
  CUDA_OK(cudaHostGetDevicePointer(&dIn, words, 0));
  echo_arg e = {words, words + 8, (uint64_t)warm + (uint64_t)iters};
  pthread_t th;
  pthread_create(&th, NULL, echo_main, &e);
  raw_round_trip<<<1, 1>>>(dIn, dIn + 8, warm, iters, b->dNs);
  CUDA_OK(cudaDeviceSynchronize());
  pthread_join(th, NULL);
  double rawUs = read_ns(b->dNs) / 1e3 / iters;
  bench_line l;
  line_start(&l, b, "gda_proxy_overhead", 0, iters);
  bench_line_num(&l, "goal_ratio_max", 2.0);
  bench_line_emit(&l, "us", gdaUs, NULL);
  line_start(&l, b, "gda_proxy_overhead", 0, iters);
  bench_line_emit(&l, "us", rawUs, "raw_ring_round_trip");
  cudaFreeHost(words);
}

// GDA from a kernel, then the raw engine between host buffers.
static void bench_bw(gda_bench* b, const bench_sweep* sw, long long iters, int warm) {
  for (unsigned long long bytes = sw->min; bytes; bytes = bench_sweep_next(sw, bytes)) {
    long long byVolume = (long long)(512 * MiB / bytes);
    int count = (int)(iters ? iters : byVolume < 1 ? 1 : byVolume > 65536 ? 65536 : byVolume);
    CCO_OK(ccoBarrierAll(comm));
    double gda = 0;
    if (rank == 0) {
      if (warm) put_burst<<<1, 1>>>(b->dc, b->win, b->peer, b->landing, bytes, warm);
      CUDA_OK(cudaDeviceSynchronize());
      double t0 = bench_now_s();
      put_burst<<<1, 1>>>(b->dc, b->win, b->peer, b->landing, bytes, count);
      CUDA_OK(cudaDeviceSynchronize());
      gda = (double)bytes * count / (bench_now_s() - t0) / 1e9;
    }
    double ref = raw_bandwidth(&b->raw, bytes, count);
    if (rank == 0) {
      bench_line l;
      line_start(&l, b, "gda_put", (long long)bytes, count);
      bench_line_num(&l, "goal_ratio_min", 0.9);
      bench_line_emit(&l, "GBps", gda, NULL);
      line_start(&l, b, "gda_put", (long long)bytes, count);
      bench_line_emit(&l, "GBps", ref, "raw_engine");
    }
  }
}

static void bench_latency(gda_bench* b, int iters, int warm) {
  CCO_OK(ccoBarrierAll(comm));
  if (warm) ping_pong<<<1, 1>>>(b->dc, b->win, b->peer, warm, rank == 0, 0, b->dNs);
  CUDA_OK(cudaDeviceSynchronize());
  CCO_OK(ccoBarrierAll(comm));
  ping_pong<<<1, 1>>>(b->dc, b->win, b->peer, iters, rank == 0, (uint64_t)warm, b->dNs);
  CUDA_OK(cudaDeviceSynchronize());
  double gdaLat = read_ns(b->dNs) / 1e3 / iters / 2;
  double rawLat = raw_latency(&b->raw, iters);
  if (rank == 0) {
    bench_line l;
    line_start(&l, b, "gda_latency", 8, iters);
    bench_line_emit(&l, "us", gdaLat, NULL);
    line_start(&l, b, "gda_latency", 8, iters);
    bench_line_emit(&l, "us", rawLat, "raw_engine");
  }
}

// Two hosts, one rank each; every sync's status is checked.
static void bench_barrier(gda_bench* b, int iters, int warm) {
  static const char* const ops[2] = {"gda_barrier", "world_barrier"};
  double us[2] = {0, 0};
  int bad[2] = {0, 0};
  for (int world = 0; world < 2; world++) {
    CCO_OK(ccoBarrierAll(comm));
    if (warm) barrier_loop<<<1, 128>>>(b->dc, world, warm, b->dNs, b->dStatus);
    CUDA_OK(cudaDeviceSynchronize());
    CCO_OK(ccoBarrierAll(comm));
    barrier_loop<<<1, 128>>>(b->dc, world, iters, b->dNs, b->dStatus);
    CUDA_OK(cudaDeviceSynchronize());
    int st = 0;
    CUDA_OK(cudaMemcpy(&st, b->dStatus, sizeof(st), cudaMemcpyDeviceToHost));
    bad[world] = st != 0;
    us[world] = read_ns(b->dNs) / 1e3 / iters;
  }
  double rawLat = raw_latency(&b->raw, 1000);
  for (int world = 0; rank == 0 && world < 2; world++) {
    bench_line l;
    line_start(&l, b, ops[world], BENCH_NO_BYTES, iters);
    bench_line_int(&l, "hosts", 2);
    bench_line_int(&l, "threads", 128);
    bench_line_int(&l, "bad_status", bad[world]);
    bench_line_emit(&l, "us", us[world], NULL);
    line_start(&l, b, ops[world], BENCH_NO_BYTES, 1000);
    bench_line_int(&l, "hosts", 2);
    bench_line_emit(&l, "us", rawLat, "raw_engine");
  }
}

// Rank 0 sends, against 8-byte writes of the raw engine from the host, as
// many in flight as it takes.
static void bench_rate(gda_bench* b, int perThread, int warm) {
  const int threads = 256, messages = perThread * threads;
  double rawRate = raw_bandwidth(&b->raw, 8, messages) * 1e9 / 8 / 1e6;
  for (int mode = 0; mode < 2; mode++) {
    CCO_OK(ccoBarrierAll(comm));
    if (rank != 0) continue;
    if (warm) put_values<<<1, threads>>>(b->dc, b->win, b->peer, warm, (ccoGdaDoorbellMode_t)mode, b->dPhases);
    CUDA_OK(cudaDeviceSynchronize());
    double t0 = bench_now_s();
    put_values<<<1, threads>>>(b->dc, b->win, b->peer, perThread, (ccoGdaDoorbellMode_t)mode, b->dPhases);
    CUDA_OK(cudaDeviceSynchronize());
    double s = bench_now_s() - t0;
    unsigned long long phases[2] = {0, 0};
    CUDA_OK(cudaMemcpy(phases, b->dPhases, sizeof(phases), cudaMemcpyDeviceToHost));
    bench_line l;
    line_start(&l, b, "gda_put_value_rate", 8, messages);
    bench_line_str(&l, "doorbell", mode ? "Deferred" : "Immediate");
    bench_line_int(&l, "threads", threads);
    bench_line_num(&l, "posts_written_ms", phases[0] / 1e6);
    bench_line_num(&l, "flushed_ms", phases[1] / 1e6);
    bench_line_emit(&l, "Mmsg_per_s", messages / s / 1e6, NULL);
    line_start(&l, b, "gda_put_value_rate", 8, messages);
    bench_line_str(&l, "doorbell", mode ? "Deferred" : "Immediate");
    bench_line_emit(&l, "Mmsg_per_s", rawRate, "raw_engine");
  }
}

int main(int argc, char** argv) {
  bench_opt opts[] = {
      {.name = "depth", .kind = BENCH_OPT_INT, .min = 16, .max = 65536,
       .help = "slots per GDA ring, a power of two; the rate figure posts 16384, so credits count below that",
       .value = 4096},
  };
  bench_args a = {0};
  a.program = "cco-bench-gda";
  a.about = "GDA from kernels: proxy overhead, put bandwidth, latency, message rate, barriers, beside the raw "
            "network engine (ccorun -n 2; barrier: --virtual-hosts 2).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = kOps;
  a.opts = opts;
  a.nOpts = 1;
  a.defaults = "overhead: -n 2000 -w 100; bw: -b 1M -e 64M -f 4, -n 512 MiB / size (at most 65536) -w 1; "
               "latency: -n 1000 -w 100; rate: -n 64 per thread -w 4; barrier: -n 2000 -w 100";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  uint32_t depth = (uint32_t)opts[0].value;
  if (depth & (depth - 1)) {
    fprintf(stderr, "cco-bench-gda: --depth: %u is not a power of two\n", depth);
    return 2;
  }
  bench_sweep sw = bench_args_sweep(&a, MiB, 64 * MiB, 4);
  // Kernels wait on the proxy (docs/sdma.md); set before the driver starts, in bench_require_gpu.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  bench_require_gpu(a.program);
  CUDA_OK(pick_rank_device());
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  gda_bench b;
  memset(&b, 0, sizeof(b));
  ccoCommRank(comm, &rank);
  ccoCommSize(comm, &b.size);
  if (b.size != 2) {
    fprintf(stderr, "cco-bench-gda: run with 2 ranks\n");
    return 2;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionFull;
  reqs.gdaQueueDepth = depth;
  reqs.railGdaBarrierCount = 1;
  reqs.barrierCount = 1;
  int nNodes = 1;
  ccoCommNodeCount(comm, &nNodes);
  // Asked for by name, the barrier needs two hosts; in "all" it is left out on one.
  int barrierNamed = a.opMask != 0 && bench_args_want(&a, "barrier");
  if (barrierNamed && nNodes != 2) {
    fprintf(stderr, "cco-bench-gda: the barrier figure needs two hosts (ccorun --virtual-hosts 2)\n");
    return 2;
  }
  // Puts go from the window's first half into the peer's second half.
  b.landing = sw.max > 128 * MiB ? sw.max : 128 * MiB;
  void* local = NULL;
  CCO_OK(ccoWindowRegisterAlloc(comm, 2 * b.landing, &b.win, &local));
  CCO_OK(ccoDevCommCreate(comm, &reqs, &b.dc));
  b.peer = 1 - rank;
  CUDA_OK(cudaMalloc(&b.dNs, sizeof(*b.dNs)));
  CUDA_OK(cudaMalloc(&b.dPhases, 2 * sizeof(*b.dPhases)));
  CUDA_OK(cudaMalloc(&b.dStatus, sizeof(int)));
  b.provider = getenv("CCO_NET_PROVIDER") ? getenv("CCO_NET_PROVIDER") : "tcp;ofi_rxm";

  CCO_OK(ccoBarrierAll(comm));
  if (rank == 0 && bench_args_want(&a, "overhead"))
    bench_overhead(&b, (int)bench_args_iters(&a, 2000), (int)bench_args_warmup(&a, 100));
  CCO_OK(ccoBarrierAll(comm));
  raw_open(&b.raw, sw.max > 64 * MiB ? sw.max : 64 * MiB);
  if (bench_args_want(&a, "bw")) bench_bw(&b, &sw, a.iters, (int)bench_args_warmup(&a, 1));
  if (bench_args_want(&a, "latency"))
    bench_latency(&b, (int)bench_args_iters(&a, 1000), (int)bench_args_warmup(&a, 100));
  if (bench_args_want(&a, "barrier") && nNodes == 2)
    bench_barrier(&b, (int)bench_args_iters(&a, 2000), (int)bench_args_warmup(&a, 100));
  else if (bench_args_want(&a, "barrier") && rank == 0)
    fprintf(stderr, "cco-bench-gda: barrier figure not measured: one host (run it with ccorun --virtual-hosts 2)\n");
  if (bench_args_want(&a, "rate")) bench_rate(&b, (int)bench_args_iters(&a, 64), (int)bench_args_warmup(&a, 4));
  CCO_OK(ccoBarrierAll(comm));
  cco_net_mr_dereg(b.raw.net, b.raw.mr);
  cco_net_close(b.raw.net);
  free(b.raw.buf);
  ccoResult_t asyncErr = ccoSuccess;
  ccoCommGetAsyncError(comm, &asyncErr);
  if (asyncErr != ccoSuccess) fprintf(stderr, "rank %d: async error %s\n", rank, ccoGetErrorString(asyncErr));
  CCO_OK(ccoDevCommDestroy(comm, &b.dc));
  CCO_OK(ccoWindowDeregister(comm, b.win));
  CCO_OK(ccoCommDestroy(comm));
  cudaFree(b.dNs);
  cudaFree(b.dPhases);
  cudaFree(b.dStatus);
  return asyncErr == ccoSuccess ? 0 : 1;
}
