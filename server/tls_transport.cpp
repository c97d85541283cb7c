#include "server/tls_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "wire/codec.h"

namespace larmor::server {
namespace {

using Clock = std::chrono::steady_clock;

// RFC 8446 section 5.1 (and RFC 5246 section 6.2.1 for TLS 1.2): every TLS connection opens with a
// record of content type handshake(22). No Gadgetron message id begins with that byte (ids are
// little-endian u16: 1..7, 1008, 1018, 1019, 1022, 1026), so one peeked byte tells a plain client.
constexpr uint8_t kTlsHandshakeRecord = 22;
constexpr size_t kPlainDrainBytes = 64u << 20;
constexpr auto kPlainDrainTime = std::chrono::seconds(2);

}  // namespace

void TlsTransport::SslFree::operator()(SSL* ssl) const { SSL_free(ssl); }

TlsTransport::TlsTransport(boost::asio::ip::tcp::socket socket, std::shared_ptr<TlsContext> context)
    : context_(std::move(context)), socket_(std::move(socket)) {
    socket_.non_blocking(true);
    fd_ = socket_.native_handle();
    ssl_.reset(SSL_new(context_->context().native_handle()));
    if (!ssl_) throw SocketError("cannot create a TLS session: " + openssl_errors("SSL_new failed"));
    // Partial writes: write_some returns after each record, as a send() would. Moving buffer: a
    // retried write may come from a copy of the same bytes.
    SSL_set_mode(ssl_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // The wire protocol ends with its own CLOSE message, so an EOF without close_notify cannot
    // truncate a session unnoticed (RFC 8446 section 6.1 leaves this to the application): treat it as
    // EOF, which the session reports like a plain-TCP client that vanished.
    SSL_set_options(ssl_.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (SSL_set_fd(ssl_.get(), fd_) != 1) throw SocketError("cannot attach TLS to the socket: " + openssl_errors("?"));
}

TlsTransport::~TlsTransport() { close(); }

bool TlsTransport::wait(Direction d, Clock::time_point deadline) const {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return false;
        pollfd p{fd_, static_cast<short>(d == Direction::In ? POLLIN : POLLOUT), 0};
        const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
        if (r > 0) return true;  // ready, or an error / hang-up that the next SSL call reports
        if (r < 0 && errno != EINTR) throw SocketError(std::string("poll on the socket failed: ") + std::strerror(errno));
    }
}

void TlsTransport::refuse_plain_client(Clock::time_point deadline) {
    std::vector<uint8_t> reply = wire::encode(wire::Text{
        "[Server] ERROR: this larmor-server port speaks TLS; connect with TLS (larmor-client --tls)\n"});
    const std::vector<uint8_t> close = wire::encode(wire::Close{});
    reply.insert(reply.end(), close.begin(), close.end());
    size_t sent = 0;
    while (sent < reply.size()) {
        const ssize_t k = ::send(fd_, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (k > 0) {
            sent += static_cast<size_t>(k);
        } else if (k < 0 && errno == EINTR) {
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait(Direction::Out, deadline)) {
        } else {
            return;
        }
    }
    close_after_reply(deadline);
}

void TlsTransport::close_after_reply(Clock::time_point deadline) {
    ::shutdown(fd_, SHUT_WR);
    // Closing with unread input would send a reset that can destroy the reply before the client
    // reads it (as in SocketReader::discard_until_eof).
    const auto drain_until = std::min(deadline, Clock::now() + kPlainDrainTime);
    std::vector<uint8_t> scratch(16384);
    for (size_t dropped = 0; dropped < kPlainDrainBytes && wait(Direction::In, drain_until);) {
        const ssize_t k = ::recv(fd_, scratch.data(), scratch.size(), 0);
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return;
        if (k > 0) dropped += static_cast<size_t>(k);
    }
}

void TlsTransport::handshake(Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    const std::string timed_out = "no TLS handshake within " + duration_text(timeout) + " (--tls-handshake-timeout)";
    for (;;) {
        uint8_t first = 0;
        const ssize_t k = ::recv(fd_, &first, 1, MSG_PEEK);
        if (k == 1) {
            if (first == kTlsHandshakeRecord) break;
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", first);
            refuse_plain_client(Clock::now() + std::chrono::seconds(5));
            throw HandshakeError(std::string("not TLS (first byte ") + hex +
                                 "): a plain-TCP client on the TLS port; told it in plain text that TLS is required");
        }
        if (k == 0) throw HandshakeError("the client closed the connection before the TLS handshake");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            throw HandshakeError(std::string("socket error before the TLS handshake: ") + std::strerror(errno));
        if (!wait(Direction::In, deadline)) throw HandshakeError(timed_out);
    }
    for (;;) {
        int err;
        std::string why;
        long verify = X509_V_OK;
        {
            std::lock_guard<std::mutex> lock(ssl_mutex_);
            ERR_clear_error();
            const int r = SSL_accept(ssl_.get());
            if (r == 1) break;
            err = SSL_get_error(ssl_.get(), r);
            why = openssl_errors(err == SSL_ERROR_SYSCALL ? std::string(errno ? std::strerror(errno) : "connection closed")
                                                          : "error " + std::to_string(err));
            verify = SSL_get_verify_result(ssl_.get());
        }
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            if (!wait(err == SSL_ERROR_WANT_READ ? Direction::In : Direction::Out, deadline))
                throw HandshakeError(timed_out);
            continue;
        }
        // SSL_accept has queued its alert. In TLS 1.3 the client finished its side of the handshake
        // before the server judged its certificate, so it may already be sending data: closing now,
        // with that data unread, would reset the connection and can destroy the alert before the
        // client reads the reason (seen under ThreadSanitizer's slower timing).
        close_after_reply(Clock::now() + std::chrono::seconds(5));
        if (verify != X509_V_OK)
            throw HandshakeError(std::string("TLS handshake failed: client certificate rejected: ") +
                                 X509_verify_cert_error_string(verify) + " (" + why + ")");
        throw HandshakeError("TLS handshake failed: " + why);
    }
    std::lock_guard<std::mutex> lock(ssl_mutex_);
    established_ = true;
    description_ = std::string(SSL_get_version(ssl_.get())) + " " + SSL_get_cipher_name(ssl_.get());
    if (X509* cert = SSL_get_peer_certificate(ssl_.get())) {
        char subject[512];
        X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
        description_ += std::string(", client certificate ") + subject;
        X509_free(cert);
    }
}

size_t TlsTransport::read_some(void* dst, size_t n, Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        int err;
        std::string why;
        {
            std::lock_guard<std::mutex> lock(ssl_mutex_);
            if (!established_) throw SocketError("TLS read before the handshake");
            ERR_clear_error();
            size_t got = 0;
            const int ok = SSL_read_ex(ssl_.get(), dst, n, &got);
            if (ok == 1) return got;
            err = SSL_get_error(ssl_.get(), ok);
            if (err == SSL_ERROR_SYSCALL) why = errno ? std::strerror(errno) : "connection closed";
            why = openssl_errors(why.empty() ? "error " + std::to_string(err) : why);
        }
        switch (err) {
        case SSL_ERROR_ZERO_RETURN:
            return 0;  // close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF)
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:  // a TLS 1.3 KeyUpdate reply (RFC 8446 section 4.6.3)
            if (!wait(err == SSL_ERROR_WANT_READ ? Direction::In : Direction::Out, deadline))
                throw ReadTimeout(read_timeout_text(timeout));
            continue;
        default:
            throw SocketError("TLS read failed: " + why);
        }
    }
}

size_t TlsTransport::write_some(const uint8_t* src, size_t n, Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        int err;
        std::string why;
        {
            std::lock_guard<std::mutex> lock(ssl_mutex_);
            if (!established_) throw SocketError("TLS write before the handshake");
            ERR_clear_error();
            size_t written = 0;
            const int ok = SSL_write_ex(ssl_.get(), src, n, &written);
            if (ok == 1) return written;
            err = SSL_get_error(ssl_.get(), ok);
            if (err == SSL_ERROR_SYSCALL) why = errno ? std::strerror(errno) : "connection closed";
            why = openssl_errors(why.empty() ? "error " + std::to_string(err) : why);
        }
        if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
            // Retried with the same bytes, as SSL_write requires after WANT_WRITE.
            if (!wait(err == SSL_ERROR_WANT_WRITE ? Direction::Out : Direction::In, deadline))
                throw SocketError(write_timeout_text(timeout));
            continue;
        }
        throw SocketError("socket write failed: " + why);
    }
}

void TlsTransport::shutdown_send() noexcept {
    {
        // close_notify (RFC 8446 section 6.1), best effort: a full send buffer just loses it, and the
        // FIN below still ends the stream.
        std::lock_guard<std::mutex> lock(ssl_mutex_);
        if (established_) {
            ERR_clear_error();
            SSL_shutdown(ssl_.get());
            ERR_clear_error();
        }
    }
    std::lock_guard<std::mutex> lock(fd_mutex_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void TlsTransport::shutdown_receive() noexcept {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RD);
}

void TlsTransport::close() noexcept {
    std::lock_guard<std::mutex> lock(fd_mutex_);
    fd_ = -1;
    boost::system::error_code ignored;
    socket_.close(ignored);
}

std::unique_ptr<Transport> make_transport(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket,
                                          const std::shared_ptr<TlsContext>& tls) {
    if (tls) return std::make_unique<TlsTransport>(std::move(socket), tls);
    return std::make_unique<TcpTransport>(ioc, std::move(socket));
}

}  // namespace larmor::server
