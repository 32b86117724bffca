/*
 * What the MoE kernels (src/ops/kernels/moe_kernels.cu, nvcc) and their
 * launcher (moe_launch.c) agree on: block size and kernel names. C, no
 * CUDA headers: both compilers read it.
 */
#ifndef CCO_OPS_MOE_KERNEL_NAMES_H_
#define CCO_OPS_MOE_KERNEL_NAMES_H_

/* Threads per block: 16 warps, a token each. */
#define CCO_MOE_THREADS 512
#define CCO_MOE_DISPATCH_KERNEL "ccoMoeDispatchKernel"
#define CCO_MOE_COMBINE_KERNEL "ccoMoeCombineKernel"

#endif /* CCO_OPS_MOE_KERNEL_NAMES_H_ */
