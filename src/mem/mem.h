/*
 * Symmetric memory of one communicator: the flat VA, the slot allocator,
 * this rank's allocations, the peers' chunks mapped for windows, and the
 * windows.
 *
 * Mapping the peers' memory into their slots is memory's job, not LSA's:
 * every transport addresses peers through the flat VA (LSA loads and
 * stores, SDMA copies, GDA's staged copies).
 *
 * Layout: LSA rank p's slot is [flatBase + p * slotSize, + slotSize). An
 * allocation at offset o of this rank's slot has its peers' twins at offset
 * o of their slots; a window maps them there (whole chunks) and they stay
 * mapped while any window of this rank uses the allocation.
 */
#ifndef CCO_MEM_MEM_H_
#define CCO_MEM_MEM_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cco/cco.h"
#include "base/error.h"
#include "boot/bootstrap.h"
#include "boot/topology.h"
#include "mem/fd_exchange.h"
#include "mem/slot_alloc.h"
#include "platform/platform.h"

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
  int parkedWindows;    /* of those, deregistered on a failed communicator (cco_mem_window_remove) */
  bool freed;           /* ccoMemFree'd while parked windows held it: goes at cco_mem_fini */
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

/* A window as the layers above see it. */
typedef struct {
  uint64_t offset; /* in this rank's slot, the same on every rank */
  uint64_t size;
  void* localPtr;
} cco_window_info;

typedef struct {
  /* Borrowed from the communicator. */
  cco_platform* platform;
  cco_bootstrap* boot; /* window registration is collective */
  cco_errsink* err;
  int rank, nRanks;
  const int* lsaWorld; /* world rank of each LSA rank (the topology's) */
  int lsaSize, lsaRank;
  /* Owned. */
  char* flatBase;
  size_t slotSize;
  size_t granularity;
  cco_slot_alloc* slots;
  cco_alloc* allocs;
  cco_window_rec* windows;
  cco_window_rec* parked; /* deregistered on a failed communicator: freed by cco_mem_fini */
  uint64_t nextAllocId;
  uint32_t regSeq;
  cco_fd_exchange exchange;
  bool exchangeOpen;
  bool lockReady;
  pthread_mutex_t lock; /* allocs, windows, slots: ccoMemAlloc is not collective */
} cco_mem;

typedef struct {
  cco_platform* platform; /* open */
  cco_bootstrap* boot;
  cco_errsink* err;
  const cco_topology* topo;
  size_t slotSize; /* a multiple of 4 GiB */
  int wakeFd;      /* readable once the communicator is aborted */
} cco_mem_config;

/* After the topology is known: reserves the flat VA and opens the fd
 * exchange. */
ccoResult_t cco_mem_init(cco_mem* m, const cco_mem_config* cfg);
/* Releases every window, allocation and mapping left, and the VA. Safe
 * after a failed or partial init. The platform stays open (not ours). */
void cco_mem_fini(cco_mem* m);

char* cco_mem_slot_base(const cco_mem* m, int lsaRank);

/* Symmetric allocations (src/mem/mem.c); each takes the lock. */
ccoResult_t cco_mem_alloc(cco_mem* m, size_t size, void** ptr);
ccoResult_t cco_mem_import(cco_mem* m, void* extPtr, size_t size, void** localPtr);
ccoResult_t cco_mem_free(cco_mem* m, void* ptr);

/* Collective placement (src/mem/placement.c), for the memory of a window
 * every rank registers at once (ccoWindowRegisterAlloc / -External): the
 * block goes where its range is free on every rank, so the windows line up
 * whatever order earlier blocks were freed in. `argsOk` false: this rank's
 * arguments were bad (the caller recorded why); it still takes part, and
 * every rank fails. On failure nothing stays allocated or imported; the
 * caller then takes part in the registration with no memory, as a bad
 * window, so that every rank fails it too. */
ccoResult_t cco_mem_alloc_placed(cco_mem* m, bool argsOk, size_t size, void** ptr);
ccoResult_t cco_mem_import_placed(cco_mem* m, bool argsOk, void* extPtr, size_t size, void** localPtr);

/* Windows (src/mem/window.c). Register is collective (the caller runs it
 * inside a collective of the communicator) and all or nothing; the window
 * it returns is complete but not yet published: the caller publishes it
 * (once the transports have accepted it) or discards it. */
ccoResult_t cco_mem_window_register(cco_mem* m, void* ptr, size_t size, bool ownsAlloc,
                                    cco_window_rec** out);
void cco_mem_window_publish(cco_mem* m, cco_window_rec* w);
void cco_mem_window_discard(cco_mem* m, cco_window_rec* w);
/* With the lock held: look a window up by its handle; unlink and free it.
 * `park`: the communicator failed, so a peer's network writes into this
 * memory (or the engine's reads of it) may still be under way; the window
 * is unlinked (its handle is gone) but its memory stays mapped until
 * cco_mem_fini, which runs after the transports closed their engines. */
cco_window_rec* cco_mem_window_find(cco_mem* m, ccoWindow_t handle);
void cco_mem_window_remove(cco_mem* m, cco_window_rec* w, bool park);
/* Calls fn for every published window, with the lock held (so none comes
 * or goes meanwhile); stops at the first failure and returns it. */
ccoResult_t cco_mem_window_foreach(cco_mem* m, ccoResult_t (*fn)(void* arg, const cco_window_info* win),
                                   void* arg);
cco_window_info cco_mem_window_info(const cco_window_rec* w);
/* With the lock held: a published window holding [ptr, ptr + bytes) of
 * this rank's memory, or NULL. *start is set when some window starts at or
 * before ptr and covers it, even if the range runs past its end (so the
 * caller can tell "outside every window" from "too long for its window"). */
cco_window_rec* cco_mem_window_covering(cco_mem* m, const void* ptr, uint64_t bytes, cco_window_rec** start);
/* Whether ptr lies in this rank's slot of the flat VA. */
bool cco_mem_in_own_slot(const cco_mem* m, const void* ptr);
/* The peer's address of localPtr, which must lie in a window. */
ccoResult_t cco_mem_peer_ptr(cco_mem* m, const void* localPtr, int peerLsa, void** peerPtr);

/* Internal helpers shared by mem.c and window.c (lock held). */
cco_alloc* cco_mem_find_alloc(cco_mem* m, const void* ptr, size_t size);
ccoResult_t cco_mem_free_alloc(cco_mem* m, cco_alloc* a);
/* Places a chunk the platform just made (`made` is how that went) at *at,
 * or at the first fit when at is NULL; the chunk is released again if it
 * cannot be placed. */
ccoResult_t cco_mem_adopt_chunk(cco_mem* m, ccoResult_t made, cco_chunk* chunk, bool external,
                                const size_t* at, void** ptr);
void cco_mem_unmap_peers(cco_mem* m, cco_alloc* a);
void cco_mem_window_free_rec(cco_mem* m, cco_window_rec* w);

#endif /* CCO_MEM_MEM_H_ */
