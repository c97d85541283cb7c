#pragma once
// Who may connect and how (README, "Limits and security"), as plain data: --allow, --tls-cert,
// --tls-key, --tls-client-ca, --tls-handshake-timeout. server/security_cli.h adds the flags.
#include <chrono>
#include <string>
#include <vector>

namespace larmor::server {

struct TlsFiles {
    std::string cert;       // PEM: the server certificate, then any intermediate CA certificates
    std::string key;        // PEM: its private key, unencrypted (empty: in `cert`)
    std::string client_ca;  // PEM: CA certificates client certificates must chain to (empty: no mTLS)
};

struct SecurityOptions {
    std::vector<std::string> allow;  // client networks in CIDR notation (access_list.h); empty: everyone
    TlsFiles tls;                    // tls.cert empty: plain TCP
    // A TLS client that has not finished its handshake by then is dropped, so a silent connection
    // holds a --max-sessions slot for this long at most.
    std::chrono::seconds tls_handshake_timeout{10};
};

}  // namespace larmor::server
