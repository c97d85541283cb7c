#pragma once
// The F^H W F a non-Cartesian CG-SENSE uses in each iteration (proto CgSense.normal): the NUFFT pair or
// the Toeplitz embedding with the trajectory's kernel Q (core/recon/normal_choice.h). Q comes from the
// server's precompute cache (gadgets/noncart/cached_toeplitz.h), so a trajectory that repeats, in this
// session or any later one, pays it once. NORMAL_AUTO measures both on the first buffer of a problem size
// (grid, samples, coils, NUFFT settings) on a device and keeps the times server-wide, so every later
// session of that size gets the same choice without measuring again.
#include <memory>
#include <string>

#include "chain.pb.h"
#include "core/linops/nufft.h"
#include "gadgets/message.h"
#include "gadgets/precompute_cache.h"

namespace larmor {

struct NormalDecision {
    CArray spectrum;          // Q's spectrum for Toeplitz; empty for the NUFFT pair
    std::string description;  // for the log and the image meta, e.g. "Toeplitz (auto: 0.08 vs 0.21 ms)"
};

class NormalOperatorChoice {
public:
    explicit NormalOperatorChoice(config::CgSense::NormalOperator mode) : mode_(mode) {}

    // coords [dims, M] of tb (host); plan: the NUFFT of tb's image x coils at them; weights: host [M]
    // (the density weights of the data term); iterations: CG's cap.
    NormalDecision choose(PrecomputeCache& cache, const std::shared_ptr<Backend>& be, const TrajectoryBuffer& tb,
                          const RArray& coords, const std::shared_ptr<Nufft>& plan, const RArray& weights,
                          const NufftOptions& nufft, int iterations);

private:
    config::CgSense::NormalOperator mode_;
};

}  // namespace larmor
