/*
 * Private: internals of the core device API (cco/cco_device.h) and of the
 * transports built on it. Names start with cco_impl_ and may change in any
 * release; kernels call the public functions instead.
 *
 * Included by cco/cco_device.h once its scopes are defined; included on its
 * own, it brings in that header first.
 */
#include "cco/cco_device.h"

#ifndef CCO_DEVICE_IMPL_LSA_IMPL_H_
#define CCO_DEVICE_IMPL_LSA_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_devcomm.h"
#include "cco/cco_window.h"
#include "cco/device/impl/arch_impl.h"

/* Whether [off, off + bytes) lies in the window (overflow-safe). */
CCO_DEVICE_INLINE int cco_impl_window_has_range(ccoWindow_t win, size_t off, size_t bytes) {
  uint64_t size = win->size;
  return (uint64_t)off <= size && (uint64_t)bytes <= size - (uint64_t)off;
}

/* One status for the whole scope (which must all call): the worst any of
 * its threads saw. A block learns it from two reductions, so every thread
 * returns the same status, which a branch on it needs (a later barrier under
 * it is reached by all or by none): ccoDevAborted when any thread saw the
 * abort word, else ccoDevTimeout when any gave up. Also a sync of the
 * scope. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_lsa_scope_status(ccoCoop_t coop, ccoDevStatus_t st) {
  if (coop == ccoCoopWarp) return (ccoDevStatus_t)cco_impl_warp_max_u32((uint32_t)st);
  if (coop == ccoCoopBlock) { /* the reductions synchronized the block */
    if (!cco_impl_block_any(st != ccoDevSuccess)) return ccoDevSuccess;
    return cco_impl_block_any(st == ccoDevAborted) ? ccoDevAborted : ccoDevTimeout;
  }
  ccoCoopSync(coop);
  return st;
}

#endif /* CCO_DEVICE_IMPL_LSA_IMPL_H_ */
