/* Platform choice: CCO_PLATFORM=auto|cuda|host. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "platform/cuda/cuda_driver.h"
#include "platform/platform.h"

ccoResult_t cco_platform_open(cco_platform* p) {
  enum { AUTO = 0, CUDA = 1, HOST = 2 }; /* CCO_PLATFORM choices, in table order */
  int want = cco_env_enum(CCO_ENV_ID_CCO_PLATFORM);
  if (want == HOST) return cco_platform_host_open(p);
  if (want == CUDA) return cco_platform_cuda_open(p);
  cco_cuda_probe_result probe;
  cco_cuda_probe(&probe);
  if (!probe.available) {
    CCO_INFO(MEM, "platform host: %s", probe.detail);
    return cco_platform_host_open(p);
  }
  return cco_platform_cuda_open(p);
}

ccoResult_t cco_platform_desc_alloc_zeroed(cco_platform* p, size_t size, void** ptr) {
  void* zeros = calloc(1, size);
  if (!zeros) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  ccoResult_t res = p->ops->desc_alloc(p, size, ptr);
  if (res == ccoSuccess) res = p->ops->copy_to_device(p, *ptr, zeros, size);
  free(zeros);
  return res;
}

void cco_platform_background_thread_start(cco_platform* p, cco_log_subsys subsys, const char* thread, int rank) {
  cco_background_thread_init();
  if (p->ops->background_thread_init(p) != ccoSuccess)
    CCO_LOG(CCO_LOG_WARN, subsys, "rank %d: the %s thread stays in CUDA's global capture mode", rank, thread);
}

void cco_platform_close(cco_platform* p) {
  if (p->kind == CCO_PLATFORM_CUDA && p->ops) cco_platform_cuda_close(p);
  memset(p, 0, sizeof(*p));
}
