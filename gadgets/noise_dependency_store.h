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
// never half of one.
//
// Owned: any client can name any id, so each file also keeps the identity of the scan that stored it
// (scan_identity: patient, study, series, system). A later store of the id by the same scan (a
// re-sent measurement) replaces it, as Gadgetron's get_latest; one by a different scan is refused and
// the stored covariance stays, unless the store allows overwriting (--dependency-store-overwrite).
// This keeps one scan's upload from silently replacing another's noise; it is not authentication (a
// client that knows every field of the other scan's header passes as that scan), and the first scan
// to store an id owns it until the file is pruned. Files of version 1 predate identities: they have
// no owner, and any scan may replace them.
//
// Bounded: a 1024-channel covariance is 16 MiB, so a covariance of more than max_channels is not
// stored, and after each store the oldest covariances (by modification time) are removed until the
// store holds at most max_bytes and max_entries; the one just written always stays.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <ismrmrd/xml.h>

#include "gadgets/noise_covariance.h"

namespace larmor {

struct NoiseStoreLimits {
    uint64_t max_bytes = 1ull << 30;  // larmor-server --dependency-store-limit
    size_t max_entries = 4096;        // --dependency-store-entries
    uint32_t max_channels = 256;      // --dependency-store-max-channels
    bool allow_overwrite = false;     // --dependency-store-overwrite: any scan may replace any id
};

// A store the store's policy refuses (another scan's covariance under the id, too many channels):
// nothing was written. The message names the id or the channel count and the flag that allows it.
class NoiseStoreRefused : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The identity of the scan a header describes, for NoiseDependencyStore::save: one "field=value"
// line per field the header has (measurementInformation's measurementID, seriesDate, seriesTime,
// frameOfReferenceUID, protocolName; subjectInformation's patientID; studyInformation's
// studyInstanceUID, studyID, studyDate, studyTime; acquisitionSystemInformation's systemVendor,
// systemModel, deviceID, stationName, institutionName, receiverChannels), in that order. Control
// bytes and '%' are written as %XX, so a value cannot forge another line; a value over
// kMaxIdentityFieldBytes keeps its first bytes and its length ("...%+<bytes>"), which bounds the
// identity (under 13 KiB) while values of different lengths still differ; only two long values of
// one length that differ past their first kMaxIdentityFieldBytes compare equal (DICOM keeps these
// fields to 64 bytes).
std::string scan_identity(const ISMRMRD::IsmrmrdHeader& header);
inline constexpr size_t kMaxIdentityFieldBytes = 256;

class NoiseDependencyStore {
public:
    explicit NoiseDependencyStore(std::string directory, NoiseStoreLimits limits = {});

    const std::string& directory() const { return dir_; }

    // Stores the covariance under the id as the scan of `identity` (scan_identity; not empty), then
    // removes the oldest others while the store is over its limits; returns how many it removed.
    // Throws NoiseStoreRefused, having written nothing, when the covariance has more than
    // max_channels or the id holds a covariance of another identity (and overwriting is not
    // allowed); std::invalid_argument for an id that cannot be stored (empty, or over kMaxIdBytes)
    // or an empty identity; std::runtime_error naming the file on any I/O error.
    size_t save(const std::string& measurement_id, const NoiseCovariance& cov, const std::string& identity) const;

    // The covariance stored under the id; nullopt when there is none. Throws std::runtime_error
    // naming the file when one is there but cannot be read or is not a valid covariance file.
    std::optional<NoiseCovariance> load(const std::string& measurement_id) const;

    // The identity of the scan that stored the id's covariance (empty for a version-1 file); nullopt
    // when there is none. Reads only the file's head. Throws as load().
    std::optional<std::string> owner(const std::string& measurement_id) const;

    // The file an id is kept in (for messages and tests).
    std::string path_for(const std::string& measurement_id) const;

    static constexpr size_t kMaxIdBytes = 200;  // %XX-escaped it stays below NAME_MAX (255)

    const NoiseStoreLimits& limits() const { return limits_; }

private:
    void check_channels(const NoiseCovariance& cov) const;
    void check_owner(const std::string& measurement_id, const std::string& path, const std::string& identity) const;
    void place(const std::string& temp, const std::string& path, const std::string& measurement_id,
               const std::string& identity) const;
    size_t prune(const std::string& keep) const;

    std::string dir_;
    NoiseStoreLimits limits_;
};

}  // namespace larmor
