#include "tests/support/gadgetron_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>

namespace larmor::test {
namespace {

bool is_file(const std::string& path) {
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

constexpr auto kConnectTimeout = std::chrono::seconds(10);  // the clients' default -t 10000

}  // namespace

std::string gadgetron_client_dir() { return std::string(LARMOR_SHARED_DATA_DIR) + "/../tools/gadgetron-client"; }

bool gadgetron_client_available() { return is_file(gadgetron_client_dir() + "/build.sh"); }

GadgetronClients build_gadgetron_clients() {
    static std::mutex m;
    const std::lock_guard<std::mutex> lock(m);
    // Beside the build folders rather than in one: the clients do not depend on Larmor's build flags,
    // so the normal, ASan and TSan builds of CI share one build of them (each took its turn before).
    const char* dir = std::getenv("LARMOR_GTCLIENT_DIR");
    const std::string out = dir && *dir ? std::string(dir) : std::string(LARMOR_SOURCE_DIR) + "/build-gtclient";
    GadgetronClients c{out + "/gadgetron_ismrmrd_client_head", out + "/gadgetron_ismrmrd_client_v41"};
    static bool built = false;
    if (built) return c;
    std::error_code ec;
    std::filesystem::create_directories(out, ec);  // for the lock file; build.sh fills it
    // flock(1): two test processes never build into the same folder at once, and none takes a binary
    // another is still linking (the script returns at once when both are there).
    const ProcessResult r = run_process(
        {"/usr/bin/flock", out + "/.lock", "/bin/bash", gadgetron_client_dir() + "/build.sh", out},
        std::chrono::seconds(600));
    if (r.exit_code != 0 || !is_file(c.head) || !is_file(c.v41))
        throw std::runtime_error("building the Gadgetron clients failed (exit " + std::to_string(r.exit_code) +
                                 "):\n" + r.output);
    built = true;
    return c;
}

ClientRun run_gadgetron_client(const std::string& binary, const std::vector<std::string>& args,
                               std::chrono::seconds timeout) {
    ::setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);
    std::vector<std::string> argv{binary};
    argv.insert(argv.end(), args.begin(), args.end());
    // The client appends to its output file: a run that is repeated starts from no file, or a slow
    // but complete run (sanitizer builds take longer than the timeout) would leave its images twice.
    std::string out_file;
    for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "-o") out_file = args[i + 1];
    ClientRun run;
    for (int attempt = 0;; ++attempt) {
        if (attempt > 0 && !out_file.empty()) ::unlink(out_file.c_str());
        const auto t0 = std::chrono::steady_clock::now();
        static_cast<ProcessResult&>(run) = run_process(argv, timeout);
        // Every run here takes far less than the connect timeout unless it raced or the server is slow
        // (CPU CG-SENSE under TSan takes 10 s). A raced run either fails or exits 0 with nothing sent
        // (the client then finds its socket closed before it starts), so a long run that wrote its
        // output file is a slow one, not a raced one (2026-11-28: a slow but good run was taken for a
        // race and run again until a real race used up the tries).
        const bool long_run = !run.timed_out && std::chrono::steady_clock::now() - t0 >= kConnectTimeout;
        const bool wrote_output = !out_file.empty() && is_file(out_file);
        const bool raced = long_run && (run.exit_code != 0 || !wrote_output);
        if (!raced || attempt == 3) return run;
        run.raced.push_back(run.output);
    }
}

}  // namespace larmor::test
