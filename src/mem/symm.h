/*
 * Symmetric memory of one communicator: the flat VA, the slot allocator,
 * this rank's allocations, the peers' chunks mapped for windows, and the
 * windows.
 *
 * Layout: LSA rank p's slot is [flatBase + p * slotSize, + slotSize). An
 * allocation at offset o of this rank's slot has its peers' twins at offset
 * o of their slots; a window maps them there (whole chunks) and they stay
 * mapped while any window of this rank uses the allocation.
 */
#ifndef CCO_MEM_SYMM_H_
#define CCO_MEM_SYMM_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cco/cco.h"
#include "mem/slot_alloc.h"
#include "platform/platform.h"
#include "transport/lsa/lsa_exchange.h"

/* A peer's twin of one of our allocations, mapped into its slot. */
typedef struct {
  bool mapped;
  uint64_t allocId; /* the peer's id of the allocation we mapped */
  cco_chunk chunk;
} cco_peer_chunk;

typedef struct cco_alloc {
  size_t offset;    /* in this rank's slot */
  size_t blockSize; /* slot bytes taken (granule multiple) */
  cco_chunk chunk;  /* physical memory: ours, or an imported external allocation */
  uint64_t id;      /* unique per rank: tells a reallocation at the same offset apart */
  bool external;
  int windows;          /* live windows on it; peers stay mapped while > 0 */
  cco_peer_chunk* peers; /* [lsaSize], while windows > 0 */
  struct cco_alloc* next;
} cco_alloc;

typedef struct cco_window_rec {
  ccoWindowDevice desc; /* host copy */
  ccoWindowDevice* dev; /* device-visible copy: the ccoWindow_t handle */
  char* localPtr;
  cco_alloc* alloc;
  bool ownsAlloc; /* RegisterAlloc / RegisterExternal: deregister frees it */
  struct cco_window_rec* next;
} cco_window_rec;

typedef struct cco_devcomm_rec cco_devcomm_rec;

typedef struct {
  cco_platform platform;
  bool platformOpen;
  char* flatBase;
  size_t slotSize;
  size_t granularity;
  int lsaSize, lsaRank;
  bool lsaOneDevice; /* every LSA peer uses this very GPU (set at creation) */
  int* lsaWorld; /* world rank of each LSA rank (borrowed from the topology) */
  cco_slot_alloc* slots;
  cco_alloc* allocs;
  cco_window_rec* windows;
  uint64_t nextAllocId;
  cco_devcomm_rec* devcomms; /* device communicators (src/mem/devcomm.c) */
  uint64_t nextDevCommId;
  uint32_t regSeq;
  cco_lsa_exchange exchange;
  bool exchangeOpen;
  pthread_mutex_t lock; /* allocs, windows, slots: ccoMemAlloc is not collective */
} cco_symm;

/* After the topology is known: reserves the flat VA and opens the fd
 * exchange. The platform must already be open in m->platform. */
ccoResult_t cco_symm_init(ccoComm* comm);
/* Releases every window, allocation and mapping left, the VA and the
 * platform. Safe after a failed or partial init. */
void cco_symm_fini(ccoComm* comm);

/* Internal helpers shared by symm.c and window.c (mem lock held). */
cco_alloc* cco_symm_find_alloc(cco_symm* m, const void* ptr, size_t size);
ccoResult_t cco_symm_free_alloc(cco_symm* m, cco_alloc* a);
void cco_symm_unmap_peers(cco_symm* m, cco_alloc* a);
char* cco_symm_slot_base(const cco_symm* m, int lsaRank);
void cco_window_free_rec(cco_symm* m, cco_window_rec* w);

/* Sets the abort word of every device communicator, so device waits return
 * (called when the communicator fails or is aborted). */
void cco_devcomm_abort_all(cco_symm* m);
/* Releases every device communicator (mem lock held; windows go separately). */
void cco_devcomm_free_all(ccoComm* comm);

#endif /* CCO_MEM_SYMM_H_ */
