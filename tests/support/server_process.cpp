#include "tests/support/server_process.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace larmor::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh file under /tmp for a child's output; returns its path and an fd open for writing.
std::pair<std::string, int> temp_file(const char* stem) {
    std::string path = std::string("/tmp/") + stem + "-XXXXXX.log";
    std::vector<char> buf(path.begin(), path.end());
    buf.push_back('\0');
    const int fd = ::mkstemps(buf.data(), 4);
    if (fd < 0) throw std::runtime_error(errno_text("mkstemps"));
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return {std::string(buf.data()), fd};
}

// posix_spawn of argv with stdout to `out_fd` and stderr to `err_fd`.
pid_t spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    return pid;
}

// Waits for `pid` until `deadline`; returns the exit code (128+signal when killed) or -1 on timeout.
int wait_until(pid_t pid, Clock::time_point deadline) {
    for (;;) {
        int status = 0;
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0 && errno != EINTR) return -2;  // not our child any more
        if (Clock::now() >= deadline) return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

class FdReader final : public wire::ByteReader {
public:
    explicit FdReader(int fd) : fd_(fd) {}
    void read_exact(void* dst, size_t n) override {
        auto* p = static_cast<uint8_t*>(dst);
        while (n > 0) {
            const ssize_t k = ::recv(fd_, p, n, 0);
            if (k > 0) {
                p += k;
                n -= static_cast<size_t>(k);
            } else if (k == 0) {
                throw wire::EndOfStream("server closed the connection");
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                throw std::runtime_error("test client: receive timed out");
            } else if (errno != EINTR) {
                throw std::runtime_error(errno_text("test client: recv"));
            }
        }
    }

private:
    int fd_;
};

}  // namespace

std::string server_binary() { return std::string(LARMOR_BINARY_DIR) + "/server/larmor-server"; }
std::string client_binary() { return std::string(LARMOR_BINARY_DIR) + "/tools/larmor-client"; }
std::string source_config_dir() { return std::string(LARMOR_SOURCE_DIR) + "/config"; }

// ---------------------------------------------------------------------------------------------------
// ServerProcess

ServerProcess::ServerProcess(const std::vector<std::string>& extra_args) {
    std::vector<std::string> argv = {server_binary(), "--port", "0"};
    bool has_address = false;
    for (const auto& a : extra_args) has_address = has_address || a == "--address";
    if (!has_address) argv.insert(argv.end(), {"--address", "127.0.0.1"});
    if (std::find(extra_args.begin(), extra_args.end(), "--config-dir") == extra_args.end())
        argv.insert(argv.end(), {"--config-dir", source_config_dir()});
    for (size_t i = 0; i + 1 < extra_args.size(); ++i)
        if (extra_args[i] == "--dependency-dir") dependency_dir_ = extra_args[i + 1];
    if (dependency_dir_.empty()) {
        char dir[] = "/tmp/larmor-deps-XXXXXX";
        if (!::mkdtemp(dir)) throw std::runtime_error(errno_text("mkdtemp"));
        dependency_dir_ = dir;
        own_dependency_dir_ = true;
        argv.insert(argv.end(), {"--dependency-dir", dependency_dir_});
    }
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    // LARMOR_TEST_SERVER_WRAPPER: words run before the server's own (for example compute-sanitizer
    // with a --log-file, on the GPU machine), so a test's server can run under a checker.
    if (const char* w = std::getenv("LARMOR_TEST_SERVER_WRAPPER"); w && *w) {
        std::istringstream words(w);
        std::vector<std::string> prefix{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
        argv.insert(argv.begin(), prefix.begin(), prefix.end());
    }
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error(errno_text("pipe2"));
    auto [log_path, log_fd] = temp_file("larmor-server");
    log_path_ = log_path;
    try {
        pid_ = spawn(argv, pipefd[1], log_fd);
    } catch (...) {
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        ::close(log_fd);
        std::error_code ignored;
        if (own_dependency_dir_) std::filesystem::remove_all(dependency_dir_, ignored);
        throw;
    }
    ::close(pipefd[1]);
    ::close(log_fd);
    stdout_fd_ = pipefd[0];

    // Read stdout until "listening on ADDR:PORT\n".
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    std::string out;
    for (;;) {
        const size_t at = out.find("listening on ");
        const size_t nl = at == std::string::npos ? std::string::npos : out.find('\n', at);
        if (nl != std::string::npos) {
            const std::string line = out.substr(at, nl - at);
            port_ = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
            // "http status on ADDR:PORT" comes before it when --http-port is given.
            const size_t h = out.find("http status on ");
            if (h != std::string::npos) {
                const std::string hl = out.substr(h, out.find('\n', h) - h);
                http_port_ = static_cast<uint16_t>(std::stoi(hl.substr(hl.rfind(':') + 1)));
            }
            return;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd pfd{stdout_fd_, POLLIN, 0};
        if (left <= 0 || ::poll(&pfd, 1, static_cast<int>(left)) == 0) break;
        char buf[256];
        const ssize_t k = ::read(stdout_fd_, buf, sizeof buf);
        if (k <= 0) break;  // the server exited
        out.append(buf, static_cast<size_t>(k));
    }
    const std::string reason = "larmor-server did not report its port; stdout: '" + out + "'; log:\n" + log();
    stop(SIGKILL, std::chrono::seconds(10));
    std::error_code ignored;
    if (own_dependency_dir_) std::filesystem::remove_all(dependency_dir_, ignored);
    throw std::runtime_error(reason);
}

bool has_sanitizer_report(const std::string& output) {
    return output.find("ERROR: AddressSanitizer") != std::string::npos ||
           output.find("ERROR: LeakSanitizer") != std::string::npos ||
           output.find("WARNING: ThreadSanitizer") != std::string::npos ||
           output.find(": runtime error: ") != std::string::npos;
}

ServerProcess::~ServerProcess() {
    if (pid_ > 0) stop(SIGTERM, std::chrono::seconds(30));
    const std::string text = log();
    if (has_sanitizer_report(text)) ADD_FAILURE() << "larmor-server reported a sanitizer error (log below)";
    if (::testing::Test::HasFailure()) std::cerr << "---- larmor-server log (" << log_path_ << ") ----\n" << text;
    else ::unlink(log_path_.c_str());
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    std::error_code ignored;
    if (own_dependency_dir_) std::filesystem::remove_all(dependency_dir_, ignored);
}

bool ServerProcess::running() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        return false;
    }
    return true;
}

std::string ServerProcess::log() const { return read_file(log_path_); }

int ServerProcess::stop(int signal, std::chrono::seconds timeout) {
    if (!running()) return exit_code_;
    ::kill(pid_, signal);
    int code = wait_until(pid_, Clock::now() + timeout);
    if (code == -1) {
        ::kill(pid_, SIGKILL);
        wait_until(pid_, Clock::now() + std::chrono::seconds(30));
    }
    pid_ = -1;
    exit_code_ = code;
    return code;
}

// ---------------------------------------------------------------------------------------------------
// run_process

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
    auto [path, fd] = temp_file("larmor-test-process");
    ProcessResult result;
    pid_t pid;
    try {
        pid = spawn(argv, fd, fd);
    } catch (...) {
        ::close(fd);
        ::unlink(path.c_str());
        throw;
    }
    ::close(fd);
    result.exit_code = wait_until(pid, Clock::now() + timeout);
    if (result.exit_code == -1) {
        result.timed_out = true;
        ::kill(pid, SIGKILL);
        wait_until(pid, Clock::now() + std::chrono::seconds(30));
    }
    result.output = read_file(path);
    ::unlink(path.c_str());
    if (has_sanitizer_report(result.output))
        ADD_FAILURE() << argv[0] << " reported a sanitizer error:\n" << result.output;
    return result;
}

// ---------------------------------------------------------------------------------------------------
// WireConnection

WireConnection::WireConnection(uint16_t port, std::chrono::seconds io_timeout, const std::string& source) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(errno_text("socket"));
    timeval tv{static_cast<time_t>(io_timeout.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!source.empty()) {
        sockaddr_in local{};
        local.sin_family = AF_INET;
        if (::inet_pton(AF_INET, source.c_str(), &local.sin_addr) != 1 ||
            ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
            const std::string err = errno_text(("bind to " + source).c_str());
            ::close(fd_);
            throw std::runtime_error(err);
        }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const std::string err = errno_text(("connect to 127.0.0.1:" + std::to_string(port)).c_str());
        ::close(fd_);
        throw std::runtime_error(err);
    }
}

void WireConnection::reset() {
    if (fd_ < 0) return;
    const linger abort_now{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort_now, sizeof abort_now);
    ::close(fd_);
    fd_ = -1;
}

WireConnection::~WireConnection() {
    if (fd_ >= 0) ::close(fd_);
}

void WireConnection::send(const wire::WireMessage& msg) { send_bytes(wire::encode(msg)); }

void WireConnection::send_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= static_cast<size_t>(k);
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            throw std::runtime_error("test client: send timed out (the server stopped reading)");
        } else if (k < 0 && errno != EINTR) {
            throw std::runtime_error(errno_text("test client: send"));
        }
    }
}

void WireConnection::shutdown_send() { ::shutdown(fd_, SHUT_WR); }

wire::WireMessage WireConnection::receive(const wire::Limits& limits) {
    FdReader reader(fd_);
    return wire::read_message(reader, limits);
}

std::vector<wire::WireMessage> WireConnection::receive_until_close() {
    std::vector<wire::WireMessage> out;
    for (;;) {
        out.push_back(receive());
        if (std::holds_alternative<wire::Close>(out.back())) return out;
    }
}

bool WireConnection::closed_by_peer(std::chrono::seconds timeout) {
    pollfd pfd{fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(timeout.count() * 1000));
    if (r <= 0) return false;
    char c;
    const ssize_t k = ::recv(fd_, &c, 1, MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno == ECONNRESET);
}

HttpResult http_request(uint16_t port, const std::string& target, const std::string& method,
                        std::chrono::seconds timeout) {
    HttpResult r;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return r;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return r;
    }
    const std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
        ::close(fd);
        return r;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string raw;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        pollfd pfd{fd, POLLIN, 0};
        if (left <= 0 || ::poll(&pfd, 1, static_cast<int>(left)) <= 0) break;
        char buf[4096];
        const ssize_t k = ::read(fd, buf, sizeof buf);
        if (k <= 0) break;
        raw.append(buf, static_cast<size_t>(k));
    }
    ::close(fd);
    const size_t head_end = raw.find("\r\n\r\n");
    if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return r;
    r.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
    const std::string head = raw.substr(0, head_end);
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    const size_t ct = lower.find("\r\ncontent-type:");
    if (ct != std::string::npos) {
        const size_t v = ct + 15, e = head.find("\r\n", v);
        r.content_type = head.substr(v, e == std::string::npos ? std::string::npos : e - v);
        r.content_type.erase(0, r.content_type.find_first_not_of(' '));
    }
    r.body = raw.substr(head_end + 4);
    return r;
}

std::vector<std::string> texts_of(const std::vector<wire::WireMessage>& messages) {
    std::vector<std::string> out;
    for (const auto& m : messages)
        if (const auto* t = std::get_if<wire::Text>(&m)) out.push_back(t->text);
    return out;
}

::testing::AssertionResult some_text_contains(const std::vector<wire::WireMessage>& reply, const std::string& needle) {
    std::string all;
    for (const std::string& t : texts_of(reply)) {
        if (t.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
        all += "\n  " + t;
    }
    return ::testing::AssertionFailure() << "no TEXT contains '" << needle << "'; the texts:" << all;
}

double metric_sample(const std::string& body, const std::string& name) {
    size_t at = 0;
    while ((at = body.find(name + " ", at)) != std::string::npos) {
        if (at == 0 || body[at - 1] == '\n') return std::strtod(body.c_str() + at + name.size() + 1, nullptr);
        at += name.size();
    }
    return -1;
}

}  // namespace larmor::test
