// Faults injected on purpose (core/fault_injection.h) and configuration reloads: the session that
// meets a failed allocation or a broken CUDA backend reports it (or falls back to the CPU where its
// chain allows), and the server goes on serving the next session with correct images.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <ismrmrd/ismrmrd.h>

#include "core/backend.h"
#include "tests/support/cartesian_header.h"
#include "tests/support/server_process.h"
#include "wire/codec.h"

namespace larmor {
namespace {

using namespace std::chrono_literals;
using test::ServerProcess;
using test::WireConnection;

const std::string kHeader = test::cartesian_header_xml();

struct Result {
    std::string texts;
    std::vector<uint8_t> pixels;
    size_t images = 0;
};

// 16 lines of 32 samples x 2 coils through `config` (a CONFIG_FILE name, or a script when it has '{').
Result run_session(uint16_t port, const std::string& config) {
    WireConnection c(port);
    if (config.find('{') != std::string::npos) c.send(wire::ConfigScript{config});
    else c.send(wire::ConfigFile{config});
    c.send(wire::ParameterScript{kHeader});
    for (uint16_t line = 0; line < 16; ++line) {
        wire::Acquisition a;
        a.head.version = 1;
        a.head.scan_counter = line;
        a.head.number_of_samples = 32;
        a.head.active_channels = a.head.available_channels = 2;
        a.head.center_sample = 16;
        a.head.idx.kspace_encode_step_1 = line;
        if (line == 15) a.head.flags |= uint64_t{1} << (ISMRMRD::ISMRMRD_ACQ_LAST_IN_SLICE - 1);
        a.data.resize(64);
        for (size_t i = 0; i < a.data.size(); ++i)
            a.data[i] = std::complex<float>(float((i * 3 + line) % 7) - 3.f, float((i + 5 * line) % 5) - 2.f);
        c.send(a);
    }
    c.send(wire::Close{});
    Result r;
    for (const auto& m : c.receive_until_close()) {
        if (const auto* t = std::get_if<wire::Text>(&m)) r.texts += t->text;
        if (const auto* im = std::get_if<wire::Image>(&m)) {
            ++r.images;
            r.pixels.insert(r.pixels.end(), im->pixels.begin(), im->pixels.end());
        }
    }
    return r;
}

bool has_error(const Result& r) { return r.texts.find("ERROR") != std::string::npos; }

// A server started with LARMOR_FAULT_INJECTION set to `faults` (only it: the variable is unset again).
std::unique_ptr<ServerProcess> server_with_faults(const std::string& faults, std::vector<std::string> args) {
    ::setenv("LARMOR_FAULT_INJECTION", faults.c_str(), 1);
    auto s = std::make_unique<ServerProcess>(args);
    ::unsetenv("LARMOR_FAULT_INJECTION");
    return s;
}

TEST(FaultInjection, FailedHostAllocationIsReportedAndTheNextSessionIsCorrect) {
    const std::vector<uint8_t> reference = [] {
        ServerProcess clean({"--backend", "cpu"});
        return run_session(clean.port(), "cartesian").pixels;
    }();
    ASSERT_FALSE(reference.empty());
    auto server = server_with_faults("host-alloc:3", {"--backend", "cpu"});
    const Result hit = run_session(server->port(), "cartesian");
    EXPECT_NE(hit.texts.find("ERROR: std::bad_alloc"), std::string::npos) << hit.texts;
    EXPECT_EQ(hit.images, 0u);
    for (int i = 0; i < 3; ++i) {
        const Result next = run_session(server->port(), "cartesian");
        EXPECT_FALSE(has_error(next)) << next.texts;
        EXPECT_EQ(next.pixels, reference);
    }
    EXPECT_TRUE(server->running());
}

TEST(FaultInjection, FailedDeviceAllocationIsReportedAndTheNextSessionSucceeds) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    auto server = server_with_faults("device-alloc:4", {"--backend", "cuda"});
    const Result hit = run_session(server->port(), "cartesian");
    EXPECT_NE(hit.texts.find("out of GPU memory on device 0"), std::string::npos) << hit.texts;
    EXPECT_NE(hit.texts.find("injected fault"), std::string::npos) << hit.texts;
    const Result next = run_session(server->port(), "cartesian");
    EXPECT_FALSE(has_error(next)) << next.texts;
    EXPECT_EQ(next.images, 1u);
}

TEST(FaultInjection, BrokenCudaBackendFallsBackToTheCpuWhereTheChainAllowsIt) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    const std::vector<uint8_t> reference = [] {
        ServerProcess clean({"--backend", "cpu"});
        return run_session(clean.port(), "cartesian").pixels;
    }();
    auto server = server_with_faults("cuda-backend", {});
    const Result fallback = run_session(server->port(), "cartesian");  // cpu_fallback: true
    EXPECT_FALSE(has_error(fallback)) << fallback.texts;
    EXPECT_NE(fallback.texts.find("injected fault (LARMOR_FAULT_INJECTION=cuda-backend): running on the CPU backend "
                                  "instead (the chain sets cpu_fallback)"),
              std::string::npos)
        << fallback.texts;
    EXPECT_EQ(fallback.pixels, reference);
    const Result strict = run_session(server->port(), "gadget { accumulate_trigger {} } gadget { fft {} }");
    EXPECT_NE(strict.texts.find("[Backend] ERROR: cannot create the cuda backend"), std::string::npos) << strict.texts;
}

TEST(FaultInjection, FullDeviceBudgetFallsBackToTheCpu) {
    if (!cuda_available()) GTEST_SKIP() << "no usable CUDA device";
    ServerProcess server({"--session-device-memory-limit", "1KiB"});
    const Result r = run_session(server.port(), "cartesian");
    EXPECT_FALSE(has_error(r)) << r.texts;
    EXPECT_NE(r.texts.find("session memory budget on CUDA device"), std::string::npos) << r.texts;
    EXPECT_NE(r.texts.find("running on the CPU backend instead"), std::string::npos) << r.texts;
    EXPECT_EQ(r.images, 1u);
}

// SIGHUP: chains are read again; a file that no longer validates keeps its previous version.
TEST(ConfigReload, SighupAddsChangesAndRemovesChainsKeepingTheLastGoodVersion) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("larmor-reload-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; };
    write("a.pbtxt", "gadget { acquisition_counter {} }");
    ServerProcess server({"--backend", "cpu", "--config-dir", dir.string()});
    EXPECT_NE(run_session(server.port(), "a").texts.find("AcquisitionCounter: 16 acquisitions"), std::string::npos);
    EXPECT_NE(run_session(server.port(), "b").texts.find("unknown chain 'b'"), std::string::npos);

    write("b.pbtxt", "gadget { accumulate_trigger {} } gadget { fft {} } gadget { coil_combine {} } gadget { image_finish {} }");
    write("a.pbtxt", "gadget { no_such_gadget {} }");  // a broken edit
    const auto reloads = [&] {
        size_t n = 0;
        for (size_t at = server.log().find("reloaded"); at != std::string::npos; at = server.log().find("reloaded", at + 1))
            ++n;
        return n;
    };
    const auto reload = [&](size_t expected) {
        ::kill(server.pid(), SIGHUP);
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        while (reloads() < expected && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
        ASSERT_EQ(reloads(), expected) << server.log();
    };
    reload(1);
    EXPECT_EQ(run_session(server.port(), "b").images, 1u) << "a new chain is offered after SIGHUP";
    EXPECT_NE(run_session(server.port(), "a").texts.find("AcquisitionCounter: 16 acquisitions"), std::string::npos)
        << "the broken edit must not replace the working chain";
    EXPECT_NE(server.log().find("SIGHUP: chain a: "), std::string::npos) << server.log();
    EXPECT_NE(server.log().find("(the previous version stays in use)"), std::string::npos) << server.log();

    fs::remove(dir / "b.pbtxt");
    reload(2);
    EXPECT_NE(run_session(server.port(), "b").texts.find("unknown chain 'b'"), std::string::npos);
    EXPECT_TRUE(server.running());
    fs::remove_all(dir);
}

}  // namespace
}  // namespace larmor
