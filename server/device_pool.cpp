#include "server/device_pool.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace larmor::server {
namespace {

std::string count_text(int device_count) {
    if (device_count <= 0) return "this machine has no CUDA device";
    if (device_count == 1) return "this machine has 1 CUDA device (id 0)";
    return "this machine has " + std::to_string(device_count) + " CUDA devices (ids 0.." +
           std::to_string(device_count - 1) + ")";
}

std::string trim(const std::string& s) {
    const size_t first = s.find_first_not_of(" \t");
    if (first == std::string::npos) return std::string();
    return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace

std::vector<int> parse_device_list(const std::string& text, int device_count) {
    std::vector<int> ids;
    if (trim(text) == "all") {
        for (int i = 0; i < device_count; ++i) ids.push_back(i);
        return ids;
    }
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        const std::string entry = trim(text.substr(start, comma - start));  // npos - start: to the end
        const bool digits = !entry.empty() && entry.size() <= 9 &&
                            std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits)
            throw std::invalid_argument("--devices '" + text + "': '" + entry +
                                        "' is not a device id (expected 'all' or ids such as 0,2; " +
                                        count_text(device_count) + ")");
        const int id = std::stoi(entry);
        if (id >= device_count)
            throw std::invalid_argument("--devices '" + text + "': CUDA device " + std::to_string(id) +
                                        " does not exist: " + count_text(device_count));
        if (std::find(ids.begin(), ids.end(), id) != ids.end())
            throw std::invalid_argument("--devices '" + text + "': device " + std::to_string(id) + " is listed twice");
        ids.push_back(id);
        if (comma == std::string::npos) return ids;
        start = comma + 1;
    }
}

DeviceLease::DeviceLease(DeviceLease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), device_(std::exchange(other.device_, -1)) {}

DeviceLease& DeviceLease::operator=(DeviceLease&& other) noexcept {
    if (this != &other) {
        reset();
        pool_ = std::exchange(other.pool_, nullptr);
        device_ = std::exchange(other.device_, -1);
    }
    return *this;
}

void DeviceLease::reset() {
    if (pool_) pool_->release(device_);
    pool_ = nullptr;
    device_ = -1;
}

DevicePool::DevicePool(const std::vector<int>& devices) {
    for (int id : devices) load_.push_back(DeviceLoad{id, 0});
    std::sort(load_.begin(), load_.end(), [](const DeviceLoad& a, const DeviceLoad& b) { return a.device < b.device; });
}

DeviceLease DevicePool::acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (load_.empty()) throw std::logic_error("DevicePool::acquire: no CUDA device in the pool");
    auto least = std::min_element(load_.begin(), load_.end(),
                                  [](const DeviceLoad& a, const DeviceLoad& b) { return a.sessions < b.sessions; });
    ++least->sessions;
    return DeviceLease(this, least->device);
}

std::vector<DeviceLoad> DevicePool::load() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return load_;
}

void DevicePool::release(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (DeviceLoad& d : load_)
        if (d.device == device && d.sessions > 0) --d.sessions;
}

}  // namespace larmor::server
