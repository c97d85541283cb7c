#pragma once
// Facts about this build and machine that Gadgetron's info queries report (gadgetron::info and its
// single-value keys, server/queries.cpp).
#include <cstdint>
#include <string>

namespace larmor::server {

// Physical memory of the machine in bytes (0 when the system does not say).
uint64_t system_memory_bytes();

// The git commit this server was configured from, "unknown" outside a checkout.
std::string build_git_sha1();

// Whether this build has the CUDA backend, and the nvcc flags it was built with ("" without CUDA).
bool built_with_cuda();
std::string nvcc_flags();

}  // namespace larmor::server
