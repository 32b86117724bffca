/* GDA internals shared by the setup, the proxy loop and the staged path. */
#ifndef CCO_TRANSPORT_GDA_GDA_INTERNAL_H_
#define CCO_TRANSPORT_GDA_GDA_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cco/device/cco_gda_types.h"
#include "transport/gda/gda.h"
#include "transport/net/net.h"

/* Direct: the engine reaches window memory itself (host memory, or a
 * provider with FI_HMEM). Staged: window memory is GPU memory the engine
 * cannot reach; data goes through pinned bounce buffers at both ends and
 * the target's proxy copies it in (src/transport/gda/cco_gda_staged.c). */
typedef enum { CCO_GDA_PATH_DIRECT = 0, CCO_GDA_PATH_STAGED = 1 } cco_gda_path;

typedef struct cco_gda_ring cco_gda_ring;
typedef struct cco_gda_staged cco_gda_staged;

/* A window as the proxy sees it: where it is here, and (direct path) its
 * registration and every peer's key for the same window. */
typedef struct cco_gda_win {
  uint64_t offset, size; /* in the slot */
  char* local;
  cco_net_mr* mr;
  cco_net_rkey* rkeys; /* [nRanks] */
  uint8_t* has;        /* [nRanks]: the peer registered a window at this offset */
  struct cco_gda_win* next;
} cco_gda_win;

/* One descriptor taken from a ring, until it completes. */
typedef struct cco_gda_op {
  ccoGdaSlot d;
  cco_gda_ring* ring;
  uint64_t ticket;
  uint64_t issued;      /* bytes handed on (engine ops or staged chunks) */
  uint32_t outstanding; /* engine ops or chunks not complete */
  uint32_t localLeft;   /* staged put: chunks still being copied out */
  cco_gda_win* localWin;    /* direct: the window of the local side */
  cco_gda_win* remoteWin;   /* direct: the window of the remote side */
  bool active, done;
  bool signalSent; /* direct: the signal atomic is posted */
  bool allSent;    /* staged: every message of the op exists */
  bool counted;    /* the local counter was bumped */
} cco_gda_op;

struct cco_gda_ring {
  cco_gda_state* st;
  int context;
  uint32_t depth;
  ccoGdaSlot* slots;  /* host view */
  uint64_t* headHost; /* host view of the credit / completion word */
  uint64_t read;      /* next ticket to take */
  uint64_t scanned;   /* tickets up to here are known written */
  uint64_t bell;      /* tickets up to here are published by a doorbell */
  uint64_t head;      /* operations complete, in order */
  uint64_t published; /* the head as last stored for the device */
  cco_gda_op* ops;        /* [depth] */
};

/* The transport's state: its context and the proxy, started by the first
 * device communicator that needs GDA. */
struct cco_gda_transport {
  const cco_transport_ctx* ctx;
  cco_gda_proxy* proxy;
};

struct cco_gda_state {
  uint64_t id; /* the device communicator's id: equal on every rank */
  uint32_t connectionType;
  int nRings;
  cco_gda_ring* rings;
  uint32_t depth;
  uint32_t signalTotal; /* user signals + barrier inboxes */
  uint32_t counterCount;
  uint8_t* peers;        /* [nRanks] host copy of the endpoint table */
  uint64_t* signalsHost; /* host view */
  uint64_t* countersHost;
  uint64_t* values; /* direct: put-value sources [nRings][depth] */
  cco_net_mr* signalsMr;
  cco_net_mr* valuesMr;
  cco_net_rkey* signalRkeys; /* [nRanks] (direct) */
  /* Allocations, freed by gda_state_free. */
  void* slotsMem; /* hostmap */
  void* headsMem; /* hostmap */
  void* signalsMem;
  void* countersMem;
  void* tailsMem; /* device */
  void* contextsDev;
  void* peersDev;
  void* epochsDev;
  void* devState;
  struct cco_gda_state* next;
};

/* What the proxy knows of a peer's liveness (cco_gda_post_result). */
typedef struct cco_gda_peer_watch {
  uint64_t refusedSince; /* start (ns) of an unbroken run of CCO_NET_BUSY toward it; 0: none,
                          * UINT64_MAX: reported */
  uint64_t probeAt;      /* direct: when to probe it while it owes completions (ns); 0: not armed */
  uint32_t inFlight;     /* direct: engine ops posted to it and not complete */
  uint32_t pad;
} cco_gda_peer_watch;

struct cco_gda_proxy {
  const cco_transport_ctx* ctx;
  cco_net* net;
  cco_gda_path path;
  int rank, nRanks;
  char* slotBase; /* this rank's slot in its flat VA */
  size_t maxMsg;
  uint32_t trafficClass; /* gdaTrafficClass of the device communicator that opened the engine */
  pthread_t thread;
  bool threadStarted;
  atomic_bool stop;
  uint64_t spinMaxNs;          /* CCO_PROGRESS_SPIN_MAX_US */
  uint64_t busyNs;             /* CCO_PROGRESS_BUSY_US, 0 on the host platform */
  _Atomic uint64_t drainUntil; /* stop: the thread first completes what was posted, until then (ns) */
  pthread_mutex_t lock; /* states and windows, against the thread */
  cco_gda_state* states;
  /* Device communicators destroyed while the engine may still hold their
   * ops (a failed peer's writes that never complete): freed once the
   * thread is stopped (gda_setup.c state_destroy). */
  cco_gda_state* retired;
  cco_gda_win* wins;
  cco_gda_staged* staged;
  ccoResult_t failure; /* first failure found by the thread, reported outside the lock */
  bool everFailed;     /* an op was failed: its engine ops may still be in flight */
  struct cco_gda_peer_watch* watch; /* [nRanks] liveness of each peer (gda_proxy.c); NULL: none */
};

/* Context tags of engine operations (objects are 8-byte aligned). */
enum {
  CCO_GDA_TAG_DIRECT_DATA = 0, /* cco_gda_op */
  CCO_GDA_TAG_DIRECT_SIGNAL = 1, /* cco_gda_op */
  CCO_GDA_TAG_CHUNK_DATA = 2,  /* cco_gda_chunk: put data into the landing zone */
  CCO_GDA_TAG_CHUNK_MSG = 3,   /* cco_gda_chunk: the message into the inbox */
  CCO_GDA_TAG_COUNT = 4,       /* no object: inbox count / ack atomics */
  CCO_GDA_TAG_REPLY = 5,       /* cco_gda_chunk: a get's data back to its initiator */
};
#define CCO_GDA_TAG(ptr, tag) ((void*)((uintptr_t)(ptr) | (uintptr_t)(tag)))
#define CCO_GDA_TAG_OF(ctx) ((int)((uintptr_t)(ctx) & 7u))
#define CCO_GDA_PTR_OF(ctx) ((void*)((uintptr_t)(ctx) & ~(uintptr_t)7u))

/* gda_proxy.c */
ccoResult_t cco_gda_proxy_start(cco_gda_proxy* px);
void cco_gda_proxy_fail(cco_gda_proxy* px, ccoResult_t res);
void cco_gda_op_complete(cco_gda_proxy* px, cco_gda_op* op);
void cco_gda_apply_signal(cco_gda_proxy* px, uint64_t stateId, uint32_t index, uint64_t value);
cco_gda_win* cco_gda_find_win(cco_gda_proxy* px, uint64_t offset, uint64_t bytes);
/* Every post toward a peer passes its result through here (returned as is):
 * a peer that refuses every post for long is taken for dead. */
ccoResult_t cco_gda_post_result(cco_gda_proxy* px, int peer, ccoResult_t res);
/* Probes a peer that owes us something (owed) and has been silent for a
 * while: an atomic add of 0 to the word at (rkey, off) there, which fails
 * toward a dead peer. *probeAt is the peer's timer (0: disarmed); *now is
 * read once per sweep (0: not yet). */
void cco_gda_probe_if_silent(cco_gda_proxy* px, int peer, bool owed, uint64_t* probeAt, cco_net_rkey rkey,
                         uint64_t off, uint64_t* now);

/* cco_gda_staged.c */
ccoResult_t cco_gda_staged_create(cco_gda_proxy* px);
void cco_gda_staged_destroy(cco_gda_proxy* px);
/* [nRanks] keys of every rank's bounce region (this rank's filled by create). */
cco_net_rkey* cco_gda_staged_rkeys(cco_gda_proxy* px);
/* Starts or continues an op (called in ticket order each pass). */
void cco_gda_staged_progress_op(cco_gda_proxy* px, cco_gda_op* op);
/* Completions of tagged engine operations of the staged path. */
void cco_gda_staged_on_completion(cco_gda_proxy* px, int tag, void* obj, ccoResult_t res, int peer);
/* A peer's notified message write landed in our inbox (its data). */
void cco_gda_staged_on_notify(cco_gda_proxy* px, uint64_t data);
/* Everything else: copies done, acks, inboxes, posts waiting for room. */
int cco_gda_staged_poll(cco_gda_proxy* px);
/* Nothing of ours in flight and nothing of the peers' left to serve. */
bool cco_gda_staged_idle(cco_gda_proxy* px);

#endif /* CCO_TRANSPORT_GDA_GDA_INTERNAL_H_ */
