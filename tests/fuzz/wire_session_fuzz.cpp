// Fuzz target: one connection's whole byte stream through the wire decoder, read as
// Session::serve() reads it (server/session.cpp): message after message with the server's default
// Limits, going on after a RejectedMessage (still framed: an undecodable NHLBI or ZFP acquisition),
// ending at the first other ProtocolError or at the end of the bytes. It does not stop at CLOSE:
// larmor-client decodes the server's replies with the same function, so every message type counts.
// Each decoded message must also encode again and decode back to the same bytes, the contract the
// client and the tests rely on.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wire/codec.h"

namespace {

using namespace larmor::wire;

// The fuzzer's bytes as a stream that ends like a socket: what there is, then EndOfStream.
class InputReader final : public ByteReader {
public:
    InputReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    void read_exact(void* dst, size_t n) override {
        const size_t got = n <= size_ - pos_ ? n : size_ - pos_;
        if (got > 0) std::memcpy(dst, data_ + pos_, got);
        pos_ += got;
        if (got < n) throw EndOfStream("input ended");
    }
    bool at_end() const { return pos_ == size_; }

private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
};

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "wire_session: %s\n", what.c_str());
    std::abort();
}

void check_round_trip(const WireMessage& msg, const Limits& limits) {
    std::vector<uint8_t> bytes;
    try {
        bytes = encode(msg);
    } catch (const std::exception& e) {
        fail(id_name(message_id(msg)) + " was decoded but cannot be encoded: " + e.what());
    }
    InputReader again(bytes.data(), bytes.size());
    WireMessage decoded;
    try {
        decoded = read_message(again, limits);
    } catch (const std::exception& e) {
        fail(id_name(message_id(msg)) + " does not decode from its own encoding: " + e.what());
    }
    if (!again.at_end()) fail(id_name(message_id(msg)) + ": bytes left over after decoding its encoding");
    if (encode(decoded) != bytes) fail(id_name(message_id(msg)) + ": encode(decode(encode(m))) != encode(m)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    InputReader in(data, size);
    const Limits limits;  // what larmor-server uses (ServerOptions::limits)
    for (;;) {
        WireMessage msg;
        try {
            msg = read_message(in, limits);
        } catch (const RejectedMessage&) {
            continue;  // read to its end: the session drains on to the client's CLOSE
        } catch (const ProtocolError&) {
            return 0;  // the session replies and ends
        } catch (const EndOfStream&) {
            return 0;
        }
        check_round_trip(msg, limits);
    }
}
