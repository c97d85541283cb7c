#pragma once
// A blocking TLS connection to 127.0.0.1:port speaking the wire protocol, for tests that hold a TLS
// session open at a chosen step (larmor-client runs a whole session at once). Every send and
// receive gives up after `io_timeout`.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wire/codec.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace larmor::test {

class TlsWireConnection {
public:
    // Verifies the server against `ca_file` (and the address 127.0.0.1); presents `cert_file` and
    // `key_file` when given. Throws std::runtime_error when the connection or handshake fails.
    TlsWireConnection(uint16_t port, const std::string& ca_file, const std::string& cert_file = "",
                      const std::string& key_file = "", std::chrono::seconds io_timeout = std::chrono::seconds(60));
    ~TlsWireConnection();
    TlsWireConnection(const TlsWireConnection&) = delete;
    TlsWireConnection& operator=(const TlsWireConnection&) = delete;

    void send(const wire::WireMessage& msg);
    // Reads one message; throws wire::EndOfStream at EOF, std::runtime_error on errors and timeouts.
    wire::WireMessage receive();
    // Reads messages up to and including CLOSE.
    std::vector<wire::WireMessage> receive_until_close();

private:
    struct CtxFree {
        void operator()(SSL_CTX* ctx) const;
    };
    struct SslFree {
        void operator()(SSL* ssl) const;
    };
    int fd_ = -1;
    std::unique_ptr<SSL_CTX, CtxFree> ctx_;
    std::unique_ptr<SSL, SslFree> ssl_;
};

}  // namespace larmor::test
