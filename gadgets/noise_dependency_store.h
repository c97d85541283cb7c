#pragma once
// The server-side dependency store: noise covariances kept under the measurement id of the session
// that measured them, so that a later session whose ISMRMRD header lists that id as its Noise
// measurementDependency prewhitens with it (Gadgetron keeps them in its measurement storage, and
// gadgetron_ismrmrd_client asks for them before sending such data: protocol.md, "Session" 4).
//
// One file per measurement id in one directory (larmor-server --dependency-dir). Ids come from
// clients, so they never name a path: every byte outside [A-Za-z0-9_-] is written as %XX, which keeps
// names unique and inside the directory. Files are written to a temporary name and renamed into
// place, so concurrent sessions and a crash mid-write leave either the old or the new covariance,
// never half of one; the latest store of an id wins, as Gadgetron's get_latest.
//
// Bounded: any client can store noise under any id (a 1024-channel covariance is 16 MiB), so after
// each store the oldest covariances (by modification time) are removed until the store holds at most
// max_bytes and max_entries; the one just written always stays.
#include <optional>
#include <string>

#include "gadgets/noise_covariance.h"

namespace larmor {

struct NoiseStoreLimits {
    uint64_t max_bytes = 1ull << 30;  // larmor-server --dependency-store-limit
    size_t max_entries = 4096;        // --dependency-store-entries
};

class NoiseDependencyStore {
public:
    explicit NoiseDependencyStore(std::string directory, NoiseStoreLimits limits = {});

    const std::string& directory() const { return dir_; }

    // Creates the directory if needed, then removes the oldest others while the store is over its
    // limits; returns how many it removed. Throws std::invalid_argument for an id that cannot be
    // stored (empty, or over kMaxIdBytes), std::runtime_error naming the file on any I/O error.
    size_t save(const std::string& measurement_id, const NoiseCovariance& cov) const;

    // The covariance stored under the id; nullopt when there is none. Throws std::runtime_error
    // naming the file when one is there but cannot be read or is not a valid covariance file.
    std::optional<NoiseCovariance> load(const std::string& measurement_id) const;

    // The file an id is kept in (for messages and tests).
    std::string path_for(const std::string& measurement_id) const;

    static constexpr size_t kMaxIdBytes = 200;  // %XX-escaped it stays below NAME_MAX (255)

    const NoiseStoreLimits& limits() const { return limits_; }

private:
    size_t prune(const std::string& keep) const;

    std::string dir_;
    NoiseStoreLimits limits_;
};

}  // namespace larmor
