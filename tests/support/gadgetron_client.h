#pragma once
// The real gadgetron_ismrmrd_client (Gadgetron HEAD and v4.1), built from the sources in
// ../shared/tools/gadgetron-client, for compatibility tests. It is a peer to test against: tests that
// use it skip when ../shared is absent.
#include <chrono>
#include <string>
#include <vector>

#include "tests/support/server_process.h"

namespace larmor::test {

// ../shared/tools/gadgetron-client next to the checkout, and whether its build script is there.
std::string gadgetron_client_dir();
bool gadgetron_client_available();

struct GadgetronClients {
    std::string head;  // gadgetron_ismrmrd_client_head
    std::string v41;   // gadgetron_ismrmrd_client_v41
};

// Builds both clients once into <source>/build-gtclient ($LARMOR_GTCLIENT_DIR when set), shared by every
// build folder, with the shared build script (about 15 s the first time; tests running in parallel, in
// any build, wait for each other on a lock file). Throws std::runtime_error
// with the script's output when the build fails.
GadgetronClients build_gadgetron_clients();

struct ClientRun : ProcessResult {
    std::vector<std::string> raced;  // the output of each run lost to the connect race, before this one
};

// Runs a client with `args` (HDF5 file locking off, so parallel tests may read one file). Both clients
// have a connect race (../shared/tools/gadgetron-client/README.md): now and then one misses its own
// "connected" signal, waits its 10 s connect timeout and fails, more often on a loaded machine. A run
// that took at least that long and failed or wrote no output file (a slow server's good run writes
// one) is run again, up to three times.
ClientRun run_gadgetron_client(const std::string& binary, const std::vector<std::string>& args,
                               std::chrono::seconds timeout = std::chrono::seconds(300));

}  // namespace larmor::test
