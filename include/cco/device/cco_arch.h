/*
 * Forwarding header. The arch layer (the primitives the device API is
 * written in) is private since 0.2 and lives in
 * cco/device/impl/arch_impl.h as cco_impl_*; kernels use the public API
 * instead: ccoSignalLoad / ccoSignalStore / ccoSignalAdd for acquire loads,
 * release stores and release adds, ccoCoopSize / ccoCoopRank / ccoCoopSync
 * for scopes. The portability macros CCO_ARCH_GPU, CCO_DEVICE_INLINE and
 * CCO_HOST_DEVICE_INLINE stay public.
 *
 * Kept so that code written against 0.1 still compiles: it includes the
 * arch layer and maps the 0.1 names of its primitives onto it (hidden when
 * CCO_NO_COMPAT_NAMES is defined).
 */
#ifndef CCO_DEVICE_CCO_ARCH_H_
#define CCO_DEVICE_CCO_ARCH_H_

#include "cco/device/impl/arch_impl.h"

/* ------------------------------------------------------ names before 0.2 */
#ifndef CCO_NO_COMPAT_NAMES
#define cco_ld_acquire_u32 cco_impl_ld_acquire_u32
#define cco_ld_acquire_u64 cco_impl_ld_acquire_u64
#define cco_ld_relaxed_u32 cco_impl_ld_relaxed_u32
#define cco_st_release_u32 cco_impl_st_release_u32
#define cco_st_release_u64 cco_impl_st_release_u64
#define cco_st_relaxed_u32 cco_impl_st_relaxed_u32
#define cco_ld_acquire_scoped_u32 cco_impl_ld_acquire_scoped_u32
#define cco_ld_acquire_scoped_u64 cco_impl_ld_acquire_scoped_u64
#define cco_st_release_scoped_u32 cco_impl_st_release_scoped_u32
#define cco_st_release_scoped_u64 cco_impl_st_release_scoped_u64
#define cco_atomic_add_release_scoped_u64 cco_impl_atomic_add_release_scoped_u64
#define cco_atomic_add_release_u64 cco_impl_atomic_add_release_u64
#define cco_atomic_add_release_u32 cco_impl_atomic_add_release_u32
#define cco_fence_acq_rel_sys cco_impl_fence_acq_rel_sys
#define cco_thread_in_block cco_impl_thread_in_block
#define cco_block_size cco_impl_block_size
#define cco_lane cco_impl_lane
#define cco_warp_size cco_impl_warp_size
#define cco_sync_warp cco_impl_sync_warp
#define cco_sync_block cco_impl_sync_block
#define cco_coop_broadcast3 cco_impl_coop_broadcast3
#define cco_clock_ns cco_impl_clock_ns
#define cco_spin_pause cco_impl_spin_pause
#define cco_spin_backoff cco_impl_spin_backoff
#endif /* CCO_NO_COMPAT_NAMES */

#endif /* CCO_DEVICE_CCO_ARCH_H_ */
