#pragma once
// Byte-level I/O of one session's TCP connection, split so that reading and writing never share an
// object: the session thread reads through SocketReader (the asio socket, with a real deadline on
// every read), while images leave from the chain's last gadget thread through SocketWriter (its own
// dup()ed descriptor, one mutex, a write deadline). Asio socket objects are not safe for concurrent
// use from two threads; two descriptors of one kernel socket are.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "wire/codec.h"

namespace larmor::server {

// No byte arrived within the read timeout.
class ReadTimeout : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The socket failed (reset, or shut down by the server itself).
class SocketError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Reads from an asio socket driven by a private io_context, one read at a time, each bounded by
// `timeout` without progress. Buffered, so small header reads do not cost one syscall each.
class SocketReader final : public wire::ByteReader {
public:
    SocketReader(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket& socket,
                 std::chrono::steady_clock::duration timeout);

    // Throws wire::EndOfStream at EOF, ReadTimeout, or SocketError.
    void read_exact(void* dst, size_t n) override;

    // Bytes handed out by read_exact so far (the framing position, not what sits in the buffer).
    uint64_t bytes_read() const { return bytes_read_; }
    std::chrono::steady_clock::duration timeout() const { return timeout_; }

    // Reads and drops whatever the client still sends until its EOF, `max_wait` or `max_bytes`.
    // Called after the reply: closing a socket with unread input makes the kernel send a reset, which
    // can destroy the reply before the client reads it. Never throws.
    void discard_until_eof(std::chrono::steady_clock::duration max_wait, size_t max_bytes) noexcept;

private:
    // One read of at most n bytes; 0 at EOF. Throws ReadTimeout after `timeout` without data.
    size_t read_some(void* dst, size_t n, std::chrono::steady_clock::duration timeout);

    boost::asio::io_context& ioc_;
    boost::asio::ip::tcp::socket& socket_;
    boost::asio::steady_timer timer_;
    std::chrono::steady_clock::duration timeout_;
    std::vector<uint8_t> buffer_;
    size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
    uint64_t bytes_read_ = 0;
};

// Writes whole messages to a dup() of the session's socket. Thread-safe: the session thread
// (responses, errors, CLOSE) and the chain's last gadget thread (images) share it.
class SocketWriter {
public:
    SocketWriter(int socket_fd, std::chrono::steady_clock::duration timeout);
    ~SocketWriter();
    SocketWriter(const SocketWriter&) = delete;
    SocketWriter& operator=(const SocketWriter&) = delete;

    // Writes one encoded message completely. Returns false (and writes nothing) once the writer has
    // failed or was sealed; throws nothing: the first failure is kept in error().
    bool send(const std::vector<uint8_t>& bytes);

    // After the final CLOSE: later sends (late images of an aborted chain) are dropped, so nothing
    // can follow CLOSE on the wire.
    void seal();

    // Half-closes the sending side (FIN after everything written).
    void shutdown_send() noexcept;
    // Makes a blocked reader of the same socket see EOF (server shutdown). Safe from any thread.
    void shutdown_receive() noexcept;
    // Closes this descriptor (the connection ends once the reader's socket is closed too).
    void close() noexcept;

    bool failed() const { return failed_; }
    std::string error() const;
    uint64_t bytes_written() const { return bytes_written_; }

private:
    void write_all(const uint8_t* p, size_t n);  // throws SocketError

    const std::chrono::steady_clock::duration timeout_;
    mutable std::mutex write_mutex_;  // one message at a time on the wire
    std::mutex fd_mutex_;             // fd_ lifetime vs. shutdown_receive() from other threads
    int fd_ = -1;
    bool sealed_ = false;
    std::atomic<bool> failed_{false};
    std::string error_;
    std::atomic<uint64_t> bytes_written_{0};
};

}  // namespace larmor::server
