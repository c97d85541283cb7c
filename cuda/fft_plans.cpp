#include "cuda/fft_plans.h"

#include <cufftXt.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>

#include "core/cpu/backend_checks.h"
#include "core/cpu/centring.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_libraries.h"
#include "cuda/fft_strided.h"

namespace larmor::cuda {
namespace {

std::mutex g_failure_mutex;
std::string g_failure;            // first reason the callbacks were not used
std::atomic<bool> g_healthy{true};

void note_fallback(const std::string& why) {
    std::lock_guard<std::mutex> lock(g_failure_mutex);
    g_healthy = false;
    if (!g_failure.empty()) return;
    g_failure = why;
    std::cerr << "larmor: warning: cuFFT LTO callbacks unavailable (" << why
              << "); such transforms are centred by separate passes over memory (slower, still exact)\n";
}

// The centring when LARMOR_CUDA_CENTRING is unset: Larmor's strided-axis kernel with the centring in
// its loads plus bare cuFFT along x (the fastest measured, bench/FLOORS-fft.md); shapes it does not
// take fall back to the load callback.
constexpr Centring kDefaultCentring = Centring::Strided;

// LARMOR_CUDA_CENTRING = strided | load | callbacks | swap | kernels; unset: kDefaultCentring
// (strided falls back to load where the shape does not qualify; swap needs all axes even).
Centring requested_centring(bool odd) {
    const char* v = std::getenv("LARMOR_CUDA_CENTRING");
    if (!v || !*v) return kDefaultCentring;
    if (std::strcmp(v, "strided") == 0) return Centring::Strided;
    if (std::strcmp(v, "load") == 0) return Centring::Load;
    if (std::strcmp(v, "callbacks") == 0) return Centring::Callbacks;
    if (std::strcmp(v, "kernels") == 0) return Centring::Kernels;
    if (std::strcmp(v, "swap") == 0) return odd ? Centring::Kernels : Centring::Swap;
    static std::once_flag once;
    std::call_once(once, [v] { std::cerr << "larmor: warning: unknown LARMOR_CUDA_CENTRING='" << v << "', using the default\n"; });
    return kDefaultCentring;
}

std::atomic<int> g_last{static_cast<int>(Centring::Load)};
std::atomic<size_t> g_last_work{0};

// RAII cuFFT handle.
class Plan {
public:
    Plan() {
        const cufftResult r = cufft_library().create(&h_);
        if (r != CUFFT_SUCCESS) throw_cufft("cufftCreate", r, "");
        // Each session brings its own work area (see the header): none is made with the plan.
        const cufftResult a = cufft_library().set_auto_allocation(h_, 0);
        if (a != CUFFT_SUCCESS) {
            cufft_library().destroy(h_);
            throw_cufft("cufftSetAutoAllocation", a, "");
        }
    }
    ~Plan() { cufft_library().destroy(h_); }
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    cufftHandle get() const { return h_; }

private:
    cufftHandle h_ = 0;
};

std::string describe(const Shape& shape, AxisMask live, const FftRunLayout& r) {
    std::string n;
    for (long long v : r.n) n += (n.empty() ? "" : "x") + std::to_string(v);
    return "shape " + shape.str() + " axes " + detail::axes_str(live) + ", run n=" + n + " stride " +
           std::to_string(r.stride) + " dist " + std::to_string(r.dist) + " batch " + std::to_string(r.batch);
}

// The 32-bit planner where every size fits (the common, best-trodden path, also for callbacks),
// the 64-bit one beyond.
cufftResult make_plan(cufftHandle h, const FftRunLayout& r, size_t* work) {
    const long long lim = 0x7fffffffLL;
    long long run = 1;
    for (long long v : r.n) run *= v;
    const long long span = std::max(r.dist * r.batch, run * r.stride);  // elements one exec touches
    if (span <= lim && r.batch <= lim && r.stride <= lim && r.dist <= lim) {
        std::vector<int> n(r.n.begin(), r.n.end());
        return cufft_library().make_plan_many(h, static_cast<int>(n.size()), n.data(), n.data(), static_cast<int>(r.stride),
                                 static_cast<int>(r.dist), n.data(), static_cast<int>(r.stride),
                                 static_cast<int>(r.dist), CUFFT_C2C, static_cast<int>(r.batch), work);
    }
    std::vector<long long> n = r.n;  // cuFFT takes non-const arrays
    return cufft_library().make_plan_many64(h, static_cast<int>(n.size()), n.data(), n.data(), r.stride, r.dist, n.data(), r.stride,
                               r.dist, CUFFT_C2C, r.batch, work);
}

}  // namespace

struct CufftPlanCache::Transform {
    struct Run {
        FftRunLayout layout;
        std::unique_ptr<Plan> plan;
    };
    std::vector<Run> runs;
    Centring centring = Centring::Kernels;
    bool needs_scratch = false;  // Load with several runs
    ModulationArgs load, store;  // Kernels
    HalfSwapArgs swap;           // Swap
    std::vector<StridedFftArgs> strided;  // Strided: kernel passes, then runs[0] (x) if any
    size_t work_bytes = 0;                // the largest work area of the runs
    std::mutex exec_mutex;                // the runs' handles are used by one host thread at a time
    // The stream and work area the handles were last given (under exec_mutex): an iterative solver
    // repeats one transform on one session's stream, so they are set again only when another session
    // uses the plan.
    cudaStream_t bound_stream = nullptr;
    void* bound_work = nullptr;
    bool bound = false;
};

namespace {

// Transforms the process keeps beyond those its sessions hold, over all devices. A plan without its
// work area is small (cuFFT's twiddles, kernel choices), so this bounds the store to well under the
// memory a single session uses while a site's protocols stay planned.
constexpr size_t kStoredPlans = 256;

PlanRegistry<CufftPlanCache::Transform>& registry() {
    static PlanRegistry<CufftPlanCache::Transform> r(kStoredPlans);
    return r;
}

}  // namespace

PlanRegistryStats cufft_plan_stats() { return registry().stats(); }

void cufft_drop_idle_plans() { registry().drop_idle(); }

const char* centring_name(Centring c) {
    switch (c) {
        case Centring::Load: return "load";
        case Centring::Swap: return "swap";
        case Centring::Callbacks: return "callbacks";
        case Centring::Kernels: return "kernels";
        case Centring::Strided: return "strided";
    }
    return "?";
}

Centring last_planned_centring() { return static_cast<Centring>(g_last.load()); }

size_t last_work_area_bytes() { return g_last_work; }

bool fft_callbacks_healthy() { return g_healthy; }

std::string fft_callbacks_failure() {
    std::lock_guard<std::mutex> lock(g_failure_mutex);
    return g_failure;
}

CufftPlanCache::CufftPlanCache(std::shared_ptr<DeviceContext> ctx) : ctx_(std::move(ctx)) {}

CufftPlanCache::~CufftPlanCache() {
    DeviceGuard guard(ctx_->device());
    if (cudaStreamSynchronize(ctx_->stream()) != cudaSuccess) cudaGetLastError();
    plans_.clear();
}

namespace {

// The transform of `shape` over `live` on the current device (`props` its properties), made once per
// process (CufftPlanCache::get).
std::shared_ptr<CufftPlanCache::Transform> make_transform(const Shape& shape, AxisMask live, FFTDirection dir,
                                                          int device, const cudaDeviceProp& props) {
    using Transform = CufftPlanCache::Transform;
    const bool odd = has_odd_axis(shape, live);
    auto t = std::make_shared<Transform>();
    std::vector<FftRunLayout> layout = fft_layout(shape, live, dir);
    const int arch = props.major * 10 + props.minor;

    Centring want = requested_centring(odd);
    if (want == Centring::Strided) {
        const StridedLayout sl = strided_layout(shape, live, dir);
        if (sl.ok) {
            strided_fft_prepare(device);
            t->centring = Centring::Strided;
            t->strided = sl.passes;
            if (sl.x_pass) {
                auto plan = std::make_unique<Plan>();
                size_t work = 0;
                const std::string ctx = describe(shape, live, sl.x_run);
                const cufftResult res = make_plan(plan->get(), sl.x_run, &work);
                if (res == CUFFT_ALLOC_FAILED)
                    throw std::runtime_error("cufftMakePlanMany: out of GPU memory for the work area of " + ctx);
                if (res != CUFFT_SUCCESS) throw_cufft("cufftMakePlanMany", res, ctx);
                t->work_bytes = std::max(t->work_bytes, work);
                t->runs.push_back({sl.x_run, std::move(plan)});
            }
            g_last = static_cast<int>(t->centring);
            return t;
        }
        want = Centring::Load;  // the shape does not qualify: the general path
    }
    // Load / Callbacks: LTO callbacks under C++ then C symbol names. Any failure (NVRTC, the JIT link
    // inside cuFFT, a plan configuration that refuses callbacks) drops to the plain plans below.
    bool planned = false;
    if (want == Centring::Load || want == Centring::Callbacks) {
        // One callback plan is made at a time in the whole process: with LTO callbacks cuFFT compiles
        // and links kernels (nvJitLink) while planning, and under 32 sessions planning at once on the
        // H100 a run in about 20 ended in an illegal address that poisoned every session on the device,
        // never with plain plans (0 in 20). Plans are made once per process, so the lock is met only by
        // sessions that bring shapes never seen before.
        static std::mutex planning;
        std::lock_guard<std::mutex> one_at_a_time(planning);
        std::string first_error;
        const bool load_only = want == Centring::Load;
        const std::pair<const char*, const char*> names[] = {
            {load_only ? kShiftedLoadCallback : kLoadCallback, load_only ? nullptr : kStoreCallback},
            {load_only ? kShiftedLoadCallbackC : kLoadCallbackC, load_only ? nullptr : kStoreCallbackC}};
        for (const auto& [load_name, store_name] : names) {
            t->runs.clear();
            try {
                for (FftRunLayout& r : layout) {
                    const std::string src = load_only ? shifted_load_source(r.callbacks) : callback_source(r.callbacks);
                    const std::vector<char>& ir = callback_ltoir(src, arch);
                    auto plan = std::make_unique<Plan>();
                    void* info = nullptr;
                    const std::string ctx = describe(shape, live, r);
                    LARMOR_CUFFT_CHECK(cufft_library().xt_set_jit_callback(plan->get(), load_name, ir.data(), ir.size(),
                                                             CUFFT_CB_LD_COMPLEX, &info),
                                       ctx);
                    if (store_name)
                        LARMOR_CUFFT_CHECK(cufft_library().xt_set_jit_callback(plan->get(), store_name, ir.data(), ir.size(),
                                                                 CUFFT_CB_ST_COMPLEX, &info),
                                           ctx);
                    size_t work = 0;
                    LARMOR_CUFFT_CHECK(make_plan(plan->get(), r, &work), ctx);
                    t->work_bytes = std::max(t->work_bytes, work);
                    t->runs.push_back({r, std::move(plan)});
                }
                t->centring = want;
                t->needs_scratch = load_only && t->runs.size() > 1;
                planned = true;
                break;
            } catch (const std::exception& e) {
                cudaGetLastError();
                if (first_error.empty()) first_error = e.what();
            }
        }
        if (!planned) note_fallback(first_error);
    }
    if (!planned) {
        // A failed callback plan falls back to the cheaper of the two plain-plan centrings.
        t->centring = (want == Centring::Kernels || odd) ? Centring::Kernels : Centring::Swap;
        t->runs.clear();
        for (FftRunLayout& r : layout) {
            auto plan = std::make_unique<Plan>();
            size_t work = 0;
            const std::string ctx = describe(shape, live, r);
            const cufftResult res = make_plan(plan->get(), r, &work);
            if (res == CUFFT_ALLOC_FAILED)
                throw std::runtime_error("cufftMakePlanMany: out of GPU memory for the work area of " + ctx);
            if (res != CUFFT_SUCCESS) throw_cufft("cufftMakePlanMany", res, ctx);
            t->work_bytes = std::max(t->work_bytes, work);
            t->runs.push_back({r, std::move(plan)});
        }
        double n_total = 1;
        for (int a = 0; a < shape.rank(); ++a)
            if (live & (1u << a)) {
                for (ModulationArgs* m : {&t->load, &t->store}) {
                    m->stride[m->count] = static_cast<long long>(shape.stride(a));
                    m->n[m->count] = static_cast<long long>(shape[a]);
                    ++m->count;
                }
                n_total *= static_cast<double>(shape[a]);
            }
        t->load.sign = t->store.sign = detail::fft_sign(dir);
        t->store.store = 1;
        t->store.scale = static_cast<float>(1.0 / std::sqrt(n_total));
        t->swap.dims.rank = shape.rank();
        for (int a = 0; a < shape.rank(); ++a) t->swap.dims.n[a] = static_cast<long long>(shape[a]);
        t->swap.live = live;
        t->swap.scale = t->store.scale;
    }
    g_last = static_cast<int>(t->centring);
    return t;
}

}  // namespace

CufftPlanCache::Use& CufftPlanCache::get(const Shape& shape, AxisMask live, FFTDirection dir) {
    const bool odd = has_odd_axis(shape, live);
    std::vector<size_t> key{static_cast<size_t>(shape.rank())};
    for (int a = 0; a < shape.rank(); ++a) key.push_back(shape[a]);
    key.push_back(live);
    key.push_back(odd ? (dir == FFTDirection::Forward ? 1 : 2) : 0);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;

    // The centring a plan uses depends on LARMOR_CUDA_CENTRING, read when it is made: part of the key,
    // so a test that changes it gets plans of its choice.
    std::vector<size_t> process_key{static_cast<size_t>(ctx_->device()), static_cast<size_t>(requested_centring(odd))};
    process_key.insert(process_key.end(), key.begin(), key.end());
    const int device = ctx_->device();
    const cudaDeviceProp& props = ctx_->props();
    Use use;
    use.transform =
        registry().get(process_key, [&] { return make_transform(shape, live, dir, device, props); });
    g_last = static_cast<int>(use.transform->centring);
    g_last_work = use.transform->work_bytes;
    if (use.transform->work_bytes > 0)
        use.work = make_device_storage(ctx_, use.transform->work_bytes, "cuFFT work area of " + shape.str());
    return plans_.emplace(std::move(key), std::move(use)).first->second;
}

void CufftPlanCache::execute(const float2* in, float2* out, const Shape& shape, AxisMask live, FFTDirection dir,
                             const std::function<float2*()>& scratch) {
    std::lock_guard<std::mutex> lock(ctx_->library_mutex());
    // Iterative solvers repeat one transform: skip the map lookup then (host time per call matters
    // for transforms of ~10 us).
    const int dkey = has_odd_axis(shape, live) ? (dir == FFTDirection::Forward ? 1 : 2) : 0;
    if (!last_ || last_shape_ != shape || last_live_ != live || last_dkey_ != dkey) {
        last_ = &get(shape, live, dir);
        last_shape_ = shape;
        last_live_ = live;
        last_dkey_ = dkey;
    }
    Transform& t = *last_->transform;
    void* work = last_->work ? last_->work->data() : nullptr;
    // The shared handles take this session's stream and work area for as long as its runs are queued.
    std::lock_guard<std::mutex> handles(t.exec_mutex);
    const int cufft_dir = dir == FFTDirection::Forward ? CUFFT_FORWARD : CUFFT_INVERSE;
    const long long size = static_cast<long long>(shape.size());
    const cudaStream_t stream = ctx_->stream();
    if (!t.bound || t.bound_stream != stream || t.bound_work != work) {
        for (const auto& run : t.runs) {
            LARMOR_CUFFT_CHECK(cufft_library().set_stream(run.plan->get(), stream), describe(shape, live, run.layout));
            if (t.work_bytes > 0)
                LARMOR_CUFFT_CHECK(cufft_library().set_work_area(run.plan->get(), work), describe(shape, live, run.layout));
        }
        t.bound = true;
        t.bound_stream = stream;
        t.bound_work = work;
    }
    auto exec = [&](const Transform::Run& run, const float2* src, float2* dst) {
        for (long long e = 0; e < run.layout.execs; ++e) {
            // cuFFT takes a non-const input; out of place it only reads it (C2C)
            auto* i = reinterpret_cast<cufftComplex*>(const_cast<float2*>(src + e * run.layout.step));
            auto* o = reinterpret_cast<cufftComplex*>(dst + e * run.layout.step);
            LARMOR_CUFFT_CHECK(cufft_library().exec_c2c(run.plan->get(), i, o, cufft_dir), describe(shape, live, run.layout));
        }
    };
    switch (t.centring) {
        case Centring::Strided: {
            // First pass out of place with every shift, sign and the scale; then plain, in place.
            // The plan key holds no direction for even sizes: the sign is this call's.
            const float2* src = in;
            for (StridedFftArgs a : t.strided) {
                a.sign = dir == FFTDirection::Forward ? -1 : 1;
                launch_strided_fft(src, out, a, stream);
                src = out;
            }
            for (const auto& run : t.runs) exec(run, out, out);
            break;
        }
        case Centring::Load: {
            // Every run reads another buffer than it writes (its load reads shifted elements): the
            // last run writes `out`, the ones before alternate so that no run writes its own input.
            const size_t n = t.runs.size();
            float2* spare = t.needs_scratch ? scratch() : nullptr;
            const float2* src = in;
            for (size_t i = 0; i < n; ++i) {
                float2* dst = (n - 1 - i) % 2 == 0 ? out : spare;
                exec(t.runs[i], src, dst);
                src = dst;
            }
            break;
        }
        case Centring::Callbacks:
        case Centring::Swap:
            // The first run reads `in` and writes `out`; the others work in place on `out`
            // (each element loaded and stored where cuFFT asks).
            for (size_t i = 0; i < t.runs.size(); ++i) exec(t.runs[i], i == 0 ? in : out, out);
            if (t.centring == Centring::Swap) launch_half_swap(out, t.swap, stream);
            break;
        case Centring::Kernels:
            LARMOR_CUDA_CHECK(cudaMemcpyAsync(out, in, static_cast<size_t>(size) * sizeof(float2),
                                              cudaMemcpyDeviceToDevice, stream),
                              "fft input copy of " + shape.str());
            launch_modulation(out, size, t.load, stream);
            for (const auto& run : t.runs) exec(run, out, out);
            launch_modulation(out, size, t.store, stream);
            break;
    }
}

}  // namespace larmor::cuda

namespace larmor {
PlanRegistryStats cuda_fft_plan_stats() { return cuda::cufft_plan_stats(); }
}  // namespace larmor
