// larmor-client: streams an ISMRMRD HDF5 dataset to a Larmor (or Gadgetron) server and stores the
// images it sends back. Same flags as Gadgetron's gadgetron_ismrmrd_client.
#include <cstdlib>
#include <exception>
#include <iostream>

#include "hdf5_guard.h"
#include "options.h"
#include "session.h"

int main(int argc, char** argv) {
    using namespace larmor::client;
    Options opts;
    if (auto code = parse_options(argc, argv, opts)) return *code;
    silence_ismrmrd_error_printing();
    // ISMRMRD 1.8 opens every dataset read-write, and HDF5 >= 1.10 then takes an exclusive lock, so a
    // second client streaming the same scan (a site replaying one file to several servers) fails to
    // open it. The client never writes its input and each output file is its own; a user who sets the
    // variable keeps their choice.
    ::setenv("HDF5_USE_FILE_LOCKING", "FALSE", 0);
    try {
        return opts.query ? run_query(opts) : run_stream(opts);
    } catch (const std::exception& e) {
        std::cerr << "larmor-client: error: " << e.what() << "\n";
        return 1;
    }
}
