/*
 * Network engine: the internal interface the GDA proxy drives. One engine
 * instance is one endpoint (fabric, domain, endpoint, completion queue,
 * address vector) owned by one proxy thread; no call is thread-safe against
 * another call on the same instance, except cco_net_describe.
 *
 * Operations are one-sided and asynchronous: write, read, atomic add and
 * fetch-add post and return; each posted operation yields exactly one
 * completion (success or error) through cco_net_progress, carrying the
 * caller's context. A write's completion means its data is visible at the
 * target (delivery complete), so a signal posted after a write's completion
 * can never overtake it.
 *
 * Target-side progress: providers with manual progress (tcp;ofi_rxm) move
 * incoming data only while the target calls cco_net_progress, so the owner
 * calls it continuously, also when it has nothing of its own in flight.
 */
#ifndef CCO_TRANSPORT_NET_NET_H_
#define CCO_TRANSPORT_NET_NET_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco.h"

/* Largest endpoint address the engine hands out; addresses are exchanged as
 * fixed-size blobs of this many bytes (allgather). */
#define CCO_NET_ADDR_MAX 128

typedef struct cco_net cco_net;
typedef struct cco_net_mr cco_net_mr;

typedef struct {
  const char* provider;  /* "tcp;ofi_rxm" (NULL or "" means that), "verbs;ofi_rxm", "efa", ... */
  const char* domains;   /* comma list of domain names to accept; NULL or "" accepts any */
  int trafficClass;      /* -1: provider default; else a DSCP/traffic class value */
  int serviceLevel;      /* -1: provider default (IB service level, mapped where possible) */
  int needHmem;          /* 1: the memory to register is GPU memory (FI_HMEM required) */
  int hmemDevice;        /* with needHmem: the CUDA device ordinal that memory lives on */
} cco_net_config;

/* What a peer needs to address a registration: remote address of byte
 * `off` is base + off (base is the registered virtual address for
 * FI_MR_VIRT_ADDR providers, 0 otherwise), with key. */
typedef struct {
  uint64_t base;
  uint64_t key;
} cco_net_rkey;

typedef struct {
  void* context;      /* the caller's context of the completed operation; NULL for a notification */
  ccoResult_t result; /* ccoSuccess, or ccoNetError / ccoRemoteError with a logged detail */
  int peer;           /* the peer of the operation; -1 for a notification */
  /* 1: not an operation of ours but a peer's cco_net_write_notify that
   * arrived here, its bytes placed; data is the value the peer gave it. */
  int notify;
  uint64_t data;
} cco_net_completion;

typedef enum {
  CCO_NET_ACCESS_LOCAL = 1,
  CCO_NET_ACCESS_REMOTE = 2,
  /* Not an access right: the range is GPU memory of config.hmemDevice, which
   * only an engine opened with needHmem can register (FI_HMEM_CUDA). */
  CCO_NET_MEMORY_CUDA = 4,
} cco_net_access;

/* Fills config from the environment (CCO_NET_PROVIDER, CCO_NET_DEVICES,
 * CCO_NET_TC, CCO_NET_SL; needHmem = 0, hmemDevice = 0). The strings belong to the env
 * table and live as long as the process. */
void cco_net_config_from_env(cco_net_config* config);

/* Opens an endpoint. Fails with ccoUnsupported (and a detail naming what
 * was missing: libfabric itself, the provider, a capability) when the
 * machine cannot do it. */
ccoResult_t cco_net_open(const cco_net_config* config, cco_net** net);
void cco_net_close(cco_net* net);

/* One line naming provider, fabric, domain and the mr_mode bits in use. */
const char* cco_net_describe(const cco_net* net);

/* This endpoint's address, padded with zeros to CCO_NET_ADDR_MAX bytes. */
ccoResult_t cco_net_local_addr(cco_net* net, uint8_t addr[CCO_NET_ADDR_MAX]);

/* Inserts nPeers addresses (CCO_NET_ADDR_MAX bytes apart); peer i of every
 * later call is addrs[i]. A NULL-filled (all zero) address marks a peer
 * without an endpoint: operations to it fail with ccoInvalidArgument. */
ccoResult_t cco_net_connect(cco_net* net, int nPeers, const uint8_t* addrs);

/* Registers [ptr, ptr+size) for `access` (a mask of cco_net_access, with
 * CCO_NET_MEMORY_CUDA for GPU memory; host memory otherwise);
 * fills rkey for peers when CCO_NET_ACCESS_REMOTE is set. Handles every
 * mr_mode: local registration, provider keys, virtual addresses or offsets,
 * endpoint binding. */
ccoResult_t cco_net_mr_reg(cco_net* net, void* ptr, size_t size, int access, cco_net_mr** mr,
                           cco_net_rkey* rkey);
void cco_net_mr_dereg(cco_net* net, cco_net_mr* mr);

/* Largest size of one write/read; callers split larger transfers. */
size_t cco_net_max_msg(const cco_net* net);

/* Internal result of the posting calls (never returned by the public API):
 * the provider's queues are full; call cco_net_progress and post again. */
#define CCO_NET_BUSY ((ccoResult_t)100)

/* Posts; CCO_NET_BUSY (not an error) means nothing was posted. src/dst lie
 * inside `mr`. */
ccoResult_t cco_net_write(cco_net* net, int peer, const void* src, cco_net_mr* mr, size_t size,
                          cco_net_rkey rkey, uint64_t remoteOff, void* context);
ccoResult_t cco_net_read(cco_net* net, int peer, void* dst, cco_net_mr* mr, size_t size,
                         cco_net_rkey rkey, uint64_t remoteOff, void* context);
/* Whether cco_net_write_notify can be posted: the provider carries 8 bytes
 * of remote completion data with a write (FI_REMOTE_CQ_DATA), and
 * CCO_NET_NOTIFY is not 0. */
int cco_net_can_notify(const cco_net* net);
/* A write whose target learns of it: the target's cco_net_progress reports
 * a completion with notify = 1 and data = `data` once the bytes are placed
 * (at most cco_net_max_msg bytes; 0 is allowed). The initiator gets its
 * usual completion. ccoUnsupported where cco_net_can_notify is 0. */
ccoResult_t cco_net_write_notify(cco_net* net, int peer, const void* src, cco_net_mr* mr, size_t size,
                                 cco_net_rkey rkey, uint64_t remoteOff, uint64_t data, void* context);
/* 64-bit unsigned atomic add at the target (remoteOff 8-byte aligned). */
ccoResult_t cco_net_atomic_add(cco_net* net, int peer, uint64_t value, cco_net_rkey rkey,
                               uint64_t remoteOff, void* context);
/* Fetch-add: *result (inside resultMr) receives the old value. */
ccoResult_t cco_net_fetch_add(cco_net* net, int peer, uint64_t value, uint64_t* result,
                              cco_net_mr* resultMr, cco_net_rkey rkey, uint64_t remoteOff,
                              void* context);

/* Progresses the endpoint and returns up to max completions in out. */
ccoResult_t cco_net_progress(cco_net* net, cco_net_completion* out, int max, int* count);

#endif /* CCO_TRANSPORT_NET_NET_H_ */
