#include "core/cpu/fftw_plans.h"

#include <fftw3.h>

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "core/cpu/backend_checks.h"
#include "core/cpu/centring.h"

namespace larmor {

std::mutex& fftw_planner_mutex() {
    static std::mutex m;
    return m;
}

namespace detail {
namespace {

// Transforms of at least this many elements (256 KB) get measured plans.
constexpr size_t kMeasuredPlanElements = size_t{1} << 15;

void init_fftw_threads_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        std::lock_guard<std::mutex> lock(fftw_planner_mutex());
        if (fftwf_init_threads() == 0) throw std::runtime_error("fftwf_init_threads failed");
        fftwf_set_timelimit(kFftwPlanSeconds);
    });
}

bool smooth(size_t n) {
    if (n == 0) return false;
    for (size_t p : {2, 3, 5, 7})
        while (n % p == 0) n /= p;
    return n == 1;
}

}  // namespace

bool fftw_measures(const Shape& shape, AxisMask axes) {
    if (shape.size() < kMeasuredPlanElements) return false;
    for (int a = 0; a < shape.rank(); ++a)
        if ((axes & (1u << a)) && shape[a] > 1 && !smooth(shape[a])) return false;
    return true;
}

FftwPlanCache::FftwPlanCache(int threads) : threads_(threads < 1 ? 1 : threads) { init_fftw_threads_once(); }

const FftwTransform& FftwPlanCache::get(const Shape& shape, AxisMask axes, FFTDirection dir, cfloat* data) {
    // Plans made for SIMD-aligned arrays must only run on arrays of the same alignment (FFTW manual,
    // "New-array Execute Functions"); the alignment class is part of the key.
    const int align = fftwf_alignment_of(reinterpret_cast<float*>(data));
    std::vector<size_t> key;
    key.push_back(static_cast<size_t>(shape.rank()));
    for (int a = 0; a < shape.rank(); ++a) key.push_back(shape[a]);
    key.push_back(axes);
    key.push_back(dir == FFTDirection::Forward ? 0 : 1);
    key.push_back(static_cast<size_t>(align));

    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;

    auto t = std::make_unique<FftwTransform>();
    std::vector<fftwf_iodim64> dims, loops;
    // FFTW prefers the fastest-varying dimension last (row-major); x is our fastest axis.
    for (int a = shape.rank() - 1; a >= 0; --a) {
        const fftwf_iodim64 d{static_cast<ptrdiff_t>(shape[a]), static_cast<ptrdiff_t>(shape.stride(a)),
                              static_cast<ptrdiff_t>(shape.stride(a))};
        if (axes & (1u << a))
            dims.push_back(d);
        else if (shape[a] > 1)
            loops.push_back(d);
    }
    t->load.resize(static_cast<size_t>(shape.rank()));
    t->store.resize(static_cast<size_t>(shape.rank()));
    for (int a = 0; a < shape.rank(); ++a)
        if (axes & (1u << a)) {
            t->load[static_cast<size_t>(a)] = centring_load_table(shape[a], dir);
            t->store[static_cast<size_t>(a)] = centring_store_table(shape[a], dir);
        }

    fftwf_plan p = nullptr;
    {
        // FFTW_MEASURE times candidate algorithms: for the strided and batched transforms of
        // reconstruction (a y-only FFT of [256, 256, 8]) its plans run 5-13x faster than
        // FFTW_ESTIMATE's guesses. Measuring costs 0.1-1 s per shape, paid once per process (FFTW
        // keeps the wisdom), so small transforms, where it matters little, keep FFTW_ESTIMATE.
        // Measuring overwrites its arrays, hence a scratch array (SIMD-aligned, like fresh host
        // arrays; an unaligned caller gets an FFTW_UNALIGNED plan either way).
        const bool measure = fftw_measures(shape, axes);
        const unsigned flags = (measure ? FFTW_MEASURE : FFTW_ESTIMATE) | (align != 0 ? FFTW_UNALIGNED : 0u);
        std::unique_ptr<fftwf_complex, void (*)(void*)> scratch(nullptr, fftwf_free);
        auto* io = reinterpret_cast<fftwf_complex*>(data);
        std::lock_guard<std::mutex> planner(fftw_planner_mutex());
        if (measure) {
            scratch.reset(fftwf_alloc_complex(shape.size()));
            if (!scratch) throw std::bad_alloc();
            io = scratch.get();
        }
        fftwf_plan_with_nthreads(threads_);
        p = fftwf_plan_guru64_dft(static_cast<int>(dims.size()), dims.data(), static_cast<int>(loops.size()),
                                  loops.empty() ? nullptr : loops.data(), io, io,
                                  dir == FFTDirection::Forward ? FFTW_FORWARD : FFTW_BACKWARD, flags);
    }
    if (!p)
        throw std::runtime_error("fftwf_plan_guru64_dft failed for shape " + shape.str() + " axes " + axes_str(axes));
    t->plan = std::shared_ptr<void>(p, [](void* q) {
        std::lock_guard<std::mutex> planner(fftw_planner_mutex());
        fftwf_destroy_plan(static_cast<fftwf_plan>(q));
    });
    auto& ref = *t;
    plans_.emplace(std::move(key), std::move(t));
    return ref;
}

}  // namespace detail
}  // namespace larmor
