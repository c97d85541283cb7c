#pragma once
// Driving larmor-server from tests as the real thing: the binary as a subprocess on an ephemeral
// port (ServerProcess), other tools as bounded subprocesses (run_process), and a raw protocol
// connection (WireConnection) for the byte-level cases no well-behaved client would produce.
// Every wait here has a deadline, so a broken server fails a test instead of hanging CI.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "wire/codec.h"

namespace larmor::test {

std::string server_binary();  // LARMOR_BINARY_DIR/server/larmor-server
std::string client_binary();  // LARMOR_BINARY_DIR/tools/larmor-client
std::string source_config_dir();  // LARMOR_SOURCE_DIR/config

class ServerProcess {
public:
    // Starts larmor-server --address 127.0.0.1 --port 0 --config-dir <source>/config <extra_args>
    // (without the --address or --config-dir when extra_args have one) and waits (up to 30 s) for its
    // "listening on ADDR:PORT" line. Throws with the server's log
    // when it does not come up. Unless extra_args name a --dependency-dir, the server gets a fresh
    // one of its own (removed with the object), so no test sees another's noise dependencies.
    explicit ServerProcess(const std::vector<std::string>& extra_args = {});
    // Stops the server (SIGTERM, then SIGKILL after 30 s); fails the test when its log holds a sanitizer
    // report, and prints the log when the test failed.
    ~ServerProcess();
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    uint16_t port() const { return port_; }
    // The HTTP status port, when extra_args hold --http-port (0 otherwise).
    uint16_t http_port() const { return http_port_; }
    pid_t pid() const { return pid_; }
    bool running();
    std::string log() const;  // everything the server wrote to stderr so far
    const std::string& dependency_dir() const { return dependency_dir_; }

    // Sends `signal` and waits up to `timeout` for the exit. Returns the exit code, 128+signal when
    // killed by a signal, or -1 when it had to be SIGKILLed after the timeout.
    int stop(int signal, std::chrono::seconds timeout);

private:
    pid_t pid_ = -1;
    int stdout_fd_ = -1;
    int exit_code_ = -1;
    uint16_t port_ = 0;
    uint16_t http_port_ = 0;
    std::string log_path_;
    std::string dependency_dir_;
    bool own_dependency_dir_ = false;
};

struct ProcessResult {
    int exit_code = -1;  // 128+signal when killed by one
    bool timed_out = false;
    std::string output;  // stdout and stderr together
};

// Runs argv[0] with argv, killing it after `timeout`. A sanitizer report in its output fails the test.
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::seconds timeout);

// True when `output` holds an AddressSanitizer, LeakSanitizer, ThreadSanitizer or UBSan report. In the sanitizer build
// a child that hits one exits 1 (or carries on), which a test of an error path may expect anyway, so
// the tests look for the report itself (run_process, ~ServerProcess).
bool has_sanitizer_report(const std::string& output);

// A blocking TCP connection to 127.0.0.1:port speaking the wire protocol. Every send and receive
// gives up after `io_timeout` (throws std::runtime_error). `source`, when given, is the local IPv4
// address to connect from (any of 127.0.0.0/8 is this machine: tests of --allow).
class WireConnection {
public:
    explicit WireConnection(uint16_t port, std::chrono::seconds io_timeout = std::chrono::seconds(60),
                            const std::string& source = "");
    ~WireConnection();
    WireConnection(const WireConnection&) = delete;
    WireConnection& operator=(const WireConnection&) = delete;

    void send(const wire::WireMessage& msg);
    void send_bytes(const void* data, size_t n);
    void send_bytes(const std::vector<uint8_t>& bytes) { send_bytes(bytes.data(), bytes.size()); }
    void shutdown_send();  // half-close: the server sees EOF
    // Closes at once with a reset (SO_LINGER 0), as a killed client's kernel may: no FIN, unread data
    // dropped. The connection is unusable afterwards.
    void reset();

    // Reads one message; throws wire::EndOfStream at EOF, std::runtime_error on timeout.
    wire::WireMessage receive(const wire::Limits& limits = {});
    // Reads messages up to and including CLOSE; throws if the stream ends (EOF) before CLOSE.
    std::vector<wire::WireMessage> receive_until_close();
    // True when the server closed the connection (EOF) within `timeout` and sent nothing more.
    bool closed_by_peer(std::chrono::seconds timeout = std::chrono::seconds(30));

private:
    int fd_ = -1;
};

struct HttpResult {
    int status = 0;           // 0: no HTTP answer (refused, closed)
    std::string content_type;
    std::string body;
};
// GET (or another method) of `target` from 127.0.0.1:port over HTTP/1.1; gives up after `timeout`.
HttpResult http_request(uint16_t port, const std::string& target, const std::string& method = "GET",
                        std::chrono::seconds timeout = std::chrono::seconds(10));

// The TEXT payloads among `messages`, in order.
std::vector<std::string> texts_of(const std::vector<wire::WireMessage>& messages);

// Whether one of the TEXTs of a reply contains `needle`; on failure the message lists the texts.
::testing::AssertionResult some_text_contains(const std::vector<wire::WireMessage>& reply, const std::string& needle);

// The value of the sample `name` (with its labels as written, e.g. `larmor_sessions_total` or
// `larmor_gadget_seconds_count{gadget="..."}`) in a Prometheus text body; -1 when absent.
double metric_sample(const std::string& body, const std::string& name);

}  // namespace larmor::test
