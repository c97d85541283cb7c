#pragma once
// TCP connection to the server (TLS over it with --tls), and ByteReader / ByteWriter over it for the
// wire codec.
//
// Boost.Asio resolves and connects (with a deadline); after that the two directions are plain
// non-blocking recv/send on the socket's descriptor with poll(), because the client reads on one
// thread while it writes on another, which the kernel allows on one descriptor but an asio socket
// object does not promise. Timeouts count time without traffic in either direction, so a long upload
// does not time out the reader, and a server busy reconstructing after the upload has `timeout` to
// answer.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tls_client.h"
#include "wire/codec.h"

namespace larmor::client {

// No traffic for the whole timeout.
class TimeoutError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Connection {
public:
    // Connects (and completes the TLS handshake when tls.enabled) or throws std::runtime_error naming
    // host, port and reason.
    Connection(const std::string& host, const std::string& port, std::chrono::seconds timeout,
               const TlsOptions& tls = {});
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Reads at least one and at most cap bytes; EndOfStream when the server has closed, TimeoutError,
    // std::system_error.
    size_t read_some(void* dst, size_t cap);
    // Reads exactly n bytes, same errors.
    void read_exact(void* dst, size_t n);
    // Sends all n bytes (TimeoutError, std::system_error).
    void send_all(const void* src, size_t n);
    // Ends both directions now, waking a thread blocked in the other direction.
    void shutdown();

    const std::string& peer() const { return peer_; }
    // "TLSv1.3 TLS_AES_256_GCM_SHA384", or empty for plain TCP.
    const std::string& tls_description() const { return tls_description_; }

private:
    enum class Direction { In, Out };
    void wait(Direction dir);
    void wait(TlsClient::Want want) { wait(want == TlsClient::Want::Write ? Direction::Out : Direction::In); }
    void touch();

    struct Socket;  // the asio objects, kept out of this header
    std::unique_ptr<Socket> socket_;
    std::unique_ptr<TlsClient> tls_;  // null: plain TCP
    std::string tls_description_;
    int fd_ = -1;
    std::string peer_;
    std::chrono::seconds timeout_;
    std::atomic<int64_t> last_traffic_ns_{0};
};

// Buffered reader: the codec reads headers in small pieces, one recv per piece would be wasteful.
class SocketReader : public wire::ByteReader {
public:
    explicit SocketReader(Connection& conn) : conn_(conn), buf_(kBufferBytes) {}
    void read_exact(void* dst, size_t n) override;

private:
    static constexpr size_t kBufferBytes = 256 << 10;
    Connection& conn_;
    std::vector<uint8_t> buf_;
    size_t begin_ = 0, end_ = 0;  // unread bytes are buf_[begin_, end_)
};

// Buffered writer: gathers small messages into one send; flush() at the end of a burst.
class SocketWriter : public wire::ByteWriter {
public:
    explicit SocketWriter(Connection& conn) : conn_(conn) { buf_.reserve(kBufferBytes); }
    void write_all(const void* src, size_t n) override;
    void flush();
    uint64_t bytes_written() const { return total_; }

private:
    static constexpr size_t kBufferBytes = 1 << 20;
    Connection& conn_;
    std::vector<uint8_t> buf_;
    uint64_t total_ = 0;
};

}  // namespace larmor::client
