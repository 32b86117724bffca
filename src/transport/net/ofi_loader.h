/*
 * libfabric loaded at run time. libcco never links against libfabric: a
 * machine without it still runs everything else, and the network engine
 * reports ccoUnsupported there.
 *
 * libfabric's API is mostly static inline functions in <rdma/fi_*.h> that
 * call through the ops tables of the objects (fabric, domain, endpoint...).
 * Only the entry points below are real exported symbols; they are resolved
 * once with dlsym. Everything else is used straight from the headers.
 * Careful: a few header helpers call these symbols directly (fi_allocinfo
 * calls fi_dupinfo); use the table instead (api->dupinfo(NULL)). The shared
 * library links with --no-undefined, so a slip fails the build.
 *
 * Only compiled when the headers were found at build time
 * (CCO_HAVE_LIBFABRIC_HEADERS).
 */
#ifndef CCO_TRANSPORT_NET_OFI_LOADER_H_
#define CCO_TRANSPORT_NET_OFI_LOADER_H_

#include <rdma/fabric.h>

#include "cco/cco.h"

typedef struct {
  uint32_t (*version)(void);
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const struct fi_info* hints, struct fi_info** info);
  void (*freeinfo)(struct fi_info* info);
  struct fi_info* (*dupinfo)(const struct fi_info* info); /* dupinfo(NULL) == fi_allocinfo() */
  int (*fabric)(struct fi_fabric_attr* attr, struct fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
} cco_ofi_api;

/* Loads libfabric.so.1 once per process (thread safe) and never unloads it:
 * providers keep process-wide state that does not survive dlclose/dlopen
 * cycles. Fails with ccoUnsupported (detail recorded) when the library or a
 * symbol is missing, or when it is older than the headers cco was built
 * with (structures newer headers describe would be read past their end). */
ccoResult_t cco_ofi_load(const cco_ofi_api** api);

#endif /* CCO_TRANSPORT_NET_OFI_LOADER_H_ */
