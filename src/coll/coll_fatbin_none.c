/* The collectives' fatbin of a build without nvcc: empty, so the CUDA
 * platform refuses collectives with a message saying why
 * (cmake/coll_kernels.cmake makes the real one, coll_fatbin.c). */
#include "coll/coll.h"

#ifndef CCO_COLL_HAVE_FATBIN
const unsigned char cco_coll_fatbin[1] = {0};
const size_t cco_coll_fatbin_size = 0;
#endif
