// A rank dies while the others wait for it in LSA barriers without a
// timeout: the liveness monitor of each survivor (src/boot/liveness.c) must
// release the kernels (ccoDevAborted) within 1 s of the death, and the
// communicator must report the dead rank (ccoRemoteError, and the detail).
// With --collective the survivors wait inside an all-reduce instead
// (ccoAllReduce on a stream, one-shot, which the victim never joins, after
// one that every rank made): the stream must drain within the same bound,
// the communicator report the dead rank, and the next call fail, not hang.
//
// The last rank is the victim: it joins, passes the host barrier, waits
// kVictimDelayS and kills itself (SIGKILL: no goodbye, no abort message).
// It runs under a launcher of its own, so its death does not stop the
// survivors' launcher (tests/gpu/run_gpu_tests.sh):
//   ccorun -n 1 --nranks N --rank-offset N-1 --id-file F gpu_liveness [--collective] &
//   ccorun -n N-1 --nranks N --id-file F gpu_liveness [--collective]
#define GPU_TEST_NAME "gpu_liveness"
#include <signal.h>
#include <string.h>

#include "cco/cco_device.h"
#include "gpu_check.cuh"

static const double kVictimDelayS = 0.5;
static const double kBoundS = 1.0;  // the issue's bound, death to release

// Block 0: thread 0 alone in barrier 0 (thread scope); block 1: the whole
// block in barrier 1 (block scope). Nobody ever completes them: the victim
// never arrives.
__global__ void wait_forever(ccoDevComm dc, unsigned int* counts) {
  uint32_t b = blockIdx.x;
  if (b == 0 && threadIdx.x != 0) return;
  ccoCoop_t coop = b == 0 ? ccoCoopThread : ccoCoopBlock;
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, b, coop);
  ccoLsaBarrierArrive(&s);
  ccoDevStatus_t st = ccoLsaBarrierWait(&s);
  ccoLsaBarrierSessionEnd(&s);
  atomicAdd(&counts[b * 3 + (uint32_t)st], 1u);
}

int main(int argc, char** argv) {
  const bool collective = argc > 1 && strcmp(argv[1], "--collective") == 0;
  setenv("CCO_PLATFORM", "cuda", 1);
  if (collective) setenv("CCO_ALGO", "allreduce=oneshot", 1); /* a barrier the victim never reaches */
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0));
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "gpu_liveness: create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  int nRanks = 0;
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &nRanks);
  const int victim = nRanks - 1;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  ccoResult_t r = ccoDevCommCreate(g_comm, &reqs, &dc);
  CHECK(r == ccoSuccess, "ccoDevCommCreate: %s (%s)", ccoGetErrorString(r), ccoGetLastError(g_comm));
  if (r != ccoSuccess) return finish() | 1;
  cudaStream_t stream;
  unsigned int* dCounts = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&dCounts, 6 * sizeof(unsigned int)));
  CUDA_OK(cudaMemset(dCounts, 0, 6 * sizeof(unsigned int)));
  // The collective mode's buffers, and one all-reduce on every rank: the first call sets the
  // collectives up, collectively, so the one the victim misses is a device wait, not a host one.
  const size_t count = 64 << 10;  // 256 KiB of floats
  ccoWindow_t win = NULL;
  float* buf = NULL;
  if (collective) {
    OK(ccoWindowRegisterAlloc(g_comm, 2 * count * sizeof(float), &win, (void**)&buf));
    CUDA_OK(cudaMemset(buf, 0, 2 * count * sizeof(float)));
    r = ccoAllReduce(g_comm, buf, buf + count, count, ccoFloat32, ccoSum, stream);
    CHECK(r == ccoSuccess, "the all-reduce every rank makes: %s (%s)", ccoGetErrorString(r), ccoGetLastError(g_comm));
    CUDA_OK(cudaStreamSynchronize(stream));
  }
  CUDA_OK(cudaDeviceSynchronize());
  OK(ccoBarrierAll(g_comm));
  double t0 = now_s();
  if (g_rank == victim) {
    printf("gpu_liveness rank %d: the victim dies in %.1f s\n", g_rank, kVictimDelayS);
    fflush(stdout);
    usleep((useconds_t)(kVictimDelayS * 1e6));
    raise(SIGKILL);
  }
  const int threads = 128;
  if (collective) {
    r = ccoAllReduce(g_comm, buf, buf + count, count, ccoFloat32, ccoSum, stream);
    CHECK(r == ccoSuccess, "the all-reduce the victim misses is enqueued: %s (%s)", ccoGetErrorString(r),
          ccoGetLastError(g_comm));
  } else {
    wait_forever<<<2, threads, 0, stream>>>(dc, dCounts);
  }
  CUDA_OK(cudaGetLastError());
  // cudaStreamSynchronize would hang on a kernel that never returns.
  while (cudaStreamQuery(stream) == cudaErrorNotReady && now_s() - t0 < kVictimDelayS + 10.0) usleep(100);
  double released = now_s() - t0 - kVictimDelayS;
  int done = cudaStreamQuery(stream) != cudaErrorNotReady;
  CHECK(done && released < kBoundS,
        "kernel waiting without a timeout released %.3f s after rank %d died (bound %.1f s)%s", released,
        victim, kBoundS, done ? "" : " - STILL WAITING");
  if (!done) {
    ccoCommAbort(g_comm);  // so the kernel returns and the process can exit
    cudaDeviceSynchronize();
    return finish() | 1;
  }
  unsigned int counts[6];
  CUDA_OK(cudaMemcpy(counts, dCounts, sizeof(counts), cudaMemcpyDeviceToHost));
  if (!collective)
    CHECK(counts[0 * 3 + ccoDevAborted] == 1 && counts[1 * 3 + ccoDevAborted] == (unsigned)threads,
          "every waiting thread got ccoDevAborted: thread scope %u of 1, block scope %u of %d (success %u)",
          counts[0 * 3 + ccoDevAborted], counts[1 * 3 + ccoDevAborted], threads, counts[1 * 3 + ccoDevSuccess]);
  ccoResult_t asyncErr = ccoSuccess;
  OK(ccoCommGetAsyncError(g_comm, &asyncErr));
  char dead[32];
  snprintf(dead, sizeof(dead), "rank %d", victim);
  const char* detail = ccoGetLastError(g_comm);
  CHECK(asyncErr == ccoRemoteError && strstr(detail, dead) != NULL,
        "async error %s, detail '%s' names %s", ccoGetErrorString(asyncErr), detail, dead);
  if (collective) {
    r = ccoAllReduce(g_comm, buf, buf + count, count, ccoFloat32, ccoSum, stream);
    CHECK(r != ccoSuccess, "the next all-reduce fails at once (%s: %s)", ccoGetErrorString(r), ccoGetLastError(g_comm));
    CUDA_OK(cudaStreamSynchronize(stream));
  }
  printf("{\"bench\":\"liveness_release\",\"ranks\":%d,\"platform\":\"cuda\",\"wait\":\"%s\","
         "\"death_to_release_s\":%.3f}\n", nRanks, collective ? "allreduce" : "lsa_barrier", released);
  OK(ccoDevCommDestroy(g_comm, &dc));
  OK(ccoCommDestroy(g_comm));
  cudaFree(dCounts);
  cudaStreamDestroy(stream);
  return finish();
}
