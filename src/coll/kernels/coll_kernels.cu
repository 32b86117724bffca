/*
 * The collectives' kernels: one per building block of cco/cco_coll.h,
 * compiled by nvcc at build time into a fatbin that libcco embeds
 * (CMakeLists.txt) and loads with cuModuleLoadData (src/coll/coll_cuda.c).
 * Block b of the grid runs part b of gridDim.x; the first block that fails
 * reports its status once into the communicator's status word, which the
 * host reads at the next call and in ccoCommGetAsyncError.
 *
 * Kernel parameters (coll_kernels.h): the device communicator in device
 * memory (its copy from ccoDevCommCopyToDevice), the call's arguments by
 * value, and the status word in mapped host memory.
 */
#include "cco/cco_coll.h"
#include "coll/kernels/coll_kernels.h"
#include "coll/kernels/coll_stream.h"

/* Once per communicator: the first failing block of the first failing
 * call wins; the others leave the word as it is. */
static __device__ __forceinline__ void report(cco_coll_status* status, ccoDevStatus_t st, uint32_t kind,
                                              uint32_t algo) {
  if (st == ccoDevSuccess || threadIdx.x != 0) return;
  if (atomicCAS(&status->status, 0u, (uint32_t)st) != 0u) return;
  status->kind = kind;
  status->algo = algo;
  status->part = blockIdx.x;
  __threadfence_system();
  atomicExch(&status->ready, 1u);
}

/* Launch bounds per algorithm. The hierarchical kernel says one block per
 * SM is enough: without it ptxas held that kernel (its GDA exchanges and two
 * reduction loops per type) to 64 registers and spilled; the others keep
 * the bounds they were measured with. */
#define CCO_COLL_BOUNDS_ccoAlgoOneShot __launch_bounds__(CCO_COLL_THREADS)
#define CCO_COLL_BOUNDS_ccoAlgoLL __launch_bounds__(CCO_COLL_THREADS)
#define CCO_COLL_BOUNDS_ccoAlgoTwoShot __launch_bounds__(CCO_COLL_THREADS)
#define CCO_COLL_BOUNDS_ccoAlgoPush __launch_bounds__(CCO_COLL_THREADS)
#define CCO_COLL_BOUNDS_ccoAlgoPull __launch_bounds__(CCO_COLL_THREADS)
#define CCO_COLL_BOUNDS_ccoAlgoHier __launch_bounds__(CCO_COLL_THREADS, 1)

#define CCO_COLL_KERNEL_(name, block, kind, algo)                                                      \
  extern "C" __global__ void CCO_COLL_BOUNDS_##algo                                                  \
      name(const ccoDevComm* dc, ccoCollArgs args, cco_coll_status* status) {                        \
    ccoDevStatus_t st = block(dc, &args, blockIdx.x, gridDim.x);                                     \
    report(status, st, (uint32_t)(kind), (uint32_t)(algo));                                          \
  }
CCO_COLL_KERNEL_NAMES(CCO_COLL_KERNEL_)

// The typed kernels (coll_kernels.h): the call's type and operator are
// constants here, so the block's switch on them folds to one pair.
#define CCO_COLL_TYPED_KERNEL_(name, block, kind, algo, dtValue, dtName, opValue, opName)        \
  extern "C" __global__ void __launch_bounds__(CCO_COLL_THREADS)                                  \
      name##_##dtName##_##opName(const ccoDevComm* dc, ccoCollArgs args, cco_coll_status* status) { \
    args.dtype = (dtValue);                                                                       \
    args.op = (opValue);                                                                          \
    ccoDevStatus_t st = block(dc, &args, blockIdx.x, gridDim.x);                                  \
    report(status, st, (uint32_t)(kind), (uint32_t)(algo));                                       \
  }
#define CCO_COLL_TYPED_OPS_OF_(name, block, kind, algo, dt, dtName)   \
  CCO_COLL_TYPED_KERNEL_(name, block, kind, algo, dt, dtName, 0, sum) \
  CCO_COLL_TYPED_KERNEL_(name, block, kind, algo, dt, dtName, 1, max) \
  CCO_COLL_TYPED_KERNEL_(name, block, kind, algo, dt, dtName, 2, min)
#define CCO_COLL_TYPED_TYPES_OF_(name, block, kind, algo)  \
  CCO_COLL_TYPED_OPS_OF_(name, block, kind, algo, 0, f32)  \
  CCO_COLL_TYPED_OPS_OF_(name, block, kind, algo, 1, bf16) \
  CCO_COLL_TYPED_OPS_OF_(name, block, kind, algo, 2, f16)  \
  CCO_COLL_TYPED_OPS_OF_(name, block, kind, algo, 3, i32)
CCO_COLL_TYPED_KERNEL_NAMES(CCO_COLL_TYPED_TYPES_OF_)

// ccoBarrierOnStream (coll_stream.h), one block.
extern "C" __global__ void __launch_bounds__(CCO_COLL_STREAM_THREADS)
    ccoCollStreamBarrier(const ccoDevComm* dc, cco_coll_status* status) {
  report(status, cco_stream_barrier_run(dc, 0), CCO_COLL_STREAM_KIND, 0u);
}

// A put and/or signal to a peer on another host (coll_stream.h), one block.
extern "C" __global__ void __launch_bounds__(CCO_COLL_STREAM_THREADS)
    ccoCollStreamGda(const ccoDevComm* dc, cco_stream_gda_args args, cco_coll_status* status) {
  report(status, cco_stream_gda_run(dc, &args), CCO_COLL_STREAM_KIND, 0u);
}
