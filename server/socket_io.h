#pragma once
// Byte-level I/O of one session's connection. The session thread reads through SocketReader (with a
// real deadline on every read), while images leave from the chain's last gadget thread through
// SocketWriter (one mutex, a write deadline; post() hands a message to the writer's own thread for
// callers that must never wait on the client). Both sit on a Transport: plain TCP (TcpTransport here)
// or TLS over it (server/tls_transport.h), so the session has one code path for both. A Transport
// allows one reader thread and one writer thread at a time.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
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

// The bytes of one connection, whatever carries them.
class Transport {
public:
    virtual ~Transport() = default;

    // Before the first read or write: a TLS handshake bounded by `timeout`; nothing for plain TCP.
    // Throws HandshakeError saying why the client was not admitted.
    virtual void handshake(std::chrono::steady_clock::duration timeout) { (void)timeout; }
    // One read of at most n bytes; 0 at EOF. Throws ReadTimeout after `timeout` without data, or
    // SocketError. Only ever called from one thread (the session's).
    virtual size_t read_some(void* dst, size_t n, std::chrono::steady_clock::duration timeout) = 0;
    // Writes at least one and at most n bytes, waiting `timeout` at most; throws SocketError (a
    // timeout included). May run on another thread than read_some, concurrently with it.
    virtual size_t write_some(const uint8_t* src, size_t n, std::chrono::steady_clock::duration timeout) = 0;
    // Ends the sending side after everything written (TLS: close_notify, then FIN).
    virtual void shutdown_send() noexcept = 0;
    // Makes a blocked read_some see EOF (server shutdown). Safe from any thread.
    virtual void shutdown_receive() noexcept = 0;
    // Closes the connection; no call but close() may follow.
    virtual void close() noexcept = 0;
    // For the log: "TLS 1.3 TLS_AES_256_GCM_SHA384, client CN=scanner1"; empty for plain TCP.
    virtual std::string description() const { return {}; }
};

// The client was not admitted by the transport's handshake (TLS: no or a wrong certificate, plain TCP
// on the TLS port, silence until the handshake timeout).
class HandshakeError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Plain TCP. Reads go through the asio socket driven by the session's private io_context (a real
// deadline on every read); writes through a dup() of its descriptor with poll(): asio socket
// objects are not safe for concurrent use from two threads, two descriptors of one kernel socket are.
class TcpTransport final : public Transport {
public:
    // `socket` must belong to `ioc`, which only the reading thread runs.
    TcpTransport(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket);
    ~TcpTransport() override;

    size_t read_some(void* dst, size_t n, std::chrono::steady_clock::duration timeout) override;
    size_t write_some(const uint8_t* src, size_t n, std::chrono::steady_clock::duration timeout) override;
    void shutdown_send() noexcept override;
    void shutdown_receive() noexcept override;
    void close() noexcept override;

private:
    boost::asio::io_context& ioc_;
    boost::asio::ip::tcp::socket socket_;
    boost::asio::steady_timer timer_;
    std::mutex fd_mutex_;  // write_fd_ lifetime vs. shutdown_receive() from other threads
    int write_fd_ = -1;
};

// "read timeout after 60 s without data from the client" (shared by the transports).
// "3 s", or "1500 ms" where the duration is not whole seconds: how messages state a timeout.
std::string duration_text(std::chrono::steady_clock::duration d);

std::string read_timeout_text(std::chrono::steady_clock::duration timeout);
// "write timeout after 60 s: the client is not reading".
std::string write_timeout_text(std::chrono::steady_clock::duration timeout);

// Reads from a Transport, one read at a time, each bounded by `timeout` without progress. Buffered,
// so small header reads do not cost one syscall each.
class SocketReader final : public wire::ByteReader {
public:
    SocketReader(Transport& transport, std::chrono::steady_clock::duration timeout);

    // Throws wire::EndOfStream at EOF, ReadTimeout, or SocketError.
    void read_exact(void* dst, size_t n) override;

    // Bytes handed out by read_exact so far (the framing position, not what sits in the buffer).
    uint64_t bytes_read() const { return bytes_read_; }
    std::chrono::steady_clock::duration timeout() const { return timeout_; }

    // A deadline no trickle of bytes can move (the per-read timeout restarts at every byte): reads wait
    // at most until `at`, and past it read_exact throws ReadTimeout(`why`). clear_deadline() lifts it.
    void set_deadline(std::chrono::steady_clock::time_point at, std::string why);
    void clear_deadline();
    // A floor on the average rate from now on: whenever the reads have waited `window` in all since the
    // last check, the bytes received meanwhile must be at least bytes_per_second x that time, or
    // read_exact throws ReadTimeout(`why` + what was received). Time the caller spends elsewhere
    // (its chain busy) does not count. 0 bytes per second: no floor.
    void set_min_rate(uint64_t bytes_per_second, std::chrono::steady_clock::duration window, std::string why);

    // Reads and drops whatever the client still sends until its EOF, `max_wait` or `max_bytes`.
    // Called after the reply: closing a socket with unread input makes the kernel send a reset, which
    // can destroy the reply before the client reads it. Never throws.
    void discard_until_eof(std::chrono::steady_clock::duration max_wait, size_t max_bytes) noexcept;

private:
    size_t read_some(void* dst, size_t n);  // one transport read under the timeout, deadline and floor

    Transport& transport_;
    std::chrono::steady_clock::duration timeout_;
    std::vector<uint8_t> buffer_;
    size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
    uint64_t bytes_read_ = 0;
    uint64_t received_ = 0;  // from the transport, buffered bytes included

    bool has_deadline_ = false;
    std::chrono::steady_clock::time_point deadline_;
    std::string deadline_why_;

    uint64_t min_rate_ = 0;
    std::chrono::steady_clock::duration window_{};
    std::chrono::steady_clock::duration window_waited_{};
    uint64_t window_received_ = 0;
    std::string rate_why_;
};

// Writes whole messages to a Transport. Thread-safe: the session thread (responses, errors, CLOSE)
// and the chain's last gadget thread (images) share it.
class SocketWriter {
public:
    SocketWriter(Transport& transport, std::chrono::steady_clock::duration timeout);
    ~SocketWriter();
    SocketWriter(const SocketWriter&) = delete;
    SocketWriter& operator=(const SocketWriter&) = delete;

    // Writes one encoded message completely. Returns false (and writes nothing) once the writer has
    // failed or was sealed; throws nothing: the first failure is kept in error(). Waits first until
    // every message posted before the call is on the wire, so a thread's posts and sends leave in
    // the order it made them.
    bool send(const std::vector<uint8_t>& bytes);
    // send(), then seal() in the same step: nothing posted or sent from another thread meanwhile can
    // follow this message (the final CLOSE) on the wire.
    bool send_last(const std::vector<uint8_t>& bytes);

    // Queues one encoded message for the writer's own thread (started on the first post) and returns
    // at once, in order with earlier posts. For errors the session must tell its client now from a
    // thread that must not wait on a client that does not read: the session's reader (a client that
    // uploads without reading would stall its own upload) and gadget threads (they hold the chain).
    // The write is bounded by the write timeout like any other; its failure shows in failed().
    // Returns false when nothing was queued: the writer failed, was sealed or closed, or its thread
    // could not be started (the caller then sends the message later itself).
    bool post(std::vector<uint8_t> bytes);

    // After the final CLOSE: later sends (late images of an aborted chain) are dropped, so nothing
    // can follow CLOSE on the wire.
    void seal();

    // Half-closes the sending side (FIN after everything written).
    void shutdown_send() noexcept;
    // Makes a blocked reader of the same socket see EOF (server shutdown). Safe from any thread.
    void shutdown_receive() noexcept;
    // Closes the connection (the transport); later sends are dropped.
    void close() noexcept;

    bool failed() const { return failed_; }
    std::string error() const;
    uint64_t bytes_written() const { return bytes_written_; }

private:
    void write_all(const uint8_t* p, size_t n);  // throws SocketError
    bool write_message(const std::vector<uint8_t>& bytes, bool seal_after);
    void wait_posted();    // until everything posted so far has been written (or dropped)
    void drain_posted();   // the posting thread
    void stop_posting() noexcept;

    Transport& transport_;
    const std::chrono::steady_clock::duration timeout_;
    mutable std::mutex write_mutex_;  // one message at a time on the wire
    // Written under write_mutex_; atomic so post() can refuse early without taking write_mutex_,
    // which a write to a client that does not read may hold for up to the write timeout.
    std::atomic<bool> sealed_{false};
    std::atomic<bool> closed_{false};

    std::mutex post_mutex_;  // posted_, posting_, stopping_, poster_ (never held while writing)
    std::condition_variable post_cv_;  // posted_ got an item, or stopping_
    std::condition_variable idle_cv_;  // posted_ empty and nothing in flight
    std::deque<std::vector<uint8_t>> posted_;
    bool posting_ = false;   // the posting thread is writing a message it took from posted_
    bool stopping_ = false;  // close(): the posting thread drops what is left and ends
    std::thread poster_;
    std::atomic<bool> failed_{false};
    std::string error_;
    std::atomic<uint64_t> bytes_written_{0};
};

}  // namespace larmor::server
