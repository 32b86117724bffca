/* libfabric loader: see ofi_loader.h. */
#ifdef CCO_HAVE_LIBFABRIC_HEADERS

#include "transport/net/ofi_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

static cco_ofi_api g_api;
static ccoResult_t g_result = ccoUnsupported;
static char g_detail[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* dlsym returns void*; ISO C forbids converting it to a function pointer
 * directly, so go through memcpy (what POSIX guarantees works). */
static int resolve(void* lib, const char* name, void* slot, size_t slotSize) {
  void* sym = dlsym(lib, name);
  if (!sym) {
    snprintf(g_detail, sizeof(g_detail), "libfabric.so.1 lacks %s", name);
    return -1;
  }
  memcpy(slot, &sym, slotSize);
  return 0;
}
#define RESOLVE(lib, field, name) resolve(lib, name, &g_api.field, sizeof(g_api.field))

static void load_once(void) {
  /* RTLD_LOCAL: libfabric's symbols must not leak into the global namespace
   * of an application that links another libfabric build itself. */
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    snprintf(g_detail, sizeof(g_detail), "libfabric.so.1 not found (%s)", why ? why : "dlopen failed");
    return;
  }
  if (RESOLVE(lib, version, "fi_version") || RESOLVE(lib, getinfo, "fi_getinfo") ||
      RESOLVE(lib, freeinfo, "fi_freeinfo") || RESOLVE(lib, dupinfo, "fi_dupinfo") ||
      RESOLVE(lib, fabric, "fi_fabric") || RESOLVE(lib, strerror, "fi_strerror")) {
    dlclose(lib);
    return;
  }
  uint32_t have = g_api.version();
  uint32_t need = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
  if (FI_VERSION_LT(have, need)) {
    snprintf(g_detail, sizeof(g_detail), "libfabric %u.%u is older than the headers cco was built with (%u.%u)",
             FI_MAJOR(have), FI_MINOR(have), FI_MAJOR(need), FI_MINOR(need));
    dlclose(lib);
    return;
  }
  g_result = ccoSuccess; /* lib stays loaded for the life of the process */
}

ccoResult_t cco_ofi_load(const cco_ofi_api** api) {
  pthread_once(&g_once, load_once);
  if (g_result != ccoSuccess) return cco_error(NULL, g_result, CCO_SUBSYS_NET, "%s", g_detail);
  *api = &g_api;
  return ccoSuccess;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int cco_ofi_loader_unused_;
#endif /* CCO_HAVE_LIBFABRIC_HEADERS */
