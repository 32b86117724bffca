// Errors and the process-exit flag shared by the backend's files.
#include <stdexcept>

#include "cco_symm_mem.h"

namespace cco_torch {

void check_cco(ccoResult_t res, const ccoComm* comm, const std::string& what) {
  if (res == ccoSuccess) return;
  std::string detail = ccoGetLastError(comm);
  throw std::runtime_error("CCO symmetric memory: " + what + ": " + ccoGetErrorString(res) +
                           (detail.empty() ? "" : " (" + detail + ")"));
}

void check_cuda(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return;
  throw std::runtime_error("CCO symmetric memory: " + what + ": " + cudaGetErrorString(err));
}

// A plain bool: it has no destructor, so it can still be read while other
// static objects are destroyed after the one that set it.
static bool g_exiting = false;

bool exiting() { return g_exiting; }
void set_exiting() { g_exiting = true; }

}  // namespace cco_torch
