#pragma once
// Faults injected on purpose, to prove that the server survives them (tests/fault_injection_test.cpp,
// scripts/gpu-check.sh). Off unless the environment variable LARMOR_FAULT_INJECTION names them, a
// comma-separated list of
//   host-alloc:N     the N-th host array allocation of the process throws std::bad_alloc (once)
//   device-alloc:N   the N-th device allocation of the process fails as out of memory (once)
//   cuda-backend     every CUDA backend creation fails as a device error
// Read once, at the first check. A malformed value is reported on stderr and ignored.
#include <cstdint>

namespace larmor {

enum class FaultSite { HostAlloc, DeviceAlloc, CudaBackend };

// True when a fault is to be injected at this call of `site`.
bool inject_fault(FaultSite site);

}  // namespace larmor
