#pragma once
// TLS over a session's TCP connection (--tls-cert): the Transport that SocketReader and SocketWriter
// use when the server speaks TLS, so the session code is the same for both.
//
// Why not boost::asio::ssl::stream: a session reads on its own thread while the chain's last gadget
// thread writes images, each blocking with its own deadline (socket_io.h). An asio ssl::stream
// allows that only as asynchronous operations on one strand, which would make the whole session
// asynchronous. Here the OpenSSL object is driven directly on a non-blocking descriptor: every SSL_*
// call is short (it never waits) and runs under one mutex, and the waiting happens outside it in
// poll() with the caller's deadline. One SSL object used by two threads in turn is what OpenSSL
// allows (it is not safe concurrently); renegotiation is off (tls_context.cpp), so after the
// handshake reads only read the socket and writes only write it, and a thread waiting in poll()
// never holds up the other direction.
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "server/socket_io.h"
#include "server/tls_context.h"

typedef struct ssl_st SSL;

namespace larmor::server {

class TlsTransport final : public Transport {
public:
    TlsTransport(boost::asio::ip::tcp::socket socket, std::shared_ptr<TlsContext> context);
    ~TlsTransport() override;

    // The server side of the handshake, bounded by `timeout` in all (a client that connects and
    // stays silent is dropped then). A client that sends plain Gadgetron messages instead of a
    // ClientHello gets a plain-text TEXT + CLOSE saying that this port needs TLS.
    void handshake(std::chrono::steady_clock::duration timeout) override;
    size_t read_some(void* dst, size_t n, std::chrono::steady_clock::duration timeout) override;
    size_t write_some(const uint8_t* src, size_t n, std::chrono::steady_clock::duration timeout) override;
    void shutdown_send() noexcept override;
    void shutdown_receive() noexcept override;
    void close() noexcept override;
    std::string description() const override { return description_; }

private:
    enum class Direction { In, Out };
    // poll() until the descriptor is ready for `d` or `deadline` passes (false).
    bool wait(Direction d, std::chrono::steady_clock::time_point deadline) const;
    // The reply to a plain-TCP client: TEXT + CLOSE in the clear, then its input drained briefly.
    void refuse_plain_client(std::chrono::steady_clock::time_point deadline);
    // After the last reply (TEXT + CLOSE, or a TLS alert): our side shut, the client's input drained
    // until it closes too, for at most a couple of seconds.
    void close_after_reply(std::chrono::steady_clock::time_point deadline);

    struct SslFree {
        void operator()(SSL* ssl) const;
    };

    std::shared_ptr<TlsContext> context_;
    boost::asio::ip::tcp::socket socket_;  // owns the descriptor
    int fd_ = -1;
    std::mutex ssl_mutex_;  // every SSL_* call on ssl_
    std::mutex fd_mutex_;   // the descriptor's lifetime vs. shutdown_receive() from other threads
    std::unique_ptr<SSL, SslFree> ssl_;
    bool established_ = false;
    std::string description_;
};

// The transport a new session's connection gets: TLS when `tls` is set, plain TCP otherwise.
std::unique_ptr<Transport> make_transport(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket,
                                          const std::shared_ptr<TlsContext>& tls);

}  // namespace larmor::server
