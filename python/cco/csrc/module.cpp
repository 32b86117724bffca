// The Python module of the CCO backend: registering it with torch, shutting
// it down at interpreter exit, and reaching a tensor's cco window.
#include <torch/extension.h>

#include "symm_mem.h"

namespace cco_torch {
namespace {

// Destroyed with this library's static objects at process exit, which
// happens before torch's registry (loaded earlier) drops the allocator.
struct ExitGuard {
  ~ExitGuard() { set_exiting(); }
};
ExitGuard g_exit_guard;

// Never deleted: torch's registry shares the allocator and outlives us.
c10::intrusive_ptr<CcoAllocator>& backend() {
  static auto* holder = new c10::intrusive_ptr<CcoAllocator>();
  return *holder;
}

std::mutex g_register_lock;

void register_backend(size_t slot_bytes, size_t segment_bytes) {
  std::lock_guard<std::mutex> guard(g_register_lock);
  if (backend()) return;  // once per process; the first slot size stays
  backend() = c10::make_intrusive<CcoAllocator>(slot_bytes, segment_bytes);
  c10d::symmetric_memory::register_availability("CCO", backend());
}

CcoAllocator& registered() {
  TORCH_CHECK(backend(), "CCO symmetric memory: the backend is not registered (import cco.allocator)");
  return *backend();
}

}  // namespace
}  // namespace cco_torch

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace cco_torch;
  m.doc() = "The CCO backend of torch.SymmetricMemory (built by cco._torch_ext).";
  m.def("register", &register_backend, py::arg("slot_bytes"), py::arg("segment_bytes"),
        "Registers the backend \"CCO\" with torch (once per process).");
  m.def("registered", [] { return static_cast<bool>(backend()); });
  m.def("shutdown", [] {
    if (!backend()) return;
    py::gil_scoped_release nogil;
    backend()->shutdown();
  });
  m.def(
      "window_of",
      [](uintptr_t ptr, std::optional<std::string> group) {
        TensorWindow w = registered().window_of(reinterpret_cast<void*>(ptr), group);
        return py::make_tuple(w.comm, w.window, w.local_ptr, w.window_bytes, w.offset,
                              w.buffer_bytes, w.pad_offset, w.group, w.error);
      },
      py::arg("ptr"), py::arg("group") = py::none(),
      "(comm, window, local_ptr, window_bytes, offset, buffer_bytes, pad_offset, group, error) of "
      "the tensor at ptr, after its rendezvous over group; error is not empty when there is no "
      "window (then the rest is unset).");
  m.def("stats", [] { return registered().stats(); });
}
