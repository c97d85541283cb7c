#pragma once
// What a trajectory costs to set up, kept server-wide: Toeplitz kernels Q (core/linops/toeplitz.h),
// density compensation weights (gadgets/noncart/density_weights.h) and the NUFFT's binned points
// (gadgets/noncart/nufft_bins.h), computed by one session and reused by every later one with the same
// key (trajectory hash, grid, weights and method). Arrays live on the host, where any session's
// backend, CPU or any GPU, can take them (a 256^3 spectrum uploads in a few milliseconds; computing it
// takes a second); binned points live on the device that uses them. All are charged to the cache's
// own memory budgets under the server's (host, and each device's): a finished session's
// kernels no longer count against the sessions still running, the cache never holds more than its
// limit on each (least recently used entries go first), and admission evicts entries before it refuses
// a session for memory (shrink). Persistent entries are also written to a directory, so a
// protocol repeated after a restart pays once per server, not once per process; files are checked
// (key, sizes, checksum) when read, and a bad one is recomputed and rewritten.
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/array.h"
#include "core/backend.h"
#include "core/memory_budget.h"

namespace larmor {

class PrecomputeCache {
public:
    struct Options {
        uint64_t memory_limit = uint64_t(1) << 30;  // bytes held in memory
        std::string directory;                      // persistent entries' files; empty: memory only
        uint64_t disk_limit = uint64_t(4) << 30;    // bytes of files kept in `directory` (oldest go first)
    };
    enum class Source { Memory, Disk, Computed };
    template <class A>
    struct Cached {
        std::shared_ptr<const A> value;  // host; never modified
        Source source = Source::Computed;
        double compute_seconds = 0;  // what computing it took (where it was computed), for cost decisions
    };
    using Entry = Cached<CArray>;      // complex arrays (Q)
    using RealEntry = Cached<RArray>;  // real arrays (density weights)
    struct Stats {
        uint64_t bytes = 0, entries = 0, memory_hits = 0, disk_hits = 0, computed = 0, evicted = 0;
        uint64_t device_bytes = 0;  // on all devices together
    };

    // An entry that is not a host array (binned NUFFT points): memory only, kept on `device` (-1: the
    // host). host_bytes are charged to the cache's host budget while the value lives; device memory is
    // charged by the backend that allocated it, device_backend().
    struct Object {
        std::shared_ptr<const void> value;
        uint64_t host_bytes = 0, device_bytes = 0;
    };

    // parent: the server's host budget (null: none above the cache's own); device_parents: the
    // server's budget of each CUDA device (a device not named gets a cache budget without a parent).
    PrecomputeCache(Options options, std::shared_ptr<MemoryBudget> parent = nullptr,
                    std::map<int, std::shared_ptr<MemoryBudget>> device_parents = {});
    ~PrecomputeCache();

    // The value of `key`: from memory, else (persistent) from the directory, else compute() (which
    // returns a host array) and kept. An entry larger than the memory limit, or one
    // the server's budget has no room for, is returned without being kept. Thread-safe; two sessions
    // asking for a missing key at once may both compute it.
    Entry get(const std::string& key, bool persistent, const std::function<CArray()>& compute);
    // The same for real arrays. One key names one element type: a key kept as the other type is a miss.
    RealEntry get_real(const std::string& key, bool persistent, const std::function<RArray()>& compute);

    // The object of `key` on `device`, from memory, else compute() and kept (a value whose host bytes do
    // not fit is returned without being kept). `source`, when given, says which.
    std::shared_ptr<const void> get_object(const std::string& key, int device, const std::function<Object()>& compute,
                                           Source* source = nullptr);

    // The cache's own backend on CUDA device `device` (made at the first call): device entries are
    // computed with it, so their memory is charged to the cache's budget on that device and outlives the
    // session that asked first. A backend serves one thread at a time: hold `lock` (acquired here) while
    // using it.
    Backend& device_backend(int device, std::unique_lock<std::mutex>& lock);

    // Whether get(key, persistent, ...) would find the entry without computing it (in memory, or a file).
    bool contains(const std::string& key, bool persistent) const;

    // Evicts least recently used entries on `device` (-1: host entries, which are the array entries and
    // host objects) until `bytes` of them are gone (or none is left): the server's admission calls it
    // when a session would not fit beside the cache, since a session outranks a kernel that can be
    // computed again. Returns the bytes evicted (entries a running session still holds are freed when it
    // lets go).
    uint64_t shrink(uint64_t bytes, int device = -1);

    Stats stats() const;
    const Options& options() const { return options_; }
    static const char* source_name(Source s);

private:
    template <class A>
    Cached<A> get_typed(const std::string& key, bool persistent, const std::function<A()>& compute);
    template <class A>
    Cached<A> keep(const std::string& key, const A& host, Source source, double compute_seconds);
    template <class A>
    A read_file(const std::string& key, double& compute_seconds) const;
    template <class A>
    void write_file(const std::string& key, const A& value, double compute_seconds);

    Options options_;
    std::shared_ptr<MemoryBudget> budget_;
    mutable std::mutex m_;
    std::list<std::string> lru_;  // most recent first
    void evict_locked(const std::string& key);
    const std::shared_ptr<MemoryBudget>& device_budget_locked(int device);

    struct Slot {
        std::shared_ptr<const void> value;  // a CArray or an RArray, as `type` says, or an Object's value
        char type;                          // 'c' complex, 'r' real, 'o' object
        int device;                         // -1: host
        uint64_t bytes;                     // held on `device` (host bytes for host entries)
        double compute_seconds;
        std::list<std::string>::iterator at;
    };
    std::map<std::string, Slot> entries_;
    Stats stats_;
    std::map<int, std::shared_ptr<MemoryBudget>> device_parents_, device_budgets_;
    struct DeviceBackend {
        std::shared_ptr<Backend> backend;
        std::unique_ptr<std::mutex> in_use = std::make_unique<std::mutex>();
    };
    std::map<int, DeviceBackend> device_backends_;
};

// The cache of this process for callers without a server (tests, benchmarks, tools): 1 GiB, memory only.
PrecomputeCache& default_precompute_cache();

struct SessionContext;
// The session's cache: the server's, or the process's default when it has none.
PrecomputeCache& precompute_cache(const SessionContext& ctx);

// FNV-1a over bytes: the cache's keys name arrays by their contents (weights) this way.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed = 1469598103934665603ull);
// A faster content hash for large arrays (a plan's coordinates: 25 MB for 2 million 3D points, where
// FNV-1a's byte at a time took 40 ms): four independent lanes over 8-byte words, each a multiply and
// xor-shift (the finaliser of SplitMix64, Steele et al., OOPSLA 2014), combined at the end.
uint64_t hash_words(const void* data, size_t bytes);

}  // namespace larmor
