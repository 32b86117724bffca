/*
 * The MoE op inside libcco (cco/cco_moe.h is its public face): the config
 * checks and arena layout (moe_layout.c), the op's life and calls
 * (moe_op.c), and the runs of its device functions
 * (cco/device/impl/moe_impl.h) on CPU threads or as CUDA kernels
 * (moe_launch.c, kernels in src/ops/kernels/).
 */
#ifndef CCO_OPS_MOE_H_
#define CCO_OPS_MOE_H_

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"
#include "cco/cco_moe.h"
#include "cco/device/impl/moe_impl.h"
#include "comm/comm.h"
#include "ops/moe_kernel_names.h"

#define CCO_MOE_MAX_TOPK 64
#define CCO_MOE_MAX_PARTS 128

/* The regions a communicator spanning hosts adds (0 bytes on one host):
 * the count matrix, the dispatch staging, the combine staging and the
 * staging rows of the routing (ccoMoeDevArgs). */
typedef enum {
  CCO_MOE_NET_COUNTS = 0,
  CCO_MOE_NET_STAGE_X,
  CCO_MOE_NET_STAGE_S,
  CCO_MOE_NET_STAGE_W,
  CCO_MOE_NET_STAGE_I,
  CCO_MOE_NET_STAGE_SRC,
  CCO_MOE_NET_COMB_STAGE,
  CCO_MOE_NET_COMB_STAGE_W,
  CCO_MOE_NET_ROUTE_STAGE,
  CCO_MOE_NET_REGIONS
} cco_moe_net_region;

typedef struct {
  uint64_t offset[ccoMoeNumRegions];
  uint64_t bytes[ccoMoeNumRegions];
  uint64_t netOffset[CCO_MOE_NET_REGIONS];
  uint64_t netBytes[CCO_MOE_NET_REGIONS];
  uint64_t stageSlots; /* rows of the staging regions (0 on one host) */
  uint64_t stateBytes; /* the state at offset 0 */
  uint64_t total;
  uint64_t tokenBytes, scaleCount, maxRecv;
} cco_moe_layout_t;

/* ccoInvalidArgument and why, or ccoSuccess. */
ccoResult_t cco_moe_check_config(const ccoMoeConfig* c, int nRanks, char* why, size_t whySize);
uint32_t cco_moe_max_recv(const ccoMoeConfig* c, int nRanks);
/* net: the communicator spans hosts (the staging regions are added). */
void cco_moe_layout(const ccoMoeConfig* c, int nRanks, int net, cco_moe_layout_t* l);

typedef enum { CCO_MOE_IDLE = 0, CCO_MOE_DISPATCHED = 1 } cco_moe_phase;

struct ccoMoeOp {
  ccoComm* comm;
  ccoMoeConfig cfg;
  cco_moe_layout_t layout;
  int rank, nRanks;
  int net; /* the communicator spans hosts: GDA to the ranks of the others */
  ccoWindow_t win;
  char* arena; /* this rank's copy */
  ccoDevComm dc;
  const ccoDevComm* dcDev; /* device copy (CUDA) or &dc */
  ccoMoeDevStatus* status; /* host view */
  uint64_t statusDev;
  uint32_t parts;
  double timeout;
  uint32_t combineLoads; /* CCO_MOE_COMBINE_LOADS */
  void* module; /* CUDA */
  void* kernels[2];
  pthread_mutex_t lock;
  cco_moe_phase phase;
  int numTokens; /* the last dispatch's */
  ccoMoeStats stats;
  ccoResult_t failed; /* the first failure the parts reported, kept */
  char failure[CCO_ERROR_TEXT_BYTES];
};

/* moe_launch.c. prepare: the kernels (CUDA) and the parts per call.
 * run: dispatch (which 0) or combine (1) of the op: on parts CPU threads
 * before returning (host platform) or one kernel on the stream. */
ccoResult_t cco_moe_prepare(ccoMoeOp* op);
void cco_moe_release(ccoMoeOp* op);
ccoResult_t cco_moe_run(ccoMoeOp* op, int which, const ccoMoeDevArgs* a, void* stream);

/* The fatbin of src/ops/kernels (size 0 in a build without nvcc). */
extern const unsigned char cco_moe_fatbin[];
extern const size_t cco_moe_fatbin_size;

#endif /* CCO_OPS_MOE_H_ */
