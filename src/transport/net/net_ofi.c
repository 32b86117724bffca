/*
 * The network engine (net.h) on libfabric FI_EP_RDM endpoints. docs/net.md
 * describes the design; the comments here say why each step is the way it is.
 *
 * One engine = one fabric, domain, completion queue, address vector (table)
 * and endpoint, owned by one thread. Every posted operation carries an op
 * record from a fixed pool; its first member is the provider's scratch space
 * (FI_CONTEXT/FI_CONTEXT2 modes), the rest maps the completion back to the
 * caller's context and peer. An empty pool is backpressure (CCO_NET_BUSY),
 * exactly like a full provider queue (-FI_EAGAIN).
 *
 * Release: cco_net_close is the only place libfabric objects are closed, in
 * reverse order of creation; cco_net_open calls it on every failure, so a
 * half-built engine unwinds through the same code as a finished one.
 */
#include "transport/net/net.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/env.h"
#include "base/error.h"
#include "base/log.h"

void cco_net_config_from_env(cco_net_config* config) {
  config->provider = cco_env_str(CCO_ENV_ID_CCO_NET_PROVIDER);
  config->domains = cco_env_str(CCO_ENV_ID_CCO_NET_DEVICES);
  config->trafficClass = (int)cco_env_int(CCO_ENV_ID_CCO_NET_TC);
  config->serviceLevel = (int)cco_env_int(CCO_ENV_ID_CCO_NET_SL);
  config->needHmem = 0;
  config->hmemDevice = 0;
}

#ifndef CCO_HAVE_LIBFABRIC_HEADERS

/* Built without <rdma/fabric.h>: the engine cannot exist, and says why. */
ccoResult_t cco_net_open(const cco_net_config* config, cco_net** net) {
  return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET, "built without libfabric headers");
}
void cco_net_close(cco_net* net) {}
const char* cco_net_describe(const cco_net* net) { return "no network engine (built without libfabric headers)"; }
ccoResult_t cco_net_local_addr(cco_net* net, uint8_t addr[CCO_NET_ADDR_MAX]) { return ccoInvalidUsage; }
ccoResult_t cco_net_connect(cco_net* net, int nPeers, const uint8_t* addrs) { return ccoInvalidUsage; }
ccoResult_t cco_net_mr_reg(cco_net* net, void* ptr, size_t size, int access, cco_net_mr** mr,
                           cco_net_rkey* rkey) {
  return ccoInvalidUsage;
}
void cco_net_mr_dereg(cco_net* net, cco_net_mr* mr) {}
size_t cco_net_max_msg(const cco_net* net) { return 0; }
ccoResult_t cco_net_write(cco_net* net, int peer, const void* src, cco_net_mr* mr, size_t size,
                          cco_net_rkey rkey, uint64_t remoteOff, void* context) {
  return ccoInvalidUsage;
}
ccoResult_t cco_net_read(cco_net* net, int peer, void* dst, cco_net_mr* mr, size_t size,
                         cco_net_rkey rkey, uint64_t remoteOff, void* context) {
  return ccoInvalidUsage;
}
int cco_net_can_notify(const cco_net* net) { return 0; }
ccoResult_t cco_net_write_notify(cco_net* net, int peer, const void* src, cco_net_mr* mr, size_t size,
                                 cco_net_rkey rkey, uint64_t remoteOff, uint64_t data, void* context) {
  return ccoInvalidUsage;
}
ccoResult_t cco_net_atomic_add(cco_net* net, int peer, uint64_t value, cco_net_rkey rkey,
                               uint64_t remoteOff, void* context) {
  return ccoInvalidUsage;
}
ccoResult_t cco_net_fetch_add(cco_net* net, int peer, uint64_t value, uint64_t* result,
                              cco_net_mr* resultMr, cco_net_rkey rkey, uint64_t remoteOff,
                              void* context) {
  return ccoInvalidUsage;
}
ccoResult_t cco_net_progress(cco_net* net, cco_net_completion* out, int max, int* count) {
  return ccoInvalidUsage;
}

#else /* CCO_HAVE_LIBFABRIC_HEADERS */

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "base/tsan.h"
#include "transport/net/ofi_loader.h"

#define DEFAULT_PROVIDER "tcp;ofi_rxm"
/* mr_mode bits the engine knows how to honour (FI_MR_RAW is not one). */
#define MR_MODES_HANDLED \
  (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)
#define CQ_BATCH 32

/* The engine's data calls read and write window memory for the peers (a
 * write's source, the data and signal words peers put here): TSan builds
 * leave their accesses unchecked (base/tsan.h says why). */
#define NET_DATA_BEGIN() CCO_TSAN_PEER_ACCESS_BEGIN()
#define NET_DATA_END() CCO_TSAN_PEER_ACCESS_END()

typedef struct cco_net_op {
  struct fi_context2 fiContext; /* provider scratch while in flight: must stay first */
  void* context;                /* the caller's */
  int peer;
  uint64_t operand; /* atomic source value: lives here until the completion */
  struct cco_net_op* nextFree;
} cco_net_op;

struct cco_net_mr {
  struct fid_mr* mr;
  void* desc; /* fi_mr_desc: passed with every local buffer under FI_MR_LOCAL */
  uintptr_t base;
  size_t size;
  cco_net_mr* next; /* the engine's list, so close releases forgotten ones */
};

struct cco_net {
  const cco_ofi_api* api;
  struct fi_info* info;
  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_cq* cq;
  struct fid_av* av;
  struct fid_ep* ep;
  uint64_t mrMode;
  /* FI_DELIVERY_COMPLETE (writes and atomics) or FI_FENCE (atomics only),
   * see pick_info. */
  uint64_t postFlags;
  uint64_t nextKey;   /* requested keys when the provider does not pick them */
  int hmemDevice;     /* CUDA device of FI_HMEM registrations */
  uint32_t tclassAsked; /* the traffic class in the hints it was opened with; 0: none */
  size_t maxMsg;
  int canNotify; /* cco_net_can_notify */
  cco_net_op* ops; /* the pool */
  cco_net_op* freeOps;
  cco_net_mr* opsMr; /* the pool registered, for atomic operands under FI_MR_LOCAL */
  cco_net_mr* mrs;
  fi_addr_t* peers; /* FI_ADDR_NOTAVAIL: peer without an endpoint */
  uint8_t* peerFailed; /* a failure of this peer was logged already: log once */
  int nPeers, connected;
  uint8_t addr[CCO_NET_ADDR_MAX];
  char describe[384];
};

/* Errors that mean the peer (or the connection to it) is gone. */
static int peer_gone(int err) {
  switch (err) {
    case FI_ECONNRESET: case FI_ECONNREFUSED: case FI_ECONNABORTED: case FI_ENOTCONN:
    case FI_ESHUTDOWN: case FI_EHOSTUNREACH: case FI_ETIMEDOUT: case EPIPE:
      return 1;
    default:
      return 0;
  }
}

static const char* fi_err(const cco_net* net, int rc) {
  return net->api->strerror(rc < 0 ? -rc : rc);
}

/* ---- open ------------------------------------------------------------------ */

/* config->trafficClass as libfabric takes it: below 64 a DSCP code point,
 * from 0x100 on one of libfabric's own classes (FI_TC_*). */
static uint32_t tclass_hint(int trafficClass) {
  return trafficClass < 64 ? fi_tc_dscp_set((uint8_t)trafficClass) : (uint32_t)trafficClass;
}

/* The request to fi_getinfo. `step` says how much of it to include (the
 * diagnosis below walks the steps to name what a provider lacks): 0 the
 * provider and FI_EP_RDM, 1 +FI_RMA, 2 +FI_ATOMIC, 3 +FI_HMEM (when asked),
 * 4 +the mr modes cco handles and the threading model. On top of that, the
 * traffic class and the ordering guarantee (delivery complete or fence). */
typedef enum { ORDER_NONE, ORDER_DELIVERY, ORDER_FENCE } order_kind;

static struct fi_info* make_hints(const cco_net* net, const cco_net_config* config, int step,
                                  int withTc, order_kind order) {
  struct fi_info* hints = net->api->dupinfo(NULL); /* == fi_allocinfo() */
  if (!hints) return NULL;
  const char* prov = config->provider && config->provider[0] ? config->provider : DEFAULT_PROVIDER;
  hints->fabric_attr->prov_name = strdup(prov); /* freed by fi_freeinfo */
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = FI_CONTEXT | FI_CONTEXT2; /* every op carries a fi_context2 */
  if (step >= 1) hints->caps |= FI_RMA;
  if (step >= 2) hints->caps |= FI_ATOMIC;
  if (step >= 3 && config->needHmem) hints->caps |= FI_HMEM;
  if (step >= 4) {
    hints->domain_attr->mr_mode = MR_MODES_HANDLED | (config->needHmem ? FI_MR_HMEM : 0);
    /* One owner thread: the provider can skip its locks. */
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
  }
  if (withTc && config->trafficClass >= 0) hints->tx_attr->tclass = tclass_hint(config->trafficClass);
  if (order == ORDER_DELIVERY) hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  if (order == ORDER_FENCE) hints->caps |= FI_FENCE;
  return hints;
}

static int domain_listed(const char* list, const char* name) {
  if (!list || !list[0]) return 1;
  size_t len = strlen(name);
  for (const char* p = list; *p;) {
    const char* end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && !strncmp(p, name, n)) return 1;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

/* Finds the info to open. Delivery complete is preferred: a write's completion
 * then means the data is placed at the target. tcp;ofi_rxm honours it (rxm
 * hands the flag to the tcp core, which asks the target for an ack once the
 * data is written). Providers without it get FI_FENCE on every atomic
 * instead: a fenced operation waits until all earlier operations to that peer
 * completed and sees their results (fi_endpoint(3)), which is the ordering
 * the signal-after-data rule needs. A provider with neither is refused. A
 * traffic class the provider refuses is dropped with a warning. */
static ccoResult_t pick_info(cco_net* net, const cco_net_config* config) {
  static const struct { int withTc; order_kind order; } tries[] = {
      {1, ORDER_DELIVERY}, {0, ORDER_DELIVERY}, {1, ORDER_FENCE}, {0, ORDER_FENCE}};
  static const char* stepNames[] = {"the provider itself (with FI_EP_RDM)", "FI_RMA", "FI_ATOMIC",
                                    "FI_HMEM", "the memory-registration modes cco handles"};
  const cco_ofi_api* api = net->api;
  const char* prov = config->provider && config->provider[0] ? config->provider : DEFAULT_PROVIDER;
  uint32_t version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  struct fi_info* list = NULL;
  int rc = -FI_ENODATA;
  size_t t;
  for (t = 0; t < sizeof(tries) / sizeof(tries[0]); t++) {
    if (tries[t].withTc && config->trafficClass < 0) continue; /* same as the next try */
    struct fi_info* hints = make_hints(net, config, 4, tries[t].withTc, tries[t].order);
    if (!hints) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_NET, "no memory for fi_info hints");
    rc = api->getinfo(version, NULL, NULL, 0, hints, &list);
    api->freeinfo(hints);
    if (rc != -FI_ENODATA) break;
  }
  if (rc != 0 && rc != -FI_ENODATA)
    return cco_error(NULL, ccoNetError, CCO_SUBSYS_NET, "fi_getinfo(%s): %s", prov, fi_err(net, rc));
  if (rc != 0) { /* name the first thing the provider lacks */
    int step;
    for (step = 0; step <= 4; step++) {
      struct fi_info* hints = make_hints(net, config, step, 0, ORDER_NONE);
      if (!hints) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_NET, "no memory for fi_info hints");
      struct fi_info* probe = NULL;
      int prc = api->getinfo(version, NULL, NULL, 0, hints, &probe);
      api->freeinfo(hints);
      if (probe) api->freeinfo(probe);
      if (prc) break;
    }
    if (step > 4)
      return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET,
                       "libfabric provider '%s' offers neither FI_DELIVERY_COMPLETE nor FI_FENCE: "
                       "writes could be overtaken by their signals", prov);
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET,
                     "libfabric provider '%s' is not usable here: it lacks %s", prov, stepNames[step]);
  }
  /* The domain filter, and no FI_MR_RAW (keys longer than 64 bits). */
  char seen[160] = "";
  for (struct fi_info* i = list; i; i = i->next) {
    const char* dom = i->domain_attr->name ? i->domain_attr->name : "";
    if (!strstr(seen, dom) && strlen(seen) + strlen(dom) + 2 < sizeof(seen)) {
      if (seen[0]) strcat(seen, ",");
      strcat(seen, dom);
    }
    if (!domain_listed(config->domains, dom) || (i->domain_attr->mr_mode & FI_MR_RAW)) continue;
    net->info = api->dupinfo(i); /* NULL (no memory) reads as "none matched" below */
    break;
  }
  api->freeinfo(list);
  if (!net->info)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET,
                     "no domain of libfabric provider '%s' matches '%s' (it offers %s; FI_MR_RAW "
                     "domains are not supported)", prov, config->domains ? config->domains : "", seen);
  net->postFlags = tries[t].order == ORDER_DELIVERY ? FI_DELIVERY_COMPLETE : FI_FENCE;
  net->tclassAsked = tries[t].withTc ? tclass_hint(config->trafficClass) : 0;
  if (tries[t].order != ORDER_DELIVERY)
    CCO_INFO(NET, "provider %s lacks FI_DELIVERY_COMPLETE: atomics are fenced instead", prov);
  if (config->trafficClass >= 0 && !tries[t].withTc)
    CCO_WARN(NET, "provider %s refuses traffic class %d: using its default", prov, config->trafficClass);
  else if (config->trafficClass >= 0 && net->info && !net->info->tx_attr->tclass)
    /* Accepted as a hint but not reported back (tcp;ofi_rxm 1.17 does this):
     * the provider may not mark its traffic at all. */
    CCO_WARN(NET, "provider %s accepted traffic class %d but reports none in use", prov, config->trafficClass);
  return ccoSuccess;
}

#define OFI_TRY(call, what)                                                                   \
  do {                                                                                        \
    int rc_ = (call);                                                                         \
    if (rc_) {                                                                                \
      res = cco_error(NULL, ccoNetError, CCO_SUBSYS_NET, "%s on %s: %s", what,                \
                      net->info->fabric_attr->prov_name, fi_err(net, rc_));                   \
      goto fail;                                                                              \
    }                                                                                         \
  } while (0)

ccoResult_t cco_net_open(const cco_net_config* config, cco_net** out) {
  static atomic_int slWarned;
  if (!config || !out) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "cco_net_open: NULL argument");
  const cco_ofi_api* api;
  CCO_CHECK(cco_ofi_load(&api));
  cco_net* net = calloc(1, sizeof(*net));
  if (!net) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_NET, "no memory for the network engine");
  net->api = api;
  ccoResult_t res = pick_info(net, config);
  if (res != ccoSuccess) goto fail;
  if (config->serviceLevel >= 0 && !atomic_exchange(&slWarned, 1))
    CCO_WARN(NET, "service level %d ignored: libfabric %u.%u has no service-level attribute",
             config->serviceLevel, FI_MAJOR_VERSION, FI_MINOR_VERSION);

  struct fi_info* info = net->info;
  net->mrMode = info->domain_attr->mr_mode;
  net->hmemDevice = config->hmemDevice;
  OFI_TRY(api->fabric(info->fabric_attr, &net->fabric, NULL), "fi_fabric");
  OFI_TRY(fi_domain(net->fabric, info, &net->domain, NULL), "fi_domain");
  /* One CQ for everything: fi_cq_read on it is also what drives manual
   * progress, on both the initiator and the target side. */
  /* The data format: a peer's write_notify arrives as an entry with its data. */
  struct fi_cq_attr cqAttr = {.format = FI_CQ_FORMAT_DATA, .size = 2 * info->tx_attr->size};
  OFI_TRY(fi_cq_open(net->domain, &cqAttr, &net->cq, NULL), "fi_cq_open");
  struct fi_av_attr avAttr = {.type = FI_AV_TABLE};
  OFI_TRY(fi_av_open(net->domain, &avAttr, &net->av, NULL), "fi_av_open");
  OFI_TRY(fi_endpoint(net->domain, info, &net->ep, NULL), "fi_endpoint");
  OFI_TRY(fi_ep_bind(net->ep, &net->av->fid, 0), "fi_ep_bind(av)");
  OFI_TRY(fi_ep_bind(net->ep, &net->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  OFI_TRY(fi_enable(net->ep), "fi_enable");
  size_t addrLen = sizeof(net->addr);
  OFI_TRY(fi_getname(&net->ep->fid, net->addr, &addrLen), "fi_getname");

  size_t count = 0;
  if (fi_atomicvalid(net->ep, FI_UINT64, FI_SUM, &count) || !count ||
      fi_fetch_atomicvalid(net->ep, FI_UINT64, FI_SUM, &count) || !count) {
    res = cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET,
                    "libfabric provider '%s' cannot add 64-bit integers atomically (FI_SUM on FI_UINT64)",
                    info->fabric_attr->prov_name);
    goto fail;
  }

  /* As many op records as the provider queues transmits: more would only
   * turn into -FI_EAGAIN anyway. */
  size_t nOps = info->tx_attr->size < 64 ? 64 : info->tx_attr->size > 65536 ? 65536 : info->tx_attr->size;
  net->ops = calloc(nOps, sizeof(*net->ops));
  if (!net->ops) {
    res = cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_NET, "no memory for %zu op records", nOps);
    goto fail;
  }
  for (size_t i = 0; i < nOps; i++) net->ops[i].nextFree = i + 1 < nOps ? &net->ops[i + 1] : NULL;
  net->freeOps = &net->ops[0];
  if (net->mrMode & FI_MR_LOCAL) {
    cco_net_rkey unused;
    res = cco_net_mr_reg(net, net->ops, nOps * sizeof(*net->ops), CCO_NET_ACCESS_LOCAL, &net->opsMr, &unused);
    if (res != ccoSuccess) goto fail;
  }

  size_t maxMsg = info->ep_attr->max_msg_size;
  int64_t cap = cco_env_int(CCO_ENV_ID_CCO_NET_MAX_MSG);
  net->maxMsg = cap > 0 && (uint64_t)cap < maxMsg ? (size_t)cap : maxMsg;
  net->canNotify = info->domain_attr->cq_data_size >= sizeof(uint64_t) && cco_env_bool(CCO_ENV_ID_CCO_NET_NOTIFY);

  char modes[128] = "";
  static const struct { uint64_t bit; const char* name; } bits[] = {
      {FI_MR_LOCAL, "local"}, {FI_MR_VIRT_ADDR, "virt_addr"}, {FI_MR_ALLOCATED, "allocated"},
      {FI_MR_PROV_KEY, "prov_key"}, {FI_MR_ENDPOINT, "endpoint"}, {FI_MR_HMEM, "hmem"}};
  for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
    if (net->mrMode & bits[i].bit) {
      if (modes[0]) strcat(modes, "|");
      strcat(modes, bits[i].name);
    }
  snprintf(net->describe, sizeof(net->describe),
           "libfabric %u.%u provider %s fabric %s domain %s mr_mode %s writes %s%s max_msg %zu tclass "
           "asked 0x%x reported 0x%x",
           FI_MAJOR(api->version()), FI_MINOR(api->version()), info->fabric_attr->prov_name,
           info->fabric_attr->name, info->domain_attr->name, modes[0] ? modes : "none",
           (net->postFlags & FI_DELIVERY_COMPLETE) ? "delivery-complete" : "transmit-complete, atomics fenced",
           net->canNotify ? " notify" : "", net->maxMsg, net->tclassAsked, info->tx_attr->tclass);
  CCO_INFO(NET, "network engine: %s", net->describe);
  *out = net;
  return ccoSuccess;

fail:
  cco_net_close(net);
  return res;
}

static void close_fid(cco_net* net, struct fid* fid, const char* what) {
  int rc = fi_close(fid);
  if (rc) CCO_WARN(NET, "closing the %s failed: %s", what, fi_err(net, rc));
}

void cco_net_close(cco_net* net) {
  if (!net) return;
  if (net->mrs && net->mrs != net->opsMr) CCO_WARN(NET, "closing the network engine with registrations left");
  while (net->mrs) cco_net_mr_dereg(net, net->mrs);
  /* Endpoint before what it is bound to; the domain after all its children. */
  if (net->ep) close_fid(net, &net->ep->fid, "endpoint");
  if (net->av) close_fid(net, &net->av->fid, "address vector");
  if (net->cq) close_fid(net, &net->cq->fid, "completion queue");
  if (net->domain) close_fid(net, &net->domain->fid, "domain");
  if (net->fabric) close_fid(net, &net->fabric->fid, "fabric");
  if (net->info) net->api->freeinfo(net->info);
  free(net->ops);
  free(net->peers);
  free(net->peerFailed);
  free(net);
}

const char* cco_net_describe(const cco_net* net) { return net ? net->describe : "(null)"; }

size_t cco_net_max_msg(const cco_net* net) { return net ? net->maxMsg : 0; }

ccoResult_t cco_net_local_addr(cco_net* net, uint8_t addr[CCO_NET_ADDR_MAX]) {
  if (!net || !addr) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "cco_net_local_addr: NULL argument");
  memcpy(addr, net->addr, CCO_NET_ADDR_MAX);
  return ccoSuccess;
}

ccoResult_t cco_net_connect(cco_net* net, int nPeers, const uint8_t* addrs) {
  static const uint8_t zero[CCO_NET_ADDR_MAX];
  if (!net || nPeers < 0 || (nPeers && !addrs))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "cco_net_connect: bad arguments");
  if (net->connected)
    return cco_error(NULL, ccoInvalidUsage, CCO_SUBSYS_NET, "cco_net_connect: already connected");
  fi_addr_t* peers = malloc((size_t)(nPeers ? nPeers : 1) * sizeof(*peers));
  uint8_t* failed = calloc((size_t)(nPeers ? nPeers : 1), 1);
  if (!peers || !failed) {
    free(peers);
    free(failed);
    return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_NET, "no memory for %d peers", nPeers);
  }
  for (int i = 0; i < nPeers; i++) {
    const uint8_t* a = addrs + (size_t)i * CCO_NET_ADDR_MAX;
    peers[i] = FI_ADDR_NOTAVAIL;
    if (!memcmp(a, zero, CCO_NET_ADDR_MAX)) continue; /* a peer without an endpoint */
    /* rxm connects lazily, on the first operation: inserting is local. */
    int rc = fi_av_insert(net->av, a, 1, &peers[i], 0, NULL);
    if (rc != 1) {
      free(peers);
      free(failed);
      return cco_error(NULL, ccoNetError, CCO_SUBSYS_NET, "fi_av_insert of peer %d failed: %s", i,
                       rc < 0 ? fi_err(net, rc) : "address rejected");
    }
  }
  net->peers = peers;
  net->peerFailed = failed;
  net->nPeers = nPeers;
  net->connected = 1;
  return ccoSuccess;
}

/* ---- memory registration ----------------------------------------------------- */

ccoResult_t cco_net_mr_reg(cco_net* net, void* ptr, size_t size, int access, cco_net_mr** out,
                           cco_net_rkey* rkey) {
  if (!net || !ptr || !size || !out || !rkey || !(access & (CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE)))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "cco_net_mr_reg: bad arguments");
  bool cuda = (access & CCO_NET_MEMORY_CUDA) != 0;
  if (cuda && !(net->info->caps & FI_HMEM))
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET,
                     "cco_net_mr_reg: GPU memory at %p needs an engine opened for it (FI_HMEM)", ptr);
  cco_net_mr* m = calloc(1, sizeof(*m));
  if (!m) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_NET, "no memory for a registration");
  uint64_t acc = 0;
  if (access & CCO_NET_ACCESS_LOCAL) acc |= FI_READ | FI_WRITE;
  if (access & CCO_NET_ACCESS_REMOTE) acc |= FI_REMOTE_READ | FI_REMOTE_WRITE;
  struct iovec iov = {ptr, size};
  struct fi_mr_attr attr = {
      .mr_iov = &iov,
      .iov_count = 1,
      .access = acc,
      /* FI_MR_PROV_KEY: the provider picks and we read it back; otherwise the
       * key is ours to choose and must be unique in the domain. */
      .requested_key = (net->mrMode & FI_MR_PROV_KEY) ? 0 : net->nextKey++,
      /* An FI_HMEM engine still registers host memory (its op pool, the
       * signal and value words) as system memory. */
      .iface = cuda ? FI_HMEM_CUDA : FI_HMEM_SYSTEM,
  };
  if (cuda) attr.device.cuda = net->hmemDevice;
  ccoResult_t res = ccoSuccess;
  int rc = fi_mr_regattr(net->domain, &attr, 0, &m->mr);
  if (rc) {
    free(m);
    return cco_error(NULL, ccoNetError, CCO_SUBSYS_NET, "fi_mr_regattr of %zu bytes at %p: %s", size, ptr,
                     fi_err(net, rc));
  }
  /* FI_MR_ENDPOINT: a registration is usable only once bound to the endpoint. */
  if (net->mrMode & FI_MR_ENDPOINT) {
    rc = fi_mr_bind(m->mr, &net->ep->fid, 0);
    if (!rc) rc = fi_mr_enable(m->mr);
    if (rc) {
      res = cco_error(NULL, ccoNetError, CCO_SUBSYS_NET, "binding a registration to the endpoint: %s",
                      fi_err(net, rc));
      close_fid(net, &m->mr->fid, "registration");
      free(m);
      return res;
    }
  }
  m->desc = fi_mr_desc(m->mr);
  m->base = (uintptr_t)ptr;
  m->size = size;
  m->next = net->mrs;
  net->mrs = m;
  /* FI_MR_VIRT_ADDR: peers address the target by its virtual address;
   * otherwise by the offset into the registration. */
  rkey->base = (net->mrMode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ptr : 0;
  rkey->key = fi_mr_key(m->mr);
  *out = m;
  return ccoSuccess;
}

void cco_net_mr_dereg(cco_net* net, cco_net_mr* mr) {
  if (!net || !mr) return;
  for (cco_net_mr** p = &net->mrs; *p; p = &(*p)->next)
    if (*p == mr) {
      *p = mr->next;
      break;
    }
  if (mr == net->opsMr) net->opsMr = NULL;
  close_fid(net, &mr->mr->fid, "registration");
  free(mr);
}

/* ---- operations ---------------------------------------------------------------- */

/* Checks the peer and takes an op record; CCO_NET_BUSY when none is left. */
static ccoResult_t op_begin(cco_net* net, int peer, void* context, fi_addr_t* addr, cco_net_op** op) {
  *op = NULL; /* on every path: callers read them only on success, but gcc -O3 cannot tell */
  *addr = FI_ADDR_NOTAVAIL;
  if (peer < 0 || peer >= net->nPeers)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "peer %d out of range (%d peers)", peer, net->nPeers);
  if (net->peers[peer] == FI_ADDR_NOTAVAIL)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "peer %d has no network endpoint", peer);
  if (!net->freeOps) return CCO_NET_BUSY;
  *op = net->freeOps;
  net->freeOps = (*op)->nextFree;
  (*op)->context = context;
  (*op)->peer = peer;
  *addr = net->peers[peer];
  return ccoSuccess;
}

static void op_free(cco_net* net, cco_net_op* op) {
  op->nextFree = net->freeOps;
  net->freeOps = op;
}

/* What a post returned: posted, queue full (CCO_NET_BUSY), or failed. */
static ccoResult_t op_posted(cco_net* net, cco_net_op* op, ssize_t rc, const char* what) {
  if (rc == 0) return ccoSuccess;
  int peer = op->peer;
  op_free(net, op);
  if (rc == -FI_EAGAIN) return CCO_NET_BUSY;
  return cco_error(NULL, peer_gone((int)-rc) ? ccoRemoteError : ccoNetError, CCO_SUBSYS_NET,
                   "%s to peer %d failed: %s", what, peer, fi_err(net, (int)rc));
}

/* Local buffer check and its descriptor (needed under FI_MR_LOCAL). */
static ccoResult_t local_desc(cco_net* net, cco_net_mr* mr, const void* buf, size_t size, void** desc) {
  if (mr && size && ((uintptr_t)buf < mr->base || (uintptr_t)buf - mr->base > mr->size ||
             size > mr->size - ((uintptr_t)buf - mr->base)))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "buffer %p+%zu lies outside its registration", buf, size);
  if (!mr && size && (net->mrMode & FI_MR_LOCAL))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "provider needs registered local buffers (FI_MR_LOCAL)");
  *desc = mr ? mr->desc : NULL;
  return ccoSuccess;
}

/* A read (write = 0), a write (1), or a write that notifies its target
 * with `data` (2). */
static ccoResult_t rma(cco_net* net, int write, int peer, void* buf, cco_net_mr* mr, size_t size,
                       cco_net_rkey rkey, uint64_t remoteOff, uint64_t data, void* context) {
  void* desc = NULL;
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  cco_net_op* op = NULL;
  if (!net || (size && !buf))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "%s: NULL argument", write ? "write" : "read");
  if (size > net->maxMsg)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "%s of %zu bytes exceeds the largest message (%zu)",
                     write ? "write" : "read", size, net->maxMsg);
  CCO_CHECK(local_desc(net, mr, buf, size, &desc));
  CCO_CHECK(op_begin(net, peer, context, &addr, &op));
  struct iovec iov = {buf, size};
  struct fi_rma_iov riov = {rkey.base + remoteOff, size, rkey.key};
  struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = addr,
                           .rma_iov = &riov, .rma_iov_count = 1, .context = op, .data = data};
  /* postFlags on writes: FI_DELIVERY_COMPLETE, so the completion means placed.
   * A notified write is a signal too: where FI_FENCE stands in for delivery
   * complete, it is fenced like the atomics, so that its notification never
   * comes before the writes posted ahead of it. */
  uint64_t writeFlags = write == 2 ? net->postFlags | FI_REMOTE_CQ_DATA : net->postFlags & FI_DELIVERY_COMPLETE;
  NET_DATA_BEGIN();
  ssize_t rc = write ? fi_writemsg(net->ep, &msg, FI_COMPLETION | writeFlags)
                     : fi_readmsg(net->ep, &msg, FI_COMPLETION);
  NET_DATA_END();
  return op_posted(net, op, rc, write ? "write" : "read");
}

ccoResult_t cco_net_write(cco_net* net, int peer, const void* src, cco_net_mr* mr, size_t size,
                          cco_net_rkey rkey, uint64_t remoteOff, void* context) {
  return rma(net, 1, peer, (void*)src, mr, size, rkey, remoteOff, 0, context);
}

int cco_net_can_notify(const cco_net* net) { return net && net->canNotify; }

ccoResult_t cco_net_write_notify(cco_net* net, int peer, const void* src, cco_net_mr* mr, size_t size,
                                 cco_net_rkey rkey, uint64_t remoteOff, uint64_t data, void* context) {
  if (net && !net->canNotify)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_NET, "provider %s carries no remote completion data%s",
                     net->info->fabric_attr->prov_name, cco_env_bool(CCO_ENV_ID_CCO_NET_NOTIFY) ? "" : " (CCO_NET_NOTIFY=0)");
  return rma(net, 2, peer, (void*)src, mr, size, rkey, remoteOff, data, context);
}

ccoResult_t cco_net_read(cco_net* net, int peer, void* dst, cco_net_mr* mr, size_t size,
                         cco_net_rkey rkey, uint64_t remoteOff, void* context) {
  return rma(net, 0, peer, dst, mr, size, rkey, remoteOff, 0, context);
}

static ccoResult_t atomic_add(cco_net* net, int peer, uint64_t value, uint64_t* result, cco_net_mr* resultMr,
                              cco_net_rkey rkey, uint64_t remoteOff, void* context) {
  void* resultDesc = NULL;
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  cco_net_op* op = NULL;
  if ((rkey.base + remoteOff) % 8)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "atomic target offset %llu is not 8-byte aligned",
                     (unsigned long long)remoteOff);
  if (!net) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "NULL network engine");
  if (result) CCO_CHECK(local_desc(net, resultMr, result, sizeof(*result), &resultDesc));
  CCO_CHECK(op_begin(net, peer, context, &addr, &op));
  op->operand = value;
  void* desc = net->opsMr ? net->opsMr->desc : NULL;
  struct fi_ioc ioc = {&op->operand, 1};
  struct fi_rma_ioc rioc = {rkey.base + remoteOff, 1, rkey.key};
  struct fi_msg_atomic msg = {.msg_iov = &ioc, .desc = &desc, .iov_count = 1, .addr = addr,
                              .rma_iov = &rioc, .rma_iov_count = 1, .datatype = FI_UINT64,
                              .op = FI_SUM, .context = op};
  /* Without delivery complete, the fence orders this atomic (typically a
   * signal) after every earlier write to the peer. */
  uint64_t flags = FI_COMPLETION | net->postFlags;
  ssize_t rc;
  NET_DATA_BEGIN();
  if (result) {
    struct fi_ioc rioc2 = {result, 1};
    rc = fi_fetch_atomicmsg(net->ep, &msg, &rioc2, &resultDesc, 1, flags);
  } else {
    rc = fi_atomicmsg(net->ep, &msg, flags);
  }
  NET_DATA_END();
  return op_posted(net, op, rc, result ? "fetch-add" : "atomic add");
}

ccoResult_t cco_net_atomic_add(cco_net* net, int peer, uint64_t value, cco_net_rkey rkey,
                               uint64_t remoteOff, void* context) {
  return atomic_add(net, peer, value, NULL, NULL, rkey, remoteOff, context);
}

ccoResult_t cco_net_fetch_add(cco_net* net, int peer, uint64_t value, uint64_t* result,
                              cco_net_mr* resultMr, cco_net_rkey rkey, uint64_t remoteOff,
                              void* context) {
  if (!result) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "fetch-add: NULL result");
  return atomic_add(net, peer, value, result, resultMr, rkey, remoteOff, context);
}

/* ---- progress ------------------------------------------------------------------ */

/* One error entry: a failed completion. The first failure of each peer is
 * logged with the provider's words; the rest of a flushed queue only at TRACE
 * (a dead peer fails every operation in flight at once). */
static int read_error(cco_net* net, cco_net_completion* out) {
  struct fi_cq_err_entry err;
  memset(&err, 0, sizeof(err));
  NET_DATA_BEGIN();
  ssize_t got = fi_cq_readerr(net->cq, &err, 0);
  NET_DATA_END();
  if (got != 1) return 0;
  char buf[160];
  const char* prov = fi_cq_strerror(net->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
  cco_net_op* op = err.op_context;
  if (!op) { /* an error of no operation of ours: log it and go on */
    CCO_WARN(NET, "completion-queue error without an operation: %s (%s)", fi_err(net, err.err), prov ? prov : "");
    return 0;
  }
  /* tcp;ofi_rxm cancels (FI_ECANCELED) what was queued to a connection that
   * broke and puts the socket's errno (ENOTCONN, ECONNRESET) in prov_errno:
   * either one saying "gone" makes it a remote failure. */
  int gone = peer_gone(err.err) || peer_gone(err.prov_errno < 0 ? -err.prov_errno : err.prov_errno);
  if (!net->peerFailed[op->peer]) {
    net->peerFailed[op->peer] = 1;
    /* Also the thread's last error: the engine's owner reports it as the cause. */
    (void)cco_error(NULL, gone ? ccoRemoteError : ccoNetError, CCO_SUBSYS_NET,
                    "operation to peer %d failed: %s (provider: %s)%s", op->peer, fi_err(net, err.err),
                    prov ? prov : "no detail", gone ? "; the peer is gone" : "");
  } else {
    CCO_TRACE(NET, "operation to peer %d failed: %s (provider: %s)", op->peer, fi_err(net, err.err),
              prov ? prov : "no detail");
  }
  *out = (cco_net_completion){op->context, gone ? ccoRemoteError : ccoNetError, op->peer, 0, 0};
  op_free(net, op);
  return 1;
}

ccoResult_t cco_net_progress(cco_net* net, cco_net_completion* out, int max, int* count) {
  if (!net || !out || max < 1 || !count)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_NET, "cco_net_progress: bad arguments");
  int n = 0;
  struct fi_cq_data_entry entries[CQ_BATCH];
  /* Always read, even with nothing in flight: with manual progress this call
   * is what moves the data peers write into our memory. */
  while (n < max) {
    size_t want = (size_t)(max - n) < CQ_BATCH ? (size_t)(max - n) : CQ_BATCH;
    NET_DATA_BEGIN(); /* with manual progress, peers' data lands here */
    ssize_t got = fi_cq_read(net->cq, entries, want);
    NET_DATA_END();
    if (got == -FI_EAGAIN) break;
    if (got == -FI_EAVAIL) {
      n += read_error(net, &out[n]);
      continue;
    }
    if (got < 0) {
      *count = n;
      return cco_error(NULL, ccoNetError, CCO_SUBSYS_NET, "fi_cq_read: %s", fi_err(net, (int)got));
    }
    for (ssize_t i = 0; i < got; i++) {
      if (entries[i].flags & FI_REMOTE_CQ_DATA) { /* a peer's write_notify landed here */
        out[n++] = (cco_net_completion){NULL, ccoSuccess, -1, 1, entries[i].data};
        continue;
      }
      cco_net_op* op = entries[i].op_context;
      out[n++] = (cco_net_completion){op->context, ccoSuccess, op->peer, 0, 0};
      op_free(net, op);
    }
    if ((size_t)got < want) break;
  }
  *count = n;
  return ccoSuccess;
}

#endif /* CCO_HAVE_LIBFABRIC_HEADERS */
