#include "server/rejection.h"

#include <array>
#include <memory>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "wire/codec.h"

namespace larmor::server {
namespace {

// Owns the socket for the life of the asynchronous exchange (kept alive by the handlers).
class Rejection : public std::enable_shared_from_this<Rejection> {
public:
    Rejection(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket, std::vector<uint8_t> reply,
              std::function<void()> done)
        : socket_(std::move(socket)), timer_(ioc), reply_(std::move(reply)), done_(std::move(done)) {}

    ~Rejection() {
        boost::system::error_code ignored;
        socket_.close(ignored);
        if (done_) done_();
    }

    void start(std::chrono::steady_clock::duration linger) {
        auto self = shared_from_this();
        timer_.expires_after(linger);
        timer_.async_wait([self](const boost::system::error_code& ec) {
            if (ec) return;
            boost::system::error_code ignored;
            self->socket_.cancel(ignored);  // the pending write or read ends; the last handler frees us
        });
        boost::asio::async_write(socket_, boost::asio::buffer(reply_),
                                 [self](const boost::system::error_code& ec, size_t) {
                                     if (ec) return self->finish();
                                     boost::system::error_code ignored;
                                     self->socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
                                     self->drain();
                                 });
    }

private:
    void drain() {
        auto self = shared_from_this();
        // What the client still sends is dropped: every rejection reads into one buffer (they all run on
        // the one thread of `ioc`), so thousands lingering at once cost their sockets and no more.
        static std::array<char, 16384> scratch;
        socket_.async_read_some(boost::asio::buffer(scratch), [self](const boost::system::error_code& ec, size_t) {
            if (ec) return self->finish();  // EOF, reset or the linger deadline
            self->drain();
        });
    }

    void finish() { timer_.cancel(); }

    boost::asio::ip::tcp::socket socket_;
    boost::asio::steady_timer timer_;
    std::vector<uint8_t> reply_;
    std::function<void()> done_;
};

}  // namespace

void reject_connection(boost::asio::io_context& ioc, boost::asio::ip::tcp::socket socket, const std::string& text,
                       std::chrono::steady_clock::duration linger, std::function<void()> done) {
    // Newline-terminated like every TEXT of the server (Gadgetron's clients print TEXT verbatim).
    std::vector<uint8_t> reply = wire::encode(wire::Text{text.empty() || text.back() != '\n' ? text + "\n" : text});
    const std::vector<uint8_t> close = wire::encode(wire::Close{});
    reply.insert(reply.end(), close.begin(), close.end());
    std::make_shared<Rejection>(ioc, std::move(socket), std::move(reply), std::move(done))->start(linger);
}

}  // namespace larmor::server
