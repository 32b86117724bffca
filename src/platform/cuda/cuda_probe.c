/* Run-time loading of the CUDA driver: probe and device identity. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "platform/platform.h"

/* The few driver entry points needed here, with the driver's ABI types
 * spelled out so no CUDA header is needed to build libcco. */
typedef int cu_result;
typedef int cu_device;
typedef void* cu_context;

static struct {
  void* lib;
  cu_result (*init)(unsigned);
  cu_result (*driverGetVersion)(int*);
  cu_result (*deviceGetCount)(int*);
  cu_result (*deviceGet)(cu_device*, int);
  cu_result (*deviceGetPCIBusId)(char*, int, cu_device);
  cu_result (*ctxGetCurrent)(cu_context*);
  cu_result (*ctxGetDevice)(cu_device*);
  cco_cuda_probe_result probe;
} g_cuda;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void* sym(const char* name) { return g_cuda.lib ? dlsym(g_cuda.lib, name) : NULL; }

static void load_once(void) {
  cco_cuda_probe_result* p = &g_cuda.probe;
  g_cuda.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!g_cuda.lib) {
    snprintf(p->detail, sizeof(p->detail), "libcuda.so.1 not loadable (no NVIDIA driver)");
    return;
  }
  *(void**)&g_cuda.init = sym("cuInit");
  *(void**)&g_cuda.driverGetVersion = sym("cuDriverGetVersion");
  *(void**)&g_cuda.deviceGetCount = sym("cuDeviceGetCount");
  *(void**)&g_cuda.deviceGet = sym("cuDeviceGet");
  *(void**)&g_cuda.deviceGetPCIBusId = sym("cuDeviceGetPCIBusId");
  *(void**)&g_cuda.ctxGetCurrent = sym("cuCtxGetCurrent");
  *(void**)&g_cuda.ctxGetDevice = sym("cuCtxGetDevice");
  if (!g_cuda.init || !g_cuda.deviceGetCount || !g_cuda.deviceGet || !g_cuda.deviceGetPCIBusId ||
      !g_cuda.ctxGetCurrent || !g_cuda.ctxGetDevice || !g_cuda.driverGetVersion) {
    snprintf(p->detail, sizeof(p->detail), "libcuda.so.1 lacks driver API entry points");
    return;
  }
  cu_result r = g_cuda.init(0);
  if (r != 0) {
    snprintf(p->detail, sizeof(p->detail), "cuInit failed with CUDA error %d", r);
    return;
  }
  g_cuda.driverGetVersion(&p->driverVersion);
  if (g_cuda.deviceGetCount(&p->deviceCount) != 0 || p->deviceCount <= 0) {
    snprintf(p->detail, sizeof(p->detail), "no CUDA device visible");
    p->deviceCount = 0;
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

static void lower(char* s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

ccoResult_t cco_cuda_bus_ids(char current[CCO_BUS_ID_BYTES], char visible[][CCO_BUS_ID_BYTES],
                             int maxVisible, int* nVisible) {
  cco_cuda_probe_result p;
  cco_cuda_probe(&p);
  if (!p.available) return cco_error(NULL, ccoUnsupported, CCO_SUBSYS_INIT, "cuda: %s", p.detail);
  cu_context ctx = NULL;
  cu_device dev = 0;
  if (g_cuda.ctxGetCurrent(&ctx) != 0 || !ctx || g_cuda.ctxGetDevice(&dev) != 0)
    dev = 0; /* no current context: the runtime's default device */
  if (g_cuda.deviceGetPCIBusId(current, CCO_BUS_ID_BYTES, dev) != 0)
    return cco_error(NULL, ccoCudaError, CCO_SUBSYS_INIT, "cuDeviceGetPCIBusId(%d) failed", dev);
  lower(current);
  int n = 0;
  for (int i = 0; i < p.deviceCount && n < maxVisible; i++) {
    cu_device d;
    if (g_cuda.deviceGet(&d, i) != 0 ||
        g_cuda.deviceGetPCIBusId(visible[n], CCO_BUS_ID_BYTES, d) != 0)
      return cco_error(NULL, ccoCudaError, CCO_SUBSYS_INIT, "cannot read bus id of device %d", i);
    lower(visible[n++]);
  }
  *nVisible = n;
  return ccoSuccess;
}
