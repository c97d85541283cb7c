#pragma once
// The refusal of every CUDA entry point in a build without nvcc (the *cuda_stub.cpp files, which the
// CMake lists drop when cuda/ is compiled): no CUDA backend can exist in such a build, so reaching one
// is a clear error naming the entry point.
#include <string>

namespace larmor {

[[noreturn]] void throw_no_cuda(const std::string& what);

}  // namespace larmor
