#pragma once
// The client's half of a session: what it sends, in the order protocol.md prescribes.
#include <atomic>
#include <cstdint>
#include <string>

#include "connection.h"
#include "input_file.h"
#include "options.h"

namespace larmor::client {

struct SendStats {
    uint64_t images = 0;  // --send-images
    uint64_t acquisitions = 0;
    uint64_t waveforms = 0;
    bool complete = false;  // everything was sent, CLOSE included
};

// CONFIG_FILE (-c) or CONFIG_SCRIPT (-C), PARAMETER_SCRIPT, the images of every --send-images variable
// (in the order given), every acquisition with the waveforms interleaved by time stamp, then CLOSE.
// Stops early, without CLOSE, once `stop` is set (the server has ended the session). Counts go into
// stats as they happen, so they survive an exception.
void send_dataset(SocketWriter& out, InputFile& in, const Options& opts, const std::atomic<bool>& stop,
                  SendStats& stats);

// QUERY with the key, then CLOSE.
void send_query(SocketWriter& out, const std::string& key);

}  // namespace larmor::client
