#pragma once
// The command-line flags of SecurityOptions (README, "Limits and security"), kept apart from main.cpp.
#include <string>

#include <CLI/CLI.hpp>

#include "server/access_list.h"
#include "server/security_options.h"

namespace larmor::server {

inline void add_security_options(CLI::App& app, SecurityOptions& o) {
    app.add_option("--allow", o.allow,
                   "Client networks allowed to connect, in CIDR notation (10.0.0.0/8, 127.0.0.1/32, fd00::/8; a "
                   "bare address is one host); repeatable or comma-separated; none: everyone")
        ->delimiter(',')
        ->check(CLI::Validator(
            [](std::string& value) -> std::string {
                try {
                    parse_network(value);
                    return {};
                } catch (const std::exception& e) {
                    return e.what();
                }
            },
            "CIDR"));
    auto* cert = app.add_option("--tls-cert", o.tls.cert,
                                "Speak TLS only, with this PEM certificate chain (server certificate first)")
                     ->check(CLI::ExistingFile);
    app.add_option("--tls-key", o.tls.key, "PEM private key of --tls-cert, unencrypted (default: in the --tls-cert file)")
        ->check(CLI::ExistingFile)
        ->needs(cert);
    app.add_option("--tls-client-ca", o.tls.client_ca,
                   "Require client certificates issued by these PEM CA certificates (mutual TLS)")
        ->check(CLI::ExistingFile)
        ->needs(cert);
    int handshake_s = static_cast<int>(o.tls_handshake_timeout.count());
    app.add_option_function<int>(
           "--tls-handshake-timeout", [&o](int s) { o.tls_handshake_timeout = std::chrono::seconds(s); },
           "Seconds a TLS client gets to complete its handshake (default " + std::to_string(handshake_s) + ")")
        ->check(CLI::Range(1, 3600));
}

}  // namespace larmor::server
