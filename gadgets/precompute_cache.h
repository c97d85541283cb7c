#pragma once
// What a trajectory costs to set up, kept server-wide: Toeplitz kernels Q (core/linops/toeplitz.h)
// today, computed by one session and reused by every later one with the same key (trajectory hash,
// grid, weights and method). Entries live on the host, where any session's backend, CPU or any GPU,
// can take them (a 256^3 spectrum uploads in a few milliseconds; computing it takes a second), and are
// charged to the cache's own memory budget under the server's host budget: a finished session's
// kernels no longer count against the sessions still running, and the cache never holds more than its
// limit (least recently used entries go first). Persistent entries are also written to a directory, so a
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
    struct Entry {
        std::shared_ptr<const CArray> value;  // host
        Source source = Source::Computed;
        double compute_seconds = 0;  // what computing it took (where it was computed), for cost decisions
    };
    struct Stats {
        uint64_t bytes = 0, entries = 0, memory_hits = 0, disk_hits = 0, computed = 0, evicted = 0;
    };

    // parent: the server's host budget (null: none above the cache's own).
    PrecomputeCache(Options options, std::shared_ptr<MemoryBudget> parent = nullptr);

    // The value of `key`: from memory, else (persistent) from the directory, else compute() (which
    // returns a host array) and kept. An entry larger than the memory limit, or one
    // the server's budget has no room for, is returned without being kept. Thread-safe; two sessions
    // asking for a missing key at once may both compute it.
    Entry get(const std::string& key, bool persistent, const std::function<CArray()>& compute);

    // Whether get(key, persistent, ...) would find the entry without computing it (in memory, or a file).
    bool contains(const std::string& key, bool persistent) const;

    Stats stats() const;
    const Options& options() const { return options_; }
    static const char* source_name(Source s);

private:
    Entry keep(const std::string& key, const CArray& host, Source source, double compute_seconds);
    CArray read_file(const std::string& key, double& compute_seconds) const;
    void write_file(const std::string& key, const CArray& value, double compute_seconds);

    Options options_;
    std::shared_ptr<MemoryBudget> budget_;
    mutable std::mutex m_;
    std::list<std::string> lru_;  // most recent first
    struct Slot {
        std::shared_ptr<const CArray> value;
        double compute_seconds;
        std::list<std::string>::iterator at;
    };
    std::map<std::string, Slot> entries_;
    Stats stats_;
};

// The cache of this process for callers without a server (tests, benchmarks, tools): 1 GiB, memory only.
PrecomputeCache& default_precompute_cache();

struct SessionContext;
// The session's cache: the server's, or the process's default when it has none.
PrecomputeCache& precompute_cache(const SessionContext& ctx);

// FNV-1a over bytes: the cache's keys name arrays by their contents (weights) this way.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed = 1469598103934665603ull);

}  // namespace larmor
