#include "tests/support/wire_util.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace larmor::test {

void MemoryReader::read_exact(void* dst, size_t n) {
    if (n > remaining()) {
        // Like a socket: what there is arrives, then the stream ends.
        size_t got = remaining();
        if (got > 0) std::memcpy(dst, bytes_.data() + pos_, got);
        pos_ = bytes_.size();
        throw wire::EndOfStream("end of stream after " + std::to_string(got) + " of " + std::to_string(n) + " bytes");
    }
    if (n > 0) std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
}

void MemoryWriter::write_all(const void* src, size_t n) {
    const auto* b = static_cast<const uint8_t*>(src);
    bytes_.insert(bytes_.end(), b, b + n);
    ++calls_;
}

void FdByteReader::read_exact(void* dst, size_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::read(fd_, p + got, n - got);
        if (r > 0) {
            got += static_cast<size_t>(r);
        } else if (r == 0) {
            throw wire::EndOfStream("peer closed after " + std::to_string(got) + " of " + std::to_string(n) + " bytes");
        } else if (errno != EINTR) {
            throw std::system_error(errno, std::generic_category(), "FdByteReader");
        }
    }
}

void FdByteWriter::write_all(const void* src, size_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    size_t sent = 0;
    while (sent < n) {
        // MSG_NOSIGNAL: a peer that hung up is an error here, not a SIGPIPE that ends the test binary.
        ssize_t r = ::send(fd_, p + sent, n - sent, MSG_NOSIGNAL);
        if (r >= 0) {
            sent += static_cast<size_t>(r);
        } else if (errno != EINTR) {
            throw std::system_error(errno, std::generic_category(), "FdByteWriter");
        }
    }
}

wire::WireMessage decode_one(const std::vector<uint8_t>& bytes, const wire::Limits& limits) {
    MemoryReader in(bytes);
    wire::WireMessage msg = wire::read_message(in, limits);
    if (in.remaining() != 0)
        throw std::logic_error("decode_one: " + std::to_string(in.remaining()) + " bytes left after one message");
    return msg;
}

std::vector<wire::WireMessage> decode_all(const std::vector<uint8_t>& bytes, const wire::Limits& limits) {
    MemoryReader in(bytes);
    std::vector<wire::WireMessage> out;
    while (in.remaining() > 0) out.push_back(wire::read_message(in, limits));
    return out;
}

}  // namespace larmor::test
