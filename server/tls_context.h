#pragma once
// The server's TLS configuration (--tls-cert, --tls-key, --tls-client-ca), loaded once at start-up
// into a Boost.Asio ssl::context (an OpenSSL SSL_CTX) that every TLS session shares.
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "server/security_options.h"

namespace larmor::server {

class TlsContext {
public:
    // Loads and checks the files. Throws std::runtime_error naming the file and OpenSSL's reason
    // (missing, not PEM, encrypted key, key not matching the certificate).
    explicit TlsContext(const TlsFiles& files);

    boost::asio::ssl::context& context() { return context_; }
    bool verifies_clients() const { return verifies_clients_; }
    // "TLS (client certificates required, CA file /etc/larmor/clients.pem)", for the start-up log.
    std::string description() const;

private:
    boost::asio::ssl::context context_;
    TlsFiles files_;
    bool verifies_clients_ = false;
};

// OpenSSL's queued errors as one line ("error:0A000086:SSL routines::certificate verify failed"),
// emptying the queue; `fallback` when it is empty.
std::string openssl_errors(const std::string& fallback);

}  // namespace larmor::server
