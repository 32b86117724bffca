/*
 * Allocation hooks for torch's CUDAPluggableAllocator: a torch.cuda.MemPool
 * built on them places every segment torch's caching allocator asks for in
 * the selected communicator's symmetric memory (ccoMemAlloc), so tensors of
 * that pool can be registered as windows and reached through peer pointers.
 *
 * One mutex guards the selected communicator and the list of blocks handed
 * out from it. Holding it across ccoMemAlloc/ccoMemFree is what makes
 * ccoTorchAllocatorSetComm wait for calls in flight, so a caller that
 * switches the hooks away may destroy the communicator right after.
 */
#include "cco/cco_torch.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"
#include "comm/comm.h"

typedef struct torch_block {
  void* ptr;
  struct torch_block* next;
} torch_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ccoComm* g_comm;       /* NULL: the hooks are off */
static torch_block* g_blocks; /* handed out from g_comm and not yet freed */

/* Drops the records, not the memory: the blocks stay allocated in their
 * communicator until freed there or destroyed with it (lock held). */
static void forget_blocks(void) {
  while (g_blocks) {
    torch_block* b = g_blocks;
    g_blocks = b->next;
    free(b);
  }
}

ccoResult_t ccoTorchAllocatorSetComm(ccoComm* comm) {
  if (comm && !cco_comm_is_valid(comm))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoTorchAllocatorSetComm: invalid communicator handle (destroyed or foreign)");
  pthread_mutex_lock(&g_lock);
  if (comm != g_comm) {
    forget_blocks();
    g_comm = comm;
  }
  pthread_mutex_unlock(&g_lock);
  CCO_INFO(MEM, "torch allocator hooks %s", comm ? "draw from a communicator" : "disabled");
  return ccoSuccess;
}

void* cco_torch_malloc(ssize_t size, int device, void* stream) {
  (void)device;
  (void)stream;
  if (size <= 0) return NULL;
  void* ptr = NULL;
  pthread_mutex_lock(&g_lock);
  torch_block* b = g_comm ? malloc(sizeof(*b)) : NULL;
  if (b && ccoMemAlloc(g_comm, (size_t)size, &ptr) == ccoSuccess) {
    b->ptr = ptr;
    b->next = g_blocks;
    g_blocks = b;
  } else {
    free(b);
    ptr = NULL;
  }
  pthread_mutex_unlock(&g_lock);
  return ptr;
}

void cco_torch_free(void* ptr, ssize_t size, int device, void* stream) {
  (void)size;
  (void)device;
  (void)stream;
  if (!ptr) return;
  pthread_mutex_lock(&g_lock);
  for (torch_block** it = &g_blocks; *it; it = &(*it)->next) {
    if ((*it)->ptr != ptr) continue;
    torch_block* b = *it;
    /* A block with a live window stays put (ccoInvalidUsage): torch frees
     * segments only when it no longer uses them, so that is a caller bug
     * best left visible in ccoGetLastError rather than a crash. */
    if (ccoMemFree(g_comm, ptr) == ccoSuccess) {
      *it = b->next;
      free(b);
    }
    break;
  }
  pthread_mutex_unlock(&g_lock);
}
