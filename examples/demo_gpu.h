/* GPU part of the demo (examples/demo_gpu.cu when nvcc exists; otherwise
 * examples/demo_nogpu.c, whose functions report that GPU kernels are absent). */
#ifndef CCO_EXAMPLES_DEMO_GPU_H_
#define CCO_EXAMPLES_DEMO_GPU_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One kernel stores `bytes` of rank `writer`'s pattern at each of dsts[0..n)
 * (peer window addresses) and waits for it. 0 on success. */
int cco_demo_gpu_fill(void* const* dsts, int n, size_t bytes, int writer);
/* Number of 8-byte words of src (device memory) that differ from writer's
 * pattern. */
size_t cco_demo_gpu_verify(const void* src, size_t bytes, int writer);
/* One kernel thread posts an SDMA put of `bytes` (the window's block
 * lsaRank, already holding this rank's pattern) to every LSA peer with a
 * remote signal, then waits for every peer's signal to reach `round`.
 * Returns 0 when every device call succeeded. */
struct ccoDevComm;
int cco_demo_gpu_sdma(const struct ccoDevComm* dc, void* win, size_t bytes, unsigned long long round);
/* One block puts `bytes` from the window's offset 0 to the peer's window at
 * offset `bytes` with a signal, waits for its own signal 0 to reach 1, then
 * flushes. 0 when every device call succeeded. */
int cco_demo_gpu_gda(const struct ccoDevComm* dc, void* win, size_t bytes, int peer);
/* Fills `bytes` at dst (device memory) with writer's pattern. */
int cco_demo_gpu_fill_local(void* dst, size_t bytes, int writer);

#ifdef __cplusplus
}
#endif

#endif /* CCO_EXAMPLES_DEMO_GPU_H_ */
