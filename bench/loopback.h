#pragma once
// Loopback plumbing the end-to-end benchmarks share (server_throughput_bench, realtime_radial_bench):
// larmor-server started as a child process on an ephemeral port, a blocking TCP client socket, and a
// wire::ByteReader over a socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "wire/codec.h"

#ifndef LARMOR_BINARY_DIR
#error "LARMOR_BINARY_DIR must point at the build tree"
#endif

namespace larmor::bench {

inline void send_all(int fd, const uint8_t* p, size_t n) {
    while (n > 0) {
        ssize_t k = ::send(fd, p, std::min(n, size_t{1} << 20), MSG_NOSIGNAL);
        if (k <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
        p += k;
        n -= size_t(k);
    }
}

inline int connect_loopback(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        throw std::runtime_error("connect to port " + std::to_string(port) + ": " + std::strerror(errno));
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// Reads exactly the requested bytes from a socket; EndOfStream when the server closes.
struct SocketReader : wire::ByteReader {
    int fd = -1;
    explicit SocketReader(int f) : fd(f) {}
    void read_exact(void* dst, size_t n) override {
        auto* p = static_cast<uint8_t*>(dst);
        while (n) {
            ssize_t k = ::recv(fd, p, n, 0);
            if (k <= 0) throw wire::EndOfStream("server closed");
            p += k;
            n -= size_t(k);
        }
    }
};

// larmor-server (the build tree's, on the source tree's config/) as a child process on an ephemeral
// loopback port, logging warnings only; stopped with SIGTERM.
class ServerProcess {
public:
    ServerProcess() {
        int pipefd[2];
        if (::pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
        pid_ = ::fork();
        if (pid_ == 0) {
            ::dup2(pipefd[1], STDOUT_FILENO);
            ::close(pipefd[0]);
            std::string exe = std::string(LARMOR_BINARY_DIR) + "/server/larmor-server";
            std::string cfg = std::string(LARMOR_SOURCE_DIR) + "/config";
            ::execl(exe.c_str(), exe.c_str(), "--port", "0", "--address", "127.0.0.1", "--config-dir", cfg.c_str(),
                    "--log-level", "warn", static_cast<char*>(nullptr));
            std::_Exit(127);
        }
        ::close(pipefd[1]);
        FILE* f = ::fdopen(pipefd[0], "r");
        char line[512];
        while (std::fgets(line, sizeof line, f)) {
            std::string s(line);
            if (s.find("listening on ") == std::string::npos) continue;
            port_ = uint16_t(std::stoi(s.substr(s.rfind(':') + 1)));
            break;
        }
        out_ = f;
        if (!port_) throw std::runtime_error("larmor-server did not report its port");
    }
    ~ServerProcess() {
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
        if (out_) std::fclose(out_);
    }
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;
    uint16_t port() const { return port_; }

private:
    pid_t pid_ = -1;
    uint16_t port_ = 0;
    FILE* out_ = nullptr;
};

}  // namespace larmor::bench
