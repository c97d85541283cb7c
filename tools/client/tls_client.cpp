#include "tls_client.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace larmor::client {
namespace {

// OpenSSL's queued errors as one line, emptying the queue; `fallback` when it is empty.
std::string openssl_errors(const std::string& fallback) {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        out += (out.empty() ? "" : "; ") + std::string(buf);
    }
    return out.empty() ? fallback : out;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// What the user can do about an alert the server sent (RFC 8446 section 6.2): in TLS 1.3 the server
// judges the client's certificate after the client's side of the handshake is done, so its verdict
// arrives with the first read.
std::string alert_hint(const std::string& reason, bool has_client_cert) {
    if (contains(reason, "certificate required") || (!has_client_cert && contains(reason, "handshake failure")))
        return " (the server requires a client certificate: give --tls-cert and --tls-key)";
    if (contains(reason, "unknown ca") || contains(reason, "bad certificate") || contains(reason, "certificate unknown"))
        return " (the server does not accept this client certificate: it must be issued by a CA in the server's "
               "--tls-client-ca)";
    return "";
}

// PEM private keys under a passphrase say so in their armour (RFC 7468 section 11; the legacy form
// in a Proc-Type header). OpenSSL would prompt on the terminal for it otherwise.
bool is_encrypted_pem(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (line.find("ENCRYPTED") != std::string::npos) return true;
    return false;
}

bool is_ip_address(const std::string& host) {
    unsigned char buf[16];
    return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

void TlsClient::CtxFree::operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
void TlsClient::SslFree::operator()(SSL* ssl) const { SSL_free(ssl); }

TlsClient::TlsClient(const std::string& host, const std::string& peer, const TlsOptions& options)
    : peer_(peer), has_client_cert_(!options.cert.empty()) {
    ERR_clear_error();
    ctx_.reset(SSL_CTX_new(TLS_client_method()));
    if (!ctx_) throw std::runtime_error("cannot set up TLS: " + openssl_errors("SSL_CTX_new failed"));
    SSL_CTX* ctx = ctx_.get();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);  // RFC 8996: not 1.0 or 1.1
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    // Never prompt for a passphrase: an encrypted key fails with a message instead.
    SSL_CTX_set_default_passwd_cb(ctx, [](char*, int, int, void*) { return 0; });
    if (!options.ca.empty()) {
        if (SSL_CTX_load_verify_locations(ctx, options.ca.c_str(), nullptr) != 1)
            throw std::runtime_error("--tls-ca '" + options.ca + "': " + openssl_errors("cannot load") +
                                     " (expected PEM CA certificates)");
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        throw std::runtime_error("cannot load the system's CA certificates: " + openssl_errors("?") +
                                 " (give the server's CA with --tls-ca)");
    }
    if (!options.cert.empty()) {
        if (SSL_CTX_use_certificate_chain_file(ctx, options.cert.c_str()) != 1)
            throw std::runtime_error("--tls-cert '" + options.cert + "': " + openssl_errors("cannot load") +
                                     " (expected a PEM certificate chain)");
        const std::string key = options.key.empty() ? options.cert : options.key;
        if (is_encrypted_pem(key))
            throw std::runtime_error("--tls-key '" + key + "': the key is encrypted; give it unencrypted (openssl pkey "
                                     "-in KEY -out PLAIN_KEY), readable by you only");
        if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
            const unsigned long e = ERR_peek_last_error();
            if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
                throw std::runtime_error("--tls-key '" + key + "' does not belong to the certificate in '" +
                                         options.cert + "'");
            throw std::runtime_error("--tls-key '" + key + "': " + openssl_errors("cannot load") +
                                     " (expected an unencrypted PEM private key)");
        }
        if (SSL_CTX_check_private_key(ctx) != 1)
            throw std::runtime_error("--tls-key '" + key + "' does not belong to the certificate in '" + options.cert +
                                     "'");
    } else if (!options.key.empty()) {
        throw std::runtime_error("--tls-key '" + options.key + "' given without --tls-cert");
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);

    ssl_.reset(SSL_new(ctx));
    if (!ssl_) throw std::runtime_error("cannot set up TLS: " + openssl_errors("SSL_new failed"));
    SSL* ssl = ssl_.get();
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // Called inside SSL_* calls, so under mutex_.
    SSL_set_app_data(ssl, this);
    SSL_set_info_callback(ssl, [](const SSL* s, int where, int ret) {
        if (!(where & SSL_CB_READ_ALERT) || (ret >> 8) != SSL3_AL_FATAL) return;
        auto* self = static_cast<TlsClient*>(SSL_get_app_data(s));
        // OpenSSL 3.0 names TLS 1.3's certificate_required alert (RFC 8446 section 6.2) "unknown".
        std::string d = (ret & 0xff) == SSL_AD_CERTIFICATE_REQUIRED ? "certificate required"
                                                                    : SSL_alert_desc_string_long(ret);
        std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        self->alert_ = d;
    });
    // The server's certificate must name the host we were told to connect to (RFC 6125): a DNS name
    // against its DNS entries, an address against its IP address entries. Server Name Indication
    // carries DNS names only (RFC 6066 section 3).
    if (is_ip_address(host)) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) != 1)
            throw std::runtime_error("cannot verify the address '" + host + "': " + openssl_errors("?"));
    } else {
        if (SSL_set1_host(ssl, host.c_str()) != 1)
            throw std::runtime_error("cannot verify the host name '" + host + "': " + openssl_errors("?"));
        SSL_set_tlsext_host_name(ssl, host.c_str());
    }
}

std::string TlsClient::failure(const std::string& reason) const {
    if (alert_.empty()) return reason + alert_hint(reason, has_client_cert_);
    const std::string both = reason + "; the server's alert: " + alert_;
    return both + alert_hint(both, has_client_cert_);
}

void TlsClient::attach(int fd) {
    if (SSL_set_fd(ssl_.get(), fd) != 1)
        throw std::runtime_error("cannot attach TLS to the socket: " + openssl_errors("?"));
}

TlsClient::~TlsClient() = default;

TlsClient::Want TlsClient::handshake() {
    std::lock_guard<std::mutex> lock(mutex_);
    ERR_clear_error();
    const int r = SSL_connect(ssl_.get());
    if (r == 1) return Want::Nothing;
    const int err = SSL_get_error(ssl_.get(), r);
    if (err == SSL_ERROR_WANT_READ) return Want::Read;
    if (err == SSL_ERROR_WANT_WRITE) return Want::Write;
    const std::string reason =
        openssl_errors(err == SSL_ERROR_SYSCALL ? (errno ? std::strerror(errno) : "connection closed") : "failed");
    const long verify = SSL_get_verify_result(ssl_.get());
    if (verify != X509_V_OK)
        throw TlsError("the TLS certificate of " + peer_ + " is not trusted: " + X509_verify_cert_error_string(verify) +
                       " (give the CA that issued it with --tls-ca; the certificate must name the host given with -a)");
    std::string hint = alert_hint(reason, has_client_cert_);
    if (hint.empty() && (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN || contains(reason, "unexpected eof")))
        // larmor-server closes a TLS port's connections from outside --allow (and over --max-sessions)
        // without a handshake.
        hint = " (the server closed the connection: is this machine outside its --allow networks, or is it at "
               "its session limit?)";
    if (hint.empty()) hint = " (does the server speak TLS on this port? larmor-server does with --tls-cert)";
    throw TlsError("TLS handshake with " + peer_ + " failed: " + reason + hint);
}

size_t TlsClient::read(void* dst, size_t n, Want& want) {
    std::lock_guard<std::mutex> lock(mutex_);
    ERR_clear_error();
    size_t got = 0;
    const int ok = SSL_read_ex(ssl_.get(), dst, n, &got);
    want = Want::Nothing;
    if (ok == 1) return got;
    const int err = SSL_get_error(ssl_.get(), ok);
    switch (err) {
    case SSL_ERROR_WANT_READ: want = Want::Read; return 0;
    case SSL_ERROR_WANT_WRITE: want = Want::Write; return 0;
    case SSL_ERROR_ZERO_RETURN: return 0;  // close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF)
    case SSL_ERROR_SYSCALL:
        if (errno == 0) return 0;
        throw std::system_error(errno, std::generic_category(), "receiving from " + peer_);
    default:
        throw TlsError("TLS with " + peer_ + ": " + failure(openssl_errors("error " + std::to_string(err))));
    }
}

size_t TlsClient::write(const void* src, size_t n, Want& want) {
    std::lock_guard<std::mutex> lock(mutex_);
    ERR_clear_error();
    size_t written = 0;
    const int ok = SSL_write_ex(ssl_.get(), src, n, &written);
    want = Want::Nothing;
    if (ok == 1) return written;
    const int err = SSL_get_error(ssl_.get(), ok);
    switch (err) {
    case SSL_ERROR_WANT_READ: want = Want::Read; return 0;
    case SSL_ERROR_WANT_WRITE: want = Want::Write; return 0;
    case SSL_ERROR_SYSCALL:
        throw std::system_error(errno ? errno : EPIPE, std::generic_category(), "sending to " + peer_);
    case SSL_ERROR_ZERO_RETURN:  // EOF while sending (SSL_OP_IGNORE_UNEXPECTED_EOF reports it so)
        if (!alert_.empty()) throw TlsError("TLS with " + peer_ + ": " + failure("the server closed the connection"));
        throw TlsError("TLS with " + peer_ + ": the server closed the connection" +
                       (has_client_cert_ ? std::string(" (if right after the handshake: the server may not accept this client "
                                                       "certificate; it must be issued by a CA in the server's --tls-client-ca)")
                                         : std::string(" (the server may require a client certificate: give --tls-cert and "
                                                       "--tls-key)")));
    default:
        throw TlsError("TLS with " + peer_ + ": " + failure(openssl_errors("error " + std::to_string(err))));
    }
}

std::string TlsClient::description() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::string(SSL_get_version(ssl_.get())) + " " + SSL_get_cipher_name(ssl_.get());
}

}  // namespace larmor::client
