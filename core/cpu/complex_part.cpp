// Real parts of complex data for image output (Backend::download_part). Built with -fno-math-errno
// (core/CMakeLists.txt): without it the double square root of the magnitude cannot vectorise, and
// the loop is ~10x slower (~140 µs instead of ~15 µs for a 256x256 image on one core).
#include <cmath>

#include "core/cpu/cpu_ops.h"

namespace larmor::cpu {

void complex_part(const cfloat* x, size_t n, ComplexPart part, float* out, int threads) {
    const auto* v = reinterpret_cast<const float*>(x);  // interleaved re, im (std::complex layout)
    const long long count = static_cast<long long>(n);
    const bool parallel = count > (1 << 18);
    switch (part) {
        case ComplexPart::Magnitude:
#pragma omp parallel for simd num_threads(threads) if (parallel)
            for (long long i = 0; i < count; ++i) {
                const double re = v[2 * i], im = v[2 * i + 1];
                out[i] = static_cast<float>(std::sqrt(re * re + im * im));
            }
            break;
        case ComplexPart::Real:
#pragma omp parallel for simd num_threads(threads) if (parallel)
            for (long long i = 0; i < count; ++i) out[i] = v[2 * i];
            break;
        case ComplexPart::Imag:
#pragma omp parallel for simd num_threads(threads) if (parallel)
            for (long long i = 0; i < count; ++i) out[i] = v[2 * i + 1];
            break;
        case ComplexPart::Phase:
#pragma omp parallel for num_threads(threads) if (parallel)
            for (long long i = 0; i < count; ++i) out[i] = std::atan2(v[2 * i + 1], v[2 * i]);
            break;
    }
}

}  // namespace larmor::cpu
