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
#include <vector>

#include "wire/messages.h"

namespace larmor {
namespace {

namespace fs = std::filesystem;

// File layout, little-endian (the host's: the store is read back by the server that wrote it):
//   char[8] "LRMNOISE", u32 version, u32 channels, u64 samples, f32 noise dwell (us),
//   f64 receiver noise bandwidth, u32 label count, per label u32 length + bytes,
//   channels*channels complex<double> (re, im) row-major.
constexpr char kMagic[8] = {'L', 'R', 'M', 'N', 'O', 'I', 'S', 'E'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxLabelBytes = 4096;
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

std::string serialize(const NoiseCovariance& cov) {
    const size_t c = cov.channels;
    if (c == 0 || c > wire::kMaxChannels || cov.matrix.size() != c * c)
        throw std::invalid_argument("noise covariance of " + std::to_string(c) + " channels holds " +
                                    std::to_string(cov.matrix.size()) + " entries; cannot store it");
    std::string out(kMagic, sizeof kMagic);
    put(out, kVersion);
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

NoiseCovariance deserialize(const std::string& bytes, const std::string& path) {
    Cursor in(bytes, path);
    if (in.text(sizeof kMagic, "the magic") != std::string(kMagic, sizeof kMagic)) in.damaged("wrong magic");
    const uint32_t version = in.get<uint32_t>("the version");
    if (version != kVersion) in.damaged("version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
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

}  // namespace

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

size_t NoiseDependencyStore::save(const std::string& measurement_id, const NoiseCovariance& cov) const {
    const std::string path = path_for(measurement_id);
    const std::string bytes = serialize(cov);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw std::runtime_error("cannot create the dependency directory '" + dir_ + "': " + ec.message());
    const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++g_temp_counter);
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (out) out.flush();
        if (!out) {
            const std::string why = std::strerror(errno);
            fs::remove(temp, ec);
            throw std::runtime_error("cannot write the noise dependency file '" + temp + "': " + why);
        }
    }
    fs::rename(temp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(temp, ignored);
        throw std::runtime_error("cannot move '" + temp + "' to '" + path + "': " + ec.message());
    }
    return prune(path);
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
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) return std::nullopt;
    if (ec) throw std::runtime_error("cannot read the noise dependency file '" + path + "': " + ec.message());
    if (!fs::is_regular_file(status)) throw std::runtime_error("noise dependency '" + path + "' is not a regular file");
    const uintmax_t size = fs::file_size(path, ec);
    if (ec || size > kMaxFileBytes)
        throw std::runtime_error("noise dependency file '" + path + "' " +
                                 (ec ? "cannot be read: " + ec.message() : "of " + std::to_string(size) + " bytes is too large"));
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof())
        throw std::runtime_error("cannot read the noise dependency file '" + path + "': " + std::strerror(errno));
    return deserialize(bytes, path);
}

}  // namespace larmor
