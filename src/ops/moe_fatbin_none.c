/* The MoE op's fatbin of a build without nvcc: empty, so the CUDA platform
 * refuses the op with a message saying why (cmake/moe_kernels.cmake makes
 * the real one, moe_fatbin.c). */
#include "ops/moe.h"

#ifndef CCO_MOE_HAVE_FATBIN
const unsigned char cco_moe_fatbin[1] = {0};
const size_t cco_moe_fatbin_size = 0;
#endif
