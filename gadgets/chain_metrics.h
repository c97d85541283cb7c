#pragma once
// Process-wide figures of the gadget chains for the server's /metrics endpoint (server/http_status.h):
// how long each gadget's process() calls take, as a Prometheus histogram per gadget name, and how many
// messages wait in front of each gadget of every live chain. Recording is a few relaxed atomic adds on
// an entry the stage looked up once, so it costs nothing measurable per acquisition.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace larmor {

// Upper bounds (seconds) of the histogram's buckets; a last bucket (+Inf) takes the rest.
constexpr std::array<double, 8> kGadgetTimeBounds{1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0};

struct GadgetTiming {
    std::array<std::atomic<uint64_t>, kGadgetTimeBounds.size() + 1> buckets{};  // not cumulative
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> nanoseconds{0};
    void record(double seconds);
};

// The entry of gadget `name`, made at its first use; the reference stays valid for the process.
GadgetTiming& gadget_timing(const std::string& name);

struct GadgetFigures {
    std::string name;
    std::array<uint64_t, kGadgetTimeBounds.size() + 1> buckets{};
    uint64_t count = 0;
    double seconds = 0;
    uint64_t queued = 0;  // messages waiting in front of this gadget, over every live chain
};

// A live chain's queues: calls back with (gadget name, queued messages) per stage. Registered while the
// chain runs; the callback must be safe from any thread.
using QueueReporter = std::function<void(const std::function<void(const std::string&, size_t)>&)>;
uint64_t register_queue_reporter(QueueReporter reporter);
void unregister_queue_reporter(uint64_t id);

// Every gadget seen since the process started, by name.
std::vector<GadgetFigures> gadget_figures();

}  // namespace larmor
