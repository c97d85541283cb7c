#pragma once
// Gadgetron's noise dependency pre-query (protocol.md, "Session" 4). Before it sends data whose
// header lists a Noise measurementDependency, gadgetron_ismrmrd_client opens a session of its own with
// a CONFIG_SCRIPT holding one NoiseSummaryGadget (property noise_file =
// "GadgetronNoiseCovarianceMatrix_<measurement id>"), then CLOSE, and accepts only DEPENDENCY_QUERY
// (1019) and CLOSE in reply: the HEAD client aborts on anything else. The answer is an ISMRMRD meta
// XML, as Gadgetron's NoiseSummaryGadget + DependencyQueryWriter make it: status "success" with
// channels, min_sigma, max_sigma, mean_sigma and noise_dwell_time_us, or status "failed".
#include <optional>
#include <string>

#include "gadgets/noise_dependency_store.h"

namespace larmor::server {

// The measurement id a CONFIG_SCRIPT asks about when it is such a pre-query (a Gadgetron XML chain
// with a NoiseSummaryGadget); nullopt for any other script. The noise_file value may be a bare id, the
// legacy file name above or a path ending in it; an absent property asks about "" (status failed).
std::optional<std::string> noise_dependency_query_id(const std::string& config_script);

struct DependencyAnswer {
    std::string meta_xml;  // the DEPENDENCY_QUERY payload
    bool found = false;
    std::string detail;    // for the log: what was found, or why not
};

// Looks the id up in `store` (null: no store, status failed). Never throws: a damaged file is
// "failed" with the reason in `detail`.
DependencyAnswer answer_noise_dependency_query(const std::string& measurement_id, const NoiseDependencyStore* store);

}  // namespace larmor::server
