#include "server/queries.h"

#include <cstdio>
#include <sstream>

#include "core/backend.h"
#include "gadgets/chain_config.h"
#include "server/excerpt.h"

#ifndef LARMOR_VERSION
#define LARMOR_VERSION "unknown"
#endif

namespace larmor::server {
namespace {

std::string trim_key(const std::string& key) {
    const char* ws = " \t\r\n";
    std::string k = key;
    while (!k.empty() && (k.back() == '\0' || std::string(ws).find(k.back()) != std::string::npos)) k.pop_back();
    const size_t first = k.find_first_not_of(ws);
    return first == std::string::npos ? std::string() : k.substr(first);
}

bool built_with_cuda() {
#ifdef LARMOR_WITH_CUDA
    return true;
#else
    return false;
#endif
}

// Chains in the config dir, or the reason they cannot be listed (a missing dir must not fail a query).
std::string chains_text(const std::string& config_dir) {
    try {
        std::string out;
        for (const auto& name : list_chains(config_dir)) out += (out.empty() ? "" : ", ") + name;
        return out.empty() ? "none" : out;
    } catch (const std::exception& e) {
        return std::string("unavailable (") + e.what() + ")";
    }
}

std::string cuda_devices_text() {
    const auto devices = cuda_devices();
    if (devices.empty()) return "none";
    std::string out;
    for (const auto& d : devices) out += d + "\n";
    out.pop_back();
    return out;
}

std::string info_text(const QueryContext& ctx) {
    std::ostringstream s;
    s << version_string() << "\n"
      << "  -- Build              : " << (built_with_cuda() ? "with CUDA" : "without CUDA (CPU only)") << "\n"
      << "  -- Backend policy     : " << to_string(ctx.options.backend) << "\n";
    const auto devices = cuda_devices();
    s << "  -- CUDA devices       : " << devices.size() << "\n";
    for (size_t i = 0; i < devices.size(); ++i) s << "     - Device " << i << ": " << devices[i] << "\n";
    s << "  -- Config directory   : " << ctx.options.config_dir << "\n"
      << "  -- Chains             : " << chains_text(ctx.options.config_dir) << "\n"
      << "  -- Active sessions    : " << ctx.stats.sessions_active.load() << " (max " << ctx.options.max_sessions << ")";
    return s.str();
}

std::string status_json(const QueryContext& ctx) {
    const ServerStats& st = ctx.stats;
    char uptime[32];
    std::snprintf(uptime, sizeof uptime, "%.3f", st.uptime_seconds());
    std::ostringstream s;
    s << "{\"version\": \"" << LARMOR_VERSION << "\", \"uptime_s\": " << uptime
      << ", \"sessions_active\": " << st.sessions_active.load() << ", \"sessions_total\": " << st.sessions_total.load()
      << ", \"sessions_rejected\": " << st.sessions_rejected.load() << ", \"acquisitions\": " << st.acquisitions.load()
      << ", \"waveforms\": " << st.waveforms.load() << ", \"bytes_received\": " << st.bytes_received.load()
      << ", \"images_sent\": " << st.images_sent.load() << ", \"errors\": " << st.errors.load()
      << ", \"devices\": [";
    // Live sessions per CUDA device of --devices, so an operator sees how the pool is spread.
    if (ctx.devices) {
        const char* sep = "";
        for (const DeviceLoad& d : ctx.devices->load()) {
            s << sep << "{\"device\": " << d.device << ", \"sessions\": " << d.sessions << "}";
            sep = ", ";
        }
    }
    s << "]}";
    return s.str();
}

}  // namespace

std::string version_string() { return std::string("Larmor ") + LARMOR_VERSION + " (Gadgetron protocol compatible)"; }

std::vector<std::string> known_query_keys() {
    return {"gadgetron::version", "gadgetron::info", "gadgetron::cuda::devices", "larmor::status"};
}

std::string answer_query(const std::string& raw_key, const QueryContext& ctx) {
    const std::string key = trim_key(raw_key);
    if (key == "gadgetron::version") return version_string();
    if (key == "gadgetron::info") return info_text(ctx);
    if (key == "gadgetron::cuda::devices") return cuda_devices_text();
    if (key == "larmor::status") return status_json(ctx);
    std::string known;
    for (const auto& k : known_query_keys()) known += (known.empty() ? "" : ", ") + k;
    return "unknown query key '" + excerpt(key) + "'; known keys: " + known;
}

}  // namespace larmor::server
