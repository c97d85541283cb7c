#include "connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace larmor::client {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

struct Connection::Socket {
    asio::io_context io;
    tcp::socket socket{io};
};

Connection::Connection(const std::string& host, const std::string& port, std::chrono::seconds timeout,
                       const TlsOptions& tls)
    : socket_(std::make_unique<Socket>()), peer_(host + ":" + port), timeout_(timeout) {
    if (tls.enabled) tls_ = std::make_unique<TlsClient>(host, peer_, tls);  // its files load before we connect
    // Asynchronous resolve + connect so the whole attempt obeys the timeout (a blocking connect to an
    // unreachable host waits for the kernel's retries, minutes).
    tcp::resolver resolver(socket_->io);
    boost::system::error_code result = asio::error::would_block;
    resolver.async_resolve(host, port, [&](const boost::system::error_code& ec, tcp::resolver::results_type eps) {
        if (ec) {
            result = ec;
            return;
        }
        asio::async_connect(socket_->socket, eps,
                            [&](const boost::system::error_code& cec, const tcp::endpoint&) { result = cec; });
    });
    socket_->io.run_for(timeout);
    if (result == asio::error::would_block)
        throw std::runtime_error("cannot connect to " + peer_ + ": no answer within " +
                                 std::to_string(timeout.count()) + " s");
    if (result) throw std::runtime_error("cannot connect to " + peer_ + ": " + result.message());

    socket_->socket.set_option(tcp::no_delay(true));  // we batch writes ourselves; CLOSE should not linger
    socket_->socket.non_blocking(true);
    fd_ = socket_->socket.native_handle();
    touch();
    if (tls.enabled) {
        tls_->attach(fd_);
        // Bounded like every other wait: `timeout` without progress.
        for (auto want = tls_->handshake(); want != TlsClient::Want::Nothing; want = tls_->handshake()) wait(want);
        tls_description_ = tls_->description();
        touch();
    }
}

Connection::~Connection() = default;

void Connection::touch() { last_traffic_ns_.store(now_ns()); }

void Connection::wait(Direction dir) {
    for (;;) {
        const int64_t idle_ns = now_ns() - last_traffic_ns_.load();
        const int64_t left_ms = (std::chrono::nanoseconds(timeout_).count() - idle_ns) / 1000000;
        if (left_ms <= 0)
            throw TimeoutError("no traffic with " + peer_ + " for " + std::to_string(timeout_.count()) +
                               " s (see --timeout)");
        // Wake at least every second to notice traffic in the other direction.
        pollfd p{fd_, static_cast<short>(dir == Direction::In ? POLLIN : POLLOUT), 0};
        int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
        if (r > 0) return;  // ready, or an error/hang-up that the next recv/send reports
        if (r < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
    }
}

size_t Connection::read_some(void* dst, size_t cap) {
    while (tls_) {
        TlsClient::Want want;
        const size_t r = tls_->read(dst, cap, want);
        if (r > 0) {
            touch();
            return r;
        }
        if (want == TlsClient::Want::Nothing) throw wire::EndOfStream("connection closed by " + peer_);
        wait(want);
    }
    for (;;) {
        ssize_t r = ::recv(fd_, dst, cap, 0);
        if (r > 0) {
            touch();
            return static_cast<size_t>(r);
        }
        if (r == 0) throw wire::EndOfStream("connection closed by " + peer_);
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            wait(Direction::In);
        else if (errno != EINTR)
            throw std::system_error(errno, std::generic_category(), "receiving from " + peer_);
    }
}

void Connection::read_exact(void* dst, size_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t got = 0; got < n;) got += read_some(p + got, n - got);
}

void Connection::send_all(const void* src, size_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    size_t sent = 0;
    while (tls_ && sent < n) {
        TlsClient::Want want;
        const size_t r = tls_->write(p + sent, n - sent, want);
        if (r > 0) {
            sent += r;
            touch();
        } else {
            wait(want);  // retried with the same bytes, as SSL_write requires
        }
    }
    while (sent < n) {
        // MSG_NOSIGNAL: a server that hangs up gives EPIPE here instead of killing the client.
        ssize_t r = ::send(fd_, p + sent, n - sent, MSG_NOSIGNAL);
        if (r >= 0) {
            sent += static_cast<size_t>(r);
            if (r > 0) touch();
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            wait(Direction::Out);
        } else if (errno != EINTR) {
            throw std::system_error(errno, std::generic_category(), "sending to " + peer_);
        }
    }
}

void Connection::shutdown() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void SocketReader::read_exact(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    const size_t have = std::min(n, end_ - begin_);
    std::memcpy(out, buf_.data() + begin_, have);
    begin_ += have;
    if (have == n) return;
    // The buffer is empty now. Large remainders go straight into dst; small ones through the buffer,
    // which also takes in whatever follows them.
    const size_t need = n - have;
    if (need >= buf_.size()) {
        conn_.read_exact(out + have, need);
        return;
    }
    begin_ = end_ = 0;
    while (end_ < need) end_ += conn_.read_some(buf_.data() + end_, buf_.size() - end_);
    std::memcpy(out + have, buf_.data(), need);
    begin_ = need;
}

void SocketWriter::write_all(const void* src, size_t n) {
    if (buf_.size() + n > kBufferBytes) flush();
    if (n >= kBufferBytes) {
        conn_.send_all(src, n);  // big payloads go straight out, no copy
    } else {
        const auto* p = static_cast<const uint8_t*>(src);
        buf_.insert(buf_.end(), p, p + n);
    }
    total_ += n;
}

void SocketWriter::flush() {
    if (buf_.empty()) return;
    conn_.send_all(buf_.data(), buf_.size());
    buf_.clear();
}

}  // namespace larmor::client
