/*
 * Which algorithm a collective call uses, how many parts it runs in, and
 * the call signature. Pure functions of their arguments: every rank
 * computes the same from the same call, and the unit test checks them.
 */
#include <stdio.h>
#include <string.h>

#include "cco/cco_coll.h"
#include "coll/coll.h"

/* All-reduce on one host (bench/RESULTS.md, collectives, has the figures):
 *
 * - LL up to 64 KiB (all of CCO_COLL_LL_MAX_BYTES): data and flag travel in
 *   one 8-byte store, so there is no barrier round trip, but half of every
 *   store is flag. On the H200 (ranks sharing it, CUDA graphs) LL took
 *   4.7-5.2 us from 1 to 64 KiB at 2 ranks against one-shot's 8.3 us, and
 *   7.9-9.6 us at 8 ranks against 12.9-13.2 us; at 256 KiB the two are
 *   equal.
 * - one-shot up to 512 KiB while every rank's reads, (lsaSize - 1) x bytes,
 *   stay within 2 MiB: 512 KiB at 2 and 4 ranks, about 300 KiB at 8. The
 *   custom all-reduces of vLLM and TensorRT-LLM switch from one-shot to
 *   two-shot at 256-512 KiB on 8 GPUs. At 1 MiB and 2 ranks two-shot was the
 *   faster in three runs of four on one GPU (7.42 against 7.50 us on the
 *   H100 of 2026-12-05; 6.91 against 7.09 and 7.16 against 7.37 on the H200
 *   of 2026-12-02), and at 8 ranks one-shot and two-shot tie at 256 KiB
 *   (11.23 and 11.16 us) while two-shot wins at 1 MiB (12.3 against 18.0).
 * - two-shot beyond: each rank reads and writes about 2 x bytes whatever
 *   the rank count.
 * LL beyond 64 KiB was measured with a staging area of 1 MiB per source
 * (2026-12-05, H100, 2 ranks): 6.94 us at 256 KiB against one-shot's 6.20,
 * 20.5 against 7.5 at 1 MiB; at 8 ranks it tied with one-shot at 64 KiB
 * (10.43 and 10.47 us). So LL stays at 64 KiB and its staging small. */
#define CCO_COLL_LL_THRESHOLD_BYTES (64u << 10)
#define CCO_COLL_ONESHOT_MAX_BYTES (512u << 10)
#define CCO_COLL_ONESHOT_READ_BYTES (2u << 20)

/* Parts per call. Every call of a communicator uses the same count, for
 * every algorithm and size, for two reasons: a part's scratch area and
 * barrier keep state from one call to the next (LL epochs), and ranks that
 * disagree on a call (mismatched counts) must still meet at the same
 * barriers for the signature check to report it instead of hanging.
 * - host platform: 2 CPU threads, so a rank's parts run in parallel and
 *   every block function is exercised with several parts, without
 *   crowding the 2-core CI machines (8 ranks are 16 threads already);
 * - CUDA: 16 blocks of CCO_COLL_THREADS threads, enough loads in flight to
 *   reach NVLink bandwidth (the one-shot figures above needed 2 KiB per
 *   block and up to 128 blocks; 16 is a conservative start), then capped
 *   by CCO_COLL_MAX_PARTS and by what fits on the GPU at once. */
#define CCO_COLL_HOST_PARTS 2u
#define CCO_COLL_CUDA_PARTS 16u

static const char* const k_kind_names[CCO_COLL_KINDS] = {"allreduce", "allgather", "reducescatter",
                                                          "alltoall", "broadcast"};
static const char* const k_api_names[CCO_COLL_KINDS] = {"ccoAllReduce", "ccoAllGather", "ccoReduceScatter",
                                                         "ccoAlltoAll", "ccoBroadcast"};
static const char* const k_algo_names[ccoNumAlgos] = {"auto", "oneshot", "ll", "twoshot", "push", "pull", "hier"};

/* The algorithms of each collective: on one host, the first three of
 * all-reduce and the one of each other collective, named after the way it
 * moves data (cco_coll_types.h): all-gather and all-to-all push every
 * rank's blocks to its peers, reduce-scatter and broadcast pull from them.
 * hier is the one for several hosts (LSA inside each, GDA between them),
 * and only there. */
static const ccoAlgo_t k_algos[CCO_COLL_KINDS][5] = {
    [CCO_COLL_ALLREDUCE] = {ccoAlgoOneShot, ccoAlgoLL, ccoAlgoTwoShot, ccoAlgoHier, ccoAlgoAuto},
    [CCO_COLL_ALLGATHER] = {ccoAlgoPush, ccoAlgoHier, ccoAlgoAuto},
    [CCO_COLL_REDUCESCATTER] = {ccoAlgoPull, ccoAlgoHier, ccoAlgoAuto},
    [CCO_COLL_ALLTOALL] = {ccoAlgoPush, ccoAlgoHier, ccoAlgoAuto},
    [CCO_COLL_BROADCAST] = {ccoAlgoPull, ccoAlgoHier, ccoAlgoAuto},
};

const char* cco_coll_kind_name(cco_coll_kind kind) {
  return (unsigned)kind < CCO_COLL_KINDS ? k_kind_names[kind] : "?";
}

const char* cco_coll_api_name(cco_coll_kind kind) {
  if ((int)kind == CCO_COLL_STREAM_KIND) return "ccoBarrierOnStream";
  return (unsigned)kind < CCO_COLL_KINDS ? k_api_names[kind] : "?";
}

int cco_coll_kind_from_name(const char* name) {
  for (int k = 0; name && k < CCO_COLL_KINDS; k++)
    if (strcmp(name, k_kind_names[k]) == 0) return k;
  return -1;
}

const char* cco_coll_algo_name(ccoAlgo_t algo) {
  return (unsigned)algo < ccoNumAlgos ? k_algo_names[algo] : "?";
}

static int algo_from_name(const char* name, size_t len) {
  for (int a = 0; a < ccoNumAlgos; a++)
    if (strlen(k_algo_names[a]) == len && strncmp(name, k_algo_names[a], len) == 0) return a;
  return -1;
}

bool cco_coll_has_algo(cco_coll_kind kind, ccoAlgo_t algo) {
  if ((unsigned)kind >= CCO_COLL_KINDS || algo == ccoAlgoAuto) return false;
  for (int i = 0; i < 5 && k_algos[kind][i] != ccoAlgoAuto; i++)
    if (k_algos[kind][i] == algo) return true;
  return false;
}

const char* cco_coll_algo_list(cco_coll_kind kind) {
  switch (kind) {
    case CCO_COLL_ALLREDUCE: return "oneshot, ll, twoshot, hier";
    case CCO_COLL_ALLGATHER:
    case CCO_COLL_ALLTOALL: return "push, hier";
    case CCO_COLL_REDUCESCATTER:
    case CCO_COLL_BROADCAST: return "pull, hier";
    default: return "push";
  }
}

ccoResult_t cco_coll_config_parse(const char* text, cco_coll_config* cfg, char* why, size_t whySize) {
  cco_coll_config c;
  for (int k = 0; k < CCO_COLL_KINDS; k++) c.forced[k] = ccoAlgoAuto, c.demanded[k] = false;
  const char* p = text ? text : "";
  while (*p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char* eq = memchr(p, '=', len);
    int kind = -1;
    const char* name = p;
    size_t nameLen = len;
    if (eq) {
      char kindName[32];
      size_t kl = (size_t)(eq - p);
      if (kl >= sizeof(kindName)) kl = sizeof(kindName) - 1;
      memcpy(kindName, p, kl);
      kindName[kl] = '\0';
      kind = cco_coll_kind_from_name(kindName);
      if (kind < 0) {
        snprintf(why, whySize, "CCO_ALGO=%s: '%s' is not a collective (allreduce, allgather, "
                 "reducescatter, alltoall, broadcast)", text, kindName);
        return ccoInvalidUsage;
      }
      name = eq + 1;
      nameLen = len - kl - 1;
    }
    int algo = algo_from_name(name, nameLen);
    if (algo < 0) {
      snprintf(why, whySize, "CCO_ALGO=%s: '%.*s' is not an algorithm (auto, oneshot, ll, twoshot, push, "
               "pull, hier)", text, (int)nameLen, name);
      return ccoInvalidUsage;
    }
    for (int k = 0; k < CCO_COLL_KINDS; k++)
      if (kind < 0 || k == kind) c.forced[k] = (ccoAlgo_t)algo, c.demanded[k] = kind >= 0 && algo != ccoAlgoAuto;
    p = end ? end + 1 : p + len;
  }
  *cfg = c;
  return ccoSuccess;
}

static ccoAlgo_t auto_algo(cco_coll_kind kind, size_t bytes, int lsaSize) {
  if (kind != CCO_COLL_ALLREDUCE) return k_algos[kind][0];
  if (bytes <= CCO_COLL_LL_THRESHOLD_BYTES && bytes <= CCO_COLL_LL_MAX_BYTES && lsaSize > 1) return ccoAlgoLL;
  if (lsaSize <= 1 ||
      (bytes <= CCO_COLL_ONESHOT_MAX_BYTES && (uint64_t)bytes * (uint64_t)(lsaSize - 1) <= CCO_COLL_ONESHOT_READ_BYTES))
    return ccoAlgoOneShot;
  return ccoAlgoTwoShot;
}

/* Whether collective `kind` works across hosts (it has a hierarchical
 * block; every collective has one now, a new one may not). */
static bool crosses_hosts(cco_coll_kind kind) { return cco_coll_has_algo(kind, ccoAlgoHier); }

ccoResult_t cco_coll_select(const cco_coll_config* cfg, cco_coll_kind kind, size_t bytes, int lsaSize,
                            int nNodes, ccoAlgo_t* algo, char* why, size_t whySize) {
  if (nNodes > 1 && !crosses_hosts(kind)) {
    snprintf(why, whySize, "%s over %d hosts: it has no hierarchical algorithm (LSA inside each host, GDA "
             "between hosts), so it works inside one host only", cco_coll_api_name(kind), nNodes);
    return ccoUnsupported;
  }
  ccoAlgo_t forced = cfg ? cfg->forced[kind] : ccoAlgoAuto;
  bool demanded = cfg && cfg->demanded[kind];
  const char* cannot = NULL;
  char limit[96];
  if (forced != ccoAlgoAuto && !cco_coll_has_algo(kind, forced)) {
    cannot = "which it does not have";
  } else if (nNodes > 1 && forced != ccoAlgoAuto && forced != ccoAlgoHier) {
    snprintf(limit, sizeof(limit), "which works inside one host only, and this communicator spans %d hosts",
             nNodes);
    cannot = limit;
  } else if (nNodes <= 1 && forced == ccoAlgoHier) {
    cannot = "which is for communicators that span hosts";
  } else if (forced == ccoAlgoLL && bytes > CCO_COLL_LL_MAX_BYTES) {
    snprintf(limit, sizeof(limit), "whose largest all-reduce is %u bytes", (unsigned)CCO_COLL_LL_MAX_BYTES);
    cannot = limit;
  }
  if (cannot && demanded) {
    snprintf(why, whySize, "CCO_ALGO forces %s=%s for %s of %zu bytes, %s (it has: %s)", cco_coll_kind_name(kind),
             cco_coll_algo_name(forced), cco_coll_api_name(kind), bytes, cannot, cco_coll_algo_list(kind));
    return ccoInvalidUsage;
  }
  if (nNodes > 1) *algo = ccoAlgoHier; /* the one algorithm across hosts */
  else *algo = forced == ccoAlgoAuto || cannot ? auto_algo(kind, bytes, lsaSize) : forced;
  return ccoSuccess;
}

uint32_t cco_coll_default_parts(cco_platform_kind platform, int64_t envParts) {
  uint64_t parts = envParts > 0 ? (uint64_t)envParts
                   : platform == CCO_PLATFORM_CUDA ? CCO_COLL_CUDA_PARTS
                                                   : CCO_COLL_HOST_PARTS;
  return parts > CCO_COLL_MAX_PARTS ? CCO_COLL_MAX_PARTS : (uint32_t)parts;
}

int cco_coll_shared_gpu_parts(int coresidentBlocks, int sharing) {
  if (coresidentBlocks < 0) return 0;
  if (sharing <= 1) return coresidentBlocks;
  int room = coresidentBlocks / 2 < CCO_COLL_SHARED_GPU_BLOCKS ? coresidentBlocks / 2 : CCO_COLL_SHARED_GPU_BLOCKS;
  return room / sharing;
}

/* FNV-1a over the fields, 64-bit. */
static uint64_t mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xffu;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t cco_coll_signature(cco_coll_kind kind, ccoAlgo_t algo, uint32_t nParts, const ccoCollArgs* a,
                            uint64_t sendSlotOff, uint64_t recvSlotOff) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = mix(h, (uint64_t)kind);
  h = mix(h, (uint64_t)algo);
  h = mix(h, nParts);
  h = mix(h, a->count);
  h = mix(h, a->dtype);
  h = mix(h, a->op);
  h = mix(h, (uint64_t)(int64_t)a->root);
  /* Where the buffers are in the slots: the same on every rank when the
   * windows line up, different when a rank passed other offsets. */
  h = mix(h, sendSlotOff);
  h = mix(h, recvSlotOff);
  return h && h != CCO_COLL_SIGNATURE_REFUSED ? h : h + 2;
}
