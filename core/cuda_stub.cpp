// The CUDA entry points of a build without nvcc (core/CMakeLists.txt drops this file when the CUDA
// backend in cuda/ is compiled): no devices, and a clear refusal to make a CUDA backend.
#include <stdexcept>

#include "core/backend.h"
#include "core/linops/finite_difference_kernels.h"
#include "core/no_cuda.h"

namespace larmor {

void throw_no_cuda(const std::string& what) {
    throw std::runtime_error(what + ": this Larmor build has no CUDA backend (built without nvcc)");
}

bool cuda_available() { return false; }

std::vector<std::string> cuda_devices() { return {}; }

uint64_t cuda_device_memory(int) { return 0; }
uint64_t cuda_device_free_memory(int) { return 0; }
std::string cuda_device_capability(int) { return ""; }
int cuda_driver_version() { return 0; }
int cuda_runtime_version() { return 0; }

std::shared_ptr<Backend> make_cuda_backend(int device, MemoryBudgets) {
    throw_no_cuda("make_cuda_backend(" + std::to_string(device) + ")");
}

void set_cuda_host_cache_budget(std::shared_ptr<MemoryBudget>) {}
uint64_t release_idle_cuda_host_memory(uint64_t) { return 0; }
uint64_t idle_cuda_host_memory() { return 0; }
PlanRegistryStats cuda_fft_plan_stats() { return {}; }

void cuda::finite_difference_forward(Backend&, const CArray&, CArray&, const DiffGeometry&) {
    throw_no_cuda("finite_difference_forward");
}
void cuda::finite_difference_adjoint(Backend&, const CArray&, CArray&, const DiffGeometry&) {
    throw_no_cuda("finite_difference_adjoint");
}

}  // namespace larmor
