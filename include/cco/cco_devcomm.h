/*
 * The device communicator ABI, shared by host code, CUDA kernels and NVPTX
 * bitcode: ccoDevCommRequirements (what to allocate) and ccoDevComm (what
 * kernels take by value). Fixed-width fields only; layouts are asserted.
 */
#ifndef CCO_CCO_DEVCOMM_H_
#define CCO_CCO_DEVCOMM_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_window.h"

/* ------------------------------------------------------------------ teams */

#ifndef CCO_TEAM_DEFINED_
#define CCO_TEAM_DEFINED_
typedef enum {
  ccoTeamWorld = 0,     /* every rank */
  ccoTeamLsa = 1,       /* ranks on this rank's host */
  ccoTeamCrossNode = 2, /* this rank and every rank on another host */
  ccoTeamRail = 3,      /* ranks with this rank's LSA rank, one per host */
  ccoNumTeams
} ccoTeamKind_t;

/* A team as seen from this rank. Member i of the team is world rank
 * `myWorldRank + (i - rank) * stride` when stride != 0. stride == 0 means
 * the members do not form an arithmetic progression in world ranks; then
 * translate through the member table (ccoTeamRankToWorld on the host,
 * ccoDevTeamRankToWorld on the device). */
typedef struct ccoTeam {
  int32_t nRanks;
  int32_t rank;
  int32_t stride;
} ccoTeam;
#endif

/* ------------------------------------------------------------ requirements */

typedef enum {
  ccoGdaConnectionNone = 0,      /* no network endpoints */
  ccoGdaConnectionCrossNode = 1, /* endpoints to ranks on other hosts (default) */
  ccoGdaConnectionFull = 2,      /* endpoints to every rank, this host included */
  ccoGdaConnectionRail = 3,      /* endpoints to the rail team */
} ccoGdaConnectionType_t;

#define CCO_DEV_COMM_REQUIREMENTS_MAGIC 0x43435251u /* "QRCC" */
#define CCO_DEV_COMM_REQUIREMENTS_VERSION 1u

/* What ccoDevCommCreate allocates. Start from
 * CCO_DEV_COMM_REQUIREMENTS_INITIALIZER (size, magic and version are
 * checked, so a caller built against another layout is refused), then set
 * fields. Every rank passes the same requirements. */
typedef struct {
  uint32_t size;    /* sizeof(ccoDevCommRequirements) */
  uint32_t magic;   /* CCO_DEV_COMM_REQUIREMENTS_MAGIC */
  uint32_t version; /* CCO_DEV_COMM_REQUIREMENTS_VERSION */
  uint32_t gdaConnectionType;   /* ccoGdaConnectionType_t; default ccoGdaConnectionCrossNode */
  uint32_t gdaContextCount;     /* 1..64 GDA contexts (queues) per peer; default 1 */
  uint32_t gdaSignalCount;      /* 0..1048576 GDA signal slots; default 64 */
  uint32_t gdaCounterCount;     /* 0..1048576 GDA counters; default 64 */
  uint32_t gdaQueueDepth;       /* power of two 16..65536; default 1024 */
  uint32_t gdaTrafficClass;     /* 0..255 traffic class (DSCP << 2 | ECN); 0: none asked; default 0 */
  uint32_t lsaBarrierCount;     /* 0..4096 LSA barriers; default 1 */
  uint32_t railGdaBarrierCount; /* 0..4096 GDA barriers over the rail team; default 0 */
  uint32_t sdmaQueueCount;      /* 0..8 SDMA queues per LSA peer; 0 means 2; default 0 */
  uint32_t barrierCount;        /* 0..4096 world barriers (LSA part + rail GDA part); default 0 */
  uint32_t reserved[3];         /* zero */
} ccoDevCommRequirements;

#define CCO_DEV_COMM_REQUIREMENTS_INITIALIZER                                                     \
  {                                                                                               \
    (uint32_t)sizeof(ccoDevCommRequirements), CCO_DEV_COMM_REQUIREMENTS_MAGIC,                    \
        CCO_DEV_COMM_REQUIREMENTS_VERSION, ccoGdaConnectionCrossNode, 1, 64, 64, 1024, 0, 1, 0,    \
        0, 0, { 0, 0, 0 }                                                                         \
  }

/* -------------------------------------------------------- device communicator */

#define CCO_DEV_COMM_MAGIC 0x44434f43u /* "COCD" */
#define CCO_DEV_COMM_VERSION 1u

/* Device status codes returned by device-side waits. */
typedef enum {
  ccoDevSuccess = 0,
  ccoDevAborted = 1, /* the host set the abort word (a failure, or ccoCommAbort) */
  ccoDevTimeout = 2, /* a timeout variant gave up */
  ccoDevUnsupported = 3, /* the transport is off (CCO_ENABLE_SDMA=0) or absent */
  ccoDevInvalid = 4,     /* a bad peer, queue or window range */
  ccoDevNoPeer = 5,      /* GDA: the peer has no endpoint under the connection type */
} ccoDevStatus_t;

/* Trivially copyable: pass it by value into kernels (it lands in kernel
 * parameter space), or use the device copy from ccoDevCommCopyToDevice. */
typedef struct ccoDevComm {
  uint32_t magic;   /* CCO_DEV_COMM_MAGIC */
  uint32_t version; /* CCO_DEV_COMM_VERSION */
  int32_t rank;
  int32_t worldSize;
  int32_t lsaRank;
  int32_t lsaSize;
  int32_t node;   /* this rank's host */
  int32_t nNodes; /* number of hosts */
  ccoTeam teams[4];        /* indexed by ccoTeamKind_t */
  uint64_t teamMembers[4]; /* device address of int32_t[nRanks] world ranks of each team */
  uint64_t flatBase;       /* flat VA: LSA rank p's slot at flatBase + p * slotSize */
  uint64_t slotSize;
  ccoWindow_t resourceWindow; /* per-rank resources (barriers, signals) */
  uint64_t resourceBase;      /* the resource window in LSA rank 0's slot */
  uint64_t abortFlag;         /* device address of a uint32_t the host sets on failure */
  uint32_t lsaBarrierCount;   /* LSA barriers: lsaBarrierCount + barrierCount */
  uint32_t barrierCount;
  uint32_t lsaBarrierOffset;  /* inboxes: uint32_t[barriers][lsaSize] in the resource window */
  uint32_t lsaEpochOffset;    /* uint32_t[barriers]: this rank's epoch of each barrier */
  uint32_t sdmaQueueCount;
  uint32_t gdaConnectionType;
  uint32_t gdaContextCount;
  uint32_t gdaSignalCount;
  uint32_t gdaCounterCount;
  uint32_t gdaQueueDepth;
  uint64_t sdma;     /* device address of SDMA state; 0 when SDMA is off (CCO_ENABLE_SDMA=0) */
  uint64_t gda;      /* device address of GDA state; 0 when the connection type gives no rank a peer */
  uint64_t handle;   /* host bookkeeping; opaque */
  uint32_t lsaScopeGpu; /* 1: every LSA peer is this GPU, so GPU-scope ordering suffices */
  uint32_t pad0;
  uint64_t reserved[4];
} ccoDevComm;

#ifdef __cplusplus
#define CCO_STATIC_ASSERT_ static_assert
#else
#define CCO_STATIC_ASSERT_ _Static_assert
#endif
CCO_STATIC_ASSERT_(sizeof(ccoDevCommRequirements) == 64, "ccoDevCommRequirements layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevCommRequirements, lsaBarrierCount) == 36, "ccoDevCommRequirements layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevCommRequirements, barrierCount) == 48, "ccoDevCommRequirements layout");
CCO_STATIC_ASSERT_(sizeof(ccoTeam) == 12, "ccoTeam layout");
CCO_STATIC_ASSERT_(sizeof(ccoDevComm) == 256, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, teams) == 32, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, teamMembers) == 80, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, flatBase) == 112, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, resourceWindow) == 128, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, abortFlag) == 144, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, lsaBarrierCount) == 152, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, sdma) == 192, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, handle) == 208, "ccoDevComm layout");
CCO_STATIC_ASSERT_(offsetof(ccoDevComm, lsaScopeGpu) == 216, "ccoDevComm layout");

/* ------------------------------------------------------ names before 0.2 */
/* The 0.1 spellings, kept so code written against 0.1 still compiles.
 * Define CCO_NO_COMPAT_NAMES to hide them (and check that a program uses
 * only the current names). */
#ifndef CCO_NO_COMPAT_NAMES
typedef ccoTeam ccoTeam_t;
#define CCO_GDA_CONNECTION_NONE ccoGdaConnectionNone
#define CCO_GDA_CONNECTION_CROSSNODE ccoGdaConnectionCrossNode
#define CCO_GDA_CONNECTION_FULL ccoGdaConnectionFull
#define CCO_GDA_CONNECTION_RAIL ccoGdaConnectionRail
#endif /* CCO_NO_COMPAT_NAMES */

#endif /* CCO_CCO_DEVCOMM_H_ */
