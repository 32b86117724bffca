/*
 * What the files of mp_triton share: the host's emulation of a Triton
 * program (coop.c), the replays of the Triton kernels (kernels.c) and the
 * driver (main.c, which says what the program does).
 */
#ifndef CCO_TESTS_MP_TRITON_TRITON_H_
#define CCO_TESTS_MP_TRITON_TRITON_H_

#include <stdint.h>

#include "cco/cco.h"
#include "cco_ir_wrappers.h" /* generated from python/cco/ir/device_functions.py */
#define MP_UTIL_SHARED_COUNTS /* the counters live in main.c */
#include "../mp_util.h"

#define CHECK(...) MP_CHECK_MT(__VA_ARGS__)

/* ------------------------------------------------------------ coop.c */

/* A Triton program of num_warps warps is a block of 32 * num_warps GPU
 * threads, and Triton makes every extern call in each of them. tk_launch
 * runs fn(arg) in that many CPU threads, which the scope primitives of the
 * device headers (CCO_HOST_COOP) treat as one block of warps of 32, and
 * returns once every thread is done. */
#define TK_WARP 32
#define TK_MAX_WARPS 4
#define TK_MAX_THREADS (TK_WARP * TK_MAX_WARPS)
typedef void (*tk_program)(void* arg);
void tk_launch(int numWarps, tk_program fn, void* arg);
/* The calling thread's index in its program (0 outside one). */
int tk_thread(void);

/* ------------------------------------------------------------ kernels.c */

/* What a Triton kernel stores into `out` lands in row tk_thread() of
 * out[TK_MAX_THREADS][TK_OUT]: Triton stores a scalar from one thread, so
 * the driver checks that every thread computed the same value. */
#define TK_OUT 64
#define TK_TIMEOUT_NS 5000000000ull     /* triton_kernels.py's TIMEOUT_NS */
#define TK_EX_TIMEOUT_NS 60000000000ull /* test_triton_cco.py's TIMEOUT_NS */

/* The kernels' arguments: run-time ones, then the tl.constexpr ones. */
typedef struct {
  uint64_t dc;  /* dc.ptr: the device copy of the device communicator */
  uint64_t win; /* win.handle */
  int64_t* out;
  int64_t value;
  const int64_t* exp; /* exp_ptr */
  int64_t expected;
  int team, nbytes, doorbell, scope, mode, slot;
  uint64_t count, recvOff, scratchOff, scratchBytes; /* coll */
  int dtype, op, algo;
} tk_args;

/* tests/gpu/triton_kernels.py */
void tk_queries(void* args);
void tk_gda_all(void* args);
void tk_gda_local(void* args);
void tk_world_barrier(void* args);
void tk_sdma_all(void* args);
void tk_coll(void* args);
/* examples/ir/test_triton_cco.py */
void tk_sdma_put(void* args);

#endif /* CCO_TESTS_MP_TRITON_TRITON_H_ */
