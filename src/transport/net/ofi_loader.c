/* libfabric loader: see ofi_loader.h. */
#ifdef CCO_HAVE_LIBFABRIC_HEADERS

#include "transport/net/ofi_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"

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

/* Signals whose handlers the process had before libfabric came in. Debian's
 * libfabric pulls in the PSM libraries, and libinfinipath's constructor
 * takes over SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM to print
 * a backtrace and exit(1): a crashed or killed rank then exits with status 1
 * instead of its signal, runs exit handlers in a broken process, and under
 * AddressSanitizer (whose exit-time leak check it runs from the handler)
 * spins forever instead of dying. The application's handlers come back
 * right after the load. */
#define CCO_SAVED_SIGNALS 32
static void save_handlers(struct sigaction* saved) {
  for (int sig = 1; sig < CCO_SAVED_SIGNALS; sig++)
    if (sigaction(sig, NULL, &saved[sig])) saved[sig].sa_handler = SIG_ERR;
}

static void restore_handlers(const struct sigaction* saved) {
  char taken[96] = "";
  for (int sig = 1; sig < CCO_SAVED_SIGNALS; sig++) {
    struct sigaction now;
    if (saved[sig].sa_handler == SIG_ERR || sigaction(sig, NULL, &now)) continue;
    int sameHandler = (now.sa_flags & SA_SIGINFO) ? now.sa_sigaction == saved[sig].sa_sigaction
                                                   : now.sa_handler == saved[sig].sa_handler;
    if (sameHandler && now.sa_flags == saved[sig].sa_flags) continue;
    if (sigaction(sig, &saved[sig], NULL) == 0 && strlen(taken) + 8 < sizeof(taken))
      snprintf(taken + strlen(taken), sizeof(taken) - strlen(taken), "%s%d", taken[0] ? "," : "", sig);
  }
  if (taken[0]) CCO_INFO(NET, "libfabric's load replaced the handlers of signals %s: restored", taken);
}

static void load_once(void) {
  struct sigaction saved[CCO_SAVED_SIGNALS];
  save_handlers(saved);
  /* RTLD_LOCAL: libfabric's symbols must not leak into the global namespace
   * of an application that links another libfabric build itself. */
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  restore_handlers(saved);
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
  /* Providers built as plugins are loaded by the first fi_getinfo: make
   * that happen here (a provider name that matches none), under the same
   * watch. */
  save_handlers(saved);
  struct fi_info* hints = g_api.dupinfo(NULL);
  if (hints && hints->fabric_attr) {
    hints->fabric_attr->prov_name = strdup("cco-loads-providers"); /* freed by fi_freeinfo */
    struct fi_info* none = NULL;
    (void)g_api.getinfo(need, NULL, NULL, 0, hints, &none);
    if (none) g_api.freeinfo(none);
  }
  if (hints) g_api.freeinfo(hints);
  restore_handlers(saved);
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
