#pragma once
// The CUDA devices sessions may run on (--devices), and which one the next session gets: the one
// with the fewest live sessions, ties to the lowest id. A session holds a DeviceLease while its
// backend lives; the counts also answer the larmor::status query. Pure bookkeeping (the device
// count is given, never probed here), so it is tested without a GPU.
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace larmor::server {

// The device ids a --devices value names: "all" = 0..device_count-1, or a comma-separated list such
// as "0,2" (spaces around ids allowed), in the order given. Throws std::invalid_argument naming the
// offending entry and the device count for an empty or malformed entry, an id listed twice, or an
// id that does not exist.
std::vector<int> parse_device_list(const std::string& text, int device_count);

class DevicePool;

// One session's claim on a device, given back when destroyed or reset. Empty when
// default-constructed (CPU sessions). The pool must outlive its leases.
class DeviceLease {
public:
    DeviceLease() = default;
    ~DeviceLease() { reset(); }
    DeviceLease(DeviceLease&& other) noexcept;
    DeviceLease& operator=(DeviceLease&& other) noexcept;
    DeviceLease(const DeviceLease&) = delete;
    DeviceLease& operator=(const DeviceLease&) = delete;

    explicit operator bool() const { return pool_ != nullptr; }
    int device() const { return device_; }  // -1 when empty
    void reset();

private:
    friend class DevicePool;
    DeviceLease(DevicePool* pool, int device) : pool_(pool), device_(device) {}

    DevicePool* pool_ = nullptr;
    int device_ = -1;
};

struct DeviceLoad {
    int device = 0;
    size_t sessions = 0;  // live leases
};

class DevicePool {
public:
    // `devices`: the ids sessions may use (from parse_device_list); empty = no CUDA sessions.
    explicit DevicePool(const std::vector<int>& devices);
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    // A lease on the device with the fewest live sessions (ties: the lowest id). Throws
    // std::logic_error when the pool is empty: a session only asks after choosing CUDA, which an
    // empty pool rules out.
    DeviceLease acquire();

    bool empty() const { return load_.empty(); }
    // Live sessions per device, in ascending id order.
    std::vector<DeviceLoad> load() const;

private:
    friend class DeviceLease;
    void release(int device);

    mutable std::mutex mutex_;
    std::vector<DeviceLoad> load_;  // ascending id, so the first minimum is the lowest id
};

}  // namespace larmor::server
