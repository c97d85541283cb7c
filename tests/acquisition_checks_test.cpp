// The door check of every acquisition (server/acquisition_checks.h) on the values at the edges of
// float: NaN (quiet, signalling, negative), both infinities, in any sample or trajectory position,
// are discarded; the largest and smallest finite values, subnormals and negative zero pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "server/acquisition_checks.h"

namespace larmor::server {
namespace {

wire::Acquisition acquisition(size_t samples, size_t channels, size_t traj_dims) {
    wire::Acquisition a;
    a.head.number_of_samples = static_cast<uint16_t>(samples);
    a.head.active_channels = static_cast<uint16_t>(channels);
    a.head.available_channels = static_cast<uint16_t>(channels);
    a.head.trajectory_dimensions = static_cast<uint16_t>(traj_dims);
    a.data.assign(samples * channels, {0.5f, -0.25f});
    a.traj.assign(samples * traj_dims, 0.1f);
    return a;
}

float from_bits(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

TEST(AcquisitionChecks, EveryNonFiniteValueAnywhereIsDiscarded) {
    const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                         -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(), from_bits(0x7f800001u), from_bits(0xffffffffu)};
    for (float v : bad)
        for (size_t at : {size_t(0), size_t(1), size_t(37), size_t(2 * 67 * 3 - 1)}) {  // both parts, the last float
            wire::Acquisition a = acquisition(67, 3, 2);
            reinterpret_cast<float*>(a.data.data())[at] = v;
            EXPECT_EQ(check_acquisition(a).kind, DoorVerdict::Discard) << "sample float " << at << " = " << v;
            wire::Acquisition t = acquisition(67, 3, 2);
            t.traj[at % t.traj.size()] = v;
            EXPECT_EQ(check_acquisition(t).kind, DoorVerdict::Discard) << "trajectory float " << at % t.traj.size();
        }
}

TEST(AcquisitionChecks, FiniteExtremesPass) {
    const float good[] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), -0.f,
                          from_bits(0x7f7fffffu), from_bits(0x007fffffu)};
    wire::Acquisition a = acquisition(67, 3, 2);
    for (size_t i = 0; i < 2 * a.data.size(); ++i) reinterpret_cast<float*>(a.data.data())[i] = good[i % std::size(good)];
    for (size_t i = 0; i < a.traj.size(); ++i) a.traj[i] = good[i % std::size(good)];
    EXPECT_EQ(check_acquisition(a).kind, DoorVerdict::Accept);
    EXPECT_EQ(check_acquisition(acquisition(0, 0, 0)).kind, DoorVerdict::Accept);
}

}  // namespace
}  // namespace larmor::server
