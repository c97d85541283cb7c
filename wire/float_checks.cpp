#include "wire/float_checks.h"

#include <cstdint>
#include <cstring>

namespace larmor::wire {
namespace {

constexpr uint32_t kExponent = 0x7f800000u;
constexpr uint32_t kMagnitude = 0x7fffffffu;

}  // namespace

bool all_finite(const float* p, size_t n) { return summarize_floats(p, n).all_finite; }

FloatSummary summarize_floats(const float* p, size_t n) {
    uint32_t bad = 0, any = 0;
    for (size_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, p + i, sizeof bits);
        bad |= uint32_t((bits & kExponent) == kExponent);
        any |= bits & kMagnitude;
    }
    return {bad == 0, any != 0};
}

}  // namespace larmor::wire
