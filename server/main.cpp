// larmor-server: the command line, logging set-up and signal-safe process exit around Server.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/backend.h"
#include "gadgets/chain_config.h"
#include "server/backend_select.h"
#include "server/descriptor_limit.h"
#include "server/log_format.h"
#include "server/queries.h"
#include "server/security_cli.h"
#include "server/server.h"

namespace {

namespace fs = std::filesystem;

// <prefix>/share/larmor/config for an installed binary (<prefix>/bin/larmor-server), found from the
// executable's own path so an installation can be moved; ./config otherwise (running from a checkout).
std::string default_config_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path installed = exe.parent_path().parent_path() / "share" / "larmor" / "config";
        if (fs::is_directory(installed, ec)) return installed.string();
    }
    return "config";
}

// Where noise covariances are kept between sessions unless --dependency-dir says otherwise: a folder of
// the temporary directory ($TMPDIR, else /tmp), as Gadgetron's <temp>/gadgetron. Noise is measured
// again with every exam, so nothing there must survive a reboot.
std::string default_dependency_dir() {
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    return (tmp / "larmor-dependencies").string();
}

}  // namespace

int main(int argc, char** argv) {
    using larmor::server::ServerOptions;
    ServerOptions options;
    options.config_dir = default_config_dir();
    options.dependency_dir = default_dependency_dir();
    std::string log_level = "info";
    std::string log_format = "text";
    std::string backend = "auto";
    int read_timeout = 60, write_timeout = 60, grace = 30;
    int handshake_timeout = int(options.handshake_timeout.count()), rate_window = int(options.min_data_rate_window.count());

    CLI::App app{larmor::server::version_string() + ": streaming MRI reconstruction server"};
    app.footer(
        "Clients (larmor-client, gadgetron_ismrmrd_client) connect to --port and name a chain of --config-dir.\n"
        "Signals: SIGTERM/SIGINT stop accepting and let running sessions finish for --shutdown-grace seconds;\n"
        "SIGHUP reloads the chains of --config-dir. Exit status: 0 after a clean stop, 1 when it cannot start\n"
        "(bad flag, port in use, unusable --devices, unreadable TLS files).\n"
        "Examples:\n"
        "  larmor-server --port 9002 --http-port 9080 --allow 10.20.0.0/16\n"
        "  larmor-server --backend cpu --max-sessions 8 --memory-limit 24GiB --log-format json\n"
        "  curl -s localhost:9080/readyz; larmor-client -p 9002 -Q larmor::status\n"
        "Manual: the README's sections \"larmor-server(1)\", \"Server options\", \"Limits and security\", \"Monitoring\".");
    app.add_option("--address", options.address,
                   "Address to listen on: 0.0.0.0 all IPv4 interfaces, :: all (IPv6 and IPv4), 127.0.0.1 this machine only")
        ->capture_default_str();
    app.add_option("--port", options.port, "TCP port; 0 = any free port (printed as 'listening on ADDR:PORT')")
        ->capture_default_str();
    app.add_option("--http-port", options.http_port,
                   "Port of the HTTP status endpoint on --address, for probes, Prometheus and people: /healthz, "
                   "/readyz, /metrics, /status (JSON), / (a status page); same --allow list; 0 = any free port "
                   "(printed as 'http status on ADDR:PORT'); off unless given")
        ->check(CLI::Range(0, 65535));
    app.add_option("--config-dir", options.config_dir, "Directory of the chains CONFIG_FILE names")
        ->capture_default_str();
    app.add_option("--dependency-dir", options.dependency_dir,
                   "Directory of the dependency store: noise covariances of noise-scan sessions, found by later "
                   "sessions that name them as their Noise measurementDependency; empty: none kept")
        ->capture_default_str();
    app.add_option("--dependency-store-limit", options.dependency_limit,
                   "Bytes of noise covariances the dependency store keeps (a 1024-channel one is 16 MiB); the oldest "
                   "are removed first")
        ->capture_default_str();
    app.add_option("--dependency-store-entries", options.dependency_entries,
                   "Noise covariances the dependency store keeps at most; the oldest are removed first")
        ->check(CLI::Range(size_t(1), size_t(10000000)))
        ->capture_default_str();
    app.add_option("--dependency-store-max-channels", options.dependency_max_channels,
                   "Channels a noise covariance may have to be kept in the dependency store; one with more is not "
                   "stored (the client is warned), and its session is still prewhitened with it")
        ->check(CLI::Range(uint32_t(1), uint32_t(1024)))
        ->capture_default_str();
    app.add_flag("--dependency-store-overwrite", options.dependency_overwrite,
                 "Let a scan store its noise under a measurement id that holds another scan's covariance (other "
                 "patient, study, series or scanner); without it such a store is refused with a warning to the "
                 "client, and the first covariance kept");
    app.add_option("--precompute-cache-memory", options.precompute_memory,
                   "Memory for trajectory precomputations shared by sessions (Toeplitz Q, density weights, NUFFT "
                   "bins): a size or a percentage of --memory-limit, charged to it (and as much on each GPU); "
                   "least recently used entries go first, and before a session is refused")
        ->capture_default_str();
    app.add_option("--precompute-cache-dir", options.precompute_dir,
                   "Directory where those kernels are also kept across restarts; empty: memory only")
        ->capture_default_str();
    app.add_option("--precompute-cache-disk", options.precompute_disk,
                   "Bytes of kernel files --precompute-cache-dir may hold (oldest removed first)")
        ->capture_default_str();
    app.add_option("--log-format", log_format,
                   "text (for a console) or json (one JSON object per line: time, level, logger, session, peer, "
                   "message; for log collectors)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    app.add_option("--log-level", log_level, "Log level")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
        ->capture_default_str();
    app.add_option("--read-timeout", read_timeout, "Seconds without data from a client before its session ends")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app.add_option("--write-timeout", write_timeout, "Seconds a client may stop reading before its session ends")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app.add_option("--handshake-timeout", handshake_timeout,
                   "Seconds a client has from connecting to send its chain config and ISMRMRD header, however "
                   "slowly its bytes come; 0 = no limit")
        ->check(CLI::Range(0, 86400))
        ->capture_default_str();
    app.add_option("--min-data-rate", options.min_data_rate,
                   "Bytes per second a client must send on average after its header, over every "
                   "--min-data-rate-window, or its session ends (one that trickles bytes to hold a slot); 0 = no floor")
        ->check(CLI::Range(uint64_t(0), uint64_t(1) << 40))
        ->capture_default_str();
    app.add_option("--min-data-rate-window", rate_window, "Seconds over which --min-data-rate is averaged")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app.add_option("--max-sessions", options.max_sessions,
                   "Concurrent sessions (connections that sent a chain config); more are turned away with a message")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    app.add_option("--max-pending-connections", options.max_pending,
                   "Connections that have not sent a chain config yet (silent, slow or query-only ones); they take "
                   "no session slot. At the limit the oldest one that has sent nothing gives way; when all are "
                   "talking, more are turned away with a message")
        ->check(CLI::Range(size_t(1), size_t(1000000)))
        ->capture_default_str();
    app.add_option("--max-pending-per-address", options.max_pending_per_address,
                   "Such connections from one client address; 0 = no limit (see --max-sessions-per-address for "
                   "NATs and load balancers)")
        ->check(CLI::Range(size_t(0), size_t(1000000)))
        ->capture_default_str();
    app.add_option("--max-sessions-per-address", options.max_sessions_per_address,
                   "Concurrent sessions from one client address; more are turned away with a message; 0 = no limit "
                   "(behind a NAT or a load balancer that hides client addresses, every client has the same one)")
        ->check(CLI::Range(size_t(0), size_t(100000)))
        ->capture_default_str();
    app.add_option("--max-header-bytes", options.max_header_bytes,
                   "Largest ISMRMRD header (PARAMETER_SCRIPT) a client may send; a larger one is refused unread with "
                   "a message. Its parse is charged to the session's memory at up to 18x its size")
        ->capture_default_str();
    app.add_option("--max-config-bytes", options.max_config_bytes,
                   "Largest chain a client may send as CONFIG_SCRIPT (protobuf text or Gadgetron XML); a larger one is "
                   "refused unread with a message")
        ->capture_default_str();
    app.add_option("--backend", backend, "Compute backend: auto (CUDA when usable), cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
    app.add_option("--devices", options.devices,
                   "CUDA devices sessions are spread over (fewest live sessions first): all, or ids such as 0,2")
        ->capture_default_str();
    app.add_option("--queue-depth", options.queue_depth, "Messages queued in front of each gadget")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    int admission_wait = int(options.memory.admission_wait.count());
    app.add_option("--memory-limit", options.memory.host,
                   "Host memory all sessions together may hold in arrays: a size (16GiB, 512MiB) or a percentage of "
                   "the machine's memory (the container's limit when it has one)")
        ->capture_default_str();
    app.add_option("--session-memory-limit", options.memory.session_host,
                   "Host memory one session may hold: a size or a percentage of --memory-limit. A stream whose "
                   "header declares more is refused before anything big is allocated")
        ->capture_default_str();
    app.add_option("--device-memory-limit", options.memory.device,
                   "Memory of each CUDA device all its sessions together may hold (the per-session block cache "
                   "included): a size or a percentage of the device's memory")
        ->capture_default_str();
    app.add_option("--session-device-memory-limit", options.memory.session_device,
                   "Device memory one session may hold: a size or a percentage of --device-memory-limit")
        ->capture_default_str();
    app.add_option("--admission-wait", admission_wait,
                   "Seconds a session that does not fit beside the running ones waits for memory before it is told "
                   "the server is busy")
        ->check(CLI::Range(0, 3600))
        ->capture_default_str();
    app.add_option("--shutdown-grace", grace, "Seconds running sessions get to finish after SIGINT/SIGTERM")
        ->check(CLI::Range(0, 86400))
        ->capture_default_str();
    larmor::server::add_security_options(app, options.security);
    CLI11_PARSE(app, argc, argv);

    // Absolute, so logs and the info query say which directory no matter where it was started.
    options.config_dir = fs::absolute(options.config_dir).lexically_normal().string();
    if (!options.dependency_dir.empty())  // empty: no store (every dependency is "not found")
        options.dependency_dir = fs::absolute(options.dependency_dir).lexically_normal().string();
    if (!options.precompute_dir.empty())
        options.precompute_dir = fs::absolute(options.precompute_dir).lexically_normal().string();
    options.read_timeout = std::chrono::seconds(read_timeout);
    options.write_timeout = std::chrono::seconds(write_timeout);
    options.shutdown_grace = std::chrono::seconds(grace);
    options.handshake_timeout = std::chrono::seconds(handshake_timeout);
    options.min_data_rate_window = std::chrono::seconds(rate_window);
    options.memory.admission_wait = std::chrono::seconds(admission_wait);
    options.backend = larmor::server::parse_backend_policy(backend);
    larmor::server::setup_logging(log_level, log_format);
    std::signal(SIGPIPE, SIG_IGN);  // a vanished client is an error on write, not a process kill
    larmor::server::raise_descriptor_limit(options);

    if (options.backend == larmor::server::BackendPolicy::Cuda && !larmor::cuda_available()) {
        spdlog::error("--backend cuda: no usable CUDA device{}",
#ifdef LARMOR_WITH_CUDA
                      ""
#else
                      " (this build has no CUDA support)"
#endif
        );
        return 1;
    }
    std::error_code ec;
    if (!fs::is_directory(options.config_dir, ec))
        spdlog::warn("config directory '{}' does not exist: CONFIG_FILE sessions will fail", options.config_dir);
    // Created now so a wrong path shows at startup; sessions still run without it (their noise
    // covariances are then not kept, which each such session reports to its client).
    std::error_code dir_ec;
    if (!options.dependency_dir.empty()) fs::create_directories(options.dependency_dir, dir_ec);
    if (dir_ec)
        spdlog::warn("dependency directory '{}' cannot be created ({}): noise dependencies will not be kept",
                     options.dependency_dir, dir_ec.message());

    try {
        larmor::server::Server server(options);
        const auto endpoint = server.listen();
        std::string chains;
        try {
            for (const auto& c : server.chains().names()) chains += (chains.empty() ? "" : ", ") + c;
        } catch (const std::exception&) {
        }
        std::string devices;
        for (const auto& d : server.devices().load()) devices += (devices.empty() ? "" : ",") + std::to_string(d.device);
        spdlog::info("{}; config dir '{}' (chains: {}); dependency dir '{}'; backend {}, CUDA devices {}; max {} "
                     "sessions; read timeout {} s; memory budgets: {}",
                     larmor::server::version_string(), options.config_dir, chains.empty() ? "none" : chains,
                     options.dependency_dir, backend, devices.empty() ? "none" : devices, options.max_sessions,
                     read_timeout, server.memory().describe());
        // Tests and scripts read these lines to learn the ports (--port 0, --http-port 0); the HTTP line
        // comes first, so that a reader that stops at "listening on" has seen it.
        if (options.http_port >= 0)
            std::cout << "http status on " << server.http_endpoint().address().to_string() << ":"
                      << server.http_endpoint().port() << std::endl;
        std::cout << "listening on " << endpoint.address().to_string() << ":" << endpoint.port() << std::endl;
        if (!server.run()) {
            // A session thread is stuck (e.g. in a gadget): exit without running static destructors
            // under its feet. The shutdown was still orderly for everyone else.
            spdlog::shutdown();
            std::_Exit(0);
        }
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return 1;
    }
    spdlog::info("bye");
    return 0;
}
