// Replays fuzz inputs through a target's LLVMFuzzerTestOneInput without libFuzzer, so the gcc builds
// (plain, ASan/UBSan, TSan) check every committed regression input and seed. Arguments are files or
// folders (every regular file in them, sorted). A finding shows as a crash, an abort, an escaping
// exception or, as under libFuzzer's -malloc_limit_mb in CI, a single allocation over the cap below.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
// The same cap as scripts/ci-hardening.sh gives libFuzzer (-malloc_limit_mb): no input of a few KB
// may make the decoders or parsers allocate this much at once.
constexpr size_t kAllocationCap = size_t{512} << 20;
}  // namespace

// noinline: inlined into std::vector's code, malloc/free trip GCC 12's -Wstringop-overflow and
// -Wmismatched-new-delete false positives (as in tests/wire_test.cpp).
__attribute__((noinline)) void* operator new(size_t n) {
    if (n > kAllocationCap) {
        std::fprintf(stderr, "replay: a single allocation of %zu bytes exceeds the cap of %zu\n", n, kAllocationCap);
        std::abort();
    }
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<fs::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const fs::path arg(argv[i]);
        if (fs::is_directory(arg)) {
            std::vector<fs::path> files;
            for (const auto& e : fs::directory_iterator(arg))
                if (e.is_regular_file()) files.push_back(e.path());
            std::sort(files.begin(), files.end());
            inputs.insert(inputs.end(), files.begin(), files.end());
        } else {
            inputs.push_back(arg);
        }
    }
    // An empty list means a wrong path or an emptied corpus: that must not pass as "all replayed".
    if (inputs.empty()) {
        std::fprintf(stderr, "usage: %s FILE|DIR...: no inputs found\n", argv[0]);
        return 2;
    }
    for (const auto& path : inputs) {
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
            return 2;
        }
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    }
    std::fprintf(stderr, "replay: %zu input(s), no finding\n", inputs.size());
    return 0;
}
