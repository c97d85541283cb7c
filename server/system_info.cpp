#include "server/system_info.h"

#include <unistd.h>

// Set by server/CMakeLists.txt at configure time.
#ifndef LARMOR_GIT_SHA1
#define LARMOR_GIT_SHA1 "unknown"
#endif
#ifndef LARMOR_NVCC_FLAGS
#define LARMOR_NVCC_FLAGS ""
#endif

namespace larmor::server {

uint64_t system_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return 0;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

std::string build_git_sha1() { return LARMOR_GIT_SHA1; }

bool built_with_cuda() {
#ifdef LARMOR_WITH_CUDA
    return true;
#else
    return false;
#endif
}

std::string nvcc_flags() { return LARMOR_NVCC_FLAGS; }

}  // namespace larmor::server
