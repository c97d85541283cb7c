#include "tests/support/tls_wire_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace larmor::test {
namespace {

std::string ssl_errors() {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        out += (out.empty() ? "" : "; ") + std::string(buf);
    }
    return out.empty() ? std::string(std::strerror(errno)) : out;
}

class SslReader final : public wire::ByteReader {
public:
    explicit SslReader(SSL* ssl) : ssl_(ssl) {}
    void read_exact(void* dst, size_t n) override {
        auto* p = static_cast<uint8_t*>(dst);
        while (n > 0) {
            size_t got = 0;
            ERR_clear_error();
            const int ok = SSL_read_ex(ssl_, p, n, &got);
            if (ok == 1) {
                p += got;
                n -= got;
                continue;
            }
            const int err = SSL_get_error(ssl_, ok);
            if (err == SSL_ERROR_ZERO_RETURN) throw wire::EndOfStream("server closed the TLS connection");
            throw std::runtime_error("test TLS client: read failed (" + std::to_string(err) + "): " + ssl_errors());
        }
    }

private:
    SSL* ssl_;
};

}  // namespace

void TlsWireConnection::CtxFree::operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
void TlsWireConnection::SslFree::operator()(SSL* ssl) const { SSL_free(ssl); }

TlsWireConnection::TlsWireConnection(uint16_t port, const std::string& ca_file, const std::string& cert_file,
                                     const std::string& key_file, std::chrono::seconds io_timeout) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("test TLS client: socket failed");
    timeval tv{static_cast<time_t>(io_timeout.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd_);
        throw std::runtime_error("test TLS client: connect failed: " + std::string(std::strerror(errno)));
    }
    ctx_.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_options(ctx_.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (!ctx_ || SSL_CTX_load_verify_locations(ctx_.get(), ca_file.c_str(), nullptr) != 1)
        throw std::runtime_error("test TLS client: cannot load " + ca_file + ": " + ssl_errors());
    if (!cert_file.empty() && (SSL_CTX_use_certificate_chain_file(ctx_.get(), cert_file.c_str()) != 1 ||
                               SSL_CTX_use_PrivateKey_file(ctx_.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1))
        throw std::runtime_error("test TLS client: cannot load " + cert_file + ": " + ssl_errors());
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    ssl_.reset(SSL_new(ctx_.get()));
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), "127.0.0.1");
    SSL_set_fd(ssl_.get(), fd_);
    ERR_clear_error();
    if (SSL_connect(ssl_.get()) != 1) throw std::runtime_error("test TLS client: handshake failed: " + ssl_errors());
}

TlsWireConnection::~TlsWireConnection() {
    ssl_.reset();
    if (fd_ >= 0) ::close(fd_);
}

void TlsWireConnection::send(const wire::WireMessage& msg) {
    const std::vector<uint8_t> bytes = wire::encode(msg);
    size_t written = 0;
    ERR_clear_error();
    if (SSL_write_ex(ssl_.get(), bytes.data(), bytes.size(), &written) != 1 || written != bytes.size())
        throw std::runtime_error("test TLS client: write failed: " + ssl_errors());
}

wire::WireMessage TlsWireConnection::receive() {
    SslReader reader(ssl_.get());
    return wire::read_message(reader, wire::Limits{});
}

std::vector<wire::WireMessage> TlsWireConnection::receive_until_close() {
    std::vector<wire::WireMessage> out;
    for (;;) {
        out.push_back(receive());
        if (std::holds_alternative<wire::Close>(out.back())) return out;
    }
}

}  // namespace larmor::test
