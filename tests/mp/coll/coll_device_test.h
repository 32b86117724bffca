/*
 * Shared by the files of mp_coll_device: the "kernel launch" of the
 * collectives' device blocks on CPU threads, and the rank's buffers.
 *
 * Built with CCO_HOST_COOP, so a block may be several CPU threads that the
 * device headers treat as one (ranks, syncs, reductions: coll_launch.c),
 * and with CCO_COLL_TIMEOUT_NS=coll_timeout_ns, so a test can give the
 * blocks' waits a timeout at run time (0: none, the default).
 */
#ifndef CCO_TESTS_MP_COLL_DEVICE_TEST_H_
#define CCO_TESTS_MP_COLL_DEVICE_TEST_H_

#include <stdint.h>

extern uint64_t coll_timeout_ns;

#include "cco/cco.h"
#include "cco/cco_coll.h"

#define MP_UTIL_SHARED_COUNTS
#include "mp_util.h"

#define COLL_MAX_THREADS 8 /* CPU threads per emulated block */

typedef ccoDevStatus_t (*coll_block_fn)(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part, uint32_t nParts);

/* A kernel launch: nParts blocks of nThreads CPU threads each, every thread
 * calling fn(dc, a, part, nParts) `iters` times in a row (a persistent
 * kernel when iters > 1; 0 stands for 1). Returns the status every thread
 * of every block returned, or -1 (printed) when they differ. */
int coll_launch(coll_block_fn fn, const ccoDevComm* dc, const ccoCollArgs* a, int nParts, int nThreads, int iters);

#endif /* CCO_TESTS_MP_COLL_DEVICE_TEST_H_ */
