/* Run-time loading of the CUDA driver: entry points, probe, device identity. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "platform/cuda/cuda_driver.h"
#include "platform/platform.h"

static struct {
  void* lib;
  cco_cu_api api;
  bool apiOk;              /* every entry point of cco_cu_api resolved */
  char apiDetail[160];     /* why not */
  cco_cuda_probe_result probe;
} g_cuda;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* One entry point: its base name (what cuGetProcAddress takes) and the
 * symbol libcuda exports for the CCO_CU_ABI_VERSION variant (what dlsym needs
 * on drivers without cuGetProcAddress_v2). probe marks those the probe and
 * the bus-id query need; the others only matter to the cuda platform. */
typedef struct {
  size_t offset;
  const char* name;
  const char* symbol;
  bool probe;
  int version;   /* the ABI variant to ask cuGetProcAddress for */
  bool optional; /* a missing one leaves NULL in the table, nothing more */
} cu_entry;

#define CU_ENTRY(member, base, sym, forProbe) \
  { offsetof(cco_cu_api, member), base, sym, forProbe, CCO_CU_ABI_VERSION, false }
/* Newer entry points, each asked for at the version whose signature the
 * table declares. */
#define CU_OPTIONAL(member, base, sym, ver) \
  { offsetof(cco_cu_api, member), base, sym, false, ver, true }

static const cu_entry k_entries[] = {
    CU_ENTRY(getErrorName, "cuGetErrorName", "cuGetErrorName", false),
    CU_ENTRY(getErrorString, "cuGetErrorString", "cuGetErrorString", false),
    CU_ENTRY(deviceGet, "cuDeviceGet", "cuDeviceGet", true),
    CU_ENTRY(deviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount", true),
    CU_ENTRY(deviceGetPCIBusId, "cuDeviceGetPCIBusId", "cuDeviceGetPCIBusId", true),
    CU_ENTRY(deviceGetByPCIBusId, "cuDeviceGetByPCIBusId", "cuDeviceGetByPCIBusId", false),
    CU_ENTRY(deviceCanAccessPeer, "cuDeviceCanAccessPeer", "cuDeviceCanAccessPeer", false),
    CU_ENTRY(deviceGetAttribute, "cuDeviceGetAttribute", "cuDeviceGetAttribute", false),
    CU_ENTRY(ctxGetCurrent, "cuCtxGetCurrent", "cuCtxGetCurrent", true),
    CU_ENTRY(ctxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent", false),
    CU_ENTRY(ctxGetDevice, "cuCtxGetDevice", "cuCtxGetDevice", true),
    CU_ENTRY(devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", false),
    CU_ENTRY(devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2",
             false),
    CU_ENTRY(streamCreate, "cuStreamCreate", "cuStreamCreate", false),
    CU_ENTRY(streamDestroy, "cuStreamDestroy", "cuStreamDestroy_v2", false),
    CU_ENTRY(streamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize", false),
    CU_ENTRY(streamQuery, "cuStreamQuery", "cuStreamQuery", false),
    CU_ENTRY(threadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", "cuThreadExchangeStreamCaptureMode",
             false),
    CU_ENTRY(ctxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize", false),
    CU_ENTRY(memHostAlloc, "cuMemHostAlloc", "cuMemHostAlloc", false),
    CU_ENTRY(memHostGetDevicePointer, "cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2", false),
    CU_ENTRY(memFreeHost, "cuMemFreeHost", "cuMemFreeHost", false),
    CU_ENTRY(memcpyAsync, "cuMemcpyAsync", "cuMemcpyAsync", false),
    CU_ENTRY(streamWriteValue64, "cuStreamWriteValue64", "cuStreamWriteValue64_v2", false),
    CU_ENTRY(streamWaitValue64, "cuStreamWaitValue64", "cuStreamWaitValue64_v2", false),
    CU_ENTRY(memAlloc, "cuMemAlloc", "cuMemAlloc_v2", false),
    CU_ENTRY(memFree, "cuMemFree", "cuMemFree_v2", false),
    CU_ENTRY(memGetAddressRange, "cuMemGetAddressRange", "cuMemGetAddressRange_v2", false),
    CU_ENTRY(memcpyHtoD, "cuMemcpyHtoD", "cuMemcpyHtoD_v2", false),
    CU_ENTRY(memcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2", false),
    CU_ENTRY(memcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", false),
    CU_ENTRY(memGetAllocationGranularity, "cuMemGetAllocationGranularity",
             "cuMemGetAllocationGranularity", false),
    CU_ENTRY(memAddressReserve, "cuMemAddressReserve", "cuMemAddressReserve", false),
    CU_ENTRY(memAddressFree, "cuMemAddressFree", "cuMemAddressFree", false),
    CU_ENTRY(memCreate, "cuMemCreate", "cuMemCreate", false),
    CU_ENTRY(memRelease, "cuMemRelease", "cuMemRelease", false),
    CU_ENTRY(memMap, "cuMemMap", "cuMemMap", false),
    CU_ENTRY(memUnmap, "cuMemUnmap", "cuMemUnmap", false),
    CU_ENTRY(memSetAccess, "cuMemSetAccess", "cuMemSetAccess", false),
    CU_ENTRY(memExportToShareableHandle, "cuMemExportToShareableHandle",
             "cuMemExportToShareableHandle", false),
    CU_ENTRY(memImportFromShareableHandle, "cuMemImportFromShareableHandle",
             "cuMemImportFromShareableHandle", false),
    CU_ENTRY(memRetainAllocationHandle, "cuMemRetainAllocationHandle",
             "cuMemRetainAllocationHandle", false),
    CU_ENTRY(memGetAllocationPropertiesFromHandle, "cuMemGetAllocationPropertiesFromHandle",
             "cuMemGetAllocationPropertiesFromHandle", false),
    CU_ENTRY(moduleLoadData, "cuModuleLoadData", "cuModuleLoadData", false),
    CU_ENTRY(moduleUnload, "cuModuleUnload", "cuModuleUnload", false),
    CU_ENTRY(moduleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction", false),
    CU_ENTRY(launchKernel, "cuLaunchKernel", "cuLaunchKernel", false),
    CU_ENTRY(occupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
             "cuOccupancyMaxActiveBlocksPerMultiprocessor", false),
    CU_ENTRY(streamIsCapturing, "cuStreamIsCapturing", "cuStreamIsCapturing", false),
    CU_OPTIONAL(streamBatchMemOp, "cuStreamBatchMemOp", "cuStreamBatchMemOp_v2", CCO_CU_ABI_VERSION),
    CU_OPTIONAL(memcpyBatchAsync, "cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2", 13000),
    CU_OPTIONAL(moduleGetLoadingMode, "cuModuleGetLoadingMode", "cuModuleGetLoadingMode", 11070),
};

static void* sym(const char* name) { return g_cuda.lib ? dlsym(g_cuda.lib, name) : NULL; }

/* Fills the table. cuGetProcAddress is preferred: it returns the variant of
 * each function for the ABI we declare, whatever the exported symbol names
 * are; dlsym of the versioned names is the fallback for drivers older than
 * CUDA 12.0 and for a name cuGetProcAddress does not know. */
static void resolve_entries(int driverVersion) {
  cco_cu_get_proc_address_fn getProc = NULL;
  if (driverVersion >= CCO_CU_ABI_VERSION) *(void**)&getProc = sym("cuGetProcAddress_v2");
  const char* missing = NULL;
  bool probeOk = true;
  for (size_t i = 0; i < sizeof(k_entries) / sizeof(k_entries[0]); i++) {
    const cu_entry* e = &k_entries[i];
    void* fn = NULL;
    if (getProc) {
      cco_cu_proc_query_result status = 0;
      if (driverVersion < e->version ||
          getProc(e->name, &fn, e->version, CCO_CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                  &status) != CCO_CU_SUCCESS ||
          status != CCO_CU_GET_PROC_ADDRESS_SUCCESS)
        fn = NULL;
    }
    if (!fn && driverVersion >= e->version) fn = sym(e->symbol);
    *(void**)((char*)&g_cuda.api + e->offset) = fn;
    if (!fn && !e->optional) {
      if (!missing) missing = e->name;
      if (e->probe) probeOk = false;
    }
  }
  if (missing) {
    snprintf(g_cuda.apiDetail, sizeof(g_cuda.apiDetail),
             "libcuda.so.1 (driver %d) lacks %s (driver too old?)", driverVersion, missing);
    if (!probeOk) snprintf(g_cuda.probe.detail, sizeof(g_cuda.probe.detail), "%s", g_cuda.apiDetail);
    return;
  }
  g_cuda.apiOk = true;
}

static void load_once(void) {
  cco_cuda_probe_result* p = &g_cuda.probe;
  cco_cu_api* api = &g_cuda.api;
  g_cuda.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!g_cuda.lib) {
    snprintf(p->detail, sizeof(p->detail), "libcuda.so.1 not loadable (no NVIDIA driver)");
    snprintf(g_cuda.apiDetail, sizeof(g_cuda.apiDetail), "%s", p->detail);
    return;
  }
  /* Never versioned, so plain dlsym gets the right ones. */
  *(void**)&api->init = sym("cuInit");
  *(void**)&api->driverGetVersion = sym("cuDriverGetVersion");
  if (!api->init || !api->driverGetVersion) {
    snprintf(p->detail, sizeof(p->detail), "libcuda.so.1 lacks driver API entry points");
    snprintf(g_cuda.apiDetail, sizeof(g_cuda.apiDetail), "%s", p->detail);
    return;
  }
  cco_cu_result r = api->init(0);
  if (r != CCO_CU_SUCCESS) {
    /* Entry points are left unresolved, so no error name yet: the number. */
    snprintf(p->detail, sizeof(p->detail), "cuInit failed with CUDA error %u", r);
    snprintf(g_cuda.apiDetail, sizeof(g_cuda.apiDetail), "%s", p->detail);
    return;
  }
  api->driverGetVersion(&p->driverVersion);
  resolve_entries(p->driverVersion);
  if (!api->deviceGetCount || !api->deviceGet || !api->deviceGetPCIBusId || !api->ctxGetCurrent ||
      !api->ctxGetDevice) {
    g_cuda.apiOk = false;
    return; /* resolve_entries wrote the detail */
  }
  if (api->deviceGetCount(&p->deviceCount) != CCO_CU_SUCCESS || p->deviceCount <= 0) {
    snprintf(p->detail, sizeof(p->detail), "no CUDA device visible");
    snprintf(g_cuda.apiDetail, sizeof(g_cuda.apiDetail), "%s", p->detail);
    p->deviceCount = 0;
    g_cuda.apiOk = false;
    return;
  }
  p->available = true;
  snprintf(p->detail, sizeof(p->detail), "%d device(s), driver %d.%d", p->deviceCount,
           p->driverVersion / 1000, (p->driverVersion % 1000) / 10);
}

void cco_cuda_probe(cco_cuda_probe_result* out) {
  pthread_once(&g_once, load_once);
  *out = g_cuda.probe;
}

const cco_cu_api* cco_cu(void) {
  pthread_once(&g_once, load_once);
  return g_cuda.probe.available && g_cuda.apiOk ? &g_cuda.api : NULL;
}

const char* cco_cu_unavailable_reason(void) {
  pthread_once(&g_once, load_once);
  return g_cuda.probe.available && g_cuda.apiOk ? "" : g_cuda.apiDetail;
}

const char* cco_cu_error_text(cco_cu_result r, char* buf, size_t size) {
  const char* name = NULL;
  const char* text = NULL;
  pthread_once(&g_once, load_once);
  /* Both return CUDA_ERROR_INVALID_VALUE and leave the string NULL for a
   * value they do not know. */
  if (g_cuda.api.getErrorName && g_cuda.api.getErrorName(r, &name) != CCO_CU_SUCCESS) name = NULL;
  if (g_cuda.api.getErrorString && g_cuda.api.getErrorString(r, &text) != CCO_CU_SUCCESS)
    text = NULL;
  if (name && text) snprintf(buf, size, "%s: %s", name, text);
  else if (name) snprintf(buf, size, "%s", name);
  else snprintf(buf, size, "CUDA error %u", r);
  return buf;
}

static void lower(char* s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

ccoResult_t cco_cuda_visible_bus_ids(char visible[][CCO_BUS_ID_BYTES], int maxVisible, int* nVisible) {
  cco_cuda_probe_result p;
  cco_cuda_probe(&p);
  if (!p.available) return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_INIT, "cuda: %s", p.detail);
  const cco_cu_api* cu = &g_cuda.api;
  int n = 0;
  for (int i = 0; i < p.deviceCount && n < maxVisible; i++) {
    cco_cu_device d;
    if (cu->deviceGet(&d, i) != CCO_CU_SUCCESS ||
        cu->deviceGetPCIBusId(visible[n], CCO_BUS_ID_BYTES, d) != CCO_CU_SUCCESS)
      return cco_error(NULL, ccoCudaError, CCO_SUBSYS_INIT, "cannot read bus id of device %d", i);
    lower(visible[n++]);
  }
  *nVisible = n;
  return ccoSuccess;
}
