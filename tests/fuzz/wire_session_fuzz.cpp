// Fuzz target: one connection's whole byte stream through the wire decoder, read as
// Session::serve() reads it (server/session.cpp): message after message with the server's default
// Limits, going on after a RejectedMessage (still framed: an undecodable NHLBI or ZFP acquisition),
// ending at the first other ProtocolError or at the end of the bytes. It does not stop at CLOSE:
// larmor-client decodes the server's replies with the same function, so every message type counts.
// Each decoded message must also encode again and decode back to the same bytes, the contract the
// client and the tests rely on. The stream is then read a second time through a payload gate that
// keeps, skips or refuses each message in turn, as the server's sessions do (server/session.cpp): a
// payload that is not kept must be read to exactly the same end, so the stream stays in step.

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
    size_t pos() const { return pos_; }

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

// Keeps, skips and refuses the payloads it is asked about in turn.
class RotatingGate final : public PayloadGate {
public:
    PayloadVerdict admit(const PayloadInfo&) override {
        switch (calls_++ % 3) {
            case 0: return {PayloadVerdict::Keep, {}};
            case 1: return {PayloadVerdict::Skip, {}};
            default: return {PayloadVerdict::Refuse, "refused by the fuzzer's gate"};
        }
    }

private:
    unsigned calls_ = 0;
};

// Where each message of the stream ends, in order, up to the first error that ends a session (the
// last entry is that point, marked by `ended`).
struct Framing {
    std::vector<size_t> ends;
    bool ended_by_error = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Limits limits;  // what larmor-server uses (ServerOptions::limits)
    Framing plain, gated;
    {
        InputReader in(data, size);
        for (;;) {
            WireMessage msg;
            try {
                msg = read_message(in, limits);
            } catch (const RejectedMessage&) {
                plain.ends.push_back(in.pos());
                continue;  // read to its end: the session drains on to the client's CLOSE
            } catch (const ProtocolError&) {
                plain.ended_by_error = true;  // the session replies and ends
                break;
            } catch (const EndOfStream&) {
                break;
            }
            plain.ends.push_back(in.pos());
            check_round_trip(msg, limits);
        }
    }
    {
        InputReader in(data, size);
        RotatingGate gate;
        for (;;) {
            try {
                const Received r = read_message(in, limits, gate);
                if (!r.skipped) check_round_trip(r.message, limits);
            } catch (const RejectedMessage&) {
            } catch (const ProtocolError&) {
                gated.ended_by_error = true;
                break;
            } catch (const EndOfStream&) {
                break;
            }
            gated.ends.push_back(in.pos());
        }
    }
    if (plain.ends != gated.ends || plain.ended_by_error != gated.ended_by_error)
        fail("a gated read left the stream at another place than a plain one (" + std::to_string(gated.ends.size()) +
             " against " + std::to_string(plain.ends.size()) + " messages)");
    return 0;
}
