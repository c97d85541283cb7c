#pragma once
// The client's other half: everything the server sends, read on its own thread until CLOSE.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "wire/codec.h"
#include "image_output.h"
#include "options.h"
#include "server_text.h"

namespace larmor::client {

struct ReceiveResult {
    uint64_t images = 0;
    uint64_t dicom_files = 0;
    uint64_t responses = 0;
    bool closed = false;        // the server sent CLOSE
    bool server_error = false;  // a TEXT from the server (not a progress line) contained "ERROR"
    std::string error;          // what ended the session abnormally (protocol, socket, output), or empty
};

class Receiver {
public:
    explicit Receiver(const Options& opts);

    // Reads and handles messages until CLOSE or an error; sets `done` before returning either way.
    // IMAGE -> HDF5 (and PNG), DICOM_WITHNAME -> a file in --dicom DIR, TEXT -> stderr "[server] ..." (progress lines: see server_text.h),
    // RESPONSE -> stdout.
    ReceiveResult run(wire::ByteReader& in, std::atomic<bool>& done);

private:
    void handle(wire::WireMessage& msg, ReceiveResult& result);

    const Options& opts_;
    Hdf5ImageWriter hdf5_;
    std::unique_ptr<PngImageWriter> png_;
    std::unique_ptr<DicomFileWriter> dicom_;
    ServerTextDisplay texts_;
};

}  // namespace larmor::client
