#pragma once
// FFTW plans of the CPU backend (Frigo & Johnson, "The design and implementation of FFTW3", Proc.
// IEEE 93:216, 2005), shared by every backend of the process through one PlanRegistry
// (core/plan_registry.h): a shape is planned once per process, and every session runs the same plan,
// so the images of the same data are identical from session to session. FFTW's planner is not
// thread-safe, so every plan creation and destruction goes through fftw_planner_mutex(); executing a
// plan on new arrays (fftwf_execute_dft) is thread-safe and needs no lock. Planning two shapes at once
// therefore still takes turns inside FFTW, but never for longer than one bounded plan (below), and a
// session that finds its plan made waits for nothing.
//
// Wisdom (what FFTW_MEASURE learnt) can be kept across restarts in a file (fftw_wisdom_file): the
// server names one in --precompute-cache-dir, imports it at start and rewrites it after each new
// measured plan, so a restarted server plans a known shape in microseconds and picks the same
// algorithm as before.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/plan_registry.h"

namespace larmor {

// The one lock around FFTW's planner for the whole process: anything else in Larmor that plans with
// FFTW must hold it too.
std::mutex& fftw_planner_mutex();

// Keeps FFTW's wisdom in `path` from now on: imports what the file holds (a missing file is not an
// error; an unreadable or corrupt one is reported in the returned string and ignored), then rewrites
// the file (to a temporary name, then renamed) after every measured plan. Empty path: stop keeping it.
// Returns an empty string on success.
std::string fftw_wisdom_file(const std::string& path);

// The process's FFTW plan registry, for the status endpoint and tests.
PlanRegistryStats fftw_plan_stats();
// Drops the stored plans no backend holds; returns the bytes they were charged (set_fftw_plan_budget).
uint64_t fftw_drop_idle_plans();
// Stored plans are charged to `budget` from now on (the server's host budget): their centring tables
// and FFTW's own tables, which for long awkward axes reach a megabyte each (null: not charged).
void set_fftw_plan_budget(std::shared_ptr<MemoryBudget> budget);

namespace detail {

// Whether a transform of `shape` over `axes` gets a measured plan (FFTW_MEASURE) rather than FFTW's
// estimate: large enough for measuring to pay (at least 2^15 elements), and every transformed length
// a product of 2, 3, 5 and 7. Other lengths (a prime, or 65534 = 2 x 7 x 31 x 151) send FFTW_MEASURE
// through Rader's and Bluestein's algorithms, where one plan measured for a minute while it held the
// process's planner lock and every other session waited (issue 19, finding 4); FFTW_ESTIMATE plans
// them in milliseconds.
bool fftw_measures(const Shape& shape, AxisMask axes);

// Every measured plan is also bounded in time (fftwf_set_timelimit), so even a smooth length cannot
// hold the planner lock for longer than about this.
constexpr double kFftwPlanSeconds = 1.0;
// And each backend (one session) gets measured plans for this long in all; after it, FFTW_ESTIMATE.
constexpr double kSessionMeasureSeconds = 4.0;

// One cached transform: the FFTW plan over all requested axes (batched over the others) and the
// centring modulation tables per axis (empty for axes not transformed), see centring.h.
struct FftwTransform {
    std::shared_ptr<void> plan;  // fftwf_plan, destroyed under the planner mutex
    std::vector<std::vector<cfloat>> load;
    std::vector<std::vector<cfloat>> store;
};

// One backend's view of the process's plans: the transforms it used, kept alive while it lives and
// found again without the registry's lock.
class FftwPlanCache {
public:
    // `measure_budget_seconds`: this cache's planning time with FFTW_MEASURE (kSessionMeasureSeconds).
    explicit FftwPlanCache(int threads, double measure_budget_seconds = kSessionMeasureSeconds);
    // The transform for arrays of `shape` over `axes` (only axes longer than 1) in direction `dir`
    // whose data pointer has the SIMD alignment of `data`. Thread-safe.
    const FftwTransform& get(const Shape& shape, AxisMask axes, FFTDirection dir, cfloat* data);
    // Plans this cache made by FFTW_ESTIMATE although fftw_measures() would have measured them.
    size_t estimated_over_budget() const;

private:
    int threads_;
    double measure_budget_;
    double measured_seconds_ = 0;  // planning this cache did itself, under mutex_
    size_t over_budget_ = 0;       // under mutex_
    mutable std::mutex mutex_;
    std::map<std::vector<size_t>, std::shared_ptr<FftwTransform>> plans_;
};

}  // namespace detail
}  // namespace larmor
