/*
 * The building blocks a call can run (cco/cco_coll.h), by collective and
 * algorithm: the kernel of each in the fatbin, and the block itself
 * compiled for the CPU, which the host platform's workers call.
 */
#include "cco/cco_coll.h"
#include "coll/coll.h"

_Static_assert(CCO_COLL_ALLREDUCE == 0 && CCO_COLL_ALLGATHER == 1 && CCO_COLL_REDUCESCATTER == 2 &&
                   CCO_COLL_ALLTOALL == 3 && CCO_COLL_BROADCAST == 4,
               "CCO_COLL_KERNEL_NAMES numbers the collectives");

/* The header's blocks are inline functions; these give them addresses. */
#define CCO_COLL_HOST_BLOCK_(kernel, block, kind, algo)                                          \
  static ccoDevStatus_t host_##kernel(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part, \
                                      uint32_t nParts) {                                         \
    return block(dc, a, part, nParts);                                                           \
  }
CCO_COLL_KERNEL_NAMES(CCO_COLL_HOST_BLOCK_)
#undef CCO_COLL_HOST_BLOCK_

static const cco_coll_block k_blocks[] = {
#define CCO_COLL_BLOCK_ENTRY_(kernel, block, kind, algo) {#kernel, host_##kernel, (cco_coll_kind)(kind), algo},
    CCO_COLL_KERNEL_NAMES(CCO_COLL_BLOCK_ENTRY_)
#undef CCO_COLL_BLOCK_ENTRY_
};
_Static_assert(sizeof(k_blocks) / sizeof(k_blocks[0]) == CCO_COLL_BLOCKS, "CCO_COLL_BLOCKS");

int cco_coll_block_index(cco_coll_kind kind, ccoAlgo_t algo) {
  for (int i = 0; i < CCO_COLL_BLOCKS; i++)
    if (k_blocks[i].kind == kind && k_blocks[i].algo == algo) return i;
  return -1;
}

const cco_coll_block* cco_coll_block_at(int index) {
  return index >= 0 && index < CCO_COLL_BLOCKS ? &k_blocks[index] : NULL;
}
