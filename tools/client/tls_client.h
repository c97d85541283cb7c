#pragma once
// The client side of TLS (--tls): an OpenSSL session on the connection's non-blocking descriptor.
// Every call returns at once; Connection waits in poll() between calls. Calls are serialised by a
// mutex because the client reads on one thread while it writes on another, which one OpenSSL object
// allows in turn but not at the same time (renegotiation is off, so a read never needs to write and a
// write never needs to read after the handshake).
#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace larmor::client {

struct TlsOptions {
    bool enabled = false;  // --tls (implied by the other three)
    std::string ca;        // --tls-ca: PEM CA certificates the server's must chain to (default: the system's)
    std::string cert;      // --tls-cert: PEM client certificate chain for servers that require one
    std::string key;       // --tls-key: its unencrypted PEM key (default: in the --tls-cert file)
};

// A TLS failure: the server's certificate, an alert from the server, a broken record.
class TlsError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class TlsClient {
public:
    enum class Want { Nothing, Read, Write };

    // Loads the certificates and prepares a session that verifies the server's certificate against
    // `host` (a DNS name, or an IP address matched against the certificate's IP entries, RFC 6125).
    // Throws std::runtime_error naming a file that cannot be used. Before connecting: a bad file
    // fails without bothering the server.
    TlsClient(const std::string& host, const std::string& peer, const TlsOptions& options);
    // Puts the session on the connected, non-blocking socket `fd`.
    void attach(int fd);
    ~TlsClient();
    TlsClient(const TlsClient&) = delete;
    TlsClient& operator=(const TlsClient&) = delete;

    // One step of the handshake: Nothing once it is complete, else what to wait for. Throws TlsError.
    Want handshake();
    // At most n bytes read (> 0), 0 with `want` set when nothing is there yet, or 0 with `want`
    // Nothing at the end of the stream. Throws TlsError, or std::system_error for the socket's errors.
    size_t read(void* dst, size_t n, Want& want);
    // Bytes written (> 0), or 0 with `want` set. Same errors.
    size_t write(const void* src, size_t n, Want& want);
    // "TLSv1.3 TLS_AES_256_GCM_SHA384", after the handshake.
    std::string description();

private:
    struct CtxFree {
        void operator()(SSL_CTX* ctx) const;
    };
    struct SslFree {
        void operator()(SSL* ssl) const;
    };
    // The reason of a failure, with the alert the server sent when there was one (recorded by an
    // OpenSSL info callback): the reader may process the alert while the writer then only sees the
    // closed connection, and whichever thread reports first must still say why.
    std::string failure(const std::string& reason) const;

    std::string peer_;
    bool has_client_cert_ = false;
    std::string alert_;  // description of the last fatal alert received, lower case; guarded by mutex_
    std::mutex mutex_;
    std::unique_ptr<SSL_CTX, CtxFree> ctx_;
    std::unique_ptr<SSL, SslFree> ssl_;
};

}  // namespace larmor::client
