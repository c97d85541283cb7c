#include "tests/support/test_pki.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "tests/support/server_process.h"

namespace larmor::test {
namespace {

void openssl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/openssl"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv, std::chrono::seconds(60));
    if (r.exit_code != 0) {
        std::string line;
        for (const auto& a : argv) line += a + " ";
        throw std::runtime_error("test PKI: '" + line + "' failed (" + std::to_string(r.exit_code) + "):\n" + r.output);
    }
}

}  // namespace

TestPki::TestPki() {
    char dir[] = "/tmp/larmor-pki-XXXXXX";
    if (!::mkdtemp(dir)) throw std::runtime_error("test PKI: mkdtemp failed");
    dir_ = dir;
    try {
        make_ca("ca");
        make_ca("client_ca");
        make_ca("other_ca");
        make_cert("server", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
        make_cert("misnamed", "ca", "subjectAltName=DNS:elsewhere.invalid\nextendedKeyUsage=serverAuth\n");
        make_cert("client", "client_ca", "extendedKeyUsage=clientAuth\n");
        make_cert("stranger", "other_ca", "extendedKeyUsage=clientAuth\n");
        openssl({"pkey", "-in", key("server"), "-aes256", "-passout", "pass:secret", "-out", key("server_encrypted")});
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        throw;
    }
}

TestPki::~TestPki() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

// P-256 keys: generated in milliseconds, unlike RSA.
void TestPki::make_ca(const std::string& name) {
    openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key(name),
             "-out", cert(name), "-days", "2", "-subj", "/CN=Larmor test " + name, "-addext",
             "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
}

void TestPki::make_cert(const std::string& name, const std::string& ca, const std::string& extensions) {
    const std::string csr = dir_ + "/" + name + ".csr", ext = dir_ + "/" + name + ".ext";
    openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key(name), "-out", csr,
             "-subj", "/CN=" + (name == "server" ? std::string("localhost") : name)});
    std::ofstream(ext) << extensions;
    openssl({"x509", "-req", "-in", csr, "-CA", cert(ca), "-CAkey", key(ca), "-CAcreateserial", "-out", cert(name),
             "-days", "2", "-extfile", ext});
}

}  // namespace larmor::test
