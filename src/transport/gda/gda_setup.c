/*
 * GDA setup: the proxy (engine opened, addresses exchanged, bounce region
 * or window registrations), each device communicator's rings, signals and
 * counters, and the window hooks. Every collective step ends in an
 * allgather of statuses, so a failure on one rank fails every rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/device/cco_gda_types.h"
#include "base/env.h"
#include "base/error.h"
#include "base/clock.h"
#include "base/log.h"
#include "mem/mem.h"
#include "transport/gda/gda_internal.h"

#define GDA_LINE 64

/* Whether a device communicator with this connection type needs the proxy
 * here: some rank has a peer under it (FULL always; CROSSNODE and RAIL only
 * with several hosts). Same answer on every rank. */
static bool gda_needed(const cco_transport_ctx* ctx, uint32_t connectionType) {
  if (connectionType == ccoGdaConnectionFull) return true;
  if (connectionType == ccoGdaConnectionNone) return false;
  return ctx->topo->nNodes > 1;
}

static void peer_table(const cco_transport_ctx* ctx, uint32_t type, uint8_t* peers) {
  const cco_topology* t = ctx->topo;
  for (int r = 0; r < ctx->nRanks; r++) {
    bool yes = type == ccoGdaConnectionFull ||
               (type == ccoGdaConnectionCrossNode && t->nodeOf[r] != t->node) ||
               (type == ccoGdaConnectionRail && r != ctx->rank && t->lsaRankOf[r] == t->lsaRank);
    peers[r] = yes ? 1 : 0;
  }
}

/* One rank's verdict and what the others need, allgathered. */
typedef struct {
  int32_t status;
  int32_t path;
  uint64_t stagingBytes;
  cco_net_rkey rkey;
  uint8_t addr[CCO_NET_ADDR_MAX];
} gda_hello;

/* Allgathers status + payload; returns the first failure (naming the rank)
 * or ccoSuccess on every rank. `all` has nRanks entries of `size` bytes,
 * each starting with an int32_t status; this rank's is filled. */
static ccoResult_t agree(const cco_transport_ctx* ctx, void* all, size_t size, bool locked, const char* what) {
  ccoResult_t res = ctx->allgather(ctx->owner, all, size, locked);
  if (res != ccoSuccess) return res;
  int32_t mine = *(int32_t*)((char*)all + (size_t)ctx->rank * size);
  if (mine != ccoSuccess) return (ccoResult_t)mine;
  for (int r = 0; r < ctx->nRanks; r++)
    if (*(int32_t*)((char*)all + (size_t)r * size) != ccoSuccess)
      return cco_error(ctx->err, ccoRemoteError, CCO_SUBSYS_GDA, "rank %d: %s failed on rank %d", ctx->rank, what, r);
  return ccoSuccess;
}

/* -------------------------------------------------------------- windows */

static void win_free(cco_gda_proxy* px, cco_gda_win* w) {
  if (w->mr) cco_net_mr_dereg(px->net, w->mr);
  free(w->rkeys);
  free(w->has);
  free(w);
}

static ccoResult_t win_new(cco_gda_proxy* px, uint64_t offset, uint64_t size, void* local, cco_gda_win** out) {
  cco_gda_win* w = calloc(1, sizeof(*w));
  if (w) {
    w->rkeys = calloc((size_t)px->nRanks, sizeof(cco_net_rkey));
    w->has = calloc((size_t)px->nRanks, 1);
  }
  if (!w || !w->rkeys || !w->has) {
    if (w) win_free(px, w);
    return cco_error(px->ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  }
  w->offset = offset, w->size = size, w->local = local;
  if (px->path == CCO_GDA_PATH_DIRECT) {
    cco_net_rkey rk;
    int access = CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE;
    if (px->ctx->platform->kind == CCO_PLATFORM_CUDA) access |= CCO_NET_MEMORY_CUDA; /* windows live on the GPU */
    ccoResult_t res = cco_net_mr_reg(px->net, local, size, access, &w->mr, &rk);
    if (res != ccoSuccess) {
      win_free(px, w);
      return res;
    }
    w->rkeys[px->rank] = rk;
  }
  memset(w->has, 1, (size_t)px->nRanks); /* staged: the target checks its own table */
  *out = w;
  return ccoSuccess;
}

typedef struct {
  int32_t status;
  int32_t pad;
  uint64_t offset, size;
  cco_net_rkey rkey;
} win_entry;

/* Registers one existing window with the proxy (and, on the direct path,
 * the engine) and notes it in `mine` (cco_mem_window_foreach callback). */
typedef struct {
  cco_gda_proxy* px;
  win_entry* mine;
  int n, cap;
} existing_walk;

static ccoResult_t add_existing(void* arg, const cco_window_info* info) {
  existing_walk* walk = arg;
  cco_gda_proxy* px = walk->px;
  if (walk->n == walk->cap) {
    int cap = walk->cap ? 2 * walk->cap : 16;
    win_entry* grown = realloc(walk->mine, (size_t)cap * sizeof(win_entry));
    if (!grown) return cco_error(px->ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
    walk->mine = grown, walk->cap = cap;
  }
  cco_gda_win* g = NULL;
  CCO_CHECK(win_new(px, info->offset, info->size, info->localPtr, &g));
  g->next = px->wins;
  px->wins = g;
  walk->mine[walk->n++] = (win_entry){ccoSuccess, 0, g->offset, g->size, g->rkeys[px->rank]};
  return ccoSuccess;
}

/* At proxy creation: registers every window there is, then (direct path)
 * matches each with the peers' windows at the same offset. The staged path
 * needs the table only, to check addresses. */
static ccoResult_t register_existing(cco_gda_proxy* px) {
  const cco_transport_ctx* ctx = px->ctx;
  existing_walk walk = {px, NULL, 0, 0};
  ccoResult_t res = cco_mem_window_foreach(ctx->mem, add_existing, &walk);
  if (px->path == CCO_GDA_PATH_STAGED) {
    free(walk.mine);
    return res;
  }
  int n = walk.n;
  win_entry* mine = walk.mine;
  /* How many entries each rank sends, then the entries. */
  int32_t* counts = calloc((size_t)ctx->nRanks, 2 * sizeof(int32_t));
  if (!counts) res = ccoOutOfMemory;
  if (counts) {
    counts[2 * ctx->rank] = res;
    counts[2 * ctx->rank + 1] = n;
  }
  ccoResult_t agreed = counts ? agree(ctx, counts, 2 * sizeof(int32_t), false, "GDA window registration") : res;
  int most = 0;
  for (int r = 0; agreed == ccoSuccess && r < ctx->nRanks; r++)
    if (counts[2 * r + 1] > most) most = counts[2 * r + 1];
  free(counts);
  win_entry* all = agreed == ccoSuccess && most ? calloc((size_t)ctx->nRanks * (size_t)most, sizeof(win_entry)) : NULL;
  if (agreed == ccoSuccess && most && !all) agreed = cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  if (all) {
    if (n) memcpy(&all[(size_t)ctx->rank * (size_t)most], mine, (size_t)n * sizeof(win_entry));
    agreed = agree(ctx, all, (size_t)most * sizeof(win_entry), false, "GDA window key exchange");
  }
  for (int r = 0; all && agreed == ccoSuccess && r < ctx->nRanks; r++)
    for (int i = 0; i < most; i++) {
      win_entry* e = &all[(size_t)r * (size_t)most + (size_t)i];
      for (cco_gda_win* g = px->wins; e->size && g; g = g->next)
        if (g->offset == e->offset && g->size == e->size) {
          g->rkeys[r] = e->rkey;
          g->has[r] = 1;
        }
    }
  free(all);
  free(mine);
  return agreed;
}

static ccoResult_t window_added(cco_gda_transport* gt, uint64_t offset, uint64_t size, void* localPtr) {
  const cco_transport_ctx* ctx = gt->ctx;
  cco_gda_proxy* px = gt->proxy;
  if (!px) return ccoSuccess;
  cco_gda_win* g = NULL;
  win_entry* all = calloc((size_t)ctx->nRanks, sizeof(win_entry));
  if (!all) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  ccoResult_t res = win_new(px, offset, size, localPtr, &g);
  all[ctx->rank] = (win_entry){res, 0, offset, size, g ? g->rkeys[ctx->rank] : (cco_net_rkey){0, 0}};
  res = agree(ctx, all, sizeof(win_entry), true, "GDA window registration");
  if (res == ccoSuccess) {
    for (int r = 0; r < ctx->nRanks; r++) {
      g->rkeys[r] = all[r].rkey;
      g->has[r] = all[r].offset == offset && all[r].size == size;
    }
    pthread_mutex_lock(&px->lock);
    g->next = px->wins;
    px->wins = g;
    pthread_mutex_unlock(&px->lock);
  } else if (g) {
    win_free(px, g);
  }
  free(all);
  return res;
}

static void window_removed(cco_gda_transport* gt, uint64_t offset) {
  cco_gda_proxy* px = gt->proxy;
  if (!px) return;
  pthread_mutex_lock(&px->lock);
  for (cco_gda_win** it = &px->wins; *it; it = &(*it)->next)
    if ((*it)->offset == offset) {
      cco_gda_win* w = *it;
      *it = w->next;
      win_free(px, w);
      break;
    }
  pthread_mutex_unlock(&px->lock);
}

/* ---------------------------------------------------------------- proxy */

static ccoResult_t proxy_open(cco_gda_proxy* px, gda_hello* hello) {
  const cco_transport_ctx* ctx = px->ctx;
  int want = cco_env_enum(CCO_ENV_ID_CCO_GDA_PATH); /* auto, direct, staged */
  bool gpu = ctx->platform->kind == CCO_PLATFORM_CUDA;
  px->path = want == 2 || (want == 0 && gpu) ? CCO_GDA_PATH_STAGED : CCO_GDA_PATH_DIRECT;
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  /* A class in the requirements wins over CCO_NET_TC. It is the byte RDMA
   * NICs take (DSCP in the upper six bits, ECN in the lower two); libfabric
   * takes only the DSCP. */
  if (px->trafficClass) cfg.trafficClass = (int)(px->trafficClass >> 2);
  if (px->trafficClass)
    CCO_INFO(GDA, "rank %d: gdaTrafficClass %u: the engine asks for DSCP %d", ctx->rank, px->trafficClass,
             cfg.trafficClass);
  cfg.needHmem = px->path == CCO_GDA_PATH_DIRECT && gpu;
  cfg.hmemDevice = gpu ? ctx->platform->identity.device : 0;
  CCO_CHECK(cco_net_open(&cfg, &px->net));
  px->maxMsg = cco_net_max_msg(px->net);
  CCO_CHECK(cco_net_local_addr(px->net, hello->addr));
  if (px->path == CCO_GDA_PATH_STAGED) {
    CCO_CHECK(cco_gda_staged_create(px));
    hello->rkey = cco_gda_staged_rkeys(px)[px->rank];
    hello->stagingBytes = (uint64_t)cco_env_int(CCO_ENV_ID_CCO_GDA_STAGING_BYTES);
  }
  return ccoSuccess;
}

static void proxy_release(cco_gda_proxy* px) {
  cco_gda_staged_destroy(px);
  free(px->watch);
  while (px->wins) {
    cco_gda_win* w = px->wins;
    px->wins = w->next;
    win_free(px, w);
  }
  if (px->net) cco_net_close(px->net);
  pthread_mutex_destroy(&px->lock);
  free(px);
}

static ccoResult_t proxy_create(cco_gda_transport* gt, const ccoDevCommRequirements* reqs) {
  const cco_transport_ctx* ctx = gt->ctx;
  cco_gda_proxy* px = calloc(1, sizeof(*px));
  gda_hello* all = calloc((size_t)ctx->nRanks, sizeof(gda_hello));
  uint8_t* addrs = calloc((size_t)ctx->nRanks, CCO_NET_ADDR_MAX);
  if (!px || !all || !addrs) {
    free(px), free(all), free(addrs);
    return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  }
  px->ctx = ctx;
  px->rank = ctx->rank;
  px->nRanks = ctx->nRanks;
  px->trafficClass = reqs->gdaTrafficClass;
  px->slotBase = cco_mem_slot_base(ctx->mem, ctx->mem->lsaRank);
  px->watch = calloc((size_t)ctx->nRanks, sizeof(cco_gda_peer_watch)); /* NULL: no dead-peer checks */
  pthread_mutex_init(&px->lock, NULL);
  gda_hello* me = &all[ctx->rank];
  me->status = proxy_open(px, me);
  me->path = px->path;
  ccoResult_t res = agree(ctx, all, sizeof(gda_hello), false, "opening the GDA network engine");
  for (int r = 0; res == ccoSuccess && r < ctx->nRanks; r++) {
    if (all[r].path != me->path || all[r].stagingBytes != me->stagingBytes)
      res = cco_error(ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                      "rank %d: ranks %d and %d disagree on the GDA path (%s vs %s) or "
                      "CCO_GDA_STAGING_BYTES (%llu vs %llu)",
                      ctx->rank, ctx->rank, r, me->path ? "staged" : "direct", all[r].path ? "staged" : "direct",
                      (unsigned long long)me->stagingBytes, (unsigned long long)all[r].stagingBytes);
    memcpy(addrs + (size_t)r * CCO_NET_ADDR_MAX, all[r].addr, CCO_NET_ADDR_MAX);
    if (px->staged) cco_gda_staged_rkeys(px)[r] = all[r].rkey;
  }
  if (res == ccoSuccess) res = cco_net_connect(px->net, ctx->nRanks, addrs);
  int32_t ok[2] = {res, 0};
  int32_t* oks = calloc((size_t)ctx->nRanks, sizeof(ok));
  if (oks) {
    memcpy(&oks[2 * ctx->rank], ok, sizeof(ok));
    ccoResult_t a = agree(ctx, oks, sizeof(ok), false, "connecting the GDA network engine");
    if (res == ccoSuccess) res = a;
    free(oks);
  } else if (res == ccoSuccess) {
    res = cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  }
  if (res == ccoSuccess) res = register_existing(px);
  if (res == ccoSuccess) res = cco_gda_proxy_start(px);
  free(all);
  free(addrs);
  if (res != ccoSuccess) {
    proxy_release(px);
    return res;
  }
  gt->proxy = px;
  CCO_INFO(GDA, "rank %d: GDA proxy up, %s path, engine: %s", ctx->rank,
           px->path == CCO_GDA_PATH_STAGED ? "staged" : "direct", cco_net_describe(px->net));
  return ccoSuccess;
}

/* How long a stop waits for what was posted to complete (gda_proxy.c). */
#define GDA_DRAIN_NS 2000000000ull

static void proxy_stop(cco_gda_transport* gt) {
  cco_gda_proxy* px = gt->proxy;
  if (!px || !px->threadStarted) return;
  atomic_store(&px->drainUntil, cco_now_ns() + GDA_DRAIN_NS);
  atomic_store(&px->stop, true);
  pthread_join(px->thread, NULL);
  px->threadStarted = false;
}

static void state_free(cco_gda_transport* gt, cco_gda_state* st);

static void proxy_free(cco_gda_transport* gt) {
  cco_gda_proxy* px = gt->proxy;
  if (!px) return;
  proxy_stop(gt);
  /* No completion can come now: the thread that dispatched them is gone. */
  while (px->retired) {
    cco_gda_state* st = px->retired;
    px->retired = st->next;
    state_free(gt, st);
  }
  proxy_release(px);
  gt->proxy = NULL;
}

/* ---------------------------------------------------------------- state */

static void state_free(cco_gda_transport* gt, cco_gda_state* st) {
  const cco_transport_ctx* ctx = gt->ctx;
  cco_platform* p = ctx->platform;
  cco_gda_proxy* px = gt->proxy;
  if (px && st->signalsMr) cco_net_mr_dereg(px->net, st->signalsMr);
  if (px && st->valuesMr) cco_net_mr_dereg(px->net, st->valuesMr);
  void* descs[] = {st->tailsMem, st->contextsDev, st->peersDev, st->epochsDev, st->devState};
  for (size_t i = 0; i < sizeof(descs) / sizeof(descs[0]); i++)
    if (descs[i]) p->ops->desc_free(p, descs[i]);
  void* maps[] = {st->slotsMem, st->headsMem, st->signalsMem, st->countersMem};
  for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
    if (maps[i]) p->ops->hostmap_free(p, maps[i]);
  if (st->rings)
    for (int i = 0; i < st->nRings; i++) free(st->rings[i].ops);
  free(st->rings);
  free(st->values);
  free(st->peers);
  free(st->signalRkeys);
  free(st);
}

static ccoResult_t state_build(cco_gda_transport* gt, cco_gda_state* st, const ccoDevCommRequirements* reqs, uint64_t* devAddr,
                               cco_net_rkey* signalKey) {
  const cco_transport_ctx* ctx = gt->ctx;
  cco_platform* p = ctx->platform;
  cco_gda_proxy* px = gt->proxy;
  uint32_t ctxs = reqs->gdaContextCount, depth = reqs->gdaQueueDepth;
  uint32_t barriers = reqs->railGdaBarrierCount + reqs->barrierCount;
  st->connectionType = reqs->gdaConnectionType;
  st->depth = depth;
  st->nRings = (int)ctxs;
  st->counterCount = reqs->gdaCounterCount;
  st->signalTotal = reqs->gdaSignalCount + barriers * (uint32_t)ctx->topo->teams[ccoTeamRail].nRanks;
  st->rings = calloc(ctxs, sizeof(cco_gda_ring));
  st->peers = calloc((size_t)ctx->nRanks, 1);
  st->signalRkeys = calloc((size_t)ctx->nRanks, sizeof(cco_net_rkey));
  if (!st->rings || !st->peers || !st->signalRkeys) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  peer_table(ctx, st->connectionType, st->peers);
  uint64_t slotsDev = 0, headsDev = 0, signalsDev = 0, countersDev = 0;
  CCO_CHECK(p->ops->hostmap_alloc(p, (size_t)ctxs * depth * sizeof(ccoGdaSlot), &st->slotsMem, &slotsDev));
  CCO_CHECK(p->ops->hostmap_alloc(p, (size_t)ctxs * GDA_LINE, &st->headsMem, &headsDev));
  CCO_CHECK(p->ops->hostmap_alloc(p, ((size_t)st->signalTotal + 1) * 8, &st->signalsMem, &signalsDev));
  CCO_CHECK(p->ops->hostmap_alloc(p, ((size_t)st->counterCount + 1) * 8, &st->countersMem, &countersDev));
  st->signalsHost = st->signalsMem;
  st->countersHost = st->countersMem;
  CCO_CHECK(cco_platform_desc_alloc_zeroed(p, (size_t)ctxs * GDA_LINE, &st->tailsMem));
  CCO_CHECK(cco_platform_desc_alloc_zeroed(p, ((size_t)barriers + 1) * 8, &st->epochsDev));
  CCO_CHECK(p->ops->desc_alloc(p, (size_t)ctx->nRanks, &st->peersDev));
  CCO_CHECK(p->ops->copy_to_device(p, st->peersDev, st->peers, (size_t)ctx->nRanks));
  if (px->path == CCO_GDA_PATH_DIRECT) {
    st->values = calloc((size_t)ctxs * depth, sizeof(uint64_t));
    if (!st->values) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
    cco_net_rkey unused;
    CCO_CHECK(cco_net_mr_reg(px->net, st->values, (size_t)ctxs * depth * sizeof(uint64_t), CCO_NET_ACCESS_LOCAL,
                             &st->valuesMr, &unused));
    CCO_CHECK(cco_net_mr_reg(px->net, st->signalsMem, ((size_t)st->signalTotal + 1) * 8,
                             CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE, &st->signalsMr, signalKey));
  }
  ccoGdaContextDev table[CCO_GDA_MAX_CONTEXTS];
  memset(table, 0, sizeof(table));
  for (uint32_t i = 0; i < ctxs; i++) {
    cco_gda_ring* r = &st->rings[i];
    r->st = st;
    r->context = (int)i;
    r->depth = depth;
    r->slots = (ccoGdaSlot*)st->slotsMem + (size_t)i * depth;
    r->headHost = (uint64_t*)((char*)st->headsMem + (size_t)i * GDA_LINE);
    r->ops = calloc(depth, sizeof(cco_gda_op));
    if (!r->ops) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
    table[i].slots = slotsDev + (uint64_t)i * depth * sizeof(ccoGdaSlot);
    table[i].tail = (uint64_t)(uintptr_t)st->tailsMem + (uint64_t)i * GDA_LINE;
    table[i].head = headsDev + (uint64_t)i * GDA_LINE;
  }
  CCO_CHECK(p->ops->desc_alloc(p, ctxs * sizeof(ccoGdaContextDev), &st->contextsDev));
  CCO_CHECK(p->ops->copy_to_device(p, st->contextsDev, table, ctxs * sizeof(ccoGdaContextDev)));
  ccoGdaDev dev;
  memset(&dev, 0, sizeof(dev));
  dev.contextCount = ctxs;
  dev.queueDepth = depth;
  dev.signalCount = reqs->gdaSignalCount;
  dev.counterCount = reqs->gdaCounterCount;
  dev.worldSize = ctx->nRanks;
  dev.connectionType = reqs->gdaConnectionType;
  dev.teamKind = reqs->gdaConnectionType == ccoGdaConnectionFull   ? ccoTeamWorld
                 : reqs->gdaConnectionType == ccoGdaConnectionRail ? ccoTeamRail
                                                                      : ccoTeamCrossNode;
  dev.barrierCount = barriers;
  dev.contexts = (uint64_t)(uintptr_t)st->contextsDev;
  dev.peers = (uint64_t)(uintptr_t)st->peersDev;
  dev.signals = signalsDev;
  dev.counters = countersDev;
  dev.barrierEpochs = (uint64_t)(uintptr_t)st->epochsDev;
  CCO_CHECK(p->ops->desc_alloc(p, sizeof(dev), &st->devState));
  CCO_CHECK(p->ops->copy_to_device(p, st->devState, &dev, sizeof(dev)));
  *devAddr = (uint64_t)(uintptr_t)st->devState;
  return ccoSuccess;
}

typedef struct {
  int32_t status;
  int32_t pad;
  cco_net_rkey signals;
} state_hello;

static ccoResult_t state_create(cco_gda_transport* gt, uint64_t id, const ccoDevCommRequirements* reqs,
                                cco_gda_state** out, uint64_t* devAddr) {
  const cco_transport_ctx* ctx = gt->ctx;
  if (!gt->proxy) CCO_CHECK(proxy_create(gt, reqs));
  cco_gda_proxy* px = gt->proxy;
  cco_gda_state* st = calloc(1, sizeof(*st));
  state_hello* all = calloc((size_t)ctx->nRanks, sizeof(state_hello));
  ccoResult_t res = st && all ? ccoSuccess : cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  /* The class is an attribute of the endpoint, which every device
   * communicator of this communicator shares. Every rank has the same
   * requirements and engine, so every rank decides the same. */
  if (res == ccoSuccess && reqs->gdaTrafficClass && reqs->gdaTrafficClass != px->trafficClass)
    res = cco_error(ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                    "rank %d: gdaTrafficClass %u, but this communicator's GDA network engine was opened with "
                    "gdaTrafficClass %u (the first device communicator with GDA peers fixes it): use another "
                    "communicator for another traffic class",
                    ctx->rank, reqs->gdaTrafficClass, px->trafficClass);
  if (st) st->id = id;
  pthread_mutex_lock(&ctx->mem->lock);
  if (res == ccoSuccess) res = state_build(gt, st, reqs, devAddr, &all[ctx->rank].signals);
  pthread_mutex_unlock(&ctx->mem->lock);
  if (all) {
    all[ctx->rank].status = res;
    res = agree(ctx, all, sizeof(state_hello), false, "creating the GDA state");
  }
  if (res == ccoSuccess)
    for (int r = 0; r < ctx->nRanks; r++) st->signalRkeys[r] = all[r].signals;
  free(all);
  if (res != ccoSuccess) {
    if (st) {
      pthread_mutex_lock(&ctx->mem->lock);
      state_free(gt, st);
      pthread_mutex_unlock(&ctx->mem->lock);
    }
    return res;
  }
  pthread_mutex_lock(&px->lock);
  st->next = px->states;
  px->states = st;
  pthread_mutex_unlock(&px->lock);
  *out = st;
  CCO_INFO(GDA, "rank %d: GDA state of device communicator %llu: %d contexts x %u slots, %u signals, %u counters",
           ctx->rank, (unsigned long long)id, st->nRings, st->depth, reqs->gdaSignalCount, st->counterCount);
  return ccoSuccess;
}

/* Whether nothing of the state is left for the proxy: every op it took is
 * complete and nothing rung is waiting to be taken. Slots written without
 * a doorbell do not count: the proxy would never take them. Under the
 * proxy lock. */
static bool state_drained(const cco_gda_state* st) {
  for (int i = 0; i < st->nRings; i++) {
    const cco_gda_ring* r = &st->rings[i];
    const ccoGdaSlot* next = &r->slots[r->scanned & (r->depth - 1)];
    if (r->head != r->read || r->bell != r->read ||
        CCO_GDA_SLOT_WRITTEN(__atomic_load_n(&next->seq, __ATOMIC_ACQUIRE), r->scanned))
      return false;
  }
  return true;
}

static bool comm_failed(const cco_transport_ctx* ctx) { return ctx->failed && atomic_load(ctx->failed) != 0; }

/* The engine's completions carry pointers to the state's ops, so a state
 * is freed only when none can come: its rings drained on a communicator
 * that never failed an op, or the thread stopped. A healthy communicator
 * first waits (up to GDA_DRAIN_NS) for what a kernel rang just before the
 * destroy to reach its peers, as a stop does. Anything else (a dead peer's
 * writes that never complete, ops failed with engine work still out) is
 * parked on the proxy and freed after its thread stops (proxy_free). */
static void state_destroy(cco_gda_transport* gt, cco_gda_state* st) {
  if (!st) return;
  cco_gda_proxy* px = gt->proxy;
  if (px) {
    bool running = px->threadStarted;
    uint64_t start = cco_now_ns(), deadline = start + GDA_DRAIN_NS;
    bool drained = false;
    for (;;) {
      pthread_mutex_lock(&px->lock);
      drained = state_drained(st);
      bool give_up = px->everFailed || comm_failed(gt->ctx) || cco_now_ns() >= deadline;
      pthread_mutex_unlock(&px->lock);
      if (!running || drained || give_up) break;
      cco_idle_wait(cco_now_ns() - start, 20000);
    }
    pthread_mutex_lock(&px->lock);
    for (cco_gda_state** it = &px->states; *it; it = &(*it)->next)
      if (*it == st) {
        *it = st->next;
        break;
      }
    bool park = running && (!drained || px->everFailed || comm_failed(gt->ctx));
    if (park) {
      st->next = px->retired;
      px->retired = st;
    }
    pthread_mutex_unlock(&px->lock);
    if (park) {
      CCO_INFO(GDA, "rank %d: GDA state of device communicator %llu kept until the proxy stops (%s)",
               gt->ctx->rank, (unsigned long long)st->id, drained ? "an op failed" : "ops still in flight");
      return;
    }
  }
  state_free(gt, st);
}

/* ------------------------------------------------------ transport interface */

static ccoResult_t gda_start(const cco_transport_ctx* ctx, void** state) {
  cco_gda_transport* gt = calloc(1, sizeof(*gt));
  if (!gt) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  gt->ctx = ctx;
  *state = gt;
  return ccoSuccess;
}

static ccoResult_t gda_devcomm_create(void* state, const cco_devcomm_setup* setup, ccoDevComm* dc,
                                      void** devState) {
  cco_gda_transport* gt = state;
  const ccoDevCommRequirements* reqs = setup->reqs;
  dc->gdaConnectionType = reqs->gdaConnectionType;
  dc->gdaContextCount = reqs->gdaContextCount;
  dc->gdaSignalCount = reqs->gdaSignalCount;
  dc->gdaCounterCount = reqs->gdaCounterCount;
  dc->gdaQueueDepth = reqs->gdaQueueDepth;
  *devState = NULL;
  if (!gda_needed(gt->ctx, reqs->gdaConnectionType)) return ccoSuccess;
  cco_gda_state* st = NULL;
  CCO_CHECK(state_create(gt, setup->id, reqs, &st, &dc->gda));
  *devState = st;
  return ccoSuccess;
}

static void gda_devcomm_destroy(void* state, void* devState) { state_destroy(state, devState); }

static ccoResult_t gda_window_added(void* state, const cco_window_info* win) {
  return window_added(state, win->offset, win->size, win->localPtr);
}

static void gda_window_removed(void* state, const cco_window_info* win) {
  window_removed(state, win->offset);
}

static void gda_stop(void* state) { proxy_stop(state); }

static void gda_destroy(void* state) {
  proxy_free(state);
  free(state);
}

const cco_transport_ops cco_gda_transport_ops = {
    .name = "gda",
    .start = gda_start,
    .devcomm_collective = true,
    .devcomm_create = gda_devcomm_create,
    .devcomm_destroy = gda_devcomm_destroy,
    .window_added = gda_window_added,
    .window_removed = gda_window_removed,
    .stop = gda_stop,
    .destroy = gda_destroy,
};
