/*
 * The collectives' host engine: what src/comm/coll_api.c (the public
 * ccoAllReduce ...) calls below the communicator.
 *
 * The engine is registered with the transports (src/comm/transports.c) so
 * that it lives and dies with the communicator: `start` makes an empty
 * engine, `stop` joins its CPU workers, `destroy` frees what it owns. The
 * state a collective needs is made by the first collective call
 * (collective: every rank's first call makes it), in two halves:
 *
 * - the communicator's part, made and owned by src/comm like any other: an
 *   internal device communicator (one LSA barrier per part) and a scratch
 *   window, zeroed once; they go with the communicator's other device
 *   communicators and windows in ccoCommDestroy;
 * - the engine's part (cco_coll_engine_setup): the status word the blocks
 *   report failures to, the CPU workers (host platform) or the kernel
 *   module (CUDA platform).
 *
 * A call (cco_coll_engine_launch) then runs the device building blocks of
 * cco/cco_coll.h: on nParts CPU threads before returning (host platform), or
 * as one kernel of nParts blocks on the caller's stream (CUDA platform).
 */
#ifndef CCO_COLL_COLL_H_
#define CCO_COLL_COLL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "cco/cco.h"
#include "coll/kernels/coll_kernels.h"
#include "coll/kernels/coll_stream.h"
#include "platform/platform.h"
#include "transport/transport.h"

/* The collectives with a host call, in the order of the kinds' names. */
typedef enum {
  CCO_COLL_ALLREDUCE = 0,
  CCO_COLL_ALLGATHER = 1,
  CCO_COLL_REDUCESCATTER = 2,
  CCO_COLL_ALLTOALL = 3,
  CCO_COLL_BROADCAST = 4,
  CCO_COLL_KINDS
} cco_coll_kind;

/* "allreduce" ... (ccoCollAlgorithm's names) and "ccoAllReduce" ...
 * (CCO_COLL_STREAM_KIND is "ccoBarrierOnStream"). */
const char* cco_coll_kind_name(cco_coll_kind kind);
const char* cco_coll_api_name(cco_coll_kind kind);
/* -1 when the name is none of the kinds'. */
int cco_coll_kind_from_name(const char* name);
/* "oneshot", "ll", ... ("auto" for ccoAlgoAuto, "?" out of range). */
const char* cco_coll_algo_name(ccoAlgo_t algo);

/* ------------------------------------------------------------ selection */
/* src/coll/coll_select.c: which algorithm a call uses. */

/* What CCO_ALGO forces, per kind (ccoAlgoAuto: nothing forced). A bare
 * name is a preference, for the calls that can use it (cco_coll_types.h);
 * a kind=name entry is a demand, refused where it cannot be met. */
typedef struct {
  ccoAlgo_t forced[CCO_COLL_KINDS];
  bool demanded[CCO_COLL_KINDS]; /* named for this kind (kind=name) */
} cco_coll_config;

/* Parses CCO_ALGO: empty or "auto", one algorithm name for every
 * collective ("ll"), or a list of kind=name ("allreduce=ll,allgather=push"),
 * or both ("ll,allgather=push"). On failure writes why into `why`. */
ccoResult_t cco_coll_config_parse(const char* text, cco_coll_config* cfg, char* why, size_t whySize);

/* Whether collective `kind` has algorithm `algo`. */
bool cco_coll_has_algo(cco_coll_kind kind, ccoAlgo_t algo);
/* "oneshot, ll, twoshot": the algorithms of a kind, for messages. */
const char* cco_coll_algo_list(cco_coll_kind kind);

/* The algorithm for a call of `bytes` (count x element size, count as the
 * host call takes it) over lsaSize ranks on nNodes hosts. ccoUnsupported
 * for several hosts. An algorithm CCO_ALGO names for every collective is
 * used by the calls that can use it (the collective has it; LL within its
 * limit), the others choose as without it; one named for this collective
 * (kind=name) that it cannot use is ccoInvalidUsage, why in `why`. */
ccoResult_t cco_coll_select(const cco_coll_config* cfg, cco_coll_kind kind, size_t bytes, int lsaSize,
                            int nNodes, ccoAlgo_t* algo, char* why, size_t whySize);

/* Parts (CPU threads or GPU blocks) per call before the co-residency cap:
 * CCO_COLL_PARTS when set, else the platform's default. Every algorithm of a
 * communicator uses the same count for its whole life (see coll_select.c). */
uint32_t cco_coll_default_parts(cco_platform_kind platform, int64_t envParts);

/* Ranks sharing one GPU (MPS): the most blocks of theirs, all together,
 * that may wait in collectives at once. */
#define CCO_COLL_SHARED_GPU_BLOCKS 64

/* The parts each of `sharing` ranks on one GPU may run, given how many
 * blocks of the collectives' kernels fit on it at once: the whole room for
 * one rank; for several, half of it and at most CCO_COLL_SHARED_GPU_BLOCKS,
 * split between them (0 when not even one block each fits). Waiting blocks
 * hold their SMs, and a late rank still has to run what comes before its
 * collective on the same GPU (a GEMM wants whole SMs): with 8 ranks on one
 * H100 (132 SMs), 16 parts each (128 waiting blocks) hung behind a late
 * rank's cuBLAS GEMM, while 8 parts each and 4 ranks of 16 ran. */
int cco_coll_shared_gpu_parts(int coresidentBlocks, int sharing);

/* The signature of a call that cannot match any real one: what a rank
 * whose arguments were refused launches, so that peers that did launch fail
 * their signature check instead of waiting for it (and ranks that all
 * refused the same call meet and pass). */
#define CCO_COLL_SIGNATURE_REFUSED 0x5245465553454421ull /* "!DESUFER" */

/* The call signature the device blocks compare across ranks: a hash of
 * everything every rank must agree on (not the call's sequence number, so
 * a CUDA graph replays the same value). Never 0 (0 turns the check off). */
uint64_t cco_coll_signature(cco_coll_kind kind, ccoAlgo_t algo, uint32_t nParts, const ccoCollArgs* a,
                            uint64_t sendSlotOff, uint64_t recvSlotOff);

/* ------------------------------------------------------------ engine */

typedef struct cco_coll_engine cco_coll_engine;

/* The registry entry (src/comm/transports.c). */
extern const cco_transport_ops cco_coll_transport_ops;

/* The engine's part of the state, after the communicator made its part.
 * dcHost is the device communicator's host copy (the host platform's CPU
 * blocks use it), dcDev its device copy (kernels take it). nParts is what
 * every rank agreed on. Local; on failure nothing of it stays. */
typedef struct {
  ccoDevComm dcHost;
  const ccoDevComm* dcDev;
  ccoWindow_t scratchWin;
  uint64_t scratchBytes;
  uint32_t nParts;
  double timeout;         /* host platform: seconds a call may run (0: no limit) */
  cco_coll_config config; /* CCO_ALGO, parsed once */
} cco_coll_setup;

/* Before the collective part of setup, locally: the most parts this rank
 * can run at once, `wanted` or fewer (CUDA: loads the kernel module and caps
 * the grid so that the grids of every rank sharing this GPU fit on it at
 * once). Fails with ccoUnsupported when this build has no kernels for the
 * CUDA platform. */
ccoResult_t cco_coll_engine_prepare(cco_coll_engine* e, uint32_t wanted, uint32_t* nParts);
ccoResult_t cco_coll_engine_setup(cco_coll_engine* e, const cco_coll_setup* s);
bool cco_coll_engine_ready(const cco_coll_engine* e);
/* What setup was given (valid while ready). */
const cco_coll_setup* cco_coll_engine_config(const cco_coll_engine* e);
/* Undoes setup (after a failure of another rank's setup). */
void cco_coll_engine_reset(cco_coll_engine* e);

/* Runs (host) or enqueues (CUDA) one call. The host platform returns the
 * blocks' verdict: ccoSuccess, or the failure it recorded in the status
 * word; a call that runs past the timeout fails the communicator
 * (ctx->fail) and returns ccoTimeout. */
ccoResult_t cco_coll_engine_launch(cco_coll_engine* e, cco_coll_kind kind, ccoAlgo_t algo, const ccoCollArgs* a,
                                   void* stream);

/* The status word's content (a snapshot; status 0 when healthy, and kind,
 * algo and part valid once `ready`). */
cco_coll_status cco_coll_engine_status(const cco_coll_engine* e);

/* The communicator's first failure seen by the collectives (a device
 * status, or the communicator's own failure), kept so that every later
 * call names it. note: the first caller's result and text stay, and true
 * is returned to it; failure: NULL until noted. */
bool cco_coll_engine_note_failure(cco_coll_engine* e, ccoResult_t res, const char* text);
const char* cco_coll_engine_failure(const cco_coll_engine* e, ccoResult_t* res);

/* ------------------------------------------------------------ blocks */
/* src/coll/coll_blocks.c: the building blocks a call can run. */

typedef ccoDevStatus_t (*cco_coll_block_fn)(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                            uint32_t nParts);
typedef struct {
  const char* kernel;     /* its kernel's name in the fatbin */
  cco_coll_block_fn host; /* the block itself, compiled for the CPU */
  cco_coll_kind kind;
  ccoAlgo_t algo;
} cco_coll_block;

#define CCO_COLL_BLOCKS 12
/* Index of the block of (kind, algo) in [0, CCO_COLL_BLOCKS), -1 when none. */
int cco_coll_block_index(cco_coll_kind kind, ccoAlgo_t algo);
const cco_coll_block* cco_coll_block_at(int index);

/* Whether `stream` is being captured into a CUDA graph (false on the host
 * platform). */
ccoResult_t cco_coll_engine_capturing(cco_coll_engine* e, void* stream, bool* capturing);

/* ------------------------------------------------------------ stream calls */
/* For ccoBarrierOnStream and the one-sided stream calls to peers on other
 * hosts (src/comm/stream_api.c), after setup; the work is coll_stream.h's.
 * The host platform runs each on the calling thread (the barrier bounded by
 * the timeout); CUDA launches one block on `stream`. */

/* One host: the last LSA barrier of the engine's device communicator, one
 * past the collectives' parts; several: its world barrier 0. */
ccoResult_t cco_coll_engine_stream_barrier(cco_coll_engine* e, void* stream);
/* A GDA put and/or signal, complete at the peer when it ends. */
ccoResult_t cco_coll_engine_stream_gda(cco_coll_engine* e, const cco_stream_gda_args* a, void* stream);

/* The result code and a sentence for a device status. */
ccoResult_t cco_coll_status_result(ccoDevStatus_t st);
const char* cco_coll_status_meaning(ccoDevStatus_t st);

/* The embedded kernels (src/coll/kernels/, built by nvcc into a fatbin):
 * cco_coll_fatbin_size is 0 in a build without nvcc. */
extern const unsigned char cco_coll_fatbin[];
extern const size_t cco_coll_fatbin_size;

#endif /* CCO_COLL_COLL_H_ */
