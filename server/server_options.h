#pragma once
// Everything larmor-server can be told on its command line, as plain data: main.cpp fills it,
// the server, sessions and queries read it. Defaults here are the documented CLI defaults.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/memory_limits.h"
#include "server/security_options.h"
#include "wire/codec.h"

namespace larmor::server {

// Which compute backend a session may use. The chain's own `backend` field can narrow it.
enum class BackendPolicy { Auto, Cpu, Cuda };

struct ServerOptions {
    std::string address = "0.0.0.0";         // listen address (main.cpp's --address)
    uint16_t port = 9002;  // 0 = ephemeral (the bound port is printed)
    int http_port = -1;    // the operations endpoint (server/http_status.h); -1 = off, 0 = ephemeral
    std::string config_dir;
    // The dependency store: noise covariances kept for later sessions (gadgets/noise_dependency_store.h).
    std::string dependency_dir;
    // The precompute cache (gadgets/precompute_cache.h): trajectory kernels shared by sessions, held in
    // host memory (a size or a percentage of --memory-limit, and charged to it) and, with a directory,
    // kept on disk across restarts (at most precompute_disk bytes of files).
    std::string precompute_memory = "1GiB";
    // The dependency store's bounds (gadgets/noise_dependency_store.h): bytes of covariance files and
    // their number; the oldest go first. Covariances of more channels are not kept, and one scan may
    // replace another scan's covariance only with dependency_overwrite.
    std::string dependency_limit = "1GiB";
    size_t dependency_entries = 4096;
    uint32_t dependency_max_channels = 256;
    bool dependency_overwrite = false;
    std::string precompute_dir;
    std::string precompute_disk = "4GiB";
    std::chrono::seconds read_timeout{60};   // no byte from the client for this long ends the session
    std::chrono::seconds write_timeout{60};  // client not reading for this long ends the session
    std::chrono::seconds shutdown_grace{30}; // SIGINT/SIGTERM: how long running sessions may finish
    // Deadlines a client that trickles bytes cannot move (the read timeout restarts at every byte):
    // its chain config and header complete within handshake_timeout of connecting (0: none), and
    // after the header it sends at least min_data_rate bytes per second on average over every
    // min_data_rate_window (0 bytes per second: no floor).
    std::chrono::seconds handshake_timeout{30};
    uint64_t min_data_rate = 64;
    std::chrono::seconds min_data_rate_window{60};
    size_t max_sessions_per_address = 0;     // sessions from one client address at once; 0: no limit
    // The XML and text a client has parsed (the parse is charged to its session at about 18x the size:
    // server/parse_cost.h): its ISMRMRD header (PARAMETER_SCRIPT) and a CONFIG_SCRIPT chain. Sizes as
    // for the memory flags ("4MiB"); a larger one is refused, unread, with a TEXT naming the flag.
    std::string max_header_bytes = "4MiB";
    std::string max_config_bytes = "1MiB";
    size_t max_sessions = 64;
    // Connections without a chain config yet (connection_slots.h): they take no session slot.
    size_t max_pending = 1024;
    size_t max_pending_per_address = 0;  // 0: no limit
    size_t queue_depth = 64;                 // capacity of each gadget's input queue
    BackendPolicy backend = BackendPolicy::Auto;
    std::string devices = "all";             // CUDA devices sessions are spread over (device_pool.h)
    wire::Limits limits;
    MemoryLimitOptions memory;               // budgets (memory_limits.h, memory_admission.h)
    SecurityOptions security;                // --allow, TLS
};

const char* to_string(BackendPolicy p);

}  // namespace larmor::server
