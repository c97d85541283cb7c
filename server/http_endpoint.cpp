#include "server/http_endpoint.h"

#include <spdlog/spdlog.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <stdexcept>
#include <utility>

namespace larmor::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

constexpr auto kHttpRequestDeadline = std::chrono::seconds(5);
constexpr size_t kHttpHeaderLimit = 8 * 1024;

}  // namespace

struct HttpEndpoint::State : std::enable_shared_from_this<HttpEndpoint::State> {
    State(boost::asio::io_context& ioc, const AccessList& a, HttpHandler h)
        : acceptor(ioc), access(a), handler(std::move(h)) {}
    tcp::acceptor acceptor;
    const AccessList& access;
    HttpHandler handler;
    size_t open = 0;  // connections being served (all on the io_context's one thread)
    bool stopped = false;

    void accept_next();
};

namespace {

// One request and its reply on one connection, then close.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
public:
    HttpConnection(tcp::socket socket, std::shared_ptr<HttpEndpoint::State> state)
        : stream_(std::move(socket)), state_(std::move(state)) {
        ++state_->open;
    }
    ~HttpConnection() { --state_->open; }

    void start() {
        parser_.header_limit(kHttpHeaderLimit);
        parser_.body_limit(0);
        stream_.expires_after(kHttpRequestDeadline);
        http::async_read(stream_, buffer_, parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
    }

private:
    void on_read(beast::error_code ec) {
        if (ec) return;  // closed, too large, too slow: nothing to answer
        const auto& req = parser_.get();
        HttpReply reply;
        if (req.method() != http::verb::get && req.method() != http::verb::head) {
            reply = {405, "text/plain; charset=utf-8", "only GET and HEAD are served here\n"};
        } else {
            try {
                reply = state_->handler(std::string(req.target()));
            } catch (const std::exception& e) {
                spdlog::error("http: {} failed: {}", std::string(req.target()), e.what());
                reply = {500, "text/plain; charset=utf-8", std::string("internal error: ") + e.what() + "\n"};
            }
        }
        response_.version(req.version());
        response_.result(static_cast<unsigned>(reply.status));
        response_.set(http::field::server, "larmor");
        response_.set(http::field::content_type, reply.content_type);
        response_.set(http::field::cache_control, "no-store");
        response_.keep_alive(false);
        const size_t length = reply.body.size();
        if (req.method() != http::verb::head) response_.body() = std::move(reply.body);
        response_.content_length(length);
        stream_.expires_after(kHttpRequestDeadline);
        http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, size_t) {
            beast::error_code ignored;
            self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        });
    }

    beast::tcp_stream stream_;
    beast::flat_buffer buffer_{kHttpHeaderLimit};
    http::request_parser<http::empty_body> parser_;
    http::response<http::string_body> response_;
    std::shared_ptr<HttpEndpoint::State> state_;
};

}  // namespace

void HttpEndpoint::State::accept_next() {
    acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
        if (self->stopped || ec == boost::asio::error::operation_aborted) return;
        if (!ec) {
            beast::error_code peer_ec;
            const auto peer = socket.remote_endpoint(peer_ec);
            if (peer_ec || !self->access.allows(peer.address()) || self->open >= kMaxConnections) {
                socket.close(peer_ec);  // outside --allow, or too many at once: no answer
            } else {
                std::make_shared<HttpConnection>(std::move(socket), self)->start();
            }
        }
        self->accept_next();
    });
}

HttpEndpoint::HttpEndpoint(boost::asio::io_context& ioc, const AccessList& access, HttpHandler handler)
    : state_(std::make_shared<State>(ioc, access, std::move(handler))) {}

HttpEndpoint::~HttpEndpoint() { stop(); }

tcp::endpoint HttpEndpoint::listen(const boost::asio::ip::address& address, unsigned short port) {
    const tcp::endpoint endpoint(address, port);
    beast::error_code ec;
    tcp::acceptor& a = state_->acceptor;
    a.open(endpoint.protocol(), ec);
    if (!ec) a.set_option(boost::asio::socket_base::reuse_address(true), ec);
    if (!ec) a.bind(endpoint, ec);
    if (!ec) a.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw std::runtime_error("cannot listen for HTTP on " + address.to_string() + ":" + std::to_string(port) +
                                 ": " + ec.message());
    state_->accept_next();
    return a.local_endpoint();
}

void HttpEndpoint::stop() {
    if (state_->stopped) return;
    state_->stopped = true;
    beast::error_code ignored;
    state_->acceptor.close(ignored);
}

}  // namespace larmor::server
