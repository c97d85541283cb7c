#pragma once
// A throw-away public-key infrastructure for TLS tests, made with Debian's `openssl` command in a
// private temporary folder (removed with the object): nothing is downloaded or kept.
//   ca        the server's CA; `server` (CN localhost, SAN DNS:localhost, IP:127.0.0.1) is issued by it
//   client_ca the CA larmor-server --tls-client-ca trusts; `client` is issued by it
//   other_ca  a CA nobody trusts; `stranger` (a client certificate) is issued by it
//   misnamed  a server certificate from `ca` for DNS:elsewhere.invalid only (host name checks)
//   key("server_encrypted") the server's key under the passphrase "secret"
#include <string>

namespace larmor::test {

class TestPki {
public:
    // Throws std::runtime_error with openssl's output when a step fails.
    TestPki();
    ~TestPki();
    TestPki(const TestPki&) = delete;
    TestPki& operator=(const TestPki&) = delete;

    const std::string& dir() const { return dir_; }
    // <dir>/<name>.pem (certificate) and <dir>/<name>.key (its unencrypted key).
    std::string cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
    std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

private:
    void make_ca(const std::string& name);
    void make_cert(const std::string& name, const std::string& ca, const std::string& extensions);
    std::string dir_;
};

}  // namespace larmor::test
