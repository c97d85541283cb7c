// larmor-client: streams an ISMRMRD HDF5 dataset to a Larmor (or Gadgetron) server and stores the
// images it sends back. Same flags as Gadgetron's gadgetron_ismrmrd_client.
#include <exception>
#include <iostream>

#include "tools/client/hdf5_guard.h"
#include "tools/client/options.h"
#include "tools/client/session.h"

int main(int argc, char** argv) {
    using namespace larmor::client;
    Options opts;
    if (auto code = parse_options(argc, argv, opts)) return *code;
    silence_ismrmrd_error_printing();
    try {
        return opts.query ? run_query(opts) : run_stream(opts);
    } catch (const std::exception& e) {
        std::cerr << "larmor-client: error: " << e.what() << "\n";
        return 1;
    }
}
