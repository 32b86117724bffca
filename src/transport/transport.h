/*
 * The transport interface: what every transport (LSA, SDMA, GDA, and any
 * engine added later) offers the communicator, as one ops table.
 *
 * The communicator (src/comm) keeps a registry of these tables
 * (src/comm/transports.c) and calls every transport at the same points of
 * its life, in registry order (teardown in reverse):
 *
 *   start           communicator creation, after memory is up (collective)
 *   devcomm_bytes   how much of a device communicator's resource window the
 *                   transport needs (its part starts 64-byte aligned)
 *   devcomm_create  fill the transport's part of a ccoDevComm
 *   devcomm_destroy release it (the memory lock is held)
 *   window_added    a window was registered (collective, all or nothing)
 *   window_removed  a window is about to go (the memory lock is held)
 *   stop            first step of teardown: join threads, before memory goes
 *   destroy         last step, after every device communicator is released
 *                   and while the platform is still open
 *
 * A transport never sees the communicator. It gets a cco_transport_ctx:
 * the ranks, the topology, the platform, the memory, where to write error
 * detail, and two calls back into the communicator (an allgather, and a
 * way to report a failure found in the background).
 *
 * Adding a transport: a folder under src/transport/ whose header declares
 * its `const cco_transport_ops`, and one line in src/comm/transports.c.
 * CONTRIBUTING.md walks through it.
 */
#ifndef CCO_TRANSPORT_TRANSPORT_H_
#define CCO_TRANSPORT_TRANSPORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "boot/topology.h"
#include "cco/cco.h"
#include "cco/cco_devcomm.h"
#include "mem/mem.h"
#include "platform/platform.h"

typedef struct cco_transport_ctx {
  int rank, nRanks;
  const cco_topology* topo;
  cco_platform* platform;
  cco_mem* mem; /* flat VA and windows; mem->lock guards them */
  cco_errsink* err;
  double timeout; /* seconds a blocking step may take (CCO_BOOTSTRAP_TIMEOUT) */
  /* Calls back into the communicator, with `owner` as first argument.
   * allgather: in place, this rank's block filled. inCollective: the caller
   * already runs inside a collective of the communicator (window
   * registration, creation); otherwise the call takes the communicator's
   * collective lock itself. fail: a failure found in the background (an
   * engine thread); the communicator records it as its async error, stops
   * device waits and tells the peers. Never call it holding mem->lock. */
  void* owner;
  ccoResult_t (*allgather)(void* owner, void* buf, size_t bytesPerRank, bool inCollective);
  void (*fail)(void* owner, ccoResult_t res);
  /* The communicator's async error (ccoResult_t, 0 while healthy): an
   * engine stopping on a failed communicator does not wait for peers. */
  const _Atomic int* failed;
} cco_transport_ctx;

/* What a device communicator asks of a transport. */
typedef struct {
  const ccoDevCommRequirements* reqs; /* checked, and equal on every rank */
  uint64_t id;                        /* the device communicator's id: equal on every rank */
  uint64_t resourceBase;   /* the resource window's winBase (LSA rank 0's copy) */
  uint64_t resourceOffset; /* where this transport's part of it starts */
} cco_devcomm_setup;

typedef struct cco_transport_ops {
  const char* name;
  /* Required. Collective: every rank starts every transport. *state is the
   * transport's own object, passed to every other op. */
  ccoResult_t (*start)(const cco_transport_ctx* ctx, void** state);
  /* Bytes of the resource window this transport needs (0: none). */
  size_t (*devcomm_bytes)(void* state, const ccoDevCommRequirements* reqs);
  /* Local transports are asked only while creation is going well;
   * collective ones on every rank whatever happened before, so their own
   * collectives stay matched (a later failure releases what they made). */
  bool devcomm_collective;
  ccoResult_t (*devcomm_create)(void* state, const cco_devcomm_setup* setup, ccoDevComm* dc,
                                void** devState);
  void (*devcomm_destroy)(void* state, void* devState);
  ccoResult_t (*window_added)(void* state, const cco_window_info* win);
  void (*window_removed)(void* state, const cco_window_info* win);
  void (*stop)(void* state);
  void (*destroy)(void* state); /* required: frees the state */
} cco_transport_ops;

#endif /* CCO_TRANSPORT_TRANSPORT_H_ */
