#pragma once
// In-memory ByteReader / ByteWriter for tests of the wire codec and of anything that speaks it
// (sessions, readers, writers): feed recorded bytes in, collect encoded bytes out.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "wire/codec.h"

namespace larmor::test {

// Serves the bytes it was given; throws wire::EndOfStream once they run out, naming how far it got.
class MemoryReader : public wire::ByteReader {
public:
    explicit MemoryReader(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

    void read_exact(void* dst, size_t n) override;

    size_t position() const { return pos_; }
    size_t remaining() const { return bytes_.size() - pos_; }

private:
    std::vector<uint8_t> bytes_;
    size_t pos_ = 0;
};

// Appends everything written to a byte vector.
class MemoryWriter : public wire::ByteWriter {
public:
    void write_all(const void* src, size_t n) override;

    const std::vector<uint8_t>& bytes() const { return bytes_; }
    size_t write_calls() const { return calls_; }

private:
    std::vector<uint8_t> bytes_;
    size_t calls_ = 0;
};

// Blocking ByteReader / ByteWriter over a socket descriptor (not owned), for tests that play
// client or server over real TCP. EndOfStream when the peer closes, std::system_error on errors.
class FdByteReader : public wire::ByteReader {
public:
    explicit FdByteReader(int fd) : fd_(fd) {}
    void read_exact(void* dst, size_t n) override;

private:
    int fd_;
};

class FdByteWriter : public wire::ByteWriter {
public:
    explicit FdByteWriter(int fd) : fd_(fd) {}
    void write_all(const void* src, size_t n) override;

private:
    int fd_;
};

// Decodes exactly one message from bytes and checks nothing is left over (throws std::logic_error).
wire::WireMessage decode_one(const std::vector<uint8_t>& bytes, const wire::Limits& limits = {});

// Decodes every message in bytes until the end.
std::vector<wire::WireMessage> decode_all(const std::vector<uint8_t>& bytes, const wire::Limits& limits = {});

}  // namespace larmor::test
