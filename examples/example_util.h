/*
 * Error reporting shared by the examples: a failed call prints the call,
 * the result and its detail, prefixed with the rank, and returns 0 so the
 * example can unwind what it made. OK() needs a `comm` in scope.
 */
#ifndef CCO_EXAMPLES_EXAMPLE_UTIL_H_
#define CCO_EXAMPLES_EXAMPLE_UTIL_H_

#include <stdio.h>

#include "cco/cco.h"

static int g_rank = -1; /* set once the communicator exists */

static inline int cco_example_ok(ccoResult_t res, const char* call, const ccoComm* comm) {
  if (res == ccoSuccess) return 1;
  fprintf(stderr, "rank %d: %s failed: %s (%s)\n", g_rank, call, ccoGetErrorString(res),
          ccoGetLastError(comm));
  return 0;
}
#define OK(call) cco_example_ok((call), #call, comm)

#ifdef __CUDACC__
static inline int cco_example_cuda_ok(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, call, cudaGetErrorString(e));
  return 0;
}
#define CUDA_OK(call) cco_example_cuda_ok((call), #call)
#endif

#endif /* CCO_EXAMPLES_EXAMPLE_UTIL_H_ */
