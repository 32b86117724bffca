/*
 * cco-demo: the main job. Start it with `ccorun -n 4 --virtual-hosts 2 cco-demo`.
 * Every rank creates a communicator from the launcher's environment, takes
 * part in a barrier and an allgather, writes into its LSA peers' windows,
 * copies a block to them with SDMA and puts one to its peer on the other
 * (virtual) host with GDA; rank 0 prints the topology, the measured host
 * barrier latency and what each step moved, verified.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>
#include <stdint.h>

#include "cco/cco.h"
#include "cco/cco_device_all.h"
#include "demo_gpu.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    ccoResult_t r_ = (call);                                                          \
    if (r_ != ccoSuccess) {                                                           \
      fprintf(stderr, "cco-demo: %s failed: %s (%s)\n", #call, ccoGetErrorString(r_), \
              ccoGetLastError(comm));                                                 \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

typedef struct {
  int rank, lsaRank, node, pid;
  int gpu; /* CUDA device ordinal; -1 on the host platform */
  char host[64];
  double barrierUs;
  double windowGBps;
  uint64_t badWords;
  double sdmaGBps;
  int64_t sdmaBad; /* -1: SDMA off */
  double gdaGBps;
  int64_t gdaBad; /* -2: one host, not run */
  int gdaPeer;
} rank_report;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The value rank `writer` stores at word i of its block. */
static uint64_t pattern(int writer, size_t i) { return ((uint64_t)writer << 48) ^ (i * 0x9e3779b97f4a7c15ull); }

typedef struct {
  uint64_t* dst;
  size_t words;
  int writer;
  size_t first;
} fill_job;

static void* fill_thread(void* arg) {
  fill_job* j = arg;
  for (size_t i = 0; i < j->words; i++) j->dst[i] = pattern(j->writer, j->first + i);
  return NULL;
}

/* Host platform: CPU threads store straight into the peers' windows. */
static void fill_peers_host(void* const* dsts, int nPeers, size_t bytes, int writer) {
  enum { THREADS_PER_PEER = 2 };
  pthread_t th[64 * THREADS_PER_PEER];
  fill_job jobs[64 * THREADS_PER_PEER];
  size_t words = bytes / 8, per = words / THREADS_PER_PEER;
  int n = 0;
  for (int p = 0; p < nPeers && p < 64; p++)
    for (int t = 0; t < THREADS_PER_PEER; t++, n++) {
      size_t first = (size_t)t * per;
      jobs[n] = (fill_job){(uint64_t*)dsts[p] + first,
                           t == THREADS_PER_PEER - 1 ? words - first : per, writer, first};
      pthread_create(&th[n], NULL, fill_thread, &jobs[n]);
    }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static size_t verify_host(const uint64_t* block, size_t words, int writer) {
  size_t bad = 0;
  for (size_t i = 0; i < words; i++) bad += block[i] != pattern(writer, i);
  return bad;
}

/* Every rank writes a block into every LSA peer's window, then checks the
 * blocks it received. Returns the number of wrong words. */
static size_t window_step(ccoComm* comm, int rank, double* gbps, size_t* bytesMoved) {
  const size_t block = 16u << 20;
  int lsaRank, lsaSize;
  ccoPlatform_t platform;
  CHECK(ccoCommLsaRank(comm, &lsaRank));
  CHECK(ccoCommLsaSize(comm, &lsaSize));
  CHECK(ccoCommPlatform(comm, &platform));
  ccoWindow_t win;
  void* local;
  CHECK(ccoWindowRegisterAlloc(comm, block * (size_t)lsaSize, &win, &local));
  void* dsts[64];
  for (int p = 0; p < lsaSize && p < 64; p++) {
    int peer;
    CHECK(ccoTeamRankToWorld(comm, ccoTeamLsa, p, &peer));
    CHECK(ccoGetPeerPtr(comm, (char*)local + (size_t)lsaRank * block, peer, &dsts[p]));
  }
  CHECK(ccoBarrierAll(comm));
  double t0 = now_s();
  if (platform == ccoPlatformCuda) {
    if (cco_demo_gpu_fill(dsts, lsaSize, block, rank) != 0) {
      fprintf(stderr, "cco-demo: this build has no GPU kernels (built without nvcc)\n");
      exit(1);
    }
  } else {
    fill_peers_host(dsts, lsaSize, block, rank);
  }
  double secs = now_s() - t0;
  CHECK(ccoBarrierAll(comm));
  size_t bad = 0;
  for (int p = 0; p < lsaSize; p++) {
    int writer;
    CHECK(ccoTeamRankToWorld(comm, ccoTeamLsa, p, &writer));
    const char* mine = (const char*)local + (size_t)p * block;
    bad += platform == ccoPlatformCuda ? cco_demo_gpu_verify(mine, block, writer)
                                       : verify_host((const uint64_t*)mine, block / 8, writer);
  }
  CHECK(ccoBarrierAll(comm));
  CHECK(ccoWindowDeregister(comm, win));
  *bytesMoved = block * (size_t)lsaSize;
  *gbps = (double)*bytesMoved / secs / 1e9;
  return bad;
}

/* SDMA: every rank fills its block of a window, the copy engines (the
 * engine thread's memcpy on the host platform) copy it into every LSA
 * peer's window, each put signalling the peer, and every rank checks the
 * blocks that arrived. Returns wrong words; -1 if SDMA is off; -2 if not
 * run (see below). */
static long sdma_step(ccoComm* comm, double* gbps) {
  const size_t block = 16u << 20;
  int lsaRank, lsaSize, rank;
  ccoPlatform_t platform;
  CHECK(ccoCommRank(comm, &rank));
  CHECK(ccoCommLsaRank(comm, &lsaRank));
  CHECK(ccoCommLsaSize(comm, &lsaSize));
  CHECK(ccoCommPlatform(comm, &platform));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  CHECK(ccoDevCommCreate(comm, &reqs, &dc));
  if (!dc.sdma) {
    CHECK(ccoDevCommDestroy(comm, &dc));
    return -1;
  }
  ccoWindow_t win;
  void* local;
  CHECK(ccoWindowRegisterAlloc(comm, block * (size_t)lsaSize, &win, &local));
  char* mine = (char*)local + (size_t)lsaRank * block;
  if (platform == ccoPlatformCuda) {
    if (cco_demo_gpu_fill_local(mine, block, rank) != 0) exit(1);
  } else {
    void* dst[1] = {mine};
    fill_peers_host(dst, 1, block, rank);
  }
  CHECK(ccoBarrierAll(comm));
  double t0 = now_s();
  int failed;
  if (platform == ccoPlatformCuda) {
    failed = cco_demo_gpu_sdma(&dc, win, block, 1) != 0;
  } else {
    failed = 0;
    for (int p = 0; p < lsaSize; p++)
      if (p != lsaRank)
        failed |= ccoSdmaPut(&dc, p, win, (size_t)lsaRank * block, win, (size_t)lsaRank * block, block, 0,
                             ccoSdmaSignalRemote, ccoCoopThread) != ccoDevSuccess;
    for (int p = 0; p < lsaSize; p++)
      if (p != lsaRank)
        failed |= ccoSdmaWaitSignal(&dc, p, 0, 1, 30000000000ull, ccoCoopThread) != ccoDevSuccess;
  }
  double secs = now_s() - t0;
  long bad = failed ? 1 : 0;
  for (int p = 0; p < lsaSize; p++) {
    int writer;
    CHECK(ccoTeamRankToWorld(comm, ccoTeamLsa, p, &writer));
    const char* blk = (const char*)local + (size_t)p * block;
    bad += (long)(platform == ccoPlatformCuda ? cco_demo_gpu_verify(blk, block, writer)
                                              : verify_host((const uint64_t*)blk, block / 8, writer));
  }
  CHECK(ccoBarrierAll(comm));
  CHECK(ccoWindowDeregister(comm, win));
  CHECK(ccoDevCommDestroy(comm, &dc));
  *gbps = (double)block * (lsaSize - 1) / secs / 1e9;
  return bad;
}

/* GDA: each rank puts its block to its rail peer (the same LSA rank on the
 * next host) with a signal, through its proxy thread and the network
 * engine, waits for the block of the previous host's rank and checks it.
 * Returns wrong words; -2 on a single host (no GDA peers there). */
static long gda_step(ccoComm* comm, double* gbps, int* peerOut) {
  const size_t block = 16u << 20;
  int rank, nNodes;
  ccoPlatform_t platform;
  CHECK(ccoCommRank(comm, &rank));
  CHECK(ccoCommNodeCount(comm, &nNodes));
  CHECK(ccoCommPlatform(comm, &platform));
  if (nNodes < 2) return -2;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER; /* CROSSNODE */
  ccoDevComm dc;
  ccoWindow_t win;
  void* local;
  CHECK(ccoWindowRegisterAlloc(comm, 2 * block, &win, &local));
  CHECK(ccoDevCommCreate(comm, &reqs, &dc));
  ccoTeam rail;
  int peer, prev;
  CHECK(ccoCommTeam(comm, ccoTeamRail, &rail));
  CHECK(ccoTeamRankToWorld(comm, ccoTeamRail, (rail.rank + 1) % rail.nRanks, &peer));
  CHECK(ccoTeamRankToWorld(comm, ccoTeamRail, (rail.rank + rail.nRanks - 1) % rail.nRanks, &prev));
  if (platform == ccoPlatformCuda) {
    if (cco_demo_gpu_fill_local(local, block, rank) != 0) exit(1);
  } else {
    void* dst[1] = {local};
    fill_peers_host(dst, 1, block, rank);
  }
  CHECK(ccoBarrierAll(comm));
  double t0 = now_s();
  int failed;
  if (platform == ccoPlatformCuda) {
    failed = cco_demo_gpu_gda(&dc, win, block, peer) != 0;
  } else { /* this thread is the block */
    ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
    ccoDevStatus_t st = ccoGdaPut(&g, peer, win, block, win, 0, block, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER,
                                  ccoCoopBlock, ccoGdaThreadAggregate);
    if (st == ccoDevSuccess) st = ccoGdaWaitSignal(&g, 0, 1, 30000000000ull, ccoCoopBlock);
    if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopBlock);
    failed = st != ccoDevSuccess;
  }
  double secs = now_s() - t0;
  const char* got = (const char*)local + block;
  long bad = (failed ? 1 : 0) + (long)(platform == ccoPlatformCuda ? cco_demo_gpu_verify(got, block, prev)
                                                                   : verify_host((const uint64_t*)got, block / 8, prev));
  CHECK(ccoBarrierAll(comm));
  CHECK(ccoDevCommDestroy(comm, &dc));
  CHECK(ccoWindowDeregister(comm, win));
  *gbps = (double)block / secs / 1e9;
  *peerOut = peer;
  return bad;
}

int main(void) {
  ccoComm* comm = NULL;
  int exitCode = 0;
  /* On the GPU, ranks' kernels wait for each other's kernels. CUDA's lazy
   * module loading makes a first launch wait for kernels already running,
   * which under MPS includes the peers' waiting ones: load them all at
   * start. (No effect on the host platform.) */
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  double t0 = now_s();
  CHECK(ccoCommCreateFromEnv(0, &comm));
  double createMs = (now_s() - t0) * 1e3;
  int rank, size, nNodes;
  CHECK(ccoCommRank(comm, &rank));
  CHECK(ccoCommSize(comm, &size));
  CHECK(ccoCommNodeCount(comm, &nNodes));
  CHECK(ccoBarrierAll(comm));

  enum { warmup = 100, iters = 2000 };
  for (int i = 0; i < warmup; i++) CHECK(ccoBarrierAll(comm));
  double t1 = now_s();
  for (int i = 0; i < iters; i++) CHECK(ccoBarrierAll(comm));
  double barrierUs = (now_s() - t1) * 1e6 / iters;

  double gbps = 0;
  size_t moved = 0;
  size_t badWords = window_step(comm, rank, &gbps, &moved);
  double sdmaGbps = 0;
  long sdmaBad = sdma_step(comm, &sdmaGbps);
  double gdaGbps = 0;
  int gdaPeer = -1;
  long gdaBad = gda_step(comm, &gdaGbps, &gdaPeer);

  rank_report mine = {0};
  mine.rank = rank;
  mine.pid = (int)getpid();
  mine.barrierUs = barrierUs;
  mine.windowGBps = gbps;
  mine.badWords = badWords;
  mine.sdmaGBps = sdmaGbps;
  mine.sdmaBad = sdmaBad;
  mine.gdaGBps = gdaGbps;
  mine.gdaBad = gdaBad;
  mine.gdaPeer = gdaPeer;
  CHECK(ccoCommLsaRank(comm, &mine.lsaRank));
  CHECK(ccoCommCudaDevice(comm, &mine.gpu));
  CHECK(ccoCommNodeIndex(comm, &mine.node));
  gethostname(mine.host, sizeof(mine.host) - 1);
  rank_report* all = calloc((size_t)size, sizeof(*all));
  if (!all) return 1;
  CHECK(ccoBootstrapAllGather(comm, &mine, all, sizeof(mine)));

  if (rank == 0) {
    ccoTeam teams[ccoNumTeams];
    for (int k = 0; k < ccoNumTeams; k++) CHECK(ccoCommTeam(comm, (ccoTeamKind_t)k, &teams[k]));
    printf("cco-demo: %d ranks on %d host(s); communicator created in %.1f ms\n", size, nNodes,
           createMs);
    printf("  rank  node  lsa  gpu  pid      host              barrier us\n");
    for (int r = 0; r < size; r++) {
      char gpu[16] = "-";
      if (all[r].gpu >= 0) snprintf(gpu, sizeof(gpu), "%d", all[r].gpu);
      printf("  %4d  %4d  %3d  %3s  %-7d  %-16s  %6.1f\n", all[r].rank, all[r].node, all[r].lsaRank, gpu,
             all[r].pid, all[r].host, all[r].barrierUs);
    }
    const char* names[ccoNumTeams] = {"world", "lsa", "cross-node", "rail"};
    for (int k = 0; k < ccoNumTeams; k++)
      printf("  team %-10s {nRanks %d, rank %d, stride %d}\n", names[k], teams[k].nRanks,
             teams[k].rank, teams[k].stride);
    printf("cco-demo: host barrier latency %.1f us (mean of %d, rank 0)\n", barrierUs, iters);
    ccoPlatform_t platform;
    CHECK(ccoCommPlatform(comm, &platform));
    uint64_t bad = 0;
    double total = 0;
    for (int r = 0; r < size; r++) {
      bad += all[r].badWords;
      total += all[r].windowGBps;
    }
    printf("cco-demo: windows (%s platform): each rank wrote %.0f MiB into its LSA peers' windows "
           "(%s), %.1f GB/s per rank, %.1f GB/s in all; verified: %s\n",
           platform == ccoPlatformCuda ? "cuda" : "host", moved / 1048576.0,
           platform == ccoPlatformCuda ? "one kernel" : "CPU threads", total / size, total,
           bad ? "WRONG DATA" : "every byte");
    if (bad) exitCode = 1;
    int64_t sdmaBadAll = 0;
    double sdmaTotal = 0;
    for (int r = 0; r < size; r++) {
      sdmaBadAll += all[r].sdmaBad < 0 ? 0 : all[r].sdmaBad;
      sdmaTotal += all[r].sdmaGBps;
    }
    if (all[0].sdmaBad < 0)
      printf("cco-demo: SDMA is off (CCO_ENABLE_SDMA=0)\n");
    else
      printf("cco-demo: SDMA: each rank's 16 MiB block copied to every LSA peer by the %s, each put "
             "signalling its peer, %.1f GB/s per rank; verified: %s\n",
             platform == ccoPlatformCuda ? "copy engines" : "engine thread", sdmaTotal / size,
             sdmaBadAll ? "WRONG DATA" : "every byte");
    if (sdmaBadAll) exitCode = 1;
    if (all[0].gdaBad == -2) {
      printf("cco-demo: GDA: one host, no GDA peers (start with ccorun --virtual-hosts 2 to play two hosts)\n");
    } else {
      int64_t gdaBadAll = 0;
      double gdaTotal = 0;
      for (int r = 0; r < size; r++) {
        gdaBadAll += all[r].gdaBad;
        gdaTotal += all[r].gdaGBps;
      }
      printf("cco-demo: GDA between %d hosts: each rank put its 16 MiB block, with a signal, to its rail peer on "
             "the next host (rank 0 -> rank %d) from a %s through its proxy thread and the network engine, %.2f GB/s "
             "per rank; verified: %s\n",
             nNodes, all[0].gdaPeer, platform == ccoPlatformCuda ? "kernel" : "CPU thread", gdaTotal / size,
             gdaBadAll ? "WRONG DATA" : "every byte");
      if (gdaBadAll) exitCode = 1;
    }
  }
  CHECK(ccoBarrierAll(comm));
  free(all);
  CHECK(ccoCommDestroy(comm));
  return exitCode || badWords || sdmaBad > 0 || gdaBad > 0 ? 1 : 0;
}
