/*
 * Collective placement: the memory of a window that every rank registers at
 * once goes to an offset that is free in every rank's slot.
 *
 * ccoMemAlloc and ccoMemImport are local and take the first fit, so two
 * ranks get the same offset only if they allocated and freed in the same
 * order before. Owners that free on their own schedule (torch frees tensors
 * in garbage-collection order, which differs by rank) break that, and the
 * next window over a first-fit block would then fail its offset check. The
 * owning registrations (ccoWindowRegisterAlloc / -External) are collective
 * anyway, so they agree on the offset first:
 *
 *   candidate = 0
 *   repeat: every rank proposes first_fit_from(candidate) (allgather);
 *           all equal -> that offset is free everywhere; otherwise
 *           candidate = the largest proposal.
 *
 * A proposal is never above the lowest offset free on every rank that is at
 * or above the candidate, so the candidate never passes it, and it grows on
 * every round that does not end: the loop ends at the lowest common fit, in
 * one round when the slots agree (the usual case), or fails on every rank
 * when some rank has no room left.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "mem/mem.h"

typedef struct {
  int32_t status; /* ccoResult_t: this rank's chunk, or its slot's room */
  uint32_t round;
  uint64_t proposal;
} place_record;
_Static_assert(sizeof(place_record) == 16, "place_record is a wire format");

/* The verdict on a failed round: a rank that failed keeps its own reason,
 * the others name the first rank that failed. */
static ccoResult_t round_failed(cco_mem* m, const place_record* all, int failed, size_t size) {
  if (all[m->rank].status != ccoSuccess) failed = m->rank;
  if (failed == m->rank)
    return cco_error_quiet(m->err, (ccoResult_t)all[failed].status, "rank %d: %s", m->rank,
                           cco_thread_last_error());
  ccoResult_t theirs = (ccoResult_t)all[failed].status;
  /* A bad argument there is a misuse of the collective here, as in window
   * registration; running out of room is the job's, whoever saw it. */
  ccoResult_t ours = theirs == ccoInvalidArgument  ? ccoInvalidUsage
                     : theirs == ccoOutOfMemory    ? ccoOutOfMemory
                                                   : ccoRemoteError;
  return cco_error(m->err, ours, CCO_SUBSYS_MEM,
                   "rank %d: placing a window of %zu bytes failed on rank %d (%s)", m->rank, size,
                   failed, ccoGetErrorString(theirs));
}

/* Every rank calls this with its own chunk size; `made` false ranks take
 * part and make every rank fail. */
static ccoResult_t agree_offset(cco_mem* m, ccoResult_t made, size_t size, size_t* offset) {
  place_record* all = calloc((size_t)m->nRanks, sizeof(place_record));
  if (!all) return cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for placement");
  size_t candidate = 0;
  ccoResult_t res = ccoSuccess;
  for (uint32_t round = 0;; round++) {
    place_record mine = {(int32_t)made, round, 0};
    if (made == ccoSuccess) {
      size_t at = 0;
      pthread_mutex_lock(&m->lock);
      ccoResult_t fit = cco_slot_alloc_first_fit_from(m->slots, candidate, size, &at);
      pthread_mutex_unlock(&m->lock);
      if (fit == ccoSuccess)
        mine.proposal = at;
      else
        mine.status = cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM,
                                "rank %d: no free range of %zu bytes at or above offset %#zx of "
                                "the slot (perRankVmmSize)",
                                m->rank, size, candidate);
    }
    all[m->rank] = mine;
    res = cco_bootstrap_allgather(m->boot, m->err, all, sizeof(place_record));
    if (res != ccoSuccess) break;
    int failed = -1;
    uint64_t top = 0;
    bool same = true;
    for (int r = 0; r < m->nRanks; r++) {
      if (all[r].status != ccoSuccess && failed < 0) failed = r;
      if (all[r].proposal > top) top = all[r].proposal;
      same &= all[r].proposal == all[0].proposal;
    }
    if (failed >= 0) {
      res = round_failed(m, all, failed, size);
      break;
    }
    if (same) {
      *offset = (size_t)top;
      CCO_INFO(MEM, "rank %d: window memory placed at offset %#zx after %u round(s)", m->rank,
               *offset, round + 1);
      break;
    }
    candidate = (size_t)top;
  }
  free(all);
  return res;
}

/* Agrees on an offset for the chunk `made` says this rank has, then places
 * it there; the chunk is released on any failure. */
static ccoResult_t place_agreed(cco_mem* m, ccoResult_t made, cco_chunk* chunk, bool external,
                                void** ptr) {
  size_t offset = 0;
  ccoResult_t res = agree_offset(m, made, made == ccoSuccess ? chunk->size : 1, &offset);
  if (res != ccoSuccess) {
    if (made == ccoSuccess) m->platform->ops->chunk_release(m->platform, chunk);
    return res;
  }
  /* Local from here: another thread of this rank may have taken the range
   * since (ccoMemAlloc is not collective); the registration that follows
   * then fails on every rank. */
  pthread_mutex_lock(&m->lock);
  res = cco_mem_adopt_chunk(m, ccoSuccess, chunk, external, &offset, ptr);
  pthread_mutex_unlock(&m->lock);
  return res;
}

ccoResult_t cco_mem_alloc_placed(cco_mem* m, bool argsOk, size_t size, void** ptr) {
  cco_chunk chunk;
  memset(&chunk, 0, sizeof(chunk));
  ccoResult_t made = ccoInvalidArgument;
  if (!argsOk)
    made = cco_error_quiet(m->err, ccoInvalidArgument, "%s", cco_thread_last_error());
  else if (size > m->slotSize)
    made = cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM,
                     "rank %d: %zu bytes do not fit a slot of %zu bytes (perRankVmmSize)", m->rank,
                     size, m->slotSize);
  else
    made = m->platform->ops->chunk_create(
        m->platform, (size + m->granularity - 1) & ~(m->granularity - 1), &chunk);
  return place_agreed(m, made, &chunk, false, ptr);
}

ccoResult_t cco_mem_import_placed(cco_mem* m, bool argsOk, void* extPtr, size_t size,
                                  void** localPtr) {
  cco_chunk chunk;
  memset(&chunk, 0, sizeof(chunk));
  ccoResult_t made = ccoInvalidArgument;
  if (!argsOk || !extPtr || size == 0)
    made = argsOk ? cco_error(m->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                              "ccoWindowRegisterExternal: NULL pointer or size 0")
                  : cco_error_quiet(m->err, ccoInvalidArgument, "%s", cco_thread_last_error());
  else
    made = m->platform->ops->chunk_from_pointer(m->platform, extPtr, size, &chunk);
  return place_agreed(m, made, &chunk, true, localPtr);
}
