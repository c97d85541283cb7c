#include "gadgets/precompute_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>
#include <vector>

#include <spdlog/spdlog.h>

#include "gadgets/gadget.h"

namespace larmor {
namespace fs = std::filesystem;

namespace {

// Version 3 adds the element type (complex Q, real density weights); a version-2 file is recomputed.
constexpr char kMagic[8] = {'L', 'A', 'R', 'M', 'O', 'R', 'P', '3'};
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

namespace {
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
}  // namespace

uint64_t hash_words(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t lane[4] = {0x9e3779b97f4a7c15ull, 0x6a09e667f3bcc909ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull};
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32)
        for (int l = 0; l < 4; ++l) {
            uint64_t w;
            std::memcpy(&w, p + i + 8 * l, 8);
            lane[l] = mix64(lane[l] ^ w);
        }
    uint64_t h = fnv1a64(p + i, bytes - i, bytes);  // the tail, and the length
    for (int l = 0; l < 4; ++l) h = mix64(h ^ lane[l]);
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

PrecomputeCache::PrecomputeCache(Options options, std::shared_ptr<MemoryBudget> parent,
                                 std::map<int, std::shared_ptr<MemoryBudget>> device_parents)
    : options_(std::move(options)),
      budget_(std::make_shared<MemoryBudget>("precompute cache (--precompute-cache-memory)", options_.memory_limit,
                                             std::move(parent))),
      device_parents_(std::move(device_parents)) {
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

PrecomputeCache::~PrecomputeCache() = default;

void PrecomputeCache::evict_locked(const std::string& key) {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return;
    lru_.erase(it->second.at);
    entries_.erase(it);
    ++stats_.evicted;
}

uint64_t PrecomputeCache::shrink(uint64_t bytes, int device) {
    std::lock_guard<std::mutex> lock(m_);
    uint64_t evicted = 0;
    std::vector<std::string> victims;
    for (auto it = lru_.rbegin(); evicted < bytes && it != lru_.rend(); ++it) {
        const Slot& slot = entries_.at(*it);
        if (slot.device != device) continue;
        evicted += slot.bytes;
        victims.push_back(*it);
    }
    for (const auto& key : victims) evict_locked(key);
    if (evicted)
        spdlog::info("precompute cache: {} evicted on {} to make room for a session", format_bytes(evicted),
                     device < 0 ? std::string("the host") : "CUDA device " + std::to_string(device));
    return evicted;
}

const std::shared_ptr<MemoryBudget>& PrecomputeCache::device_budget_locked(int device) {
    auto& b = device_budgets_[device];
    if (!b) {
        const auto parent = device_parents_.find(device);
        b = std::make_shared<MemoryBudget>(
            "precompute cache on CUDA device " + std::to_string(device) + " (--precompute-cache-memory)",
            options_.memory_limit, parent == device_parents_.end() ? nullptr : parent->second);
    }
    return b;
}

Backend& PrecomputeCache::device_backend(int device, std::unique_lock<std::mutex>& lock) {
    DeviceBackend* slot = nullptr;
    {
        std::lock_guard<std::mutex> guard(m_);
        DeviceBackend& d = device_backends_[device];
        if (!d.backend) d.backend = make_cuda_backend(device, MemoryBudgets{budget_, device_budget_locked(device)});
        slot = &d;  // map nodes stay put
    }
    lock = std::unique_lock<std::mutex>(*slot->in_use);
    return *slot->backend;
}

std::shared_ptr<const void> PrecomputeCache::get_object(const std::string& key, int device,
                                                        const std::function<Object()>& compute, Source* source) {
    {
        std::lock_guard<std::mutex> lock(m_);
        const auto it = entries_.find(key);
        if (it != entries_.end() && it->second.type == 'o' && it->second.device == device) {
            lru_.splice(lru_.begin(), lru_, it->second.at);
            ++stats_.memory_hits;
            if (source) *source = Source::Memory;
            return it->second.value;
        }
    }
    Object o = compute();
    if (!o.value) throw std::runtime_error("precompute cache: computing '" + key + "' gave nothing");
    if (source) *source = Source::Computed;
    std::lock_guard<std::mutex> lock(m_);
    ++stats_.computed;
    if (const auto it = entries_.find(key); it != entries_.end()) {
        if (it->second.type == 'o' && it->second.device == device) return it->second.value;  // another session's
        evict_locked(key);
    }
    // Host bytes are charged for as long as the value lives, wherever it is held.
    if (o.host_bytes > options_.memory_limit) return o.value;
    for (;;) {
        try {
            budget_->reserve(o.host_bytes, "precompute cache entry " + key);
            break;
        } catch (const MemoryBudgetExceeded&) {
            std::string victim;
            for (auto it = lru_.rbegin(); it != lru_.rend() && victim.empty(); ++it)
                if (entries_.at(*it).device < 0) victim = *it;
            if (victim.empty()) return o.value;  // no room
            evict_locked(victim);
        }
    }
    // The value's host bytes stay charged for as long as it lives, wherever it is held; a device value,
    // freed into its backend's block cache when the last plan lets go, hands those blocks back too, so
    // nothing of it stays charged to the cache's device budget.
    struct Charged {
        Charged(std::shared_ptr<const void> v, std::shared_ptr<MemoryBudget> b, uint64_t n, std::shared_ptr<Backend> be)
            : value(std::move(v)), budget(std::move(b)), bytes(n), owner(std::move(be)) {}
        Charged(const Charged&) = delete;
        Charged& operator=(const Charged&) = delete;
        ~Charged() {
            value.reset();
            budget->release(bytes);
            if (owner) owner->release_cached_memory();
        }
        std::shared_ptr<const void> value;
        std::shared_ptr<MemoryBudget> budget;
        uint64_t bytes;
        std::shared_ptr<Backend> owner;
    };
    std::shared_ptr<Backend> owner;
    if (device >= 0)
        if (const auto it = device_backends_.find(device); it != device_backends_.end()) owner = it->second.backend;
    auto holder = std::make_shared<Charged>(o.value, budget_, o.host_bytes, owner);
    std::shared_ptr<const void> value(holder, holder->value.get());
    lru_.push_front(key);
    entries_[key] = Slot{value, 'o', device, device < 0 ? o.host_bytes : o.device_bytes, 0.0, lru_.begin()};
    return value;
}

PrecomputeCache::Stats PrecomputeCache::stats() const {
    std::lock_guard<std::mutex> lock(m_);
    Stats s = stats_;
    s.entries = entries_.size();
    s.bytes = budget_->in_use();
    for (const auto& [d, b] : device_budgets_) s.device_bytes += b->in_use();
    return s;
}

namespace {
template <class A>
constexpr char type_of() {
    return std::is_same<A, CArray>::value ? 'c' : 'r';
}
}  // namespace

PrecomputeCache::Entry PrecomputeCache::get(const std::string& key, bool persistent,
                                            const std::function<CArray()>& compute) {
    return get_typed<CArray>(key, persistent, compute);
}

PrecomputeCache::RealEntry PrecomputeCache::get_real(const std::string& key, bool persistent,
                                                     const std::function<RArray()>& compute) {
    return get_typed<RArray>(key, persistent, compute);
}

template <class A>
PrecomputeCache::Cached<A> PrecomputeCache::get_typed(const std::string& key, bool persistent,
                                                      const std::function<A()>& compute) {
    {
        std::lock_guard<std::mutex> lock(m_);
        const auto it = entries_.find(key);
        if (it != entries_.end() && it->second.type == type_of<A>()) {
            lru_.splice(lru_.begin(), lru_, it->second.at);
            ++stats_.memory_hits;
            return {std::static_pointer_cast<const A>(it->second.value), Source::Memory, it->second.compute_seconds};
        }
    }
    const bool disk = persistent && !options_.directory.empty();
    if (disk) {
        double seconds = 0;
        A v = read_file<A>(key, seconds);
        if (!v.empty()) {
            {
                std::lock_guard<std::mutex> lock(m_);
                ++stats_.disk_hits;
            }
            return keep(key, v, Source::Disk, seconds);
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const A v = compute();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (v.empty()) throw std::runtime_error("precompute cache: computing '" + key + "' gave an empty array");
    {
        std::lock_guard<std::mutex> lock(m_);
        ++stats_.computed;
    }
    if (disk) write_file(key, v, seconds);
    return keep(key, v, Source::Computed, seconds);
}

template <class A>
PrecomputeCache::Cached<A> PrecomputeCache::keep(const std::string& key, const A& host, Source source,
                                                 double compute_seconds) {
    std::lock_guard<std::mutex> lock(m_);
    if (const auto it = entries_.find(key); it != entries_.end()) {
        if (it->second.type == type_of<A>())  // another session's, meanwhile
            return {std::static_pointer_cast<const A>(it->second.value), source, it->second.compute_seconds};
        evict_locked(key);  // the same key as the other element type: replaced
    }
    // A host copy of its own, charged to the cache: the caller's array (a session's, charged to that
    // session's budget) is not kept.
    if (host.bytes() > options_.memory_limit || host.device() != Device::Cpu)
        return {std::make_shared<const A>(host), source, compute_seconds};
    A owned;
    for (;;) {
        try {
            owned = A::host(host.shape(), budget_);
            break;
        } catch (const MemoryBudgetExceeded&) {
            std::string victim;
            for (auto it = lru_.rbegin(); it != lru_.rend() && victim.empty(); ++it)
                if (entries_.at(*it).device < 0) victim = *it;
            if (victim.empty()) return {std::make_shared<const A>(host), source, compute_seconds};  // no room
            evict_locked(victim);
        }
    }
    std::memcpy(owned.data(), host.data(), host.bytes());
    auto value = std::make_shared<const A>(std::move(owned));
    lru_.push_front(key);
    entries_[key] = Slot{value, type_of<A>(), -1, host.bytes(), compute_seconds, lru_.begin()};
    return {value, source, compute_seconds};
}

template <class A>
A PrecomputeCache::read_file(const std::string& key, double& compute_seconds) const {
    const fs::path path = fs::path(options_.directory) / file_name(key);
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    auto bad = [&](const char* why) {
        spdlog::warn("precompute cache: {} is not usable ({}): computing it again", path.string(), why);
        return A();
    };
    char magic[8], type = 0;
    uint32_t key_size = 0, rank = 0;
    if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return bad("not a Larmor cache file of this version");
    if (!read_raw(in, type) || type != type_of<A>()) return bad("another element type");
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
    if (!read_raw(in, bytes) || bytes != shape.size() * sizeof(typename A::value_type)) return bad("sizes disagree");
    A v = A::host(shape);
    if (!in.read(reinterpret_cast<char*>(v.data()), std::streamsize(bytes))) return bad("truncated");
    if (!read_raw(in, checksum) || checksum != fnv1a64(v.data(), bytes)) return bad("checksum");
    return v;
}

template <class A>
void PrecomputeCache::write_file(const std::string& key, const A& value, double compute_seconds) {
    const fs::path dir(options_.directory), path = dir / file_name(key);
    // Written aside and renamed: a reader (another server on the same directory) never sees half a file.
    const fs::path tmp = dir / (file_name(key) + ".tmp." + std::to_string(::getpid()));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(kMagic, sizeof kMagic);
        write_raw(out, type_of<A>());
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
