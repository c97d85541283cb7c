#include "core/cpu/fftw_plans.h"

#include <fftw3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

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

// Distinct transforms a process keeps beyond those its sessions hold: a plan is a few KB of FFTW's
// and two centring tables of the axes' lengths, so this bounds the store to a few tens of MB even for
// long axes, while a site's protocols (tens of shapes) all stay planned.
constexpr size_t kStoredPlans = 512;

PlanRegistry<FftwTransform>& registry() {
    static PlanRegistry<FftwTransform> r(kStoredPlans);
    return r;
}

// The wisdom file, guarded by the planner mutex (FFTW's wisdom is planner state).
std::string& wisdom_path() {
    static std::string p;
    return p;
}

// Writes FFTW's wisdom to the wisdom file, if one is set, through a temporary name so a reader or a
// crash never sees half a file. Planner mutex held. A failure is reported once and ignored: wisdom
// only saves time.
void save_wisdom_locked() {
    const std::string& path = wisdom_path();
    if (path.empty()) return;
    const std::string tmp = path + ".tmp";
    std::error_code ec;
    if (fftwf_export_wisdom_to_filename(tmp.c_str()) != 0) std::filesystem::rename(tmp, path, ec);
    else ec = std::make_error_code(std::errc::io_error);
    if (ec) {
        static bool told = false;
        if (!told) std::fprintf(stderr, "larmor: warning: cannot write FFTW wisdom to %s: %s\n", path.c_str(), ec.message().c_str());
        told = true;
        std::filesystem::remove(tmp, ec);
    }
}

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

namespace {

// The plan of one transform, made under FFTW's planner lock (see the header).
std::shared_ptr<FftwTransform> make_transform(const Shape& shape, AxisMask axes, FFTDirection dir, cfloat* data,
                                              int align, int threads, bool may_measure) {
    auto t = std::make_shared<FftwTransform>();
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
        const bool measure = may_measure && fftw_measures(shape, axes);
        const unsigned flags = (measure ? FFTW_MEASURE : FFTW_ESTIMATE) | (align != 0 ? FFTW_UNALIGNED : 0u);
        std::unique_ptr<fftwf_complex, void (*)(void*)> scratch(nullptr, fftwf_free);
        auto* io = reinterpret_cast<fftwf_complex*>(data);
        std::lock_guard<std::mutex> planner(fftw_planner_mutex());
        if (measure) {
            scratch.reset(fftwf_alloc_complex(shape.size()));
            if (!scratch) throw std::bad_alloc();
            io = scratch.get();
        }
        fftwf_plan_with_nthreads(threads);
        p = fftwf_plan_guru64_dft(static_cast<int>(dims.size()), dims.data(), static_cast<int>(loops.size()),
                                  loops.empty() ? nullptr : loops.data(), io, io,
                                  dir == FFTDirection::Forward ? FFTW_FORWARD : FFTW_BACKWARD, flags);
        if (p && measure) save_wisdom_locked();
    }
    if (!p)
        throw std::runtime_error("fftwf_plan_guru64_dft failed for shape " + shape.str() + " axes " + axes_str(axes));
    t->plan = std::shared_ptr<void>(p, [](void* q) {
        std::lock_guard<std::mutex> planner(fftw_planner_mutex());
        fftwf_destroy_plan(static_cast<fftwf_plan>(q));
    });
    return t;
}

}  // namespace

FftwPlanCache::FftwPlanCache(int threads, double measure_budget_seconds)
    : threads_(threads < 1 ? 1 : threads), measure_budget_(measure_budget_seconds) {
    init_fftw_threads_once();
}

size_t FftwPlanCache::estimated_over_budget() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return over_budget_;
}

const FftwTransform& FftwPlanCache::get(const Shape& shape, AxisMask axes, FFTDirection dir, cfloat* data) {
    // Plans made for SIMD-aligned arrays must only run on arrays of the same alignment (FFTW manual,
    // "New-array Execute Functions"); the alignment class is part of the key, and so is the thread
    // count a plan was made for.
    const int align = fftwf_alignment_of(reinterpret_cast<float*>(data));
    std::vector<size_t> key;
    key.push_back(static_cast<size_t>(shape.rank()));
    for (int a = 0; a < shape.rank(); ++a) key.push_back(shape[a]);
    key.push_back(axes);
    key.push_back(dir == FFTDirection::Forward ? 0 : 1);
    key.push_back(static_cast<size_t>(align));
    key.push_back(static_cast<size_t>(threads_));

    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    // This backend's lock stays held while the registry makes or waits for the plan: the backend's
    // other callers (the same session's threads) have nothing else to do with FFTW meanwhile, and other
    // sessions are not behind it.
    std::shared_ptr<FftwTransform> t = registry().get(key, [&] {
        // A session that has measured for kSessionMeasureSeconds gets estimated plans from then on: a
        // stream of ever new shapes cannot keep FFTW's planner (one lock for the process) to itself.
        const auto t0 = std::chrono::steady_clock::now();
        const bool may_measure = measured_seconds_ < measure_budget_;
        if (!may_measure && fftw_measures(shape, axes)) ++over_budget_;
        auto made = make_transform(shape, axes, dir, data, align, threads_, may_measure);
        measured_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return made;
    });
    auto& ref = *t;
    plans_.emplace(std::move(key), std::move(t));
    return ref;
}

}  // namespace detail

std::string fftw_wisdom_file(const std::string& path) {
    detail::init_fftw_threads_once();
    std::lock_guard<std::mutex> planner(fftw_planner_mutex());
    detail::wisdom_path() = path;
    if (path.empty()) return "";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return "";
    if (fftwf_import_wisdom_from_filename(path.c_str()) == 0)
        return "FFTW wisdom file " + path + " is unreadable or not FFTW wisdom; ignored (it is rewritten after the next measured plan)";
    return "";
}

PlanRegistryStats fftw_plan_stats() { return detail::registry().stats(); }

uint64_t fftw_drop_idle_plans() { return detail::registry().drop_idle(); }

void set_fftw_plan_budget(std::shared_ptr<MemoryBudget> budget) {
    detail::registry().charge_to(std::move(budget), [](const detail::FftwTransform& t) {
        // The centring tables, and FFTW's twiddles and Bluestein buffers: a few complex values per
        // sample of each transformed axis, counted as four.
        uint64_t bytes = 4096;
        for (const auto& table : t.load) bytes += table.size() * sizeof(cfloat) * 5;
        for (const auto& table : t.store) bytes += table.size() * sizeof(cfloat);
        return bytes;
    });
}

}  // namespace larmor
