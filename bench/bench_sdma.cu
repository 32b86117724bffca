// SDMA benchmarks, two ranks on one GPU under MPS:
//
//   ccorun -n 2 cco-bench-sdma [-b 1K] [-e 1G] [-f 4] [-n N] [-w N] [put] [latency] [issue] [overlap]
//
// 1. put (op sdma_put): rank 0's kernel posts N puts of S bytes to rank 1 on
//    one queue and waits for them (ccoSdmaQuietQueue), next to
//    cudaMemcpyAsync of the same N x S into the same peer window from the
//    host, same run, and to the same N copies in one cudaMemcpyBatchAsync
//    (the engine's call). N = 8 (burst "8"), and N = a stream deep enough to move
//    512 MiB (at most 256, the ring depth; burst "deep"): the first shows the
//    fixed cost, the second the rate. Medians of -n trials (5) after -w (0).
// 2. latency (op sdma_latency): ping-pong of 1 KiB signalled puts between
//    the two ranks' kernels, -n round trips (2000); half a round trip is one
//    put until its signal is seen. Next to the naive floor measured in the
//    same run: a kernel writes a request to host-mapped memory, a host
//    thread sees it, calls cudaMemcpyAsync (1 KiB) and cuStreamWriteValue32
//    of a flag, the kernel sees the flag.
// 3. issue (op sdma_issue_interval): one thread posts -n (4096) 1 KiB puts
//    on one queue without signals and then waits for them; time per put.
//    Next to the host's own issue rate of the same copies on one stream, the
//    floor of any engine the host drives: cudaMemcpyAsync one at a time, and
//    cudaMemcpyBatchAsync 16 at a time (about one engine pass), and 16 at a
//    time over 4 streams (the copy engine's pace when one queue is the
//    limit). Then op sdma_post: 240 puts, fewer than the ring's 256 slots,
//    so that no post waits for credits: the kernel's own cost of a post.
// 4. overlap (op sdma_overlap): a compute-bound kernel (FMA chains, one
//    block per SM) alone, then while SDMA moves 1 GiB into the peer's
//    window, then while an SM copy kernel (the LSA path) moves the same
//    1 GiB; medians of -n trials (5).
// One JSON line per measurement (bench_json.h).
#include <cuda.h>  // types of the driver call below; the program does not link libcuda
#include <pthread.h>

#include "bench_common.cuh"
#include "cco/cco_sdma.h"

static ccoComm* comm;
// The scope a post's fence has in this run (ccoSdmaDev.postFenceGpu, read
// back from the device), a field of every line.
static const char* g_postFence = "unknown";
static const char* const kOps[] = {"put", "latency", "issue", "overlap", NULL};
static const size_t kOverlapBytes = 1u << 30;

// cuStreamWriteValue32 through the runtime, so that the program starts on a
// machine without libcuda.so.1 and can say that there is no driver.
typedef CUresult (*write_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static write_value32_fn g_writeValue32;

__global__ void put_burst(ccoDevComm dc, ccoWindow_t win, int peer, size_t bytes, int count, size_t dstOff,
                          int* status) {
  int bad = 0;
  for (int i = 0; i < count; i++)
    bad |= ccoSdmaPut(&dc, peer, win, dstOff, win, 0, bytes, 0, ccoSdmaSignalNone, ccoCoopThread) != ccoDevSuccess;
  bad |= ccoSdmaQuietQueue(&dc, peer, 0, ccoCoopThread) != ccoDevSuccess;
  *status = bad;
}

__global__ void ping_pong(ccoDevComm dc, ccoWindow_t win, int peer, int first, int iters, uint64_t base,
                          int* status) {
  int bad = 0;
  for (int i = 1; i <= iters && !bad; i++) {
    if (first) bad |= ccoSdmaPut(&dc, peer, win, 4096, win, 0, 1024, 1, ccoSdmaSignalRemote, ccoCoopThread);
    bad |= ccoSdmaWaitSignal(&dc, peer, 1, base + (uint64_t)i, 10000000000ull, ccoCoopThread);
    if (!first) bad |= ccoSdmaPut(&dc, peer, win, 4096, win, 0, 1024, 1, ccoSdmaSignalRemote, ccoCoopThread);
  }
  *status = bad;
}

// times[0..2]: the kernel's start, the end of its posts, the end of its quiet
// (%globaltimer): whether the posts or the engine behind them set the pace.
__global__ void issue_stream(ccoDevComm dc, ccoWindow_t win, int peer, int count, size_t dstOff, int* status,
                             unsigned long long* times) {
  int bad = 0;
  times[0] = cco_impl_clock_ns();
  for (int i = 0; i < count; i++)
    bad |= ccoSdmaPut(&dc, peer, win, dstOff + (size_t)(i % 64) * 1024, win, 0, 1024, 0, ccoSdmaSignalNone,
                      ccoCoopThread) != ccoDevSuccess;
  times[1] = cco_impl_clock_ns();
  bad |= ccoSdmaQuietQueue(&dc, peer, 0, ccoCoopThread) != ccoDevSuccess;
  times[2] = cco_impl_clock_ns();
  *status = bad;
}

// FMA chains with no memory traffic: the SMs' work the copies should not slow.
__global__ void compute_kernel(float* out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-3f;
  for (int i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    d = fmaf(d, c, b);
    b = fmaf(b, a, -d) * 1e-6f + 1.0001f;
  }
  if (a + d == 12345.f) out[0] = b;
}

__global__ void sm_copy_kernel(uint4* dst, const uint4* src, size_t n) { bench_copy_u4(dst, src, n); }

// Naive floor: the kernel asks the host (request word in host-mapped
// memory), the host copies and writes a flag on a stream, the kernel waits.
__global__ void naive_kernel(volatile uint32_t* request, volatile uint32_t* flag, int iters) {
  for (int i = 1; i <= iters; i++) {
    *request = (uint32_t)i;
    __threadfence_system();
    while (*flag < (uint32_t)i) {
    }
  }
}

typedef struct {
  volatile uint32_t* request;
  CUdeviceptr flag;
  void* dst;
  const void* src;
  int iters;
  cudaStream_t stream;
} naive_ctx;

static void* naive_host(void* arg) {
  naive_ctx* c = (naive_ctx*)arg;
  for (int i = 1; i <= c->iters; i++) {
    while (*c->request < (uint32_t)i) {
    }
    cudaMemcpyAsync(c->dst, c->src, 1024, cudaMemcpyDeviceToDevice, c->stream);
    g_writeValue32((CUstream)c->stream, c->flag, (cuuint32_t)i, CU_STREAM_WRITE_VALUE_DEFAULT);
  }
  return NULL;
}

static double naive_floor_us(void* dst, const void* src, int iters) {
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CUDA_OK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", (void**)&g_writeValue32, 12000, cudaEnableDefault,
                                           &found));
  if (found != cudaDriverEntryPointSuccess || !g_writeValue32) {
    fprintf(stderr, "cco-bench-sdma: the driver has no cuStreamWriteValue32\n");
    exit(1);
  }
  uint32_t* req = NULL;
  uint32_t* flag = NULL;
  CUDA_OK(cudaHostAlloc(&req, 64, cudaHostAllocMapped));
  CUDA_OK(cudaMalloc(&flag, 64));
  CUDA_OK(cudaMemset(flag, 0, 64));
  *req = 0;
  uint32_t* reqDev = NULL;
  CUDA_OK(cudaHostGetDevicePointer(&reqDev, req, 0));
  cudaStream_t kernelStream, copyStream;
  CUDA_OK(cudaStreamCreateWithFlags(&kernelStream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking));
  naive_ctx c = {req, (CUdeviceptr)flag, dst, src, iters, copyStream};
  pthread_t th;
  double t0 = bench_now_s();
  naive_kernel<<<1, 1, 0, kernelStream>>>(reqDev, flag, iters);
  pthread_create(&th, NULL, naive_host, &c);
  CUDA_OK(cudaStreamSynchronize(kernelStream));
  double us = (bench_now_s() - t0) * 1e6 / iters;
  pthread_join(th, NULL);
  cudaStreamDestroy(kernelStream);
  cudaStreamDestroy(copyStream);
  cudaFree(flag);
  cudaFreeHost(req);
  return us;
}

static void bench_put(const bench_sweep* sw, int trials, int warmup, int size, ccoDevComm dc, ccoWindow_t win,
                      void* local, void* peerDst, size_t dstOff, int* status, cudaStream_t st) {
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  double* sdma = (double*)calloc((size_t)trials, sizeof(double));
  double* ref = (double*)calloc((size_t)trials, sizeof(double));
  double* refBatch = (double*)calloc((size_t)trials, sizeof(double));
  // The engine's own call, from the host: the whole burst in one
  // cudaMemcpyBatchAsync (at most 256 copies, the ring's depth).
  void* dsts[256];
  const void* srcs[256];
  size_t sizes[256];
  cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attrIdx = 0;
  for (unsigned long long bytes = sw->min; bytes; bytes = bench_sweep_next(sw, bytes)) {
    size_t deep = (512u << 20) / bytes;
    int counts[2] = {8, (int)(deep < 8 ? 8 : deep > 256 ? 256 : deep)};
    for (int c = 0; c < 2; c++) {
      const int count = counts[c];
      if (c == 1 && count == counts[0]) break;
      for (int t = -warmup; t < trials; t++) {
        int host = 1;
        CUDA_OK(cudaEventRecord(e0, st));
        put_burst<<<1, 1, 0, st>>>(dc, win, 1, bytes, count, dstOff, status);
        CUDA_OK(cudaEventRecord(e1, st));
        CUDA_OK(cudaEventSynchronize(e1));
        CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
        if (t >= 0) sdma[t] = host ? 1e30 : bench_elapsed_ms(e0, e1);
        CUDA_OK(cudaEventRecord(e0, st));
        for (int i = 0; i < count; i++)
          CUDA_OK(cudaMemcpyAsync(peerDst, local, bytes, cudaMemcpyDeviceToDevice, st));
        CUDA_OK(cudaEventRecord(e1, st));
        CUDA_OK(cudaEventSynchronize(e1));
        if (t >= 0) ref[t] = bench_elapsed_ms(e0, e1);
        for (int i = 0; i < count; i++) {
          dsts[i] = peerDst;
          srcs[i] = local;
          sizes[i] = bytes;
        }
        CUDA_OK(cudaEventRecord(e0, st));
        CUDA_OK(cudaMemcpyBatchAsync(dsts, srcs, sizes, (size_t)count, &attr, &attrIdx, 1, st));
        CUDA_OK(cudaEventRecord(e1, st));
        CUDA_OK(cudaEventSynchronize(e1));
        if (t >= 0) refBatch[t] = bench_elapsed_ms(e0, e1);
      }
      double sMs = bench_median(sdma, trials), rMs = bench_median(ref, trials);
      double bMs = bench_median(refBatch, trials);
      bench_line l;
      bench_line_start(&l, "sdma", "sdma_put", (long long)bytes, size, trials);
      bench_line_str(&l, "burst", c == 0 ? "8" : "deep");
      bench_line_int(&l, "puts_in_flight", count);
      bench_line_str(&l, "post_fence", g_postFence);
      bench_line_emit(&l, "GBps", (double)bytes * count / (sMs * 1e-3) / 1e9, NULL);
      bench_line_emit(&l, "GBps", (double)bytes * count / (rMs * 1e-3) / 1e9, "cudaMemcpyAsync");
      bench_line_emit(&l, "GBps", (double)bytes * count / (bMs * 1e-3) / 1e9, "cudaMemcpyBatchAsync");
    }
  }
  free(sdma);
  free(ref);
  free(refBatch);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// Host-issued copies of `bytes` into peerDst + (i % 64) * bytes, as the
// issue kernel's puts, `batch` per call (1: cudaMemcpyAsync), the calls
// spread round-robin over `nSide` side streams (0: all on st) and joined
// back into st; the stream's time per copy (the host issues slower than
// the copies run, unless the copy engine is the limit).
static double host_issue_us(int count, int batch, int nSide, cudaStream_t* side, size_t bytes, void* peerDst,
                            const void* local, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, cudaEvent_t* joins) {
  enum { kMaxBatch = 64 };
  void* dsts[kMaxBatch];
  const void* srcs[kMaxBatch];
  size_t sizes[kMaxBatch];
  cudaMemcpyAttributes attr;
  memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attrIdx = 0;
  CUDA_OK(cudaEventRecord(e0, st));
  for (int k = 0; k < nSide; k++) CUDA_OK(cudaStreamWaitEvent(side[k], e0, 0));
  for (int i = 0, call = 0; i < count; i += batch, call++) {
    int n = count - i < batch ? count - i : batch;
    cudaStream_t on = nSide ? side[call % nSide] : st;
    if (batch == 1) {
      CUDA_OK(cudaMemcpyAsync((char*)peerDst + (size_t)(i % 64) * bytes, local, bytes, cudaMemcpyDeviceToDevice, on));
      continue;
    }
    for (int j = 0; j < n; j++) {
      dsts[j] = (char*)peerDst + (size_t)((i + j) % 64) * bytes;
      srcs[j] = local;
      sizes[j] = bytes;
    }
    CUDA_OK(cudaMemcpyBatchAsync(dsts, srcs, sizes, (size_t)n, &attr, &attrIdx, 1, on));
  }
  for (int k = 0; k < nSide; k++) {
    CUDA_OK(cudaEventRecord(joins[k], side[k]));
    CUDA_OK(cudaStreamWaitEvent(st, joins[k], 0));
  }
  CUDA_OK(cudaEventRecord(e1, st));
  CUDA_OK(cudaEventSynchronize(e1));
  return bench_elapsed_ms(e0, e1) * 1e3 / count;
}

// Medians over `trials` runs of issue_stream with `count` puts: the
// interval per put (events), the kernel's posts per put and its wait after
// the last post (its own clock); bad set when a status was not success.
typedef struct {
  double intervalUs, postUs, drainUs;
  int bad;
} issue_run;

static issue_run run_issue(int count, int trials, ccoDevComm dc, ccoWindow_t win, size_t dstOff, int* status,
                           cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, unsigned long long* times) {
  double ms[8], postUs[8], drainUs[8];
  issue_run r = {0, 0, 0, 0};
  if (trials > 8) trials = 8;
  for (int t = 0; t < trials; t++) {
    int host = 0;
    CUDA_OK(cudaEventRecord(e0, st));
    issue_stream<<<1, 1, 0, st>>>(dc, win, 1, count, dstOff, status, times);
    CUDA_OK(cudaEventRecord(e1, st));
    CUDA_OK(cudaEventSynchronize(e1));
    CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
    unsigned long long tk[3];
    CUDA_OK(cudaMemcpy(tk, times, sizeof(tk), cudaMemcpyDeviceToHost));
    r.bad |= host;
    ms[t] = bench_elapsed_ms(e0, e1);
    postUs[t] = (double)(tk[1] - tk[0]) * 1e-3 / count;
    drainUs[t] = (double)(tk[2] - tk[1]) * 1e-3;
  }
  r.intervalUs = bench_median(ms, trials) * 1e3 / count;
  r.postUs = bench_median(postUs, trials);
  r.drainUs = bench_median(drainUs, trials);
  return r;
}

static void bench_issue(int count, int size, ccoDevComm dc, ccoWindow_t win, void* local, void* peerDst,
                        size_t dstOff, int* status, cudaStream_t st) {
  const int trials = 5;
  unsigned long long* times;
  CUDA_OK(cudaMalloc(&times, 3 * sizeof(unsigned long long)));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  issue_run r = run_issue(count, trials, dc, win, dstOff, status, st, e0, e1, times);
  bench_line l;
  bench_line_start(&l, "sdma", "sdma_issue_interval", 1024, size, count);
  bench_line_int(&l, "trials", trials);
  bench_line_int(&l, "bad_status", r.bad);
  // The kernel's own clock: its posts per put, and the wait after the last
  // post for the operations still queued behind the engine. Past the ring's
  // depth the posts wait for credits, so they run at the engine's pace.
  bench_line_num(&l, "post_us_per_put", r.postUs);
  bench_line_num(&l, "quiet_after_posts_us", r.drainUs);
  bench_line_str(&l, "post_fence", g_postFence);
  bench_line_emit(&l, "us", r.intervalUs, NULL);
  // The kernel's own cost of a post: fewer puts than the ring holds, so no
  // post waits for credits (op sdma_post, the posts per put).
  const int within = CCO_SDMA_DEPTH - 16;
  issue_run w = run_issue(within, trials, dc, win, dstOff, status, st, e0, e1, times);
  bench_line_start(&l, "sdma", "sdma_post", 1024, size, within);
  bench_line_int(&l, "trials", trials);
  bench_line_int(&l, "bad_status", w.bad);
  bench_line_num(&l, "quiet_after_posts_us", w.drainUs);
  bench_line_num(&l, "interval_us", w.intervalUs);
  bench_line_str(&l, "post_fence", g_postFence);
  bench_line_emit(&l, "us", w.postUs, NULL);
  // The copy engine's own pace: the same batches spread over 4 streams.
  enum { kSide = 4 };
  cudaStream_t side[kSide];
  cudaEvent_t joins[kSide];
  for (int k = 0; k < kSide; k++) {
    CUDA_OK(cudaStreamCreateWithFlags(&side[k], cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&joins[k], cudaEventDisableTiming));
  }
  const int batches[3] = {1, 16, 16}, sides[3] = {0, 0, kSide};
  const char* refs[3] = {"host_cudaMemcpyAsync", "host_cudaMemcpyBatchAsync_16",
                         "host_cudaMemcpyBatchAsync_16_4streams"};
  for (int b = 0; b < 3; b++) {
    double us[trials];
    for (int t = 0; t < trials; t++)
      us[t] = host_issue_us(count, batches[b], sides[b], side, 1024, peerDst, local, st, e0, e1, joins);
    bench_line_start(&l, "sdma", "sdma_issue_interval", 1024, size, count);
    bench_line_int(&l, "trials", trials);
    bench_line_emit(&l, "us", bench_median(us, trials), refs[b]);
  }
  for (int k = 0; k < kSide; k++) {
    cudaStreamDestroy(side[k]);
    cudaEventDestroy(joins[k]);
  }
  cudaFree(times);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

static void bench_overlap(int trials, int size, ccoDevComm dc, ccoWindow_t win, void* local, void* peerDst,
                          size_t dstOff, int* status, cudaStream_t st) {
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* sink;
  CUDA_OK(cudaMalloc(&sink, 64));
  cudaStream_t side;
  CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t c0, c1;
  CUDA_OK(cudaEventCreate(&c0));
  CUDA_OK(cudaEventCreate(&c1));
  const int iters = 400000;
  double* t[3];
  for (int mode = 0; mode < 3; mode++) t[mode] = (double*)calloc((size_t)trials, sizeof(double));
  int bad = 0;
  for (int trial = 0; trial < trials; trial++)
    for (int mode = 0; mode < 3; mode++) {
      CUDA_OK(cudaEventRecord(c0, st));
      compute_kernel<<<sms, 256, 0, st>>>(sink, iters);
      CUDA_OK(cudaEventRecord(c1, st));
      if (mode == 1) put_burst<<<1, 1, 0, side>>>(dc, win, 1, kOverlapBytes / 64, 64, dstOff, status);
      if (mode == 2)
        sm_copy_kernel<<<sms, 1024, 0, side>>>((uint4*)peerDst, (const uint4*)local, kOverlapBytes / sizeof(uint4));
      CUDA_OK(cudaEventSynchronize(c1));
      CUDA_OK(cudaStreamSynchronize(side));
      if (mode == 1) {
        int host = 0;
        CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
        bad |= host;
      }
      t[mode][trial] = bench_elapsed_ms(c0, c1);
    }
  // The compute kernel's time: alone, beside SDMA (cco's figure), beside an SM copy.
  static const char* const refs[3] = {"compute_alone", NULL, "sm_copy"};
  for (int mode = 0; mode < 3; mode++) {
    bench_line l;
    bench_line_start(&l, "sdma", "sdma_overlap", (long long)kOverlapBytes, size, trials);
    bench_line_int(&l, "compute_iters", iters);
    if (mode == 1) bench_line_int(&l, "bad_status", bad);
    bench_line_emit(&l, "ms", bench_median(t[mode], trials), refs[mode]);
    free(t[mode]);
  }
  cudaStreamDestroy(side);
  cudaFree(sink);
  cudaEventDestroy(c0);
  cudaEventDestroy(c1);
}

// Ranks 0 and 1 ping-pong; then rank 0 measures the naive floor. Every rank calls it.
static void bench_latency(int iters, int lsaRank, int size, ccoDevComm dc, ccoWindow_t win, void* local,
                          size_t dstOff, int* status, cudaStream_t st) {
  if (lsaRank >= 2) {
    CCO_OK(ccoBarrierAll(comm));
    CCO_OK(ccoBarrierAll(comm));
    return;
  }
  uint64_t base = 0;  // fresh device communicator: signal slot (peer, queue 1) starts at 0
  int host = 1;
  CCO_OK(ccoBarrierAll(comm));
  double t0 = bench_now_s();
  ping_pong<<<1, 1, 0, st>>>(dc, win, lsaRank == 0 ? 1 : 0, lsaRank == 0, iters, base, status);
  CUDA_OK(cudaStreamSynchronize(st));
  double halfRtt = (bench_now_s() - t0) * 1e6 / iters / 2;
  CUDA_OK(cudaMemcpy(&host, status, sizeof(int), cudaMemcpyDeviceToHost));
  CCO_OK(ccoBarrierAll(comm));
  if (lsaRank == 0) {
    double floorUs = naive_floor_us((char*)local + dstOff, local, iters);
    bench_line l;
    bench_line_start(&l, "sdma", "sdma_latency", 1024, size, iters);
    bench_line_int(&l, "bad_status", host);
    bench_line_str(&l, "post_fence", g_postFence);
    bench_line_emit(&l, "us", halfRtt, NULL);
    bench_line_start(&l, "sdma", "sdma_latency", 1024, size, iters);
    bench_line_emit(&l, "us", floorUs, "naive_floor");
  }
}

int main(int argc, char** argv) {
  bench_args a = {0};
  a.program = "cco-bench-sdma";
  a.about = "SDMA puts posted by kernels: bandwidth, latency, issue interval, overlap, beside references (ccorun -n 2).";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = kOps;
  a.defaults = "put: -b 1K -e 1G -f 4, -n 5 trials, -w 0; latency: -n 2000; issue: -n 4096 puts; overlap: -n 5 trials";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 1024, 1u << 30, 4);
  // Kernels here wait for work of kernels launched after them. With lazy
  // module loading (CUDA's default) the first launch of a kernel loads it,
  // and loading waits for the running kernels: the waiter would starve the
  // launch it waits for. Load every kernel at start instead (set before the
  // driver starts, in bench_require_gpu).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  bench_require_gpu(a.program);
  setenv("CCO_PLATFORM", "cuda", 1);
  CUDA_OK(pick_rank_device());
  CUDA_OK(cudaFree(0));
  CCO_OK(ccoCommCreateFromEnv(0, &comm));
  int rank, size, lsaRank, lsaSize;
  CCO_OK(ccoCommRank(comm, &rank));
  CCO_OK(ccoCommSize(comm, &size));
  CCO_OK(ccoCommLsaRank(comm, &lsaRank));
  CCO_OK(ccoCommLsaSize(comm, &lsaSize));
  if (lsaSize < 2) {
    fprintf(stderr, "cco-bench-sdma needs two ranks on one host\n");
    return 2;
  }
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  ccoDevComm dc;
  CCO_OK(ccoDevCommCreate(comm, &reqs, &dc));
  ccoSdmaDev sd;
  CUDA_OK(cudaMemcpy(&sd, (const void*)(uintptr_t)dc.sdma, sizeof(sd), cudaMemcpyDeviceToHost));
  g_postFence = sd.postFenceGpu ? "gpu" : "sys";
  // Sources in the first half of the window, destinations in the second.
  const size_t half = sw.max > kOverlapBytes ? sw.max : kOverlapBytes;
  ccoWindow_t win;
  void* local;
  CCO_OK(ccoWindowRegisterAlloc(comm, 2 * half, &win, &local));
  CUDA_OK(cudaMemset(local, 1, half));
  int* status;
  CUDA_OK(cudaMalloc(&status, sizeof(int)));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CCO_OK(ccoBarrierAll(comm));

  // Rank 0 only; the other ranks wait at the barrier.
  if (lsaRank == 0) {
    void* peerDst = NULL;
    CCO_OK(ccoGetPeerPtr(comm, (char*)local + half, 1, &peerDst));
    if (bench_args_want(&a, "put"))
      bench_put(&sw, (int)bench_args_iters(&a, 5), (int)bench_args_warmup(&a, 0), size, dc, win, local, peerDst, half,
                status, st);
    if (bench_args_want(&a, "issue"))
      bench_issue((int)bench_args_iters(&a, 4096), size, dc, win, local, peerDst, half, status, st);
    if (bench_args_want(&a, "overlap"))
      bench_overlap((int)bench_args_iters(&a, 5), size, dc, win, local, peerDst, half, status, st);
  }
  CCO_OK(ccoBarrierAll(comm));
  if (bench_args_want(&a, "latency"))
    bench_latency((int)bench_args_iters(&a, 2000), lsaRank, size, dc, win, local, half, status, st);
  CCO_OK(ccoBarrierAll(comm));
  CCO_OK(ccoWindowDeregister(comm, win));
  CCO_OK(ccoDevCommDestroy(comm, &dc));
  CCO_OK(ccoCommDestroy(comm));
  return 0;
}
