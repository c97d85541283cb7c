#pragma once
// Trajectories computed from a chain's parameters (proto ComputedTrajectory) for non-Cartesian readouts
// that carry no ISMRMRD `traj`: accumulate_readouts asks for one readout's coordinates at a time, with
// the core/trajectory generators larmor-phantom writes its data with, so a stream without `traj` gets
// the coordinates a stream with them would have carried.
//
// What is cached: a set of readouts that repeats (TRAJECTORY_RADIAL, TRAJECTORY_INTERLEAVED_RADIAL and
// TRAJECTORY_SPIRAL, a stack of stars whose partitions are not turned) is generated once, by the array
// generator, and every readout is copied out of it; a spiral's arc-length table in particular is far too
// costly to rebuild per readout. In an aperiodic sequence (golden angles, the kooshball) or a turned
// stack of stars every readout has a direction of its own and nothing repeats, so each is computed alone
// by core/trajectory's single-spoke entry points: one sine and cosine and n multiplications, what copying
// it out of a cache would cost, and bit for bit the readout the array generator gives.
#include <cstddef>
#include <string>
#include <vector>

#include <ismrmrd/ismrmrd.h>
#include <ismrmrd/xml.h>

#include "chain.pb.h"
#include "core/array.h"
#include "core/trajectory/trajectory.h"
#include "gadgets/message.h"

namespace larmor {

// The ISMRMRD header's trajectory type as its XML spells it: "cartesian", "radial", "goldenangle", ...
const char* trajectory_type_name(ISMRMRD::TrajectoryType type);

class ComputedTrajectory {
public:
    // Validates the parameters: throws ConfigError naming the field and its value (a required field
    // unset or out of range, interleaves not dividing spokes, a field the kind does not use).
    explicit ComputedTrajectory(const config::ComputedTrajectory& cfg);

    bool override_stream() const { return cfg_.override_stream(); }
    // "TRAJECTORY_GOLDEN_ANGLE", ... for messages.
    std::string kind_name() const;
    // Coordinates per sample: 3 for the kooshball, 2 otherwise (a stack of stars' kz is its partition,
    // added by the accumulator as for a streamed 2D trajectory).
    int dims() const;
    // The sample where k = 0 in a readout of `samples` samples: samples / 2 on a spoke, 0 on a spiral.
    size_t centre_sample(size_t samples) const;
    // Empty when the header's trajectory type fits the kind, else a sentence saying how they differ.
    // "other" fits every kind (it names no family).
    std::string header_disagreement(ISMRMRD::TrajectoryType header) const;

    // Fixes what all readouts share, at the first one computed: |k| up to N/2 cycles per FOV with N the
    // reconSpace matrix along x, `samples` per readout, the partitions of a stack of stars (the encoded
    // matrix along z) and the readouts per repetition of a golden-angle kind (the header's
    // kspace_encoding_step_1 maximum + 1). Throws std::runtime_error naming the values for a geometry the
    // trajectory cannot have: a matrix that is not square in-plane (not a cube for the kooshball), a
    // stack of stars without partitions, fewer than 2 samples.
    void bind(const EncodingGeometry& geometry, size_t samples);
    bool bound() const { return samples_ > 0; }

    // Coordinates of one readout in cycles per FOV: sample s's dims() values at out[s * stride ...].
    // The readout index is head.idx.kspace_encode_step_1 (with the repetition for golden-angle kinds, see
    // the proto); `partition` is a stack of stars' partition, 0 .. partitions - 1 (kz = partition -
    // partitions / 2), ignored otherwise. Throws std::runtime_error naming both values when
    // head.center_sample is not centre_sample(), or when a golden-angle readout's index across
    // repetitions would be ambiguous (kspace_encode_step_1 beyond the header's maximum).
    void fill(const ISMRMRD::ISMRMRD_AcquisitionHeader& head, int partition, float* out, int stride);

    // Times a whole set of readouts was generated (1 at most per session: the cache's only miss).
    size_t sets_generated() const { return sets_generated_; }

private:
    long sequence_index(const ISMRMRD::ISMRMRD_AcquisitionHeader& head) const;
    const float* cached_readout(long index);

    config::ComputedTrajectory cfg_;
    size_t samples_ = 0;       // per readout, fixed by bind()
    trajectory::RadialSpec spec_;  // radial kinds: samples, oversampling, kmax, order, angles
    int partitions_ = 1;
    long readouts_per_repetition_ = 1;  // e1 maximum + 1 (golden-angle kinds)
    uint16_t e1_max_ = 0;
    RArray set_;                 // the repeating set, [2, samples, period], once generated
    size_t period_ = 0;          // readouts in set_
    std::vector<float> scratch_; // one readout of a 3D generator, whose third axis is dropped
    size_t sets_generated_ = 0;
};

}  // namespace larmor
