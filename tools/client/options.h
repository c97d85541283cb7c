#pragma once
// Command line of larmor-client: the flags and meanings of Gadgetron's gadgetron_ismrmrd_client, so
// existing scripts keep working, plus --png and a seconds-based --timeout.
#include <optional>
#include <string>
#include <vector>

#include "tls_client.h"

namespace larmor::client {

struct Options {
    std::string address = "localhost";
    std::string port = "9002";
    std::string in_file;                 // -f: ISMRMRD HDF5 to stream
    std::string in_group = "/dataset";   // -g
    std::string config = "default.xml";  // -c: chain name, sent as CONFIG_FILE
    std::string config_local;            // -C: chain file, sent as CONFIG_SCRIPT (wins over -c)
    std::string out_file = "out.h5";     // -o
    std::string out_group;               // -G: defaults to the date and time, like Gadgetron
    std::optional<std::string> query;    // -Q: send a QUERY with this key instead of data
    std::vector<std::string> send_images;  // --send-images: image variables of the input group sent first
    std::string png_dir;                 // --png: also write every image as PNG here
    std::string dicom_dir;               // --dicom: write DICOM files the server sends here
    unsigned timeout_s = 600;            // -t: seconds without traffic before giving up
    bool quiet = false;                  // -q
    TlsOptions tls;                      // --tls, --tls-ca, --tls-cert, --tls-key
};

// Parses argv. Returns the exit code to end with (help, usage error), or nothing to go on.
std::optional<int> parse_options(int argc, char** argv, Options& opts);

// "2024-03-01 13:45:07": Gadgetron's default output group name.
std::string date_time_string();

}  // namespace larmor::client
