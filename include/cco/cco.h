/*
 * cco — GPU communication with symmetric memory and in-kernel transports.
 *
 * Host API (C11, also valid C++). Every function returns a ccoResult_t;
 * output parameters are written only on success. Detail for the last
 * failure is in ccoGetLastError(comm) (or ccoGetLastError(NULL) for the
 * calling thread, e.g. when ccoCommCreate itself failed).
 */
#ifndef CCO_CCO_H_
#define CCO_CCO_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/cco_devcomm.h"
#include "cco/cco_window.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CCO_VERSION_MAJOR 0
#define CCO_VERSION_MINOR 1
#define CCO_VERSION_PATCH 0
/* One integer that orders releases: 1.2.3 -> 10203. */
#define CCO_VERSION_CODE(maj, min, pat) ((maj) * 10000 + (min) * 100 + (pat))
#define CCO_VERSION CCO_VERSION_CODE(CCO_VERSION_MAJOR, CCO_VERSION_MINOR, CCO_VERSION_PATCH)

/* ------------------------------------------------------------------------ */
/* Results                                                                  */
/* ------------------------------------------------------------------------ */

/* X(name, value, description). The single source of every result code: it
 * feeds the enum, ccoGetErrorString and the Python exception map. */
#define CCO_RESULT_LIST(X)                                                        \
  X(ccoSuccess, 0, "success")                                                     \
  X(ccoInvalidArgument, 1, "invalid argument")                                    \
  X(ccoInvalidUsage, 2, "invalid usage")                                          \
  X(ccoSystemError, 3, "system call failed")                                      \
  X(ccoCudaError, 4, "CUDA driver error")                                         \
  X(ccoNetError, 5, "network error")                                              \
  X(ccoRemoteError, 6, "remote rank failed or closed its connection")             \
  X(ccoTimeout, 7, "timed out")                                                   \
  X(ccoOutOfMemory, 8, "out of memory")                                           \
  X(ccoUnsupported, 9, "unsupported")                                             \
  X(ccoInternalError, 10, "internal error")

typedef enum {
#define CCO_RESULT_ENUM_(name, value, desc) name = value,
  CCO_RESULT_LIST(CCO_RESULT_ENUM_)
#undef CCO_RESULT_ENUM_
  ccoNumResults
} ccoResult_t;

/* Static description of a result code ("unknown result" when out of range). */
const char* ccoGetErrorString(ccoResult_t result);

typedef struct ccoComm ccoComm;

/* Detail string of the last failure seen on `comm`, or of the calling
 * thread's last failure when comm is NULL. Never NULL; "" when none. With
 * NULL the string stays valid until the thread's next failing call; with a
 * communicator it is a copy (a background thread may record a failure of
 * the job at any time) that stays valid until the thread has made four
 * more such calls. */
const char* ccoGetLastError(const ccoComm* comm);

/* Version of the library actually loaded (CCO_VERSION of its build). */
ccoResult_t ccoGetVersion(int* version);

/* ------------------------------------------------------------------------ */
/* Unique id and bootstrap                                                  */
/* ------------------------------------------------------------------------ */

#define CCO_UNIQUE_ID_BYTES 128
/* Hex text form: two characters per byte, plus the terminating NUL. */
#define CCO_UNIQUE_ID_STRING_BYTES (2 * CCO_UNIQUE_ID_BYTES + 1)

/* Opaque to users: magic, wire version, root address and port, and a 128-bit
 * random secret that every joiner must present to the root. Treat it like a
 * password: whoever holds it may join the job. */
typedef struct {
  char internal[CCO_UNIQUE_ID_BYTES];
} ccoUniqueId;

/* Mints a fresh id: picks the rendezvous interface (CCO_SOCKET_IFNAME), a
 * free port on it, and a random secret. Rank 0 of the job listens there. */
ccoResult_t ccoGetUniqueId(ccoUniqueId* id);

/* Writes 256 lowercase hex characters and a NUL into str (at least
 * CCO_UNIQUE_ID_STRING_BYTES bytes). */
ccoResult_t ccoUniqueIdToString(const ccoUniqueId* id, char* str, size_t strSize);
/* Parses the text form; leading/trailing whitespace is accepted. The id is
 * checked (magic, version, family) before it is written. */
ccoResult_t ccoUniqueIdFromString(const char* str, ccoUniqueId* id);

/* Room for ccoUniqueIdGetRootAddress's text, NUL included. */
#define CCO_UNIQUE_ID_ADDRESS_STRING_BYTES 80
/* Writes where the id says rank 0 listens, numeric: "192.0.2.7:23456", or
 * "[fe80::1%eth0]:23456" for IPv6, into str (at least
 * CCO_UNIQUE_ID_ADDRESS_STRING_BYTES bytes). For messages about an id, and
 * for launchers that check the id's host before starting ranks. */
ccoResult_t ccoUniqueIdGetRootAddress(const ccoUniqueId* id, char* str, size_t strSize);

/* ------------------------------------------------------------------------ */
/* Communicators                                                            */
/* ------------------------------------------------------------------------ */

/* Collective over nRanks ranks (processes or threads). perRankVmmSize is the
 * size of each rank's slot of the flat symmetric VA (0: library default).
 * Blocking steps are bounded by CCO_BOOTSTRAP_TIMEOUT. On a GPU the
 * communicator belongs to the calling thread's device (ccoCommCudaDevice). */
ccoResult_t ccoCommCreate(ccoUniqueId id, int nRanks, int rank, size_t perRankVmmSize,
                          ccoComm** comm);

/* Creates a communicator from the environment the `ccorun` launcher sets:
 * CCO_UNIQUE_ID, CCO_NRANKS, CCO_RANK. */
ccoResult_t ccoCommCreateFromEnv(size_t perRankVmmSize, ccoComm** comm);

/* Local: releases every resource of the communicator (sockets, threads,
 * memory), also after an error or ccoCommAbort. Peers still talking to this
 * rank see ccoRemoteError; idle peers are told it left normally, so their
 * liveness monitors do not take it for dead (a rank that exits without it
 * is). */
ccoResult_t ccoCommDestroy(ccoComm* comm);

/* Marks the communicator failed, wakes every thread blocked in it, and tells
 * the peers (they fail with ccoRemoteError). Safe to call from any thread
 * while another thread is blocked in a call on the same communicator. The
 * handle must still be released with ccoCommDestroy. */
ccoResult_t ccoCommAbort(ccoComm* comm);

/* The first error found in the background or on any call (a dead peer, an
 * abort); ccoSuccess while the communicator is healthy. The liveness monitor
 * (CCO_LIVENESS, on by default) sets it to ccoRemoteError within
 * milliseconds of a peer's death, with ccoGetLastError(comm) naming the
 * dead rank, and sets every device communicator's abort word. */
ccoResult_t ccoCommGetAsyncError(ccoComm* comm, ccoResult_t* asyncError);

ccoResult_t ccoCommRank(const ccoComm* comm, int* rank);
ccoResult_t ccoCommSize(const ccoComm* comm, int* nRanks);
/* Rank and size of this rank's LSA team (ranks on the same host). */
ccoResult_t ccoCommLsaRank(const ccoComm* comm, int* lsaRank);
ccoResult_t ccoCommLsaSize(const ccoComm* comm, int* lsaSize);
/* Number of distinct hosts, and the index of this rank's host (hosts are
 * numbered by their lowest world rank). */
ccoResult_t ccoCommNodeCount(const ccoComm* comm, int* nNodes);
ccoResult_t ccoCommNodeIndex(const ccoComm* comm, int* node);

/* ------------------------------------------------------------------------ */
/* Teams                                                                    */
/* ------------------------------------------------------------------------ */

/* ccoTeamKind_t and ccoTeam are defined in cco/cco_devcomm.h (shared
 * with device code). */

ccoResult_t ccoCommTeam(const ccoComm* comm, ccoTeamKind_t kind, ccoTeam* team);
ccoResult_t ccoTeamRankToWorld(const ccoComm* comm, ccoTeamKind_t kind, int teamRank,
                               int* worldRank);
/* ccoInvalidArgument when worldRank is not a member of the team. */
ccoResult_t ccoTeamRankFromWorld(const ccoComm* comm, ccoTeamKind_t kind, int worldRank,
                                 int* teamRank);

/* ------------------------------------------------------------------------ */
/* Host collectives over the bootstrap network                              */
/* ------------------------------------------------------------------------ */

/* Collective barrier across every rank of the communicator (dissemination
 * over the bootstrap sockets). */
ccoResult_t ccoBarrierAll(ccoComm* comm);

/* Collective: every rank contributes `bytesPerRank` bytes; recvbuf receives
 * nRanks * bytesPerRank bytes, rank r's contribution at r * bytesPerRank.
 * sendbuf may alias recvbuf + rank * bytesPerRank. */
ccoResult_t ccoBootstrapAllGather(ccoComm* comm, const void* sendbuf, void* recvbuf,
                                  size_t bytesPerRank);

/* ------------------------------------------------------------------------ */
/* Symmetric memory                                                         */
/* ------------------------------------------------------------------------ */

typedef enum { ccoPlatformHost = 0, ccoPlatformCuda = 1 } ccoPlatform_t;

/* Where this communicator's symmetric memory lives (CCO_PLATFORM). */
ccoResult_t ccoCommPlatform(const ccoComm* comm, ccoPlatform_t* platform);

/* The CUDA device ordinal (in this process) the communicator's memory and
 * kernels belong to; -1 on the host platform. A communicator takes the
 * creating thread's current CUDA context; a thread with none gets GPU
 * CCO_LOCAL_RANK modulo the visible GPUs (GPU 0 without CCO_LOCAL_RANK),
 * whose primary context is then made current on that thread. */
ccoResult_t ccoCommCudaDevice(const ccoComm* comm, int* device);

/* The flat virtual-address space: LSA rank p's slot starts at
 * base + p * slotSize. slotSize is perRankVmmSize rounded up to 4 GiB. */
ccoResult_t ccoCommFlatVa(const ccoComm* comm, void** base, size_t* slotSize);

/* Local (not collective): allocates `size` bytes (rounded up to the
 * platform granularity) in this rank's slot. Ranks that allocate and free in
 * the same order get the same offsets. ccoOutOfMemory when no range of the
 * slot fits or the platform has no memory, with nothing half-made. */
ccoResult_t ccoMemAlloc(ccoComm* comm, size_t size, void** ptr);

/* ptr must be what ccoMemAlloc or ccoMemImport returned and have no live
 * window (ccoInvalidUsage otherwise); anything else is ccoInvalidArgument. */
ccoResult_t ccoMemFree(ccoComm* comm, void* ptr);

/* Local: maps memory allocated outside this communicator into its slot,
 * without a copy. On CUDA, extPtr must be the base of a cuMem (VMM)
 * allocation of at least `size` bytes that can be exported as a POSIX fd
 * (for example a torch symmetric-memory tensor, whose allocation also holds
 * a signal pad). On the host platform, the base of memory of another cco
 * communicator of this process. The whole allocation is mapped; *localPtr is
 * its address in the flat VA. Release with ccoMemFree (the memory itself
 * stays with its owner). */
ccoResult_t ccoMemImport(ccoComm* comm, void* extPtr, size_t size, void** localPtr);

/* Collective over all ranks, in the same order with the same offset and
 * size everywhere (a mismatch is ccoInvalidUsage on every rank, with nothing
 * mapped). [ptr, ptr + size) must lie inside one allocation of this rank's
 * slot. Maps every LSA peer's copy at winBase + peerLsa * stride + offset
 * and returns the device-visible descriptor kernels take. */
ccoResult_t ccoWindowRegister(ccoComm* comm, void* ptr, size_t size, ccoWindow_t* win);

/* The guide's size-only form (docs/design.md): allocates and registers. The window owns the
 * memory: ccoWindowDeregister frees it. The ranks place the memory at an
 * offset free on all of them, so, unlike ccoMemAlloc, this does not depend
 * on the order earlier memory was freed in. */
ccoResult_t ccoWindowRegisterAlloc(ccoComm* comm, size_t size, ccoWindow_t* win, void** localPtr);

/* ccoMemImport + ccoWindowRegister over the whole external allocation, the
 * import placed at an offset free on every rank (as ccoWindowRegisterAlloc
 * does). The window owns the import: ccoWindowDeregister releases it. */
ccoResult_t ccoWindowRegisterExternal(ccoComm* comm, void* extPtr, size_t size, ccoWindow_t* win,
                                      void** localPtr);

/* Local: unmaps the peers' copies and frees the descriptor (and what the
 * window owns). Peers keep their own mappings until they deregister. On a
 * failed communicator the memory stays mapped until ccoCommDestroy (peers
 * may still write into it over the network); the handle is gone at once. */
ccoResult_t ccoWindowDeregister(ccoComm* comm, ccoWindow_t win);

/* Host view of a window: a copy of its descriptor and this rank's pointer. */
ccoResult_t ccoWindowGetInfo(ccoComm* comm, ccoWindow_t win, ccoWindowDevice* desc, void** localPtr);

/* Address on this host of peer's copy of localPtr, which must lie in a
 * registered window. peer is a world rank; ccoInvalidArgument when it is not
 * in this rank's LSA team. */
ccoResult_t ccoGetPeerPtr(ccoComm* comm, const void* localPtr, int peer, void** peerPtr);

/* ------------------------------------------------------------------------ */
/* Device communicators                                                     */
/* ------------------------------------------------------------------------ */

/* Collective: allocates the device resources `reqs` asks for (a resource
 * window with the LSA barriers, team tables, the abort word) and fills
 * *devComm, which kernels take by value. Every rank passes the same
 * requirements. Several device communicators may live on one
 * communicator; each is released by ccoDevCommDestroy or ccoCommDestroy. */
ccoResult_t ccoDevCommCreate(ccoComm* comm, const ccoDevCommRequirements* reqs,
                             ccoDevComm* devComm);

/* Local: releases what ccoDevCommCreate allocated (and the device copies
 * made of it). Kernels using it must have finished. */
ccoResult_t ccoDevCommDestroy(ccoComm* comm, ccoDevComm* devComm);

/* A copy of *devComm in device-visible memory, for callers that pass a
 * pointer (Python, Triton). Freed with the device communicator. */
ccoResult_t ccoDevCommCopyToDevice(ccoComm* comm, const ccoDevComm* devComm,
                                   ccoDevComm** devicePtr);

/* ------------------------------------------------------------------------ */
/* SDMA from the host                                                       */
/* ------------------------------------------------------------------------ */

/* Enqueues on `stream` (a CUstream / cudaStream_t; NULL is the legacy
 * default stream) a copy-engine copy of `bytes` from this rank's copy of
 * srcWin at srcOff to LSA peer `peer`'s (a world rank on this host) copy of
 * dstWin at dstOff, then, when sigWin is not NULL, the store of sigValue into
 * the peer's copy of the uint64_t at sigWin + sigOff, ordered after the data.
 * The host platform copies and signals before returning. ccoUnsupported
 * when CCO_ENABLE_SDMA=0. */
ccoResult_t ccoSdmaPutAsync(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff,
                            ccoWindow_t srcWin, size_t srcOff, size_t bytes, ccoWindow_t sigWin,
                            size_t sigOff, uint64_t sigValue, void* stream);

/* Enqueues on `stream` a wait until this rank's copy of the uint64_t at
 * sigWin + sigOff is >= value (wrapping compare). The host platform waits
 * on the calling thread, up to CCO_BOOTSTRAP_TIMEOUT (ccoTimeout), or until
 * the communicator fails (its async error, with its detail). */
ccoResult_t ccoStreamWaitSignal(ccoComm* comm, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                                void* stream);

/* ------------------------------------------------------------------------ */
/* One-sided calls to any peer, ordered on a stream                          */
/* ------------------------------------------------------------------------ */

/* The counterparts of NVSHMEM's *_on_stream calls. Each enqueues its work
 * on `stream` (a CUstream / cudaStream_t; NULL is the legacy default
 * stream) and returns: no allocation and no host synchronisation, so they
 * can be captured in CUDA graphs. `peer` is a world rank; windows and
 * offsets are as in ccoSdmaPutAsync (bounds checked; a signal is an 8-byte
 * aligned uint64_t in a window). A peer on this host (LSA) gets copies and
 * stream memory operations; a peer on another host gets one block on the
 * stream that posts the put and the signal through GDA and waits until
 * they are at the peer. The latter use the collectives' state, made by the
 * first collective or ccoBarrierOnStream on every rank: before it, such a
 * call is ccoInvalidUsage. The host platform does each step before
 * returning. Waiting for a signal is ccoStreamWaitSignal. */
typedef enum { ccoStreamSignalSet = 0, ccoStreamSignalAdd = 1 } ccoStreamSignalOp_t;

/* Copies `bytes` from this rank's copy of srcWin at srcOff into peer's copy
 * of dstWin at dstOff (the copy engine through the flat VA; a GDA put to
 * another host). */
ccoResult_t ccoPutOnStream(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                           size_t srcOff, size_t bytes, void* stream);
/* The same, then peer's signal at sigWin + sigOff set to (ccoStreamSignalSet)
 * or increased by (ccoStreamSignalAdd) `value`, ordered after the data: a
 * peer that sees the signal sees the data. */
ccoResult_t ccoPutSignalOnStream(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                                 size_t srcOff, size_t bytes, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                                 ccoStreamSignalOp_t op, void* stream);
/* peer's signal alone, set or increased once the stream's earlier work is
 * done. Adds are atomic: several ranks may add to one signal (adds from
 * this host and from others mix exactly on the staged GDA path and the host
 * platform; under RDMA NIC atomics they are atomic only among themselves:
 * docs/collectives_host.md). */
ccoResult_t ccoSignalOnStream(ccoComm* comm, int peer, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                              ccoStreamSignalOp_t op, void* stream);
/* Collective over the communicator: every rank's stream work enqueued
 * before it (puts and signals included) is complete and visible before any
 * rank's stream work after it starts. A kernel of one block: an LSA barrier
 * on one host, the world barrier (LSA, rail GDA, LSA) across hosts, hosts
 * of any size; on the host platform it waits up to CCO_COLL_TIMEOUT. It
 * uses the collectives' state: like the first collective, the first of
 * these calls or collectives sets it up on every rank and cannot be
 * captured. */
ccoResult_t ccoBarrierOnStream(ccoComm* comm, void* stream);
/* This rank's puts and signals enqueued on `stream` before it are complete
 * and visible to their peers before the stream's later work starts. They
 * are stream-ordered copies and stores, or GDA blocks that end once their
 * work is at the peer, so this enqueues nothing; it is here for code
 * written against NVSHMEM's quiet_on_stream. */
ccoResult_t ccoQuietOnStream(ccoComm* comm, void* stream);

/* ------------------------------------------------------------------------ */
/* Collectives on windows, ordered on a stream                              */
/* ------------------------------------------------------------------------ */

/* Every rank of the communicator calls the same collective with the same
 * count, type, operator (and root), in the same order. sendbuf and recvbuf
 * lie inside windows registered on `comm` (ccoWindowRegister...), at the same
 * offsets on every rank; recvbuf == sendbuf is in place (all-gather and
 * reduce-scatter: NCCL's forms, below). count 0 takes NULL buffers. The
 * call enqueues the work on `stream` (a CUstream / cudaStream_t; NULL is the
 * legacy default stream) and returns: no host synchronisation and no
 * allocation per call, so it can be captured in a CUDA graph (the first
 * collective of a communicator sets its state up, on every rank together:
 * make it before capturing). Collectives of a communicator must run in the
 * order they were called (one stream, or ordered streams). The host
 * platform runs the same device code on CPU threads before returning.
 * The algorithm is chosen by size and LSA size; CCO_ALGO forces one
 * (docs/collectives_host.md). One host only for now (ccoUnsupported on
 * several). Errors: a buffer outside a window (ccoInvalidArgument, naming
 * it), a count that overflows the window, an unknown type or operator;
 * ranks that disagree are reported by the device code (the call on the
 * host platform, ccoCommGetAsyncError and the next call on a GPU) instead
 * of hanging, except under LL (small all-reduces), which has no signature. */
ccoResult_t ccoAllReduce(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t count,
                         ccoDataType_t dtype, ccoRedOp_t op, void* stream);
/* recvbuf holds nRanks x sendcount elements, rank r's at r x sendcount.
 * In place: sendbuf == recvbuf + rank x sendcount. */
ccoResult_t ccoAllGather(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                         ccoDataType_t dtype, void* stream);
/* sendbuf holds nRanks x recvcount elements; rank r gets the reduction of
 * every rank's block r. In place: recvbuf == sendbuf + rank x recvcount. */
ccoResult_t ccoReduceScatter(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                             ccoDataType_t dtype, ccoRedOp_t op, void* stream);
/* Block p of sendbuf (count elements) goes to rank p, into block `rank` of
 * its recvbuf. Not in place. */
ccoResult_t ccoAlltoAll(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t count,
                        ccoDataType_t dtype, void* stream);
/* root's sendbuf (count elements) into every rank's recvbuf. */
ccoResult_t ccoBroadcast(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t count,
                         ccoDataType_t dtype, int root, void* stream);

/* The algorithm a collective of `bytes` would use on this communicator
 * (CCO_ALGO included); `coll` is "allreduce", "allgather", "reducescatter",
 * "alltoall" or "broadcast". */
ccoResult_t ccoCollAlgorithm(const ccoComm* comm, const char* coll, size_t bytes, ccoAlgo_t* algo);

#ifdef __cplusplus
} /* extern "C" */

/* The guide's C++ overloads. */
static inline ccoResult_t ccoWindowRegister(ccoComm* comm, size_t size, ccoWindow_t* win,
                                            void** localPtr) {
  return ccoWindowRegisterAlloc(comm, size, win, localPtr);
}
#endif

#endif /* CCO_CCO_H_ */
