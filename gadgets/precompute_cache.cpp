#include "gadgets/precompute_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <spdlog/spdlog.h>

#include "gadgets/gadget.h"

namespace larmor {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'L', 'A', 'R', 'M', 'O', 'R', 'P', '2'};
constexpr const char* kSuffix = ".larmor-pc";

std::string file_name(const std::string& key) {
    char b[32];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(fnv1a64(key.data(), key.size())));
    return std::string(b) + kSuffix;
}

template <class T>
void write_raw(std::ostream& o, T v) {
    o.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
bool read_raw(std::istream& i, T& v) {
    return static_cast<bool>(i.read(reinterpret_cast<char*>(&v), sizeof v));
}

// Removes the oldest cache files until the directory holds at most `limit` bytes of them.
void prune(const std::string& dir, uint64_t limit) {
    std::error_code ec;
    std::vector<std::pair<fs::file_time_type, fs::path>> files;
    uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.path().extension() != kSuffix) continue;
        const uint64_t size = e.file_size(ec);
        if (ec) continue;
        total += size;
        files.emplace_back(e.last_write_time(ec), e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& [t, path] : files) {
        if (total <= limit) break;
        const uint64_t size = fs::file_size(path, ec);
        if (fs::remove(path, ec)) {
            total -= std::min(total, size);
            spdlog::info("precompute cache: removed {} (the directory's limit is {})", path.string(), format_bytes(limit));
        }
    }
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t h = seed;
    for (size_t i = 0; i < bytes; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

const char* PrecomputeCache::source_name(Source s) {
    switch (s) {
        case Source::Memory: return "cached (memory)";
        case Source::Disk: return "cached (disk)";
        case Source::Computed: break;
    }
    return "computed";
}

PrecomputeCache::PrecomputeCache(Options options, std::shared_ptr<MemoryBudget> parent)
    : options_(std::move(options)),
      budget_(std::make_shared<MemoryBudget>("precompute cache (--precompute-cache-memory)", options_.memory_limit,
                                             std::move(parent))) {
    if (!options_.directory.empty()) {
        std::error_code ec;
        fs::create_directories(options_.directory, ec);
        if (ec) {
            spdlog::warn("precompute cache: directory '{}' cannot be created ({}): kernels are kept in memory only",
                         options_.directory, ec.message());
            options_.directory.clear();
        }
    }
}

bool PrecomputeCache::contains(const std::string& key, bool persistent) const {
    {
        std::lock_guard<std::mutex> lock(m_);
        if (entries_.count(key)) return true;
    }
    std::error_code ec;
    return persistent && !options_.directory.empty() && fs::exists(fs::path(options_.directory) / file_name(key), ec);
}

PrecomputeCache::Stats PrecomputeCache::stats() const {
    std::lock_guard<std::mutex> lock(m_);
    Stats s = stats_;
    s.entries = entries_.size();
    s.bytes = budget_->in_use();
    return s;
}

PrecomputeCache::Entry PrecomputeCache::get(const std::string& key, bool persistent,
                                            const std::function<CArray()>& compute) {
    {
        std::lock_guard<std::mutex> lock(m_);
        const auto it = entries_.find(key);
        if (it != entries_.end()) {
            lru_.splice(lru_.begin(), lru_, it->second.at);
            ++stats_.memory_hits;
            return {it->second.value, Source::Memory, it->second.compute_seconds};
        }
    }
    const bool disk = persistent && !options_.directory.empty();
    if (disk) {
        double seconds = 0;
        CArray v = read_file(key, seconds);
        if (!v.empty()) {
            {
                std::lock_guard<std::mutex> lock(m_);
                ++stats_.disk_hits;
            }
            return keep(key, v, Source::Disk, seconds);
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const CArray v = compute();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (v.empty()) throw std::runtime_error("precompute cache: computing '" + key + "' gave an empty array");
    {
        std::lock_guard<std::mutex> lock(m_);
        ++stats_.computed;
    }
    if (disk) write_file(key, v, seconds);
    return keep(key, v, Source::Computed, seconds);
}

PrecomputeCache::Entry PrecomputeCache::keep(const std::string& key, const CArray& host, Source source,
                                             double compute_seconds) {
    std::lock_guard<std::mutex> lock(m_);
    if (const auto it = entries_.find(key); it != entries_.end())  // another session's, meanwhile
        return {it->second.value, source, it->second.compute_seconds};
    if (host.bytes() > options_.memory_limit) return {std::make_shared<const CArray>(host), source, compute_seconds};
    CArray owned;
    for (;;) {
        try {
            owned = CArray::host(host.shape(), budget_);
            break;
        } catch (const MemoryBudgetExceeded&) {
            if (lru_.empty()) return {std::make_shared<const CArray>(host), source, compute_seconds};  // no room
            const std::string victim = lru_.back();
            lru_.pop_back();
            entries_.erase(victim);
            ++stats_.evicted;
        }
    }
    std::memcpy(owned.data(), host.data(), host.bytes());
    auto value = std::make_shared<const CArray>(std::move(owned));
    lru_.push_front(key);
    entries_[key] = Slot{value, compute_seconds, lru_.begin()};
    return {value, source, compute_seconds};
}

CArray PrecomputeCache::read_file(const std::string& key, double& compute_seconds) const {
    const fs::path path = fs::path(options_.directory) / file_name(key);
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    auto bad = [&](const char* why) {
        spdlog::warn("precompute cache: {} is not usable ({}): computing it again", path.string(), why);
        return CArray();
    };
    char magic[8];
    uint32_t key_size = 0, rank = 0;
    if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return bad("not a Larmor cache file");
    if (!read_raw(in, key_size) || key_size != key.size()) return bad("another key");
    std::string stored(key_size, '\0');
    if (!in.read(stored.data(), key_size) || stored != key) return bad("another key");
    if (!read_raw(in, compute_seconds) || !(compute_seconds >= 0)) return bad("bad cost");
    if (!read_raw(in, rank) || rank == 0 || rank > uint32_t(Shape::kMaxRank)) return bad("bad rank");
    Shape shape;
    for (uint32_t a = 0; a < rank; ++a) {
        uint64_t v = 0;
        if (!read_raw(in, v) || v == 0 || v > (uint64_t(1) << 40)) return bad("bad size");
        shape.push_back(size_t(v));
    }
    uint64_t bytes = 0, checksum = 0;
    if (!read_raw(in, bytes) || bytes != shape.size() * sizeof(cfloat)) return bad("sizes disagree");
    CArray v = CArray::host(shape);
    if (!in.read(reinterpret_cast<char*>(v.data()), std::streamsize(bytes))) return bad("truncated");
    if (!read_raw(in, checksum) || checksum != fnv1a64(v.data(), bytes)) return bad("checksum");
    return v;
}

void PrecomputeCache::write_file(const std::string& key, const CArray& value, double compute_seconds) {
    const fs::path dir(options_.directory), path = dir / file_name(key);
    // Written aside and renamed: a reader (another server on the same directory) never sees half a file.
    const fs::path tmp = dir / (file_name(key) + ".tmp." + std::to_string(::getpid()));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(kMagic, sizeof kMagic);
        write_raw(out, uint32_t(key.size()));
        out.write(key.data(), std::streamsize(key.size()));
        write_raw(out, compute_seconds);
        write_raw(out, uint32_t(value.shape().rank()));
        for (int a = 0; a < value.shape().rank(); ++a) write_raw(out, uint64_t(value.shape()[a]));
        write_raw(out, uint64_t(value.bytes()));
        out.write(reinterpret_cast<const char*>(value.data()), std::streamsize(value.bytes()));
        write_raw(out, fnv1a64(value.data(), value.bytes()));
        if (!out) {
            std::error_code ec;
            fs::remove(tmp, ec);
            spdlog::warn("precompute cache: writing {} failed: kept in memory only", path.string());
            return;
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        spdlog::warn("precompute cache: {} cannot be written ({}): kept in memory only", path.string(), ec.message());
        return;
    }
    prune(options_.directory, options_.disk_limit);
}

PrecomputeCache& default_precompute_cache() {
    static PrecomputeCache c{PrecomputeCache::Options{}};
    return c;
}

PrecomputeCache& precompute_cache(const SessionContext& ctx) {
    return ctx.precompute ? *ctx.precompute : default_precompute_cache();
}

}  // namespace larmor
