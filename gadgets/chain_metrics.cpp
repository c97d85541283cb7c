#include "gadgets/chain_metrics.h"

#include <map>
#include <memory>
#include <mutex>

namespace larmor {
namespace {

struct ChainMetricsRegistry {
    std::mutex lock;
    std::map<std::string, std::unique_ptr<GadgetTiming>> timings;
    std::map<uint64_t, QueueReporter> reporters;
    uint64_t next_reporter = 1;
};

ChainMetricsRegistry& chain_metrics_registry() {
    static ChainMetricsRegistry r;
    return r;
}

}  // namespace

void GadgetTiming::record(double seconds) {
    size_t b = 0;
    while (b < kGadgetTimeBounds.size() && seconds > kGadgetTimeBounds[b]) ++b;
    buckets[b].fetch_add(1, std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
    nanoseconds.fetch_add(uint64_t(seconds > 0 ? seconds * 1e9 : 0), std::memory_order_relaxed);
}

GadgetTiming& gadget_timing(const std::string& name) {
    ChainMetricsRegistry& r = chain_metrics_registry();
    std::lock_guard<std::mutex> g(r.lock);
    std::unique_ptr<GadgetTiming>& t = r.timings[name];
    if (!t) t = std::make_unique<GadgetTiming>();
    return *t;
}

uint64_t register_queue_reporter(QueueReporter reporter) {
    ChainMetricsRegistry& r = chain_metrics_registry();
    std::lock_guard<std::mutex> g(r.lock);
    const uint64_t id = r.next_reporter++;
    r.reporters.emplace(id, std::move(reporter));
    return id;
}

void unregister_queue_reporter(uint64_t id) {
    ChainMetricsRegistry& r = chain_metrics_registry();
    std::lock_guard<std::mutex> g(r.lock);
    r.reporters.erase(id);
}

std::vector<GadgetFigures> gadget_figures() {
    ChainMetricsRegistry& r = chain_metrics_registry();
    std::lock_guard<std::mutex> g(r.lock);
    std::map<std::string, GadgetFigures> out;
    for (const auto& [name, t] : r.timings) {
        GadgetFigures& f = out[name];
        f.name = name;
        for (size_t b = 0; b < f.buckets.size(); ++b) f.buckets[b] = t->buckets[b].load(std::memory_order_relaxed);
        f.count = t->count.load(std::memory_order_relaxed);
        f.seconds = double(t->nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
    }
    for (const auto& [id, report] : r.reporters)
        report([&out](const std::string& name, size_t queued) {
            GadgetFigures& f = out[name];
            f.name = name;
            f.queued += queued;
        });
    std::vector<GadgetFigures> v;
    for (auto& [name, f] : out) v.push_back(std::move(f));
    return v;
}

}  // namespace larmor
