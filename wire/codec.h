#pragma once
// Gadgetron / MRD streaming wire protocol (../shared/docs/protocol.md): framing, encode and decode
// of every message. Shared by larmor-server and larmor-client, and links ISMRMRD only. Nothing here
// trusts a length field: every variable-length part is checked against Limits before anything is
// allocated.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "wire/messages.h"

namespace larmor::wire {

enum MessageId : uint16_t {
    kConfigFile = 1,
    kConfigScript = 2,
    kParameterScript = 3,
    kClose = 4,
    kText = 5,
    kQuery = 6,
    kResponse = 7,
    kAcquisition = 1008,
    kDicomWithName = 1018,
    kDependencyQuery = 1019,
    kImage = 1022,
    kWaveform = 1026,
};

// Sizes on the wire of the ISMRMRD 1.8 structs.
constexpr size_t kAcquisitionHeaderBytes = 340;
constexpr size_t kImageHeaderBytes = 198;
constexpr size_t kWaveformHeaderBytes = 40;
constexpr size_t kConfigFileNameBytes = 1024;

// Bounds on what a peer may make us allocate. Defaults suit clinical data with a wide margin.
struct Limits {
    uint64_t max_text_bytes = 64u << 20;        // config scripts, XML header, text, query keys
    uint32_t max_channels = kMaxChannels;
    uint32_t max_samples = 65535;               // uint16 number_of_samples
    uint32_t max_trajectory_dimensions = 4;
    uint64_t max_image_bytes = 2ull << 30;      // one image's pixels
    uint64_t max_meta_bytes = 64u << 20;
};

// A protocol violation by the peer. The message names the offending value.
class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A message the receiver refuses although it could frame it: it was read to its very end, so the
// stream is still in step and the receiver may go on reading. The server then drops everything up to
// the client's CLOSE and answers there, so a client that is still uploading never meets a closed socket
// (protocol.md, "Known weaknesses of Gadgetron 4.1"). Thrown today for compressed acquisitions that
// cannot be decoded (ZFP, or an NHLBI buffer that does not fit its acquisition header).
class RejectedMessage : public ProtocolError {
public:
    RejectedMessage(uint16_t id, const std::string& what) : ProtocolError(what), id_(id) {}
    uint16_t id() const { return id_; }  // the refused message's id (ACQUISITION: one more acquisition received)

private:
    uint16_t id_;
};

// End of stream before a message was complete (or before the next message started).
class EndOfStream : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ConfigFile { std::string name; };
struct ConfigScript { std::string text; };
struct ParameterScript { std::string xml; };
struct Close {};
struct Query { uint64_t reserved = 0; uint64_t correlation_id = 0; std::string key; };
struct Response { uint64_t correlation_id = 0; std::string text; };
struct DependencyQuery { std::string meta_xml; };

using WireMessage = std::variant<ConfigFile, ConfigScript, ParameterScript, Close, Text, Query, Response,
                                 Acquisition, Waveform, Image, DependencyQuery, DicomWithName>;

// Source of bytes: read exactly n bytes or throw (EndOfStream at a clean EOF, other exceptions for
// timeouts and socket errors).
class ByteReader {
public:
    virtual ~ByteReader() = default;
    virtual void read_exact(void* dst, size_t n) = 0;
};

class ByteWriter {
public:
    virtual ~ByteWriter() = default;
    virtual void write_all(const void* src, size_t n) = 0;
};

// A message's variable part as its fixed part announces it, before any of it is read.
struct PayloadInfo {
    uint16_t id = 0;
    uint64_t bytes = 0;  // what it takes once received and decoded
    const ISMRMRD::ISMRMRD_AcquisitionHeader* acquisition = nullptr;  // ACQUISITION only
};

// "ACQUISITION (scan_counter 12, 384 samples x 14 channels)", "PARAMETER_SCRIPT of 4096 bytes": how
// refusals name the message.
std::string describe(const PayloadInfo& p);

// What the receiver makes of a payload before it is read (the server: by its session's state and
// memory budget). Keep reads it; Skip reads and drops it through a small buffer, and the message comes
// back without it (Received::skipped: its header says more than it holds); Refuse reads and drops it
// too, then read_message throws RejectedMessage(reason), the stream still framed. Either way a payload
// that is not kept costs no memory however large it was announced.
struct PayloadVerdict {
    enum Kind { Keep, Skip, Refuse };
    Kind kind = Keep;
    std::string reason;  // Refuse
};

class PayloadGate {
public:
    virtual ~PayloadGate() = default;
    // Called once per message with a variable part, after its fixed part and length fields.
    virtual PayloadVerdict admit(const PayloadInfo& payload) = 0;
};

struct Received {
    WireMessage message;
    bool skipped = false;  // the gate said Skip: the payload was dropped unread
};

// Reads one whole message. Throws EndOfStream when the stream ends before its id, ProtocolError on
// an unknown id, a length over Limits or a truncated message, RejectedMessage (a ProtocolError with
// the stream still framed) on compressed data it cannot decode or a payload the gate refused.
// NHLBI-compressed acquisitions (flag 54, wire/nhlbi.h) come back decoded, with flag 54 cleared:
// their data are plain samples now. Without a gate every payload is kept.
Received read_message(ByteReader& in, const Limits& limits, PayloadGate& gate);
WireMessage read_message(ByteReader& in, const Limits& limits);

// Encodes one message, id included, into bytes ready for the socket.
std::vector<uint8_t> encode(const WireMessage& msg);

// Convenience: encode + write_all.
void write_message(ByteWriter& out, const WireMessage& msg);

// Name of a message id for logs ("ACQUISITION(1008)"), "unknown(N)" otherwise.
std::string id_name(uint16_t id);

// The id a message goes on the wire with (for logs: id_name(message_id(msg))).
uint16_t message_id(const WireMessage& msg);

}  // namespace larmor::wire
