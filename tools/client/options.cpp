#include "options.h"

#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

namespace larmor::client {

std::string date_time_string() {
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::ostringstream s;
    s << std::put_time(&local, "%Y-%m-%d %H:%M:%S");
    return s.str();
}

std::optional<int> parse_options(int argc, char** argv, Options& opts) {
    CLI::App app{"larmor-client: streams an ISMRMRD HDF5 dataset to a Larmor (or Gadgetron) server and writes "
                 "the returned images to an ISMRMRD HDF5 file (and PNGs)."};
    app.footer(
        "Exit status: 0 when the session ended cleanly (CLOSE from the server, no ERROR text, output written),\n"
        "1 otherwise (unreadable input, connection refused or lost, an error from the server, unwritable output).\n"
        "Examples:\n"
        "  larmor-client -a recon.hospital.local -p 9002 -f scan.h5 -c cartesian -o images.h5 --png png/\n"
        "  larmor-client -p 9002 -f scan.h5 -c cartesian_dicom --dicom dicom/    (DICOM files for PACS)\n"
        "  larmor-client -p 9002 -f scan.h5 -C mychain.pbtxt -o out.h5           (a local chain file)\n"
        "  larmor-client -p 9002 -Q larmor::status                                (ask the server, send no data)\n"
        "Manual: the README's section \"larmor-client(1)\".");
    opts.out_group = date_time_string();
    app.add_option("-a,--address", opts.address, "server host name or address")->capture_default_str();
    app.add_option("-p,--port", opts.port, "server port")->capture_default_str();
    app.add_option("-f,--filename", opts.in_file, "input ISMRMRD HDF5 file");
    app.add_option("-g,--in-group", opts.in_group, "input group in the HDF5 file")->capture_default_str();
    app.add_option("-c,--config", opts.config, "name of a chain known to the server (CONFIG_FILE)")
        ->capture_default_str();
    app.add_option("-C,--config-local", opts.config_local, "local chain file sent to the server (CONFIG_SCRIPT)")
        ->check(CLI::ExistingFile);
    // --outfile is the spelling of gadgetron_ismrmrd_client.
    app.add_option("-o,--out,--outfile", opts.out_file, "output ISMRMRD HDF5 file")->capture_default_str();
    app.add_option("-G,--out-group", opts.out_group, "output group (default: the current date and time)");
    app.add_option("-Q,--query", opts.query, "send a QUERY with this key, print the RESPONSE, send no data");
    app.add_option("--send-images", opts.send_images,
                   "send every image stored under <in-group>/VAR of the input file as IMAGE messages after the "
                   "header, before the first acquisition (e.g. 'reference', the anatomical reference larmor-phantom "
                   "--reference-image writes); repeatable, sent in the order given")
        ->type_name("VAR")
        ->allow_extra_args(false);
    app.add_option("--png", opts.png_dir, "also write every returned image as 8-bit greyscale PNG into DIR");
    app.add_option("--dicom", opts.dicom_dir,
                   "write the DICOM files the server sends (chains with DicomFinish, e.g. cartesian_dicom) into DIR");
    app.add_option("-t,--timeout", opts.timeout_s, "seconds without traffic before giving up")
        ->capture_default_str()
        ->check(CLI::Range(1u, 86400u * 7));
    app.add_flag("-q,--quiet", opts.quiet, "print only errors and server messages");
    app.add_flag("--tls", opts.tls.enabled,
                 "connect with TLS, verifying the server's certificate and that it names the -a host");
    app.add_option("--tls-ca", opts.tls.ca, "PEM CA certificates to verify the server with (default: the system's); "
                                            "implies --tls")
        ->check(CLI::ExistingFile);
    auto* cert = app.add_option("--tls-cert", opts.tls.cert,
                                "PEM client certificate chain, for servers that require one (mutual TLS); implies --tls")
                     ->check(CLI::ExistingFile);
    app.add_option("--tls-key", opts.tls.key, "unencrypted PEM key of --tls-cert (default: in the --tls-cert file)")
        ->check(CLI::ExistingFile)
        ->needs(cert);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (!opts.tls.ca.empty() || !opts.tls.cert.empty()) opts.tls.enabled = true;
    if (!opts.query && opts.in_file.empty()) {
        std::cerr << "larmor-client: error: no input: give -f FILE (or -Q KEY to query the server)\n"
                  << "Run with --help for more information.\n";
        return 2;
    }
    return std::nullopt;
}

}  // namespace larmor::client
