#include "session.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "connection.h"
#include "input_file.h"
#include "receiver.h"
#include "sender.h"

namespace larmor::client {

namespace {

struct Outcome {
    ReceiveResult received;
    std::string send_error;          // why sending stopped, empty when it went through
    bool send_error_local = false;   // our own failure (input file, config), not the connection's
    double seconds = 0;
    uint64_t bytes_sent = 0;
};

// Connects, runs `send` on this thread and the receiver on another, and records what went wrong.
// `send` gets the writer and a flag that turns true once the server has ended the session.
Outcome converse(const Options& opts, const std::function<void(SocketWriter&, const std::atomic<bool>&)>& send) {
    Outcome out;
    Receiver receiver(opts);  // an unusable PNG directory fails here, before we connect
    Connection conn(opts.address, opts.port, std::chrono::seconds(opts.timeout_s), opts.tls);
    if (!conn.tls_description().empty() && !opts.quiet)
        std::cerr << "larmor-client: " << conn.tls_description() << " with " << conn.peer() << "\n";
    const auto start = std::chrono::steady_clock::now();

    std::atomic<bool> server_done{false}, all_sent{false};
    std::thread reader([&] {
        SocketReader in(conn);
        out.received = receiver.run(in, server_done);
        // A broken session, or a server that ended it early, must not leave the sender blocked on a
        // peer that stopped reading. (After a clean CLOSE everything has been sent already.)
        if (!out.received.error.empty() || !all_sent.load()) conn.shutdown();
    });

    SocketWriter writer(conn);
    try {
        send(writer, server_done);
        all_sent.store(true);
    } catch (const std::system_error& e) {
        out.send_error = e.what();  // the connection broke: the receiver tells why, if it can
    } catch (const TimeoutError& e) {
        out.send_error = e.what();
    } catch (const std::exception& e) {
        // Our own failure: end the session, whatever the server made of half the data would be wrong.
        out.send_error = e.what();
        out.send_error_local = true;
        conn.shutdown();
    }
    reader.join();
    out.bytes_sent = writer.bytes_written();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

// The errors to report, the cause first: our own failure explains the broken connection after it;
// otherwise what the receiver saw (the server's CLOSE, a protocol error, EOF) explains a failed send.
std::vector<std::string> errors_of(const Outcome& out, const std::string& ended_early) {
    std::vector<std::string> errors;
    const ReceiveResult& r = out.received;
    if (out.send_error_local)
        errors.push_back(out.send_error);
    else if (r.closed && !ended_early.empty())
        errors.push_back(ended_early);
    else if (!r.error.empty())
        errors.push_back(r.error);
    else if (!out.send_error.empty())
        errors.push_back(out.send_error);
    if (r.server_error) errors.push_back("the server reported an error (see the [server] lines)");
    return errors;
}

int finish(const std::vector<std::string>& errors) {
    for (const auto& e : errors) std::cerr << "larmor-client: error: " << e << "\n";
    return errors.empty() ? 0 : 1;
}

}  // namespace

int run_stream(const Options& opts) {
    InputFile input(opts.in_file, opts.in_group);  // a bad file fails before we bother the server
    for (const std::string& var : opts.send_images)
        if (input.images(var) == 0)
            throw std::runtime_error("--send-images: no image variable '" + var + "' in group '" + opts.in_group +
                                     "' of '" + opts.in_file + "'");
    if (has_noise_dependency(input.header_xml()) && !opts.quiet)
        std::cerr << "larmor-client: note: the header lists a Noise dependency; Larmor takes the noise scan "
                     "in-stream, so no separate noise connection is made\n";

    SendStats stats;
    Outcome out = converse(opts, [&](SocketWriter& w, const std::atomic<bool>& server_done) {
        send_dataset(w, input, opts, server_done, stats);
    });
    const std::string ended_early =
        stats.complete ? std::string()
                       : "the server ended the session after " + std::to_string(stats.acquisitions) + " of " +
                             std::to_string(input.acquisitions()) + " acquisitions";
    if (!opts.quiet) {
        std::vector<std::string> parts;
        if (stats.images) parts.push_back(std::to_string(stats.images) + " images");
        parts.push_back(std::to_string(stats.acquisitions) + " acquisitions");
        if (stats.waveforms) parts.push_back(std::to_string(stats.waveforms) + " waveforms");
        std::string sent = parts.front();
        for (size_t i = 1; i < parts.size(); ++i) sent += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
        char line[256];
        std::snprintf(line, sizeof line, "sent %s (%.1f MB) in %.2f s, received %llu images", sent.c_str(),
                      static_cast<double>(out.bytes_sent) / 1e6, out.seconds,
                      static_cast<unsigned long long>(out.received.images));
        std::cout << line;
        if (out.received.dicom_files)
            std::cout << " and " << out.received.dicom_files << " DICOM files"
                      << (opts.dicom_dir.empty() ? " (not saved: no --dicom)" : " in " + opts.dicom_dir);
        std::cout << std::endl;
    }
    return finish(errors_of(out, ended_early));
}

int run_query(const Options& opts) {
    Outcome out = converse(opts, [&](SocketWriter& w, const std::atomic<bool>&) { send_query(w, *opts.query); });
    std::vector<std::string> errors = errors_of(out, "");
    if (errors.empty() && out.received.responses == 0)
        errors.push_back("no RESPONSE to the query '" + *opts.query + "'");
    return finish(errors);
}

}  // namespace larmor::client
