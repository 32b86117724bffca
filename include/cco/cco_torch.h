/*
 * The torch allocator hooks: route allocations of a torch.cuda.MemPool into
 * a communicator's symmetric memory, through
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator("libcco.so",
 *                                                    "cco_torch_malloc", "cco_torch_free")
 *   pool = torch.cuda.MemPool(alloc.allocator())
 *
 * (the Python package wraps this as cco.torch.SymmetricMemPool). The two
 * functions have the signatures torch's CUDAPluggableAllocator expects; the
 * stream is a cudaStream_t, taken here as void* so this header needs no CUDA.
 */
#ifndef CCO_CCO_TORCH_H_
#define CCO_CCO_TORCH_H_

#include <sys/types.h> /* ssize_t */

#include "cco/cco.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Selects the communicator the hooks draw from; NULL disables them (then
 * cco_torch_malloc returns NULL, which torch reports as out of memory).
 * Thread-safe: it waits for hook calls in flight. Switching away from a
 * communicator forgets the blocks it handed out: a later cco_torch_free of
 * one of them does nothing, and ccoCommDestroy releases them. So switch
 * away (or pass NULL) before destroying the communicator, and destroy the
 * communicator only when torch no longer uses the blocks. ccoInvalidArgument
 * when comm is not a live communicator. */
ccoResult_t ccoTorchAllocatorSetComm(ccoComm* comm);

/* ccoMemAlloc(size) on the selected communicator: symmetric memory in this
 * rank's slot of the flat VA, on that communicator's device (device and
 * stream are ignored). NULL when no communicator is selected, size <= 0,
 * or the allocation fails (the reason is in ccoGetLastError). */
void* cco_torch_malloc(ssize_t size, int device, void* stream);

/* ccoMemFree of a block cco_torch_malloc returned from the selected
 * communicator; anything else (NULL, a forgotten or foreign block) is
 * ignored, because torch's free path has no way to report an error. */
void cco_torch_free(void* ptr, ssize_t size, int device, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CCO_CCO_TORCH_H_ */
