#include "server/queries.h"

#include <cstdio>
#include <sstream>

#include <ismrmrd/version.h>

#include "core/backend.h"
#include "gadgets/chain_config.h"
#include "server/excerpt.h"
#include "server/system_info.h"

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

// Chains in the config dir, or the reason they cannot be listed (a missing dir must not fail a query).
std::string chains_text(const QueryContext& ctx) {
    try {
        std::string out;
        for (const auto& name : ctx.chains ? ctx.chains->names() : list_chains(ctx.options.config_dir))
            out += (out.empty() ? "" : ", ") + name;
        return out.empty() ? "none" : out;
    } catch (const std::exception& e) {
        return std::string("unavailable (") + e.what() + ")";
    }
}

// Gadgetron's format_version: 13000 -> "13.0"; "N/A" when there is no CUDA (Gadgetron's answer in a build
// without it; Larmor gives it also where the build has CUDA but the machine has no driver).
std::string cuda_version_text(int v) {
    if (v <= 0) return "N/A";
    return std::to_string(v / 1000) + "." + std::to_string((v % 100) / 10);
}

// One value per CUDA device of the machine, joined by ';' (Gadgetron's cuda::memory and capabilities).
template <class F>
std::string per_device(F value) {
    std::string out;
    const size_t n = cuda_devices().size();
    for (size_t d = 0; d < n; ++d) out += (d ? ";" : "") + value(int(d));
    return out;
}

// Gadgetron's print_system_information layout ("  -- Key<padding>: value"), whose lines Gadgetron's
// integration-test runner (test/integration/run_tests.py) finds with the pattern
// <marker>\s*:\s+(value), first match, case-insensitive: Version, Git SHA1, System Memory size ("<n>
// MB"), Python/Julia/Matlab Support, CUDA Support (YES/NO), and per device "Total amount of global GPU
// memory". Larmor's own facts follow in the same layout. Ends with a newline, as Gadgetron's.
std::string info_text(const QueryContext& ctx) {
    std::ostringstream s;
    auto line = [&s](const char* key, const std::string& value) {
        char padded[32];
        std::snprintf(padded, sizeof padded, "%-19s", key);
        s << "  -- " << padded << ": " << value << "\n";
    };
    s << "Larmor Version Info (Gadgetron protocol compatible)\n";
    line("Version", LARMOR_VERSION);
    line("Git SHA1", build_git_sha1());
    line("System Memory size", std::to_string(system_memory_bytes() / (1024 * 1024)) + " MB");
    line("Python Support", "NO");
    line("Julia Support", "NO");
    line("Matlab Support", "NO");
    const auto devices = cuda_devices();
    line("CUDA Support", built_with_cuda() ? "YES" : "NO");
    if (built_with_cuda()) {
        line("NVCC Flags", nvcc_flags());
        s << "    * Number of CUDA capable devices: " << devices.size() << "\n";
        // Gadgetron's per-device lines, which its test runner reads ("Total amount of global GPU memory").
        for (size_t i = 0; i < devices.size(); ++i) {
            const int d = int(i);
            s << "      - Device " << i << ": " << devices[i] << "\n"
              << "         + CUDA Driver Version / Runtime Version: " << cuda_version_text(cuda_driver_version())
              << "/" << cuda_version_text(cuda_runtime_version()) << "\n"
              << "         + CUDA Capability Major / Minor version number: " << cuda_device_capability(d) << "\n"
              << "         + Total amount of global GPU memory: " << cuda_device_memory(d) / (1024 * 1024) << " MB\n";
        }
    }
    line("Backend policy", to_string(ctx.options.backend));
    line("Config directory", ctx.options.config_dir);
    line("Chains", chains_text(ctx));
    line("Dependency dir", ctx.options.dependency_dir.empty() ? "none" : ctx.options.dependency_dir);
    line("Active sessions", std::to_string(ctx.stats.sessions_active.load()) + " (max " +
                                std::to_string(ctx.options.max_sessions) + ")");
    return s.str();
}

std::string status_json(const QueryContext& ctx) {
    const ServerStats& st = ctx.stats;
    char uptime[32];
    std::snprintf(uptime, sizeof uptime, "%.3f", st.uptime_seconds());
    std::ostringstream s;
    s << "{\"version\": \"" << LARMOR_VERSION << "\", \"uptime_s\": " << uptime
      << ", \"sessions_active\": " << st.sessions_active.load() << ", \"sessions_total\": " << st.sessions_total.load()
      << ", \"sessions_rejected\": " << st.sessions_rejected.load()
      << ", \"sessions_over_budget\": " << st.sessions_over_budget.load()
      << ", \"connections_refused\": " << st.connections_refused.load()
      << ", \"per_address_refused\": " << st.per_address_refused.load()
      << ", \"connections_pending\": " << st.connections_pending.load()
      << ", \"pending_refused\": " << st.pending_refused.load()
      << ", \"tls_handshakes_failed\": " << st.tls_handshakes_failed.load() << ", \"acquisitions\": " << st.acquisitions.load()
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
    s << "]";
    // What the sessions hold of the server's host budget now, and at most so far.
    if (ctx.memory) {
        const MemoryBudget& m = *ctx.memory->host();
        s << ", \"host_memory\": {\"limit\": " << m.limit() << ", \"in_use\": " << m.in_use()
          << ", \"peak\": " << m.peak() << "}";
    }
    s << "}";
    return s.str();
}

}  // namespace

std::string version_string() { return std::string("Larmor ") + LARMOR_VERSION + " (Gadgetron protocol compatible)"; }

std::vector<std::string> known_query_keys() {
    return {"gadgetron::version",      "gadgetron::build",       "gadgetron::info",
            "gadgetron::info::memory", "gadgetron::info::cuda",  "gadgetron::info::python",
            "gadgetron::info::matlab", "gadgetron::cuda::devices", "gadgetron::cuda::driver",
            "gadgetron::cuda::runtime", "gadgetron::cuda::memory", "gadgetron::cuda::capabilities",
            "ismrmrd::version",        "larmor::status"};
}

std::string answer_query(const std::string& raw_key, const QueryContext& ctx) {
    const std::string key = trim_key(raw_key);
    // The single-value keys answer as Gadgetron's QueryHandler does (std::to_string of its values).
    if (key == "gadgetron::version") return version_string();
    if (key == "gadgetron::build") return build_git_sha1();
    if (key == "gadgetron::info") return info_text(ctx);
    if (key == "gadgetron::info::memory") return std::to_string(system_memory_bytes());
    // As Gadgetron: 1 when a CUDA device is there to use, not merely when the build could use one.
    if (key == "gadgetron::info::cuda") return cuda_devices().empty() ? "0" : "1";
    if (key == "gadgetron::info::python" || key == "gadgetron::info::matlab") return "0";
    if (key == "gadgetron::cuda::devices") return std::to_string(cuda_devices().size());
    if (key == "gadgetron::cuda::driver") return cuda_version_text(cuda_driver_version());
    if (key == "gadgetron::cuda::runtime") return cuda_version_text(cuda_runtime_version());
    if (key == "gadgetron::cuda::memory") return per_device([](int d) { return std::to_string(cuda_device_memory(d)); });
    if (key == "gadgetron::cuda::capabilities") return per_device(cuda_device_capability);
    if (key == "ismrmrd::version")
        return std::to_string(ISMRMRD_VERSION_MAJOR) + "." + std::to_string(ISMRMRD_VERSION_MINOR) + "." +
               std::to_string(ISMRMRD_VERSION_PATCH);
    if (key == "larmor::status") return status_json(ctx);
    std::string known;
    for (const auto& k : known_query_keys()) known += (known.empty() ? "" : ", ") + k;
    return "unknown query key '" + excerpt(key) + "'; known keys: " + known;
}

}  // namespace larmor::server
