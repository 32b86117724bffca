/*
 * Offsets inside one rank's slot of the flat VA. Pure bookkeeping: no
 * memory is touched. Deterministic, so ranks that allocate and free in the
 * same order get the same offsets (that is what makes memory symmetric).
 *
 * First fit over the free holes in address order; every block is a whole
 * number of granules and starts on a granule; freeing coalesces a block with
 * free neighbours.
 */
#ifndef CCO_MEM_SLOT_ALLOC_H_
#define CCO_MEM_SLOT_ALLOC_H_

#include <stdbool.h>
#include <stddef.h>

#include "cco/cco.h"

typedef struct cco_slot_alloc cco_slot_alloc;

/* capacity and granularity > 0; capacity a multiple of granularity;
 * granularity a power of two. */
ccoResult_t cco_slot_alloc_create(size_t capacity, size_t granularity, cco_slot_alloc** out);
void cco_slot_alloc_destroy(cco_slot_alloc* a);

/* Takes the first hole that fits size rounded up to the granularity.
 * size 0 -> ccoInvalidArgument; no hole fits -> ccoOutOfMemory. On failure
 * nothing changes and the outputs are not written. */
ccoResult_t cco_slot_alloc_take(cco_slot_alloc* a, size_t size, size_t* offset, size_t* blockSize);

/* Takes exactly [offset, offset + size) (rounded up) if it is free:
 * ccoInvalidArgument when not granule-aligned or out of range,
 * ccoOutOfMemory when any part of it is in use. For callers that must place
 * a block where another rank placed it. */
ccoResult_t cco_slot_alloc_take_at(cco_slot_alloc* a, size_t offset, size_t size, size_t* blockSize);

/* The lowest granule-aligned offset >= from where size (rounded up) bytes
 * are free, without taking them: ccoOutOfMemory when there is none. Ranks
 * whose slots differ agree on an offset free on all of them by proposing
 * first_fit_from(max of the proposals) until the proposals are equal. */
ccoResult_t cco_slot_alloc_first_fit_from(const cco_slot_alloc* a, size_t from, size_t size,
                                          size_t* offset);

/* Frees the block that starts at offset: ccoInvalidArgument when no block
 * starts there (never allocated, already freed, or inside a block). */
ccoResult_t cco_slot_alloc_give(cco_slot_alloc* a, size_t offset);

/* The block containing offset, if offset lies inside one. */
bool cco_slot_alloc_find(const cco_slot_alloc* a, size_t offset, size_t* blockOffset,
                         size_t* blockSize);

size_t cco_slot_alloc_used(const cco_slot_alloc* a);         /* bytes in blocks */
size_t cco_slot_alloc_largest_free(const cco_slot_alloc* a); /* biggest hole */
int cco_slot_alloc_block_count(const cco_slot_alloc* a);
int cco_slot_alloc_hole_count(const cco_slot_alloc* a);

#endif /* CCO_MEM_SLOT_ALLOC_H_ */
