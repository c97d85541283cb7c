#include "gadgets/noise_dependency_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "wire/messages.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;

// File layout, little-endian (the host's: the store is read back by the server that wrote it):
//   char[8] "LRMNOISE", u32 version, [version 2: u32 identity length + bytes,] u32 channels,
//   u64 samples, f32 noise dwell (us), f64 receiver noise bandwidth, u32 label count, per label
//   u32 length + bytes, channels*channels complex<double> (re, im) row-major.
// The identity comes first so that save() can check a file's owner without reading its matrix.
constexpr char kMagic[8] = {'L', 'R', 'M', 'N', 'O', 'I', 'S', 'E'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kVersionWithoutIdentity = 1;  // still read: its covariance has no owner
constexpr uint32_t kMaxLabelBytes = 4096;
constexpr uint32_t kMaxIdentityBytes = 16u << 10;  // scan_identity() stays below 13 KiB
constexpr size_t kHeadBytes = sizeof kMagic + 2 * sizeof(uint32_t) + kMaxIdentityBytes;  // all owner() reads
constexpr uintmax_t kMaxFileBytes = 64u << 20;  // 1024^2 complex doubles are 16 MiB

std::atomic<unsigned> g_temp_counter{0};

std::string escape_id(const std::string& id) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char ch : id) {
        const bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                           ch == '_' || ch == '-';
        if (plain) {
            out += static_cast<char>(ch);
        } else {
            out += '%';
            out += hex[ch >> 4];
            out += hex[ch & 15];
        }
    }
    return out;
}

// A value of a scan_identity() line: bytes that could end the line or look like an escape are
// written as %XX; a value over kMaxIdentityFieldBytes keeps its head and its length.
void append_identity_value(std::string& out, const std::string& value) {
    static const char* hex = "0123456789ABCDEF";
    const size_t n = std::min(value.size(), kMaxIdentityFieldBytes);
    for (size_t i = 0; i < n; ++i) {
        const auto ch = static_cast<unsigned char>(value[i]);
        if (ch < 0x20 || ch == 0x7F || ch == '%') {
            out += '%';
            out += hex[ch >> 4];
            out += hex[ch & 15];
        } else {
            out += static_cast<char>(ch);
        }
    }
    // "%+" never comes out of the escaping above, so a cut value cannot equal a whole one.
    if (value.size() > n) out += "...%+" + std::to_string(value.size());
}

template <class T>
void add_field(std::string& out, const char* name, const ISMRMRD::Optional<T>& value) {
    if (!value) return;
    out += name;
    out += '=';
    if constexpr (std::is_same_v<T, std::string>)
        append_identity_value(out, *value);
    else
        out += std::to_string(*value);
    out += '\n';
}

// "field=value" lines of an identity as (field, value) pairs, in order.
std::vector<std::pair<std::string, std::string>> identity_fields(const std::string& identity) {
    std::vector<std::pair<std::string, std::string>> fields;
    size_t at = 0;
    while (at < identity.size()) {
        size_t end = identity.find('\n', at);
        if (end == std::string::npos) end = identity.size();
        const std::string line = identity.substr(at, end - at);
        const size_t eq = line.find('=');
        fields.emplace_back(line.substr(0, eq), eq == std::string::npos ? std::string() : line.substr(eq + 1));
        at = end + 1;
    }
    return fields;
}

// "patientID and seriesTime differ": the fields in which two identities disagree, by name only (the
// stored scan's values are not the client's to see).
std::string differing_fields(const std::string& stored, const std::string& identity) {
    const auto a = identity_fields(stored), b = identity_fields(identity);
    auto value_in = [](const auto& fields, const std::string& name) -> std::optional<std::string> {
        for (const auto& [n, v] : fields)
            if (n == name) return v;
        return std::nullopt;
    };
    std::vector<std::string> names;
    for (const auto* side : {&a, &b})
        for (const auto& field : *side) {
            const std::string& name = field.first;
            if (value_in(a, name) != value_in(b, name) && std::find(names.begin(), names.end(), name) == names.end())
                names.push_back(name);
        }
    if (names.empty()) return "their identities differ";
    std::string out;
    for (size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return out + (names.size() == 1 ? " differs" : " differ");
}

template <class T>
void put(std::string& out, const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads the file's fields in order; any shortfall is a damaged file.
class Cursor {
public:
    Cursor(const std::string& bytes, const std::string& path) : b_(bytes), path_(path) {}

    template <class T>
    T get(const char* what) {
        T v;
        need(sizeof v, what);
        std::memcpy(&v, b_.data() + at_, sizeof v);
        at_ += sizeof v;
        return v;
    }
    std::string text(size_t n, const char* what) {
        need(n, what);
        std::string s = b_.substr(at_, n);
        at_ += n;
        return s;
    }
    bool at_end() const { return at_ == b_.size(); }
    [[noreturn]] void damaged(const std::string& why) const {
        throw std::runtime_error("noise dependency file '" + path_ + "' is not a valid Larmor noise covariance: " + why);
    }

private:
    void need(size_t n, const char* what) const {
        if (b_.size() - at_ < n)
            damaged(std::string("it ends in ") + what + " at byte " + std::to_string(at_) + " of " +
                    std::to_string(b_.size()));
    }
    const std::string& b_;
    const std::string& path_;
    size_t at_ = 0;
};

std::string serialize(const NoiseCovariance& cov, const std::string& identity) {
    const size_t c = cov.channels;
    if (c == 0 || c > wire::kMaxChannels || cov.matrix.size() != c * c)
        throw std::invalid_argument("noise covariance of " + std::to_string(c) + " channels holds " +
                                    std::to_string(cov.matrix.size()) + " entries; cannot store it");
    std::string out(kMagic, sizeof kMagic);
    put(out, kVersion);
    put(out, static_cast<uint32_t>(identity.size()));
    out += identity;
    put(out, cov.channels);
    put(out, cov.samples);
    put(out, cov.noise_dwell_time_us);
    put(out, cov.receiver_noise_bandwidth);
    put(out, static_cast<uint32_t>(cov.coil_labels.size()));
    for (const std::string& l : cov.coil_labels) {
        const std::string label = l.substr(0, kMaxLabelBytes);
        put(out, static_cast<uint32_t>(label.size()));
        out += label;
    }
    for (const auto& v : cov.matrix) {
        put(out, v.real());
        put(out, v.imag());
    }
    return out;
}

// Magic, version and identity: the owner of the file (empty for version 1).
std::string read_head(Cursor& in) {
    if (in.text(sizeof kMagic, "the magic") != std::string(kMagic, sizeof kMagic)) in.damaged("wrong magic");
    const uint32_t version = in.get<uint32_t>("the version");
    if (version == kVersionWithoutIdentity) return {};
    if (version != kVersion)
        in.damaged("version " + std::to_string(version) + ", expected " + std::to_string(kVersionWithoutIdentity) +
                   " or " + std::to_string(kVersion));
    const uint32_t n = in.get<uint32_t>("the identity length");
    if (n > kMaxIdentityBytes) in.damaged("identity length " + std::to_string(n));
    return in.text(n, "the identity");
}

NoiseCovariance deserialize(const std::string& bytes, const std::string& path) {
    Cursor in(bytes, path);
    read_head(in);
    NoiseCovariance cov;
    cov.channels = in.get<uint32_t>("the channel count");
    if (cov.channels == 0 || cov.channels > wire::kMaxChannels)
        in.damaged("channel count " + std::to_string(cov.channels) + " outside 1.." + std::to_string(wire::kMaxChannels));
    cov.samples = in.get<uint64_t>("the sample count");
    cov.noise_dwell_time_us = in.get<float>("the noise dwell time");
    cov.receiver_noise_bandwidth = in.get<double>("the receiver bandwidth");
    const uint32_t labels = in.get<uint32_t>("the label count");
    if (labels > wire::kMaxChannels) in.damaged("label count " + std::to_string(labels));
    for (uint32_t i = 0; i < labels; ++i) {
        const uint32_t n = in.get<uint32_t>("a label length");
        if (n > kMaxLabelBytes) in.damaged("label length " + std::to_string(n));
        cov.coil_labels.push_back(in.text(n, "a label"));
    }
    const size_t c = cov.channels;
    cov.matrix.resize(c * c);
    for (auto& v : cov.matrix) {
        const double re = in.get<double>("the matrix");
        const double im = in.get<double>("the matrix");
        v = {re, im};
    }
    if (!in.at_end()) in.damaged("bytes left after the matrix");
    return cov;
}

// The bytes of a stored file, nullopt when there is none; with `head` set only its first kHeadBytes
// (all that owner() needs of a file that may hold 16 MiB).
std::optional<std::string> read_stored(const std::string& path, bool head) {
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) return std::nullopt;
    if (ec) throw std::runtime_error("cannot read the noise dependency file '" + path + "': " + ec.message());
    if (!fs::is_regular_file(status)) throw std::runtime_error("noise dependency '" + path + "' is not a regular file");
    const uintmax_t size = fs::file_size(path, ec);
    if (ec || (!head && size > kMaxFileBytes))
        throw std::runtime_error("noise dependency file '" + path + "' " +
                                 (ec ? "cannot be read: " + ec.message() : "of " + std::to_string(size) + " bytes is too large"));
    std::ifstream in(path, std::ios::binary);
    std::string bytes(static_cast<size_t>(std::min<uintmax_t>(size, head ? kHeadBytes : kMaxFileBytes)), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!in) throw std::runtime_error("cannot read the noise dependency file '" + path + "': " + std::strerror(errno));
    return bytes;
}

// Who may be refused by the file at `path`: nullopt when there is none; empty when any scan may
// replace it (version 1, or a file that cannot be read: a damaged file protects nothing, and keeping
// it would leave the id without a usable covariance for good); else the identity of its scan.
std::optional<std::string> stored_owner(const std::string& path) {
    try {
        const std::optional<std::string> bytes = read_stored(path, true);
        if (!bytes) return std::nullopt;
        Cursor in(*bytes, path);
        return read_head(in);
    } catch (const std::runtime_error&) {
        return std::string();
    }
}

// A temporary file beside its destination; whatever is still under its name goes with it (nothing,
// once renamed into place; the second name, once linked).
class TempFile {
public:
    explicit TempFile(std::string path) : path_(std::move(path)) {}
    ~TempFile() {
        std::error_code ignored;
        fs::remove(path_, ignored);
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (out) out.flush();
    if (!out)
        throw std::runtime_error("cannot write the noise dependency file '" + path + "': " + std::strerror(errno));
}

void move_into_place(const std::string& temp, const std::string& path) {
    std::error_code ec;
    fs::rename(temp, path, ec);
    if (ec) throw std::runtime_error("cannot move '" + temp + "' to '" + path + "': " + ec.message());
}

}  // namespace

std::string scan_identity(const ISMRMRD::IsmrmrdHeader& h) {
    std::string out;
    if (const auto& m = h.measurementInformation) {
        add_field(out, "measurementID", m->measurementID);
        add_field(out, "seriesDate", m->seriesDate);
        add_field(out, "seriesTime", m->seriesTime);
        add_field(out, "frameOfReferenceUID", m->frameOfReferenceUID);
        add_field(out, "protocolName", m->protocolName);
    }
    if (const auto& s = h.subjectInformation) add_field(out, "patientID", s->patientID);
    if (const auto& s = h.studyInformation) {
        add_field(out, "studyInstanceUID", s->studyInstanceUID);
        add_field(out, "studyID", s->studyID);
        add_field(out, "studyDate", s->studyDate);
        add_field(out, "studyTime", s->studyTime);
    }
    if (const auto& a = h.acquisitionSystemInformation) {
        add_field(out, "systemVendor", a->systemVendor);
        add_field(out, "systemModel", a->systemModel);
        add_field(out, "deviceID", a->deviceID);
        add_field(out, "stationName", a->stationName);
        add_field(out, "institutionName", a->institutionName);
        add_field(out, "receiverChannels", a->receiverChannels);
    }
    return out;
}

NoiseDependencyStore::NoiseDependencyStore(std::string directory, NoiseStoreLimits limits)
    : dir_(std::move(directory)), limits_(limits) {}

std::string NoiseDependencyStore::path_for(const std::string& measurement_id) const {
    if (measurement_id.empty()) throw std::invalid_argument("an empty measurement id cannot name a noise dependency");
    if (measurement_id.size() > kMaxIdBytes)
        throw std::invalid_argument("measurement id of " + std::to_string(measurement_id.size()) +
                                    " bytes is longer than the " + std::to_string(kMaxIdBytes) +
                                    " the dependency store keeps");
    return (fs::path(dir_) / ("noise_" + escape_id(measurement_id) + ".cov")).string();
}

size_t NoiseDependencyStore::save(const std::string& measurement_id, const NoiseCovariance& cov,
                                  const std::string& identity) const {
    check_channels(cov);
    const std::string path = path_for(measurement_id);
    if (identity.empty() || identity.size() > kMaxIdentityBytes)
        throw std::invalid_argument("a scan identity of " + std::to_string(identity.size()) +
                                    " bytes cannot own a stored noise covariance (1.." +
                                    std::to_string(kMaxIdentityBytes) + ")");
    const std::string bytes = serialize(cov, identity);
    // Refused before anything is written (a 1024-channel file is 16 MiB); place() checks again.
    if (!limits_.allow_overwrite) check_owner(measurement_id, path, identity);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw std::runtime_error("cannot create the dependency directory '" + dir_ + "': " + ec.message());
    const TempFile temp(path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++g_temp_counter));
    write_file(temp.path(), bytes);
    place(temp.path(), path, measurement_id, identity);
    return prune(path);
}

void NoiseDependencyStore::check_channels(const NoiseCovariance& cov) const {
    if (cov.channels <= limits_.max_channels) return;
    throw NoiseStoreRefused("a noise covariance of " + std::to_string(cov.channels) +
                            " channels is more than the dependency store keeps (at most " +
                            std::to_string(limits_.max_channels) +
                            " channels: larmor-server --dependency-store-max-channels)");
}

void NoiseDependencyStore::check_owner(const std::string& measurement_id, const std::string& path,
                                       const std::string& identity) const {
    const std::optional<std::string> owner = stored_owner(path);
    if (!owner || owner->empty() || *owner == identity) return;
    throw NoiseStoreRefused("measurement '" + measurement_id +
                            "' already holds the noise covariance of another scan (" +
                            differing_fields(*owner, identity) +
                            "); that one is kept. larmor-server --dependency-store-overwrite lets a different scan "
                            "replace a stored covariance");
}

// A free path is taken with link(2), which fails with EEXIST when another session's file got there
// first: two scans storing one id at once cannot both find it free. A taken path is replaced
// (rename) only after check_owner; what is left is a file pruned and stored anew by another scan
// between that check and the rename.
void NoiseDependencyStore::place(const std::string& temp, const std::string& path, const std::string& measurement_id,
                                 const std::string& identity) const {
    if (limits_.allow_overwrite) return move_into_place(temp, path);
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (stored_owner(path)) {
            check_owner(measurement_id, path, identity);
            return move_into_place(temp, path);
        }
        if (::link(temp.c_str(), path.c_str()) == 0) return;
        // A file system without hard links: rename, losing only the guard against a simultaneous first store.
        if (errno != EEXIST) return move_into_place(temp, path);
    }
    throw std::runtime_error("noise dependency file '" + path +
                             "' kept appearing and disappearing while it was stored");
}

size_t NoiseDependencyStore::prune(const std::string& keep) const {
    struct Entry {
        fs::path path;
        fs::file_time_type when;
        uintmax_t bytes;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind("noise_", 0) != 0 || it->path().extension() != ".cov") continue;  // not a stored covariance
        std::error_code e;
        const uintmax_t bytes = it->file_size(e);
        const auto when = it->last_write_time(e);
        if (e) continue;  // removed meanwhile by a concurrent prune
        entries.push_back({it->path(), when, bytes});
        total += bytes;
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.when < b.when; });
    size_t removed = 0, count = entries.size();
    for (const Entry& e : entries) {
        if (total <= limits_.max_bytes && count <= limits_.max_entries) break;
        if (e.path == fs::path(keep)) continue;
        std::error_code r;
        if (fs::remove(e.path, r)) ++removed;
        total -= std::min<uint64_t>(total, e.bytes);
        --count;
    }
    return removed;
}

std::optional<NoiseCovariance> NoiseDependencyStore::load(const std::string& measurement_id) const {
    const std::string path = path_for(measurement_id);
    const std::optional<std::string> bytes = read_stored(path, false);
    if (!bytes) return std::nullopt;
    return deserialize(*bytes, path);
}

std::optional<std::string> NoiseDependencyStore::owner(const std::string& measurement_id) const {
    const std::string path = path_for(measurement_id);
    const std::optional<std::string> bytes = read_stored(path, true);
    if (!bytes) return std::nullopt;
    Cursor in(*bytes, path);
    return read_head(in);
}

}  // namespace larmor
