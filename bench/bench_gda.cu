// GDA benchmark, two ranks (FULL connection type on one host, so the two
// ranks are GDA peers over the network engine's loopback), each figure next
// to its reference measured in the same run:
//
//   ccorun -n 2 cco-bench-gda [overhead|bw|latency|rate]...   (default: all;
//                              under MPS when both ranks share a GPU)
//   ccorun -n 2 --virtual-hosts 2 cco-bench-gda barrier
//
// - proxy overhead: a zero-byte put + flush round trip issued by a kernel,
//   against the raw round trip kernel -> host-mapped word -> host thread ->
//   host-mapped word -> kernel (the least any proxy can cost); goal <= 2x;
// - put bandwidth from a kernel (GPU windows, staged path on a provider
//   without FI_HMEM) against the same provider driven directly from the host
//   between host buffers (the network engine cco uses, no GPU): goal >= 0.9x;
// - latency: 8-byte put + signal ping-pong between kernels, against an
//   8-byte write ping-pong of the raw engine between host threads;
// - messages per second of 8-byte put-values from a block of 256 threads
//   (independent thread mode), Immediate and Deferred doorbells, against
//   8-byte writes of the raw engine from the host;
// - barrier (two hosts, one rank each): the GDA barrier and the world
//   barrier (LSA, rail GDA, LSA) from a block, per sync, against the 8-byte
//   write half round trip of the raw engine (a barrier of two needs one
//   one-way trip each way, at the same time).
// Prints one JSON object per figure.
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.cuh"
#include "cco/cco_gda.h"
extern "C" {
#include "transport/net/net.h"
}

#define MiB (1ull << 20)
#define WIN_BYTES (256ull * MiB)
// Raw engine buffer: source [0, 64 MiB), destination [64, 128 MiB), control words after.
#define RAW_DST (64ull * MiB)
#define RAW_CTRL (128ull * MiB)
#define RAW_BYTES (RAW_CTRL + 65536)

static ccoComm* comm;
static int rank;

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

__global__ void put_flush_loop(ccoDevComm dc, ccoWindow_t win, int peer, int iters, unsigned long long* ns) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  uint64_t t0 = 0;
  for (int i = -100; i < iters; i++) { // 100 warm-up rounds
    if (i == 0) t0 = dev_now();
    ccoGdaPut(&g, peer, win, 0, win, 0, 0, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
    if (ccoGdaFlush(&g, ccoCoopThread) != ccoDevSuccess) return;
  }
  *ns = dev_now() - t0;
}

__global__ void raw_round_trip(uint64_t* toHost, const uint64_t* fromHost, int iters, unsigned long long* ns) {
  uint64_t t0 = 0;
  for (int i = -100; i < iters; i++) {
    if (i == 0) t0 = dev_now();
    uint64_t v = (uint64_t)(i + 101);
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

__global__ void put_burst(ccoDevComm dc, ccoWindow_t win, int peer, size_t bytes, int count) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  for (int k = 0; k < count; k++)
    ccoGdaPut(&g, peer, win, WIN_BYTES / 2, win, 0, bytes, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
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

typedef struct {
  cco_net* net;
  cco_net_mr* mr;
  char* buf;
  size_t bytes;
  cco_net_rkey peerKey;
} raw_engine;

static void raw_open(raw_engine* r, size_t bytes) {
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  CCO_OK(cco_net_open(&cfg, &r->net));
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
  return cco_net_write(r->net, 1 - rank, r->buf + g_rawOff, r->mr, g_rawLen, r->peerKey, RAW_DST + g_rawOff, NULL);
}

// Rank 0 writes `count` transfers of `bytes` to rank 1 (pieces of the
// engine's largest message, all in flight), then a flag; rank 1 progresses
// until the flag arrives. Returns rank 0's GB/s.
static double raw_bandwidth(raw_engine* r, size_t bytes, int count) {
  volatile uint64_t* flag = (volatile uint64_t*)(r->buf + RAW_CTRL);
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
    uint64_t* src = (uint64_t*)(r->buf + RAW_CTRL + 64);
    *src = (uint64_t)bytes;
    while (cco_net_write(r->net, 1, src, r->mr, 8, r->peerKey, RAW_CTRL, NULL) == CCO_NET_BUSY) {
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
  volatile uint64_t* mine = (volatile uint64_t*)(r->buf + RAW_CTRL + 4096);
  uint64_t* src = (uint64_t*)(r->buf + RAW_CTRL + 8192);
  CCO_OK(ccoBarrierAll(comm));
  double t0 = bench_now_s();
  cco_net_completion c[64];
  int n = 0;
  for (int i = 1; i <= iters; i++) {
    if (rank == 1)
      while (*mine != (uint64_t)i) cco_net_progress(r->net, c, 64, &n);
    *src = (uint64_t)i;
    while (cco_net_write(r->net, 1 - rank, src, r->mr, 8, r->peerKey, RAW_CTRL + 4096, NULL) == CCO_NET_BUSY)
      cco_net_progress(r->net, c, 64, &n);
    if (rank == 0)
      while (*mine != (uint64_t)i) cco_net_progress(r->net, c, 64, &n);
  }
  double us = (bench_now_s() - t0) / iters / 2 * 1e6;
  for (int k = 0; k < 1000; k++) cco_net_progress(r->net, c, 64, &n); // our last write's completion
  CCO_OK(ccoBarrierAll(comm));
  return us;
}

static int g_argc;
static char** g_argv;

// Whether the figure was asked for (no arguments: every figure).
static bool want(const char* what) {
  if (g_argc < 2) return true;
  for (int i = 1; i < g_argc; i++)
    if (!strcmp(g_argv[i], what)) return true;
  return false;
}

int main(int argc, char** argv) {
  g_argc = argc, g_argv = argv;
  setenv("CUDA_MODULE_LOADING", "EAGER", 0); // kernels wait on the proxy; see docs/sdma.md
  CUDA_OK(pick_rank_device());
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int n = 0;
  ccoCommRank(comm, &rank);
  ccoCommSize(comm, &n);
  if (n != 2) {
    fprintf(stderr, "cco-bench-gda: run with 2 ranks\n");
    return 2;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionFull;
  // Slots per ring; the message-rate figure posts 16384, so credits come
  // into play below that. CCO_BENCH_GDA_DEPTH overrides (a power of two).
  reqs.gdaQueueDepth = getenv("CCO_BENCH_GDA_DEPTH") ? (uint32_t)atoi(getenv("CCO_BENCH_GDA_DEPTH")) : 4096;
  reqs.railGdaBarrierCount = 1;
  reqs.barrierCount = 1;
  int nNodes = 1;
  ccoCommNodeCount(comm, &nNodes);
  if (g_argc >= 2 && want("barrier") && nNodes != 2) {
    fprintf(stderr, "cco-bench-gda: the barrier figure needs two hosts (ccorun --virtual-hosts 2)\n");
    return 2;
  }
  ccoWindow_t win = NULL;
  void* local = NULL;
  ccoDevComm dc;
  CCO_OK(ccoWindowRegisterAlloc(comm, WIN_BYTES, &win, &local));
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  int peer = 1 - rank;
  unsigned long long *dNs = NULL, *dPhases = NULL;
  CUDA_OK(cudaMalloc(&dNs, sizeof(*dNs)));
  CUDA_OK(cudaMalloc(&dPhases, 2 * sizeof(*dPhases)));
  unsigned long long ns = 0;
  const char* provider = getenv("CCO_NET_PROVIDER") ? getenv("CCO_NET_PROVIDER") : "tcp;ofi_rxm";

  // Proxy overhead (rank 0).
  const int iters = 2000;
  CCO_OK(ccoBarrierAll(comm));
  if (rank == 0 && want("overhead")) {
    put_flush_loop<<<1, 1>>>(dc, win, peer, iters, dNs);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
    double gdaUs = ns / 1e3 / iters;
    uint64_t* words = NULL;
    CUDA_OK(cudaHostAlloc(&words, 256, cudaHostAllocMapped));
    memset(words, 0, 256);
    uint64_t *dIn = NULL, *dOut = NULL;
    CUDA_OK(cudaHostGetDevicePointer(&dIn, words, 0));
    dOut = dIn + 8;
    echo_arg a = {words, words + 8, (uint64_t)(iters + 100)};
    pthread_t th;
    pthread_create(&th, NULL, echo_main, &a);
    raw_round_trip<<<1, 1>>>(dIn, dOut, iters, dNs);
    CUDA_OK(cudaDeviceSynchronize());
    pthread_join(th, NULL);
    CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
    double rawUs = ns / 1e3 / iters;
    printf("{\"bench\":\"gda_proxy_overhead\",\"iters\":%d,\"put0_flush_us\":%.2f,\"raw_ring_round_trip_us\":%.2f,"
           "\"ratio\":%.2f,\"goal_ratio_max\":2.0}\n",
           iters, gdaUs, rawUs, gdaUs / rawUs);
    cudaFreeHost(words);
  }
  CCO_OK(ccoBarrierAll(comm));

  // Bandwidth: GDA from a kernel, then the raw engine between host buffers.
  raw_engine raw;
  raw_open(&raw, RAW_BYTES);
  const size_t sizes[] = {MiB, 4 * MiB, 16 * MiB, 64 * MiB};
  for (size_t s = 0; want("bw") && s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    size_t bytes = sizes[s];
    int count = (int)(512 * MiB / bytes);
    CCO_OK(ccoBarrierAll(comm));
    double gda = 0;
    if (rank == 0) {
      put_burst<<<1, 1>>>(dc, win, peer, bytes, 1); // warm-up
      CUDA_OK(cudaDeviceSynchronize());
      double t0 = bench_now_s();
      put_burst<<<1, 1>>>(dc, win, peer, bytes, count);
      CUDA_OK(cudaDeviceSynchronize());
      gda = (double)bytes * count / (bench_now_s() - t0) / 1e9;
    }
    double ref = raw_bandwidth(&raw, bytes < 64 * MiB ? bytes : 64 * MiB, count);
    if (rank == 0)
      printf("{\"bench\":\"gda_put_bw\",\"provider\":\"%s\",\"bytes\":%zu,\"count\":%d,\"gda_GBps\":%.3f,"
             "\"raw_engine_GBps\":%.3f,\"ratio\":%.3f,\"goal_ratio_min\":0.9}\n",
             provider, bytes, count, gda, ref, gda / ref);
  }

  // Latency.
  const int pp = 1000;
  CCO_OK(ccoBarrierAll(comm));
  if (want("latency")) {
    ping_pong<<<1, 1>>>(dc, win, peer, 100, rank == 0, 0, dNs); // warm-up
    CUDA_OK(cudaDeviceSynchronize());
    CCO_OK(ccoBarrierAll(comm));
    ping_pong<<<1, 1>>>(dc, win, peer, pp, rank == 0, 100, dNs);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
    double gdaLat = ns / 1e3 / pp / 2;
    double rawLat = raw_latency(&raw, pp);
    if (rank == 0)
      printf("{\"bench\":\"gda_latency\",\"provider\":\"%s\",\"bytes\":8,\"iters\":%d,\"put_value_signal_half_rtt_us\":"
             "%.2f,\"raw_engine_write_half_rtt_us\":%.2f,\"ratio\":%.2f}\n",
             provider, pp, gdaLat, rawLat, gdaLat / rawLat);
  }

  // Barriers between the two hosts, against the raw engine's half round trip.
  if (want("barrier") && nNodes == 2) {
    int* dStatus = NULL;
    CUDA_OK(cudaMalloc(&dStatus, sizeof(int)));
    const int bIters = 2000;
    double us[2] = {0, 0};
    int bad = 0;
    for (int world = 0; world < 2; world++) {
      CCO_OK(ccoBarrierAll(comm));
      barrier_loop<<<1, 128>>>(dc, world, 100, dNs, dStatus); // warm-up
      CUDA_OK(cudaDeviceSynchronize());
      CCO_OK(ccoBarrierAll(comm));
      barrier_loop<<<1, 128>>>(dc, world, bIters, dNs, dStatus);
      CUDA_OK(cudaDeviceSynchronize());
      int st = 0;
      CUDA_OK(cudaMemcpy(&ns, dNs, sizeof(ns), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(&st, dStatus, sizeof(st), cudaMemcpyDeviceToHost));
      bad += st != 0;
      us[world] = ns / 1e3 / bIters;
    }
    double rawLat = raw_latency(&raw, 1000);
    if (rank == 0)
      printf("{\"bench\":\"gda_barrier\",\"provider\":\"%s\",\"hosts\":2,\"iters\":%d,\"gda_barrier_us\":%.2f,"
             "\"world_barrier_us\":%.2f,\"raw_engine_write_half_rtt_us\":%.2f,\"gda_ratio\":%.2f,"
             "\"world_ratio\":%.2f,\"bad_status\":%d}\n",
             provider, bIters, us[0], us[1], rawLat, us[0] / rawLat, us[1] / rawLat, bad);
    cudaFree(dStatus);
  } else if (want("barrier") && rank == 0) {
    fprintf(stderr, "cco-bench-gda: barrier figure not measured: one host (run it with ccorun --virtual-hosts 2)\n");
  }

  // Message rate (rank 0 sends), against 8-byte writes of the raw engine
  // from the host, as many in flight as it takes.
  const int perThread = 64, threads = 256, messages = perThread * threads;
  double rawRate = want("rate") ? raw_bandwidth(&raw, 8, messages) * 1e9 / 8 / 1e6 : 0;
  for (int mode = 0; want("rate") && mode < 2; mode++) {
    CCO_OK(ccoBarrierAll(comm));
    if (rank == 0) {
      put_values<<<1, threads>>>(dc, win, peer, 4, (ccoGdaDoorbellMode_t)mode, dPhases); // warm-up
      CUDA_OK(cudaDeviceSynchronize());
      double t0 = bench_now_s();
      put_values<<<1, threads>>>(dc, win, peer, perThread, (ccoGdaDoorbellMode_t)mode, dPhases);
      CUDA_OK(cudaDeviceSynchronize());
      double s = bench_now_s() - t0;
      unsigned long long phases[2] = {0, 0};
      CUDA_OK(cudaMemcpy(phases, dPhases, sizeof(phases), cudaMemcpyDeviceToHost));
      printf("{\"bench\":\"gda_put_value_rate\",\"provider\":\"%s\",\"doorbell\":\"%s\",\"threads\":%d,"
             "\"messages\":%d,\"Mmsg_per_s\":%.3f,\"raw_engine_8B_writes_Mmsg_per_s\":%.3f,\"ratio\":%.2f,"
             "\"posts_written_ms\":%.2f,\"flushed_ms\":%.2f}\n",
             provider, mode ? "Deferred" : "Immediate", threads, messages, messages / s / 1e6, rawRate,
             messages / s / 1e6 / rawRate, phases[0] / 1e6, phases[1] / 1e6);
    }
  }
  CCO_OK(ccoBarrierAll(comm));
  cco_net_mr_dereg(raw.net, raw.mr);
  cco_net_close(raw.net);
  free(raw.buf);
  ccoResult_t asyncErr = ccoSuccess;
  ccoCommGetAsyncError(comm, &asyncErr);
  if (asyncErr != ccoSuccess) fprintf(stderr, "rank %d: async error %s\n", rank, ccoGetErrorString(asyncErr));
  CCO_OK(ccoDevCommDestroy(comm, &dc));
  CCO_OK(ccoWindowDeregister(comm, win));
  CCO_OK(ccoCommDestroy(comm));
  cudaFree(dNs);
  cudaFree(dPhases);
  return asyncErr == ccoSuccess ? 0 : 1;
}
