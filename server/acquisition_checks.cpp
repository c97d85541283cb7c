#include "server/acquisition_checks.h"

#include "wire/float_checks.h"

namespace larmor::server {
namespace {

std::string described(const wire::Acquisition& a) {
    return "ACQUISITION (scan_counter " + std::to_string(a.head.scan_counter) + ", " +
           std::to_string(a.head.number_of_samples) + " samples x " + std::to_string(a.head.active_channels) +
           " channels)";
}

}  // namespace

DoorVerdict check_acquisition(const wire::Acquisition& a) {
    const auto& h = a.head;
    // available_channels 0: not stated (older converters); otherwise active ones are a subset.
    if (h.available_channels != 0 && h.active_channels > h.available_channels)
        return {DoorVerdict::Refuse, described(a) + ": active_channels " + std::to_string(h.active_channels) +
                                         " exceeds available_channels " + std::to_string(h.available_channels)};
    if (h.number_of_samples > 0 && h.center_sample >= h.number_of_samples)
        return {DoorVerdict::Refuse, described(a) + ": center_sample " + std::to_string(h.center_sample) +
                                         " is not within its " + std::to_string(h.number_of_samples) + " samples"};
    if (uint32_t{h.discard_pre} + h.discard_post > h.number_of_samples)
        return {DoorVerdict::Refuse, described(a) + ": discard_pre " + std::to_string(h.discard_pre) +
                                         " + discard_post " + std::to_string(h.discard_post) + " exceed its " +
                                         std::to_string(h.number_of_samples) + " samples"};
    if (!wire::all_finite(reinterpret_cast<const float*>(a.data.data()), 2 * a.data.size()))
        return {DoorVerdict::Discard, "acquisitions with NaN or infinite samples (kept out of the images)"};
    if (!wire::all_finite(a.traj.data(), a.traj.size()))
        return {DoorVerdict::Discard, "acquisitions with NaN or infinite trajectory points (kept out of the images)"};
    return {};
}

}  // namespace larmor::server
