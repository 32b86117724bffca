/*
 * The CUDA platform's launches: the embedded fatbin (src/coll/kernels/)
 * loaded through the platform once per CUDA context, one kernel per
 * building block, launched with cuLaunchKernel on the caller's stream.
 * Nothing here allocates or synchronizes per call, so calls can be
 * captured in CUDA graphs.
 */
#include <stdio.h>
#include <string.h>

#include "coll/coll_internal.h"

/* Name suffixes of the typed kernels, in enum order (coll_kernels.h). */
static const char* const k_type_names[CCO_COLL_TYPED_NDTYPES] = {
#define CCO_COLL_TYPE_NAME_(value, name) #name,
    CCO_COLL_TYPED_DTYPES(CCO_COLL_TYPE_NAME_)
#undef CCO_COLL_TYPE_NAME_
};
static const char* const k_op_names[CCO_COLL_TYPED_NOPS] = {
#define CCO_COLL_OP_NAME_(value, name) #name,
    CCO_COLL_TYPED_OPS(CCO_COLL_OP_NAME_)
#undef CCO_COLL_OP_NAME_
};

/* Looks up the 12 typed kernels of block (kind, algo). */
static ccoResult_t load_typed(cco_coll_engine* e, const char* kernel, int kind, ccoAlgo_t algo) {
  cco_platform* p = e->ctx->platform;
  int b = cco_coll_block_index((cco_coll_kind)kind, algo);
  if (b < 0) return ccoSuccess;
  for (int t = 0; t < CCO_COLL_TYPED_NDTYPES; t++)
    for (int o = 0; o < CCO_COLL_TYPED_NOPS; o++) {
      char name[96];
      snprintf(name, sizeof(name), "%s_%s_%s", kernel, k_type_names[t], k_op_names[o]);
      CCO_CHECK(p->ops->kernel_get(p, e->module, name, &e->typed[b][t][o]));
    }
  return ccoSuccess;
}

/* The grid every rank can run at once. The blocks of a call wait at LSA
 * barriers for the same block of every peer, so a grid that does not fit
 * on the GPU at once hangs; ranks sharing this GPU (MPS) share its room
 * and leave part of it to other work (cco_coll_shared_gpu_parts). */
static ccoResult_t coresident_parts(cco_coll_engine* e, uint32_t* parts) {
  cco_platform* p = e->ctx->platform;
  const cco_topology* topo = e->ctx->topo;
  int sharing = cco_topology_lsa_sharing_gpu(topo, p->identity.busId);
  int fit = -1;
  for (int b = 0; b < CCO_COLL_BLOCKS; b++) {
    /* The hierarchical blocks run only across hosts: one host keeps the
     * parts the others fit. */
    if (cco_coll_block_at(b)->algo == ccoAlgoHier && topo->nNodes <= 1) continue;
    for (int k = -1; k < CCO_COLL_TYPED_NDTYPES * CCO_COLL_TYPED_NOPS; k++) {
      void* kernel = k < 0 ? e->kernels[b] : e->typed[b][k / CCO_COLL_TYPED_NOPS][k % CCO_COLL_TYPED_NOPS];
      if (!kernel) continue;
      int blocks = 0;
      CCO_CHECK(p->ops->kernel_coresident(p, kernel, CCO_COLL_THREADS, &blocks));
      if (fit < 0 || blocks < fit) fit = blocks;
    }
  }
  fit = cco_coll_shared_gpu_parts(fit, sharing);
  if (fit < 1)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_COLL,
                     "rank %d: a collective's blocks of %d threads do not fit on gpu %s when %d ranks share it",
                     e->ctx->rank, CCO_COLL_THREADS, p->identity.busId, sharing);
  *parts = (uint32_t)fit;
  return ccoSuccess;
}

ccoResult_t cco_coll_cuda_load(cco_coll_engine* e) {
  cco_platform* p = e->ctx->platform;
  if (e->module) return ccoSuccess;
  if (cco_coll_fatbin_size == 0)
    return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_COLL,
                     "rank %d: this libcco was built without nvcc, so it holds no GPU kernels for the "
                     "collectives; rebuild it where nvcc is installed (the host platform, "
                     "CCO_PLATFORM=host, runs them on CPU threads)",
                     e->ctx->rank);
  CCO_CHECK(p->ops->module_get(p, cco_coll_fatbin, &e->module));
  ccoResult_t res = ccoSuccess;
  for (int b = 0; res == ccoSuccess && b < CCO_COLL_BLOCKS; b++)
    res = p->ops->kernel_get(p, e->module, cco_coll_block_at(b)->kernel, &e->kernels[b]);
#define CCO_COLL_LOAD_TYPED_(kernel, block, kind, algo) \
  if (res == ccoSuccess) res = load_typed(e, #kernel, kind, algo);
  CCO_COLL_TYPED_KERNEL_NAMES(CCO_COLL_LOAD_TYPED_)
#undef CCO_COLL_LOAD_TYPED_
  if (res == ccoSuccess) res = p->ops->kernel_get(p, e->module, CCO_COLL_STREAM_BARRIER_KERNEL, &e->barrierKernel);
  if (res == ccoSuccess) res = p->ops->kernel_get(p, e->module, CCO_COLL_STREAM_GDA_KERNEL, &e->gdaKernel);
  if (res != ccoSuccess) cco_coll_cuda_release(e);
  return res;
}

ccoResult_t cco_coll_cuda_prepare(cco_coll_engine* e, uint32_t wanted, uint32_t* nParts) {
  CCO_CHECK(cco_coll_cuda_load(e));
  uint32_t fit = 0;
  CCO_CHECK(coresident_parts(e, &fit));
  *nParts = wanted < fit ? wanted : fit;
  return ccoSuccess;
}

ccoResult_t cco_coll_cuda_stream_barrier(cco_coll_engine* e, void* stream) {
  cco_platform* p = e->ctx->platform;
  const ccoDevComm* dc = e->s.dcDev;
  cco_coll_status* status = (cco_coll_status*)(uintptr_t)e->statusDev;
  void* params[2] = {&dc, &status};
  return p->ops->launch(p, e->barrierKernel, 1, CCO_COLL_STREAM_THREADS, stream, params);
}

ccoResult_t cco_coll_cuda_stream_gda(cco_coll_engine* e, const cco_stream_gda_args* a, void* stream) {
  cco_platform* p = e->ctx->platform;
  const ccoDevComm* dc = e->s.dcDev;
  cco_stream_gda_args args = *a;
  cco_coll_status* status = (cco_coll_status*)(uintptr_t)e->statusDev;
  void* params[3] = {&dc, &args, &status};
  return p->ops->launch(p, e->gdaKernel, 1, CCO_COLL_STREAM_THREADS, stream, params);
}

ccoResult_t cco_coll_cuda_launch(cco_coll_engine* e, int block, const ccoCollArgs* a, void* stream) {
  cco_platform* p = e->ctx->platform;
  /* cuLaunchKernel copies the parameters before it returns, so these may
   * live on this stack (and a graph capture keeps its own copy). */
  const ccoDevComm* dc = e->s.dcDev;
  ccoCollArgs args = *a;
  cco_coll_status* status = (cco_coll_status*)(uintptr_t)e->statusDev;
  void* params[3] = {&dc, &args, &status};
  void* kernel = e->kernels[block];
  if (a->dtype < CCO_COLL_TYPED_NDTYPES && a->op < CCO_COLL_TYPED_NOPS && e->typed[block][a->dtype][a->op])
    kernel = e->typed[block][a->dtype][a->op];
  return p->ops->launch(p, kernel, e->s.nParts, CCO_COLL_THREADS, stream, params);
}

void cco_coll_cuda_release(cco_coll_engine* e) {
  cco_platform* p = e->ctx->platform;
  if (e->module) p->ops->module_put(p, e->module);
  e->module = NULL;
  for (int b = 0; b < CCO_COLL_BLOCKS; b++) e->kernels[b] = NULL;
  memset(e->typed, 0, sizeof(e->typed));
  e->barrierKernel = e->gdaKernel = NULL;
}
