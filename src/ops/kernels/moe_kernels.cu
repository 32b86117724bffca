/*
 * The MoE op's kernels (cco/cco_moe.h), compiled by nvcc at build time into
 * a fatbin that libcco embeds (cmake/moe_kernels.cmake) and loads through
 * the platform (src/ops/moe_launch.c). Block b of the grid runs part b of
 * gridDim.x; its warps take a token each. Failures go to the op's status
 * word (mapped host memory), which the host reads at the next call.
 *
 * Parameters: the op's device communicator (its device copy) and the
 * call's arguments by value.
 */
#include "cco/device/impl/moe_impl.h"
#include "ops/moe_kernel_names.h"

extern "C" __global__ void __launch_bounds__(CCO_MOE_THREADS)
    ccoMoeDispatchKernel(const ccoDevComm* dc, ccoMoeDevArgs args) {
  cco_impl_moe_dispatch_part(dc, &args, blockIdx.x, gridDim.x);
}

extern "C" __global__ void __launch_bounds__(CCO_MOE_THREADS)
    ccoMoeCombineKernel(const ccoDevComm* dc, ccoMoeDevArgs args) {
  cco_impl_moe_combine_part(dc, &args, blockIdx.x, gridDim.x);
}
