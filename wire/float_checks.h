#pragma once
// Whole-array float checks for what enters and what leaves the server: an acquisition's samples and
// trajectory at the door, an image's pixels before it is sent. A float is NaN or infinite exactly when
// its 8 exponent bits are all set (IEEE 754 binary32), so both are integer loops without an early exit
// that the compiler vectorises: a clean array, the common case, is read once at memory speed (45 GB/s
// on the 2-core CI machine, against 8.6 GB/s for a loop over std::isfinite, which gcc -O3 does not
// vectorise; that loop was 35 % of the server's CPU time in a passthrough session, and 30-50 us of a
// 256^2 frame's latency in ImageFinish, issue 23).
#include <cstddef>

namespace larmor::wire {

// No NaN and no infinity among p[0 .. n).
bool all_finite(const float* p, size_t n);

struct FloatSummary {
    bool all_finite = true;
    bool any_nonzero = false;  // a value other than +0 and -0 (a NaN counts)
};
// Both in one pass.
FloatSummary summarize_floats(const float* p, size_t n);

}  // namespace larmor::wire
