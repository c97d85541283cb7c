// Process-wide LRU cache of density weights (density.h): repeated protocols reuse their weights.
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "core/trajectory/density.h"
#include "core/trajectory/trajectory.h"

namespace larmor::trajectory {
namespace {

constexpr size_t kCapacity = 16;  // a handful of protocols; each entry is one float per sample

using Key = std::tuple<uint64_t, int, int>;  // trajectory_hash (includes the grid), kind, partitions

struct Cache {
    std::mutex mutex;
    std::list<std::pair<Key, std::shared_ptr<const RArray>>> lru;  // most recent first
    std::map<Key, decltype(lru)::iterator> index;
    uint64_t hits = 0;
};

Cache& cache() {
    static Cache c;
    return c;
}

RArray compute(DensityKind kind, const RArray& coords, const Shape& image, int partitions) {
    switch (kind) {
        case DensityKind::radial_2d: return density_radial_2d(coords);
        case DensityKind::stack_of_stars: return density_stack_of_stars(coords, partitions);
        case DensityKind::radial_3d: return density_radial_3d(coords);
        case DensityKind::voronoi:
            if (image.rank() < 1) throw std::invalid_argument("cached_density: voronoi needs the grid size, got " + image.str());
            return density_voronoi(coords, image[0] / 2.0);
        case DensityKind::hoge: return density_hoge(coords);
    }
    throw std::invalid_argument("cached_density: unknown kind " + std::to_string(static_cast<int>(kind)));
}

}  // namespace

std::shared_ptr<const RArray> cached_density(DensityKind kind, const RArray& coords, const Shape& image, int partitions) {
    const Key key{trajectory_hash(coords, image), static_cast<int>(kind),
                  kind == DensityKind::stack_of_stars ? partitions : 0};
    Cache& c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        auto it = c.index.find(key);
        if (it != c.index.end()) {
            c.lru.splice(c.lru.begin(), c.lru, it->second);
            ++c.hits;
            return it->second->second;
        }
    }
    // Computed without the lock (Voronoi weights take a while); a racing thread's entry wins so every
    // caller of one key sees the same array.
    auto weights = std::make_shared<const RArray>(compute(kind, coords, image, partitions));
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
        c.lru.splice(c.lru.begin(), c.lru, it->second);
        return it->second->second;
    }
    c.lru.emplace_front(key, weights);
    c.index[key] = c.lru.begin();
    while (c.lru.size() > kCapacity) {
        c.index.erase(c.lru.back().first);
        c.lru.pop_back();
    }
    return weights;
}

size_t density_cache_capacity() { return kCapacity; }

size_t density_cache_size() {
    std::lock_guard<std::mutex> lock(cache().mutex);
    return cache().lru.size();
}

uint64_t density_cache_hits() {
    std::lock_guard<std::mutex> lock(cache().mutex);
    return cache().hits;
}

void density_cache_clear() {
    std::lock_guard<std::mutex> lock(cache().mutex);
    cache().lru.clear();
    cache().index.clear();
    cache().hits = 0;
}

}  // namespace larmor::trajectory
