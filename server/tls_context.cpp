#include "server/tls_context.h"

#include <fstream>
#include <stdexcept>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace larmor::server {
namespace {

namespace ssl = boost::asio::ssl;

// PEM private keys under a passphrase say so in their armour (RFC 7468 section 11; the legacy form
// in a Proc-Type header).
bool is_encrypted_pem(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (line.find("ENCRYPTED") != std::string::npos) return true;
    return false;
}

[[noreturn]] void fail(const std::string& flag, const std::string& file, const std::string& why) {
    throw std::runtime_error(flag + " '" + file + "': " + why);
}

// Boost's error code holds the first OpenSSL error; the queue may hold more (the system call's).
std::string reason(const boost::system::error_code& ec) {
    const std::string rest = openssl_errors("");
    return rest.empty() ? ec.message() : ec.message() + "; " + rest;
}

}  // namespace

std::string openssl_errors(const std::string& fallback) {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        out += (out.empty() ? "" : "; ") + std::string(buf);
    }
    return out.empty() ? fallback : out;
}

TlsContext::TlsContext(const TlsFiles& files) : context_(ssl::context::tls_server), files_(files) {
    SSL_CTX* ctx = context_.native_handle();
    ERR_clear_error();
    // TLS 1.2 is the oldest version without known protocol-level breaks (RFC 8996 deprecates 1.0 and
    // 1.1). Renegotiation is refused: nothing needs it, and it would let the reading side of a session
    // write and the writing side read (see tls_transport.h).
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    context_.set_options(ssl::context::default_workarounds | ssl::context::single_dh_use);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    // An encrypted key would make OpenSSL prompt on the terminal of a daemon: answer with no
    // passphrase, so loading fails with a message instead.
    context_.set_password_callback([](std::size_t, ssl::context::password_purpose) { return std::string(); });

    boost::system::error_code ec;
    context_.use_certificate_chain_file(files.cert, ec);
    if (ec) fail("--tls-cert", files.cert, reason(ec) + " (expected a PEM certificate chain)");
    const std::string key = files.key.empty() ? files.cert : files.key;
    if (is_encrypted_pem(key))
        fail(files.key.empty() ? "--tls-cert (no --tls-key given)" : "--tls-key", key,
             "the key is encrypted; a server cannot type its passphrase: give it unencrypted (openssl pkey -in KEY "
             "-out PLAIN_KEY), readable by the server's user only");
    context_.use_private_key_file(key, ssl::context::pem, ec);
    if (ec && ERR_GET_LIB(static_cast<unsigned long>(ec.value())) == ERR_LIB_X509 &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
        ERR_clear_error();
        fail("--tls-key", key, "does not belong to the certificate in '" + files.cert + "'");
    }
    if (ec)
        fail(files.key.empty() ? "--tls-cert (no --tls-key given)" : "--tls-key", key,
             reason(ec) + " (expected an unencrypted PEM private key)");
    if (SSL_CTX_check_private_key(ctx) != 1)
        fail("--tls-key", key, "does not belong to the certificate in '" + files.cert + "': " + openssl_errors("mismatch"));

    if (!files.client_ca.empty()) {
        context_.load_verify_file(files.client_ca, ec);
        if (ec) fail("--tls-client-ca", files.client_ca, reason(ec) + " (expected PEM CA certificates)");
        // The CA names go into the CertificateRequest (RFC 8446 section 4.3.2, certificate_authorities),
        // so a client holding several certificates can pick the right one.
        STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str());
        if (names) SSL_CTX_set_client_CA_list(ctx, names);
        context_.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
        // Session resumption with client verification needs a context id (else OpenSSL refuses to
        // resume, SSL_R_SESSION_ID_CONTEXT_UNINITIALIZED).
        static const unsigned char kId[] = "larmor-server";
        SSL_CTX_set_session_id_context(ctx, kId, sizeof kId - 1);
        verifies_clients_ = true;
    }
    ERR_clear_error();
}

std::string TlsContext::description() const {
    if (!verifies_clients_) return "TLS (certificate '" + files_.cert + "'; no client certificates asked for)";
    return "TLS (certificate '" + files_.cert + "'; client certificates required, CA file '" + files_.client_ca + "')";
}

}  // namespace larmor::server
