/* Stand-in for demo_gpu.cu in builds without nvcc: the cuda platform cannot
 * be driven from this demo, and says so. */
#include "demo_gpu.h"

int cco_demo_gpu_fill(void* const* dsts, int n, size_t bytes, int writer) {
  (void)dsts, (void)n, (void)bytes, (void)writer;
  return -1;
}

size_t cco_demo_gpu_verify(const void* src, size_t bytes, int writer) {
  (void)src, (void)writer;
  return bytes / 8;
}

int cco_demo_gpu_sdma(const struct ccoDevComm* dc, void* win, size_t bytes, unsigned long long round) {
  (void)dc, (void)win, (void)bytes, (void)round;
  return -1;
}

int cco_demo_gpu_fill_local(void* dst, size_t bytes, int writer) {
  (void)dst, (void)bytes, (void)writer;
  return -1;
}

int cco_demo_gpu_gda(const struct ccoDevComm* dc, void* win, size_t bytes, int peer) {
  (void)dc, (void)win, (void)bytes, (void)peer;
  return -1;
}
