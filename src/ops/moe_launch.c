/*
 * Where the MoE op's device functions run. The host platform: one CPU
 * thread per part, started per call and joined before the call returns (a
 * block of one thread; the parts wait for each other and for the peers,
 * so they must all run at once). The CUDA platform: the kernels of the
 * embedded fatbin (src/ops/kernels/moe_kernels.cu), one block per part on
 * the caller's stream, nothing allocated or synchronised per call.
 */
#include <string.h>

#include "ops/moe.h"

/* Parts per call: enough warps for the mode's tokens, within the goal of
 * at most 24 SMs busy with communication in throughput mode (docs/moe.md);
 * two CPU threads on the host platform. */
#define CCO_MOE_PARTS_THROUGHPUT 24u
#define CCO_MOE_PARTS_LOW_LATENCY 8u
#define CCO_MOE_PARTS_HOST 2u

static uint32_t default_parts(const ccoMoeOp* op) {
  if (op->cfg.parts > 0) return (uint32_t)op->cfg.parts;
  if (op->comm->platform.kind != CCO_PLATFORM_CUDA) return CCO_MOE_PARTS_HOST;
  return op->cfg.mode == ccoMoeLowLatency ? CCO_MOE_PARTS_LOW_LATENCY : CCO_MOE_PARTS_THROUGHPUT;
}

/* The grid every rank sharing this GPU can run at once (the combine's
 * parts wait for each other). */
static ccoResult_t fit_parts(ccoMoeOp* op, uint32_t wanted, uint32_t* parts) {
  cco_platform* p = &op->comm->platform;
  const cco_topology* topo = &op->comm->topo;
  int sharing = cco_topology_lsa_sharing_gpu(topo, p->identity.busId);
  int fit = -1;
  for (int k = 0; k < 2; k++) {
    int blocks = 0;
    CCO_CHECK(p->ops->kernel_coresident(p, op->kernels[k], CCO_MOE_THREADS, &blocks));
    if (fit < 0 || blocks < fit) fit = blocks;
  }
  fit /= sharing;
  if (fit < 1)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_OPS,
                     "rank %d: the MoE kernels' blocks of %d threads do not fit on gpu %s when %d ranks share it",
                     op->rank, CCO_MOE_THREADS, p->identity.busId, sharing);
  *parts = wanted < (uint32_t)fit ? wanted : (uint32_t)fit;
  return ccoSuccess;
}

ccoResult_t cco_moe_prepare(ccoMoeOp* op) {
  cco_platform* p = &op->comm->platform;
  uint32_t wanted = default_parts(op);
  if (p->kind != CCO_PLATFORM_CUDA) {
    op->parts = wanted;
    return ccoSuccess;
  }
  if (cco_moe_fatbin_size == 0)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_OPS,
                     "rank %d: this libcco was built without nvcc, so it holds no GPU kernels for the MoE op; "
                     "rebuild it where nvcc is installed (the host platform, CCO_PLATFORM=host, runs it on CPU "
                     "threads)",
                     op->rank);
  CCO_CHECK(p->ops->module_get(p, cco_moe_fatbin, &op->module));
  ccoResult_t res = p->ops->kernel_get(p, op->module, CCO_MOE_DISPATCH_KERNEL, &op->kernels[0]);
  if (res == ccoSuccess) res = p->ops->kernel_get(p, op->module, CCO_MOE_COMBINE_KERNEL, &op->kernels[1]);
  if (res == ccoSuccess) res = fit_parts(op, wanted, &op->parts);
  return res;
}

void cco_moe_release(ccoMoeOp* op) {
  cco_platform* p = &op->comm->platform;
  if (op->module) p->ops->module_put(p, op->module);
  op->module = NULL;
  op->kernels[0] = op->kernels[1] = NULL;
}

/* ------------------------------------------------------------ host */

typedef struct {
  const ccoMoeOp* op;
  const ccoMoeDevArgs* args;
  int which;
  uint32_t part;
} host_part;

static void* run_host_part(void* arg) {
  host_part* h = arg;
  if (h->which == 0) cco_impl_moe_dispatch_part(&h->op->dc, h->args, h->part, h->op->parts);
  else cco_impl_moe_combine_part(&h->op->dc, h->args, h->part, h->op->parts);
  return NULL;
}

static ccoResult_t run_on_host(ccoMoeOp* op, int which, const ccoMoeDevArgs* a) {
  pthread_t threads[CCO_MOE_MAX_PARTS];
  host_part parts[CCO_MOE_MAX_PARTS];
  uint32_t started = 0;
  ccoResult_t res = ccoSuccess;
  for (uint32_t i = 0; i < op->parts; i++) {
    parts[i] = (host_part){op, a, which, i};
    int rc = pthread_create(&threads[i], NULL, run_host_part, &parts[i]);
    if (rc != 0) {
      res = cco_error(NULL, ccoSystemError, CCO_SUBSYS_OPS, "rank %d: cannot start the MoE op's part %u: %s",
                      op->rank, i, strerror(rc));
      break;
    }
    started++;
  }
  /* Parts that did start wait for the missing ones until the communicator
   * fails: fail it, so their waits end. */
  if (res != ccoSuccess) cco_comm_fail_async(op->comm, res);
  for (uint32_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
  return res;
}

/* ------------------------------------------------------------ CUDA */

static ccoResult_t run_on_gpu(ccoMoeOp* op, int which, const ccoMoeDevArgs* a, void* stream) {
  cco_platform* p = &op->comm->platform;
  /* cuLaunchKernel copies the parameters before returning. */
  const ccoDevComm* dc = op->dcDev;
  ccoMoeDevArgs args = *a;
  void* params[2] = {&dc, &args};
  return p->ops->launch(p, op->kernels[which], op->parts, CCO_MOE_THREADS, stream, params);
}

ccoResult_t cco_moe_run(ccoMoeOp* op, int which, const ccoMoeDevArgs* a, void* stream) {
  if (op->comm->platform.kind == CCO_PLATFORM_CUDA) return run_on_gpu(op, which, a, stream);
  return run_on_host(op, which, a);
}
