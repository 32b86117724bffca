// GDA device API on the GPU: kernels post puts, gets, put-values, signals and
// counters to ranks on another (virtual) host; the proxy moves them through
// the staged path (pinned bounce buffers, the target's proxy copies in).
//
//   ccorun -n N --virtual-hosts 2 gpu_gda
//   (several ranks on one GPU need MPS; tests/gpu/run_gpu_tests.sh does this)
//
// Each rank works with the next member of its rail team (the same LSA rank
// on the other host) and checks what the previous one sent:
//  (a) put + signal at thread, warp and block scope, aggregate and
//      independent, in the three doorbell modes (Deferred and CallerOrdered
//      published by the flush); every byte and the exact signal count;
//  (b) get of 8 MiB with a counter: the counter says the data is here;
//  (c) put-value from every thread (independent) then one standalone
//      signal: every value is there when the signal is;
//  (d) counters count 16 puts' local completion;
//  (e) flushAsync + wait, then the peer finds the data;
//  (f) the GDA barrier at block scope orders puts issued before it;
//  (g) ops to a same-host rank under CROSSNODE give ccoDevNoPeer, a bad
//      signal index ccoDevInvalid, at once;
//  (h) a 64 MiB put with signal (many chunks through the bounce buffers);
//  (i) the world barrier (LSA, rail GDA, LSA) orders LSA stores to this
//      host's ranks and put-values to the other host's ranks issued before
//      it, for every rank;
//  and the communicator's async error is still ccoSuccess at the end.
#define GPU_TEST_NAME "gpu_gda"
#include <string.h>

#include "cco/cco_gda.h"
#include "gpu_check.cuh"

#define MiB (1ull << 20)
#define SRC_OFF 0ull
#define DST_OFF (64ull * MiB)
#define WIN_BYTES (128ull * MiB)
#define WORLD_OFF (DST_OFF + 32ull * MiB) /* (i): one 8-byte slot per rank */
#define WAIT_NS (60ull * 1000000000ull)
#define THREADS 128

static int g_size, g_next, g_prev;
static cudaStream_t g_stream;
static ccoDevStatus_t* g_status; // device: worst status of a kernel
static uint64_t* g_host;        // host copy for checks

__host__ __device__ static uint64_t pattern(int writer, int tag, size_t i) {
  return ((uint64_t)(writer + 1) << 48) ^ ((uint64_t)tag << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

__global__ void fill(uint64_t* dst, size_t words, int writer, int tag) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = pattern(writer, tag, i);
}

__device__ static void report(ccoDevStatus_t* out, ccoDevStatus_t st) {
  if (st != ccoDevSuccess) atomicMax((unsigned int*)out, (unsigned int)st);
}

// (a) The scope (thread 0 / warp 0 / the block) puts `bytes` from SRC to the
// peer's DST at dstOff: one put (aggregate) or one piece per thread
// (independent), each with a signal increment on `slot`; then waits for the
// previous member's puts on its own slot and flushes.
__global__ void put_matrix(ccoDevComm dc, ccoWindow_t win, int peer, ccoCoop_t coop, ccoGdaThreadMode_t tm,
                           ccoGdaDoorbellMode_t mode, size_t bytes, uint64_t dstOff, uint32_t slot,
                           uint64_t expected, ccoDevStatus_t* out) {
  uint32_t n = coop == ccoCoopThread ? 1 : coop == ccoCoopWarp ? 32 : blockDim.x;
  if (threadIdx.x >= n) return;
  ccoGda g = ccoGdaHandle(&dc, 0, mode);
  ccoDevStatus_t st;
  if (tm == ccoGdaThreadAggregate) {
    st = ccoGdaPut(&g, peer, win, dstOff, win, SRC_OFF, bytes, ccoGdaSigInc(slot), CCO_GDA_NO_COUNTER, coop, tm);
  } else {
    size_t piece = bytes / n, off = threadIdx.x * piece;
    st = ccoGdaPut(&g, peer, win, dstOff + off, win, SRC_OFF + off, piece, ccoGdaSigInc(slot), CCO_GDA_NO_COUNTER,
                   coop, tm);
  }
  report(out, st);
  ccoCoopSync(coop);
  // Deferred and CallerOrdered posts wait for this flush to be published.
  ccoDevStatus_t f = ccoGdaFlush(&g, coop);
  ccoDevStatus_t w = ccoGdaWaitSignal(&g, slot, expected, WAIT_NS, coop);
  if (threadIdx.x == 0) report(out, f), report(out, w);
}

// (b) Get with a counter.
__global__ void get_kernel(ccoDevComm dc, ccoWindow_t win, int peer, size_t bytes, ccoDevStatus_t* out) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoGdaGet(&g, peer, win, DST_OFF, win, SRC_OFF, bytes, 0, ccoCoopBlock, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaWaitCounter(&g, 0, 1, WAIT_NS, ccoCoopBlock);
  if (threadIdx.x == 0) {
    report(out, st);
    ccoGdaResetCounter(&g, 0);
  }
}

// (c) Every thread puts one 8-byte value, then one standalone signal.
__global__ void put_values(ccoDevComm dc, ccoWindow_t win, int peer, int rank, uint32_t slot, ccoDevStatus_t* out) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  uint64_t v = ((uint64_t)rank << 32) | threadIdx.x;
  report(out, ccoGdaPutValue(&g, peer, win, DST_OFF + threadIdx.x * 8u, v, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER,
                             ccoCoopBlock, ccoGdaThreadIndependent));
  __syncthreads();
  ccoDevStatus_t st = ccoGdaSignal(&g, peer, ccoGdaSigInc(slot), ccoCoopBlock);
  if (st == ccoDevSuccess) st = ccoGdaWaitSignal(&g, slot, 1, WAIT_NS, ccoCoopBlock);
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopBlock);
  if (threadIdx.x == 0) report(out, st);
}

// (d) 16 puts counted on counter 1.
__global__ void counted_puts(ccoDevComm dc, ccoWindow_t win, int peer, ccoDevStatus_t* out) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoDevSuccess;
  for (int i = 0; i < 16 && st == ccoDevSuccess; i++)
    st = ccoGdaPut(&g, peer, win, DST_OFF + i * 65536ull, win, SRC_OFF + i * 65536ull, 65536, ccoGdaSigNone(), 1,
                   ccoCoopWarp, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaWaitCounter(&g, 1, 16, WAIT_NS, ccoCoopWarp);
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopWarp);
  if (threadIdx.x == 0) report(out, st);
}

// (e) flushAsync + wait.
__global__ void flush_async(ccoDevComm dc, ccoWindow_t win, int peer, size_t bytes, ccoDevStatus_t* out) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoGdaRequest req;
  ccoDevStatus_t st =
      ccoGdaPut(&g, peer, win, DST_OFF, win, SRC_OFF, bytes, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
                ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaFlushAsync(&g, peer, &req, ccoCoopThread);
  if (st == ccoDevSuccess) st = ccoGdaWait(&g, &req, ccoCoopThread);
  report(out, st);
}

// (f) Barrier rounds: put the round number, barrier, read the previous
// member's round number.
__global__ void barrier_rounds(ccoDevComm dc, ccoWindow_t win, int peer, int rounds, uint64_t* localDst,
                               ccoDevStatus_t* out) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoGdaBarrierSession b = ccoGdaBarrierSessionInit(&dc, &g, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  for (int r = 1; r <= rounds && st == ccoDevSuccess; r++) {
    st = ccoGdaPutValue(&g, peer, win, DST_OFF, (uint64_t)r, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopBlock,
                        ccoGdaThreadAggregate);
    if (st == ccoDevSuccess) st = ccoGdaBarrierSyncTimeout(&b, WAIT_NS);
    if (st == ccoDevSuccess && threadIdx.x == 0 && ccoSignalLoad(localDst) != (uint64_t)r) st = ccoDevInvalid;
    __syncthreads();
    // Nobody puts round r + 1 before everyone has read round r.
    if (st == ccoDevSuccess) st = ccoGdaBarrierSyncTimeout(&b, WAIT_NS);
  }
  if (threadIdx.x == 0) report(out, st);
}

// (i) World barrier rounds: store the round number into slot [rank] of
// every rank this one reaches (LSA peers by a store, the other host's ranks
// by a put-value), pass world barrier 0, find the round number in every
// slot written to this rank, and pass it again before the next round.
__global__ void world_rounds(ccoDevComm dc, ccoWindow_t win, int rounds, ccoDevStatus_t* out) {
  __shared__ int missing;
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  const volatile uint64_t* mine = (const volatile uint64_t*)ccoGetLocalPtr(win, WORLD_OFF);
  uint64_t slot = WORLD_OFF + 8ull * (uint64_t)dc.rank;
  ccoBarrierSession b = ccoBarrierSessionInit(&dc, &g, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  for (int r = 1; r <= rounds && st == ccoDevSuccess; r++) {
    for (int q = 0; q < dc.worldSize && st == ccoDevSuccess; q++) {
      int lsa = ccoDevTeamRankFromWorld(&dc, ccoTeamLsa, q);
      if (q == dc.rank) continue;
      if (lsa >= 0) {
        if (threadIdx.x == 0) *(volatile uint64_t*)ccoGetLsaPeerPtr(win, lsa, slot) = (uint64_t)r;
      } else if (ccoGdaHasPeer(&g, q)) {
        st = ccoGdaPutValue(&g, q, win, slot, (uint64_t)r, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopBlock,
                            ccoGdaThreadAggregate);
      }
    }
    if (st == ccoDevSuccess) st = ccoBarrierSyncTimeout(&b, WAIT_NS);
    if (threadIdx.x == 0) {
      missing = 0;
      for (int q = 0; q < dc.worldSize && st == ccoDevSuccess; q++)
        if (q != dc.rank && (ccoDevTeamRankFromWorld(&dc, ccoTeamLsa, q) >= 0 || ccoGdaHasPeer(&g, q)) &&
            mine[q] != (uint64_t)r)
          missing = 1;
    }
    __syncthreads();
    if (st == ccoDevSuccess && missing) st = ccoDevInvalid;
    // Nobody writes round r + 1 before everyone has read round r.
    if (st == ccoDevSuccess) st = ccoBarrierSyncTimeout(&b, WAIT_NS);
  }
  ccoBarrierSessionEnd(&b);
  if (threadIdx.x == 0) report(out, st);
}

// (g) Statuses given at once.
__global__ void bad_calls(ccoDevComm dc, ccoWindow_t win, int sameHostPeer, int peer, ccoDevStatus_t* results) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  results[0] = ccoGdaPut(&g, sameHostPeer, win, 0, win, 0, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
                         ccoGdaThreadAggregate);
  results[1] = ccoGdaPut(&g, dc.worldSize, win, 0, win, 0, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
                         ccoGdaThreadAggregate);
  results[2] = ccoGdaSignal(&g, peer, ccoGdaSigInc(dc.gdaSignalCount), ccoCoopThread);
  results[3] = ccoGdaPut(&g, peer, win, WIN_BYTES, win, 0, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread,
                         ccoGdaThreadAggregate);
}

// ---------------------------------------------------------------- helpers

static ccoDevStatus_t run(const char* what) {
  CUDA_OK(cudaGetLastError());
  wait_stream(g_stream, what, 120);
  ccoDevStatus_t st = ccoDevSuccess;
  CUDA_OK(cudaMemcpy(&st, g_status, sizeof(st), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemset(g_status, 0, sizeof(st)));
  return st;
}

static void fill_src(char* local, int tag, size_t bytes) {
  fill<<<128, 256, 0, g_stream>>>((uint64_t*)(local + SRC_OFF), bytes / 8, g_rank, tag);
  wait_stream(g_stream, "fill", 60);
}

// Words of DST (bytes) that are not pattern(writer, tag).
static size_t bad_words(const char* local, int writer, int tag, size_t bytes) {
  CUDA_OK(cudaMemcpy(g_host, local + DST_OFF, bytes, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < bytes / 8; i++) bad += g_host[i] != pattern(writer, tag, i);
  return bad;
}

int main(int argc, char** argv) {
  setenv("CCO_PLATFORM", "cuda", 1);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0); // see docs/sdma.md: kernels wait on other kernels' work
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0));
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "gpu_gda: create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  int nNodes = 0, lsaSize = 0;
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  ccoCommNodeCount(g_comm, &nNodes);
  ccoCommLsaSize(g_comm, &lsaSize);
  CHECK(nNodes == 2 && lsaSize * 2 == g_size, "%d ranks on %d hosts of %d (two virtual hosts expected: CCO_HOSTID)",
        g_size, nNodes, lsaSize);
  if (nNodes != 2) {
    ccoCommDestroy(g_comm);
    return finish() | 1;
  }
  CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&g_status, 8 * sizeof(ccoDevStatus_t)));
  CUDA_OK(cudaMemset(g_status, 0, 8 * sizeof(ccoDevStatus_t)));
  CUDA_OK(cudaMallocHost(&g_host, 64 * MiB));
  ccoTeam rail;
  OK(ccoCommTeam(g_comm, ccoTeamRail, &rail));
  OK(ccoTeamRankToWorld(g_comm, ccoTeamRail, 1 - rail.rank, &g_next)); // two hosts: the other member
  g_prev = g_next;

  ccoWindow_t win = NULL;
  char* local = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, WIN_BYTES, &win, (void**)&local));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaContextCount = 2;
  reqs.railGdaBarrierCount = 1;
  reqs.barrierCount = 1;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoResult_t r = ccoDevCommCreate(g_comm, &reqs, &dc);
  CHECK(r == ccoSuccess && dc.gda != 0, "ccoDevCommCreate with CROSSNODE GDA: %s (%s)", ccoGetErrorString(r),
        ccoGetLastError(g_comm));
  if (r != ccoSuccess || !dc.gda) {
    ccoCommDestroy(g_comm);
    return finish() | 1;
  }
  double t0 = now_s();

  // (a) the matrix; signal slot per case, so every count is exact.
  const ccoCoop_t coops[3] = {ccoCoopThread, ccoCoopWarp, ccoCoopBlock};
  const char* coopNames[3] = {"thread", "warp", "block"};
  const char* modeNames[3] = {"Immediate", "Deferred", "CallerOrdered"};
  uint32_t slot = 0;
  for (int c = 0; c < 3; c++)
    for (int tm = 0; tm < 2; tm++)
      for (int mode = 0; mode < 3; mode++, slot++) {
        if (tm == 1 && c == 0) continue; // a thread alone: independent is aggregate
        int tag = (int)slot + 1;
        size_t bytes = 256 * 1024;
        uint32_t n = coops[c] == ccoCoopThread ? 1 : coops[c] == ccoCoopWarp ? 32 : THREADS;
        fill_src(local, tag, bytes);
        OK(ccoBarrierAll(g_comm));
        put_matrix<<<1, THREADS, 0, g_stream>>>(dc, win, g_next, coops[c], (ccoGdaThreadMode_t)tm,
                                                (ccoGdaDoorbellMode_t)mode, bytes, DST_OFF, slot,
                                                tm ? n : 1, g_status);
        ccoDevStatus_t st = run("put matrix");
        size_t bad = bad_words(local, g_prev, tag, bytes);
        CHECK(st == ccoDevSuccess && bad == 0, "(a) put + signal, %s scope, %s, %s: %s, %zu bad words", coopNames[c],
              tm ? "independent" : "aggregate", modeNames[mode], ccoDevStatusName(st), bad);
        OK(ccoBarrierAll(g_comm));
      }

  // (b) get.
  fill_src(local, 100, 8 * MiB);
  OK(ccoBarrierAll(g_comm));
  get_kernel<<<1, THREADS, 0, g_stream>>>(dc, win, g_next, 8 * MiB, g_status);
  ccoDevStatus_t st = run("get");
  size_t bad = bad_words(local, g_next, 100, 8 * MiB);
  CHECK(st == ccoDevSuccess && bad == 0, "(b) 8 MiB get with a counter: %s, %zu bad words", ccoDevStatusName(st), bad);
  OK(ccoBarrierAll(g_comm));

  // (c) put-values then one signal.
  put_values<<<1, THREADS, 0, g_stream>>>(dc, win, g_next, g_rank, 40, g_status);
  st = run("put values");
  CUDA_OK(cudaMemcpy(g_host, local + DST_OFF, THREADS * 8, cudaMemcpyDeviceToHost));
  bad = 0;
  for (int t = 0; t < THREADS; t++) bad += g_host[t] != (((uint64_t)g_prev << 32) | (uint64_t)t);
  CHECK(st == ccoDevSuccess && bad == 0, "(c) %d independent 8-byte put-values then a standalone signal: %s, %zu bad",
        THREADS, ccoDevStatusName(st), bad);
  OK(ccoBarrierAll(g_comm));

  // (d) counted puts.
  fill_src(local, 101, MiB);
  OK(ccoBarrierAll(g_comm));
  counted_puts<<<1, 32, 0, g_stream>>>(dc, win, g_next, g_status);
  st = run("counted puts");
  OK(ccoBarrierAll(g_comm));
  bad = bad_words(local, g_prev, 101, MiB);
  CHECK(st == ccoDevSuccess && bad == 0, "(d) 16 puts counted to 16 (local completion): %s, %zu bad words",
        ccoDevStatusName(st), bad);
  OK(ccoBarrierAll(g_comm));

  // (e) flushAsync.
  fill_src(local, 102, 4 * MiB);
  OK(ccoBarrierAll(g_comm));
  flush_async<<<1, 1, 0, g_stream>>>(dc, win, g_next, 4 * MiB, g_status);
  st = run("flush async");
  OK(ccoBarrierAll(g_comm)); // every rank's flush returned: every put is at its peer
  bad = bad_words(local, g_prev, 102, 4 * MiB);
  CHECK(st == ccoDevSuccess && bad == 0, "(e) flushAsync + wait, then the peer reads the put: %s, %zu bad words",
        ccoDevStatusName(st), bad);
  OK(ccoBarrierAll(g_comm));

  // (f) barrier.
  barrier_rounds<<<1, THREADS, 0, g_stream>>>(dc, win, g_next, 20, (uint64_t*)(local + DST_OFF), g_status);
  st = run("barrier");
  CHECK(st == ccoDevSuccess, "(f) 20 rounds of put-value + GDA barrier (block scope), the value is there after "
        "the barrier: %s", ccoDevStatusName(st));
  OK(ccoBarrierAll(g_comm));

  // (i) world barrier.
  CUDA_OK(cudaMemset(local + WORLD_OFF, 0, 8 * (size_t)g_size));
  CUDA_OK(cudaDeviceSynchronize());
  OK(ccoBarrierAll(g_comm));
  world_rounds<<<1, THREADS, 0, g_stream>>>(dc, win, 20, g_status);
  st = run("world barrier");
  CHECK(st == ccoDevSuccess, "(i) 20 rounds of LSA stores and put-values to every rank + world barrier (block "
        "scope), every value there after it: %s", ccoDevStatusName(st));
  OK(ccoBarrierAll(g_comm));

  // (g) statuses.
  int sameHost = -1;
  OK(ccoTeamRankToWorld(g_comm, ccoTeamLsa, 0, &sameHost));
  ccoDevStatus_t* results = g_status + 4;
  bad_calls<<<1, 1, 0, g_stream>>>(dc, win, sameHost, g_next, results);
  wait_stream(g_stream, "bad calls", 30);
  ccoDevStatus_t got[4];
  CUDA_OK(cudaMemcpy(got, results, sizeof(got), cudaMemcpyDeviceToHost));
  CHECK(got[0] == ccoDevNoPeer && got[1] == ccoDevInvalid && got[2] == ccoDevInvalid && got[3] == ccoDevInvalid,
        "(g) same-host peer under CROSSNODE: %s; rank out of range: %s; bad signal: %s; range past the window: %s",
        ccoDevStatusName(got[0]), ccoDevStatusName(got[1]), ccoDevStatusName(got[2]), ccoDevStatusName(got[3]));
  CUDA_OK(cudaMemset(g_status, 0, 8 * sizeof(ccoDevStatus_t)));
  OK(ccoBarrierAll(g_comm));

  // (h) 64 MiB.
  fill_src(local, 103, 64 * MiB);
  OK(ccoBarrierAll(g_comm));
  double t1 = now_s();
  put_matrix<<<1, THREADS, 0, g_stream>>>(dc, win, g_next, ccoCoopBlock, ccoGdaThreadAggregate,
                                          ccoGdaDoorbellImmediate, 64 * MiB, DST_OFF, 41, 1, g_status);
  st = run("64 MiB put");
  double took = now_s() - t1;
  bad = bad_words(local, g_prev, 103, 64 * MiB);
  CHECK(st == ccoDevSuccess && bad == 0, "(h) 64 MiB put + signal: %s, %zu bad words, %.1f ms (%.2f GB/s)",
        ccoDevStatusName(st), bad, took * 1e3, 64.0 * MiB / took / 1e9);
  OK(ccoBarrierAll(g_comm));

  ccoResult_t asyncErr = ccoInternalError;
  OK(ccoCommGetAsyncError(g_comm, &asyncErr));
  CHECK(asyncErr == ccoSuccess, "async error at the end: %s", ccoGetErrorString(asyncErr));
  printf("gpu_gda rank %d: (a)-(i) took %.1f s\n", g_rank, now_s() - t0);
  OK(ccoDevCommDestroy(g_comm, &dc));
  OK(ccoWindowDeregister(g_comm, win));
  OK(ccoCommDestroy(g_comm));
  cudaFreeHost(g_host);
  cudaFree(g_status);
  return finish();
}
