/*
 * Offset allocator for one rank's slot of the flat VA.
 *
 * Representation: a dynamic array of extents {offset, size, used}, sorted by
 * offset, that always tiles [0, capacity) exactly (each extent starts where
 * the previous one ends) and never holds two adjacent free extents. The holes
 * are then simply the free extents, first fit is a linear scan in address
 * order, and every query is a binary search. This is O(n) per update, which is
 * fine for the handful of symmetric buffers a communicator owns, and it makes
 * the invariants easy to state and to check.
 *
 * Every mutation first reserves the array room it may need, so a failure to
 * grow the bookkeeping leaves the allocator exactly as it was.
 */
#include "mem/slot_alloc.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef struct {
  size_t offset;
  size_t size;
  bool used;
} extent;

struct cco_slot_alloc {
  size_t capacity;
  size_t granularity; /* power of two */
  extent* ext;        /* sorted, tiles [0, capacity), no two free neighbours */
  size_t n;           /* extents in ext */
  size_t room;        /* extents allocated */
  size_t usedBytes;   /* sum of the used extents' sizes */
  size_t nUsed;       /* used extents; holes are n - nUsed */
};

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* Rounds size up to the granularity. False when that would wrap size_t, so
 * callers can report "too big" instead of silently getting a tiny block. */
static bool round_up(const cco_slot_alloc* a, size_t size, size_t* rounded) {
  size_t mask = a->granularity - 1;
  if (size > SIZE_MAX - mask) return false;
  *rounded = (size + mask) & ~mask;
  return true;
}

/* Makes room for at least `want` extents; the contents are untouched on
 * failure. */
static bool reserve(cco_slot_alloc* a, size_t want) {
  if (want <= a->room) return true;
  size_t room = a->room ? a->room : 8;
  while (room < want) {
    if (room > SIZE_MAX / 2 / sizeof(extent)) return false;
    room *= 2;
  }
  extent* e = realloc(a->ext, room * sizeof(extent));
  if (!e) return false;
  a->ext = e;
  a->room = room;
  return true;
}

/* Index of the extent containing offset (offset < capacity). Extent 0 starts
 * at 0 and the extents tile the slot, so the last extent starting at or
 * before offset is the one. */
static size_t find_index(const cco_slot_alloc* a, size_t offset) {
  size_t lo = 0, hi = a->n; /* answer in [lo, hi) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->ext[mid].offset <= offset) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* Opens `count` empty entries at index i (room already reserved). */
static void insert_gap(cco_slot_alloc* a, size_t i, size_t count) {
  memmove(&a->ext[i + count], &a->ext[i], (a->n - i) * sizeof(extent));
  a->n += count;
}

/* Drops `count` entries starting at index i. */
static void remove_range(cco_slot_alloc* a, size_t i, size_t count) {
  memmove(&a->ext[i], &a->ext[i + count], (a->n - i - count) * sizeof(extent));
  a->n -= count;
}

/* Turns [offset, offset + size) of the free extent at index i into a used
 * extent, leaving the free remainders on either side as their own extents.
 * The caller has checked the range lies inside the extent and reserved two
 * spare entries. */
static void carve(cco_slot_alloc* a, size_t i, size_t offset, size_t size) {
  extent hole = a->ext[i];
  size_t left = offset - hole.offset;
  size_t right = hole.offset + hole.size - (offset + size);
  size_t pieces = 1 + (left > 0) + (right > 0);
  insert_gap(a, i + 1, pieces - 1);
  size_t k = i;
  if (left > 0) a->ext[k++] = (extent){hole.offset, left, false};
  a->ext[k++] = (extent){offset, size, true};
  if (right > 0) a->ext[k] = (extent){offset + size, right, false};
  a->usedBytes += size;
  a->nUsed++;
}

static size_t largest_hole(const cco_slot_alloc* a) {
  size_t best = 0;
  for (size_t i = 0; i < a->n; i++)
    if (!a->ext[i].used && a->ext[i].size > best) best = a->ext[i].size;
  return best;
}

static int clamp_int(size_t v) { return v > (size_t)INT_MAX ? INT_MAX : (int)v; }

/* ------------------------------------------------------------------------ */
/* API                                                                      */
/* ------------------------------------------------------------------------ */

ccoResult_t cco_slot_alloc_create(size_t capacity, size_t granularity, cco_slot_alloc** out) {
  if (!out)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator: out is NULL");
  if (granularity == 0 || (granularity & (granularity - 1)) != 0)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator granularity %zu is not a power of two", granularity);
  if (capacity == 0 || capacity % granularity != 0)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot capacity %zu is not a positive multiple of the granularity %zu",
                     capacity, granularity);

  cco_slot_alloc* a = calloc(1, sizeof(*a));
  if (!a || !reserve(a, 8)) {
    free(a);
    return cco_error_quiet(NULL, ccoOutOfMemory, "cannot allocate the slot allocator's bookkeeping");
  }
  a->capacity = capacity;
  a->granularity = granularity;
  a->ext[0] = (extent){0, capacity, false};
  a->n = 1;
  *out = a;
  return ccoSuccess;
}

void cco_slot_alloc_destroy(cco_slot_alloc* a) {
  if (!a) return;
  free(a->ext);
  free(a);
}

ccoResult_t cco_slot_alloc_take(cco_slot_alloc* a, size_t size, size_t* offset, size_t* blockSize) {
  if (!a || !offset)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator take: %s is NULL", a ? "offset" : "allocator");
  if (size == 0)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator take: size 0 (a block must hold at least one byte)");
  size_t need;
  if (!round_up(a, size, &need) || need > a->capacity)
    return cco_error_quiet(NULL, ccoOutOfMemory, "request of %zu bytes exceeds the slot capacity %zu", size, a->capacity);

  size_t i = 0;
  while (i < a->n && (a->ext[i].used || a->ext[i].size < need)) i++;
  if (i == a->n)
    return cco_error_quiet(NULL, ccoOutOfMemory, "no free range of %zu bytes in the slot (largest hole %zu of %zu)", need,
                     largest_hole(a), a->capacity);
  /* A first-fit split adds at most one extent (the remainder on the right). */
  if (!reserve(a, a->n + 1))
    return cco_error_quiet(NULL, ccoOutOfMemory, "cannot grow the slot allocator's bookkeeping");

  size_t at = a->ext[i].offset;
  carve(a, i, at, need);
  *offset = at;
  if (blockSize) *blockSize = need;
  return ccoSuccess;
}

ccoResult_t cco_slot_alloc_take_at(cco_slot_alloc* a, size_t offset, size_t size,
                                   size_t* blockSize) {
  if (!a)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator take_at: allocator is NULL");
  if (size == 0)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator take_at: size 0 (a block must hold at least one byte)");
  if (offset & (a->granularity - 1))
    return cco_error_quiet(NULL, ccoInvalidArgument, "offset 0x%zx is not aligned to the slot granularity 0x%zx", offset,
                     a->granularity);
  size_t need;
  /* Written as need > capacity - offset so offset + need cannot wrap. */
  if (offset >= a->capacity || !round_up(a, size, &need) || need > a->capacity - offset)
    return cco_error_quiet(NULL, ccoInvalidArgument, "range at 0x%zx of %zu bytes lies outside the slot (capacity %zu)", offset,
                     size, a->capacity);

  size_t i = find_index(a, offset);
  const extent* e = &a->ext[i];
  /* Free extents are never adjacent, so a range that runs past the free
   * extent containing its start necessarily reaches a used one. */
  if (e->used || need > e->offset + e->size - offset)
    return cco_error_quiet(NULL, ccoOutOfMemory, "range [0x%zx, 0x%zx) overlaps a block in use", offset, offset + need);
  if (!reserve(a, a->n + 2))
    return cco_error_quiet(NULL, ccoOutOfMemory, "cannot grow the slot allocator's bookkeeping");

  carve(a, i, offset, need);
  if (blockSize) *blockSize = need;
  return ccoSuccess;
}

ccoResult_t cco_slot_alloc_first_fit_from(const cco_slot_alloc* a, size_t from, size_t size,
                                          size_t* offset) {
  if (!a || !offset)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator first_fit_from: %s is NULL",
                           a ? "offset" : "allocator");
  if (size == 0)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator first_fit_from: size 0");
  size_t need, start;
  if (!round_up(a, size, &need) || !round_up(a, from, &start) || start >= a->capacity ||
      need > a->capacity - start)
    return cco_error_quiet(NULL, ccoOutOfMemory, "no free range of %zu bytes at or above 0x%zx in the slot (capacity %zu)",
                           size, from, a->capacity);
  for (size_t i = find_index(a, start); i < a->n; i++) {
    const extent* e = &a->ext[i];
    size_t at = e->offset > start ? e->offset : start;
    if (!e->used && e->offset + e->size >= at + need) {
      *offset = at;
      return ccoSuccess;
    }
  }
  return cco_error_quiet(NULL, ccoOutOfMemory, "no free range of %zu bytes at or above 0x%zx in the slot (largest hole %zu of %zu)",
                         need, start, largest_hole(a), a->capacity);
}

ccoResult_t cco_slot_alloc_give(cco_slot_alloc* a, size_t offset) {
  if (!a)
    return cco_error_quiet(NULL, ccoInvalidArgument, "slot allocator give: allocator is NULL");
  size_t i = offset < a->capacity ? find_index(a, offset) : 0;
  if (offset >= a->capacity || a->ext[i].offset != offset || !a->ext[i].used)
    return cco_error_quiet(NULL, ccoInvalidArgument, "offset 0x%zx is not the start of an allocated block "
                     "(double free or foreign pointer)",
                     offset);

  a->ext[i].used = false;
  a->usedBytes -= a->ext[i].size;
  a->nUsed--;
  /* Restore "no two free neighbours": absorb the right one, then let the
   * left one absorb this. Merging only shrinks the array, so it cannot fail. */
  if (i + 1 < a->n && !a->ext[i + 1].used) {
    a->ext[i].size += a->ext[i + 1].size;
    remove_range(a, i + 1, 1);
  }
  if (i > 0 && !a->ext[i - 1].used) {
    a->ext[i - 1].size += a->ext[i].size;
    remove_range(a, i, 1);
  }
  return ccoSuccess;
}

bool cco_slot_alloc_find(const cco_slot_alloc* a, size_t offset, size_t* blockOffset,
                         size_t* blockSize) {
  if (!a || offset >= a->capacity) return false;
  const extent* e = &a->ext[find_index(a, offset)];
  if (!e->used) return false;
  if (blockOffset) *blockOffset = e->offset;
  if (blockSize) *blockSize = e->size;
  return true;
}

size_t cco_slot_alloc_used(const cco_slot_alloc* a) { return a ? a->usedBytes : 0; }

size_t cco_slot_alloc_largest_free(const cco_slot_alloc* a) { return a ? largest_hole(a) : 0; }

int cco_slot_alloc_block_count(const cco_slot_alloc* a) { return a ? clamp_int(a->nUsed) : 0; }

int cco_slot_alloc_hole_count(const cco_slot_alloc* a) {
  return a ? clamp_int(a->n - a->nUsed) : 0;
}
